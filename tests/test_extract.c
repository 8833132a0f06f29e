/* test_extract.c: the cost extraction's optimizer and send terms (analyzer/extract.c,
 * extract_optimizer, fit_sends; docs/cost-file.md "How pprof-tune --export-costs fills the
 * optimizer and send terms") on analyses made by hand: the per-stage optimizer fitted against
 * the stages' parameters, the gradient norm and barrier, the per-step time outside the
 * pipeline's ops, and the senders' own time per message; the layers scaled to their stages'
 * ops. */
#include "pp_extract.h"
#include "pp_tune.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

enum { S = 2, L = 4, STEPS = 3 };

typedef struct hand {
    pp_alayer layers[L];
    pp_aop layer_ops[L];
    pp_astage stages[S];
    pp_astep steps[STEPS];
    pp_stage_step stage_steps[STEPS][S];
    pp_analysis a;
} hand;

static pp_astats one(double ns) { return (pp_astats){.count = 3, .mean = ns, .median = ns}; }

/* Layers 0-1 on stage 0, 2-3 on stage 1, each 1 ms forward and 2 ms backward; layer l holds
 * params[l] bytes (0 for all: no layer marks); stage s's optimizer op takes opt_ms[s]. */
static void make(hand *h, const uint64_t *params, const double *opt_ms)
{
    memset(h, 0, sizeof *h);
    for (int l = 0; l < L; l++) {
        h->layers[l].layer = l;
        snprintf(h->layers[l].name, sizeof h->layers[l].name, "layer%d", l);
        h->layers[l].fwd_ns = one(1e6);
        h->layers[l].bwd_ns = one(2e6);
        h->layers[l].has_info = params != NULL;
        h->layers[l].param_bytes = params ? params[l] : 0;
        h->layer_ops[l] = (pp_aop){.kind = PP_AOP_FWD, .stage = l / 2, .mb = 0, .chunk = l,
                                   .t0 = 10 + (uint64_t)l, .t1 = 11 + (uint64_t)l};
    }
    for (int s = 0; s < S; s++) {
        h->stages[s].stage = s;
        h->stages[s].imbalance_culprit = -1;
        h->stages[s].fwd_ns = one(2e6);
        h->stages[s].bwd_ns = one(4e6);
        if (opt_ms)
            h->stages[s].opt_ns = one(opt_ms[s] * 1e6);
    }
    for (int i = 0; i < STEPS; i++) {
        h->steps[i].step = i + 1;
        h->steps[i].step_ns = 50e6;
        h->steps[i].window_ns = 50e6; /* no gap between windows */
        h->steps[i].opt_barrier = -1;    /* not told, as the analyzer leaves it */
        h->steps[i].stage = h->stage_steps[i];
        for (int s = 0; s < S; s++)
            h->stage_steps[i][s].outside_ns = h->stage_steps[i][s].pre_opt_ns = -1;
    }
    pp_analysis *a = &h->a;
    a->S = S;
    a->M = 4;
    a->v = 1;
    snprintf(a->schedule, sizeof a->schedule, "1f1b");
    a->stages = h->stages;
    a->layers = h->layers;
    a->n_layers = L;
    a->layer_ops = h->layer_ops;
    a->n_layer_ops = L;
    a->steps = h->steps;
    a->n_steps = STEPS;
    a->step_ns = one(50e6);
}

static void extract(const hand *h, pp_extract *e)
{
    cr_assert_eq(pp_extract_from_analysis(&h->a, e), PP_OK, "%s", pp_error_message());
}

/* Parameters that differ (1 MB against 3 MB): optimizer_us + optimizer_us_per_MB x MB by least
 * squares, here exact: 3 ms and 7 ms give 1 ms + 2 ms per MB. */
Test(extract_optimizer, a_line_through_stages_whose_parameters_differ)
{
    const uint64_t params[L] = {500000, 500000, 1000000, 2000000};
    const double opt[S] = {3, 7};
    hand h;
    make(&h, params, opt);
    pp_extract e;
    extract(&h, &e);
    cr_expect_float_eq(e.costs->optimizer_us, 1000, 1e-6);
    cr_expect_float_eq(e.costs->optimizer_us_per_MB, 2000, 1e-6);
    cr_expect_float_eq(pp_costs_opt_us(e.costs, 1000000), 3000, 1e-6);
    /* moved: stage 0 with layers 0-2 (2 MB) now costs 5 ms */
    cr_expect_float_eq(pp_costs_opt_us(e.costs, pp_costs_param_bytes(e.costs, 0, 3)), 5000, 1e-6);
    pp_extract_free(&e);
}

/* The stages' time between their ops (pp_stage_step.gap_ns) per compute op: 0.5 ms an op
 * against ops of 3 ms on average (2 ms forwards, 4 ms backwards) is 17%: charged after each op
 * (op_gap_us), which the replay adds to every compute op; 0.1 ms (3%) is not. */
