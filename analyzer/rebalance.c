/* rebalance.c: the rebalancer (pp_rebalance.h). Branch and bound over the boundaries of the
 * P = S * v pieces, piece by piece from the first layer; complete partitions are scored by
 * replaying the schedule's own lists (compiled once, in the order of the planning library's
 * replay that pp_sim_run walks too, into a list of steps; scoring is pp_sim_run's arithmetic
 * over it with the same cost rule, allocation-free), partial ones are pruned with lower bounds
 * that are longest paths of that replay, each depending on one piece's layer range only, so
 * that the best bound over all completions of a prefix is a min-max dynamic program computed
 * once. Interleaved schedules add bounds over a stage's whole list, over the first and last
 * stages', a DP over stages for v = 2, and the path-mixture bound: a weighted average of chains of
 * the replay, each linear in per-boundary terms, so its least value is a DP over boundaries
 * (lag_solve). docs/rebalancer.md has the method, the proofs of the bounds and measured times. */
#include "rebalance_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- setup ---- */
static void local_search(rb_ctx *x);

static void ctx_free(rb_ctx *x)
{
    pp_free(x->peak);
    pp_free(x->steps);
    pp_free(x->fin);
    pp_free(x->sprev);
    pp_free(x->last_step);
    rb_lag_free(x->lag);
    pp_free(x->pool);
    pp_free(x->pool_run);
    pp_free(x->lag_fixed);
    pp_free(x->kid_cur);
    pp_free(x->kid_save);
    pp_free(x->clock);
    pp_free(x->ar_s);
    pp_free(x->dur);
    pp_free(x->tr);
    if (x->seq)
        for (int j = 0; j < x->P; j++) {
            pp_free(x->seq[j].kind);
            pp_free(x->seq[j].partner);
        }
    pp_free(x->seq);
    if (x->sseq)
        for (int s = 0; s < x->S; s++) {
            pp_free(x->sseq[s].kind);
            pp_free(x->sseq[s].chunk);
            pp_free(x->sseq[s].round);
            pp_free(x->sseq[s].partner);
        }
    pp_free(x->sseq);
    pp_free(x->ends.kind);
    pp_free(x->ends.piece);
    pp_free(x->ends.prev);
    pp_free(x->ends.hop);
    pp_free(x->ends.val);
    pp_free(x->G);
    pp_free(x->val);
    for (int k = 0; k < N_COMPUTE; k++)
        pp_free(x->pre[k]);
    pp_free(x->pre_bb);
    pp_free(x->tl);
    pp_free(x->pre_param);
    pp_free(x->pre_act);
    pp_free(x->D);
    pp_free(x->bounds);
    pp_free(x->best);
    pp_free(x->stage_work);
    pp_free(x->stage_fixed);
    pp_free(x->stage_dyn[0]);
    pp_free(x->stage_dyn[1]);
    pp_free(x->pre_in);
    pp_free(x->slots);
    pp_free(x->rcs);
    pp_free(x->rcmask);
    pp_free(x->selmask);
    pp_free(x->sel_cur);
    pp_free(x->sel_best);
    pp_free(x->sel_order);
    pp_free(x->sel_cost);
    pp_free(x->sel_ratio);
    pp_free(x->sel_save);
    pp_free(x->sel_suffix);
    pp_free(x->sel_need);
    pp_free(x->sel_left);
    if (x->mv)
        for (int s = 0; s < x->S; s++)
            pp_free(x->mv[s].aw);
    if (x->cv)
        for (int i = 0; i < x->S * x->v; i++)
            pp_free(x->cv[i].aw);
    pp_free(x->mv);
    pp_free(x->cv);
    pp_costs_destroy(x->crc);
    pp_free(x->kids);
    memset(x, 0, sizeof *x);
}

