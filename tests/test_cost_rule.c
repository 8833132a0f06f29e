/* test_cost_rule.c: the one per-op cost rule (pp_costs_layer_us, plan/costs.c) across its three
 * users: the sim backend (runtime/backend_sim.c) measures what the simulator (analyzer/sim.c)
 * predicts, and the rebalancer's evaluator (analyzer/rebalance_eval.c) gives the simulator's
 * step to the last bit, including ZB-H1 on a cost file without backward halves (B = W = bwd_us
 * / 2).
 * Links the trainer and the analyzer: it is the one test that compares them. */
#include "pp_exec.h"
#include "pp_sim.h"
#include "pp_rebalance.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

static double sim_ms(pp_schedule_kind kind, const pp_partition *part, int M, const pp_costs *c)
{
    pp_sim_result r;
    cr_assert_eq(pp_sim_file(kind, part, M, c, NULL, &r), PP_OK, "%s", pp_error_message());
    double ms = r.step_ns * 1e-6;
    pp_sim_result_free(&r);
    return ms;
}

/* A deterministic non-uniform cost file: layer costs vary 4x, transfers cost latency and
 * bandwidth, sends their sender's time. */
static pp_costs *uneven_costs(int L, unsigned seed, int with_comm, int split)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(L, 100, 200, 0, &c), PP_OK);
    unsigned x = seed * 2654435761u + 1;
    for (int l = 0; l < L; l++) {
        x = x * 1103515245u + 12345u;
        double f = 300 + (x >> 8) % 900; /* 0.3 .. 1.2 ms */
        c->layers[l].fwd_us = f;
        c->layers[l].bwd_us = 2 * f;
        /* halves of the whole backward, or none (the cost rule halves bwd_us) */
        c->layers[l].has_split = split;
        c->layers[l].bwd_input_us = split ? f : 0;
        c->layers[l].bwd_weight_us = split ? f : 0;
        c->layers[l].activation_bytes = with_comm ? 1u << 20 : 0;
    }
    if (with_comm) {
        c->p2p_GBps = 2.0;        /* 1 MiB: ~0.52 ms */
        c->p2p_latency_us = 100;
        c->send_act_us = 150;     /* the sender's own time in each send */
        c->send_grad_us = 250;
    }
    c->optimizer_us = 200;
    return c;
}

/* The sim backend's measured step (the fastest of 4) of layout `part` under `kind`. */
static double backend_step_ms(pp_schedule_kind kind, int M, int v, const pp_costs *c,
                              const pp_partition *part)
{
    pp_pipe_config pc = {.train = {.microbatches = M}, .backend = PP_BACKEND_SIM,
                         .schedule = kind, .v = v, .costs = c, .slow_stage = -1,
                         .partition = *part};
    pp_adamw_config_default(&pc.train.opt);
    pp_pipe_trainer *t = NULL;
    cr_assert_eq(pp_pipe_trainer_create(&pc, NULL, &t), PP_OK, "%s", pp_error_message());
    /* On the sim backend a disturbance (another process taking a core) can only make a step
     * later than its deadlines, never earlier, so the fastest step is the least disturbed
     * measurement. */
    double best = 1e300;
    for (int s = 0; s < 4; s++) {
        pp_step_stats st;
        cr_assert_eq(pp_pipe_trainer_step(t, &st, NULL), PP_OK);
        best = st.step_ms < best ? st.step_ms : best;
    }
    pp_pipe_trainer_destroy(t);
    return best;
}

