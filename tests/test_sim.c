/* test_sim.c: the schedule simulator (analyzer/sim.c) against the closed-form step times of
 * docs/schedules.md, and against the sim backend's measured step times on uniform and
 * non-uniform cost files with transfer costs: the prediction the tuner relies on. */
#include "pp_exec.h"
#include "pp_sim.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

static double sim_ms(pp_schedule_kind kind, const pp_partition *part, int M, const pp_costs *c,
                     const double *mult)
{
    pp_sim_result r;
    cr_assert_eq(pp_sim_file(kind, part, M, c, mult, &r), PP_OK, "%s", pp_error_message());
    double ms = r.step_ns * 1e-6;
    pp_sim_result_free(&r);
    return ms;
}

Test(sim, uniform_costs_give_each_schedules_formula)
{
    /* per stage f = 2, b = 4 (ZB: B = W = 2) ms */
    static const int SM[][2] = {{1, 1}, {2, 4}, {4, 8}, {4, 3}, {8, 32}, {16, 64}};
    for (size_t i = 0; i < sizeof SM / sizeof SM[0]; i++) {
        int S = SM[i][0], M = SM[i][1];
        pp_costs *c = NULL;
        cr_assert_eq(pp_costs_uniform(S, 2000, 4000, 0, &c), PP_OK);
        pp_partition part;
        cr_assert_eq(pp_partition_even(S, S, 1, &part), PP_OK);
        double f = 2, b = 4, bi = 2, w = 2;
        cr_assert_float_eq(sim_ms(PP_SCHED_GPIPE, &part, M, c, NULL), (M + S - 1) * (f + b), 1e-9);
        cr_assert_float_eq(sim_ms(PP_SCHED_1F1B, &part, M, c, NULL), (M + S - 1) * (f + b), 1e-9);
        double zb = fmax(M * (f + bi + w) + (S - 1) * (f + bi - w), (M + S - 1) * (f + bi) + w);
        cr_assert_float_eq(sim_ms(PP_SCHED_ZBH1, &part, M, c, NULL), zb, 1e-9, "S=%d M=%d", S, M);
        pp_partition_free(&part);
        pp_costs_destroy(c);
        if (S >= 2 && M % S == 0) {
            /* two chunks per stage, each half of a stage's cost */
            cr_assert_eq(pp_costs_uniform(2 * S, 1000, 2000, 0, &c), PP_OK);
            cr_assert_eq(pp_partition_even(2 * S, S, 2, &part), PP_OK);
            cr_assert_float_eq(sim_ms(PP_SCHED_INTERLEAVED, &part, M, c, NULL),
                               (M + (S - 1) / 2.0) * (f + b), 1e-9, "S=%d M=%d", S, M);
            pp_partition_free(&part);
            pp_costs_destroy(c);
        }
    }
}

Test(sim, the_optimizer_step_waits_for_every_stage)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(2, 1000, 2000, 0, &c), PP_OK);
    c->optimizer_us = 500;
    pp_partition part;
    cr_assert_eq(pp_partition_even(2, 2, 1, &part), PP_OK);
    pp_sim_result r;
    cr_assert_eq(pp_sim_file(PP_SCHED_1F1B, &part, 4, c, NULL, &r), PP_OK);
    /* (4 + 1) * 3 ms of pipeline, then 0.5 ms of optimizer on both, after the slower one */
    cr_assert_float_eq(r.step_ns, 15.5e6, 1.0);
    cr_assert_float_eq(r.end_ns[0], r.end_ns[1], 1.0);
    cr_assert_float_eq(r.busy_ns[0], 4 * 3e6 + 0.5e6, 1.0);
    pp_sim_result_free(&r);
    pp_partition_free(&part);
    pp_costs_destroy(c);
}

/* A deterministic non-uniform cost file: layer costs vary 4x, transfers cost latency and
 * bandwidth. */
static pp_costs *uneven_costs(int L, unsigned seed, int with_comm)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(L, 100, 200, 0, &c), PP_OK);
    unsigned x = seed * 2654435761u + 1;
    for (int l = 0; l < L; l++) {
        x = x * 1103515245u + 12345u;
        double f = 300 + (x >> 8) % 900; /* 0.3 .. 1.2 ms */
        c->layers[l].fwd_us = f;
        c->layers[l].bwd_us = 2 * f;
        c->layers[l].bwd_input_us = f;
        c->layers[l].bwd_weight_us = f;
        c->layers[l].activation_bytes = with_comm ? 1u << 20 : 0;
    }
    if (with_comm) {
        c->p2p_GBps = 2.0;        /* 1 MiB: ~0.52 ms */
        c->p2p_latency_us = 100;
    }
    c->optimizer_us = 200;
    return c;
}

Test(sim, predicts_the_sim_backend_within_2_percent, .timeout = 120)
{
    typedef struct cfg {
        pp_schedule_kind kind;
        int S, M, v, comm;
    } cfg;
    static const cfg cfgs[] = {
        {PP_SCHED_GPIPE, 2, 4, 1, 0}, {PP_SCHED_GPIPE, 4, 8, 1, 1},
        {PP_SCHED_1F1B, 2, 4, 1, 1},  {PP_SCHED_1F1B, 4, 8, 1, 0},
        {PP_SCHED_1F1B, 4, 8, 1, 1},  {PP_SCHED_INTERLEAVED, 2, 4, 2, 1},
        {PP_SCHED_INTERLEAVED, 4, 8, 2, 0}, {PP_SCHED_ZBH1, 2, 4, 1, 1},
        {PP_SCHED_ZBH1, 4, 8, 1, 1},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        const cfg *k = &cfgs[i];
        int L = 3 * k->S * k->v;
        pp_costs *c = uneven_costs(L, (unsigned)i + 1, k->comm);
        pp_partition part;
        cr_assert_eq(pp_partition_even(L, k->S, k->v, &part), PP_OK);
        double predicted = sim_ms(k->kind, &part, k->M, c, NULL);

        pp_pipe_config pc;
        memset(&pc, 0, sizeof pc);
        pc.train.microbatches = k->M;
        pp_adamw_config_default(&pc.train.opt);
        pc.backend = PP_BACKEND_SIM;
        pc.schedule = k->kind;
        pc.v = k->v;
        pc.costs = c;
        pc.slow_stage = -1;
        pc.partition = part;
        pp_pipe_trainer *t = NULL;
        cr_assert_eq(pp_pipe_trainer_create(&pc, NULL, &t), PP_OK, "%s", pp_error_message());
        /* The fastest of 4 steps: on the sim backend a disturbance (another process taking a
         * core) can only make a step later than its deadlines, never earlier, so the fastest
         * step is the least disturbed measurement. */
        double best = 1e300;
        for (int s = 0; s < 4; s++) {
            pp_step_stats st;
            cr_assert_eq(pp_pipe_trainer_step(t, &st, NULL), PP_OK);
            best = st.step_ms < best ? st.step_ms : best;
        }
        pp_pipe_trainer_destroy(t);
        cr_log_info("%s S=%d M=%d v=%d comm=%d: predicted %.3f ms, measured %.3f ms (%+.2f%%)",
                    pp_schedule_kind_name(k->kind), k->S, k->M, k->v, k->comm, predicted, best,
                    100 * (best / predicted - 1));
        cr_assert_leq(fabs(best - predicted), 0.02 * predicted,
                      "%s S=%d M=%d: predicted %.3f ms, measured %.3f ms",
                      pp_schedule_kind_name(k->kind), k->S, k->M, predicted, best);
        pp_partition_free(&part);
        pp_costs_destroy(c);
    }
}