Test(extract_optimizer, the_time_between_ops_is_charged_per_op_when_it_matters)
{
    hand h;
    make(&h, NULL, NULL);
    for (int i = 0; i < STEPS; i++)
        for (int s = 0; s < S; s++) {
            h.stage_steps[i][s].n_compute = 8;
            h.stage_steps[i][s].gap_ns = 8 * (s ? 0.6e6 : 0.4e6);
        }
    pp_extract e;
    extract(&h, &e);
    cr_expect_float_eq(e.costs->op_gap_us, 500, 1e-6, "%.3f us", e.costs->op_gap_us);
    cr_expect_not_null(strstr(e.notes, "between the stage's ops"), "%s", e.notes);
    /* stage 0's forward: its two layers' 2 ms, then the gap */
    cr_expect_float_eq(pp_costs_op_us(e.costs, PP_OP_FWD, 0, 2), 2500, 1e-6);
    double with = 0, without = 0;
    cr_assert_eq(pp_extract_predict(&e, PP_SCHED_1F1B, &e.partition, e.M, &with, NULL), PP_OK);
    e.costs->op_gap_us = 0;
    cr_assert_eq(pp_extract_predict(&e, PP_SCHED_1F1B, &e.partition, e.M, &without, NULL), PP_OK);
    cr_expect_gt(with, without, "the gaps lengthen the replayed step");
    pp_extract_free(&e);
    for (int i = 0; i < STEPS; i++)
        for (int s = 0; s < S; s++)
            h.stage_steps[i][s].gap_ns = 8 * 0.1e6;
    extract(&h, &e);
    cr_expect_eq(e.costs->op_gap_us, 0, "%.3f us", e.costs->op_gap_us);
    pp_extract_free(&e);
}

/* Parameters within 25% of each other cannot tell a fixed part from a slope: proportional,
 * 4.2 ms over 2.1 MB = 2 ms per MB. A slope below 0 (the heavier stage faster) is no slope:
 * the mean, fixed. */
Test(extract_optimizer, proportional_when_the_parameters_are_alike_constant_when_falling)
{
    const uint64_t params[L] = {500000, 500000, 500000, 600000};
    const double opt[S] = {2.0, 2.2};
    hand h;
    make(&h, params, opt);
    pp_extract e;
    extract(&h, &e);
    cr_expect_float_eq(e.costs->optimizer_us, 0, 1e-9);
    cr_expect_float_eq(e.costs->optimizer_us_per_MB, 2000, 1e-6);
    pp_extract_free(&e);

    const uint64_t params2[L] = {500000, 500000, 1000000, 2000000};
    const double falling[S] = {5, 3};
    make(&h, params2, falling);
    extract(&h, &e);
    cr_expect_float_eq(e.costs->optimizer_us, 4000, 1e-6);
    cr_expect_float_eq(e.costs->optimizer_us_per_MB, 0, 1e-9);
    pp_extract_free(&e);
}

/* Without layer marks (no parameter sizes): the slowest stage's optimizer, for every stage. */
Test(extract_optimizer, the_slowest_stage_without_parameter_sizes)
{
    const double opt[S] = {3, 7};
    hand h;
    make(&h, NULL, opt);
    pp_extract e;
    extract(&h, &e);
    cr_expect_float_eq(e.costs->optimizer_us, 7000, 1e-6);
    cr_expect_float_eq(e.costs->optimizer_us_per_MB, 0, 1e-9);
    pp_extract_free(&e);
}

/* The per-step terms: the time before the optimizer on the stage that reaches it last (the
 * others' include their wait for it: not used), and the time outside the ops of the stage whose
 * ops end last (the others' include waits), each the median over steps; the gap between
 * windows when that is larger. */
Test(extract_optimizer, per_step_terms_from_the_pacing_stage)
{
    hand h;
    make(&h, NULL, NULL);
    const double outside_ms[STEPS] = {1, 3, 2}, pre_ms[STEPS] = {0.5, 0.7, 0.6};
    for (int i = 0; i < STEPS; i++) {
        pp_stage_step *ss = h.stage_steps[i];
        ss[1].last_end = ss[1].last_to_opt = 1;
        ss[1].outside_ns = outside_ms[i] * 1e6;
        ss[1].pre_opt_ns = pre_ms[i] * 1e6;
        ss[0].outside_ns = 40e6; /* waited for stage 1 */
        ss[0].pre_opt_ns = 30e6;
    }
    pp_extract e;
    extract(&h, &e);
    cr_expect_float_eq(e.costs->step_fixed_us, 2000, 1e-6);
    cr_expect_float_eq(e.costs->grad_norm_us, 600, 1e-6);
    cr_expect_float_eq(e.between_steps_ns, 2e6, 1e-3);
    cr_expect_float_eq(pp_costs_opt_us(e.costs, 0), 2600, 1e-6);
    cr_expect_eq(e.no_barrier, 0, "no step told: a barrier, as pptrain's");
    cr_expect(strstr(e.notes, "for the gradient norm and the barrier"), "%s", e.notes);
    pp_extract_free(&e);

    /* the same where most steps' optimizer steps started apart (a torch job's stages step
     * alone): the term is the time before the step, named so, not a barrier */
    const int barrier[STEPS] = {0, -1, 0};
    for (int i = 0; i < STEPS; i++)
        h.steps[i].opt_barrier = barrier[i];
    extract(&h, &e);
    cr_expect_float_eq(e.costs->grad_norm_us, 600, 1e-6);
    cr_expect_eq(e.no_barrier, 1);
    cr_expect(strstr(e.notes, "with no barrier") && !strstr(e.notes, "the barrier before"),
              "%s", e.notes);
    pp_extract_free(&e);
    h.steps[0].opt_barrier = h.steps[1].opt_barrier = 1; /* two of three together */
    extract(&h, &e);
    cr_expect_eq(e.no_barrier, 0);
    pp_extract_free(&e);
    for (int i = 0; i < STEPS; i++)
        h.steps[i].opt_barrier = -1;

    /* a barrier job: its windows leave 4 ms between them, more than the 2 ms outside */
    for (int i = 0; i < STEPS; i++)
        h.steps[i].window_ns = 46e6;
    extract(&h, &e);
    cr_expect_float_eq(e.costs->step_fixed_us, 4000, 1e-6);
    pp_extract_free(&e);

    /* nothing known: no per-step terms */
    make(&h, NULL, NULL);
    extract(&h, &e);
    cr_expect_eq(e.costs->step_fixed_us, 0);
    cr_expect_eq(e.costs->grad_norm_us, 0);
    pp_extract_free(&e);
}

