/* fuzz_dialect.c: fuzz target for dialect files (analyzer/dialect.c: the JSON, the pattern
 * compiler and matcher) and the whole analysis of a trace with that dialect (decode.c's dialect
 * path: the cache, "rank" and "sequence", torch stage ids, the bounds). Built two ways, as
 * tests/fuzz_analysis.c is:
 *   - by scripts/fuzz.sh with clang -fsanitize=fuzzer,address,undefined: libFuzzer's main;
 *   - with -DPP_FUZZ_STANDALONE (tests/CMakeLists.txt): a driver replaying FILE... or running
 *     the seeds of DIR and a deterministic mutation sweep over them (--selftest N DIR).
 *
 * An input is a dialect file's text, a NUL byte, then one .pft trace (its checksums recomputed
 * so that mutations reach the records). Without a NUL the whole input is the dialect file, and
 * its rules are matched against a fixed list of names. The analysis and every report of it run
 * as in tests/fuzz_analysis.c (fz_analyze, tests/fuzz_common.h). */
#include "fuzz_common.h"

#include "pp_analyzer.h"
#include "pp_dialect.h"
#include "pp_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Matches every rule of d against names of the kinds pipelines use, and hostile ones. */
static void match_names(const pp_dialect *d)
{
    static const char *const names[] = {
        "forward-compute", "backward-compute", "forward-backward", "PP:1F0", "PP:12B3",
        "PP:99999999999F1", "layer3 attn", "Forward 1", "Forward -1", "x{mb}y", "", "{{",
        "PipelineEngine._exec_forward_pass", "a.b.c._exec_backward_pass", "fwd 999999999999999999999",
        "optimizer", "all-grads-sync", "PipelineEngine._exec_optimizer_step", "step_microstep",
        "Optimizer.step#SGD.step", "_optimizer_step"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        pp_dialect_match m;
        if (pp_dialect_match_name(d, "", names[i], &m) && m.kind >= PP_NVTX_KIND_COUNT)
            abort();
        pp_dialect_match_name(d, "dom", names[i], &m);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fz_init("di") != 0)
        abort();
    const uint8_t *nul = memchr(data, 0, size);
    size_t dlen = nul ? (size_t)(nul - data) : size;
    char *text = malloc(dlen + 1);
    if (!text)
        return 0;
    memcpy(text, data, dlen);
    text[dlen] = '\0';
    pp_error_clear();
    pp_dialect *d = NULL;
    pp_status st = pp_dialect_parse(text, "fuzz.json", &d);
    if ((st == PP_OK) != (d != NULL) || (st != PP_OK && !pp_error_message()[0]))
        abort(); /* a failure hands out nothing and says why */
    if (d)
        match_names(d);
    pp_dialect_destroy(d);
    if (!nul || st != PP_OK) {
        free(text);
        return 0;
    }
    char dpath[96], tpath[96];
    snprintf(dpath, sizeof dpath, "%s/d.json", fz_dir);
    snprintf(tpath, sizeof tpath, "%s/t.pft", fz_dir);
    fz_write_file(dpath, (const uint8_t *)text, dlen);
    free(text);
    size_t tlen = size - dlen - 1;
    uint8_t *copy = malloc(tlen ? tlen : 1);
    if (!copy)
        return 0;
    if (tlen)
        memcpy(copy, nul + 1, tlen);
    pp_trace_repair_checksums(copy, tlen);
    fz_write_file(tpath, copy, tlen);
    free(copy);
    pp_analysis_options o;
    pp_analysis_options_default(&o);
    o.dialect_file = dpath;
    const char *paths[] = {tpath};
    fz_analyze(paths, 1, &o);
    return 0;
}

#ifdef PP_FUZZ_STANDALONE
/* ======================================================================================== */
/* Standalone driver: replay, and a deterministic mutation sweep over a directory's inputs.  */
/* ======================================================================================== */

/* One deterministic mutation: in the dialect text (a byte changed to one JSON and the pattern
 * language care about, or a cut), or in the trace (a flipped byte, a large 32-bit value). */
static size_t mutate(pp_rng *g, const fz_input *in, uint8_t *out, size_t cap)
{
    size_t n = in->n < cap ? in->n : cap;
    memcpy(out, in->d, n);
    const uint8_t *nul = memchr(out, 0, n);
    size_t dlen = nul ? (size_t)(nul - out) : n;
    int steps = 1 + (int)pp_rng_below(g, 3);
    for (int s = 0; s < steps && n > 8; s++) {
        if (pp_rng_below(g, 2) == 0 && dlen > 0) {
            static const char bytes[] = "{}[]\",:*0123456789-_ aZ\\";
            size_t at = (size_t)pp_rng_below(g, dlen);
            out[at] = (uint8_t)bytes[pp_rng_below(g, sizeof bytes - 1)];
        } else if (n > dlen + 9) {
            size_t at = dlen + 1 + (size_t)pp_rng_below(g, n - dlen - 1);
            if (pp_rng_below(g, 2) == 0) {
                out[at] ^= (uint8_t)(1u << pp_rng_below(g, 8));
            } else {
                static const uint32_t vals[] = {0, 1, 0x7FFFFFFF, 0xFFFFFFFF, 4096, 65536};
                at &= ~(size_t)3;
                if (at + 4 <= n && at > dlen) {
                    uint32_t v = vals[pp_rng_below(g, sizeof vals / sizeof vals[0])];
                    memcpy(out + at, &v, 4);
                }
            }
        }
    }
    return n;
}

int main(int argc, char **argv)
{
    return fz_dir_main(argc, argv, "fuzz_dialect", 20261216, 1 << 18, mutate);
}
#endif
