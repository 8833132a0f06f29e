/* fuzz_trace.c: fuzz target for the .pft reader (common/trace.c). Built three ways:
 *   - by scripts/fuzz.sh with clang -fsanitize=fuzzer,address,undefined: libFuzzer's main;
 *   - with -DPP_FUZZ_STANDALONE (tests/CMakeLists.txt, any compiler): a driver that writes seed
 *     traces (--seeds DIR), replays files (FILE...), or runs a deterministic mutation sweep over
 *     the seeds (--selftest N, a CTest regression test).
 * Every input is read twice: as given (checksums reject most mutations, exercising resync), and
 * with its checksums repaired (so mutated records reach the record parser). */
#include "fuzz_common.h"
#include "pp_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile uint64_t sink; /* keeps the reads of touch() from being optimised away */

/* Reads every byte the trace hands out, so ASan sees any pointer that is off. */
static void touch(const pp_trace *t)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < t->n_events; i++) {
        const pp_trace_event *e = &t->events[i];
        sum += e->ts + e->type + strlen(e->message);
        for (uint32_t k = 0; k < e->ext_bytes; k++)
            sum += e->ext[k];
        const char *n = pp_trace_domain_name(t, e->domain);
        sum += n ? strlen(n) : 0;
        n = pp_trace_category_name(t, e->domain, e->category);
        sum += n ? strlen(n) : 0;
        n = pp_trace_thread_name(t, e->tid);
        sum += n ? strlen(n) : 0;
        const pp_trace_schema *s = pp_trace_schema_find(t, e->schema_id);
        sum += s ? s->n_fields : 0;
    }
    for (size_t i = 0; i < t->n_domains; i++)
        sum += strlen(t->domains[i].name);
    for (size_t i = 0; i < t->n_categories; i++)
        sum += strlen(t->categories[i].name);
    for (size_t i = 0; i < t->n_threads; i++)
        sum += strlen(t->threads[i].name);
    for (size_t i = 0; i < t->n_schemas; i++) {
        sum += strlen(t->schemas[i].name);
        for (uint32_t k = 0; k < t->schemas[i].n_fields; k++)
            sum += strlen(t->schemas[i].fields[k].name) + t->schemas[i].fields[k].type;
    }
    sum += strlen(t->damage.first_problem);
    sink += sum;
}

/* Loads through both readers and checks they agree on the damage. */
static void run_one(const uint8_t *data, size_t size)
{
    pp_trace *t = NULL;
    if (pp_trace_load_mem(data, size, &t) != PP_OK) {
        if (t)
            abort(); /* a failed load hands out nothing */
        return;
    }
    touch(t);
    if (t->damage.blocks_ok + t->damage.blocks_unknown > size / 32 ||
        t->damage.bytes_skipped > size || !t->damage.header_ok)
        abort();

    pp_trace_reader *r = NULL;
    if (pp_trace_reader_open_mem(data, size, &r) != PP_OK)
        abort(); /* the loader accepted the header */
    uint64_t blocks = 0;
    for (;;) {
        pp_trace_block b;
        bool got = false;
        if (pp_trace_reader_next(r, &b, &got) != PP_OK)
            abort();
        if (!got)
            break;
        if (b.offset + 32 + b.h.payload_bytes > size)
            abort();
        blocks++;
    }
    const pp_trace_damage *d = pp_trace_reader_damage(r);
    if (blocks != t->damage.blocks_ok || d->blocks_bad != t->damage.blocks_bad ||
        d->bytes_skipped != t->damage.bytes_skipped || d->truncated != t->damage.truncated)
        abort();
    pp_trace_reader_close(r);
    pp_trace_free(t);
}


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy: the reader must not depend on bytes past `size` or on the input's
     * alignment, and the repair pass needs a writable buffer. The +1 offset misaligns it. */
    uint8_t *copy = calloc(size + 1, 1);
    if (!copy)
        return 0;
    if (size)
        memcpy(copy + 1, data, size);
    run_one(copy + 1, size);
    pp_trace_repair_checksums(copy + 1, size);
    run_one(copy + 1, size);
    free(copy);
    return 0;
}