/* The senders' time: per kind, the links' median send ranges weighted by their messages (a link
 * with no send timed counts for nothing); without links, none. */
Test(extract_sends, the_links_medians_weighted_by_their_messages)
{
    hand h;
    make(&h, NULL, NULL);
    pp_alink links[4] = {
        {.src = 0, .dst = 1, .grad = 0, .messages = 12,
         .send_time_ns = {.count = 12, .mean = 9e3, .median = 2e3}},
        {.src = 1, .dst = 0, .grad = 1, .messages = 12,
         .send_time_ns = {.count = 12, .mean = 30e3, .median = 16e3}},
        {.src = 2, .dst = 1, .grad = 1, .messages = 4,
         .send_time_ns = {.count = 4, .mean = 8e3, .median = 8e3}},
        {.src = 1, .dst = 2, .grad = 0, .messages = 0},
    };
    h.a.links = links;
    h.a.n_links = 4;
    pp_extract e;
    extract(&h, &e);
    cr_expect_float_eq(e.costs->send_act_us, 2, 1e-9);
    cr_expect_float_eq(e.costs->send_grad_us, (12 * 16 + 4 * 8) / 16.0, 1e-9);
    pp_extract_free(&e);

    make(&h, NULL, NULL);
    extract(&h, &e);
    cr_expect_eq(e.costs->send_act_us, 0);
    cr_expect_eq(e.costs->send_grad_us, 0);
    pp_extract_free(&e);
}

/* The receivers' time: per kind, the links' median receive ranges of the receives that found
 * their message there, weighted by how many each is over, and apart from the sends' */
Test(extract_receives, the_links_medians_weighted_by_their_receives)
{
    hand h;
    make(&h, NULL, NULL);
    pp_alink links[3] = {
        {.src = 0, .dst = 1, .grad = 0, .messages = 12,
         .send_time_ns = {.count = 12, .mean = 9e3, .median = 2e3},
         .recv_time_ns = {.count = 3, .mean = 50e3, .median = 40e3}},
        {.src = 1, .dst = 0, .grad = 1, .messages = 12,
         .recv_time_ns = {.count = 9, .mean = 90e3, .median = 100e3}},
        {.src = 2, .dst = 1, .grad = 1, .messages = 4,
         .recv_time_ns = {.count = 1, .mean = 300e3, .median = 300e3}},
    };
    h.a.links = links;
    h.a.n_links = 3;
    pp_extract e;
    extract(&h, &e);
    cr_expect_float_eq(e.costs->recv_act_us, 40, 1e-9);
    cr_expect_float_eq(e.costs->recv_grad_us, (9 * 100 + 300) / 10.0, 1e-9);
    cr_expect_float_eq(e.costs->send_act_us, 2, 1e-9);
    cr_expect_eq(e.costs->send_grad_us, 0);
    cr_expect(strstr(e.notes, "receives: the receiver's own time"), "%s", e.notes);
    pp_extract_free(&e);

    /* no gradient's receive came after its message: the activations' time stands for it */
    links[1].recv_time_ns.count = links[2].recv_time_ns.count = 0;
    extract(&h, &e);
    cr_expect_float_eq(e.costs->recv_act_us, 40, 1e-9);
    cr_expect_float_eq(e.costs->recv_grad_us, 40, 1e-9);
    cr_expect(strstr(e.notes, "the activations' figure"), "%s", e.notes);
    pp_extract_free(&e);

    make(&h, NULL, NULL);
    extract(&h, &e);
    cr_expect_eq(e.costs->recv_act_us, 0);
    cr_expect_eq(e.costs->recv_grad_us, 0);
    cr_expect(!strstr(e.notes, "receives:"), "%s", e.notes);
    pp_extract_free(&e);
}

/* Each stage's layers add up to its op's median (docs/cost-file.md): stage 0's forward op takes
 * 2.1 ms over layers of 1 ms (x1.05), its backward 4.4 ms over 2 ms (x1.1), both halves of the
 * backward scaled alike; stage 1's ops are the sums already and stay. The run's own layout then
 * replays at its ops' medians. */