static pp_status ctx_init(rb_ctx *x, const pp_rebalance_opts *o, int with_search)
{
    memset(x, 0, sizeof *x);
    pp_schedule *sc = NULL;
    pp_schedule_report rep;
    memset(&rep, 0, sizeof rep);
    if (!o || !o->costs)
        return PP_ERR(PP_ERR_INVALID, "rebalance: no options or no cost file");
    pp_status st = pp_schedule_check_args(o->kind, o->S, o->M, o->v);
    if (st != PP_OK)
        return st;
    x->o = o;
    x->c = o->costs;
    x->L = o->costs->n_layers;
    x->S = o->S;
    x->v = o->v;
    x->M = o->M;
    x->P = o->S * o->v;
    x->split = pp_schedule_splits_backward(o->kind);
    x->limit = o->memory_limit_bytes;
    x->rc_ok = o->recompute && x->limit; /* recomputation only ever pays to meet a limit */
    int L = x->L, P = x->P, S = x->S;
    if (P > L)
        return PP_ERR(PP_ERR_INVALID,
                      "rebalance: %d pieces (%d stages x %d chunks) exceed the model's %d layers; "
                      "every piece needs at least one layer",
                      P, S, x->v, L);
    if ((int64_t)(P + 1) * (L + 1) > MAX_TABLE)
        return PP_ERR(PP_ERR_INVALID,
                      "rebalance: %d pieces x %d layers is beyond the rebalancer's tables "
                      "(%lld entries at most)",
                      P, L, (long long)MAX_TABLE);
    if ((st = pp_schedule_create(o->kind, S, o->M, o->v, &sc)) != PP_OK)
        return st;
    if ((st = pp_schedule_validate(sc, &rep)) != PP_OK)
        goto done;
    x->peak = pp_alloc(sizeof(int) * (size_t)S);
    x->clock = pp_alloc(sizeof(double) * (size_t)S);
    x->ar_s = pp_alloc(sizeof(double) * (size_t)S);
    x->dur = pp_alloc(sizeof(double) * N_DUR * (size_t)P);
    x->tr = pp_alloc(sizeof(double) * (size_t)P);
    x->seq = pp_alloc(sizeof(rb_seq) * (size_t)P);
    x->pre_bb = pp_alloc(sizeof(double) * (size_t)(L + 1));
    x->tl = pp_alloc(sizeof(double) * (size_t)L);
    x->pre_param = pp_alloc(sizeof(uint64_t) * (size_t)(L + 1));
    x->pre_act = pp_alloc(sizeof(uint64_t) * (size_t)(L + 1));
    x->bounds = pp_alloc(sizeof(int) * (size_t)(P + 1));
    x->best = pp_alloc(sizeof(int) * (size_t)(P + 1));
    x->stage_work = pp_alloc(sizeof(double) * (size_t)S);
    x->stage_fixed = pp_alloc(sizeof(uint64_t) * (size_t)S);
    x->stage_dyn[0] = pp_alloc(sizeof(uint64_t) * (size_t)S);
    x->stage_dyn[1] = pp_alloc(sizeof(uint64_t) * (size_t)S);
    x->pre_in = pp_alloc(sizeof(uint64_t) * (size_t)(L + 1));
    x->slots = pp_alloc(sizeof(int) * (size_t)S);
    x->rcs = pp_alloc((size_t)S);
    int ok = x->peak && x->clock && x->dur && x->tr && x->seq && x->pre_bb && x->tl &&
             x->pre_param && x->pre_act && x->bounds && x->best && x->stage_work &&
             x->stage_fixed && x->stage_dyn[0] && x->stage_dyn[1] && x->pre_in && x->slots &&
             x->rcs && x->ar_s;
    for (int q = 0; ok && q < S; q++)
        x->ar_s[q] = 0.0;
    for (int k = 0; k < N_COMPUTE; k++)
        ok = ok && (x->pre[k] = pp_alloc(sizeof(double) * (size_t)(L + 1))) != NULL;
    if (with_search) {
        x->D = pp_alloc(sizeof(double) * (size_t)(P + 1) * (size_t)(L + 1));
        x->kids = pp_alloc(sizeof(rb_child) * (size_t)P * (size_t)(L + 1));
        ok = ok && x->D && x->kids;
    }
    if (!ok) {
        st = PP_ERR(PP_ERR_NOMEM, "rebalance: out of memory for %d pieces x %d layers", P, L);
        goto done;
    }
    for (int s = 0; s < S; s++) {
        x->peak[s] = rep.peak_inflight[s];
        /* the pipeline trainer's slots per chunk (runtime/pipeline.c): one more than the peak */
        x->slots[s] = x->peak[s] + 1 < o->M ? x->peak[s] + 1 : o->M;
    }
    for (int p = 0; p < P; p++) {
        x->dur[K_SEND_ACT * P + p] = pp_costs_send_us(o->costs, 0) * 1e3;
        x->dur[K_SEND_GRAD * P + p] = pp_costs_send_us(o->costs, 1) * 1e3;
        x->dur[K_RECV_ACT_OWN * P + p] = pp_costs_recv_us(o->costs, 0) * 1e3;
        x->dur[K_RECV_GRAD_OWN * P + p] = pp_costs_recv_us(o->costs, 1) * 1e3;
    }
    if ((st = rb_compile_schedule(x, sc)) != PP_OK || (st = rb_extract_paths(x, sc)) != PP_OK ||
        (st = rb_build_mem_vectors(x, sc)) != PP_OK)
        goto done;
    if (x->rc_ok) {
        uint8_t *all = pp_alloc((size_t)L);
        if (!all) {
            st = PP_ERR(PP_ERR_NOMEM, "rebalance: out of memory");
            goto done;
        }
        memset(all, 1, (size_t)L);
        st = pp_costs_with_recompute(o->costs, all, &x->crc);
        pp_free(all);
        if (st != PP_OK)
            goto done;
        if (!(x->rcmask = pp_alloc((size_t)L))) {
            st = PP_ERR(PP_ERR_NOMEM, "rebalance: out of memory");
            goto done;
        }
        if (x->v == 1) {
            /* rb_select's scratch: stages of up to RB_SEL_MAX_LAYERS layers, up to 64 peak
             * vectors (a stage beyond either is recomputed whole) */
            int n = L < RB_SEL_MAX_LAYERS ? L : RB_SEL_MAX_LAYERS, m = 1;
            for (int s = 0; s < S; s++)
                m = x->mv[s].n > m ? x->mv[s].n : m;
            m = m < 64 ? m : 64;
            x->sel_max_m = m;
            x->selmask = pp_alloc((size_t)L);
            x->sel_cur = pp_alloc((size_t)n);
            x->sel_best = pp_alloc((size_t)n);
            x->sel_order = pp_alloc(sizeof(int) * (size_t)n);
            x->sel_cost = pp_alloc(sizeof(double) * (size_t)n);
            x->sel_ratio = pp_alloc(sizeof(double) * (size_t)n);
            x->sel_save = pp_alloc(sizeof(double) * (size_t)m * (size_t)n);
            x->sel_suffix = pp_alloc(sizeof(double) * (size_t)m * (size_t)(n + 1));
            x->sel_need = pp_alloc(sizeof(double) * (size_t)m);
            x->sel_left = pp_alloc(sizeof(double) * (size_t)m * (size_t)(n + 2));
            if (!x->selmask || !x->sel_cur || !x->sel_best || !x->sel_order || !x->sel_cost ||
                !x->sel_ratio || !x->sel_save || !x->sel_suffix || !x->sel_need || !x->sel_left) {
                st = PP_ERR(PP_ERR_NOMEM, "rebalance: out of memory");
                goto done;
            }
        }
    }
    if (x->v > 1 &&
        ((st = rb_extract_stage_paths(x, sc)) != PP_OK || (st = rb_extract_ends(x)) != PP_OK))
        goto done;
    const pp_costs *c = x->c;
    x->opt_ns = pp_costs_op_us(c, PP_OP_OPT_STEP, 0, 0) * 1e3 * 1.0;
    x->has_ar = pp_costs_has_dp_allreduce(c);
    x->tmin = INFINITY;
    for (int l = 0; l < L; l++) {
        const pp_layer_cost *ly = &c->layers[l];
        for (int k = 0; k < N_COMPUTE; k++)
            x->pre[k][l + 1] = x->pre[k][l] + rb_layer_us(ly, k);
        x->pre_bb[l + 1] = x->pre_bb[l] + rb_layer_us(ly, x->split ? K_BI : K_B);
        x->pre_param[l + 1] = add_sat(x->pre_param[l], ly->param_bytes);
        x->pre_act[l + 1] = add_sat(x->pre_act[l], rb_mem_act(ly));
        x->pre_in[l + 1] = add_sat(x->pre_in[l], rb_mem_input(c, l));
        x->tl[l] = pp_costs_transfer_us(c, pp_costs_boundary_bytes(c, l + 1)) * 1e3;
        if (l < L - 1)
            x->tmin = fmin(x->tmin, x->tl[l]);
    }
    if (!isfinite(x->tmin))
        x->tmin = 0.0;
done:
    pp_schedule_report_free(&rep);
    pp_schedule_destroy(sc);
    if (st != PP_OK)
        ctx_free(x);
    return st;
}

