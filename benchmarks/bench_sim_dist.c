/* bench_sim_dist: the Monte Carlo predictor's replays per second (analyzer/sim_dist.c) against
 * pp_sim_run's noise-free replays per second, in the same run: S = 16, M = 32 by default, each
 * schedule, a fitted noise model of lognormal-like factors. Prints figures, asserts nothing. */
#include "pp_sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int S = 16, M = 32, reps = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--stages"))
            S = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--microbatches"))
            M = atoi(argv[i + 1]);
    }
    if (S < 1 || S > 256 || M < 1 || M > 4096 || M % S) {
        fprintf(stderr, "bench_sim_dist: --stages 1..256, --microbatches a multiple of S\n");
        return 2;
    }
    int L = 4 * S;
    pp_costs *c = NULL;
    if (pp_costs_uniform(L, 500, 1000, 1 << 20, &c) != PP_OK)
        return 3;
    c->p2p_latency_us = 20;
    c->p2p_GBps = 10;
    /* a model: per stage and kind 4096 factors with log-sd 0.1, a per-step part of 0.03 */
    enum { N = 4096 };
    double *d = malloc(N * sizeof *d);
    pp_rng rng;
    pp_rng_seed(&rng, 1);
    for (int i = 0; i < N; i++)
        d[i] = 1000 * exp(0.1 * pp_rng_normal(&rng));
    const double **smp = calloc((size_t)S * PP_SIM_NOISE_KINDS, sizeof *smp);
    uint32_t *ns = calloc((size_t)S * PP_SIM_NOISE_KINDS, sizeof *ns);
    for (int i = 0; i < S * PP_SIM_NOISE_KINDS; i++) {
        smp[i] = d;
        ns[i] = N;
    }
    pp_sim_noise_input in = {.S = S, .sample = smp, .n_sample = ns, .ops_per_step = M};
    pp_sim_noise noise;
    if (pp_sim_noise_fit(&in, &noise) != PP_OK)
        return 3;
    noise.sigma_step = 0.03;
    printf("bench_sim_dist: S = %d, M = %d, L = %d; best of %d\n", S, M, L, reps);
    printf("%-12s %14s %14s %8s %8s %12s %12s\n", "schedule", "pp_sim_run/s", "MC replays/s",
           "ratio", "replays", "median err", "p95 err");
    static const pp_schedule_kind kinds[] = {PP_SCHED_GPIPE, PP_SCHED_1F1B, PP_SCHED_INTERLEAVED,
                                             PP_SCHED_ZBH1};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        int v = kinds[k] == PP_SCHED_INTERLEAVED ? 2 : 1;
        pp_partition part;
        if (pp_partition_even(L, S, v, &part) != PP_OK)
            return 3;
        double best_sim = 0, best_mc = 0;
        pp_sim_dist_result r = {0};
        for (int rep = 0; rep < reps; rep++) {
            int n_sim = 500;
            pp_schedule *sc = NULL;
            if (pp_schedule_create(kinds[k], S, M, v, &sc) != PP_OK ||
                pp_schedule_validate(sc, NULL) != PP_OK)
                return 3;
            pp_sim_file_costs fc = {c, &part, NULL};
            pp_sim_costs costs;
            pp_sim_costs_from_file(&fc, &costs);
            double t0 = now_s();
            for (int i = 0; i < n_sim; i++) {
                pp_sim_result sr;
                if (pp_sim_run(sc, &costs, &sr) != PP_OK)
                    return 3;
                pp_sim_result_free(&sr);
            }
            double t1 = now_s();
            /* one call: its pp_sim_run and the recorded order included */
            pp_sim_dist_opts o = {.noise = &noise, .seed = 9, .n_min = 4000, .n_max = 4000};
            if (pp_sim_dist(sc, &costs, &o, &r) != PP_OK)
                return 3;
            double t2 = now_s();
            pp_schedule_destroy(sc);
            double sim_rate = n_sim / (t1 - t0), mc_rate = r.n / (t2 - t1);
            best_sim = sim_rate > best_sim ? sim_rate : best_sim;
            best_mc = mc_rate > best_mc ? mc_rate : best_mc;
        }
        printf("%-12s %14.0f %14.0f %7.2fx %8d %11.3f%% %11.3f%%\n",
               pp_schedule_kind_name(kinds[k]), best_sim, best_mc, best_mc / best_sim, r.n,
               100 * r.median_err, 100 * r.p95_err);
        pp_partition_free(&part);
    }
    pp_sim_noise_free(&noise);
    free(smp);
    free(ns);
    free(d);
    pp_costs_destroy(c);
    return 0;
}
