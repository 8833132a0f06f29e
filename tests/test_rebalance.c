/* test_rebalance.c: the rebalancer (analyzer/rebalance.c) against brute force over every
 * partition of random cost files for all four schedules, its evaluator against pp_sim_file, its
 * lower bounds against the simulated step, memory limits, the effect of a heavy stage's position,
 * argument errors, and the proven gap when the time budget runs out. */
#include "pp_sim.h"
#include "pp_rebalance.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Random costs: forward times varying 10x, backward 1 to 3 times the forward, a split backward
 * in about half the layers, random activation and parameter sizes; transfers and the optimizer
 * step on request. */
static pp_costs *random_costs(pp_rng *rng, int L, int comm, int opt)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(L, 100, 200, 0, &c), PP_OK);
    for (int l = 0; l < L; l++) {
        pp_layer_cost *y = &c->layers[l];
        y->fwd_us = 100 + (double)pp_rng_below(rng, 901);
        y->bwd_us = y->fwd_us * (1 + 2 * pp_rng_uniform(rng));
        y->has_split = (int)pp_rng_below(rng, 2);
        double part = 0.2 + 0.6 * pp_rng_uniform(rng);
        y->bwd_input_us = y->has_split ? y->bwd_us * part : 0;
        y->bwd_weight_us = y->has_split ? y->bwd_us - y->bwd_input_us : 0;
        y->activation_bytes = pp_rng_below(rng, 4u << 20);
        y->param_bytes = pp_rng_below(rng, 16u << 20);
    }
    if (comm) {
        c->p2p_GBps = 10;
        c->p2p_latency_us = 20;
        /* the sender's own time per message (the evaluator's K_SEND steps) */
        c->send_act_us = 15;
        c->send_grad_us = 40;
        /* half of them the receiver's own time per message too (the evaluator's K_RECV_*_OWN
         * steps: a receive ends at max(its start + it, the arrival)) */
        c->recv_act_us = L % 2 ? 0 : 25;
        c->recv_grad_us = L % 2 ? 0 : 55;
    }
    c->optimizer_us = opt ? 300 : 0;
    /* half of those with an optimizer step have a data-parallel all-reduce before its barrier,
     * of each stage's parameters (the evaluator's and pp_sim_file's, the same double) */
    c->dp_allreduce_us = opt && L % 2 ? 60 : 0;
    c->dp_allreduce_us_per_MB = opt && L % 2 ? 25 : 0;
    /* a third of those with messages have the schedule's own time after each compute op (the
     * evaluator's and pp_sim_file's; the bounds leave it out, still lower bounds) */
    c->op_gap_us = comm && L % 3 == 0 ? 70 : 0;
    return c;
}

static int peaks(pp_schedule_kind kind, int S, int M, int v, int *peak)
{
    pp_schedule *sc = NULL;
    pp_schedule_report rep;
    cr_assert_eq(pp_schedule_create(kind, S, M, v, &sc), PP_OK);
    cr_assert_eq(pp_schedule_validate(sc, &rep), PP_OK);
    for (int s = 0; s < S; s++)
        peak[s] = rep.peak_inflight[s];
    pp_schedule_report_free(&rep);
    pp_schedule_destroy(sc);
    return S;
}

/* The largest stage memory of p under pp_stage_memory_model, the rebalancer's limit, with the
 * layers of `rc` recomputed (NULL: none); each stage's in per_stage[] when not NULL. */
static uint64_t max_memory_of(const pp_schedule *sc, const pp_costs *c, const pp_partition *p,
                              const uint8_t *rc, uint64_t *per_stage)
{
    uint64_t m = 0;
    for (int s = 0; s < p->S; s++) {
        pp_stage_memory sm;
        cr_assert_eq(pp_stage_memory_model(c, p, sc, s, rc, &sm), PP_OK, "%s",
                     pp_error_message());
        if (per_stage)
            per_stage[s] = sm.total_bytes;
        m = sm.total_bytes > m ? sm.total_bytes : m;
    }
    return m;
}

static uint64_t max_memory(pp_schedule_kind kind, int M, const pp_costs *c, const pp_partition *p,
                           const uint8_t *rc, uint64_t *per_stage)
{
    pp_schedule *sc = NULL;
    cr_assert_eq(pp_schedule_create(kind, p->S, M, p->v, &sc), PP_OK);
    uint64_t m = max_memory_of(sc, c, p, rc, per_stage);
    pp_schedule_destroy(sc);
    return m;
}

/* Every partition, through pp_sim_file: the best step among those within `limit` (0 = none),
 * and the smallest largest-stage memory over all of them. With `rc` = 1, each partition also
 * with every subset of its stages recomputed, with rc = 2 every subset of its layers
 * (pp_costs_with_recompute): the exhaustive answer to what the rebalancer decides by its rule. */
typedef struct brute {
    pp_schedule_kind kind;
    int M, rc;
    int mem_only; /* the smallest memory only: no simulation */
    pp_schedule *sc; /* (kind, S, M, v), for the memory model */
    const pp_costs *c;
    uint64_t limit;
    pp_partition part;
    double best;
    uint64_t min_mem;
    int count;
    unsigned best_mask; /* the best's recomputed stages */
} brute;

static void brute_leaf(brute *b)
{
    pp_partition *p = &b->part;
    uint8_t mask[64];
    cr_assert_leq(p->L, 64);
    unsigned n_sub = b->rc == 2 ? 1u << p->L : b->rc ? 1u << p->S : 1u;
    for (unsigned sub = 0; sub < n_sub; sub++) {
        memset(mask, 0, sizeof mask);
        for (int l = 0; b->rc == 2 && l < p->L; l++)
            mask[l] = (sub >> l) & 1;
        for (int j = 0; b->rc == 1 && j < p->P; j++)
            if (sub & (1u << (j % p->S)))
                memset(mask + p->bounds[j], 1, (size_t)(p->bounds[j + 1] - p->bounds[j]));
        uint64_t m = max_memory_of(b->sc, b->c, p, sub ? mask : NULL, NULL);
        b->min_mem = m < b->min_mem ? m : b->min_mem;
        if (b->mem_only || (b->limit && m > b->limit))
            continue;
        pp_costs *rc = NULL;
        cr_assert_eq(pp_costs_with_recompute(b->c, mask, &rc), PP_OK);
        pp_sim_result r;
        cr_assert_eq(pp_sim_file(b->kind, p, b->M, rc, NULL, &r), PP_OK, "%s",
                     pp_error_message());
        if (r.step_ns < b->best) {
            b->best = r.step_ns;
            b->best_mask = sub;
        }
        b->count++;
        pp_sim_result_free(&r);
        pp_costs_destroy(rc);
    }
}