Test(extract_layers, scaled_to_add_up_to_their_stages_op)
{
    hand h;
    make(&h, NULL, NULL);
    h.stages[0].fwd_ns = one(2.1e6);
    h.stages[0].bwd_ns = one(4.4e6);
    pp_extract e;
    extract(&h, &e);
    for (int l = 0; l < 2; l++) {
        cr_expect_float_eq(e.costs->layers[l].fwd_us, 1050, 1e-9);
        cr_expect_float_eq(e.costs->layers[l].bwd_us, 2200, 1e-9);
        cr_expect_float_eq(e.costs->layers[l].bwd_input_us + e.costs->layers[l].bwd_weight_us,
                           2200, 1e-9);
    }
    for (int l = 2; l < 4; l++) {
        cr_expect_float_eq(e.costs->layers[l].fwd_us, 1000, 1e-9);
        cr_expect_float_eq(e.costs->layers[l].bwd_us, 2000, 1e-9);
    }
    cr_expect(strstr(e.notes, "forward x1.0000..1.0500, backward x1.0000..1.1000"), "%s",
              e.notes);
    pp_extract_free(&e);
}

/* Split backward ops (zb-h1) scale the layers' input and weight parts each by its own op; an op
 * far from its layers (5x: ranges that do not describe it) leaves them as measured, saying so. */
Test(extract_layers, split_ops_scale_their_parts_and_far_ones_are_left)
{
    hand h;
    make(&h, NULL, NULL);
    for (int l = 0; l < L; l++)
        h.layers[l].bwd_weight_ns = one(1e6); /* bwd ranges are the input half: 2 + 1 ms */
    for (int s = 0; s < S; s++) {
        h.stages[s].bwd_ns = (pp_astats){0};
        h.stages[s].bwd_input_ns = one(4.8e6); /* x1.2 */
        h.stages[s].bwd_weight_ns = one(1.8e6); /* x0.9 */
    }
    h.stages[1].fwd_ns = one(10e6); /* x5 */
    pp_extract e;
    extract(&h, &e);
    for (int l = 0; l < L; l++) {
        cr_expect_float_eq(e.costs->layers[l].bwd_input_us, 2400, 1e-9);
        cr_expect_float_eq(e.costs->layers[l].bwd_weight_us, 900, 1e-9);
        cr_expect_float_eq(e.costs->layers[l].bwd_us, 3300, 1e-9);
        cr_expect_float_eq(e.costs->layers[l].fwd_us, 1000, 1e-9);
    }
    cr_expect(strstr(e.notes, "left as measured") && strstr(e.notes, "1 fwd x5"), "%s", e.notes);
    pp_extract_free(&e);
}

/* Interleaved (S = 2, v = 2, one layer a piece: piece p = stage p % 2's chunk p / 2 holds
 * layer p): each piece's layers scale to its own chunk's ops over every step
 * (pp_astage.chunk_ns), not to the stage's statistics, which mix the chunks (2 ms forward, 4 ms
 * backward here, set to show if used); a chunk without ops leaves its layers as measured. */
Test(extract_layers, interleaved_pieces_scale_to_their_own_chunks_ops)
{
    hand h;
    make(&h, NULL, NULL);
    pp_aop ops[L]; /* the compute ops around the layers' ranges tell their chunks */
    for (int l = 0; l < L; l++) {
        h.layer_ops[l].stage = l % 2;
        ops[l] = h.layer_ops[l];
        ops[l].chunk = l / 2;
    }
    h.a.ops = ops;
    h.a.n_ops = L;
    h.a.v = 2;
    snprintf(h.a.schedule, sizeof h.a.schedule, "interleaved");
    /* [stage][chunk * 4 + kind]: forward, backward; stage 1's chunk 1 has no backward ops */
    pp_astats ch[S][8] = {{one(1.1e6), one(2.0e6), {0}, {0}, one(1.3e6), one(2.6e6), {0}, {0}},
                          {one(1.0e6), one(2.2e6), {0}, {0}, one(0.9e6), {0}, {0}, {0}}};
    for (int s = 0; s < S; s++) {
        h.stages[s].chunk_ns = ch[s];
        h.stages[s].n_chunk = 2;
    }
    pp_extract e;
    extract(&h, &e);
    static const double fwd[L] = {1100, 1000, 1300, 900}, bwd[L] = {2000, 2200, 2600, 2000};
    for (int l = 0; l < L; l++) {
        cr_expect_float_eq(e.costs->layers[l].fwd_us, fwd[l], 1e-9, "layer %d", l);
        cr_expect_float_eq(e.costs->layers[l].bwd_us, bwd[l], 1e-9, "layer %d", l);
    }
    cr_expect(strstr(e.notes, "forward x0.9000..1.3000, backward x1.0000..1.3000"), "%s",
              e.notes);
    pp_extract_free(&e);
}

/* The transfers' variation: each link's timed messages over that link's median, pooled per kind
 * (two gradient links of 100 and 50 us medians give factors 1 and 3, 1 and 2); a kind with fewer
 * than 8 timed messages in all does not vary. */
static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

