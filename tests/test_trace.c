/* test_trace.c: the .pft trace format (common/trace.c): what the writer puts down reads back
 * exactly, and a damaged file (cut short, bit flips, garbage, unknown kinds, a killed writer)
 * never crashes the reader, which recovers every intact block and reports what it skipped. */
#include "pp_trace.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- fixture: a fresh temporary directory per test ---- */

static char tmpdir[64];

static void tmp_setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/pp_trace_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void tmp_teardown(void)
{
    DIR *d = opendir(tmpdir);
    if (!d)
        return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(tmpdir);
}

TestSuite(trace, .init = tmp_setup, .fini = tmp_teardown);

static const char *tmp_path(const char *name)
{
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    return p;
}

/* ---- record building ---- */

typedef struct recs {
    uint8_t b[8192];
    size_t n;
    uint32_t count;
} recs;

static void put(recs *r, const void *rec, size_t size)
{
    cr_assert_leq(r->n + size, sizeof r->b);
    memcpy(r->b + r->n, rec, size);
    r->n += size;
    r->count++;
}

static pp_rec_header rh(uint16_t type, uint16_t size, uint32_t tid, uint64_t ts)
{
    pp_rec_header h = {.type = type, .size = size, .tid = tid, .ts = ts};
    return h;
}

static void put_range(recs *r, uint16_t type, uint32_t tid, uint64_t ts, uint32_t domain,
                      uint32_t message, uint32_t category, uint32_t color, uint32_t ptype,
                      uint64_t payload, uint64_t range_id)
{
    pp_rec_range x = {.h = rh(type, sizeof x, tid, ts), .domain = domain, .message = message,
                      .category = category, .color = color, .payload_type = ptype,
                      .payload = payload, .range_id = range_id};
    put(r, &x, sizeof x);
}

static void put_pop(recs *r, uint32_t tid, uint64_t ts, uint32_t domain)
{
    pp_rec_pop x = {.h = rh(PP_REC_POP, sizeof x, tid, ts), .domain = domain};
    put(r, &x, sizeof x);
}

static void put_end(recs *r, uint32_t tid, uint64_t ts, uint64_t range_id)
{
    pp_rec_end x = {.h = rh(PP_REC_END, sizeof x, tid, ts), .range_id = range_id};
    put(r, &x, sizeof x);
}

static void put_ext(recs *r, uint32_t tid, uint64_t ts, uint64_t schema, const void *d,
                    uint32_t n)
{
    size_t k = pp_trace_enc_ext(r->b + r->n, sizeof r->b - r->n, tid, ts, schema, d, n);
    cr_assert_gt(k, 0);
    r->n += k;
    r->count++;
}

static void put_string(recs *r, uint32_t id, const char *s)
{
    size_t k = pp_trace_enc_string(r->b + r->n, sizeof r->b - r->n, id, s, strlen(s));
    cr_assert_gt(k, 0);
    r->n += k;
    r->count++;
}

static void put_domain(recs *r, uint32_t id, uint32_t name)
{
    pp_rec_domain x = {.h = rh(PP_REC_DOMAIN, sizeof x, 1, 0), .id = id, .name = name};
    put(r, &x, sizeof x);
}

static void put_category(recs *r, uint32_t domain, uint32_t cat, uint32_t name)
{
    pp_rec_category x = {.h = rh(PP_REC_CATEGORY, sizeof x, 1, 0), .domain = domain,
                         .category = cat, .name = name};
    put(r, &x, sizeof x);
}

static void put_thread(recs *r, uint32_t tid, uint32_t name)
{
    pp_rec_thread_name x = {.h = rh(PP_REC_THREAD_NAME, sizeof x, tid, 0), .os_tid = tid,
                            .name = name};
    put(r, &x, sizeof x);
}

static void put_schema(recs *r, uint64_t id, uint32_t domain, uint32_t name, uint32_t size,
                       const pp_rec_schema_entry *e, uint32_t n)
{
    uint8_t buf[512];
    pp_rec_schema x = {.h = rh(PP_REC_SCHEMA, (uint16_t)(sizeof x + n * sizeof *e), 1, 0),
                       .schema_id = id, .domain = domain, .name = name, .n_entries = n,
                       .static_size = size};
    memcpy(buf, &x, sizeof x);
    memcpy(buf + sizeof x, e, n * sizeof *e);
    put(r, buf, sizeof x + n * sizeof *e);
}

static pp_trace_header sample_header(void)
{
    pp_trace_header h;
    memset(&h, 0, sizeof h);
    h.pid = 4242;
    h.rank = 3;
    h.mono_ns = 1000;
    h.real_ns = 1700000000000000000ull;
    h.clock_offset_ns = -5;
    h.clock_drift = 1e-6;
    snprintf(h.host, sizeof h.host, "node07");
    snprintf(h.exe, sizeof h.exe, "pptrain");
    return h;
}

/* ---- the sample trace: where its blocks lie and what they hold ---- */

enum { T_A = 1001, T_B = 1002, SCHEMA_ID = 0x10000 };
enum { NBLK = 5 };

typedef struct layout {
    size_t off[NBLK], size[NBLK]; /* header + payload */
    size_t events[NBLK];
    size_t file_bytes;
    size_t total_events;
} layout;

static const uint8_t ext1[8] = {3, 0, 0, 0, 1, 0, 0, 0};
static const uint8_t ext2[5] = {9, 8, 7, 6, 5};

/* Writes the sample trace: meta, three events blocks of two threads, footer. */
static void write_sample(const char *path, layout *L)
{
    pp_trace_header h = sample_header();
    pp_trace_writer *w = NULL;
    cr_assert_eq(pp_trace_writer_open(path, &h, &w), PP_OK, "%s", pp_error_message());

    recs r = {0};
    const char *strs[] = {"forward", "backward", "pipeprof", "nccl", "compute", "comm",
                          "stage0-main", "stage0-sender", "mb_info", "microbatch", "stage"};
    for (uint32_t i = 0; i < 11; i++)
        put_string(&r, i + 1, strs[i]);
    put_domain(&r, 1, 3);
    put_domain(&r, 2, 4);
    put_category(&r, 1, 1, 5);
    put_category(&r, 2, 1, 6);
    put_thread(&r, T_A, 7);
    put_thread(&r, T_B, 8);
    pp_rec_schema_entry ent[2] = {{.type = 4, .offset = 0, .name = 10},
                                  {.type = 4, .offset = 4, .name = 11}};
    put_schema(&r, SCHEMA_ID, 1, 9, 8, ent, 2);
    size_t sizes[NBLK], evs[NBLK] = {0, 4, 3, 2, 0};
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_META, 0, r.b, r.n, r.count), PP_OK, "%s",
                 pp_error_message());
    sizes[0] = r.n;

    r = (recs){0};
    put_range(&r, PP_REC_PUSH, T_A, 100, 1, 1, 1, 0xff00ff00u, 1, 7, 0);
    put_ext(&r, T_A, 100, SCHEMA_ID, ext1, sizeof ext1);
    put_range(&r, PP_REC_MARK, T_A, 150, 1, 11, 0, 0, 0, 0, 0);
    put_pop(&r, T_A, 200, 1);
    put_range(&r, PP_REC_START, T_A, 210, 0, 2, 0, 0, 3, 0x4000000000000000ull, 42);
    put_ext(&r, T_A, 210, 77, ext2, sizeof ext2);
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, T_A, r.b, r.n, r.count), PP_OK);
    sizes[1] = r.n;

    r = (recs){0};
    put_range(&r, PP_REC_PUSH, T_B, 120, 2, 2, 1, 0, 0, 0, 0);
    put_pop(&r, T_B, 300, 2);
    put_end(&r, T_B, 310, 42);
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, T_B, r.b, r.n, r.count), PP_OK);
    sizes[2] = r.n;

    r = (recs){0};
    put_range(&r, PP_REC_PUSH, T_A, 400, 1, 1, 0, 0, 0, 0, 0);
    put_pop(&r, T_A, 500, 1);
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, T_A, r.b, r.n, r.count), PP_OK);
    sizes[3] = r.n;

    cr_assert_eq(pp_trace_writer_blocks(w), 4u);
    pp_rec_footer f = {.h = {.ts = 600}, .real_ns = 1700000000000000600ull, .events = 9,
                       .dropped = 2, .filtered = 1, .threads = 2};
    cr_assert_eq(pp_trace_writer_footer(w, &f), PP_OK);
    sizes[4] = sizeof(pp_rec_footer);
    cr_assert_eq(pp_trace_writer_blocks(w), 5u);
    pp_trace_writer_close(w);

    if (L) {
        size_t off = sizeof(pp_trace_header);
        L->total_events = 0;
        for (int i = 0; i < NBLK; i++) {
            L->off[i] = off;
            L->size[i] = sizeof(pp_trace_block_header) + sizes[i];
            L->events[i] = evs[i];
            L->total_events += evs[i];
            off += L->size[i];
        }
        L->file_bytes = off;
    }
}