static void brute_rec(brute *b, int k)
{
    pp_partition *p = &b->part;
    if (k == p->P) {
        if (p->bounds[k] == p->L)
            brute_leaf(b);
        return;
    }
    for (int e = p->bounds[k] + 1; e <= p->L - (p->P - k - 1); e++) {
        p->bounds[k + 1] = e;
        brute_rec(b, k + 1);
    }
}

static brute brute_force_rc(pp_schedule_kind kind, int S, int v, int M, const pp_costs *c,
                            uint64_t limit, int rc)
{
    brute b = {.kind = kind, .M = M, .rc = rc, .c = c, .limit = limit, .best = INFINITY,
               .min_mem = UINT64_MAX};
    cr_assert_eq(pp_schedule_create(kind, S, M, v, &b.sc), PP_OK);
    cr_assert_eq(pp_partition_even(c->n_layers, S, v, &b.part), PP_OK);
    brute_rec(&b, 0);
    pp_partition_free(&b.part);
    pp_schedule_destroy(b.sc);
    b.sc = NULL;
    return b;
}

/* The smallest largest-stage memory over every partition (and, with rc, every subset). */
static uint64_t brute_min_memory(pp_schedule_kind kind, int S, int v, int M, const pp_costs *c,
                                 int rc)
{
    brute b = {.kind = kind, .M = M, .rc = rc, .mem_only = 1, .c = c, .best = INFINITY,
               .min_mem = UINT64_MAX};
    cr_assert_eq(pp_schedule_create(kind, S, M, v, &b.sc), PP_OK);
    cr_assert_eq(pp_partition_even(c->n_layers, S, v, &b.part), PP_OK);
    brute_rec(&b, 0);
    pp_partition_free(&b.part);
    pp_schedule_destroy(b.sc);
    return b.min_mem;
}

static brute brute_force(pp_schedule_kind kind, int S, int v, int M, const pp_costs *c,
                         uint64_t limit, const int *peak)
{
    (void)peak;
    return brute_force_rc(kind, S, v, M, c, limit, 0);
}

/* Random-case counts: the optimised build runs them all; unoptimised and sanitized builds, several
 * times slower, a quarter of them (the same seeds, so the same first cases): they are there to
 * catch memory and undefined-behaviour errors on the same code paths, which the first cases
 * already walk, and the optimised build shows the agreement on every case (CI's sanitized pass
 * spent 60 of its 95 s of this binary on these counts). */
#if defined(__SANITIZE_ADDRESS__) || !defined(NDEBUG)
#define CASES(n) ((n) / 4)
#else
#define CASES(n) (n)
#endif

static int rel_eq(double a, double b) { return fabs(a - b) <= 1e-6 * fmax(fabs(a), fabs(b)); }

/* Random cases of one schedule: L in 4..14, S in 2..4, M in {1, 2, S, 2S, 8} where the schedule
 * allows it, v chunks per stage (interleaved: 2, 3 or 4, which needs L >= vS; S * v <= 14), with
 * and without transfers and the optimizer step. Returns the number of cases checked. */
static int check_against_brute_force_v(pp_schedule_kind kind, int v, uint64_t seed, int n_cases)
{
    pp_rng rng;
    pp_rng_seed(&rng, seed);
    int done = 0;
    long partitions = 0;
    while (done < n_cases) {
        int S = 2 + (int)pp_rng_below(&rng, 3);
        if (v * S > 14)
            continue;
        int Lmin = v * S > 4 ? v * S : 4;
        /* half of the cases at 12 .. 14 layers, where the partitions are many */
        int L = Lmin + (int)pp_rng_below(&rng, (uint64_t)(15 - Lmin));
        if (pp_rng_below(&rng, 2) && Lmin <= 12)
            L = 12 + (int)pp_rng_below(&rng, 3);
        const int Ms[] = {1, 2, S, 2 * S, 8};
        int M = Ms[pp_rng_below(&rng, 5)];
        if (pp_schedule_check_args(kind, S, M, v) != PP_OK)
            continue;
        int comm = (int)pp_rng_below(&rng, 2), opt = (int)pp_rng_below(&rng, 2);
        pp_costs *c = random_costs(&rng, L, comm, opt);
        int peak[4];
        peaks(kind, S, M, v, peak);
        brute b = brute_force(kind, S, v, M, c, 0, peak);
        pp_rebalance_opts o = {.kind = kind, .S = S, .v = v, .M = M, .costs = c};
        pp_rebalance_result r;
        cr_assert_eq(pp_rebalance(&o, &r), PP_OK, "%s", pp_error_message());
        cr_assert(r.exact, "%s L=%d S=%d v=%d M=%d: not proven optimal",
                  pp_schedule_kind_name(kind), L, S, v, M);
        cr_assert(rel_eq(r.step_ns, b.best),
                  "%s L=%d S=%d v=%d M=%d comm=%d opt=%d: rebalancer %.6f ms, brute force over "
                  "%d partitions %.6f ms",
                  pp_schedule_kind_name(kind), L, S, v, M, comm, opt, r.step_ns * 1e-6, b.count,
                  b.best * 1e-6);
        cr_assert_leq(r.lower_bound_ns, b.best * (1 + 1e-12));
        /* the proposal's own simulation gives the reported time */
        pp_sim_result sr;
        cr_assert_eq(pp_sim_file(kind, &r.partition, M, c, NULL, &sr), PP_OK);
        cr_assert_eq(sr.step_ns, r.step_ns);
        pp_sim_result_free(&sr);
        pp_rebalance_result_free(&r);
        pp_costs_destroy(c);
        done++;
        partitions += b.count;
    }
    cr_log_info("%s v=%d: %d cases, %ld partitions simulated by brute force",
                pp_schedule_kind_name(kind), v, done, partitions);
    return done;
}

static int check_against_brute_force(pp_schedule_kind kind, uint64_t seed, int n_cases)
{
    return check_against_brute_force_v(kind, kind == PP_SCHED_INTERLEAVED ? 2 : 1, seed, n_cases);
}