Test(extract_noise, transfers_over_their_links_median_pooled_per_kind)
{
    hand h;
    make(&h, NULL, NULL);
    double g0[6] = {100e3, 100e3, 300e3, 100e3, 100e3, 100e3}, g1[4] = {50e3, 100e3, 50e3, 50e3};
    double a0[3] = {10e3, 20e3, 30e3};
    pp_alink links[3] = {
        {.src = 1, .dst = 0, .grad = 1, .messages = 6, .timed = 6,
         .latency_ns = {.count = 6, .median = 100e3}, .sample = g0, .n_sample = 6},
        {.src = 2, .dst = 1, .grad = 1, .messages = 4, .timed = 4,
         .latency_ns = {.count = 4, .median = 50e3}, .sample = g1, .n_sample = 4},
        {.src = 0, .dst = 1, .grad = 0, .messages = 3, .timed = 3,
         .latency_ns = {.count = 3, .median = 20e3}, .sample = a0, .n_sample = 3},
    };
    h.a.links = links;
    h.a.n_links = 3;
    pp_extract e;
    extract(&h, &e);
    cr_assert_eq(e.noise.xfer[0].n, 0);
    cr_assert_eq(e.noise.xfer[1].n, 10);
    double f[10];
    memcpy(f, e.noise.xfer[1].factor, sizeof f);
    qsort(f, 10, sizeof *f, cmp_dbl);
    const double want[10] = {1, 1, 1, 1, 1, 1, 1, 1, 2, 3};
    for (int i = 0; i < 10; i++)
        cr_expect_float_eq(f[i], want[i], 1e-12, "factor %d: %g", i, f[i]);
    pp_extract_free(&e);
}

/* The rebalancer charges each stage the optimizer step of its own parameters, as the
 * simulator does: on 6 equal layers whose first holds most of the parameters, the optimum
 * (brute force over every cut of pp_sim_file) gives stage 0 fewer layers, and pp_rebalance
 * finds it, proven, with the same double. */
#include "pp_rebalance.h"
#include "pp_sim.h"

Test(extract_optimizer, the_rebalancer_charges_each_stage_its_optimizer)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(6, 10, 20, 1000, &c), PP_OK);
    for (int l = 0; l < 6; l++)
        c->layers[l].param_bytes = l == 0 ? 8000000 : 1000000;
    c->optimizer_us = 50;
    c->optimizer_us_per_MB = 100; /* stage 0 with layer 0: 800 us and more */
    c->step_fixed_us = 30;
    double best = INFINITY;
    int best_cut = -1;
    for (int cut = 1; cut < 6; cut++) {
        int bounds[3] = {0, cut, 6};
        pp_partition part = {.L = 6, .S = 2, .v = 1, .P = 2, .bounds = bounds};
        pp_sim_result r;
        cr_assert_eq(pp_sim_file(PP_SCHED_1F1B, &part, 4, c, NULL, &r), PP_OK);
        if (r.step_ns < best) {
            best = r.step_ns;
            best_cut = cut;
        }
        pp_sim_result_free(&r);
    }
    cr_expect_lt(best_cut, 3, "the parameters should pull the cut towards layer 0");
    pp_rebalance_opts o = {.kind = PP_SCHED_1F1B, .S = 2, .v = 1, .M = 4, .costs = c};
    pp_rebalance_result r;
    cr_assert_eq(pp_rebalance(&o, &r), PP_OK, "%s", pp_error_message());
    cr_expect_eq(r.step_ns, best);
    cr_expect_eq(r.partition.bounds[1], best_cut);
    cr_expect(r.exact);
    cr_expect_leq(r.lower_bound_ns, r.step_ns);
    pp_rebalance_result_free(&r);
    pp_costs_destroy(c);
}

/* h's analysis with MANY analyzed steps of times ns[] (NULL: all at `median`), the stages' parts
 * of them not measured; the steps are static (tests run one at a time, each sets its own). */
enum { MANY = 41 };
static void many_steps(hand *h, const double *ns, double median)
{
    static pp_astep steps[MANY];
    static pp_stage_step ss[MANY][S];
    for (int i = 0; i < MANY; i++) {
        double t = ns ? ns[i] : median;
        steps[i] = (pp_astep){.step = i + 1, .step_ns = t, .window_ns = t, .stage = ss[i]};
        for (int s = 0; s < S; s++)
            ss[i][s] = (pp_stage_step){.outside_ns = -1, .pre_opt_ns = -1};
    }
    h->a.steps = steps;
    h->a.n_steps = MANY;
    h->a.step_ns = (pp_astats){.count = MANY, .mean = median, .median = median};
}

/* Whether the transfers' measured variation stays in the model (extract.c, choose_xfer): the
 * run's own layout is replayed with it and without; fixed transfers are kept while their replay's
 * median lies inside the measured median's 95% interval (a simpler model the run's steps do not
 * reject), and the variation only when it is needed and brings the replay nearer. The gradients'
 * messages: 16 of 20 at their 100 us median, 4 at 6 ms (receivers woken late). */