/* Every stage of a complete partition meets the limit, recomputed where it must be. */
int rb_fits(rb_ctx *x, const int *b)
{
    return !x->limit || rb_decide(x, b, x->rcs);
}

/* Scores a complete partition and keeps it if it is the best so far. */
void rb_offer(rb_ctx *x, const int *b)
{
    if (!rb_fits(x, b)) /* which also leaves the stages' choices in x->rcs, x->rcmask */
        return;
    double t = rb_evaluate_with(x, b, x->limit && x->rc_ok ? x->rcs : NULL);
    if (t < x->best_step) {
        x->best_step = t;
        memcpy(x->best, b, sizeof(int) * (size_t)(x->P + 1));
    }
}

/* ---- the search ---- */

static int over_time(rb_ctx *x)
{
    if (x->aborted)
        return 1;
    if (x->deadline && (x->nodes & 255) == 0 && pp_now_ns() > x->deadline)
        x->aborted = 1;
    return x->aborted;
}

/* Layer work of [lo, hi) for balancing: every op of one micro-batch. */
static double load_us(const rb_ctx *x, int lo, int hi)
{
    double w = x->pre[K_F][hi] - x->pre[K_F][lo] + x->pre_bb[hi] - x->pre_bb[lo];
    if (x->split)
        w += x->pre[K_BW][hi] - x->pre[K_BW][lo];
    return w;
}

/* v > 1: the static bytes of piece k = [pos, e) and its peak alone, added to its stage's fixed
 * chunks (stage_fixed, stage_dyn): every term of the model is nonnegative, so the stage's memory
 * is at least their static sum plus the largest of their peaks. */
static void piece_fix_terms(const rb_ctx *x, int k, int pos, int e, uint64_t *fixed,
                            uint64_t *dyn)
{
    int s = k % x->S;
    for (int r = 0; r <= x->rc_ok; r++) {
        uint64_t d, m = rb_piece_mem(x, k, pos, e, r, &d);
        if (r == 0)
            *fixed = add_sat(x->stage_fixed[s], m - d);
        dyn[r] = d > x->stage_dyn[r][s] ? d : x->stage_dyn[r][s];
    }
}

