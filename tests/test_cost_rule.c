/* test_cost_rule.c: the one per-op cost rule (pp_costs_layer_us, plan/costs.c) across its three
 * users: the sim backend (runtime/backend_sim.c) measures what the simulator (analyzer/sim.c)
 * predicts, and the rebalancer's evaluator (analyzer/rebalance.c) gives the simulator's step to
 * the last bit, including ZB-H1 on a cost file without backward halves (B = W = bwd_us / 2).
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
 * bandwidth. */
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
    } cfg;
    static const cfg cfgs[] = {
        {PP_SCHED_GPIPE, 2, 4, 1, 0, 1},       {PP_SCHED_GPIPE, 4, 8, 1, 1, 1},
        {PP_SCHED_1F1B, 2, 4, 1, 1, 1},        {PP_SCHED_1F1B, 4, 8, 1, 0, 1},
        {PP_SCHED_1F1B, 4, 8, 1, 1, 0},        {PP_SCHED_INTERLEAVED, 2, 4, 2, 1, 1},
        {PP_SCHED_INTERLEAVED, 4, 8, 2, 0, 0}, {PP_SCHED_ZBH1, 2, 4, 1, 1, 1},
        {PP_SCHED_ZBH1, 4, 8, 1, 1, 1},
        /* ZB-H1 on a file without backward halves: the backend halves bwd_us as the simulator
         * does (it refused such a file before issue 15) */
        {PP_SCHED_ZBH1, 2, 4, 1, 1, 0},        {PP_SCHED_ZBH1, 4, 8, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        const cfg *k = &cfgs[i];
        int L = 3 * k->S * k->v;
        pp_costs *c = uneven_costs(L, (unsigned)i + 1, k->comm, k->split);
        pp_partition part;
        cr_assert_eq(pp_partition_even(L, k->S, k->v, &part), PP_OK);
        double predicted = sim_ms(k->kind, &part, k->M, c);

        double best = backend_step_ms(k->kind, k->M, k->v, c, &part);
        cr_log_info("%s S=%d M=%d v=%d comm=%d split=%d: predicted %.3f ms, measured %.3f ms "
                    "(%+.2f%%)",
                    pp_schedule_kind_name(k->kind), k->S, k->M, k->v, k->comm, k->split,
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
