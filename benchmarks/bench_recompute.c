/* bench_recompute: what activation recomputation (pptrain --recompute) costs and saves on the cpu
 * backend: two pipelines of the same model and schedule, one without recomputation and one with
 * the given choice, stepped in alternation (so both see the same machine), each step timed;
 * prints the median step times, their ratio, and per stage the activation peak of each and its
 * ratio (the accounting of docs/executor.md "Memory"). Asserts nothing.
 *   bench_recompute [--model small] [--batch 8] [--microbatches 8] [--stages 1]
 *                   [--schedule gpipe] [--recompute full] [--steps 5] */
#include "bench_train_args.h"
#include "pp_exec.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static pp_status make(const pp_pipe_config *base, const char *rc, pp_pipe_config *pc,
                      pp_pipe_trainer **t)
{
    *pc = *base;
    pc->recompute = rc;
    pp_data *d = NULL;
    pp_status st = pp_data_markov_create(pc->train.model.vocab_size, 4, 1, &d);
    return st != PP_OK ? st : pp_pipe_trainer_create(pc, d, t);
}

int main(int argc, char **argv)
{
    bench_train_args a = {.preset = "small", .batch = 8, .micro = 8, .steps = 5};
    const char *rc = "full", *sched = "gpipe";
    int stages = 1;
    static const struct option opts[] = {{"stages", required_argument, 0, 'S'},
                                         {"schedule", required_argument, 0, 'k'},
                                         {"recompute", required_argument, 0, 'r'},
                                         BENCH_TRAIN_OPTIONS,
                                         {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (bench_train_arg(&a, c, optarg))
            continue;
        switch (c) {
        case 'S': stages = atoi(optarg); break;
        case 'k': sched = optarg; break;
        case 'r': rc = optarg; break;
        default:
            fprintf(stderr, "usage: bench_recompute [--model P] [--batch B] [--microbatches M] "
                            "[--stages S] [--schedule K] [--recompute R] [--steps N]\n");
            return 2;
        }
    }
    const char *preset = a.preset;
    int batch = a.batch, micro = a.micro, steps = a.steps;
    if (steps < 1 || steps > 100 || stages < 1 || stages > 64) {
        fprintf(stderr, "bench_recompute: --steps 1..100, --stages 1..64\n");
        return 2;
    }
    pp_pipe_config base;
    memset(&base, 0, sizeof base);
    pp_status st = bench_train_config(&a, &base.train);
    if (st == PP_OK)
        st = pp_schedule_kind_parse(sched, &base.schedule);
    base.backend = PP_BACKEND_CPU;
    base.v = base.schedule == PP_SCHED_INTERLEAVED ? 2 : 1;
    base.slow_stage = -1;
    int L = pp_model_config_num_layers(&base.train.model);
    if (st == PP_OK)
        st = pp_partition_even(L, stages, base.v, &base.partition);
    pp_pipe_config pc[2];
    pp_pipe_trainer *t[2] = {NULL, NULL};
    if (st == PP_OK)
        st = make(&base, "none", &pc[0], &t[0]);
    if (st == PP_OK)
        st = make(&base, rc, &pc[1], &t[1]);
    double ms[2][100];
    /* one untimed step each (page faults, OpenBLAS start-up), then alternate */
    for (int i = 0; i <= steps && st == PP_OK; i++)
        for (int k = 0; k < 2 && st == PP_OK; k++) {
            pp_step_stats s;
            st = pp_pipe_trainer_step(t[k], &s, NULL);
            if (i > 0)
                ms[k][i - 1] = s.step_ms;
        }
    if (st != PP_OK) {
        fprintf(stderr, "bench_recompute: %s\n", pp_error_message());
        pp_pipe_trainer_destroy(t[0]);
        pp_pipe_trainer_destroy(t[1]);
        pp_partition_free(&base.partition);
        return pp_status_exit_code(st);
    }
    double m0 = median(ms[0], steps), m1 = median(ms[1], steps);
    printf("model %s, %s, S=%d, M=%d, batch %d, --recompute %s, %d steps each (alternating)\n",
           preset, sched, stages, micro, batch, rc, steps);
    printf("step time (median): none %.1f ms, %s %.1f ms, ratio %.3f\n", m0, rc, m1, m1 / m0);
    for (int s = 0; s < stages; s++) {
        pp_stage_mem a, b;
        pp_pipe_trainer_memory(t[0], s, &a);
        pp_pipe_trainer_memory(t[1], s, &b);
        double a_act = (double)a.peak[PP_STAGE_MEM_ACTIVATIONS] / 1048576.0;
        double b_act = (double)b.peak[PP_STAGE_MEM_ACTIVATIONS] / 1048576.0;
        printf("stage %d: activation peak %.2f -> %.2f MiB (ratio %.3f); total peak %.2f -> "
               "%.2f MiB (ratio %.3f)\n",
               s, a_act, b_act, a_act > 0 ? b_act / a_act : 0.0,
               (double)a.peak_total / 1048576.0, (double)b.peak_total / 1048576.0,
               a.peak_total > 0 ? (double)b.peak_total / (double)a.peak_total : 0.0);
    }
    pp_pipe_trainer_destroy(t[0]);
    pp_pipe_trainer_destroy(t[1]);
    pp_partition_free(&base.partition);
    return 0;
}