Test(extract_noise, transfers_vary_only_where_the_measured_median_rejects_them_fixed)
{
    enum { N = MANY };
    hand h;
    make(&h, NULL, NULL);
    double g[20];
    for (int i = 0; i < 20; i++)
        g[i] = i % 5 ? 100e3 : 6e6;
    pp_alink links[2] = {
        {.src = 1, .dst = 0, .grad = 1, .messages = 20, .timed = 20, .bytes = 20 * 4096,
         .latency_ns = {.count = 20, .median = 100e3}, .sample = g, .n_sample = 20},
        {.src = 0, .dst = 1, .grad = 0, .messages = 20, .bytes = 20 * 4096},
    };
    h.a.links = links;
    h.a.n_links = 2;
    /* the two replays' medians, whatever the run measured */
    pp_extract e;
    extract(&h, &e);
    double fixed = 0;
    cr_assert_eq(pp_extract_predict(&e, PP_SCHED_1F1B, &e.partition, e.M, &fixed, NULL), PP_OK);
    e.noise.xfer_fixed = 0;
    pp_sim_dist_result with;
    cr_assert_eq(pp_extract_predict_dist(&e, PP_SCHED_1F1B, &e.partition, e.M, 1, &with), PP_OK);
    pp_extract_free(&e);
    cr_log_info("fixed transfers %.3f ms, varying %.3f ms (median)\n", fixed * 1e-6,
                with.median_ns * 1e-6);
    cr_assert_gt(with.median_ns, fixed * 1.04, "the late messages move the replay too little");
    cr_assert_lt(with.median_ns, fixed * 1.15);
    /* steps all at the varying replay's median: fixed transfers are rejected, variation kept */
    many_steps(&h, NULL, with.median_ns);
    pp_astep *steps = h.a.steps;
    extract(&h, &e);
    cr_assert_eq(e.noise.xfer_fixed, 0, "%s", e.notes);
    cr_assert_not_null(strstr(e.notes, "transfers vary as measured"), "%s", e.notes);
    pp_extract_free(&e);
    /* the same median, steps spread +-60% around it: its interval holds the fixed replay's */
    for (int i = 0; i < N; i++)
        steps[i].step_ns = with.median_ns * (0.4 + 1.2 * i / (N - 1));
    extract(&h, &e);
    cr_assert_eq(e.noise.xfer_fixed, 1, "%s", e.notes);
    cr_assert_not_null(strstr(e.notes, "inside the measured median's 95% interval"), "%s",
                       e.notes);
    pp_extract_free(&e);
    /* too few steps for an interval: the nearer replay decides, as before */
    h.a.n_steps = 7;
    extract(&h, &e);
    cr_assert_eq(e.noise.xfer_fixed, 0, "%s", e.notes);
    pp_extract_free(&e);
}

/* Whether the ops' own variation moves the steps (extract.c, check_op_variation): every stage's
 * forward and backward ops vary with a log-sd of 0.3. Steps that spread as replays of the run's
 * own layout with that variation do keep it; steps that do not spread at all (the sim backend's
 * ops trade a late wake-up with the next op, and the step stays on its deadlines) reject it, and
 * the ops' factors are scaled down to what the steps show, none here. */
Test(extract_noise, ops_variation_is_kept_only_where_the_steps_spread_as_it_would)
{
    enum { N = MANY, K = 200 };
    hand h;
    make(&h, NULL, NULL);
    static double fwd[S][K], bwd[S][K];
    pp_rng rng;
    pp_rng_seed(&rng, 3);
    for (int s = 0; s < S; s++) {
        for (int i = 0; i < K; i++) {
            fwd[s][i] = 2e6 * exp(0.3 * pp_rng_normal(&rng));
            bwd[s][i] = 4e6 * exp(0.3 * pp_rng_normal(&rng));
        }
        h.stages[s].sample[PP_ASTAGE_FWD] = fwd[s];
        h.stages[s].n_sample[PP_ASTAGE_FWD] = K;
        h.stages[s].sample[PP_ASTAGE_BWD] = bwd[s];
        h.stages[s].n_sample[PP_ASTAGE_BWD] = K;
    }
    /* fewer than 8 steps: nothing to check against, the variation is kept */
    pp_extract e;
    extract(&h, &e);
    cr_assert_eq(e.noise.op_scale, 1);
    /* steps drawn from the model's own replays (another seed than the check's) */
    static double replay[1000];
    pp_sim_dist_opts o = {.noise = &e.noise, .seed = 99, .n_min = 1000, .n_max = 1000,
                          .samples = replay};
    pp_sim_dist_result r;
    cr_assert_eq(pp_sim_dist_file(e.schedule, &e.partition, e.M, pp_extract_run_costs(&e), &o,
                                  &r),
                 PP_OK, "%s", pp_error_message());
    cr_assert_eq(r.n, 1000);
    cr_assert_gt(r.p95_ns, 1.05 * r.median_ns, "the ops' variation barely spreads the replays");
    pp_extract_free(&e);
    many_steps(&h, replay, r.median_ns);
    pp_astep *steps = h.a.steps;
    extract(&h, &e);
    cr_assert_eq(e.noise.op_scale, 1, "%s", e.notes);
    cr_assert_null(strstr(e.notes, "ops' own variation scaled"), "%s", e.notes);
    double kept_med = 0;
    pp_sim_dist_result d;
    cr_assert_eq(pp_extract_predict_dist(&e, e.schedule, &e.partition, e.M, 1, &d), PP_OK);
    kept_med = d.median_ns;
    pp_extract_free(&e);
    /* every step at the median: the variation is rejected, and none is left */
    for (int i = 0; i < N; i++)
        steps[i].step_ns = steps[i].window_ns = r.median_ns;
    extract(&h, &e);
    cr_assert_eq(e.noise.op_scale, 0, "%s", e.notes);
    cr_assert_not_null(strstr(e.notes, "ops' own variation scaled to 0% of its log-sd"), "%s",
                       e.notes);
    cr_assert_eq(pp_extract_predict_dist(&e, e.schedule, &e.partition, e.M, 1, &d), PP_OK);
    cr_log_info("median with the ops' variation %.3f ms, without %.3f ms (noise-free %.3f)\n",
                kept_med * 1e-6, d.median_ns * 1e-6, d.noise_free_ns * 1e-6);
    cr_assert_float_eq(d.median_ns, d.noise_free_ns, 1e-6 * d.noise_free_ns);
    cr_assert_float_eq(d.p95_ns, d.noise_free_ns, 1e-6 * d.noise_free_ns);
    pp_extract_free(&e);
    /* steps spread half as much as the replays: scaled part of the way (the replays' spread
     * then that of the steps) */
    for (int i = 0; i < N; i++)
        steps[i].step_ns = steps[i].window_ns = r.median_ns + 0.5 * (replay[i] - r.median_ns);
    extract(&h, &e);
    cr_log_info("half the spread: op_scale %.3f\n%s", e.noise.op_scale, e.notes);
    cr_assert(e.noise.op_scale > 0.2 && e.noise.op_scale < 0.8, "op_scale %.3f:\n%s",
              e.noise.op_scale, e.notes);
    pp_extract_free(&e);
}