static int stage_over_limit(const rb_ctx *x, int k, int pos, int e)
{
    uint64_t fixed = 0, dyn[2] = {0, 0};
    piece_fix_terms(x, k, pos, e, &fixed, dyn);
    if (add_sat(fixed, dyn[0]) <= x->limit)
        return 0;
    return !x->rc_ok || add_sat(fixed, dyn[1]) > x->limit;
}

static void stage_fix_piece(rb_ctx *x, int k, int pos, int e)
{
    uint64_t fixed = 0, dyn[2] = {0, 0};
    piece_fix_terms(x, k, pos, e, &fixed, dyn);
    int s = k % x->S;
    x->stage_fixed[s] = fixed;
    x->stage_dyn[0][s] = dyn[0];
    x->stage_dyn[1][s] = dyn[1];
}

/* Expands the node whose pieces 0 .. k-1 are fixed (x->bounds[0 .. k]) with bound `nb`.
 * Returns the smallest bound of the nodes left unexplored below it when the time budget ran
 * out, +inf when the subtree was searched to the end. */
static double search(rb_ctx *x, int k, double nb)
{
    int L = x->L, P = x->P, S = x->S, pos = x->bounds[k];
    x->nodes++;
    if (over_time(x))
        return nb;
    if (k == P - 1) {
        x->bounds[P] = L;
        if (!rb_piece_over_limit(x, k, pos, L))
            rb_offer(x, x->bounds);
        return INFINITY;
    }
    rb_child *kids = &x->kids[(size_t)k * (L + 1)];
    int n = 0, s = k % S;
    double share = load_us(x, pos, L) / (P - k);
    for (int e = pos + 1; e <= L - (P - k - 1); e++) {
        double tail = *dcell(x, k + 1, e);
        if (tail >= cutoff(x) || rb_piece_over_limit(x, k, pos, e))
            continue;
        double b = fmax(fmax(nb, tail), rb_piece_bound(x, k, pos, e));
        double lh = 0.0;
        if (x->lag) {
            /* the chain mixture with boundaries 1 .. k+1 fixed, the rest at their best */
            lh = x->lag_fixed[k] + rb_lag_h(x, x->lag->agg, k + 1, e);
            b = fmax(b, rb_lag_node_bound(x, x->lag, k + 1, e, lh));
        }
        if (x->v > 1) {
            /* the stage runs all ops of its fixed chunks one after another */
            double d[N_COMPUTE];
            for (int q = 0; q < N_COMPUTE; q++)
                d[q] = (x->pre[q][e] - x->pre[q][pos]) * 1e3;
            double work = x->stage_work[s] + rb_dot(x->seq[k].total, d);
            b = fmax(b, (work + x->opt_ns) * BOUND_SAFETY);
            if (x->limit && stage_over_limit(x, k, pos, e))
                continue;
        }
        if (b >= cutoff(x))
            continue;
        /* sorted by bound; ties (weak bounds, interleaved) closest to an even share of the
         * remaining work first, so the first leaves reached are balanced ones */
        double tie = fabs(load_us(x, pos, e) - share);
        int i = n++;
        while (i > 0 && (kids[i - 1].bound > b || (kids[i - 1].bound == b && kids[i - 1].tie > tie))) {
            kids[i] = kids[i - 1];
            i--;
        }
        kids[i].e = e;
        kids[i].bound = b;
        kids[i].tie = tie;
        kids[i].lh = lh;
    }
    for (int i = 0; i < n; i++) {
        if (kids[i].bound >= cutoff(x))
            break;
        int e = kids[i].e;
        x->bounds[k + 1] = e;
        double sw = 0;
        uint64_t save_f = 0, save_d[2] = {0, 0};
        if (x->v > 1) {
            double d[N_COMPUTE];
            for (int q = 0; q < N_COMPUTE; q++)
                d[q] = (x->pre[q][e] - x->pre[q][pos]) * 1e3;
            sw = x->stage_work[s];
            x->stage_work[s] += rb_dot(x->seq[k].total, d);
            save_f = x->stage_fixed[s];
            save_d[0] = x->stage_dyn[0][s];
            save_d[1] = x->stage_dyn[1][s];
            if (x->limit)
                stage_fix_piece(x, k, pos, e);
        }
        if (x->lag)
            x->lag_fixed[k + 1] = kids[i].lh;
        double open = search(x, k + 1, kids[i].bound);
        if (x->v > 1) {
            x->stage_work[s] = sw;
            x->stage_fixed[s] = save_f;
            x->stage_dyn[0][s] = save_d[0];
            x->stage_dyn[1][s] = save_d[1];
        }
        if (x->aborted) {
            /* children are sorted: the next one's bound is the least of the rest */
            if (i + 1 < n)
                open = fmin(open, kids[i + 1].bound);
            return open;
        }
    }
    return INFINITY;
}

/* Local moves (local_search) from partition b (simulated to kb); keeps the result when it beats
 * the incumbent. `save` is scratch of P + 1 entries. */