static uint8_t *slurp(const char *path, size_t *len)
{
    char *d = NULL;
    cr_assert_eq(pp_read_file(path, &d, len), PP_OK, "%s", pp_error_message());
    return (uint8_t *)d;
}

static void spill(const char *path, const void *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(d, 1, n, f), n);
    fclose(f);
}

/* Reads every byte the trace hands out, so the sanitizers see any bad pointer. */
static uint64_t touch(const pp_trace *t)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < t->n_events; i++) {
        const pp_trace_event *e = &t->events[i];
        sum += e->ts + strlen(e->message);
        for (uint32_t k = 0; k < e->ext_bytes; k++)
            sum += e->ext[k];
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
            sum += strlen(t->schemas[i].fields[k].name) + t->schemas[i].fields[k].offset;
    }
    return sum;
}

/* Events that lie in blocks [0, nblk) except `skip` (-1 = none). */
static size_t events_in(const layout *L, int nblk, int skip)
{
    size_t n = 0;
    for (int i = 0; i < nblk; i++)
        if (i != skip)
            n += L->events[i];
    return n;
}

/* ======================================================================================== */

Test(trace, round_trip_restores_everything)
{
    const char *path = tmp_path("a.pft");
    layout L;
    write_sample(path, &L);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    cr_assert_eq((size_t)sb.st_size, L.file_bytes);

    pp_trace *t = NULL;
    cr_assert_eq(pp_trace_load(path, &t), PP_OK, "%s", pp_error_message());
    pp_trace_header h = sample_header();
    cr_assert_eq(memcmp(t->header.magic, "PPFT", 4), 0);
    cr_assert_eq(t->header.version, 1);
    cr_assert_eq(t->header.header_bytes, 256);
    cr_assert_eq(t->header.pid, h.pid);
    cr_assert_eq(t->header.rank, h.rank);
    cr_assert_eq(t->header.mono_ns, h.mono_ns);
    cr_assert_eq(t->header.real_ns, h.real_ns);
    cr_assert_eq(t->header.clock_offset_ns, h.clock_offset_ns);
    cr_assert_eq(t->header.clock_drift, h.clock_drift);
    cr_assert_str_eq(t->header.host, "node07");
    cr_assert_str_eq(t->header.exe, "pptrain");

    /* No damage. */
    const pp_trace_damage *d = &t->damage;
    cr_assert_eq(d->blocks_ok, 5u);
    cr_assert_eq(d->blocks_bad, 0u);
    cr_assert_eq(d->blocks_unknown, 0u);
    cr_assert_eq(d->bytes_skipped, 0u);
    cr_assert_eq(d->records_unknown, 0u);
    cr_assert(d->header_ok);
    cr_assert_not(d->truncated);
    cr_assert(d->has_footer);
    cr_assert_str_eq(d->first_problem, "");

    cr_assert_eq(t->footer.h.type, PP_REC_FOOTER);
    cr_assert_eq(t->footer.h.ts, 600u);
    cr_assert_eq(t->footer.real_ns, 1700000000000000600ull);
    cr_assert_eq(t->footer.events, 9u);
    cr_assert_eq(t->footer.dropped, 2u);
    cr_assert_eq(t->footer.filtered, 1u);
    cr_assert_eq(t->footer.blocks, 4u); /* filled in by the writer */
    cr_assert_eq(t->footer.threads, 2u);

    /* Events in file order, strings resolved, ext payloads attached. */
    struct {
        uint16_t type;
        uint32_t tid;
        uint64_t ts;
        uint32_t domain;
        const char *msg;
        uint32_t category, color, ptype;
        uint64_t payload, range_id, schema;
        const uint8_t *ext;
        uint32_t ext_bytes;
    } want[] = {
        {PP_REC_PUSH, T_A, 100, 1, "forward", 1, 0xff00ff00u, 1, 7, 0, SCHEMA_ID, ext1, 8},
        {PP_REC_MARK, T_A, 150, 1, "stage", 0, 0, 0, 0, 0, 0, NULL, 0},
        {PP_REC_POP, T_A, 200, 1, "", 0, 0, 0, 0, 0, 0, NULL, 0},
        {PP_REC_START, T_A, 210, 0, "backward", 0, 0, 3, 0x4000000000000000ull, 42, 77, ext2, 5},
        {PP_REC_PUSH, T_B, 120, 2, "backward", 1, 0, 0, 0, 0, 0, NULL, 0},
        {PP_REC_POP, T_B, 300, 2, "", 0, 0, 0, 0, 0, 0, NULL, 0},
        {PP_REC_END, T_B, 310, 0, "", 0, 0, 0, 0, 42, 0, NULL, 0},
        {PP_REC_PUSH, T_A, 400, 1, "forward", 0, 0, 0, 0, 0, 0, NULL, 0},
        {PP_REC_POP, T_A, 500, 1, "", 0, 0, 0, 0, 0, 0, NULL, 0},
    };
    size_t nw = sizeof want / sizeof want[0];
    cr_assert_eq(t->n_events, nw);
    cr_assert_eq(L.total_events, nw);
    for (size_t i = 0; i < nw; i++) {
        const pp_trace_event *e = &t->events[i];
        cr_assert_eq(e->type, want[i].type, "event %zu", i);
        cr_assert_eq(e->tid, want[i].tid, "event %zu", i);
        cr_assert_eq(e->ts, want[i].ts, "event %zu", i);
        cr_assert_eq(e->domain, want[i].domain, "event %zu", i);
        cr_assert_str_eq(e->message, want[i].msg, "event %zu", i);
        cr_assert_eq(e->category, want[i].category, "event %zu", i);
        cr_assert_eq(e->color, want[i].color, "event %zu", i);
        cr_assert_eq(e->payload_type, want[i].ptype, "event %zu", i);
        cr_assert_eq(e->payload, want[i].payload, "event %zu", i);
        cr_assert_eq(e->range_id, want[i].range_id, "event %zu", i);
        cr_assert_eq(e->schema_id, want[i].schema, "event %zu", i);
        cr_assert_eq(e->ext_bytes, want[i].ext_bytes, "event %zu", i);
        if (want[i].ext)
            cr_assert_eq(memcmp(e->ext, want[i].ext, want[i].ext_bytes), 0, "event %zu", i);
        else
            cr_assert_null(e->ext, "event %zu", i);
    }

    /* Definitions and lookups. */
    cr_assert_eq(t->n_domains, 2u);
    cr_assert_str_eq(pp_trace_domain_name(t, 1), "pipeprof");
    cr_assert_str_eq(pp_trace_domain_name(t, 2), "nccl");
    cr_assert_null(pp_trace_domain_name(t, 3));
    cr_assert_eq(t->n_categories, 2u);
    cr_assert_str_eq(pp_trace_category_name(t, 1, 1), "compute");
    cr_assert_str_eq(pp_trace_category_name(t, 2, 1), "comm");
    cr_assert_null(pp_trace_category_name(t, 1, 2));
    cr_assert_eq(t->n_threads, 2u);
    cr_assert_str_eq(pp_trace_thread_name(t, T_A), "stage0-main");
    cr_assert_str_eq(pp_trace_thread_name(t, T_B), "stage0-sender");
    cr_assert_null(pp_trace_thread_name(t, 7));
    cr_assert_eq(t->n_schemas, 1u);
    const pp_trace_schema *s = pp_trace_schema_find(t, SCHEMA_ID);
    cr_assert_not_null(s);
    cr_assert_null(pp_trace_schema_find(t, 77));
    cr_assert_eq(s->domain, 1u);
    cr_assert_str_eq(s->name, "mb_info");
    cr_assert_eq(s->static_size, 8u);
    cr_assert_eq(s->n_fields, 2u);
    cr_assert_str_eq(s->fields[0].name, "microbatch");
    cr_assert_eq(s->fields[0].type, 4u);
    cr_assert_eq(s->fields[0].offset, 0u);
    cr_assert_str_eq(s->fields[1].name, "stage");
    cr_assert_eq(s->fields[1].offset, 4u);
    touch(t);
    pp_trace_free(t);
    pp_trace_free(NULL);

    /* The in-memory reader gives the same. */
    size_t len;
    uint8_t *buf = slurp(path, &len);
    cr_assert_eq(pp_trace_load_mem(buf, len, &t), PP_OK);
    cr_assert_eq(t->n_events, nw);
    cr_assert_eq(t->damage.blocks_ok, 5u);
    pp_trace_free(t);
    free(buf);
}

