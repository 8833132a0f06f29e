/* fuzz_kineto.c: fuzz target for the PyTorch profiler (Kineto) importer and what follows it:
 * the streaming JSON tokenizer and the converter (analyzer/kineto_json.c, kineto.c), then the
 * whole analysis of the converted traces and its reports, as pprof-report does with a
 * directory of torch traces. Built two ways, like fuzz_analysis.c:
 *   - by scripts/fuzz.sh with clang -fsanitize=fuzzer,address,undefined: libFuzzer's main;
 *   - with -DPP_FUZZ_STANDALONE (tests/CMakeLists.txt): a driver that replays files (FILE...),
 *     writes seeds (--seeds OUT DIR...: the heads of the traces of DIR..., gunzipped, cut at an
 *     event and closed), or runs those seeds and a deterministic mutation sweep over them
 *     (--selftest N DIR..., a CTest regression test).
 *
 * An input is up to two traces (ranks) separated by a NUL byte. The analysis of the converted
 * traces and every report of it: fz_analyze (tests/fuzz_common.h). */
#include "fuzz_common.h"

#include "pp_kineto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fz_init("kt") != 0)
        abort();
    const uint8_t *nul = memchr(data, 0, size);
    size_t len[2] = {nul ? (size_t)(nul - data) : size, nul ? size - (size_t)(nul - data) - 1 : 0};
    const uint8_t *part[2] = {data, nul ? nul + 1 : NULL};
    char paths[2][96];
    const char *ok[2];
    size_t n = 0;
    for (int i = 0; i < (nul ? 2 : 1); i++) {
        snprintf(paths[i], sizeof paths[i], "%s/r%d.pft", fz_dir, i);
        unlink(paths[i]);
        pp_kineto_options o;
        pp_kineto_options_default(&o);
        o.default_rank = i;
        o.reorder_window = 64; /* small, so that the window's edge is reached */
        pp_kineto_stats s;
        pp_error_clear();
        pp_status st = pp_kineto_convert_mem(part[i], len[i], paths[i], &o, &s);
        if (st != PP_OK) {
            if (!pp_error_message()[0] || access(paths[i], F_OK) == 0)
                abort(); /* a refusal says why and leaves nothing */
            continue;
        }
        ok[n++] = paths[i];
    }
    if (n)
        fz_analyze(ok, n, NULL);
    return 0;
}

#ifdef PP_FUZZ_STANDALONE
/* ======================================================================================== */
/* Standalone driver                                                                         */
/* ======================================================================================== */

#include <dirent.h>
#include <zlib.h>

enum { SEED_BYTES = 48 * 1024, MAX_INPUTS = 64 };

/* A file's first `cap` bytes, gunzipped (zlib reads plain files too). */
static char *head_of(const char *path, size_t cap, size_t *len)
{
    gzFile g = gzopen(path, "rb");
    if (!g)
        return NULL;
    char *b = malloc(cap + 1);
    int k = b ? gzread(g, b, (unsigned)cap) : -1;
    gzclose(g);
    if (k < 0) {
        free(b);
        return NULL;
    }
    *len = (size_t)k;
    return b;
}

/* The head of a trace as a seed: cut after the last complete event ("\n  }," in Kineto's
 * layout) and closed with "]}". */
static size_t close_seed(char *b, size_t n)
{
    for (size_t i = n; i-- > 4;)
        if (b[i] == ',' && b[i - 1] == '}' && b[i - 2] == ' ' && b[i - 3] == ' ' &&
            b[i - 4] == '\n') {
            memcpy(b + i, "]}", 2);
            return i + 2;
        }
    return n;
}