void rb_search_from(rb_ctx *x, const int *b, double kb, int *save)
{
    size_t nb = (size_t)x->P + 1;
    if (!rb_fits(x, b))
        return;
    double keep = x->best_step;
    memcpy(x->bounds, b, sizeof(int) * nb);
    memcpy(save, x->best, sizeof(int) * nb);
    x->best_step = kb;
    memcpy(x->best, x->bounds, sizeof(int) * nb);
    local_search(x);
    if (!(x->best_step < keep)) {
        x->best_step = keep;
        memcpy(x->best, save, sizeof(int) * nb);
    }
}

/* The search's state at the root. */
static void search_reset(rb_ctx *x)
{
    x->bounds[0] = 0;
    for (int s = 0; s < x->S; s++) {
        x->stage_work[s] = 0;
        x->stage_fixed[s] = 0;
        x->stage_dyn[0][s] = 0;
        x->stage_dyn[1][s] = 0;
    }
}

/* ---- seeds for the incumbent ---- */

/* The partition that attains the root of the bound table: a good guess, often the optimum. */
static void seed_from_table(rb_ctx *x)
{
    int *b = x->bounds;
    b[0] = 0;
    for (int k = 0; k < x->P; k++) {
        int pos = b[k], rest = x->P - k - 1, arg = -1;
        double best = INFINITY;
        for (int e = pos + 1; e <= x->L - rest; e++) {
            double tail = *dcell(x, k + 1, e);
            if (!isfinite(tail) || rb_piece_over_limit(x, k, pos, e))
                continue;
            double g = fmax(rb_piece_bound(x, k, pos, e), tail);
            if (g < best) {
                best = g;
                arg = e;
            }
        }
        if (arg < 0)
            return;
        b[k + 1] = arg;
    }
    rb_offer(x, b);
}

/* The partition whose heaviest piece (by one micro-batch's work) is lightest among those whose
 * pieces each fit the limit: the classic balance, a good start where the bounds are weak. */
static void seed_min_max_load(rb_ctx *x)
{
    int L = x->L, P = x->P;
    double *T = pp_alloc(sizeof(double) * (size_t)(P + 1) * (size_t)(L + 1));
    int *arg = pp_alloc(sizeof(int) * (size_t)(P + 1) * (size_t)(L + 1));
    if (!T || !arg)
        goto done; /* only a seed */
#define TI(k, p) ((size_t)(k) * (L + 1) + (p))
    for (int pos = 0; pos <= L; pos++)
        T[TI(P, pos)] = pos == L ? 0.0 : INFINITY;
    for (int k = P - 1; k >= 0; k--)
        for (int pos = 0; pos <= L; pos++) {
            double best = INFINITY;
            int a = -1;
            for (int e = pos + 1; e <= L - (P - k - 1); e++) {
                if (rb_piece_over_limit(x, k, pos, e))
                    continue;
                double g = fmax(load_us(x, pos, e), T[TI(k + 1, e)]);
                if (g < best) {
                    best = g;
                    a = e;
                }
            }
            T[TI(k, pos)] = best;
            arg[TI(k, pos)] = a;
        }
    if (isfinite(T[TI(0, 0)])) {
        x->bounds[0] = 0;
        for (int k = 0; k < P; k++)
            x->bounds[k + 1] = arg[TI(k, x->bounds[k])];
        rb_offer(x, x->bounds);
    }
#undef TI
done:
    pp_free(T);
    pp_free(arg);
}

/* Chain slot k's lengths around the incumbent: its length on x->best, and per direction the
 * prefix sums of what moving each boundary by one changes it. The chain's length is a sum of
 * per-boundary terms (rb_lag_h), so a run's change is the difference of two prefix sums. */
static void pool_cache(rb_ctx *x, int k)
{
    const double *coef = &x->pool[(size_t)k * LAG_NC(x->P)];
    int P = x->P, L = x->L;
    const int *b = x->best;
    double len = rb_chain_len(x, coef, b);
    for (int di = 0; di < 2; di++) {
        double *run = &x->pool_run[((size_t)k * 2 + (size_t)di) * (size_t)P];
        int d = di ? 1 : -1;
        run[0] = len;
        double acc = 0.0;
        for (int q = 1; q < P; q++) {
            int to = b[q] + d;
            /* a boundary moved to 0 or L leaves a piece empty: never a move */
            if (to >= 1 && to <= L - 1)
                acc += rb_lag_h(x, coef, q, to) - rb_lag_h(x, coef, q, b[q]);
            run[q] = acc;
        }
    }
}

/* Whether a chain of the pool shows that the incumbent with boundaries q1 .. q2 moved by dir
 * cannot beat it: its length there, a lower bound on that partition's step, reaches the
 * incumbent's (so rb_offer would not keep it either). The chain that shows it moves to the
 * front. The lengths are the incumbent's plus the run's change (pool_cache); they differ from
 * rb_chain_len's by rounding, some 1e-15 of a step, far inside LAG_SAFETY's 1e-9. */
