/* test_sim.c: the schedule simulator (analyzer/sim.c) against the closed-form step times of
 * docs/schedules.md. Its prediction of the sim backend's measured step times is
 * test_cost_rule.c (that test links the trainer; this one links the analyzer alone). */
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

Test(sim, a_send_takes_its_senders_time_and_the_transfer_counts_from_its_start)
{
    /* GPipe, S = 2, M = 2, one layer a stage: f = 1, b = 2 ms, 0.1 ms a message. Without send
     * time: F0 F1 on stage 0, each message 0.1 ms after its send, stage 1 F0 F1 B B, stage 0's
     * two backwards after their gradients: 9.2 ms. Each send of activations takes 0.3 ms of its
     * sender and each of gradients 0.4: stage 0's F1 starts 0.3 later and so does all that
     * follows it; stage 1's second backward 0.4 later, then its gradient: 9.9 ms. */
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(2, 1000, 2000, 0, &c), PP_OK);
    c->p2p_latency_us = 100;
    pp_partition part;
    cr_assert_eq(pp_partition_even(2, 2, 1, &part), PP_OK);
    cr_assert_float_eq(sim_ms(PP_SCHED_GPIPE, &part, 2, c, NULL), 9.2, 1e-9);
    c->send_act_us = 300;
    c->send_grad_us = 400;
    pp_sim_result r;
    cr_assert_eq(pp_sim_file(PP_SCHED_GPIPE, &part, 2, c, NULL, &r), PP_OK);
    cr_assert_float_eq(r.step_ns, 9.9e6, 1.0);
    /* a send is not compute: the stages' busy time is their layers' alone */
    cr_assert_float_eq(r.busy_ns[0], 6e6, 1.0);
    cr_assert_float_eq(r.busy_ns[1], 6e6, 1.0);
    /* stage 0's first send: starts at 1 ms, its data there at 1.1, its sender free at 1.3 */
    const int k_send = 1;
    cr_assert_float_eq(r.start_ns[0][k_send], 1e6, 1.0);
    cr_assert_float_eq(r.finish_ns[0][k_send], 1.3e6, 1.0);
    cr_assert_float_eq(r.start_ns[0][k_send + 1], 1.3e6, 1.0);
    pp_sim_result_free(&r);
    pp_partition_free(&part);
    pp_costs_destroy(c);
}
