/* fuzz_common.h: what the fuzz targets (tests/fuzz_*.c) share.
 *   - tests/fuzz_common.c (pp_common only): a scratch directory for the files an input becomes,
 *     writing them, and the standalone drivers' parts (-DPP_FUZZ_STANDALONE: the committed
 *     inputs of a directory, the seed run and deterministic mutation sweep over them, the replay
 *     of FILE...);
 *   - tests/fuzz_analyze.c (the analyzer too): the whole analysis of some traces and every
 *     report of it, with the failure contract checked.
 * Each target keeps its own input format, mutations and LLVMFuzzerTestOneInput. */
#ifndef PP_FUZZ_COMMON_H
#define PP_FUZZ_COMMON_H

#include "pp_common.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The scratch directory ($TMPDIR or /tmp, "pp_fuzz_<tag>_XXXXXX") and /dev/null open for
 * writing, made by the first fz_init (later calls do nothing); the directory and every file in
 * it are removed at exit. fz_init returns 0, or -1 when either cannot be made. */
extern char fz_dir[64];
extern FILE *fz_null;
int fz_init(const char *tag);
/* Writes n bytes to path; aborts when it cannot (the harness, not the input, is broken). */
void fz_write_file(const char *path, const uint8_t *d, size_t n);

/* The analysis of the n traces (options o, may be NULL), as pprof-report and pprof-tune run it:
 * a failure must hand out nothing and say why; a success has every number it hands out read
 * (so the sanitizers see one that is off), then the text, JSON, Chrome and Gantt reports and
 * the tuner's extraction. Aborts on a broken contract. In tests/fuzz_analyze.c. */
struct pp_analysis_options;
void fz_analyze(const char *const *paths, size_t n, const struct pp_analysis_options *o);

/* ---- the standalone drivers ---- */

typedef struct fz_input {
    uint8_t *d;
    size_t n;
} fz_input;

/* One deterministic mutation of in into out (capacity cap); returns the new length. */
typedef size_t (*fz_mutator)(pp_rng *g, const fz_input *in, uint8_t *out, size_t cap);

/* One mutation of the JSON text t[0..len) at a random place: with number == 0 a byte changed to
 * one JSON cares about; else the next digit run replaced in place by a hostile number of the same
 * width or less (1e300, -1, 2^31, 2^32, 1e999, ...). The cost, plan and analysis-option targets
 * share it and add their own kinds. */
void fz_mutate_json_text(pp_rng *g, uint8_t *t, size_t len, int number);

/* Reads the files of dir (not the hidden ones) into ins, at most cap; returns how many, or -1
 * (said on stderr, prefixed with `tool`) when dir cannot be opened. */
int fz_load_dir(const char *tool, const char *dir, fz_input *ins, int cap);
/* Runs each of the n (> 0) inputs, then `iters` mutations of them in turn (an rng seeded with seed,
 * a buffer of buf_cap bytes). Returns 0, or 3 when the buffer cannot be had. */
int fz_sweep(const fz_input *ins, int n, long iters, uint64_t seed, size_t buf_cap,
             fz_mutator mutate);
void fz_inputs_free(fz_input *ins, int n);
/* Runs each of files[0..n-1], printing "FILE: ok"; returns 0, or 2 when one cannot be read
 * (said on stderr, prefixed with `tool`). */
int fz_replay(const char *tool, char **files, int n);
/* The main of a target whose seeds are one directory: `--selftest N DIR` (fz_load_dir, at most
 * 64 inputs, then fz_sweep with this rng seed, buffer size and mutator) or `FILE...`
 * (fz_replay). Returns the exit status. */
int fz_dir_main(int argc, char **argv, const char *tool, uint64_t seed, size_t buf_cap,
                fz_mutator mutate);

#endif /* PP_FUZZ_COMMON_H */
