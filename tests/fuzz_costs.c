/* fuzz_costs.c: fuzz target for the cost file (plan/costs.c: pp_costs_parse, docs/cost-file.md)
 * and what the tools run behind it: the simulator on the even partition (pp_sim_file) for every
 * schedule kind the shape allows, the Monte Carlo predictor (pp_sim_dist_file) with a seeded
 * draw, the rebalancer (pp_rebalance) with a tiny time budget, and the write + reload round
 * trip (pp_costs_write must write what pp_costs_load gives back, value for value). Built two
 * ways, as tests/fuzz_dialect.c is:
 *   - by scripts/fuzz.sh with clang -fsanitize=fuzzer,address,undefined: libFuzzer's main;
 *   - with -DPP_FUZZ_STANDALONE (tests/CMakeLists.txt): a driver replaying FILE... or running
 *     the seeds of DIR and a deterministic mutation sweep over them (--selftest N DIR).
 *
 * An input is a cost file's text, then optionally a NUL byte and up to 6 shape bytes: stages
 * (1 + b0 % 8), micro-batches (1 + b1 % 16), chunks for interleaved (2 + b2 % 3), the kinds to
 * run (b3 % 16 as a bit mask, 0 = all), a memory limit for the rebalancer (0, or b4 << b5 % 48
 * bytes). Without them: S = min(4, L), M = 2 S, v = 2, every kind, no limit. The parse itself is
 * not restricted; the work behind it is capped by what the input asks (docs: the rebalancer only
 * for L <= 64, the Monte Carlo replays for L <= 4096, a few replays each). */
#include "fuzz_common.h"

#include "pp_plan.h"
#include "pp_rebalance.h"
#include "pp_sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { REBAL_MAX_L = 64, DIST_MAX_L = 4096, DIST_REPLAYS = 24 };

/* The loader accepts any finite time (docs/cost-file.md), so sums of times near 1e308 may
 * overflow to infinity and differences of infinities be NaN: the simulator is then not asked
 * for a number, only not to crash. Within `sane` (every time <= SANE_US, a bandwidth of 0 or >=
 * SANE_MIN_GBPS), every number it hands out must be finite. */
#define SANE_US 1e12
#define SANE_MIN_GBPS 1e-6
static int sane;

static int sane_costs(const pp_costs *c)
{
    const double top[] = {c->p2p_latency_us, c->optimizer_us, c->optimizer_us_per_MB,
                          c->grad_norm_us,   c->step_fixed_us, c->send_act_us,
                          c->send_grad_us,   c->dp_allreduce_us, c->dp_allreduce_us_per_MB,
                          c->op_gap_us,      c->recv_act_us,   c->recv_grad_us};
    for (size_t k = 0; k < sizeof top / sizeof top[0]; k++)
        if (top[k] > SANE_US)
            return 0;
    if (c->p2p_GBps > 0 && c->p2p_GBps < SANE_MIN_GBPS)
        return 0;
    for (int i = 0; i < c->n_layers; i++) {
        const pp_layer_cost *l = &c->layers[i];
        if (l->fwd_us > SANE_US || l->bwd_us > SANE_US || l->bwd_input_us > SANE_US ||
            l->bwd_weight_us > SANE_US)
            return 0;
    }
    return 1;
}

/* Reads every number a success hands out, so that the sanitizers see one that is off. */
static void check_number(double x)
{
    if (sane && !isfinite(x)) {
        fprintf(stderr, "fuzz_costs: %g from plausible costs\n", x);
        abort();
    }
}

static void check_sim(const pp_sim_result *r)
{
    check_number(r->step_ns);
    check_number(r->bubble_ratio);
    for (int s = 0; s < r->S; s++) {
        check_number(r->busy_ns[s]);
        check_number(r->idle_ns[s]);
        check_number(r->end_ns[s]);
    }
}

/* The failure contract: a refusal says why. */
static void check_refusal(pp_status st)
{
    if (st != PP_OK && !pp_error_message()[0])
        abort();
}

/* A seeded factor in [0.9, 1.3) from the replay's key: the jitter spec's kind of draw. */
static double draw(void *ctx, int stage, int k, const pp_instr *in, uint64_t key)
{
    (void)ctx;
    (void)stage;
    (void)k;
    (void)in;
    uint64_t z = key + 0x9E3779B97F4A7C15u;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    z ^= z >> 31;
    return 0.9 + 0.4 * (double)(z >> 11) * 0x1p-53;
}