Test(rebalance, matches_brute_force_gpipe) { check_against_brute_force(PP_SCHED_GPIPE, 11, CASES(250)); }
Test(rebalance, matches_brute_force_1f1b) { check_against_brute_force(PP_SCHED_1F1B, 12, CASES(250)); }
Test(rebalance, matches_brute_force_zbh1) { check_against_brute_force(PP_SCHED_ZBH1, 13, CASES(250)); }
Test(rebalance, matches_brute_force_interleaved)
{
    check_against_brute_force(PP_SCHED_INTERLEAVED, 14, CASES(250));
}
/* v = 3 and 4: the stage bounds over three and four chunks per stage, and the search without the
 * pair DP (v = 2 only) */
Test(rebalance, matches_brute_force_interleaved_v3)
{
    check_against_brute_force_v(PP_SCHED_INTERLEAVED, 3, 15, CASES(150));
}
Test(rebalance, matches_brute_force_interleaved_v4)
{
    check_against_brute_force_v(PP_SCHED_INTERLEAVED, 4, 16, CASES(100));
}

/* The mixture's branch and bound (pp_rebalance_branch_bound; the search's for v = 2 where it
 * cannot finish, docs/rebalancer.md): on random small interleaved cases its root value and its
 * bound after any number of splits never exceed the brute-force optimum, the partitions it finds
 * are real ones, and with the optimum as incumbent it proves it optimal by itself where the root
 * relaxation alone leaves a gap. */
Test(rebalance, mixture_branch_and_bound_is_valid_and_proves_small_optima, .timeout = 240)
{
    pp_rng rng;
    pp_rng_seed(&rng, 21);
    int done = 0, gap_cases = 0, closed = 0;
    double worst_root = 0.0;
    while (done < CASES(60)) {
        /* v = 2 and 3 before the search branched for every v: 53 of 53 proven */
        int v = 2 + (int)pp_rng_below(&rng, 3);
        int S = 2 + (int)pp_rng_below(&rng, 3);
        if (v * S > 12)
            continue;
        int L = v * S + (int)pp_rng_below(&rng, (uint64_t)(15 - v * S));
        const int Ms[] = {S, 2 * S, 3 * S};
        int M = Ms[pp_rng_below(&rng, 3)];
        if (pp_schedule_check_args(PP_SCHED_INTERLEAVED, S, M, v) != PP_OK)
            continue;
        pp_costs *c = random_costs(&rng, L, (int)pp_rng_below(&rng, 2),
                                   (int)pp_rng_below(&rng, 2));
        brute b = brute_force(PP_SCHED_INTERLEAVED, S, v, M, c, 0, NULL);
        pp_rebalance_opts o = {.kind = PP_SCHED_INTERLEAVED, .S = S, .v = v, .M = M, .costs = c};
        pp_rebalance_result r;
        cr_assert_eq(pp_rebalance(&o, &r), PP_OK, "%s", pp_error_message());
        cr_assert(r.exact && rel_eq(r.step_ns, b.best));
        double root, bound, best;
        /* without an incumbent: every node is kept */
        cr_assert_eq(pp_rebalance_branch_bound(&o, NULL, 40, &root, &bound, &best), PP_OK, "%s",
                     pp_error_message());
        cr_assert_leq(root, b.best * (1 + 1e-9), "L=%d S=%d v=%d M=%d: root %.6f > optimum %.6f",
                      L, S, v, M, root * 1e-6, b.best * 1e-6);
        cr_assert_leq(bound, b.best * (1 + 1e-9),
                      "L=%d S=%d v=%d M=%d: bound %.6f > optimum %.6f", L, S, v, M, bound * 1e-6,
                      b.best * 1e-6);
        cr_assert_geq(bound, root * (1 - 1e-12));
        if (isfinite(best))
            cr_assert_geq(best, b.best * (1 - 1e-9), "a partition faster than the optimum");
        /* with the optimum as incumbent, until nothing is left below it */
        cr_assert_eq(pp_rebalance_branch_bound(&o, &r.partition, 4000, &root, &bound, &best),
                     PP_OK);
        cr_assert(rel_eq(best, b.best));
        cr_assert_leq(bound, b.best * (1 + 1e-9),
                      "L=%d S=%d v=%d M=%d: bound %.6f > optimum %.6f", L, S, v, M, bound * 1e-6,
                      b.best * 1e-6);
        if (root < b.best * (1 - 1e-6)) {
            gap_cases++;
            closed += bound >= best * (1 - 1e-9);
            worst_root = fmax(worst_root, b.best / root - 1);
        }
        pp_rebalance_result_free(&r);
        pp_costs_destroy(c);
        done++;
    }
    cr_log_info("mixture branch and bound: %d cases, %d with a gap at the root (up to %.2f%%), "
                "%d of them proven optimal by the branching",
                done, gap_cases, 100 * worst_root, closed);
    /* measured: 53 of 53 (with the constraints' multipliers of the wrong sign, 1) */
    cr_assert_gt(gap_cases, CASES(60) / 2);
    cr_assert_geq(closed * 10, gap_cases * 9, "%d of %d cases proven", closed, gap_cases);
}

/* The rebalancer's own replay gives pp_sim_file's double exactly, and its bound for a partition
 * never exceeds that partition's simulated step. */
Test(rebalance, evaluator_equals_pp_sim_and_bounds_hold)
{
    pp_rng rng;
    pp_rng_seed(&rng, 7);
    int n = 0;
    while (n < 3000) {
        pp_schedule_kind kind = (pp_schedule_kind)pp_rng_below(&rng, 4);
        int S = 1 + (int)pp_rng_below(&rng, 6);
        int v = kind == PP_SCHED_INTERLEAVED ? 2 + (int)pp_rng_below(&rng, 3) : 1;
        int M = 1 + (int)pp_rng_below(&rng, 12);
        if (kind == PP_SCHED_INTERLEAVED)
            M = S * (1 + (int)pp_rng_below(&rng, 3));
        if (pp_schedule_check_args(kind, S, M, v) != PP_OK)
            continue;
        int L = S * v + (int)pp_rng_below(&rng, 12);
        pp_costs *c = random_costs(&rng, L, (int)pp_rng_below(&rng, 2),
                                   (int)pp_rng_below(&rng, 2));
        pp_rebalance_opts o = {.kind = kind, .S = S, .v = v, .M = M, .costs = c};
        for (int t = 0; t < 5; t++, n++) {
            /* a random partition: P - 1 distinct cut points */
            int P = S * v, cuts[64 + 1];
            pp_partition p;
            cr_assert_eq(pp_partition_even(L, S, v, &p), PP_OK);
            for (int i = 0; i <= P; i++)
                cuts[i] = p.bounds[i];
            for (int i = 1; i < P; i++) {
                int lo = cuts[i - 1] + 1, hi = L - (P - i);
                cuts[i] = lo + (int)pp_rng_below(&rng, (uint64_t)(hi - lo + 1));
            }
            memcpy(p.bounds, cuts, sizeof(int) * (size_t)(P + 1));
            double step, bound;
            cr_assert_eq(pp_rebalance_inspect(&o, &p, &step, &bound), PP_OK, "%s",
                         pp_error_message());
            pp_sim_result r;
            cr_assert_eq(pp_sim_file(kind, &p, M, c, NULL, &r), PP_OK);
            cr_assert_eq(step, r.step_ns, "%s S=%d M=%d v=%d: evaluator %.9g, pp_sim %.9g",
                         pp_schedule_kind_name(kind), S, M, v, step, r.step_ns);
            cr_assert_leq(bound, r.step_ns, "%s S=%d M=%d v=%d: bound %.9g above the step %.9g",
                          pp_schedule_kind_name(kind), S, M, v, bound, r.step_ns);
            pp_sim_result_free(&r);
            pp_partition_free(&p);
        }
        pp_costs_destroy(c);
    }
}