#ifdef PP_FUZZ_STANDALONE
/* ======================================================================================== */
/* Standalone driver: seeds, replay, deterministic mutation sweep.                           */
/* ======================================================================================== */

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct recs {
    uint8_t b[16384];
    size_t n;
    uint32_t count;
} recs;

static void put(recs *r, const void *rec, size_t size)
{
    if (r->n + size > sizeof r->b)
        abort();
    memcpy(r->b + r->n, rec, size);
    r->n += size;
    r->count++;
}

static void put_string(recs *r, uint32_t id, const char *s)
{
    r->n += pp_trace_enc_string(r->b + r->n, sizeof r->b - r->n, id, s, strlen(s));
    r->count++;
}

static void put_range(recs *r, uint16_t type, uint32_t tid, uint64_t ts, uint32_t domain,
                      uint32_t message, uint64_t range_id)
{
    pp_rec_range x = {.h = {.type = type, .size = sizeof x, .tid = tid, .ts = ts},
                      .domain = domain, .message = message, .category = 1,
                      .payload_type = 1, .payload = ts, .range_id = range_id};
    put(r, &x, sizeof x);
}

static int check(pp_status st)
{
    if (st != PP_OK) {
        fprintf(stderr, "fuzz_trace: %s\n", pp_error_message());
        exit(2);
    }
    return 0;
}

/* Seed `which` (0..2) written to path: 0 a full trace, 1 events only cut mid-block,
 * 2 one with an unknown record type and an unknown block kind. */
