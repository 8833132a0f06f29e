/* fuzz_analysis.c: fuzz target for the whole analysis (decode, steps, metrics, the simulator's
 * replay, the GPU projection, the generic view of the ranges outside the pipeline, the text, JSON,
 * Chrome and Gantt reports (their second reading of the traces too), the tuner's extraction),
 * what pprof-report and pprof-tune do with a run directory. Built two ways:
 *   - by scripts/fuzz.sh with clang -fsanitize=fuzzer,address,undefined, the analyzer's sources
 *     compiled in: libFuzzer's main;
 *   - with -DPP_FUZZ_STANDALONE (tests/CMakeLists.txt, any compiler): a driver that replays
 *     files (FILE...) or runs the committed seeds and regression inputs of DIR and a
 *     deterministic mutation sweep over them (--selftest N DIR, a CTest regression test).
 *
 * An input is a run directory: one or more .pft files concatenated, split before every
 * 8-aligned "PPFT" (the trace magic; bytes before the first one are a file of their own, as
 * garbage in a directory would be), at most 8 files. The checksums of each file's header and
 * blocks are recomputed before the analysis, so that a mutation reaches the records instead
 * of being dropped by the reader (tests/fuzz_trace.c covers the reader on raw bytes). */
#include "pp_analyzer.h"
#include "pp_extract.h"
#include "pp_report.h"
#include "pp_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_FILES = 8 };

static char g_dir[64];
static FILE *g_null;

static void remove_dir(void)
{
    for (int i = 0; i < MAX_FILES; i++) {
        char p[96];
        snprintf(p, sizeof p, "%s/f%d.pft", g_dir, i);
        unlink(p);
    }
    rmdir(g_dir);
}

static int init_once(void)
{
    if (g_null)
        return 0;
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%.40s/pp_fuzz_an_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir))
        return -1;
    g_null = fopen("/dev/null", "w");
    if (!g_null)
        return -1;
    atexit(remove_dir);
    return 0;
}


/* Where the files of the input start: 0, and each 8-aligned "PPFT" after it. */
static int split(const uint8_t *data, size_t size, size_t *start)
{
    int n = 0;
    start[n++] = 0;
    for (size_t at = 8; at + 4 <= size && n < MAX_FILES; at += 8)
        if (memcmp(data + at, PP_TRACE_MAGIC, 4) == 0)
            start[n++] = at;
    return n;
}

/* Reads every number the analysis hands out, so the sanitizers see any that is off. */
static void touch(const pp_analysis *a)
{
    volatile double sink = 0;
    for (size_t i = 0; i < a->n_steps; i++)
        for (int s = 0; s < a->S; s++)
            sink += a->steps[i].stage[s].idle_ns + a->steps[i].stage[s].fwd_ns;
    for (int s = 0; s < a->S; s++)
        sink += a->stages[s].busy_ns + a->stages[s].imbalance_culprit;
    for (size_t i = 0; i < a->n_links; i++)
        sink += a->links[i].bandwidth_GBps;
    for (size_t i = 0; i < a->n_layers; i++)
        sink += a->layers[i].fwd_ns.median;
    /* the generic view (ranges.c): its tables and the indices between them */
    for (size_t i = 0; i < a->n_ranges; i++)
        sink += a->ranges[i].ns.median + a->ranges[i].stddev_ns + a->ranges[i].wall_share +
                (double)strlen(a->ranges[i].name) + (double)strlen(a->ranges[i].domain);
    for (size_t i = 0; i < a->n_range_threads; i++) {
        const pp_arange_thread *c = &a->range_threads[i];
        if (c->range >= a->n_ranges || c->thread >= a->n_threads)
            abort();
        sink += c->sum_ns + (double)strlen(a->threads[c->thread].name);
    }
    for (size_t i = 0; i < a->n_marks; i++)
        sink += (double)a->marks[i].count + (double)strlen(a->marks[i].name);
    (void)sink;
}

static void analyze(char paths[][96], size_t n)
{
    const char *p[MAX_FILES];
    for (size_t i = 0; i < n; i++)
        p[i] = paths[i];
    pp_analysis *a = NULL;
    if (pp_analyze_files(p, n, NULL, &a) != PP_OK) {
        if (a || !pp_error_message()[0])
            abort(); /* a failure hands out nothing and says why */
        return;
    }
    touch(a);
    pp_analysis_print(a, g_null);
    if (pp_report_json(a, g_null) != PP_OK || pp_report_chrome(a, g_null) != PP_OK ||
        pp_report_gantt_data(a, g_null) != PP_OK) {
        if (!pp_error_message()[0])
            abort();
    }
    pp_extract e;
    if (pp_extract_from_analysis(a, &e) == PP_OK)
        pp_extract_free(&e);
    pp_analysis_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (init_once() != 0)
        abort();
    size_t start[MAX_FILES + 1];
    int n = split(data, size, start);
    start[n] = size;
    char paths[MAX_FILES][96];
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    if (size)
        memcpy(copy, data, size);
    for (int i = 0; i < n; i++) {
        size_t len = start[i + 1] - start[i];
        pp_trace_repair_checksums(copy + start[i], len);
        snprintf(paths[i], sizeof paths[i], "%s/f%d.pft", g_dir, i);
        FILE *f = fopen(paths[i], "wb");
        if (!f || (len && fwrite(copy + start[i], 1, len, f) != len))
            abort();
        fclose(f);
    }
    free(copy);
    pp_error_clear();
    analyze(paths, (size_t)n);
    for (int i = 0; i < n; i++)
        unlink(paths[i]);
    return 0;
}