/* A limit just below what the unconstrained optimum needs, met by some other partition: the
 * proposal meets it and is the best of the partitions that do. */
/* The four schedules, and one random case of a memory test: S 2 or 3, v = 2 for interleaved,
 * L = 2 S v + [0, l_extra), M = 2 S, random costs with transfers and the optimizer step. */
static const pp_schedule_kind k_kinds[] = {PP_SCHED_GPIPE, PP_SCHED_1F1B, PP_SCHED_ZBH1,
                                           PP_SCHED_INTERLEAVED};

static pp_costs *memory_case(pp_rng *rng, pp_schedule_kind kind, int l_extra, int *S, int *v,
                             int *L, int *M)
{
    *S = 2 + (int)pp_rng_below(rng, 2);
    *v = kind == PP_SCHED_INTERLEAVED ? 2 : 1;
    *L = 2 * *S * *v + (int)pp_rng_below(rng, (uint64_t)l_extra);
    *M = 2 * *S;
    return random_costs(rng, *L, 1, 1);
}

Test(rebalance, memory_limit_rules_out_the_unconstrained_optimum)
{
    pp_rng rng;
    pp_rng_seed(&rng, 99);
    for (size_t k = 0; k < 4; k++) {
        pp_schedule_kind kind = k_kinds[k];
        int found = 0;
        for (int attempt = 0; attempt < 200 && found < 3; attempt++) {
            int S, v, L, M;
            pp_costs *c = memory_case(&rng, kind, 4, &S, &v, &L, &M);
            int peak[4];
            peaks(kind, S, M, v, peak);
            pp_rebalance_opts o = {.kind = kind, .S = S, .v = v, .M = M, .costs = c};
            pp_rebalance_result r0;
            cr_assert_eq(pp_rebalance(&o, &r0), PP_OK, "%s", pp_error_message());
            uint64_t m0 = max_memory(kind, M, c, &r0.partition, NULL, NULL);
            o.memory_limit_bytes = m0 - 1;
            brute b = brute_force(kind, S, v, M, c, o.memory_limit_bytes, peak);
            if (b.count > 0) {
                pp_rebalance_result r;
                cr_assert_eq(pp_rebalance(&o, &r), PP_OK, "%s", pp_error_message());
                cr_assert(r.exact);
                uint64_t per[4];
                uint64_t m = max_memory(kind, M, c, &r.partition, NULL, per);
                cr_assert_leq(m, o.memory_limit_bytes);
                for (int s = 0; s < S; s++)
                    cr_assert_eq(r.stage_memory_bytes[s], per[s]);
                cr_assert(rel_eq(r.step_ns, b.best), "%s: %.6f ms, brute force %.6f ms",
                          pp_schedule_kind_name(kind), r.step_ns * 1e-6, b.best * 1e-6);
                cr_assert_geq(r.step_ns, r0.step_ns);
                pp_rebalance_result_free(&r);
                found++;
            }
            pp_rebalance_result_free(&r0);
            pp_costs_destroy(c);
        }
        cr_assert_geq(found, 3, "%s: too few cases where the limit binds",
                      pp_schedule_kind_name(kind));
    }
}

/* Recomputation where the limit needs it: with a limit between the smallest largest-stage memory
 * with some stages recomputed and without, no partition fits unrecomputed; the rebalancer's
 * proposal (partition and recomputed layers) is the best of every partition with every subset
 * of its layers recomputed (v = 1: the stage's cheapest layers) or of its stages (interleaved:
 * whole stages), its memory is the model's with its choice, and its step is pp_sim_file's on
 * the recomputed costs to the last bit. Costs carry the memory keys, a layer keeping several
 * times what it receives, as real ones do. */
Test(rebalance, recompute_choice_is_the_best_of_every_layer_or_stage_subset)
{
    pp_rng rng;
    pp_rng_seed(&rng, 1717);
    for (size_t k = 0; k < 4; k++) {
        pp_schedule_kind kind = k_kinds[k];
        int found = 0;
        for (int attempt = 0; attempt < 100 && found < 3; attempt++) {
            int S, v, L, M;
            /* layer subsets (2^L, L <= 7), or stage subsets (interleaved, L <= 14) */
            pp_costs *c = memory_case(&rng, kind, kind == PP_SCHED_INTERLEAVED ? 3 : 2, &S, &v,
                                      &L, &M);
            int mode = v == 1 ? 2 : 1;
            for (int l = 0; l < L; l++) {
                pp_layer_cost *y = &c->layers[l];
                y->has_kept = 1;
                y->input_bytes = l > 0 ? c->layers[l - 1].activation_bytes : 0;
                y->kept_bytes = y->activation_bytes * (2 + pp_rng_below(&rng, 8));
            }
            uint64_t none = brute_min_memory(kind, S, v, M, c, 0);
            uint64_t any = brute_min_memory(kind, S, v, M, c, mode);
            if (any >= none) {
                pp_costs_destroy(c);
                continue;
            }
            uint64_t limit = any + (none - any) / 2;
            pp_rebalance_opts o = {.kind = kind, .S = S, .v = v, .M = M, .costs = c,
                                   .memory_limit_bytes = limit};
            pp_rebalance_result r;
            cr_assert_eq(pp_rebalance(&o, &r), PP_ERR_INVALID, "fits without recomputation");
            o.recompute = 1;
            cr_assert_eq(pp_rebalance(&o, &r), PP_OK, "%s", pp_error_message());
            brute b = brute_force_rc(kind, S, v, M, c, limit, mode);
            cr_assert(r.exact);
            cr_assert(rel_eq(r.step_ns, b.best), "%s S=%d L=%d: %.6f ms, brute force %.6f ms",
                      pp_schedule_kind_name(kind), S, L, r.step_ns * 1e-6, b.best * 1e-6);
            cr_assert_gt(r.recomputed_stages, 0);
            uint64_t per[4];
            cr_assert_leq(max_memory(kind, M, c, &r.partition, r.recompute, per), limit);
            for (int s = 0; s < S; s++)
                cr_assert_eq(r.stage_memory_bytes[s], per[s], "stage %d", s);
            pp_costs *rc = NULL;
            cr_assert_eq(pp_costs_with_recompute(c, r.recompute, &rc), PP_OK);
            pp_sim_result sr;
            cr_assert_eq(pp_sim_file(kind, &r.partition, M, rc, NULL, &sr), PP_OK);
            cr_assert_eq(sr.step_ns, r.step_ns);
            double insp = 0;
            cr_assert_eq(pp_rebalance_inspect(&o, &r.partition, &insp, NULL), PP_OK);
            cr_assert_eq(insp, r.step_ns);
            pp_sim_result_free(&sr);
            pp_costs_destroy(rc);
            pp_rebalance_result_free(&r);
            pp_costs_destroy(c);
            found++;
        }
        cr_assert_geq(found, 3, "%s: too few cases where recomputation is needed",
                      pp_schedule_kind_name(kind));
    }
}