Test(trace, writer_refuses_to_overwrite_an_existing_file)
{
    const char *path = tmp_path("exists.pft");
    spill(path, "keep me", 7);
    pp_trace_header h = sample_header();
    pp_trace_writer *w = (pp_trace_writer *)1;
    cr_assert_eq(pp_trace_writer_open(path, &h, &w), PP_ERR_IO);
    cr_assert_null(w);
    cr_assert(strstr(pp_error_message(), "exists") != NULL, "%s", pp_error_message());
    size_t len;
    uint8_t *d = slurp(path, &len);
    cr_assert_eq(len, 7u);
    cr_assert_eq(memcmp(d, "keep me", 7), 0);
    free(d);
    pp_trace_writer_close(NULL);
}

/* A FIFO named *.pft (or a directory, or a device) is refused at once: opening a FIFO for
 * reading would otherwise wait for a writer that never comes, and /dev/zero never ends. */
Test(trace, non_regular_files_are_refused_without_waiting)
{
    alarm(20); /* a reader that waits fails the test instead of hanging the suite */
    const char *fifo = tmp_path("fifo.pft");
    cr_assert_eq(mkfifo(fifo, 0644), 0, "%s", strerror(errno));
    pp_trace_reader *r = (pp_trace_reader *)1;
    cr_assert_eq(pp_trace_reader_open(fifo, &r), PP_ERR_INVALID);
    cr_assert_null(r);
    cr_assert(strstr(pp_error_message(), "is a FIFO, not a regular file") != NULL, "%s",
              pp_error_message());
    cr_assert(strstr(pp_error_message(), "fifo.pft") != NULL, "%s", pp_error_message());
    pp_trace *t = (pp_trace *)1;
    cr_assert_eq(pp_trace_load(fifo, &t), PP_ERR_INVALID);
    cr_assert_null(t);
    char *text = NULL;
    size_t len = 0;
    cr_assert_eq(pp_read_file(fifo, &text, &len), PP_ERR_INVALID);
    cr_assert_null(text);
    const char *dir = tmp_path("dir.pft");
    cr_assert_eq(mkdir(dir, 0755), 0);
    cr_assert_eq(pp_trace_load(dir, &t), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "is a directory") != NULL, "%s", pp_error_message());
    rmdir(dir);
    cr_assert_eq(pp_trace_load("/dev/zero", &t), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "a character device") != NULL, "%s",
              pp_error_message());
    cr_assert_eq(pp_read_file("/dev/zero", &text, &len), PP_ERR_INVALID);
    alarm(0);
}

Test(trace, writer_rejects_blocks_a_reader_would_reject)
{
    const char *path = tmp_path("w.pft");
    pp_trace_header h = sample_header();
    pp_trace_writer *w = NULL;
    cr_assert_eq(pp_trace_writer_open(path, &h, &w), PP_OK);
    recs r = {0};
    put_pop(&r, 1, 10, 0);
    put_end(&r, 1, 20, 5);
    /* Not a multiple of 8, wrong record count, empty events block, unknown kind. */
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, 1, r.b, r.n - 4, r.count),
                 PP_ERR_INVALID);
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, 1, r.b, r.n, r.count + 1),
                 PP_ERR_INVALID);
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, 1, r.b, 0, 0), PP_ERR_INVALID);
    cr_assert_eq(pp_trace_writer_block(w, (pp_trace_block_kind)9, 1, r.b, r.n, r.count),
                 PP_ERR_INVALID);
    /* A record whose size runs past the block, and one below its type's fixed size. */
    pp_rec_header bad = rh(PP_REC_POP, 32, 1, 0);
    memcpy(r.b + 24, &bad, sizeof bad);
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, 1, r.b, r.n, r.count),
                 PP_ERR_INVALID);
    bad = rh(PP_REC_PUSH, 24, 1, 0);
    memcpy(r.b + 24, &bad, sizeof bad);
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, 1, r.b, r.n, r.count),
                 PP_ERR_INVALID);
    cr_assert_eq(pp_trace_writer_blocks(w), 0u);
    /* Nothing reached the file: the header alone reads back clean. */
    pp_trace_writer_close(w);
    pp_trace *t = NULL;
    cr_assert_eq(pp_trace_load(path, &t), PP_OK);
    cr_assert_eq(t->n_events, 0u);
    cr_assert_eq(t->damage.blocks_ok, 0u);
    cr_assert_eq(t->damage.bytes_skipped, 0u);
    cr_assert_not(t->damage.has_footer);
    pp_trace_free(t);
}

Test(trace, encoders_pad_and_truncate)
{
    uint8_t buf[70000];
    memset(buf, 0xAA, sizeof buf);
    size_t n = pp_trace_enc_string(buf, sizeof buf, 5, "hello", 5);
    cr_assert_eq(n, 32u); /* 24 + 5 -> 32 */
    pp_rec_string s;
    memcpy(&s, buf, sizeof s);
    cr_assert_eq(s.h.type, PP_REC_STRING);
    cr_assert_eq(s.h.size, 32);
    cr_assert_eq(s.id, 5u);
    cr_assert_eq(s.len, 5u);
    cr_assert_eq(memcmp(buf + 24, "hello\0\0\0", 8), 0);
    cr_assert_eq(pp_trace_enc_string(buf, 31, 5, "hello", 5), 0u);
    cr_assert_eq(pp_trace_enc_string(buf, sizeof buf, 6, "", 0), 24u);

    /* A string too long for a record's 16-bit size is cut to PP_TRACE_STRING_MAX. */
    char *big = malloc(70000);
    memset(big, 'x', 70000);
    n = pp_trace_enc_string(buf, sizeof buf, 7, big, 70000);
    cr_assert_eq(n, 65528u);
    memcpy(&s, buf, sizeof s);
    cr_assert_eq(s.len, PP_TRACE_STRING_MAX);
    cr_assert_eq(s.h.size, 65528);

    n = pp_trace_enc_ext(buf, sizeof buf, 9, 123, 44, ext2, sizeof ext2);
    cr_assert_eq(n, 40u);
    pp_rec_ext e;
    memcpy(&e, buf, sizeof e);
    cr_assert_eq(e.h.type, PP_REC_EXT_PAYLOAD);
    cr_assert_eq(e.h.tid, 9u);
    cr_assert_eq(e.h.ts, 123u);
    cr_assert_eq(e.schema_id, 44u);
    cr_assert_eq(e.data_bytes, 5u);
    cr_assert_eq(memcmp(buf + 32, ext2, 5), 0);
    cr_assert_eq(memcmp(buf + 37, "\0\0\0", 3), 0);
    n = pp_trace_enc_ext(buf, sizeof buf, 9, 123, 44, big, 70000);
    cr_assert_eq(n, 65528u);
    memcpy(&e, buf, sizeof e);
    cr_assert_eq(e.data_bytes, PP_TRACE_EXT_MAX);

    /* The longest string round-trips through a block. */
    const char *path = tmp_path("long.pft");
    pp_trace_header h = sample_header();
    pp_trace_writer *w = NULL;
    cr_assert_eq(pp_trace_writer_open(path, &h, &w), PP_OK);
    n = pp_trace_enc_string(buf, sizeof buf, 1, big, 70000);
    pp_rec_thread_name tn = {.h = rh(PP_REC_THREAD_NAME, 24, 1, 0), .os_tid = 1, .name = 1};
    memcpy(buf + n, &tn, sizeof tn);
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_META, 0, buf, n + 24, 2), PP_OK);
    pp_trace_writer_close(w);
    pp_trace *t = NULL;
    cr_assert_eq(pp_trace_load(path, &t), PP_OK);
    cr_assert_eq(strlen(pp_trace_thread_name(t, 1)), PP_TRACE_STRING_MAX);
    pp_trace_free(t);
    free(big);
}