static void run_dist(pp_schedule_kind kind, const pp_partition *part, int M, const pp_costs *c)
{
    if (c->n_layers > DIST_MAX_L)
        return;
    pp_sim_dist_opts o = {.draw = draw, .seed = 18, .n_min = DIST_REPLAYS,
                          .n_max = DIST_REPLAYS};
    pp_sim_dist_result r;
    pp_error_clear();
    pp_status st = pp_sim_dist_file(kind, part, M, c, &o, &r);
    check_refusal(st);
    if (st != PP_OK)
        return;
    if (r.n < 1 || r.n > DIST_REPLAYS)
        abort();
    check_number(r.noise_free_ns);
    check_number(r.median_ns);
    check_number(r.p95_ns);
    check_number(r.mean_ns);
    if (sane && r.median_ns > r.p95_ns)
        abort();
}

static void run_rebalance(pp_schedule_kind kind, int S, int M, int v, const pp_costs *c,
                          uint64_t limit)
{
    if (c->n_layers > REBAL_MAX_L)
        return;
    pp_rebalance_opts o = {.kind = kind, .S = S, .v = v, .M = M, .costs = c,
                           .memory_limit_bytes = limit, .time_budget_s = 0.02};
    pp_rebalance_result r;
    memset(&r, 0, sizeof r);
    pp_error_clear();
    pp_status st = pp_rebalance(&o, &r);
    check_refusal(st);
    if (st != PP_OK)
        return;
    check_number(r.step_ns);
    check_number(r.lower_bound_ns);
    if (r.partition.S != S || r.partition.v != v || r.partition.L != c->n_layers ||
        (sane && !(r.lower_bound_ns <= r.step_ns)))
        abort();
    for (int s = 0; s < S; s++)
        if (limit && r.stage_memory_bytes[s] > limit)
            abort(); /* the proposal meets the limit */
    pp_rebalance_result_free(&r);
}

/* The simulator, the predictor and the rebalancer on every kind the shape allows. */
static void run_behind(const pp_costs *c, int S, int M, int vi, unsigned kinds, uint64_t limit)
{
    for (int k = 0; k < PP_SCHED_N_KINDS; k++) {
        if (!(kinds & (1u << k)))
            continue;
        pp_schedule_kind kind = (pp_schedule_kind)k;
        int v = kind == PP_SCHED_INTERLEAVED ? vi : 1;
        if (pp_schedule_check_args(kind, S, M, v) != PP_OK || S * v > c->n_layers)
            continue;
        pp_partition part;
        pp_error_clear();
        pp_status st = pp_partition_even(c->n_layers, S, v, &part);
        check_refusal(st);
        if (st != PP_OK)
            continue;
        pp_sim_result r;
        memset(&r, 0, sizeof r);
        pp_error_clear();
        st = pp_sim_file(kind, &part, M, c, NULL, &r);
        check_refusal(st);
        if (st == PP_OK) {
            check_sim(&r);
            pp_sim_result_free(&r);
        }
        run_dist(kind, &part, M, c);
        pp_partition_free(&part);
        run_rebalance(kind, S, M, v, c, limit);
    }
}