Test(rebalance, impossible_memory_limit_is_an_error_naming_the_smallest_achievable)
{
    pp_rng rng;
    pp_rng_seed(&rng, 5);
    pp_costs *c = random_costs(&rng, 9, 0, 0);
    int peak[3];
    peaks(PP_SCHED_1F1B, 3, 6, 1, peak);
    brute b = brute_force(PP_SCHED_1F1B, 3, 1, 6, c, 0, peak);
    pp_rebalance_opts o = {.kind = PP_SCHED_1F1B, .S = 3, .v = 1, .M = 6, .costs = c,
                           .memory_limit_bytes = b.min_mem - 1};
    pp_rebalance_result r;
    cr_assert_eq(pp_rebalance(&o, &r), PP_ERR_INVALID);
    char want[64];
    snprintf(want, sizeof want, "is %llu bytes", (unsigned long long)b.min_mem);
    cr_assert(strstr(pp_error_message(), "smallest achievable") != NULL, "%s",
              pp_error_message());
    cr_assert(strstr(pp_error_message(), want) != NULL, "'%s' lacks '%s'", pp_error_message(),
              want);
    /* and exactly that limit is met */
    o.memory_limit_bytes = b.min_mem;
    cr_assert_eq(pp_rebalance(&o, &r), PP_OK, "%s", pp_error_message());
    cr_assert_leq(max_memory(PP_SCHED_1F1B, 6, c, &r.partition, NULL, NULL), b.min_mem);
    pp_rebalance_result_free(&r);
    pp_costs_destroy(c);
}

/* Under 1F1B a heavy stage costs less early than late: two partitions with the same largest
 * stage load simulate differently, and the rebalancer picks the faster. */
Test(rebalance, position_matters_not_only_the_largest_load)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(3, 1000, 2000, 0, &c), PP_OK);
    c->layers[0].fwd_us = 2000;
    c->layers[0].bwd_us = 4000;
    c->layers[2].fwd_us = 2000;
    c->layers[2].bwd_us = 4000;
    static const int heavy_first[] = {0, 2, 3}, heavy_last[] = {0, 1, 3};
    pp_partition a, b;
    cr_assert_eq(pp_partition_from_bounds(heavy_first, 3, 3, 2, 1, &a), PP_OK);
    cr_assert_eq(pp_partition_from_bounds(heavy_last, 3, 3, 2, 1, &b), PP_OK);
    /* both have stage loads {3, 2} units of work, in the other order */
    pp_sim_result ra, rb;
    cr_assert_eq(pp_sim_file(PP_SCHED_1F1B, &a, 4, c, NULL, &ra), PP_OK);
    cr_assert_eq(pp_sim_file(PP_SCHED_1F1B, &b, 4, c, NULL, &rb), PP_OK);
    cr_assert_lt(ra.step_ns, rb.step_ns, "heavy first %.3f ms, heavy last %.3f ms",
                 ra.step_ns * 1e-6, rb.step_ns * 1e-6);
    pp_rebalance_opts o = {.kind = PP_SCHED_1F1B, .S = 2, .v = 1, .M = 4, .costs = c};
    pp_rebalance_result r;
    cr_assert_eq(pp_rebalance(&o, &r), PP_OK);
    cr_assert_eq(r.partition.bounds[1], 2);
    cr_assert_eq(r.step_ns, ra.step_ns);
    pp_rebalance_result_free(&r);
    pp_sim_result_free(&ra);
    pp_sim_result_free(&rb);
    pp_partition_free(&a);
    pp_partition_free(&b);
    pp_costs_destroy(c);
}

Test(rebalance, more_pieces_than_layers_is_an_error)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(7, 1000, 2000, 0, &c), PP_OK);
    pp_rebalance_opts o = {.kind = PP_SCHED_1F1B, .S = 8, .v = 1, .M = 8, .costs = c};
    pp_rebalance_result r;
    cr_assert_eq(pp_rebalance(&o, &r), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "exceed the model's 7 layers") != NULL, "%s",
              pp_error_message());
    o = (pp_rebalance_opts){.kind = PP_SCHED_INTERLEAVED, .S = 4, .v = 2, .M = 4, .costs = c};
    cr_assert_eq(pp_rebalance(&o, &r), PP_ERR_INVALID);
    o = (pp_rebalance_opts){.kind = PP_SCHED_INTERLEAVED, .S = 3, .v = 2, .M = 4, .costs = c};
    cr_assert_eq(pp_rebalance(&o, &r), PP_ERR_INVALID, "M not a multiple of S");
    pp_costs_destroy(c);
}