static int pool_rejects(rb_ctx *x, int q1, int q2, int dir)
{
    if (!x->pool_fresh) {
        for (int i = 0; i < x->pool_n; i++)
            pool_cache(x, i);
        x->pool_fresh = 1;
    }
    int di = dir > 0;
    for (int i = 0; i < x->pool_n; i++) {
        int k = x->pool_ord[i];
        const double *run = &x->pool_run[((size_t)k * 2 + (size_t)di) * (size_t)x->P];
        double change = run[q2] - (q1 > 1 ? run[q1 - 1] : 0.0);
        double lb = (run[0] + change + x->opt_ns) * LAG_SAFETY;
        if (lb >= x->best_step) {
            memmove(&x->pool_ord[1], &x->pool_ord[0], sizeof(int) * (size_t)i);
            x->pool_ord[0] = k;
            return 1;
        }
    }
    return 0;
}

/* The critical chain of b, which rb_offer has just simulated, into the pool at its front, in
 * place of the chain least recently useful when it is full. */
static void pool_add(rb_ctx *x, const int *b)
{
    int k, i;
    if (x->pool_n < RB_POOL) {
        i = x->pool_n;
        k = x->pool_ord[x->pool_n++] = i;
    } else {
        i = RB_POOL - 1;
        k = x->pool_ord[i];
    }
    memmove(&x->pool_ord[1], &x->pool_ord[0], sizeof(int) * (size_t)i);
    x->pool_ord[0] = k;
    rb_chain_of_evaluated(x, b, &x->pool[(size_t)k * LAG_NC(x->P)]);
    if (x->pool_fresh)
        pool_cache(x, k);
}

/* Moves single boundaries by one layer while that shortens the simulated step. */
/* With v > 1 the moves are runs: boundaries q1 .. q2 all move by one layer, which hands a layer
 * from piece q1 - 1 to piece q2 (or back) and shifts the pieces between: interleaved stages hold
 * pieces far apart, and balancing them needs such moves. A move that a chain of the pool shows
 * cannot beat the incumbent is not simulated (v > 1 without a memory limit): the moves kept are
 * the same, in the same order, and the search is faster. */
static void local_search(rb_ctx *x)
{
    if (!isfinite(x->best_step))
        return;
    int *b = x->bounds, P = x->P, span = x->v > 1 ? P - 1 : 1;
    int pooled = x->v > 1 && !x->limit && !x->no_pool;
    if (pooled && !x->pool) {
        x->pool = pp_alloc(sizeof(double) * RB_POOL * LAG_NC(P));
        x->pool_run = pp_alloc(sizeof(double) * RB_POOL * 2 * (size_t)P);
        x->pool_n = 0;
        pooled = x->pool && x->pool_run;
        if (!pooled) {
            pp_free(x->pool);
            pp_free(x->pool_run);
            x->pool = NULL;
            x->pool_run = NULL;
        }
    }
    x->pool_fresh = 0; /* the incumbent may have changed since */
    if (pooled) { /* the incumbent's own chain first: most moves lengthen it */
        memcpy(b, x->best, sizeof(int) * (size_t)(P + 1));
        rb_evaluate_with(x, b, NULL);
        pool_add(x, b);
    }
    for (int pass = 0, improved = 1; improved && pass < 64; pass++) {
        improved = 0;
        for (int q1 = 1; q1 < P; q1++) {
            for (int q2 = q1; q2 < P && q2 < q1 + span; q2++) {
                for (int dir = -1; dir <= 1; dir += 2) {
                    memcpy(b, x->best, sizeof(int) * (size_t)(P + 1));
                    for (int q = q1; q <= q2; q++)
                        b[q] += dir;
                    if (b[q1] <= b[q1 - 1] || b[q2] >= b[q2 + 1])
                        continue;
                    if (pooled && pool_rejects(x, q1, q2, dir))
                        continue;
                    double before = x->best_step;
                    rb_offer(x, b);
                    if (x->best_step < before) {
                        improved = 1;
                        x->pool_fresh = 0;
                    }
                    if (pooled)
                        pool_add(x, b);
                }
            }
            if (x->deadline && pp_now_ns() > x->deadline)
                return;
        }
    }
}

/* ---- the API ---- */

void pp_rebalance_result_free(pp_rebalance_result *r)
{
    if (!r)
        return;
    pp_partition_free(&r->partition);
    pp_free(r->stage_memory_bytes);
    pp_free(r->recompute);
    memset(r, 0, sizeof *r);
}