static void write_seed(const char *path, int which)
{
    pp_trace_header h;
    memset(&h, 0, sizeof h);
    h.pid = 100 + (uint32_t)which;
    h.rank = which;
    snprintf(h.host, sizeof h.host, "seed");
    pp_trace_writer *w = NULL;
    check(pp_trace_writer_open(path, &h, &w));
    recs r = {0};
    if (which != 1) {
        const char *names[] = {"forward", "backward", "pipeprof", "compute", "main", "sched",
                               "mb"};
        for (uint32_t i = 0; i < 7; i++)
            put_string(&r, i + 1, names[i]);
        pp_rec_domain d = {.h = {.type = PP_REC_DOMAIN, .size = 24}, .id = 1, .name = 3};
        put(&r, &d, sizeof d);
        pp_rec_category c = {.h = {.type = PP_REC_CATEGORY, .size = 32}, .domain = 1,
                             .category = 1, .name = 4};
        put(&r, &c, sizeof c);
        pp_rec_thread_name tn = {.h = {.type = PP_REC_THREAD_NAME, .size = 24, .tid = 11},
                                 .os_tid = 11, .name = 5};
        put(&r, &tn, sizeof tn);
        uint8_t sb[40 + 2 * 24];
        pp_rec_schema s = {.h = {.type = PP_REC_SCHEMA, .size = sizeof sb}, .schema_id = 9,
                           .domain = 1, .name = 6, .n_entries = 2, .static_size = 8};
        pp_rec_schema_entry e[2] = {{.type = 4, .offset = 0, .name = 7},
                                    {.type = 4, .offset = 4, .name = 2}};
        memcpy(sb, &s, sizeof s);
        memcpy(sb + sizeof s, e, sizeof e);
        put(&r, sb, sizeof sb);
        /* a counter (memory by the counters extension, issue 17) */
        pp_rec_counter_def cd = {.h = {.type = PP_REC_COUNTER_DEF, .size = 40}, .counter_id = 1,
                                 .domain = 1, .name = 4, .unit = 5, .schema = 2};
        put(&r, &cd, sizeof cd);
        check(pp_trace_writer_block(w, PP_BLOCK_META, 0, r.b, r.n, r.count));
    }
    for (uint32_t blk = 0; blk < 3; blk++) {
        r = (recs){0};
        uint32_t tid = 11 + blk % 2;
        for (uint64_t i = 0; i < 4; i++) {
            uint64_t ts = blk * 100 + i * 10;
            put_range(&r, PP_REC_PUSH, tid, ts, 1, 1 + (uint32_t)(i % 2), 0);
            if (i == 1) {
                uint8_t payload[8] = {1, 0, 0, 0, 2, 0, 0, 0};
                r.n += pp_trace_enc_ext(r.b + r.n, sizeof r.b - r.n, tid, ts, 9, payload, 8);
                r.count++;
            }
            pp_rec_pop p = {.h = {.type = PP_REC_POP, .size = 24, .tid = tid, .ts = ts + 5},
                            .domain = 1};
            put(&r, &p, sizeof p);
        }
        put_range(&r, PP_REC_START, tid, blk * 100 + 50, 0, 2, 1 + blk);
        pp_rec_end e = {.h = {.type = PP_REC_END, .size = 24, .tid = tid, .ts = blk * 100 + 60},
                        .range_id = 1 + blk};
        put(&r, &e, sizeof e);
        if (which == 0 && blk == 0) { /* counter samples and memory-extension calls */
            pp_rec_counter cs = {.h = {.type = PP_REC_COUNTER, .size = 40, .tid = tid, .ts = 70},
                                 .counter_id = 1, .domain = 1, .kind = PP_COUNTER_INT64,
                                 .value = 4096};
            put(&r, &cs, sizeof cs);
            pp_rec_mem m = {.h = {.type = PP_REC_MEM, .size = 56, .tid = tid, .ts = 75},
                            .op = PP_MEM_REGION_REGISTER, .domain = 1, .heap = 1,
                            .addr = 0x1000, .bytes = 64};
            put(&r, &m, sizeof m);
            pp_rec_gpu_mem g = {.h = {.type = PP_REC_GPU_MEM, .size = 56, .tid = tid},
                                .op = PP_GPU_MEM_ALLOC, .memory_kind = 3, .device = 1,
                                .address = 0x7f0000000000, .bytes = 1 << 20, .ts = 78};
            put(&r, &g, sizeof g);
        }
        if (which == 2 && blk == 1) {
            uint8_t unk[32] = {0};
            pp_rec_header uh = {.type = 77, .size = 32, .tid = tid};
            memcpy(unk, &uh, sizeof uh);
            put(&r, unk, sizeof unk);
        }
        check(pp_trace_writer_block(w, PP_BLOCK_EVENTS, tid, r.b, r.n, r.count));
    }
    if (which != 1) {
        pp_rec_footer f = {.h = {.ts = 999}, .events = 30, .threads = 2};
        check(pp_trace_writer_footer(w, &f));
    }
    pp_trace_writer_close(w);
    if (which == 2) {
        /* An intact block of a kind this reader does not know, appended by hand. */
        uint8_t blob[32 + 16] = {0};
        pp_trace_block_header bh = {.kind = 99, .payload_bytes = 16, .n_records = 1, .seq = 5};
        memcpy(bh.magic, PP_TRACE_BLOCK_MAGIC, 4);
        memcpy(blob + 32, "future records!!", 16);
        bh.crc = pp_crc32c(pp_crc32c(0, &bh, 28), blob + 32, 16);
        memcpy(blob, &bh, sizeof bh);
        FILE *f = fopen(path, "ab");
        if (!f || fwrite(blob, sizeof blob, 1, f) != 1)
            exit(2);
        fclose(f);
    }
    if (which == 1) {
        /* Cut inside the last block, as a killed process leaves it. */
        struct stat st;
        if (stat(path, &st) != 0 || truncate(path, st.st_size - 20) != 0)
            exit(2);
    }
}

enum { N_SEEDS = 3 };

static void write_seeds(const char *dir)
{
    for (int i = 0; i < N_SEEDS; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/seed%d.pft", dir, i);
        unlink(path); /* the writer never overwrites */
        write_seed(path, i);
    }
}