/* The GPT-like shape of the issue: embedding, 126 blocks, a head of five blocks' compute. */
static pp_costs *gpt_costs(void)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(128, 1000, 2000, 2u << 20, &c), PP_OK);
    c->layers[0].fwd_us = 100;
    c->layers[0].bwd_us = 200;
    c->layers[0].bwd_input_us = 100;
    c->layers[0].bwd_weight_us = 100;
    c->layers[127].fwd_us = 5000;
    c->layers[127].bwd_us = 10000;
    c->layers[127].bwd_input_us = 5000;
    c->layers[127].bwd_weight_us = 5000;
    c->p2p_GBps = 20;
    c->p2p_latency_us = 15;
    c->optimizer_us = 500;
    return c;
}

Test(rebalance, proves_the_optimum_at_128_layers_16_stages, .timeout = 120)
{
    pp_costs *c = gpt_costs();
    pp_rebalance_opts o = {.kind = PP_SCHED_1F1B, .S = 16, .v = 1, .M = 32, .costs = c,
                           .time_budget_s = 60};
    pp_rebalance_result r;
    cr_assert_eq(pp_rebalance(&o, &r), PP_OK, "%s", pp_error_message());
    cr_assert(r.exact, "gap %.3f%%", 100 * (r.step_ns / r.lower_bound_ns - 1));
    cr_assert_lt(r.step_ns, r.even_step_ns);
    cr_log_info("L=128 S=16 1f1b M=32: %.3f s, %lld simulated, %.3f ms (even %.3f ms)",
                r.seconds, (long long)r.evaluated, r.step_ns * 1e-6, r.even_step_ns * 1e-6);
    pp_rebalance_result_free(&r);
    pp_costs_destroy(c);
}

/* Interleaved at the size. The proven gap: 22% with the piece bounds alone, 8.5% with the
 * stage and end stages' bounds and the pair DP, 2.4-3.1% for v = 2 with the path-mixture bound
 * (1009.4 ms at the root), and 1.5-1.6% (idle, 5 s; 1.7% in 2 s) with the branch and bound on
 * the mixture, which raises the bound to about 1015 ms and finds 1031.1-1031.4 ms; v = 3 and 4
 * measure 1.8-2.9% and 2.2-2.7% in 5 s. Since the local moves' chains and the branching for every
 * v (2026-12-05) v = 2 measures 1.45% in 5 s and 1.48-1.53% in 2 s, v = 3 1.50%, v = 4 2.08%; since
 * the first fractional boundary's splits and the warm simplex (2026-12-06) 1.26-1.27%, 1.35% and
 * 1.52% (1.53%, 1.49%, 1.79-1.92% in 2 s; the 2% for v = 4 is asserted by
 * v4_boundaries_in_layer_order_..., which does not depend on the machine's speed). v = 2
 * runs the default 5 s (10 s before) and must prove 2%; v = 3 and 4 run 5 s and must prove 4%:
 * room for a loaded machine. Unoptimised or sanitized builds run
 * several times slower and check the proof's validity only, in 1 s each. Asserts the proven gap,
 * never the time. */
#if defined(__SANITIZE_ADDRESS__) || !defined(NDEBUG)
#define INTERLEAVED_CHECK_GAP 0
/* the validity of a proof needs no long search: 1 s still runs the path-mixture bound, the
 * mixture's branch and bound's first slice and the incumbent search on all three cases */
#define INTERLEAVED_BUDGET_S 1
#define INTERLEAVED_V34_BUDGET_S 1
#else
#define INTERLEAVED_CHECK_GAP 1
#define INTERLEAVED_BUDGET_S 5 /* the default */
#define INTERLEAVED_V34_BUDGET_S 5
#endif
/* The proven gap of the 128-layer model's search on S stages with v chunks in budget_s, after
 * checking the proposal and the bound (as check_interleaved_gap, which also asserts the gap). */
static double interleaved_gap(int S, int v, double budget_s)
{
    pp_costs *c = gpt_costs();
    pp_rebalance_opts o = {.kind = PP_SCHED_INTERLEAVED, .S = S, .v = v, .M = 32, .costs = c,
                           .time_budget_s = budget_s};
    pp_rebalance_result r;
    cr_assert_eq(pp_rebalance(&o, &r), PP_OK, "%s", pp_error_message());
    double gap = r.step_ns / r.lower_bound_ns - 1, step = r.step_ns, lb = r.lower_bound_ns;
    double even = r.even_step_ns;
    cr_log_info("L=128 S=%d interleaved v=%d M=32: %.3f s, %.3f ms, bound %.3f ms, gap %.3f%%", S,
                v, r.seconds, step * 1e-6, lb * 1e-6, 100 * gap);
    /* the proposal simulates to the reported double */
    pp_sim_result sr;
    cr_assert_eq(pp_sim_file(PP_SCHED_INTERLEAVED, &r.partition, 32, c, NULL, &sr), PP_OK);
    cr_assert_eq(sr.step_ns, step);
    pp_sim_result_free(&sr);
    pp_rebalance_result_free(&r);
    pp_costs_destroy(c);
    cr_assert_gt(lb, 0);
    cr_assert_leq(lb, step);
    cr_assert_lt(step, even);
    return gap;
}

static void check_interleaved_gap(int S, int v, double budget_s, double wanted)
{
    double gap = interleaved_gap(S, v, budget_s);
    if (INTERLEAVED_CHECK_GAP)
        cr_assert_lt(gap, wanted, "v = %d: gap %.3f%%", v, 100 * gap);
}

/* The same model with data parallelism: each layer's parameters (a block 14 MiB, the embedding
 * and the head 96 MiB) all-reduced over 8 replicas on 20 GB/s before the barrier (100 us + 87.5
 * us per MB: a ring moves 2 x 7/8 of them). The stage that ends last waits for its own
 * all-reduce, so the bounds count it where a path ends at a stage's last op (the piece, stage
 * and end stages' bounds, and the chains of the path mixture). Without that: GPipe unproven at
 * 0.72% after 60 s, interleaved v = 2 at 3.4% in 5 s (2026-12-03); with it GPipe, 1F1B and
 * ZB-H1 optimal in 0.03, 1.1 and 4.6 s, interleaved 1.51%, 2.00%, 2.12% in 5 s (1.33%, 1.36%,
 * 2.00% since the local moves' chains and the branching for every v, 2026-12-05; 1.18%, 1.34%,
 * 1.70% since the first fractional boundary's splits and the warm simplex, 2026-12-06). Unoptimised
 * and sanitized builds check the bounds' validity only, in 1 s each. */
static pp_costs *gpt_dp_costs(void)
{
    pp_costs *c = gpt_costs();
    for (int l = 0; l < c->n_layers; l++)
        c->layers[l].param_bytes = l == 0 || l == c->n_layers - 1 ? 96u << 20 : 14u << 20;
    c->dp_allreduce_us = 100;
    c->dp_allreduce_us_per_MB = 87.5;
    return c;
}