Test(trace, header_damage_is_an_error_with_a_precise_message)
{
    const char *path = tmp_path("h.pft");
    write_sample(path, NULL);
    size_t len;
    uint8_t *d = slurp(path, &len);
    pp_trace *t = (pp_trace *)1;

    /* Shorter than the header: every length, including zero. */
    for (size_t n = 0; n < 256; n++) {
        cr_assert_eq(pp_trace_load_mem(n ? d : NULL, n, &t), PP_ERR_CORRUPT, "n=%zu", n);
        cr_assert_null(t);
        cr_assert(strstr(pp_error_message(), "shorter than the 256-byte header"), "%s",
                  pp_error_message());
    }
    spill(tmp_path("empty.pft"), "", 0);
    cr_assert_eq(pp_trace_load(tmp_path("empty.pft"), &t), PP_ERR_CORRUPT);
    cr_assert(strstr(pp_error_message(), "shorter than"), "%s", pp_error_message());
    cr_assert_eq(pp_trace_load(tmp_path("missing.pft"), &t), PP_ERR_IO);

    uint8_t *c = malloc(len);
    memcpy(c, d, len);
    c[0] = 'X';
    cr_assert_eq(pp_trace_load_mem(c, len, &t), PP_ERR_CORRUPT);
    cr_assert(strstr(pp_error_message(), "bad magic"), "%s", pp_error_message());

    /* A version this reader does not know, with a consistent checksum. */
    memcpy(c, d, len);
    pp_trace_header h;
    memcpy(&h, c, sizeof h);
    h.version = 7;
    h.crc = pp_crc32c(0, &h, 252);
    memcpy(c, &h, sizeof h);
    cr_assert_eq(pp_trace_load_mem(c, len, &t), PP_ERR_CORRUPT);
    cr_assert(strstr(pp_error_message(), "unsupported version 7"), "%s", pp_error_message());

    /* Every single-bit flip anywhere in the header is caught. */
    for (size_t bit = 0; bit < 256 * 8; bit++) {
        memcpy(c, d, len);
        c[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        cr_assert_eq(pp_trace_load_mem(c, len, &t), PP_ERR_CORRUPT, "bit %zu", bit);
        cr_assert_null(t);
    }
    memcpy(c, d, len);
    c[100] ^= 4; /* inside host: only the checksum can tell */
    cr_assert_eq(pp_trace_load_mem(c, len, &t), PP_ERR_CORRUPT);
    cr_assert(strstr(pp_error_message(), "header checksum mismatch"), "%s", pp_error_message());
    free(c);
    free(d);
}

/* Compares two damage reports field by field. */
static void damage_eq(const pp_trace_damage *a, const pp_trace_damage *b, size_t cut)
{
    cr_assert_eq(a->blocks_ok, b->blocks_ok, "cut %zu", cut);
    cr_assert_eq(a->blocks_bad, b->blocks_bad, "cut %zu", cut);
    cr_assert_eq(a->blocks_unknown, b->blocks_unknown, "cut %zu", cut);
    cr_assert_eq(a->bytes_skipped, b->bytes_skipped, "cut %zu", cut);
    cr_assert_eq(a->records_unknown, b->records_unknown, "cut %zu", cut);
    cr_assert_eq(a->truncated, b->truncated, "cut %zu", cut);
    cr_assert_eq(a->has_footer, b->has_footer, "cut %zu", cut);
    cr_assert_str_eq(a->first_problem, b->first_problem, "cut %zu", cut);
}

Test(trace, truncation_anywhere_keeps_every_complete_block)
{
    const char *path = tmp_path("t.pft");
    layout L;
    write_sample(path, &L);
    size_t len;
    uint8_t *d = slurp(path, &len);
    cr_assert_eq(len, L.file_bytes);
    for (size_t cut = 256; cut <= len; cut++) {
        pp_trace *t = NULL;
        cr_assert_eq(pp_trace_load_mem(d, cut, &t), PP_OK, "cut %zu: %s", cut,
                     pp_error_message());
        int complete = 0, at_boundary = cut == 256;
        for (int i = 0; i < NBLK; i++) {
            if (L.off[i] + L.size[i] <= cut)
                complete = i + 1;
            if (L.off[i] + L.size[i] == cut)
                at_boundary = 1;
        }
        cr_assert_eq(t->damage.blocks_ok, (uint64_t)complete, "cut %zu", cut);
        cr_assert_eq(t->damage.blocks_bad, 0u, "cut %zu", cut);
        cr_assert_eq(t->n_events, events_in(&L, complete, -1), "cut %zu", cut);
        cr_assert_eq(t->damage.truncated, !at_boundary, "cut %zu", cut);
        size_t kept = complete ? L.off[complete - 1] + L.size[complete - 1] : 256;
        cr_assert_eq(t->damage.bytes_skipped, cut - kept, "cut %zu", cut);
        cr_assert_eq(t->damage.has_footer, complete == NBLK, "cut %zu", cut);
        if (!at_boundary)
            cr_assert(strstr(t->damage.first_problem, "file ends"), "cut %zu: %s", cut,
                      t->damage.first_problem);
        touch(t);

        /* Every 8th cut also through the file reader (pread, not a buffer): same report. */
        if (cut % 8 == 0) {
            char name[32];
            snprintf(name, sizeof name, "cut%zu.pft", cut);
            spill(tmp_path(name), d, cut);
            pp_trace *f = NULL;
            cr_assert_eq(pp_trace_load(tmp_path(name), &f), PP_OK);
            cr_assert_eq(f->n_events, t->n_events, "cut %zu", cut);
            damage_eq(&f->damage, &t->damage, cut);
            pp_trace_free(f);
            unlink(tmp_path(name));
        }
        pp_trace_free(t);
    }
    free(d);
}

Test(trace, a_bit_flip_in_a_block_loses_that_block_only)
{
    const char *path = tmp_path("f.pft");
    layout L;
    write_sample(path, &L);
    size_t len;
    uint8_t *d = slurp(path, &len);
    uint8_t *c = malloc(len);
    for (size_t bit = 256 * 8; bit < len * 8; bit++) {
        size_t byte = bit / 8;
        int k = 0;
        while (!(byte >= L.off[k] && byte < L.off[k] + L.size[k]))
            k++;
        memcpy(c, d, len);
        c[byte] ^= (uint8_t)(1u << (bit % 8));
        pp_trace *t = NULL;
        cr_assert_eq(pp_trace_load_mem(c, len, &t), PP_OK, "bit %zu", bit);
        const pp_trace_damage *g = &t->damage;
        cr_assert_eq(g->blocks_ok, NBLK - 1u, "bit %zu (block %d)", bit, k);
        cr_assert_eq(t->n_events, events_in(&L, NBLK, k), "bit %zu", bit);
        cr_assert_eq(g->bytes_skipped, L.size[k], "bit %zu", bit);
        cr_assert_eq(g->has_footer, k != NBLK - 1, "bit %zu", bit);
        /* A flipped size in the last block reads as a file cut short: indistinguishable. */
        if (g->truncated) {
            cr_assert_eq(k, NBLK - 1, "bit %zu", bit);
            cr_assert_eq(g->blocks_bad, 0u, "bit %zu", bit);
        } else {
            cr_assert_eq(g->blocks_bad, 1u, "bit %zu", bit);
        }
        char want[64];
        snprintf(want, sizeof want, "block at offset %zu: ", L.off[k]);
        cr_assert(strncmp(g->first_problem, want, strlen(want)) == 0, "bit %zu: %s", bit,
                  g->first_problem);
        touch(t);
        pp_trace_free(t);
    }
    free(c);
    free(d);
}

Test(trace, garbage_between_blocks_is_skipped_by_resync)
{
    const char *path = tmp_path("g.pft");
    layout L;
    write_sample(path, &L);
    size_t len;
    uint8_t *d = slurp(path, &len);
    /* 37 bytes (not a multiple of 8) holding a fake block header, between blocks 1 and 2. */
    uint8_t junk[37];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    pp_trace_block_header fake = {.kind = 1, .payload_bytes = 0};
    memcpy(fake.magic, "PPBK", 4);
    memcpy(junk + 3, &fake, sizeof fake);
    size_t at = L.off[2];
    uint8_t *c = malloc(len + sizeof junk);
    memcpy(c, d, at);
    memcpy(c + at, junk, sizeof junk);
    memcpy(c + at + sizeof junk, d + at, len - at);
    pp_trace *t = NULL;
    cr_assert_eq(pp_trace_load_mem(c, len + sizeof junk, &t), PP_OK);
    cr_assert_eq(t->damage.blocks_ok, NBLK);
    cr_assert_eq(t->damage.blocks_bad, 1u);
    cr_assert_eq(t->damage.bytes_skipped, sizeof junk);
    cr_assert_eq(t->n_events, L.total_events);
    cr_assert(t->damage.has_footer);
    cr_assert_not(t->damage.truncated);
    char want[64];
    snprintf(want, sizeof want, "block at offset %zu: no block magic", at);
    cr_assert_str_eq(t->damage.first_problem, want);
    pp_trace_free(t);
    free(c);
    free(d);
}

/* Appends a raw block with a correct checksum, whatever its kind and records. */
static void raw_block(FILE *f, uint32_t kind, const void *payload, uint32_t bytes,
                      uint32_t n_records, uint64_t seq)
{
    pp_trace_block_header bh = {.kind = kind, .payload_bytes = bytes, .n_records = n_records,
                                .seq = seq};
    memcpy(bh.magic, "PPBK", 4);
    bh.crc = pp_crc32c(pp_crc32c(0, &bh, 28), payload, bytes);
    cr_assert_eq(fwrite(&bh, sizeof bh, 1, f), 1u);
    if (bytes)
        cr_assert_eq(fwrite(payload, bytes, 1, f), 1u);
}

Test(trace, unknown_record_types_and_block_kinds_are_skipped)
{
    const char *path = tmp_path("u.pft");
    pp_trace_header h = sample_header();
    pp_trace_writer *w = NULL;
    cr_assert_eq(pp_trace_writer_open(path, &h, &w), PP_OK);
    recs r = {0};
    put_range(&r, PP_REC_PUSH, 5, 10, 0, 0, 0, 0, 0, 0, 0);
    uint8_t unk[40] = {0};
    pp_rec_header uh = rh(99, sizeof unk, 5, 11);
    memcpy(unk, &uh, sizeof uh);
    memset(unk + 16, 0xEE, 24);
    put(&r, unk, sizeof unk);
    put_pop(&r, 5, 12, 0);
    /* The writer passes types it does not know (a newer capture library may add some). */
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, 5, r.b, r.n, r.count), PP_OK);
    pp_trace_writer_close(w);

    FILE *f = fopen(path, "ab");
    cr_assert_not_null(f);
    uint8_t strange[24];
    memset(strange, 0x5A, sizeof strange); /* not even records */
    raw_block(f, 77, strange, sizeof strange, 1, 1);
    r = (recs){0};
    put_range(&r, PP_REC_MARK, 5, 20, 0, 0, 0, 0, 0, 0, 0);
    raw_block(f, PP_BLOCK_EVENTS, r.b, (uint32_t)r.n, r.count, 2);
    fclose(f);

    pp_trace *t = NULL;
    cr_assert_eq(pp_trace_load(path, &t), PP_OK);
    cr_assert_eq(t->n_events, 3u);
    cr_assert_eq(t->events[0].type, PP_REC_PUSH);
    cr_assert_eq(t->events[1].type, PP_REC_POP);
    cr_assert_eq(t->events[2].type, PP_REC_MARK);
    cr_assert_eq(t->damage.records_unknown, 1u);
    cr_assert_eq(t->damage.blocks_ok, 2u);
    cr_assert_eq(t->damage.blocks_unknown, 1u);
    cr_assert_eq(t->damage.blocks_bad, 0u);
    cr_assert_eq(t->damage.bytes_skipped, 0u);
    cr_assert_str_eq(t->damage.first_problem, "");
    pp_trace_free(t);
}

