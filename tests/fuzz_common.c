/* fuzz_common.c: see fuzz_common.h. */
#include "fuzz_common.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char fz_dir[64];
FILE *fz_null;

static void remove_dir(void)
{
    DIR *d = opendir(fz_dir);
    if (d) {
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char p[384];
            snprintf(p, sizeof p, "%s/%s", fz_dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(fz_dir);
}

int fz_init(const char *tag)
{
    if (fz_null)
        return 0;
    const char *tmp = getenv("TMPDIR");
    snprintf(fz_dir, sizeof fz_dir, "%.40s/pp_fuzz_%.4s_XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    if (!mkdtemp(fz_dir))
        return -1;
    fz_null = fopen("/dev/null", "w");
    if (!fz_null)
        return -1;
    atexit(remove_dir);
    return 0;
}

void fz_write_file(const char *path, const uint8_t *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(d, 1, n, f) != n))
        abort();
    fclose(f);
}

int fz_load_dir(const char *tool, const char *dir, fz_input *ins, int cap)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "%s: cannot open %s\n", tool, dir);
        return -1;
    }
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < cap;) {
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

int fz_sweep(const fz_input *ins, int n, long iters, uint64_t seed, size_t buf_cap,
             fz_mutator mutate)
{
    for (int i = 0; i < n; i++)
        LLVMFuzzerTestOneInput(ins[i].d, ins[i].n);
    uint8_t *buf = malloc(buf_cap);
    if (!buf)
        return 3;
    pp_rng g;
    pp_rng_seed(&g, seed);
    for (long i = 0; i < iters; i++) {
        size_t len = mutate(&g, &ins[i % n], buf, buf_cap);
        LLVMFuzzerTestOneInput(buf, len);
    }
    free(buf);
    return 0;
}

void fz_inputs_free(fz_input *ins, int n)
{
    for (int i = 0; i < n; i++)
        free(ins[i].d);
}

int fz_replay(const char *tool, char **files, int n)
{
    for (int i = 0; i < n; i++) {
        char *d = NULL;
        size_t len = 0;
        if (pp_read_file(files[i], &d, &len) != PP_OK) {
            fprintf(stderr, "%s: %s\n", tool, pp_error_message());
            return 2;
        }
        LLVMFuzzerTestOneInput((const uint8_t *)d, len);
        free(d);
        printf("%s: ok\n", files[i]);
    }
    return 0;
}

int fz_dir_main(int argc, char **argv, const char *tool, uint64_t seed, size_t buf_cap,
                fz_mutator mutate)
{
    if (argc == 4 && strcmp(argv[1], "--selftest") == 0) {
        long iters = strtol(argv[2], NULL, 10);
        fz_input ins[64];
        int n = fz_load_dir(tool, argv[3], ins, 64);
        if (n <= 0) {
            fprintf(stderr, "%s: no inputs in %s\n", tool, argv[3]);
            return 2;
        }
        int rc = fz_sweep(ins, n, iters, seed, buf_cap, mutate);
        if (rc == 0)
            printf("%s: %d inputs and %ld deterministic mutations without fault\n", tool, n,
                   iters);
        fz_inputs_free(ins, n);
        return rc;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: %s --selftest N DIR | FILE...\n", tool);
        return 2;
    }
    return fz_replay(tool, argv + 1, argc - 1);
}

void fz_mutate_json_text(pp_rng *g, uint8_t *t, size_t len, int number)
{
    if (len == 0)
        return;
    size_t at = (size_t)pp_rng_below(g, len);
    if (!number) {
        static const char bytes[] = "{}[]\",:0123456789-+.eE \\nul,";
        t[at] = (uint8_t)bytes[pp_rng_below(g, sizeof bytes - 1)];
        return;
    }
    static const char *const vals[] = {"1e300", "-1",         "0",          "9e15",
                                       "1e-300", "-0",        "2147483648", "4294967296",
                                       "1e999", "100000",     "65"};
    while (at < len && (t[at] < '0' || t[at] > '9'))
        at++;
    size_t end = at;
    while (end < len && t[end] >= '0' && t[end] <= '9')
        end++;
    const char *v = vals[pp_rng_below(g, sizeof vals / sizeof vals[0])];
    size_t vl = strlen(v);
    if (end > at && vl <= end - at) {
        memcpy(t + at, v, vl);
        memset(t + at + vl, ' ', end - at - vl);
    }
}