Test(rebalance, data_parallel_allreduce_at_128_layers_16_stages, .timeout = 300)
{
    static const struct {
        pp_schedule_kind kind;
        int v;
        double gap;
    } k[] = {{PP_SCHED_GPIPE, 1, 0},         {PP_SCHED_1F1B, 1, 0},
             {PP_SCHED_ZBH1, 1, 0},          {PP_SCHED_INTERLEAVED, 2, 0.02},
             {PP_SCHED_INTERLEAVED, 3, 0.04}, {PP_SCHED_INTERLEAVED, 4, 0.04}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        pp_costs *c = gpt_dp_costs();
        double budget = !INTERLEAVED_CHECK_GAP ? 1 : k[i].v == 1 ? 30 : 5;
        pp_rebalance_opts o = {.kind = k[i].kind, .S = 16, .v = k[i].v, .M = 32, .costs = c,
                               .time_budget_s = budget};
        pp_rebalance_result r;
        cr_assert_eq(pp_rebalance(&o, &r), PP_OK, "%s", pp_error_message());
        double gap = r.step_ns / r.lower_bound_ns - 1;
        cr_log_info("L=128 S=16 %s v=%d M=32 with the all-reduce: %.3f s, %.3f ms, gap %.3f%%%s",
                    pp_schedule_kind_name(k[i].kind), k[i].v, r.seconds, r.step_ns * 1e-6,
                    100 * gap, r.exact ? " (optimal)" : "");
        pp_sim_result sr;
        cr_assert_eq(pp_sim_file(k[i].kind, &r.partition, 32, c, NULL, &sr), PP_OK);
        cr_assert_eq(sr.step_ns, r.step_ns);
        pp_sim_result_free(&sr);
        cr_assert_leq(r.lower_bound_ns, r.step_ns);
        if (INTERLEAVED_CHECK_GAP) {
            if (k[i].v == 1)
                cr_assert(r.exact, "%s: gap %.3f%%", pp_schedule_kind_name(k[i].kind), 100 * gap);
            else
                cr_assert_lt(gap, k[i].gap, "v = %d: gap %.3f%%", k[i].v, 100 * gap);
        }
        pp_rebalance_result_free(&r);
        pp_costs_destroy(c);
    }
}

Test(rebalance, interleaved_128_layers_16_stages_gap_below_2_percent, .timeout = 180)
{
    check_interleaved_gap(16, 2, INTERLEAVED_BUDGET_S, 0.02);
}

Test(rebalance, interleaved_v3_v4_128_layers_16_stages_gap_below_4_percent, .timeout = 180)
{
    check_interleaved_gap(16, 3, INTERLEAVED_V34_BUDGET_S, 0.04);
    check_interleaved_gap(16, 4, INTERLEAVED_V34_BUDGET_S, 0.04);
}

/* Eight stages (P = 24 and 32 pieces): the mixture's branch and bound, which the search ran for
 * v = 2 only before (2026-12-05), proves v = 3 and 4 within 0.2% in 5 s (measured 0.17% and
 * 0.19%; 2.62% and 1.75% without the branching) and within 0.35% in 2 s (0.31-0.33% and 0.24%
 * since the nodes' games follow the gap left, docs/rebalancer.md "Order and stops"); the test
 * gives 3 s. A CI run on a slow day of the VM, beside the other tests, read 1.009% for v = 4 in
 * 3 s (2026-12-05): a gap at 1% or above is searched again with 12 s before it counts. */
Test(rebalance, interleaved_v3_v4_8_stages_gap_below_1_percent, .timeout = 180)
{
    double budget = INTERLEAVED_CHECK_GAP ? 3 : 1;
    for (int v = 3; v <= 4; v++) {
        double gap = interleaved_gap(8, v, budget);
        if (INTERLEAVED_CHECK_GAP && gap >= 0.01) {
            cr_log_info("v = %d: gap %.3f%% in %.0f s, searching again with %.0f s", v,
                        100 * gap, budget, 4 * budget);
            gap = interleaved_gap(8, v, 4 * budget);
        }
        if (INTERLEAVED_CHECK_GAP)
            cr_assert_lt(gap, 0.01, "v = %d: gap %.3f%%", v, 100 * gap);
    }
}

/* The local moves skip a move when a critical chain of a partition simulated before shows it
 * cannot shorten the step (rebalance.c local_search): the moves kept, and so the partition they
 * end at, are those of simulating every move. Random interleaved cases (v = 2 to 4, messages with
 * their senders' time, op gaps, the optimizer and the data-parallel all-reduce on and off) from
 * random starts, then the 128-layer model of bench_rebalance from its even split, where the
 * chains must spare most simulations (measured: 2293 simulated against 19541, v = 3). */