/* Written, the costs must load back as they were. */
static void round_trip(const pp_costs *c)
{
    char path[96];
    snprintf(path, sizeof path, "%s/c.json", fz_dir);
    pp_error_clear();
    pp_status st = pp_costs_write(c, path);
    check_refusal(st);
    if (st != PP_OK)
        abort(); /* what the loader accepted, the writer writes */
    pp_costs *b = NULL;
    if (pp_costs_load(path, &b) != PP_OK) {
        fprintf(stderr, "fuzz_costs: the written file does not load: %s\n", pp_error_message());
        abort();
    }
    int same = b->n_layers == c->n_layers && b->p2p_GBps == c->p2p_GBps &&
               b->p2p_latency_us == c->p2p_latency_us && b->optimizer_us == c->optimizer_us &&
               b->optimizer_us_per_MB == c->optimizer_us_per_MB &&
               b->grad_norm_us == c->grad_norm_us && b->step_fixed_us == c->step_fixed_us &&
               b->send_act_us == c->send_act_us && b->send_grad_us == c->send_grad_us &&
               b->recv_act_us == c->recv_act_us && b->recv_grad_us == c->recv_grad_us &&
               b->dp_allreduce_us == c->dp_allreduce_us &&
               b->dp_allreduce_us_per_MB == c->dp_allreduce_us_per_MB &&
               b->op_gap_us == c->op_gap_us && b->microbatch_size == c->microbatch_size;
    for (int i = 0; same && i < c->n_layers; i++) {
        const pp_layer_cost *x = &c->layers[i], *y = &b->layers[i];
        same = strcmp(x->name, y->name) == 0 && x->fwd_us == y->fwd_us &&
               x->bwd_us == y->bwd_us && x->has_split == y->has_split &&
               (!x->has_split ||
                (x->bwd_input_us == y->bwd_input_us && x->bwd_weight_us == y->bwd_weight_us)) &&
               x->activation_bytes == y->activation_bytes && x->param_bytes == y->param_bytes;
        if (!same)
            fprintf(stderr, "fuzz_costs: layer %d differs after the round trip\n", i);
    }
    pp_costs_destroy(b);
    if (!same) {
        fprintf(stderr, "fuzz_costs: the round trip changed a value\n");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fz_init("co") != 0)
        abort();
    const uint8_t *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    char *text = malloc(tlen + 1);
    if (!text)
        return 0;
    memcpy(text, data, tlen);
    text[tlen] = '\0';
    pp_costs *c = NULL;
    pp_error_clear();
    pp_status st = pp_costs_parse(text, "fuzz.json", &c);
    free(text);
    if ((st == PP_OK) != (c != NULL) || (st != PP_OK && !pp_error_message()[0]))
        abort(); /* a failure hands out nothing and says why */
    if (!c)
        return 0;
    sane = sane_costs(c);
    /* the parameters of a range are at least those of any one layer in it (no wrap-around) */
    uint64_t all = pp_costs_param_bytes(c, 0, c->n_layers);
    for (int i = 0; i < c->n_layers; i++)
        if (c->layers[i].param_bytes > all)
            abort();
    uint8_t b[6] = {0};
    size_t nb = nul ? size - tlen - 1 : 0;
    memcpy(b, nul ? nul + 1 : data, nb < sizeof b ? nb : sizeof b);
    int S, M, v;
    unsigned kinds;
    uint64_t limit;
    if (nb > 0) {
        S = 1 + b[0] % 8;
        M = 1 + b[1] % 16;
        v = 2 + b[2] % 3;
        kinds = b[3] % 16 ? b[3] % 16u : 15u;
        limit = b[4] ? (uint64_t)b[4] << (b[5] % 48) : 0;
    } else {
        S = c->n_layers < 4 ? c->n_layers : 4;
        M = 2 * S;
        v = 2;
        kinds = 15;
        limit = 0;
    }
    run_behind(c, S, M, v, kinds, limit);
    round_trip(c);
    pp_costs_destroy(c);
    return 0;
}

#ifdef PP_FUZZ_STANDALONE
/* ======================================================================================== */
/* Standalone driver: replay, and a deterministic mutation sweep over a directory's inputs.  */
/* ======================================================================================== */

/* One deterministic mutation of the cost text: a byte changed to one JSON cares about, a
 * number's digits replaced by a hostile value, or a cut; the shape bytes changed at times. */
static size_t mutate(pp_rng *g, const fz_input *in, uint8_t *out, size_t cap)
{
    size_t n = in->n < cap ? in->n : cap;
    memcpy(out, in->d, n);
    const uint8_t *nul = memchr(out, 0, n);
    size_t tlen = nul ? (size_t)(nul - out) : n;
    int steps = 1 + (int)pp_rng_below(g, 3);
    for (int s = 0; s < steps && tlen > 2; s++) {
        uint64_t what = pp_rng_below(g, 8);
        if (what < 7) {
            fz_mutate_json_text(g, out, tlen, what >= 4);
        } else if (nul && n > tlen + 1) {
            size_t k = tlen + 1 + (size_t)pp_rng_below(g, n - tlen - 1);
            out[k] = (uint8_t)pp_rng_below(g, 256);
        } else {
            n = tlen = (size_t)pp_rng_below(g, tlen) + 1;
        }
    }
    return n;
}

int main(int argc, char **argv)
{
    return fz_dir_main(argc, argv, "fuzz_costs", 20261218, 1 << 18, mutate);
}
#endif
