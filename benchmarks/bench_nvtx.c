/* bench_nvtx: what one annotated range (pp_nvtx_push + pp_nvtx_pop, runtime/nvtx.c) costs a job
 * with no NVTX tool attached, next to an empty loop of the same shape, and how that compares
 * with the operations it annotates. Prints numbers measured in this run; asserts nothing. The
 * cost with a tool attached is the profiler's to measure.
 *   bench_nvtx [--iters 10000000] [--repeats 5] */
#include "pp_common.h"
#include "pp_nvtx.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

/* Keeps the compiler from folding the empty loop (and its stores to *p) away, at no run-time
 * cost. */
#define BARRIER(p) __asm__ __volatile__("" : : "r"(p) : "memory")

static const char *const k_layers[] = {"embedding", "block0", "block1", "block2", "block3",
                                       "head"};

static double loop_annotated(long iters)
{
    pp_nvtx_info in = pp_nvtx_info_none();
    in.step = 1;
    in.stage = 1;
    in.chunk = 0;
    uint64_t t0 = pp_now_ns();
    for (long i = 0; i < iters; i++) {
        in.mb = (int32_t)(i & 7);
        in.layer = (int32_t)(i % 6);
        pp_nvtx_push(PP_NVTX_LAYER_FWD, &in);
        pp_nvtx_pop();
    }
    return (double)(pp_now_ns() - t0) / (double)iters;
}

static double loop_empty(long iters)
{
    pp_nvtx_info in = pp_nvtx_info_none();
    in.step = 1;
    in.stage = 1;
    in.chunk = 0;
    uint64_t t0 = pp_now_ns();
    for (long i = 0; i < iters; i++) {
        in.mb = (int32_t)(i & 7);
        in.layer = (int32_t)(i % 6);
        BARRIER(&in);
        BARRIER(&in);
    }
    return (double)(pp_now_ns() - t0) / (double)iters;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long iters = 10000000;
    int repeats = 5;
    static const struct option opts[] = {{"iters", required_argument, 0, 'n'},
                                         {"repeats", required_argument, 0, 'r'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'n': iters = atol(optarg); break;
        case 'r': repeats = atoi(optarg); break;
        case 'h':
            printf("usage: bench_nvtx [--iters N] [--repeats R]\n");
            return 0;
        default: fprintf(stderr, "usage: bench_nvtx [--iters N] [--repeats R]\n"); return 2;
        }
    }
    if (iters < 1 || repeats < 1 || repeats > 100) {
        fprintf(stderr, "bench_nvtx: --iters must be >= 1 and --repeats in 1..100\n");
        return 2;
    }
    /* No tool: NVTX reads this variable on its first call, which is the setup below. */
    unsetenv("NVTX_INJECTION64_PATH");

    uint64_t t0 = pp_now_ns();
    pp_nvtx_setup(4, 8, 1, (int)(sizeof k_layers / sizeof k_layers[0]), k_layers);
    double setup_us = (double)(pp_now_ns() - t0) / 1e3;

    double ann[100], emp[100], net[100];
    loop_annotated(iters / 10 + 1); /* warm-up */
    loop_empty(iters / 10 + 1);
    for (int r = 0; r < repeats; r++) {
        ann[r] = loop_annotated(iters);
        emp[r] = loop_empty(iters);
        net[r] = ann[r] - emp[r];
    }
    qsort(ann, (size_t)repeats, sizeof ann[0], cmp_double);
    qsort(emp, (size_t)repeats, sizeof emp[0], cmp_double);
    qsort(net, (size_t)repeats, sizeof net[0], cmp_double);
    double med = net[repeats / 2];

    printf("bench_nvtx: NVTX annotations %s, no tool attached\n",
           pp_nvtx_compiled_in() ? "compiled in"
                                 : "NOT compiled in (no NVTX headers: no-op calls)");
    printf("  setup (first NVTX call, domain + schema)  %10.2f us\n", setup_us);
    printf("  %ld ranges x %d repeats (median, [min..max])\n", iters, repeats);
    printf("  annotated loop (push + pop)  %8.3f ns/iter [%.3f..%.3f]\n", ann[repeats / 2], ann[0],
           ann[repeats - 1]);
    printf("  empty loop, same shape       %8.3f ns/iter [%.3f..%.3f]\n", emp[repeats / 2], emp[0],
           emp[repeats - 1]);
    printf("  cost per annotated range     %8.3f ns [%.3f..%.3f]\n", med, net[0],
           net[repeats - 1]);
    printf("  next to a 1 ms operation     %8.6f %%\n", med / 1e6 * 100.0);
    printf("  next to a 0.1 ms layer op    %8.6f %%  (the tiny model's typical per-layer op)\n",
           med / 1e5 * 100.0);
    return 0;
}