Test(cost_rule, the_simulator_predicts_the_sim_backend_within_2_percent, .timeout = 120)
{
    typedef struct cfg {
        pp_schedule_kind kind;
        int S, M, v, comm, split;
        double gap; /* op_gap_us: the schedule's own time after each compute op */
    } cfg;
    static const cfg cfgs[] = {
        {PP_SCHED_GPIPE, 2, 4, 1, 0, 1, 0},       {PP_SCHED_GPIPE, 4, 8, 1, 1, 1, 0},
        {PP_SCHED_1F1B, 2, 4, 1, 1, 1, 0},        {PP_SCHED_1F1B, 4, 8, 1, 0, 1, 0},
        {PP_SCHED_1F1B, 4, 8, 1, 1, 0, 0},        {PP_SCHED_INTERLEAVED, 2, 4, 2, 1, 1, 0},
        {PP_SCHED_INTERLEAVED, 4, 8, 2, 0, 0, 0}, {PP_SCHED_ZBH1, 2, 4, 1, 1, 1, 0},
        {PP_SCHED_ZBH1, 4, 8, 1, 1, 1, 0},
        /* ZB-H1 on a file without backward halves: the backend halves bwd_us as the simulator
         * does (it refused such a file before issue 15) */
        {PP_SCHED_ZBH1, 2, 4, 1, 1, 0, 0},        {PP_SCHED_ZBH1, 4, 8, 1, 0, 0, 0},
        /* with time between ops: after every compute op, a split backward's halves each */
        {PP_SCHED_1F1B, 2, 4, 1, 1, 1, 300},   {PP_SCHED_INTERLEAVED, 2, 4, 2, 1, 1, 300},
        {PP_SCHED_ZBH1, 2, 4, 1, 1, 1, 300},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        const cfg *k = &cfgs[i];
        int L = 3 * k->S * k->v;
        pp_costs *c = uneven_costs(L, (unsigned)i + 1, k->comm, k->split);
        c->op_gap_us = k->gap;
        pp_partition part;
        cr_assert_eq(pp_partition_even(L, k->S, k->v, &part), PP_OK);
        double predicted = sim_ms(k->kind, &part, k->M, c);

        /* a disturbed run only reads slow: a case that misses is run again, twice at most,
         * and judged on its fastest step over the runs (a model that predicts too high gains
         * nothing from this); a release CI run once read zb-h1 S=2 M=4 2.8% slow on all four
         * steps of one run */
        double best = backend_step_ms(k->kind, k->M, k->v, c, &part);
        for (int again = 0; again < 2 && best - predicted > 0.02 * predicted; again++) {
            double b = backend_step_ms(k->kind, k->M, k->v, c, &part);
            best = b < best ? b : best;
        }
        cr_log_info("%s S=%d M=%d v=%d comm=%d split=%d gap=%g: predicted %.3f ms, measured "
                    "%.3f ms (%+.2f%%)",
                    pp_schedule_kind_name(k->kind), k->S, k->M, k->v, k->comm, k->split, k->gap,
                    predicted, best, 100 * (best / predicted - 1));
        cr_assert_leq(fabs(best - predicted), 0.02 * predicted,
                      "%s S=%d M=%d: predicted %.3f ms, measured %.3f ms",
                      pp_schedule_kind_name(k->kind), k->S, k->M, predicted, best);
        pp_partition_free(&part);
        pp_costs_destroy(c);
    }
}

/* The same layout, costs without halves and with the halves written out as bwd_us / 2: every
 * user gives the same time for both, and the rebalancer the simulator's double exactly. */
Test(cost_rule, zbh1_without_halves_costs_what_explicit_halves_cost_for_every_user)
{
    int S = 4, M = 8, L = 12;
    pp_costs *bare = uneven_costs(L, 7, 1, 0), *halves = uneven_costs(L, 7, 1, 0);
    for (int l = 0; l < L; l++) {
        pp_layer_cost *y = &halves->layers[l];
        y->has_split = 1;
        y->bwd_input_us = y->bwd_weight_us = y->bwd_us / 2;
        cr_assert_eq(pp_costs_layer_us(&bare->layers[l], PP_OP_BWD_INPUT), y->bwd_input_us);
        cr_assert_eq(pp_costs_layer_us(&bare->layers[l], PP_OP_BWD_WEIGHT), y->bwd_weight_us);
    }
    pp_partition part;
    cr_assert_eq(pp_partition_even(L, S, 1, &part), PP_OK);
    double sim_bare = sim_ms(PP_SCHED_ZBH1, &part, M, bare);
    cr_assert_eq(sim_bare, sim_ms(PP_SCHED_ZBH1, &part, M, halves));
    pp_rebalance_opts o = {.kind = PP_SCHED_ZBH1, .S = S, .v = 1, .M = M, .costs = bare};
    double eval_ns;
    cr_assert_eq(pp_rebalance_inspect(&o, &part, &eval_ns, NULL), PP_OK, "%s",
                 pp_error_message());
    cr_assert_eq(eval_ns * 1e-6, sim_bare, "rebalancer %.9g ms, simulator %.9g ms",
                 eval_ns * 1e-6, sim_bare);
    double measured = backend_step_ms(PP_SCHED_ZBH1, M, 1, bare, &part);
    cr_assert_leq(fabs(measured - sim_bare), 0.02 * sim_bare, "sim backend %.3f ms, simulator "
                  "%.3f ms", measured, sim_bare);
    pp_partition_free(&part);
    pp_costs_destroy(bare);
    pp_costs_destroy(halves);
}

