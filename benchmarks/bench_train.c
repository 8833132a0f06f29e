/* bench_train: CPU training throughput of a model preset and the share of step time spent in
 * GEMMs (OpenBLAS) versus everything else (plain-C kernels, data, optimizer). Prints numbers
 * measured in this run; asserts nothing.
 *   bench_train [--model small] [--batch 4] [--steps 5] [--microbatches 1] */
#include "bench_train_args.h"
#include "pp_kernels.h"
#include "pp_runtime.h"

#include <getopt.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    bench_train_args a = {.preset = "small", .batch = 4, .micro = 1, .steps = 5};
    static const struct option opts[] = {BENCH_TRAIN_OPTIONS, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (!bench_train_arg(&a, c, optarg)) {
            fprintf(stderr, "usage: bench_train [--model P] [--batch B] [--steps N]\n");
            return 2;
        }
    }
    const char *preset = a.preset;
    int batch = a.batch, steps = a.steps, micro = a.micro;
    pp_train_config tc;
    pp_status st = bench_train_config(&a, &tc);
    if (st != PP_OK) {
        fprintf(stderr, "bench_train: %s\n", pp_error_message());
        return 2;
    }
    pp_data *d = NULL;
    pp_trainer *t = NULL;
    if ((st = pp_data_markov_create(tc.model.vocab_size, 4, 1, &d)) != PP_OK ||
        (st = pp_trainer_create(&tc, d, &t)) != PP_OK) {
        fprintf(stderr, "bench_train: %s\n", pp_error_message());
        return pp_status_exit_code(st);
    }
    pp_step_stats s;
    /* One step first: page faults of the fresh buffers and OpenBLAS thread start-up. */
    if (pp_trainer_step(t, &s) != PP_OK) {
        fprintf(stderr, "bench_train: %s\n", pp_error_message());
        return 3;
    }
    pp_kernels_stats_reset();
    pp_kernels_stats_enable(1);
    uint64_t t0 = pp_now_ns();
    for (int i = 0; i < steps; i++)
        if (pp_trainer_step(t, &s) != PP_OK) {
            fprintf(stderr, "bench_train: %s\n", pp_error_message());
            return 3;
        }
    double secs = (double)(pp_now_ns() - t0) * 1e-9;
    pp_kernel_stats ks = pp_kernels_stats_get();
    double tokens = (double)steps * batch * tc.model.seq_len;
    double gemm_s = (double)ks.gemm_ns * 1e-9;
    printf("model %s (%zu params), batch %d x %d tokens, %d micro-batch(es), %d timed steps\n",
           preset, pp_model_config_num_params(&tc.model), batch, tc.model.seq_len, micro, steps);
    printf("  step time        %10.1f ms\n", secs / steps * 1e3);
    printf("  throughput       %10.0f tokens/s\n", tokens / secs);
    printf("  GEMM time share  %10.1f %%  (%llu GEMM calls)\n", 100.0 * gemm_s / secs,
           (unsigned long long)ks.gemm_calls);
    printf("  GEMM rate        %10.2f GFLOP/s while in GEMM\n",
           gemm_s > 0 ? (double)ks.gemm_flops / gemm_s * 1e-9 : 0.0);
    printf("  non-GEMM time    %10.1f ms per step\n", (secs - gemm_s) / steps * 1e3);
    printf("  final loss       %10.4f\n", (double)s.loss);
    pp_trainer_destroy(t);
    return 0;
}