Test(trace, records_that_break_their_own_bounds_make_the_block_bad)
{
    /* Checksums are right (a buggy or hostile writer), the structure is not. */
    struct {
        uint16_t type, size;
        uint32_t field_at_24; /* len / data_bytes / n_entries, where the type has one */
        const char *why;
    } cases[] = {
        {PP_REC_STRING, 32, 9, "string runs past"},
        {PP_REC_EXT_PAYLOAD, 40, 9, "ext payload data runs past"},
        {PP_REC_SCHEMA, 40, 0, NULL}, /* n_entries = 1 set below, no entry present */
        {PP_REC_PUSH, 48, 0, "smaller than its type's fixed part"},
        {PP_REC_POP, 12, 0, "size below 16"},
        {PP_REC_POP, 28, 0, "not a multiple of 8"},
        {PP_REC_POP, 64, 0, "runs past the end of the block"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "r%zu.pft", i);
        const char *path = tmp_path(name);
        pp_trace_header h = sample_header();
        pp_trace_writer *w = NULL;
        cr_assert_eq(pp_trace_writer_open(path, &h, &w), PP_OK);
        recs r = {0};
        put_pop(&r, 1, 1, 0);
        cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, 1, r.b, r.n, r.count), PP_OK);
        pp_trace_writer_close(w);
        uint8_t rec[48] = {0};
        pp_rec_header rhd = rh(cases[i].type, cases[i].size, 1, 2);
        memcpy(rec, &rhd, sizeof rhd);
        uint32_t v = cases[i].field_at_24;
        if (cases[i].type == PP_REC_SCHEMA) {
            v = 1; /* one 24-byte entry promised, none present */
            memcpy(rec + offsetof(pp_rec_schema, n_entries), &v, 4);
        } else {
            size_t at = cases[i].type == PP_REC_STRING ? offsetof(pp_rec_string, len)
                                                       : offsetof(pp_rec_ext, data_bytes);
            memcpy(rec + at, &v, 4);
        }
        FILE *f = fopen(path, "ab");
        raw_block(f, PP_BLOCK_EVENTS, rec, 48, 1, 1);
        fclose(f);
        pp_trace *t = NULL;
        cr_assert_eq(pp_trace_load(path, &t), PP_OK);
        cr_assert_eq(t->damage.blocks_ok, 1u, "case %zu", i);
        cr_assert_eq(t->damage.blocks_bad, 1u, "case %zu", i);
        cr_assert_eq(t->damage.bytes_skipped, 32u + 48u, "case %zu", i);
        cr_assert_eq(t->n_events, 1u, "case %zu", i);
        const char *want = cases[i].why ? cases[i].why : "schema entries run past";
        cr_assert(strstr(t->damage.first_problem, want), "case %zu: %s", i,
                  t->damage.first_problem);
        pp_trace_free(t);
    }
}

Test(trace, ext_payloads_attach_within_their_block_only)
{
    const char *path = tmp_path("x.pft");
    pp_trace_header h = sample_header();
    pp_trace_writer *w = NULL;
    cr_assert_eq(pp_trace_writer_open(path, &h, &w), PP_OK);
    recs r = {0};
    put_ext(&r, 1, 5, 1, ext1, 8);                  /* nothing before it: dropped */
    put_range(&r, PP_REC_PUSH, 1, 10, 0, 0, 0, 0, 0, 0, 0);
    put_ext(&r, 1, 10, 2, ext1, 8);                 /* -> the PUSH */
    put_ext(&r, 1, 10, 3, ext2, 5);                 /* a second one: dropped */
    put_pop(&r, 1, 20, 0);
    put_ext(&r, 1, 20, 4, ext2, 5);                 /* after a POP: dropped */
    put_range(&r, PP_REC_MARK, 1, 30, 0, 0, 0, 0, 0, 0, 0);
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, 1, r.b, r.n, r.count), PP_OK);
    r = (recs){0};
    put_ext(&r, 1, 30, 5, ext2, 5);                 /* the MARK is in another block: dropped */
    put_range(&r, PP_REC_START, 1, 40, 0, 0, 0, 0, 0, 0, 9);
    put_ext(&r, 1, 40, 6, ext2, 0);                 /* empty data still attaches */
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, 1, r.b, r.n, r.count), PP_OK);
    pp_trace_writer_close(w);
    pp_trace *t = NULL;
    cr_assert_eq(pp_trace_load(path, &t), PP_OK);
    cr_assert_eq(t->n_events, 4u);
    cr_assert_eq(t->events[0].schema_id, 2u);
    cr_assert_eq(t->events[0].ext_bytes, 8u);
    cr_assert_eq(memcmp(t->events[0].ext, ext1, 8), 0);
    cr_assert_null(t->events[1].ext);
    cr_assert_null(t->events[2].ext);
    cr_assert_eq(t->events[2].schema_id, 0u);
    cr_assert_eq(t->events[3].schema_id, 6u);
    cr_assert_not_null(t->events[3].ext);
    cr_assert_eq(t->events[3].ext_bytes, 0u);
    pp_trace_free(t);
}