/* A stage's parameter bytes saturate instead of wrapping: 3000 layers of 2^53 bytes each are
 * more than 2^64 (tests/fuzz_costs.c checks the same on every input). */
Test(cost_rule, parameter_bytes_of_a_range_saturate)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(3000, 1, 2, 0, &c), PP_OK);
    for (int i = 0; i < c->n_layers; i++)
        c->layers[i].param_bytes = UINT64_C(1) << 53;
    cr_assert_eq(pp_costs_param_bytes(c, 0, 3000), UINT64_MAX);
    cr_assert_eq(pp_costs_param_bytes(c, 0, 2), UINT64_C(1) << 54);
    cr_assert(isfinite(pp_costs_op_us(c, PP_OP_OPT_STEP, 0, 3000)));
    pp_costs_destroy(c);
}

/* pprof-tune's speed comparison (pp_tune_speed_compare) re-predicts a layout on a machine whose
 * layers run k times as long: every compute op of every layer (halves included) costs k times
 * as much, nothing else moves (transfers, sends, the optimizer), and without transfers, sends or
 * an optimizer step the simulated step is k times as long (a longest path of compute ops only). */
Test(cost_rule, scaling_the_layers_scales_every_compute_op_and_nothing_else)
{
    static const pp_op ops[] = {PP_OP_FWD, PP_OP_BWD, PP_OP_BWD_INPUT, PP_OP_BWD_WEIGHT};
    for (int split = 0; split <= 1; split++) {
        pp_costs *c = uneven_costs(12, 7u + (unsigned)split, 1, split), *k = NULL;
        c->optimizer_us_per_MB = 3;
        c->grad_norm_us = 40;
        c->step_fixed_us = 90;
        cr_assert_eq(pp_costs_scale_layers(c, 1.25, &k), PP_OK, "%s", pp_error_message());
        for (int l = 0; l < c->n_layers; l++)
            for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
                cr_assert_float_eq(pp_costs_layer_us(&k->layers[l], ops[i]),
                                   1.25 * pp_costs_layer_us(&c->layers[l], ops[i]), 1e-9,
                                   "layer %d op %d", l, (int)ops[i]);
        cr_assert_float_eq(pp_costs_layers_us(k), 1.25 * pp_costs_layers_us(c), 1e-6);
        cr_assert_eq(pp_costs_transfer_us(k, 1u << 20), pp_costs_transfer_us(c, 1u << 20));
        cr_assert_eq(pp_costs_opt_us(k, 8000000), pp_costs_opt_us(c, 8000000));
        cr_assert(c->send_act_us > 0 && pp_costs_send_us(k, 0) == pp_costs_send_us(c, 0) &&
                  pp_costs_send_us(k, 1) == pp_costs_send_us(c, 1));
        for (int l = 0; l < c->n_layers; l++)
            cr_assert(k->layers[l].activation_bytes == c->layers[l].activation_bytes &&
                      k->layers[l].param_bytes == c->layers[l].param_bytes &&
                      !strcmp(k->layers[l].name, c->layers[l].name));
        pp_costs_destroy(k);

        /* compute alone: the step scales with it, schedule by schedule */
        c->p2p_GBps = 0;
        c->p2p_latency_us = 0;
        c->optimizer_us = c->optimizer_us_per_MB = c->grad_norm_us = c->step_fixed_us = 0;
        c->send_act_us = c->send_grad_us = 0;
        cr_assert_eq(pp_costs_scale_layers(c, 0.8, &k), PP_OK);
        static const pp_schedule_kind kinds[] = {PP_SCHED_GPIPE, PP_SCHED_1F1B, PP_SCHED_ZBH1};
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
            pp_partition p;
            cr_assert_eq(pp_partition_even(12, 3, 1, &p), PP_OK);
            double a = sim_ms(kinds[i], &p, 6, c), b = sim_ms(kinds[i], &p, 6, k);
            cr_assert_float_eq(b, 0.8 * a, 1e-9 * a, "%s: %.6f ms against %.6f ms",
                               pp_schedule_kind_name(kinds[i]), b, a);
            pp_partition_free(&p);
        }
        pp_costs_destroy(k);
        pp_costs_destroy(c);
    }
    pp_costs *c = uneven_costs(4, 1, 0, 0), *k = (pp_costs *)&k;
    static const double bad[] = {0.0, -1.0, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(pp_costs_scale_layers(c, bad[i], &k), PP_ERR_INVALID, "%g", bad[i]);
        cr_assert_null(k);
        cr_assert(strstr(pp_error_message(), "cost scale"), "%s", pp_error_message());
    }
    pp_costs_destroy(c);
}
