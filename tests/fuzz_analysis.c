/* fuzz_analysis.c: fuzz target for the whole analysis (decode, steps, metrics, the simulator's
 * replay, the GPU projection, the generic view of the ranges outside the pipeline, the text, JSON,
 * Chrome and Gantt reports (their second reading of the traces too), the tuner's extraction),
 * what pprof-report and pprof-tune do with a run directory; and where the input has GPU records,
 * that the GPU pass's two ways to its input (replaying the host pass's recording, reading the
 * traces again) give the same report. Built two ways:
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
 * of being dropped by the reader (tests/fuzz_trace.c covers the reader on raw bytes). The
 * harness (scratch directory, the analysis and its reports, the driver) is tests/fuzz_common.h. */
#include "fuzz_common.h"

#include "pp_analyzer.h"
#include "pp_report.h"
#include "pp_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_FILES = 8 };

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

/* The report JSON of the analysis of p[0 .. n), its GPU pass replaying the host pass's
 * recording or (reread) reading the traces again; NULL when the analysis fails. *gpu: whether
 * it had GPU records. */
static char *report_of(const char *const *p, size_t n, int reread, int *gpu)
{
    pp_analysis_options o;
    pp_analysis_options_default(&o);
    o.gpu_reread = reread;
    pp_analysis *a = NULL;
    if (pp_analyze_files(p, n, &o, &a) != PP_OK)
        return NULL;
    *gpu = a->gpu.present;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f || pp_report_json(a, f) != PP_OK)
        abort();
    fclose(f);
    pp_analysis_free(a);
    return text;
}

/* The GPU pass replays what the host pass recorded (analyzer/gpu_rec.c) instead of reading the
 * traces again: both must give the same analysis, whatever the input. */
static void gpu_pass_either_way(const char *const *p, size_t n)
{
    int gpu = 0, gpu2 = 0;
    char *replay = report_of(p, n, 0, &gpu);
    if (replay && gpu) {
        char *reread = report_of(p, n, 1, &gpu2);
        if (!reread || strcmp(replay, reread) != 0)
            abort();
        free(reread);
    }
    free(replay);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fz_init("an") != 0)
        abort();
    size_t start[MAX_FILES + 1];
    int n = split(data, size, start);
    start[n] = size;
    char paths[MAX_FILES][96];
    const char *p[MAX_FILES];
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    if (size)
        memcpy(copy, data, size);
    for (int i = 0; i < n; i++) {
        size_t len = start[i + 1] - start[i];
        pp_trace_repair_checksums(copy + start[i], len);
        snprintf(paths[i], sizeof paths[i], "%s/f%d.pft", fz_dir, i);
        fz_write_file(paths[i], copy + start[i], len);
        p[i] = paths[i];
    }
    free(copy);
    fz_analyze(p, (size_t)n, NULL);
    gpu_pass_either_way(p, (size_t)n);
    for (int i = 0; i < n; i++)
        unlink(paths[i]);
    return 0;
}

#ifdef PP_FUZZ_STANDALONE
/* ======================================================================================== */
/* Standalone driver: replay, and a deterministic mutation sweep over a directory's inputs.  */
/* ======================================================================================== */

/* One deterministic mutation of `in` into out (capacity cap): a few byte changes of the kinds
 * that turn a valid trace into a hostile one; returns the new length. */
static size_t mutate(pp_rng *g, const fz_input *in, uint8_t *out, size_t cap)
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

int main(int argc, char **argv)
{
    return fz_dir_main(argc, argv, "fuzz_analysis", 20261201, 1 << 17, mutate);
}
#endif