Test(trace, redefinitions_follow_the_documented_rule)
{
    const char *path = tmp_path("r.pft");
    pp_trace_header h = sample_header();
    pp_trace_writer *w = NULL;
    cr_assert_eq(pp_trace_writer_open(path, &h, &w), PP_OK);
    recs r = {0};
    put_string(&r, 1, "first");
    put_string(&r, 1, "second");
    put_string(&r, 2, "main");
    put_string(&r, 3, "renamed");
    put_string(&r, 0, "id zero is ignored");
    put_domain(&r, 4, 1);
    put_domain(&r, 4, 2);
    put_thread(&r, 77, 2);
    put_thread(&r, 77, 3);
    put_category(&r, 4, 1, 2);
    put_category(&r, 4, 1, 3);
    put_category(&r, 4, 2, 99); /* a name nobody defined */
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_META, 0, r.b, r.n, r.count), PP_OK);
    r = (recs){0};
    put_range(&r, PP_REC_PUSH, 77, 1, 4, 1, 0, 0, 0, 0, 0);
    put_range(&r, PP_REC_MARK, 77, 2, 4, 12345, 0, 0, 0, 0, 0);
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, 77, r.b, r.n, r.count), PP_OK);
    pp_trace_writer_close(w);
    pp_trace *t = NULL;
    cr_assert_eq(pp_trace_load(path, &t), PP_OK);
    cr_assert_str_eq(t->events[0].message, "first");   /* strings: first wins */
    cr_assert_str_eq(t->events[1].message, "");        /* unknown id */
    cr_assert_eq(t->n_domains, 1u);
    cr_assert_str_eq(pp_trace_domain_name(t, 4), "first"); /* domains: first wins */
    cr_assert_eq(t->n_threads, 1u);
    cr_assert_str_eq(pp_trace_thread_name(t, 77), "renamed"); /* names: last wins */
    cr_assert_eq(t->n_categories, 2u);
    cr_assert_str_eq(pp_trace_category_name(t, 4, 1), "renamed");
    cr_assert_str_eq(pp_trace_category_name(t, 4, 2), "");
    pp_trace_free(t);
}

Test(trace, random_bytes_never_crash_the_reader)
{
    pp_rng rng;
    pp_rng_seed(&rng, 99);
    uint8_t buf[8192];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)pp_rng_u64(&rng);
    pp_trace *t = NULL;
    cr_assert_eq(pp_trace_load_mem(buf, sizeof buf, &t), PP_ERR_CORRUPT);
    cr_assert(strstr(pp_error_message(), "bad magic"));

    /* Behind a valid header: one damaged region covering everything. */
    pp_trace_header h = sample_header();
    memcpy(h.magic, "PPFT", 4);
    h.version = 1;
    h.header_bytes = 256;
    h.crc = pp_crc32c(0, &h, 252);
    memcpy(buf, &h, sizeof h);
    for (int round = 0; round < 50; round++) {
        for (size_t i = 256; i < sizeof buf; i++)
            buf[i] = (uint8_t)pp_rng_u64(&rng);
        if (round % 2) /* sprinkle block magics to exercise the resync candidates */
            for (size_t i = 256; i + 4 < sizeof buf; i += 8 + pp_rng_below(&rng, 200))
                memcpy(buf + i, "PPBK", 4);
        cr_assert_eq(pp_trace_load_mem(buf, sizeof buf, &t), PP_OK);
        cr_assert_eq(t->n_events, 0u);
        cr_assert_eq(t->damage.blocks_ok, 0u);
        cr_assert_eq(t->damage.bytes_skipped, sizeof buf - 256);
        cr_assert_eq(t->damage.blocks_bad + (uint64_t)t->damage.truncated >= 1, 1);
        touch(t);
        pp_trace_free(t);
    }
}

Test(trace, streaming_reader_sees_the_blocks_the_loader_does)
{
    const char *path = tmp_path("s.pft");
    layout L;
    write_sample(path, &L);
    size_t len;
    uint8_t *d = slurp(path, &len);
    d[L.off[2] + 40] ^= 1; /* damage block 2 */
    spill(tmp_path("s2.pft"), d, len);
    for (int mode = 0; mode < 2; mode++) {
        pp_trace_reader *r = NULL;
        if (mode == 0)
            cr_assert_eq(pp_trace_reader_open(tmp_path("s2.pft"), &r), PP_OK);
        else
            cr_assert_eq(pp_trace_reader_open_mem(d, len, &r), PP_OK);
        cr_assert_eq(pp_trace_reader_header(r)->pid, 4242u);
        int want[] = {0, 1, 3, 4}, n = 0;
        for (;;) {
            pp_trace_block b;
            bool got;
            cr_assert_eq(pp_trace_reader_next(r, &b, &got), PP_OK);
            if (!got)
                break;
            cr_assert_lt(n, 4);
            cr_assert_eq(b.offset, L.off[want[n]], "mode %d block %d", mode, n);
            cr_assert_eq(b.h.seq, (uint64_t)want[n]);
            cr_assert_eq(b.h.payload_bytes + 32u, L.size[want[n]]);
            pp_rec_header rh0;
            memcpy(&rh0, b.payload, sizeof rh0);
            cr_assert_geq(rh0.size, 16);
            n++;
        }
        cr_assert_eq(n, 4);
        const pp_trace_damage *g = pp_trace_reader_damage(r);
        cr_assert_eq(g->blocks_ok, 4u);
        cr_assert_eq(g->blocks_bad, 1u);
        cr_assert_eq(g->bytes_skipped, L.size[2]);
        pp_trace_reader_close(r);
    }
    pp_trace_reader_close(NULL);
    free(d);
}

/* Reads r to its end; returns the offsets of the blocks it handed out, in order (at most 8). */
static int read_all(pp_trace_reader *r, uint64_t off[8])
{
    int n = 0;
    for (;;) {
        pp_trace_block b;
        bool got;
        cr_assert_eq(pp_trace_reader_next(r, &b, &got), PP_OK);
        if (!got)
            return n;
        if (n < 8)
            off[n] = b.offset;
        n++;
    }
}

/* pp_trace_reader_reopen, the analyzer's second pass: checksums are skipped only over bytes an
 * earlier reader verified, of a file unchanged since. */