#ifdef PP_FUZZ_STANDALONE
/* ======================================================================================== */
/* Standalone driver: replay, and a deterministic mutation sweep over a directory's inputs.  */
/* ======================================================================================== */

#include <dirent.h>

typedef struct input {
    uint8_t *d;
    size_t n;
} input;

/* One deterministic mutation of `in` into out (capacity cap): a few byte changes of the kinds
 * that turn a valid trace into a hostile one; returns the new length. */
static size_t mutate(pp_rng *g, const input *in, uint8_t *out, size_t cap)
{
    size_t n = in->n < cap ? in->n : cap;
    memcpy(out, in->d, n);
    int steps = 1 + (int)pp_rng_below(g, 3);
    for (int s = 0; s < steps && n > 8; s++) {
        size_t at = (size_t)pp_rng_below(g, n);
        switch (pp_rng_below(g, 5)) {
        case 0: /* complement a byte */
            out[at] ^= 0xFF;
            break;
        case 1: /* flip a bit */
            out[at] ^= (uint8_t)(1u << pp_rng_below(g, 8));
            break;
        case 2: { /* an interesting 32-bit value at a 4-aligned spot */
            static const uint32_t vals[] = {0,          1,          0x7FFFFFFF, 0x80000000,
                                            0xFFFFFFFF, 0x3FFFFFFF, 1u << 20,   0xFFFF,
                                            4096,       65,         2};
            at &= ~(size_t)3;
            if (at + 4 <= n) {
                uint32_t v = vals[pp_rng_below(g, sizeof vals / sizeof vals[0])];
                memcpy(out + at, &v, 4);
            }
            break;
        }
        case 3: { /* an interesting 64-bit value at an 8-aligned spot */
            static const uint64_t vals[] = {0, UINT64_MAX, INT64_MAX, (uint64_t)INT64_MIN,
                                            1ull << 48, 1ull << 62};
            at &= ~(size_t)7;
            if (at + 8 <= n) {
                uint64_t v = vals[pp_rng_below(g, sizeof vals / sizeof vals[0])];
                memcpy(out + at, &v, 8);
            }
            break;
        }
        default: /* cut */
            n = at;
            break;
        }
    }
    return n;
}

static int load_dir(const char *dir, input *ins, int cap)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "fuzz_analysis: cannot open %s\n", dir);
        return -1;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < cap) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *buf = NULL;
        if (pp_read_file(path, &buf, &ins[n].n) != PP_OK)
            continue;
        ins[n++].d = (uint8_t *)buf;
    }
    closedir(d);
    return n;
}

static int selftest(long iters, const char *dir)
{
    input ins[64];
    int n = load_dir(dir, ins, 64);
    if (n <= 0) {
        fprintf(stderr, "fuzz_analysis: no inputs in %s\n", dir);
        return 2;
    }
    for (int i = 0; i < n; i++)
        LLVMFuzzerTestOneInput(ins[i].d, ins[i].n);
    size_t cap = 1 << 17;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return 3;
    pp_rng g;
    pp_rng_seed(&g, 20261201);
    for (long i = 0; i < iters; i++) {
        size_t len = mutate(&g, &ins[i % n], buf, cap);
        LLVMFuzzerTestOneInput(buf, len);
    }
    printf("fuzz_analysis: %d inputs and %ld deterministic mutations analyzed without fault\n", n,
           iters);
    free(buf);
    for (int i = 0; i < n; i++)
        free(ins[i].d);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--selftest") == 0)
        return selftest(strtol(argv[2], NULL, 10), argv[3]);
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz_analysis --selftest N DIR | FILE...\n");
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        char *d = NULL;
        size_t n = 0;
        if (pp_read_file(argv[i], &d, &n) != PP_OK) {
            fprintf(stderr, "fuzz_analysis: %s\n", pp_error_message());
            return 2;
        }
        LLVMFuzzerTestOneInput((const uint8_t *)d, n);
        free(d);
        printf("%s: ok\n", argv[i]);
    }
    return 0;
}
#endif