/* The stages' busy-time levels (docs/sim-dist.md "The busy time's level") are those of the ops'
 * factors as the extraction keeps them: ops with a slow tail (one in seven 1.6x) whose steps do
 * not spread at all, so that the check removes their variation (op_scale 0), and busy times
 * measured per step; the level then is what factors of 1 give, not what the fitted ones did. */
Test(extract_noise, busy_time_levels_follow_the_ops_as_kept)
{
    enum { K = 280 };
    hand h;
    make(&h, NULL, NULL);
    static double fwd[S][K], bwd[S][K];
    pp_rng rng;
    pp_rng_seed(&rng, 17);
    for (int s = 0; s < S; s++) {
        for (int i = 0; i < K; i++) {
            double tail = i % 7 ? 1.0 : 1.6;
            fwd[s][i] = 2e6 * tail * exp(0.01 * pp_rng_normal(&rng));
            bwd[s][i] = 4e6 * tail * exp(0.01 * pp_rng_normal(&rng));
        }
        h.stages[s].sample[PP_ASTAGE_FWD] = fwd[s];
        h.stages[s].n_sample[PP_ASTAGE_FWD] = K;
        h.stages[s].sample[PP_ASTAGE_BWD] = bwd[s];
        h.stages[s].n_sample[PP_ASTAGE_BWD] = K;
    }
    many_steps(&h, NULL, 60e6);
    for (int i = 0; i < MANY; i++)
        for (int s = 0; s < S; s++)
            h.a.steps[i].stage[s].busy_ns = h.a.M * 6e6 * 1.05 * exp(0.03 * pp_rng_normal(&rng));
    pp_extract e;
    extract(&h, &e);
    cr_assert_eq(e.noise.op_scale, 0, "%s", e.notes);
    cr_assert_gt(e.noise.n_step_f, 0);
    for (int s = 0; s < S; s++) {
        double kept = e.noise.level[s];
        cr_assert_gt(e.noise.busy_median_ns[s], 0);
        pp_sim_noise_level(&e.noise);
        cr_assert_float_eq(e.noise.level[s], kept, 1e-12, "stage %d: kept %.6f, of the kept ops %.6f",
                           s, kept, e.noise.level[s]);
        cr_assert_neq(kept, 1.0);
    }
    pp_extract_free(&e);
}

/* Layers that do not add up to their ops are left as measured and counted
 * (pp_extract.layers_unscaled); the speed comparison between two runs, which sums the layers,
 * refuses such a run rather than read its layers' shortfall as the machine's speed. */
Test(extract_layers, layers_far_from_their_ops_are_counted_and_not_taken_for_a_speed)
{
    hand h;
    make(&h, NULL, NULL);
    pp_extract good, bad;
    extract(&h, &good);
    cr_assert_eq(good.layers_unscaled, 0, "%s", good.notes);
    /* stage 0's forward op 5 x its two layers' sum: its layers' ranges woke late and caught up */
    h.stages[0].fwd_ns = one(10e6);
    extract(&h, &bad);
    cr_assert_eq(bad.layers_unscaled, 1, "%s", bad.notes);
    cr_assert_not_null(strstr(bad.notes, "layers left as measured"), "%s", bad.notes);
    pp_tune_opts o = {0};
    pp_tune_speed sp;
    cr_assert_eq(pp_tune_speed_compare(&o, &good, &good, &sp), PP_OK, "%s", pp_error_message());
    cr_assert_float_eq(sp.ratio, 1, 1e-12);
    cr_assert_eq(pp_tune_speed_compare(&o, &good, &bad, &sp), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "the run's layer ranges do not add up to its ops"), "%s",
              pp_error_message());
    cr_assert_eq(pp_tune_speed_compare(&o, &bad, &good, &sp), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "the baseline's layer ranges"), "%s",
              pp_error_message());
    /* pprof-tune's comparison warns under the self-check, where it is read, not only in -v */
    for (int i = 0; i < 2; i++) {
        pp_tune_search ts;
        cr_assert_eq(pp_tune_search_run(&o, "hand", i ? &bad : &good, &ts), PP_OK, "%s",
                     pp_error_message());
        char *text = NULL;
        size_t tn = 0;
        FILE *f = open_memstream(&text, &tn);
        pp_tune_search_print(&o, "hand", i ? &bad : &good, &ts, f);
        fclose(f);
        const char *w = strstr(text, "warning: 1 op(s) of this run are not the sum of their layer");
        cr_assert(i ? w != NULL : w == NULL, "%s", text);
        cr_assert(!w || w < strstr(text, "boundaries"), "%s", text);
        free(text);
        pp_tune_search_free(&ts);
    }
    pp_extract_free(&good);
    pp_extract_free(&bad);
}