Test(trace, a_reopened_reader_skips_checksums_only_of_an_unchanged_file_read_clean)
{
    const char *path = tmp_path("re.pft");
    layout L;
    write_sample(path, &L);
    uint64_t off[8], off2[8];

    pp_trace_reader *a = NULL, *b = NULL;
    cr_assert_eq(pp_trace_reader_open(path, &a), PP_OK);
    cr_assert(!pp_trace_reader_verified(a));
    /* not read to its end yet: not verified */
    cr_assert_eq(pp_trace_reader_reopen(path, a, &b), PP_OK);
    cr_assert(!pp_trace_reader_verified(b));
    pp_trace_reader_close(b);
    int n = read_all(a, off);
    cr_assert_eq(n, NBLK);
    cr_assert_eq(pp_trace_reader_reopen(path, a, &b), PP_OK);
    cr_assert(pp_trace_reader_verified(b));
    cr_assert_eq(read_all(b, off2), n);
    cr_assert_arr_eq(off, off2, (size_t)n * sizeof off[0]);
    cr_assert_eq(pp_trace_reader_damage(b)->blocks_ok, (uint64_t)NBLK);
    pp_trace_reader_close(b);
    /* NULL: a plain open */
    cr_assert_eq(pp_trace_reader_reopen(path, NULL, &b), PP_OK);
    cr_assert(!pp_trace_reader_verified(b));
    pp_trace_reader_close(b);

    /* the same bytes in memory never count as verified */
    size_t len;
    uint8_t *d = slurp(path, &len);
    pp_trace_reader *m = NULL;
    cr_assert_eq(pp_trace_reader_open_mem(d, len, &m), PP_OK);
    cr_assert_eq(read_all(m, off2), n);
    cr_assert_eq(pp_trace_reader_reopen(path, m, &b), PP_OK);
    cr_assert(!pp_trace_reader_verified(b));
    pp_trace_reader_close(b);
    pp_trace_reader_close(m);

    /* changed in place after `a` read it (a bit of block 2, the modification time moved): the
     * new reader checks again and finds the damage */
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    d[L.off[2] + 40] ^= 1;
    int fd = open(path, O_WRONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(pwrite(fd, d + L.off[2] + 40, 1, (off_t)(L.off[2] + 40)), 1);
    struct timespec ts[2] = {sb.st_atim, sb.st_mtim};
    ts[1].tv_sec += 1;
    cr_assert_eq(futimens(fd, ts), 0);
    close(fd);
    cr_assert_eq(pp_trace_reader_reopen(path, a, &b), PP_OK);
    cr_assert(!pp_trace_reader_verified(b));
    cr_assert_eq(read_all(b, off2), n - 1);
    cr_assert_eq(pp_trace_reader_damage(b)->blocks_bad, 1u);
    /* and a reader that saw damage makes none verified */
    pp_trace_reader *c = NULL;
    cr_assert_eq(pp_trace_reader_reopen(path, b, &c), PP_OK);
    cr_assert(!pp_trace_reader_verified(c));
    pp_trace_reader_close(c);
    pp_trace_reader_close(b);
    pp_trace_reader_close(a);

    /* grown after it was read (a writer still appending): checked again */
    d[L.off[2] + 40] ^= 1;
    spill(path, d, len);
    cr_assert_eq(pp_trace_reader_open(path, &a), PP_OK);
    cr_assert_eq(read_all(a, off), n);
    FILE *f = fopen(path, "ab");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite("garbage!", 1, 8, f), 8u);
    fclose(f);
    cr_assert_eq(pp_trace_reader_reopen(path, a, &b), PP_OK);
    cr_assert(!pp_trace_reader_verified(b));
    cr_assert_eq(read_all(b, off2), n);
    cr_assert_eq(pp_trace_reader_damage(b)->bytes_skipped, 8u);
    pp_trace_reader_close(b);
    pp_trace_reader_close(a);
    free(d);
}

/* One events block per iteration, each holding `per` PUSH records numbered by payload. */
enum { KILL_PER_BLOCK = 200 };

static void killed_child_writes(const char *path)
{
    pp_trace_header h = sample_header();
    pp_trace_writer *w = NULL;
    if (pp_trace_writer_open(path, &h, &w) != PP_OK)
        _exit(3);
    static uint8_t buf[KILL_PER_BLOCK * sizeof(pp_rec_range)];
    for (uint64_t seq = 0;; seq++) {
        for (uint32_t i = 0; i < KILL_PER_BLOCK; i++) {
            pp_rec_range x = {.h = rh(PP_REC_PUSH, sizeof x, 9, seq * KILL_PER_BLOCK + i),
                              .payload = seq * KILL_PER_BLOCK + i};
            memcpy(buf + i * sizeof x, &x, sizeof x);
        }
        if (pp_trace_writer_block(w, PP_BLOCK_EVENTS, 9, buf, sizeof buf, KILL_PER_BLOCK) !=
            PP_OK)
            _exit(4);
    }
}

Test(trace, a_killed_writer_leaves_every_complete_block_readable)
{
    for (int round = 0; round < 3; round++) {
        char name[32];
        snprintf(name, sizeof name, "k%d.pft", round);
        const char *path = tmp_path(name);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0)
            killed_child_writes(path);
        /* Let it write a few megabytes, then kill it without warning. */
        struct stat sb;
        for (int i = 0; i < 5000; i++) {
            if (stat(path, &sb) == 0 && sb.st_size > (off_t)(2 + round) * 1000000)
                break;
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        kill(pid, SIGKILL);
        int status = 0;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %d",
                  status);

        pp_trace *t = NULL;
        cr_assert_eq(pp_trace_load(path, &t), PP_OK, "%s", pp_error_message());
        cr_assert_eq(t->damage.blocks_bad, 0u);
        cr_assert_not(t->damage.has_footer);
        cr_assert_gt(t->damage.blocks_ok, 0u);
        cr_assert_eq(t->n_events, t->damage.blocks_ok * KILL_PER_BLOCK);
        for (size_t i = 0; i < t->n_events; i++)
            cr_assert_eq(t->events[i].payload, i, "event %zu", i); /* no gaps, in order */
        /* A cut mid-block shows as truncated, with the partial block's bytes skipped. */
        uint64_t blk = 32 + KILL_PER_BLOCK * sizeof(pp_rec_range);
        cr_assert_lt(t->damage.bytes_skipped, blk);
        cr_assert_eq(t->damage.truncated, t->damage.bytes_skipped > 0);
        stat(path, &sb);
        cr_assert_eq((uint64_t)sb.st_size, 256 + t->damage.blocks_ok * blk +
                                                t->damage.bytes_skipped);

        /* The same file cut inside its last complete block: truncated, one block fewer. */
        size_t len;
        uint8_t *d = slurp(path, &len);
        size_t cut = 256 + (t->damage.blocks_ok - 1) * blk + blk / 2;
        pp_trace *c = NULL;
        cr_assert_eq(pp_trace_load_mem(d, cut, &c), PP_OK);
        cr_assert(c->damage.truncated);
        cr_assert_eq(c->damage.blocks_ok, t->damage.blocks_ok - 1);
        cr_assert_eq(c->damage.blocks_bad, 0u);
        pp_trace_free(c);
        free(d);
        pp_trace_free(t);
    }
}

/* The GPU capture's records (pprof-run --cuda/--nccl) round-trip with their names resolved; a
 * GPU record cut below its fixed size makes its block bad, as every known type does. */