pp_status pp_rebalance(const pp_rebalance_opts *o, pp_rebalance_result *r)
{
    memset(r, 0, sizeof *r);
    uint64_t t0 = pp_now_ns();
    rb_ctx x;
    pp_status st = ctx_init(&x, o, 1);
    if (st != PP_OK)
        return st;
    x.t0 = t0;
    if (o->time_budget_s > 0)
        x.deadline = t0 + (uint64_t)(o->time_budget_s * 1e9);
    x.best_step = INFINITY;
    rb_build_piece_table(&x);
    rb_build_table(&x);
    double root = *dcell(&x, 0, 0);
    r->even_step_ns = -1.0;
    pp_partition even;
    if (pp_partition_even(x.L, x.S, x.v, &even) == PP_OK) {
        r->even_step_ns = rb_evaluate_with(&x, even.bounds, NULL);
        rb_offer(&x, even.bounds);
        pp_partition_free(&even);
    }
    if (isfinite(root)) {
        seed_from_table(&x);
        seed_min_max_load(&x);
        local_search(&x);
        double pair = -1.0;
        int proven = 0;
        if (x.v > 1) {
            rb_lag_setup(&x, &root);
            /* a first slice of the branch and bound: small cases end there, large ones get
             * its first leaves as incumbents */
            uint64_t full = x.deadline, now = pp_now_ns();
            uint64_t slice = full ? (full > now ? (full - now) / 10 : 0) : (uint64_t)1000000000;
            x.deadline = now + slice;
            search_reset(&x);
            search(&x, 0, root);
            proven = !x.aborted;
            x.aborted = 0;
            x.deadline = full;
            if (!proven) {
                if (x.lag) {
                    /* incumbents until 40% of what is left, the mixture's branch and bound
                     * (which finds better ones too) until 95% (docs/rebalancer.md) */
                    uint64_t left = full > now ? full - now : 0;
                    rb_lag_starts(&x, x.lag, full ? now + left / 20 * 8 : now + 1000000000ull);
                    int closed;
                    root = fmax(root, rb_lag_branch(&x, full ? now + left / 20 * 19
                                                             : now + 3000000000ull,
                                                    0, &closed));
                    proven = closed;
                }
                if (!proven && rb_pair_dp_applies(&x)) {
                    pair = rb_pair_dp(&x, root);
                    if (pair >= 0)
                        local_search(&x);
                }
            }
        }
        search_reset(&x);
        if (proven || pair >= cutoff(&x)) {
            /* the search ended, or no partition's bounds let it beat the incumbent */
            r->lower_bound_ns = cutoff(&x);
            r->exact = 1;
        } else {
            double open = search(&x, 0, root);
            r->lower_bound_ns = fmax(fmin(open, cutoff(&x)), pair);
            r->exact = !x.aborted;
        }
    }
    if (!isfinite(x.best_step)) {
        uint64_t m = rb_min_max_memory(&x);
        st = PP_ERR(PP_ERR_INVALID,
                    "rebalance: no partition of %d layers into %d stages%s meets the memory "
                    "limit of %llu bytes per stage; the smallest achievable largest stage "
                    "memory is %s%llu bytes (%.3f GiB)%s",
                    x.L, x.S, x.v > 1 ? " (interleaved)" : "",
                    (unsigned long long)x.limit, x.v > 1 ? "at least " : "",
                    (unsigned long long)m, (double)m / (1024.0 * 1024.0 * 1024.0),
                    x.aborted ? " (the search ran out of time)" : "");
        goto done;
    }
    if ((st = pp_partition_from_bounds(x.best, x.P + 1, x.L, x.S, x.v, &r->partition)) != PP_OK)
        goto done;
    r->step_ns = x.best_step;
    r->stage_memory_bytes = pp_alloc(sizeof(uint64_t) * (size_t)x.S);
    if (!r->stage_memory_bytes) {
        st = PP_ERR(PP_ERR_NOMEM, "rebalance: out of memory");
        goto done;
    }
    r->recompute = pp_alloc((size_t)x.L);
    if (!r->recompute) {
        st = PP_ERR(PP_ERR_NOMEM, "rebalance: out of memory");
        goto done;
    }
    rb_decide(&x, x.best, x.rcs);
    if (x.rcmask)
        memcpy(r->recompute, x.rcmask, (size_t)x.L);
    for (int s = 0; s < x.S; s++) {
        rb_cmem ch[RB_MAX_V];
        uint64_t fixed = 0;
        for (int k = 0; k < x.v; k++) {
            int j = k * x.S + s;
            rb_chunk_mem_masked(&x, j, x.best[j], x.best[j + 1], x.rcs[s] ? r->recompute : NULL,
                                &ch[k]);
            fixed = add_sat(fixed, ch[k].fixed);
        }
        r->stage_memory_bytes[s] = add_sat(fixed, rb_mvec_peak(&x.mv[s], ch));
        r->recomputed_stages += x.rcs[s];
    }
    if (x.sel_truncated && r->exact) {
        /* a stage's cheapest set was not proven: only the root's bound stands */
        r->exact = 0;
        r->lower_bound_ns = fmin(root, r->step_ns);
    }
    r->evaluated = x.evaluated;
    r->nodes = x.nodes;
    r->seconds = (double)(pp_now_ns() - t0) * 1e-9;
done:
    ctx_free(&x);
    if (st != PP_OK)
        pp_rebalance_result_free(r);
    return st;
}

/* A partition given from outside must have the options' shape; `what` names it. */
static pp_status check_shape(const rb_ctx *x, const pp_partition *p, const char *what)
{
    if (p->L == x->L && p->S == x->S && p->v == x->v && p->P == x->P)
        return PP_OK;
    return PP_ERR(PP_ERR_INVALID,
                  "rebalance: %s of %d layers into %d x %d pieces does not match the options "
                  "(%d layers, S = %d, v = %d)",
                  what, p->L, p->S, p->v, x->L, x->S, x->v);
}