/* Which of the run's stages a layout's stage takes its variation from
 * (pp_extract_noise_stages): the run measured stage 0 busy 30% of its step, stage 1 90%. The
 * run's own layout keeps its stages; one whose stages stay about as busy keeps them too; one
 * that swaps the work (3 layers on stage 0, 1 on stage 1) swaps them; one that makes stage 0 as
 * busy as stage 1 was draws both from stage 1. */
Test(extract_noise, stages_take_the_variation_of_the_run_stage_as_busy)
{
    hand h;
    make(&h, NULL, NULL);
    static double fwd[S][40], bwd[S][40];
    for (int s = 0; s < S; s++) {
        for (int i = 0; i < 40; i++) { /* stage 1's ops vary, stage 0's barely */
            fwd[s][i] = 2e6 * (1 + (s ? 0.1 : 0.01) * (i % 5));
            bwd[s][i] = 4e6 * (1 + (s ? 0.1 : 0.01) * (i % 5));
        }
        h.stages[s].sample[PP_ASTAGE_FWD] = fwd[s];
        h.stages[s].n_sample[PP_ASTAGE_FWD] = 40;
        h.stages[s].sample[PP_ASTAGE_BWD] = bwd[s];
        h.stages[s].n_sample[PP_ASTAGE_BWD] = 40;
    }
    h.stages[0].busy_ns = 15e6;
    h.stages[1].busy_ns = 45e6;
    pp_extract e;
    extract(&h, &e);
    cr_assert_not_null(e.busy_share);
    cr_assert_float_eq(e.busy_share[0], 0.3, 1e-12);
    cr_assert_float_eq(e.busy_share[1], 0.9, 1e-12);
    int map[S];
    cr_assert_eq(pp_extract_noise_stages(&e, e.schedule, &e.partition, e.M, NULL, map), PP_OK);
    cr_assert(map[0] == -1 && map[1] == -1, "own layout: %d %d", map[0], map[1]);
    pp_partition p;
    const int keep[] = {0, 1, 4}, swap[] = {0, 3, 4};
    double share[S];
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(pp_partition_from_bounds(k ? swap : keep, S + 1, L, S, 1, &p), PP_OK);
        pp_sim_result r;
        cr_assert_eq(pp_sim_file(e.schedule, &p, e.M, e.costs, NULL, &r), PP_OK);
        for (int s = 0; s < S; s++)
            share[s] = r.busy_ns[s] / r.step_ns;
        pp_sim_result_free(&r);
        cr_assert_eq(pp_extract_noise_stages(&e, e.schedule, &p, e.M, NULL, map), PP_OK);
        cr_log_info("bounds 0,%d,4: shares %.3f %.3f -> stages %d %d\n", k ? 3 : 1, share[0],
                    share[1], map[0], map[1]);
        if (k)
            cr_assert(map[0] == 1 && map[1] == 0, "swapped: %d %d", map[0], map[1]);
        else
            cr_assert(map[0] == 0 && map[1] == 1, "kept: %d %d", map[0], map[1]);
        pp_partition_free(&p);
    }
    /* stage 0 as busy as stage 1 was: measured 0.3 against ~0.9 */
    h.stages[0].busy_ns = 15e6;
    h.stages[1].busy_ns = 48e6;
    pp_extract_free(&e);
    extract(&h, &e);
    /* the own bounds under another schedule: not the run's layout */
    cr_assert_eq(pp_partition_from_bounds((const int[]){0, 2, 4}, S + 1, L, S, 1, &p), PP_OK);
    cr_assert_eq(pp_extract_noise_stages(&e, PP_SCHED_GPIPE, &p, e.M, NULL, map), PP_OK);
    cr_assert(map[0] == 1 && map[1] == 1, "balanced: %d %d", map[0], map[1]);
    /* the predictions replay with that map */
    pp_sim_dist_opts o = {.noise = &e.noise, .seed = PP_TUNE_DIST_SEED, .noise_stage = map};
    pp_sim_dist_result want, got;
    cr_assert_eq(pp_sim_dist_file(PP_SCHED_GPIPE, &p, e.M, pp_extract_run_costs(&e), &o, &want),
                 PP_OK);
    cr_assert_eq(pp_tune_predict_dist(NULL, &e, NULL, PP_SCHED_GPIPE, &p, e.M, &got), PP_OK);
    cr_assert(memcmp(&want, &got, sizeof got) == 0, "median %.0f, mapped %.0f", got.median_ns,
              want.median_ns);
    o.noise_stage = NULL; /* and the map matters here */
    cr_assert_eq(pp_sim_dist_file(PP_SCHED_GPIPE, &p, e.M, pp_extract_run_costs(&e), &o, &got),
                 PP_OK);
    cr_assert_neq(got.median_ns, want.median_ns);
    cr_assert_eq(pp_extract_predict_dist(&e, PP_SCHED_GPIPE, &p, e.M, PP_TUNE_DIST_SEED, &got),
                 PP_OK);
    cr_assert(memcmp(&want, &got, sizeof got) == 0, "median %.0f, mapped %.0f", got.median_ns,
              want.median_ns);
    pp_partition_free(&p);
    pp_extract_free(&e);
}