/* One deterministic mutation of `in` into out (capacity cap); returns the new length. */
static size_t mutate(pp_rng *g, const uint8_t *in, size_t len, uint8_t *out, size_t cap)
{
    memcpy(out, in, len);
    size_t n = len;
    int steps = 1 + (int)pp_rng_below(g, 4);
    for (int s = 0; s < steps && n > 0; s++) {
        size_t at = (size_t)pp_rng_below(g, n);
        switch (pp_rng_below(g, 7)) {
        case 0: /* flip a bit */
            out[at] ^= (uint8_t)(1u << pp_rng_below(g, 8));
            break;
        case 1: { /* an interesting 32-bit value at an aligned spot */
            static const uint32_t vals[] = {0, 1, 7, 8, 16, 0xFFFF, 0x10000, 0x7FFFFFFF,
                                            0xFFFFFFFF, 64u << 20, (64u << 20) + 8};
            at &= ~(size_t)3;
            if (at + 4 <= n) {
                uint32_t v = vals[pp_rng_below(g, sizeof vals / sizeof vals[0])];
                memcpy(out + at, &v, 4);
            }
            break;
        }
        case 2: /* a 16-bit record size */
            at &= ~(size_t)7;
            if (at + 4 <= n) {
                uint16_t v = (uint16_t)(pp_rng_below(g, 9) * 8);
                memcpy(out + at + 2, &v, 2);
            }
            break;
        case 3: /* truncate */
            n = at;
            break;
        case 4: { /* insert random bytes */
            size_t k = 1 + (size_t)pp_rng_below(g, 64);
            if (n + k <= cap) {
                memmove(out + at + k, out + at, n - at);
                for (size_t i = 0; i < k; i++)
                    out[at + i] = (uint8_t)pp_rng_u64(g);
                n += k;
            }
            break;
        }
        case 5: { /* duplicate a slice elsewhere */
            size_t from = (size_t)pp_rng_below(g, n);
            size_t k = 1 + (size_t)pp_rng_below(g, 256);
            if (from + k > n)
                k = n - from;
            if (n + k <= cap) {
                memmove(out + at + k, out + at, n - at);
                memmove(out + at, out + (from < at ? from : from + k), k);
                n += k;
            }
            break;
        }
        default: /* delete a slice */ {
            size_t k = 1 + (size_t)pp_rng_below(g, 128);
            if (at + k > n)
                k = n - at;
            memmove(out + at, out + at + k, n - at - k);
            n -= k;
            break;
        }
        }
    }
    return n;
}

static int selftest(long iters)
{
    char dir[] = "/tmp/pp_fuzz_XXXXXX";
    if (!mkdtemp(dir))
        return 2;
    write_seeds(dir);
    uint8_t *seeds[N_SEEDS];
    size_t lens[N_SEEDS];
    for (int i = 0; i < N_SEEDS; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/seed%d.pft", dir, i);
        char *d = NULL;
        check(pp_read_file(path, &d, &lens[i]));
        seeds[i] = (uint8_t *)d;
        LLVMFuzzerTestOneInput(seeds[i], lens[i]);
        unlink(path);
    }
    rmdir(dir);
    size_t cap = 1 << 16;
    uint8_t *buf = malloc(cap);
    pp_rng g;
    pp_rng_seed(&g, 20240601);
    for (long i = 0; i < iters; i++) {
        int s = (int)(i % N_SEEDS);
        size_t n = mutate(&g, seeds[s], lens[s], buf, cap);
        LLVMFuzzerTestOneInput(buf, n);
    }
    printf("fuzz_trace: %ld deterministic mutations of %d seeds read without fault\n", iters,
           N_SEEDS);
    free(buf);
    for (int i = 0; i < N_SEEDS; i++)
        free(seeds[i]);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--seeds") == 0) {
        write_seeds(argv[2]);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--selftest") == 0)
        return selftest(strtol(argv[2], NULL, 10));
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz_trace --seeds DIR | --selftest N | FILE...\n");
        return 2;
    }
    return fz_replay("fuzz_trace", argv + 1, argc - 1);
}
#endif