static int load_dirs(char **dirs, int nd, fz_input *ins, int cap, int as_seeds)
{
    int n = 0;
    for (int k = 0; k < nd; k++) {
        DIR *d = opendir(dirs[k]);
        if (!d) {
            fprintf(stderr, "fuzz_kineto: cannot open %s\n", dirs[k]);
            return -1;
        }
        for (struct dirent *e; (e = readdir(d)) != NULL && n < cap;) {
            if (e->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dirs[k], e->d_name);
            size_t len = 0;
            char *b = head_of(path, as_seeds ? SEED_BYTES : (1 << 20), &len);
            if (!b)
                continue;
            if (as_seeds && len == SEED_BYTES)
                len = close_seed(b, len);
            ins[n++] = (fz_input){(uint8_t *)b, len};
        }
        closedir(d);
    }
    return n;
}

/* A few edits of the kinds that break JSON in interesting ways. */
static size_t mutate(pp_rng *g, const fz_input *in, uint8_t *out, size_t cap)
{
    static const char *const toks[] = {"\"", "{", "}", "[", "]", ",", ":", "NaN", "-Infinity",
                                       "1e999", "-1", "18446744073709551617", "\\u", "\\ud800",
                                       "null", "\"ph\":\"X\"", "\"dur\":-1", "\"tid\":\"x\"",
                                       "\"cat\":\"kernel\"", "\"correlation\":4294967295",
                                       "\"ts\":1e300", "[[[[[[[[", "\0", "\"ph\":\"B\"",
                                       "\"ph\":\"E\"", "\"cat\":\"pipeline timeline\"",
                                       "\"name\":\"F7_VP63\"", "}\n{"};
    size_t n = in->n < cap ? in->n : cap;
    memcpy(out, in->d, n);
    int steps = 1 + (int)pp_rng_below(g, 4);
    for (int s = 0; s < steps && n > 2; s++) {
        size_t at = (size_t)pp_rng_below(g, n);
        switch (pp_rng_below(g, 4)) {
        case 0: out[at] = (uint8_t)pp_rng_below(g, 256); break;
        case 1: { /* insert a token */
            const char *t = toks[pp_rng_below(g, sizeof toks / sizeof toks[0])];
            size_t tl = t[0] ? strlen(t) : 1;
            if (n + tl <= cap) {
                memmove(out + at + tl, out + at, n - at);
                memcpy(out + at, t, tl);
                n += tl;
            }
            break;
        }
        case 2: { /* delete a stretch */
            size_t k = 1 + (size_t)pp_rng_below(g, 64);
            if (at + k > n)
                k = n - at;
            memmove(out + at, out + at + k, n - at - k);
            n -= k;
            break;
        }
        default: n = at; break; /* cut */
        }
    }
    return n;
}

static int selftest(long iters, char **dirs, int nd)
{
    fz_input ins[MAX_INPUTS];
    int n = load_dirs(dirs, nd, ins, MAX_INPUTS, 1);
    if (n <= 0) {
        fprintf(stderr, "fuzz_kineto: no inputs\n");
        return 2;
    }
    int rc = fz_sweep(ins, n, iters, 20261201, SEED_BYTES + 4096, mutate);
    if (rc == 0)
        printf("fuzz_kineto: %d seeds and %ld deterministic mutations converted and analyzed "
               "without fault\n", n, iters);
    fz_inputs_free(ins, n);
    return rc;
}

static int write_seeds(const char *out, char **dirs, int nd)
{
    fz_input ins[MAX_INPUTS];
    int n = load_dirs(dirs, nd, ins, MAX_INPUTS, 1);
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/seed%02d.json", out, i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(ins[i].d, 1, ins[i].n, f) != ins[i].n)
            return 3;
        fclose(f);
        free(ins[i].d);
    }
    printf("fuzz_kineto: %d seeds written to %s\n", n, out);
    return n > 0 ? 0 : 2;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "--selftest") == 0)
        return selftest(strtol(argv[2], NULL, 10), argv + 3, argc - 3);
    if (argc >= 4 && strcmp(argv[1], "--seeds") == 0)
        return write_seeds(argv[2], argv + 3, argc - 3);
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz_kineto --selftest N DIR... | --seeds OUT DIR... | FILE...\n");
        return 2;
    }
    return fz_replay("fuzz_kineto", argv + 1, argc - 1);
}
#endif
