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

/* The schedule's own time between ops (the cost file's op_gap_us) follows every compute op on
 * its stage: 1F1B, S = 2, M = 4, f = 1, b = 2 ms, a gap of 0.1 ms: each op 0.1 ms longer, the
 * (M + S - 1) (f + b) = 15 ms of the pipeline 16 ms, each stage busy 4 (3 + 0.2) = 12.8 ms;
 * the optimizer step and the messages take none. */
Test(sim, the_gap_between_ops_follows_every_compute_op)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(2, 1000, 2000, 0, &c), PP_OK);
    pp_partition part;
    cr_assert_eq(pp_partition_even(2, 2, 1, &part), PP_OK);
    cr_assert_float_eq(sim_ms(PP_SCHED_1F1B, &part, 4, c, NULL), 15.0, 1e-9);
    c->op_gap_us = 100;
    pp_sim_result r;
    cr_assert_eq(pp_sim_file(PP_SCHED_1F1B, &part, 4, c, NULL, &r), PP_OK);
    cr_assert_float_eq(r.step_ns, 16e6, 1.0, "%.6f ms", r.step_ns * 1e-6);
    cr_assert_float_eq(r.busy_ns[0], 12.8e6, 1.0);
    pp_sim_result_free(&r);
    cr_assert_float_eq(pp_costs_op_us(c, PP_OP_FWD, 0, 1), 1100, 1e-9);
    cr_assert_float_eq(pp_costs_op_us(c, PP_OP_BWD_WEIGHT, 0, 1), 1100, 1e-9);
    cr_assert_float_eq(pp_costs_op_us(c, PP_OP_SEND_ACT, 0, 1), 0, 1e-9);
    cr_assert_float_eq(pp_costs_op_us(c, PP_OP_OPT_STEP, 0, 1), 0, 1e-9);
    pp_partition_free(&part);
    pp_costs_destroy(c);
}

/* The data-parallel all-reduce (the cost file's dp_allreduce_us terms) of each stage runs after
 * its last op and before the optimizer's barrier: the barrier is the latest of the stages' ends
 * plus their own all-reduces. 1F1B, S = 2, M = 4, f = 1, b = 2 ms: stage 0 ends at 15 ms, stage
 * 1 at 13 (its last backward, before stage 0's). 0.1 ms + 0.05 ms per MB: stage 0 holds 10 MB
 * (0.6 ms), stage 1 40 MB (2.1 ms): the barrier at max(15.6, 15.1) = 15.6 ms, the step 16.1 ms
 * with the 0.5 ms optimizer step; with 80 MB on stage 1 (4.1 ms) its all-reduce decides: 17.1,
 * 17.6 ms. */
Test(sim, the_data_parallel_allreduce_of_each_stage_comes_before_the_barrier)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(2, 1000, 2000, 0, &c), PP_OK);
    c->optimizer_us = 500;
    c->dp_allreduce_us = 100;
    c->dp_allreduce_us_per_MB = 50;
    c->layers[0].param_bytes = 10000000;
    pp_partition part;
    cr_assert_eq(pp_partition_even(2, 2, 1, &part), PP_OK);
    static const uint64_t stage1[] = {40000000, 80000000};
    static const double want_ms[] = {16.1, 17.6};
    for (int i = 0; i < 2; i++) {
        c->layers[1].param_bytes = stage1[i];
        pp_sim_result r;
        cr_assert_eq(pp_sim_file(PP_SCHED_1F1B, &part, 4, c, NULL, &r), PP_OK);
        cr_assert_float_eq(r.step_ns, want_ms[i] * 1e6, 1.0, "%.6f ms", r.step_ns * 1e-6);
        /* waiting for the barrier is not work */
        cr_assert_float_eq(r.busy_ns[1], 4 * 3e6 + 0.5e6, 1.0);
        pp_sim_result_free(&r);
    }
    /* without the terms, the barrier at the latest end, as before */
    c->dp_allreduce_us = c->dp_allreduce_us_per_MB = 0;
    cr_assert_float_eq(sim_ms(PP_SCHED_1F1B, &part, 4, c, NULL), 15.5, 1e-9);
    pp_partition_free(&part);
    pp_costs_destroy(c);
}

/* The message tests' case: GPipe, S = 2, one layer a stage (f = 1, b = 2 ms), 0.1 ms a message,
 * the even partition into *part. */
static pp_costs *two_stages_with_messages(pp_partition *part)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(2, 1000, 2000, 0, &c), PP_OK);
    c->p2p_latency_us = 100;
    cr_assert_eq(pp_partition_even(2, 2, 1, part), PP_OK);
    return c;
}

Test(sim, a_receive_takes_its_receivers_time_unless_it_waits_longer_for_the_message)
{
    /* GPipe, S = 2, M = 2, one layer a stage: f = 1, b = 2 ms, 0.1 ms a message: 9.2 ms
     * without a receiver's time (above). Each receive of activations takes 0.3 ms of its
     * receiver and each of gradients 0.5, from its start, unless its message comes later:
     * stage 1's first receive still ends at 1.1 (its message's arrival), its second at 2.1 + 0.3
     * (the message was there at 2.1), so its ops end 0.3 later, its gradients arrive at 5.5 and
     * 7.5; stage 0's first gradient receive waits until 5.5, its second ends at 7.5 + 0.5 = 8,
     * and its last backward at 10 ms. */
    pp_partition part;
    pp_costs *c = two_stages_with_messages(&part);
    c->recv_act_us = 300;
    c->recv_grad_us = 500;
    pp_sim_result r;
    cr_assert_eq(pp_sim_file(PP_SCHED_GPIPE, &part, 2, c, NULL, &r), PP_OK);
    cr_assert_float_eq(r.step_ns, 10e6, 1.0);
    /* a receive is not compute */
    cr_assert_float_eq(r.busy_ns[0], 6e6, 1.0);
    cr_assert_float_eq(r.busy_ns[1], 6e6, 1.0);
    /* stage 1's list: RECV F RECV F ...; its second receive from 2.1 to 2.4 ms */
    cr_assert_float_eq(r.start_ns[1][2], 2.1e6, 1.0);
    cr_assert_float_eq(r.finish_ns[1][2], 2.4e6, 1.0);
    cr_assert_float_eq(r.finish_ns[1][0], 1.1e6, 1.0);
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
    pp_partition part;
    pp_costs *c = two_stages_with_messages(&part);
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
