/* bench_rebalance: how long the rebalancer (analyzer/rebalance.c, pp_rebalance) takes on a
 * GPT-like model of L = 128 layers over S = 16 stages, whether it proves its answer optimal or
 * how large the proven gap is, and how much faster than the even split its proposal simulates.
 * Checks each proposal's step time against pp_sim_file before printing. Prints numbers
 * measured in this run; asserts no time.
 *   bench_rebalance [--budget SECONDS] [--layers 128] [--stages 16] [--row N] [--moves]
 * --row N runs only the N-th row of the table (0-based, in the order printed). --moves times,
 * instead, a fixed amount of the search's work: the local moves (pp_rebalance_moves) from the
 * even split of interleaved v = 2, 3, 4, simulating every move and with the chains' test, best
 * of five; the time per simulated partition is the evaluator's speed. */
#include "pp_common.h"
#include "pp_sim.h"
#include "pp_tune.h"

#include <getopt.h>
#include <time.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Embedding (a tenth of a block), L - 2 transformer blocks, LM head (five blocks' compute, the
 * vocabulary projection's parameters). Per micro-batch: block forward 1 ms, backward 2 ms split
 * evenly into B and W; activations 2 MiB between layers; 20 GB/s links, 15 us latency. */
static pp_costs *gpt_costs(int L)
{
    pp_costs *c = NULL;
    if (pp_costs_uniform(L, 1000, 2000, 2u << 20, &c) != PP_OK)
        return NULL;
    for (int l = 0; l < L; l++)
        c->layers[l].param_bytes = 14u << 20;
    pp_layer_cost *emb = &c->layers[0], *head = &c->layers[L - 1];
    emb->fwd_us = 100;
    emb->bwd_us = 200;
    emb->bwd_input_us = 100;
    emb->bwd_weight_us = 100;
    emb->param_bytes = 96u << 20;
    head->fwd_us = 5000;
    head->bwd_us = 10000;
    head->bwd_input_us = 5000;
    head->bwd_weight_us = 5000;
    head->param_bytes = 96u << 20;
    head->activation_bytes = 0;
    c->p2p_GBps = 20;
    c->p2p_latency_us = 15;
    c->optimizer_us = 500;
    return c;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* --moves: the local moves from the even split, a fixed amount of work, best of five. */
static int bench_moves(const pp_costs *c, int L, int S)
{
    printf("%-12s %3s %2s %-7s %9s %9s %10s %10s\n", "moves", "M", "v", "chains", "simulated",
           "best s", "us/sim", "end ms");
    for (int v = 2; v <= 4; v++) {
        pp_rebalance_opts o = {.kind = PP_SCHED_INTERLEAVED, .S = S, .v = v, .M = 32, .costs = c};
        pp_partition even;
        if (pp_partition_even(L, S, v, &even) != PP_OK) {
            fprintf(stderr, "bench_rebalance: %s\n", pp_error_message());
            return 3;
        }
        for (int chains = 0; chains <= 1; chains++) {
            double best = INFINITY, step = 0.0;
            int64_t n = 0;
            for (int rep = 0; rep < 5; rep++) {
                pp_partition out;
                double t0 = now_s();
                if (pp_rebalance_moves(&o, &even, chains, &out, &step, &n) != PP_OK) {
                    fprintf(stderr, "bench_rebalance: %s\n", pp_error_message());
                    pp_partition_free(&even);
                    return 3;
                }
                best = fmin(best, now_s() - t0);
                pp_partition_free(&out);
            }
            printf("%-12s %3d %2d %-7s %9lld %9.4f %10.2f %10.3f\n", "interleaved", 32, v,
                   chains ? "yes" : "no", (long long)n, best, best * 1e6 / (double)n, step * 1e-6);
        }
        pp_partition_free(&even);
    }
    return 0;
}

typedef struct cfg {
    pp_schedule_kind kind;
    int M, v;
    double mem_fraction; /* limit as a fraction of the unconstrained proposal's peak; 0 = none */
} cfg;

int main(int argc, char **argv)
{
    double budget = 5.0;
    int L = 128, S = 16, only = -1, dp = 1, moves = 0;
    static const struct option opts[] = {{"budget", required_argument, NULL, 'b'},
                                         {"dp", required_argument, NULL, 'd'},
                                         {"layers", required_argument, NULL, 'L'},
                                         {"stages", required_argument, NULL, 'S'},
                                         {"row", required_argument, NULL, 'r'},
                                         {"moves", no_argument, NULL, 'm'},
                                         {NULL, 0, NULL, 0}};
    for (int ch; (ch = getopt_long(argc, argv, "b:d:L:S:r:m", opts, NULL)) != -1;) {
        switch (ch) {
        case 'b': budget = atof(optarg); break;
        case 'd': dp = atoi(optarg); break;
        case 'L': L = atoi(optarg); break;
        case 'S': S = atoi(optarg); break;
        case 'r': only = atoi(optarg); break;
        case 'm': moves = 1; break;
        default:
            fprintf(stderr, "usage: bench_rebalance [--budget s] [--dp N] [--layers L] [--stages S] "
                            "[--row N] [--moves]\n");
            return 2;
        }
    }
    if (dp < 1 || dp > 1 << 20) {
        fprintf(stderr, "bench_rebalance: --dp must be 1 to 2^20, got %d\n", dp);
        return 2;
    }
    pp_costs *c = gpt_costs(L);
    if (!c) {
        fprintf(stderr, "bench_rebalance: %s\n", pp_error_message());
        return 3;
    }
    if (dp > 1) {
        /* each stage's gradients all-reduced over dp replicas by a ring on the same links:
         * 2 (dp - 1) messages of its parameters / dp (docs/cost-file.md) */
        c->dp_allreduce_us = 2.0 * (dp - 1) * c->p2p_latency_us;
        c->dp_allreduce_us_per_MB = 2.0 * (dp - 1) / dp * 1e6 / (c->p2p_GBps * 1e3);
    }
    if (moves) {
        int mrc = bench_moves(c, L, S);
        pp_costs_destroy(c);
        return mrc;
    }
    static const cfg cfgs[] = {
        {PP_SCHED_1F1B, 32, 1, 0},    {PP_SCHED_1F1B, 64, 1, 0},
        {PP_SCHED_GPIPE, 32, 1, 0},   {PP_SCHED_ZBH1, 32, 1, 0},
        {PP_SCHED_1F1B, 32, 1, 0.9},  {PP_SCHED_INTERLEAVED, 32, 2, 0},
        {PP_SCHED_INTERLEAVED, 32, 3, 0}, {PP_SCHED_INTERLEAVED, 32, 4, 0},
    };
    printf("GPT-like model, L = %d layers (embedding, %d blocks, head = 5 blocks), S = %d, "
           "budget %.1f s per search, one core",
           L, L - 2, S, budget);
    if (dp > 1)
        printf("; %d data-parallel replicas: all-reduce %.1f us + %.2f us per MB per stage", dp,
               c->dp_allreduce_us, c->dp_allreduce_us_per_MB);
    printf("\n");
    printf("%-12s %3s %2s %-10s %8s %9s %9s %-14s %10s %10s %8s\n", "schedule", "M", "v",
           "mem limit", "time s", "simulated", "nodes", "result", "even ms", "best ms",
           "speedup");
    int rc = 0;
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        if (only >= 0 && (size_t)only != i)
            continue;
        const cfg *k = &cfgs[i];
        pp_rebalance_opts o = {.kind = k->kind, .S = S, .v = k->v, .M = k->M, .costs = c,
                               .time_budget_s = budget};
        char lim[32] = "none";
        if (k->mem_fraction > 0) {
            /* a limit below what the unconstrained proposal needs */
            pp_rebalance_result r0;
            if (pp_rebalance(&o, &r0) != PP_OK) {
                fprintf(stderr, "bench_rebalance: %s\n", pp_error_message());
                rc = 3;
                continue;
            }
            uint64_t peak = 0;
            for (int s = 0; s < S; s++)
                peak = r0.stage_memory_bytes[s] > peak ? r0.stage_memory_bytes[s] : peak;
            pp_rebalance_result_free(&r0);
            o.memory_limit_bytes = (uint64_t)(k->mem_fraction * (double)peak);
            snprintf(lim, sizeof lim, "%.2f GiB", (double)o.memory_limit_bytes / (1 << 30));
        }
        pp_rebalance_result r;
        if (pp_rebalance(&o, &r) != PP_OK) {
            fprintf(stderr, "bench_rebalance: %s\n", pp_error_message());
            rc = 3;
            continue;
        }
        pp_sim_result sr;
        if (pp_sim_file(k->kind, &r.partition, k->M, c, NULL, &sr) != PP_OK ||
            sr.step_ns != r.step_ns) {
            fprintf(stderr, "bench_rebalance: proposal's step time disagrees with pp_sim\n");
            rc = 3;
        }
        pp_sim_result_free(&sr);
        char res[32];
        if (r.exact)
            snprintf(res, sizeof res, "optimal");
        else
            snprintf(res, sizeof res, "gap <= %.3f%%", 100 * (r.step_ns / r.lower_bound_ns - 1));
        printf("%-12s %3d %2d %-10s %8.3f %9lld %9lld %-14s %10.3f %10.3f %7.3fx\n",
               pp_schedule_kind_name(k->kind), k->M, k->v, lim, r.seconds,
               (long long)r.evaluated, (long long)r.nodes, res, r.even_step_ns * 1e-6,
               r.step_ns * 1e-6, r.even_step_ns / r.step_ns);
        char buf[1024];
        pp_partition_format(&r.partition, buf, sizeof buf);
        printf("    boundaries %s\n", buf);
        pp_rebalance_result_free(&r);
    }
    pp_costs_destroy(c);
    return rc;
}