pp_status pp_rebalance_moves(const pp_rebalance_opts *o, const pp_partition *start, int chains,
                             pp_partition *out, double *step_ns, int64_t *simulated)
{
    memset(out, 0, sizeof *out);
    rb_ctx x;
    pp_status st = ctx_init(&x, o, 0);
    if (st != PP_OK)
        return st;
    if ((st = check_shape(&x, start, "start")) != PP_OK)
        goto done;
    x.no_pool = !chains;
    x.best_step = INFINITY;
    rb_offer(&x, start->bounds);
    if (!isfinite(x.best_step)) {
        st = PP_ERR(PP_ERR_INVALID, "rebalance: the start partition breaks the memory limit");
        goto done;
    }
    local_search(&x);
    if ((st = pp_partition_from_bounds(x.best, x.P + 1, x.L, x.S, x.v, out)) != PP_OK)
        goto done;
    if (step_ns)
        *step_ns = x.best_step;
    if (simulated)
        *simulated = x.evaluated;
done:
    ctx_free(&x);
    return st;
}

pp_status pp_rebalance_inspect(const pp_rebalance_opts *o, const pp_partition *p, double *step_ns,
                               double *bound_ns)
{
    rb_ctx x;
    pp_status st = ctx_init(&x, o, 0);
    if (st != PP_OK)
        return st;
    if ((st = check_shape(&x, p, "partition")) != PP_OK)
        goto done;
    if (step_ns)
        *step_ns = rb_evaluate(&x, p->bounds);
    if (bound_ns) {
        double b = 0.0;
        for (int j = 0; j < x.P; j++)
            b = fmax(b, rb_piece_bound(&x, j, p->bounds[j], p->bounds[j + 1]));
        for (int s = 0; s < x.S; s++) {
            double work = 0.0;
            for (int ch = 0; ch < x.v; ch++) {
                int j = ch * x.S + s;
                double d[N_COMPUTE];
                for (int q = 0; q < N_COMPUTE; q++)
                    d[q] = (x.pre[q][p->bounds[j + 1]] - x.pre[q][p->bounds[j]]) * 1e3;
                work += rb_dot(x.seq[j].total, d);
            }
            b = fmax(b, (work + x.opt_ns) * BOUND_SAFETY);
            if (x.v > 1)
                b = fmax(b, rb_stage_bound(&x, s, p->bounds));
            if (x.v > 1 && s == 0)
                b = fmax(b, rb_ends_bound(&x, p->bounds));
            if (x.v > 1 && x.fill_ok) /* the pair DP's first test */
                b = fmax(b, (rb_fill_drain_ns(&x, s, p->bounds[s]) + work + x.opt_ns) *
                                BOUND_SAFETY);
        }
        if (x.v > 1 && (x.lag = rb_lag_new(&x)) != NULL) {
            /* the chain mixture of a few rounds of rb_lag_solve (deterministic: no deadline) at
             * this partition's boundaries, the search's node bound at a leaf, and each chain
             * alone */
            x.best_step = INFINITY;
            rb_lag_solve(&x, x.lag, 0, 12);
            double h = x.lag->c0;
            for (int k = 1; k < x.P; k++)
                h += rb_lag_h(&x, x.lag->agg, k, p->bounds[k]);
            b = fmax(b, (h + x.opt_ns) * LAG_SAFETY);
            for (int i = 0; i < x.lag->m; i++)
                b = fmax(b, (rb_chain_len(&x, &x.lag->chain[(size_t)i * LAG_NC(x.P)], p->bounds) +
                             x.opt_ns) * LAG_SAFETY);
        }
        *bound_ns = b;
    }
done:
    ctx_free(&x);
    return st;
}

pp_status pp_rebalance_branch_bound(const pp_rebalance_opts *o, const pp_partition *incumbent,
                                    int max_splits, double *root_ns, double *bound_ns,
                                    double *best_ns)
{
    if (o->v < 2)
        return PP_ERR(PP_ERR_INVALID, "rebalance: the mixture's branch and bound is for "
                                      "interleaved schedules (v >= 2), not v = %d", o->v);
    rb_ctx x;
    pp_status st = ctx_init(&x, o, 0);
    if (st != PP_OK)
        return st;
    x.best_step = INFINITY;
    if (incumbent) {
        if ((st = check_shape(&x, incumbent, "incumbent")) != PP_OK)
            goto done;
        rb_offer(&x, incumbent->bounds);
    }
    rb_build_piece_table(&x);
    x.lag = rb_lag_new(&x);
    x.kid_cur = pp_alloc(sizeof(int) * ((size_t)x.P + 1));
    x.kid_save = pp_alloc(sizeof(int) * ((size_t)x.P + 1));
    if (!x.lag || !x.kid_cur || !x.kid_save) {
        st = PP_ERR(PP_ERR_NOMEM, "rebalance: out of memory");
        goto done;
    }
    rb_lag_solve(&x, x.lag, 0, 4000);
    if (root_ns)
        *root_ns = x.lag->bound;
    int closed;
    double b = rb_lag_branch(&x, 0, max_splits, &closed);
    if (bound_ns)
        *bound_ns = b;
    if (best_ns)
        *best_ns = x.best_step;
done:
    ctx_free(&x);
    return st;
}