Test(rebalance, local_moves_with_chains_end_where_simulating_every_move_ends, .timeout = 240)
{
    pp_rng rng;
    pp_rng_seed(&rng, 31);
    int64_t with = 0, without = 0;
    int n = 0;
    while (n < CASES(300)) {
        int S = 2 + (int)pp_rng_below(&rng, 3), v = 2 + (int)pp_rng_below(&rng, 3);
        int M = S * (1 + (int)pp_rng_below(&rng, 3));
        if (pp_schedule_check_args(PP_SCHED_INTERLEAVED, S, M, v) != PP_OK)
            continue;
        int L = S * v + (int)pp_rng_below(&rng, 30);
        pp_costs *c = random_costs(&rng, L, (int)pp_rng_below(&rng, 2), (int)pp_rng_below(&rng, 2));
        pp_rebalance_opts o = {.kind = PP_SCHED_INTERLEAVED, .S = S, .v = v, .M = M, .costs = c};
        int P = S * v;
        pp_partition start;
        cr_assert_eq(pp_partition_even(L, S, v, &start), PP_OK);
        for (int i = 1; i < P; i++) {
            int lo = start.bounds[i - 1] + 1, hi = L - (P - i);
            start.bounds[i] = lo + (int)pp_rng_below(&rng, (uint64_t)(hi - lo + 1));
        }
        pp_partition a, b;
        double sa, sb;
        int64_t na, nb;
        cr_assert_eq(pp_rebalance_moves(&o, &start, 0, &a, &sa, &na), PP_OK, "%s",
                     pp_error_message());
        cr_assert_eq(pp_rebalance_moves(&o, &start, 1, &b, &sb, &nb), PP_OK, "%s",
                     pp_error_message());
        cr_assert_eq(sa, sb, "case %d (S=%d v=%d M=%d L=%d): %.9g simulating every move, %.9g "
                     "with chains", n, S, v, M, L, sa, sb);
        cr_assert_eq(memcmp(a.bounds, b.bounds, sizeof(int) * (size_t)(P + 1)), 0, "case %d", n);
        pp_sim_result r;
        cr_assert_eq(pp_sim_file(PP_SCHED_INTERLEAVED, &b, M, c, NULL, &r), PP_OK);
        cr_assert_eq(r.step_ns, sb);
        pp_sim_result_free(&r);
        with += nb;
        without += na;
        pp_partition_free(&a);
        pp_partition_free(&b);
        pp_partition_free(&start);
        pp_costs_destroy(c);
        n++;
    }
    cr_log_info("local moves of %d random cases: %lld partitions simulated with chains, %lld "
                "without", n, (long long)with, (long long)without);
    cr_assert_lt(with, without);
    pp_costs *c = gpt_costs();
    pp_rebalance_opts o = {.kind = PP_SCHED_INTERLEAVED, .S = 16, .v = 3, .M = 32, .costs = c};
    pp_partition even, a, b;
    cr_assert_eq(pp_partition_even(128, 16, 3, &even), PP_OK);
    double sa, sb;
    int64_t na, nb;
    cr_assert_eq(pp_rebalance_moves(&o, &even, 0, &a, &sa, &na), PP_OK);
    cr_assert_eq(pp_rebalance_moves(&o, &even, 1, &b, &sb, &nb), PP_OK);
    cr_log_info("L=128 S=16 v=3 from the even split: %.3f ms, %lld simulated with chains, %lld "
                "without", sb * 1e-6, (long long)nb, (long long)na);
    cr_assert_eq(sa, sb);
    cr_assert_eq(memcmp(a.bounds, b.bounds, sizeof(int) * 49), 0);
    pp_sim_result er;
    cr_assert_eq(pp_sim_file(PP_SCHED_INTERLEAVED, &even, 32, c, NULL, &er), PP_OK);
    cr_assert_lt(sb, 0.95 * er.step_ns);
    pp_sim_result_free(&er);
    cr_assert_lt(nb * 2, na, "the chains spared %lld of %lld simulations", (long long)(na - nb),
                 (long long)na);
    pp_partition_free(&even);
    pp_partition_free(&a);
    pp_partition_free(&b);
    pp_costs_destroy(c);
}

/* When the budget runs out the answer is the best found, and the reported bound is proven:
 * it lies at or below the step of every partition (checked here against the answer and the
 * even split) and the result says it is not exact. */
Test(rebalance, time_budget_reports_a_proven_gap, .timeout = 60)
{
    pp_costs *c = gpt_costs();
    pp_rebalance_opts o = {.kind = PP_SCHED_INTERLEAVED, .S = 16, .v = 2, .M = 32, .costs = c,
                           .time_budget_s = 0.2};
    pp_rebalance_result r;
    cr_assert_eq(pp_rebalance(&o, &r), PP_OK, "%s", pp_error_message());
    cr_assert_not(r.exact);
    cr_assert_gt(r.lower_bound_ns, 0);
    cr_assert_leq(r.lower_bound_ns, r.step_ns);
    cr_assert_leq(r.step_ns, r.even_step_ns);
    pp_rebalance_result_free(&r);
    pp_costs_destroy(c);
}

/* Interleaved v = 4 at the size (P = 64 pieces), the mixture's branch and bound alone
 * (deterministic: no time budget), given bench_rebalance's best partition (1145.149 ms, which
 * nothing has beaten) as incumbent. The relaxation's root value is 1121.83 ms: 2.08% below it,
 * whatever the time spent at the root. Its partitions average to pieces of fractional layers
 * (1.65 where whole pieces hold 1 or 2), and a stage's count fixed whole moves the children by
 * 0.1-0.2 ms; splitting on the first boundary whose average is fractional, one after another,
 * raises the least open value by about a millisecond a split (docs/rebalancer.md, "Branching on
 * the mixture"). Measured: 2 splits 1121.83 ms (the first splits on a count), 4 1122.65, 6
 * 1124.66, 8 1125.74 (a gap of 1.72%). Splitting on counts first, then on the boundary the
 * partitions disagree on most (before 2026-12-06): 1121.8-1121.9 after 8. */
Test(rebalance, v4_boundaries_in_layer_order_prove_2_percent_at_16_stages, .timeout = 240)
{
    static const int best[] = {0,   2,   4,   6,   8,   10,  12,  14,  16,  18,  20,  22,  24,
                               26,  28,  30,  31,  32,  33,  35,  37,  39,  41,  43,  45,  47,
                               49,  51,  53,  55,  57,  59,  61,  63,  65,  67,  69,  71,  73,
                               75,  77,  79,  81,  83,  85,  87,  88,  89,  91,  93,  95,  97,
                               99,  101, 103, 105, 110, 113, 117, 121, 124, 125, 126, 127, 128};
    pp_costs *c = gpt_costs();
    pp_rebalance_opts o = {.kind = PP_SCHED_INTERLEAVED, .S = 16, .v = 4, .M = 32, .costs = c};
    pp_partition inc;
    cr_assert_eq(pp_partition_from_bounds(best, 65, 128, 16, 4, &inc), PP_OK);
    double root, bound, step;
    cr_assert_eq(pp_rebalance_branch_bound(&o, &inc, 8, &root, &bound, &step), PP_OK, "%s",
                 pp_error_message());
    cr_log_info("L=128 S=16 interleaved v=4 M=32, 8 splits: root %.4f ms, bound %.4f ms, "
                "incumbent %.4f ms, gap %.3f%%",
                root * 1e-6, bound * 1e-6, step * 1e-6, 100 * (step / bound - 1));
    cr_assert_leq(step, 1145.15e6); /* the incumbent, or a better partition */
    /* the relaxation's value, as the simplex solved from scratch every round finds it */
    cr_assert_geq(root, 1121.82e6, "root %.4f ms", root * 1e-6);
    cr_assert_leq(root, bound);
    cr_assert_leq(bound, step);
    cr_assert_lt(root * 1.02, step, "the root alone is within 2%%: the case tests nothing");
    cr_assert_geq(bound * 1.02, step, "gap %.3f%% after 8 splits", 100 * (step / bound - 1));
    pp_partition_free(&inc);
    pp_costs_destroy(c);
}