Test(trace, gpu_api_and_nccl_records_round_trip)
{
    recs meta = {0}, ev = {0};
    put_string(&meta, 1, "ncclDevKernel_SendRecv");
    put_string(&meta, 2, "Send");
    pp_rec_api api = {.h = rh(PP_REC_API, sizeof(pp_rec_api), 77, 0), .correlation = 5,
                      .thread = 42, .cbid = 211, .driver = 0, .start = 1000, .end = 1500};
    pp_rec_gpu k = {.h = rh(PP_REC_GPU, sizeof(pp_rec_gpu), 77, 0), .kind = PP_GPU_KERNEL,
                    .device = 3, .stream = 14, .correlation = 5, .start = 2000, .end = 9000,
                    .name = 1};
    pp_rec_gpu m = {.h = rh(PP_REC_GPU, sizeof(pp_rec_gpu), 77, 0), .kind = PP_GPU_MEMCPY,
                    .copy_kind = 8, .device = 3, .stream = 15, .correlation = 6,
                    .start = 9500, .end = 9900, .bytes = 1 << 20};
    pp_rec_nccl n = {.h = rh(PP_REC_NCCL, sizeof(pp_rec_nccl), 78, 0), .func = PP_NCCL_SEND,
                     .timed = 1, .channels = 2, .peer = 1, .rank = 0, .nranks = 2,
                     .comm = 0xabcdef, .bytes = 4u << 20, .start = 1100, .end = 1200,
                     .gpu_start = 2100, .gpu_end = 8100, .name = 2};
    put(&ev, &api, sizeof api);
    put(&ev, &k, sizeof k);
    put(&ev, &m, sizeof m);
    put(&ev, &n, sizeof n);
    pp_trace_header h = sample_header();
    pp_trace_writer *w = NULL;
    cr_assert_eq(pp_trace_writer_open(tmp_path("gpu.pft"), &h, &w), PP_OK);
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_META, 0, meta.b, meta.n, meta.count), PP_OK);
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, 77, ev.b, ev.n, ev.count), PP_OK);
    pp_trace_writer_close(w);
    pp_trace *t = NULL;
    cr_assert_eq(pp_trace_load(tmp_path("gpu.pft"), &t), PP_OK);
    cr_assert_eq(t->damage.records_unknown, 0);
    cr_assert_eq(t->n_api, 1);
    cr_assert_eq(t->api[0].correlation, 5);
    cr_assert_eq(t->api[0].thread, 42);
    cr_assert_eq(t->n_gpu, 2);
    cr_assert_eq(t->gpu[0].r.kind, PP_GPU_KERNEL);
    cr_assert_str_eq(t->gpu[0].name, "ncclDevKernel_SendRecv");
    cr_assert_eq(t->gpu[0].r.end, 9000);
    cr_assert_eq(t->gpu[1].r.bytes, 1u << 20);
    cr_assert_str_eq(t->gpu[1].name, "");
    cr_assert_eq(t->n_nccl, 1);
    cr_assert_eq(t->nccl[0].r.peer, 1);
    cr_assert_eq(t->nccl[0].r.bytes, 4u << 20);
    cr_assert_str_eq(t->nccl[0].name, "Send");
    pp_trace_free(t);

    /* a GPU record claiming 56 bytes (below its 64-byte fixed part) */
    recs bad = {0};
    pp_rec_gpu b = k;
    b.h.size = 56;
    put(&bad, &b, 56);
    FILE *f = fopen(tmp_path("bad.pft"), "wb");
    cr_assert_not_null(f);
    fwrite(&h, sizeof h, 1, f);
    fclose(f);
    cr_assert_eq(unlink(tmp_path("bad.pft")), 0);
    cr_assert_eq(pp_trace_writer_open(tmp_path("bad.pft"), &h, &w), PP_OK);
    cr_assert_neq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, 77, bad.b, bad.n, bad.count), PP_OK,
                  "the writer refuses a record a reader would reject");
    pp_trace_writer_close(w);
}

Test(trace, counter_and_memory_records_round_trip)
{
    recs meta = {0}, ev = {0};
    put_string(&meta, 1, "pp.mem.stage0.activations");
    put_string(&meta, 2, "bytes");
    put_string(&meta, 3, "arena");
    pp_rec_counter_def d1 = {.h = rh(PP_REC_COUNTER_DEF, sizeof d1, 77, 0),
                             .counter_id = UINT64_C(1) << 32, .domain = 1, .name = 1, .unit = 2,
                             .schema = 2};
    pp_rec_counter_def again = d1;
    again.unit = 0; /* a second definition of (1, 2^32): the first one wins */
    pp_rec_counter_def d0 = {.h = rh(PP_REC_COUNTER_DEF, sizeof d0, 77, 0),
                             .counter_id = PP_COUNTER_RSS_ID, .domain = 0, .name = 9};
    put(&meta, &d1, sizeof d1);
    put(&meta, &again, sizeof again);
    put(&meta, &d0, sizeof d0);
    double half = 0.5;
    uint64_t hb;
    memcpy(&hb, &half, sizeof hb);
    pp_rec_counter c1 = {.h = rh(PP_REC_COUNTER, sizeof c1, 77, 1000),
                         .counter_id = UINT64_C(1) << 32, .domain = 1, .kind = PP_COUNTER_INT64,
                         .value = (uint64_t)INT64_C(-5)};
    pp_rec_counter c2 = {.h = rh(PP_REC_COUNTER, sizeof c2, 77, 2000),
                         .counter_id = 7, .domain = 3, .kind = PP_COUNTER_FLOAT64, .value = hb};
    pp_rec_mem m1 = {.h = rh(PP_REC_MEM, sizeof m1, 77, 3000), .op = PP_MEM_HEAP_REGISTER,
                     .domain = 1, .heap = 4, .addr = 0x1000, .bytes = 4096, .name = 3,
                     .usage = 1};
    pp_rec_mem m2 = {.h = rh(PP_REC_MEM, sizeof m2, 77, 3100), .op = PP_MEM_REGION_UNREGISTER,
                     .domain = 1, .addr = 0x1040};
    put(&ev, &c1, sizeof c1);
    put(&ev, &c2, sizeof c2);
    put(&ev, &m1, sizeof m1);
    put(&ev, &m2, sizeof m2);
    pp_rec_gpu_mem g = {.h = rh(PP_REC_GPU_MEM, sizeof g, 77, 0), .op = PP_GPU_MEM_RELEASE,
                        .memory_kind = 3, .device = 2, .stream = 7, .correlation = 9,
                        .address = 0x7f00, .bytes = 512, .ts = 3200};
    put(&ev, &g, sizeof g);
    pp_trace_header h = sample_header();
    pp_trace_writer *w = NULL;
    cr_assert_eq(pp_trace_writer_open(tmp_path("cnt.pft"), &h, &w), PP_OK);
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_META, 0, meta.b, meta.n, meta.count), PP_OK);
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, 77, ev.b, ev.n, ev.count), PP_OK);
    pp_trace_writer_close(w);
    pp_trace *t = NULL;
    cr_assert_eq(pp_trace_load(tmp_path("cnt.pft"), &t), PP_OK);
    cr_assert_eq(t->damage.records_unknown, 0);
    cr_assert_eq(t->n_counter_defs, 2, "deduplicated by (domain, id)");
    const pp_trace_counter_def *cd = pp_trace_counter_find(t, 1, UINT64_C(1) << 32);
    cr_assert_not_null(cd);
    cr_assert_str_eq(cd->name, "pp.mem.stage0.activations");
    cr_assert_str_eq(cd->unit, "bytes", "the first definition wins");
    cr_assert_eq(cd->r.schema, 2);
    cd = pp_trace_counter_find(t, 0, PP_COUNTER_RSS_ID);
    cr_assert_not_null(cd);
    cr_assert_str_eq(cd->name, "", "an undefined string id reads as empty");
    cr_assert_null(pp_trace_counter_find(t, 1, 5));
    cr_assert_eq(t->n_counters, 2);
    cr_assert_eq((int64_t)t->counters[0].value, -5);
    cr_assert_eq(t->counters[0].h.ts, 1000);
    cr_assert_eq(t->counters[0].h.tid, 77);
    double got;
    memcpy(&got, &t->counters[1].value, sizeof got);
    cr_assert_eq(got, 0.5);
    cr_assert_eq(t->counters[1].kind, PP_COUNTER_FLOAT64);
    cr_assert_eq(t->n_mem, 2);
    cr_assert_eq(t->mem[0].r.op, PP_MEM_HEAP_REGISTER);
    cr_assert_eq(t->mem[0].r.bytes, 4096);
    cr_assert_str_eq(t->mem[0].name, "arena");
    cr_assert_eq(t->mem[1].r.addr, 0x1040);
    cr_assert_str_eq(t->mem[1].name, "");
    cr_assert_eq(t->n_gpu_mem, 1);
    cr_assert_eq(t->gpu_mem[0].op, PP_GPU_MEM_RELEASE);
    cr_assert_eq(t->gpu_mem[0].ts, 3200);
    cr_assert_eq(t->gpu_mem[0].bytes, 512);
    cr_assert_eq(t->gpu_mem[0].device, 2);
    pp_trace_free(t);

    /* hostile: an unknown value kind, an unknown operation, a cut-short record: each refused
     * by the writer (the one record check a reader applies too) */
    pp_rec_counter bk = c1;
    bk.kind = 9;
    pp_rec_mem bm = m1;
    bm.op = 77;
    pp_rec_mem shortm = m1;
    shortm.h.size = 48;
    pp_rec_gpu_mem bg = g;
    bg.op = 3;
    const void *bad[] = {&bk, &bm, &shortm, &bg};
    const size_t bad_n[] = {sizeof bk, sizeof bm, 48, sizeof bg};
    cr_assert_eq(pp_trace_writer_open(tmp_path("bad.pft"), &h, &w), PP_OK);
    for (int i = 0; i < 4; i++)
        cr_assert_neq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, 77, bad[i], bad_n[i], 1), PP_OK,
                      "bad record %d accepted", i);
    pp_trace_writer_close(w);
}
