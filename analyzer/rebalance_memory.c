/* rebalance_memory.c: the rebalancer's memory model (pp_stage_memory_model's, term by term, in
 * prefix-sum form so a piece's charge is O(1)), each stage's peak vectors replayed once from the
 * schedule, the cheapest layers a stage recomputes to meet the limit (rb_select) and the decision
 * for a whole partition, and the smallest achievable memory for the message when nothing fits.
 * Part of pp_rebalance (rebalance.c); docs/rebalancer.md "Memory model", "Recomputation". */
#include "rebalance_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static uint64_t mem_model(uint64_t params, uint64_t act, int peak)
{
    return add_sat(mul_sat(params, 4), mul_sat(act, (uint64_t)(peak > 0 ? peak : 0)));
}

/* What a layer keeps per micro-batch in flight: kept_bytes, or activation_bytes for a cost file
 * without the memory keys (the model before them). */
uint64_t rb_mem_act(const pp_layer_cost *l)
{
    return l->has_kept ? l->kept_bytes : l->activation_bytes;
}

static uint64_t range_u64(const pp_costs *c, int lo, int hi, int act)
{
    uint64_t s = 0;
    for (int l = lo; l < hi; l++)
        s = add_sat(s, act ? rb_mem_act(&c->layers[l]) : c->layers[l].param_bytes);
    return s;
}

uint64_t pp_stage_memory_bytes(const pp_costs *c, const pp_partition *p, int stage,
                               int peak_inflight)
{
    uint64_t params = 0, act = 0;
    for (int ch = 0; ch < p->v; ch++) {
        int piece = ch * p->S + stage;
        int lo = p->bounds[piece], hi = p->bounds[piece + 1];
        params = add_sat(params, range_u64(c, lo, hi, 0));
        uint64_t a = range_u64(c, lo, hi, 1);
        act = a > act ? a : act;
    }
    return mem_model(params, act, peak_inflight);
}

/* ---- the memory model with recomputation (pp_stage_memory_model's, per stage) ---- */

/* What recomputed layer l keeps per micro-batch: its input (memmodel.c's rule). */
uint64_t rb_mem_input(const pp_costs *c, int l)
{
    if (c->layers[l].has_kept)
        return c->layers[l].input_bytes;
    return l > 0 ? c->layers[l - 1].activation_bytes : 0;
}

static void chunk_mem(const rb_ctx *x, int piece, int lo, int hi, int r, rb_cmem *out)
{
    const pp_costs *c = x->c;
    int s = piece % x->S;
    /* (the bound tables also ask about ranges no partition gives piece > 0: lo = 0) */
    uint64_t in = piece > 0 && lo > 0 ? c->layers[lo - 1].activation_bytes : 0;
    uint64_t back = piece < x->P - 1 ? c->layers[hi - 1].activation_bytes : 0;
    out->fixed = add_sat(mul_sat(x->pre_param[hi] - x->pre_param[lo], 4),
                         mul_sat(add_sat(in, back), (uint64_t)x->slots[s]));
    uint64_t kept = x->pre_act[hi] - x->pre_act[lo];
    if (!r) {
        out->mb = kept;
        out->set = 0;
        return;
    }
    /* recomputed: the inputs, and at a chunk end the tensor its send reads */
    uint64_t mb = x->pre_in[hi] - x->pre_in[lo];
    if (hi < x->L)
        mb = add_sat(mb, rb_mem_input(c, hi));
    if (lo > 0)
        mb = add_sat(mb, rb_mem_input(c, lo));
    out->mb = mb;
    out->set = kept;
}

/* The same with the layers of mask[L] recomputed, by the model's own rule (a set of a stage's
 * layers, not all or none: rb_select's candidates and the proposal's choice). */
void rb_chunk_mem_masked(const rb_ctx *x, int piece, int lo, int hi, const uint8_t *mask,
                         rb_cmem *out)
{
    chunk_mem(x, piece, lo, hi, 0, out);
    pp_costs_chunk_memory(x->c, lo, hi, mask, &out->mb, &out->set);
}

/* The largest activation sum over m's vectors for the chunks' charges ch[0 .. m->dim-1]. */
uint64_t rb_mvec_peak(const rb_mvec *m, const rb_cmem *ch)
{
    uint64_t best = 0;
    for (int i = 0; i < m->n; i++) {
        const int32_t *a = &m->aw[(size_t)i * 2 * (size_t)m->dim], *w = a + m->dim;
        uint64_t t = 0;
        for (int k = 0; k < m->dim; k++)
            t = add_sat(t, add_sat(mul_sat((uint64_t)a[k], ch[k].mb),
                                   mul_sat((uint64_t)w[k], ch[k].set)));
        best = t > best ? t : best;
    }
    return best;
}

/* Stage s's bytes at its peak with its chunks as in bounds b (entries s, S + s, ... and the next
 * of each), recomputed (r = 1) or not: pp_stage_memory_model's total, to the byte. */
uint64_t rb_stage_mem(const rb_ctx *x, int s, const int *b, int r)
{
    rb_cmem ch[RB_MAX_V] = {{0, 0, 0}};
    uint64_t fixed = 0;
    for (int k = 0; k < x->v; k++) {
        int j = k * x->S + s;
        chunk_mem(x, j, b[j], b[j + 1], r, &ch[k]);
        fixed = add_sat(fixed, ch[k].fixed);
    }
    return add_sat(fixed, rb_mvec_peak(&x->mv[s], ch));
}

/* Piece j = [lo, hi) alone: its static bytes and its peak with no other chunk in flight; for
 * v = 1 the stage's memory, for v > 1 a lower bound on it (every term is nonnegative). */
uint64_t rb_piece_mem(const rb_ctx *x, int j, int lo, int hi, int r, uint64_t *dyn)
{
    rb_cmem ch;
    chunk_mem(x, j, lo, hi, r, &ch);
    uint64_t d = rb_mvec_peak(&x->cv[(j % x->S) * x->v + j / x->S], &ch);
    if (dyn)
        *dyn = d;
    return add_sat(ch.fixed, d);
}

/* ---- v = 1: the cheapest layers to recompute (rb_select) ---- */

/* With one chunk per stage, recomputing layer l adds fwd_us(l) to each backward of its stage and
 * nothing else, and the step time only grows with an op's duration: the fastest choice for a
 * stage that breaks the limit is the set R of its layers with the least sum of fwd_us whose
 * memory meets it. Under each of the stage's peak vectors (a, w) the memory is linear in R:
 *   F + a·K + Σ_{l in R} (w·kept(l) - a·(kept(l) - input(l)) + a·end(l)),
 * end(l) the tensor a recomputed chunk end keeps (memmodel.c), so R is the cheapest cover of a
 * few knapsack constraints, found by branch and bound over the layers in order of saving per
 * microsecond under the tightest constraint, pruned by that constraint's fractional bound; every
 * leaf is checked with the model itself (pp_costs_chunk_memory). Stages hold few layers; the
 * node count is capped (RB_SEL_NODES) and a search that reaches it keeps its best set and marks
 * the result not proven (x->sel_truncated). */
#define RB_SEL_NODES 200000

typedef struct rb_sel {
    int n, m;          /* layers of the stage, constraints (peak vectors) */
    int lo, hi, s;
    int *order;        /* [n] layer offsets, by saving per us under constraint `key` */
    double *cost;      /* [n] fwd_us, in that order */
    double *save;      /* [m * n] savings per constraint, in that order */
    double *suffix;    /* [m * (n + 1)] sums of the positive savings from position k on */
    double *need;      /* [m] bytes to save */
    int key;
    uint8_t *cur, *best_set; /* [n] */
    double best;
    int64_t nodes;
} rb_sel;

/* The model's memory of stage s = [lo, hi) with the layers of sel->cur recomputed. */
static uint64_t sel_memory(rb_ctx *x, const rb_sel *q)
{
    memset(x->selmask + q->lo, 0, (size_t)q->n);
    for (int k = 0; k < q->n; k++)
        x->selmask[q->lo + q->order[k]] = q->cur[k];
    rb_cmem ch;
    rb_chunk_mem_masked(x, q->s, q->lo, q->hi, x->selmask, &ch);
    return add_sat(ch.fixed, rb_mvec_peak(&x->mv[q->s], &ch));
}

/* The least cost that could still cover constraint `key` from position k on with `left` bytes
 * to save: the fractional greedy over the remaining layers (sorted by that ratio). */
static double sel_frac(const rb_sel *q, int k, double left)
{
    const double *sv = &q->save[(size_t)q->key * (size_t)q->n];
    double c = 0.0;
    for (int i = k; i < q->n && left > 0; i++) {
        if (sv[i] <= 0)
            continue;
        if (sv[i] >= left)
            return c + q->cost[i] * (left / sv[i]);
        c += q->cost[i];
        left -= sv[i];
    }
    return left > 0 ? INFINITY : c;
}

static void sel_dfs(rb_ctx *x, rb_sel *q, int k, double cost, double *left)
{
    if (++q->nodes > RB_SEL_NODES) {
        x->sel_truncated = 1;
        return;
    }
    int done = 1;
    for (int i = 0; i < q->m; i++) {
        if (left[i] <= 0)
            continue;
        done = 0;
        /* the rest cannot save enough for this constraint */
        if (q->suffix[(size_t)i * (size_t)(q->n + 1) + (size_t)k] < left[i] * (1 - 1e-12))
            return;
    }
    if (done || k == q->n) {
        if (cost < q->best && sel_memory(x, q) <= x->limit) {
            q->best = cost;
            memcpy(q->best_set, q->cur, (size_t)q->n);
            return;
        }
        if (k == q->n)
            return;
    }
    if (cost + sel_frac(q, k, left[q->key]) >= q->best)
        return;
    /* recompute layer k first (the greedy choice), then not */
    q->cur[k] = 1;
    double *nl = left + q->m; /* the next level's residuals */
    for (int i = 0; i < q->m; i++)
        nl[i] = left[i] - q->save[(size_t)i * (size_t)q->n + (size_t)k];
    sel_dfs(x, q, k + 1, cost + q->cost[k], nl);
    q->cur[k] = 0;
    sel_dfs(x, q, k + 1, cost, left);
}

/* The cheapest set for stage s = [lo, hi) (v = 1) that meets the limit: its added forward time
 * (us), or +inf when no set meets it; with `mask` the set is written to mask[lo .. hi-1].
 * With bound_only, the fractional bound alone: a lower bound on that time (+inf: none). NaN
 * for a stage beyond the scratch (more than RB_SEL_MAX_LAYERS layers or sel_max_m vectors),
 * which is then recomputed whole or not at all. */
double rb_select(rb_ctx *x, int s, int lo, int hi, uint8_t *mask, int bound_only)
{
    const pp_costs *c = x->c;
    const rb_mvec *mv = &x->mv[s];
    rb_sel q = {.n = hi - lo, .m = mv->n, .lo = lo, .hi = hi, .s = s, .best = INFINITY};
    if (q.n > RB_SEL_MAX_LAYERS || q.m > x->sel_max_m)
        return NAN; /* beyond its scratch: the stage is recomputed whole */
    q.order = x->sel_order;
    q.cost = x->sel_cost;
    q.save = x->sel_save;
    q.suffix = x->sel_suffix;
    q.need = x->sel_need;
    q.cur = x->sel_cur;
    q.best_set = x->sel_best;
    rb_cmem ch;
    chunk_mem(x, s, lo, hi, 0, &ch);
    double K = (double)ch.mb, F = (double)ch.fixed, lim = (double)x->limit, worst = 0;
    for (int i = 0; i < q.m; i++) {
        const int32_t *aw = &mv->aw[(size_t)i * 2];
        q.need[i] = F + aw[0] * K - lim;
        if (q.need[i] > worst) {
            worst = q.need[i];
            q.key = i;
        }
    }
    if (worst <= 0)
        return 0.0; /* fits as it is */
    /* savings per layer under each constraint, by layer offset first */
    for (int k = 0; k < q.n; k++) {
        int l = lo + k;
        double kept = (double)(x->pre_act[l + 1] - x->pre_act[l]);
        double in = (double)rb_mem_input(c, l), end = 0;
        if (l == hi - 1 && hi < x->L)
            end += (double)rb_mem_input(c, hi);
        if (l == lo && lo > 0)
            end += (double)rb_mem_input(c, lo);
        for (int i = 0; i < q.m; i++) {
            const int32_t *aw = &mv->aw[(size_t)i * 2];
            q.save[(size_t)i * (size_t)q.n + (size_t)k] =
                aw[0] * (kept - in) - aw[1] * kept - aw[0] * end;
        }
        q.order[k] = k;
        q.cost[k] = c->layers[l].fwd_us > 0 ? c->layers[l].fwd_us : 0;
    }
    /* order by saving per us under the key constraint (free savings first); insertion sort */
    const double *ks = &q.save[(size_t)q.key * (size_t)q.n];
    for (int k = 0; k < q.n; k++)
        x->sel_ratio[k] = ks[k] <= 0 ? -INFINITY : q.cost[k] > 0 ? ks[k] / q.cost[k] : INFINITY;
    for (int k = 1; k < q.n; k++) {
        int o = q.order[k];
        double r = x->sel_ratio[o];
        int j = k;
        while (j > 0 && x->sel_ratio[q.order[j - 1]] < r) {
            q.order[j] = q.order[j - 1];
            j--;
        }
        q.order[j] = o;
    }
    /* permute costs and savings into that order (through the scratch of the current set) */
    for (int k = 0; k < q.n; k++)
        x->sel_ratio[k] = q.cost[q.order[k]];
    memcpy(q.cost, x->sel_ratio, sizeof(double) * (size_t)q.n);
    for (int i = 0; i < q.m; i++) {
        double *sv = &q.save[(size_t)i * (size_t)q.n];
        for (int k = 0; k < q.n; k++)
            x->sel_ratio[k] = sv[q.order[k]];
        memcpy(sv, x->sel_ratio, sizeof(double) * (size_t)q.n);
        double *suf = &q.suffix[(size_t)i * (size_t)(q.n + 1)];
        suf[q.n] = 0;
        for (int k = q.n - 1; k >= 0; k--)
            suf[k] = suf[k + 1] + (sv[k] > 0 ? sv[k] : 0);
    }
    for (int i = 0; i < q.m; i++)
        if (q.suffix[(size_t)i * (size_t)(q.n + 1)] < q.need[i] * (1 - 1e-12))
            return INFINITY; /* every saving layer together is not enough */
    if (bound_only)
        return sel_frac(&q, 0, q.need[q.key]);
    memset(q.cur, 0, (size_t)q.n);
    /* residuals per depth: (n + 2) levels of m */
    memcpy(x->sel_left, q.need, sizeof(double) * (size_t)q.m);
    sel_dfs(x, &q, 0, 0.0, x->sel_left);
    if (isfinite(q.best) && mask) {
        memset(mask + lo, 0, (size_t)q.n);
        for (int k = 0; k < q.n; k++)
            mask[lo + q.order[k]] = q.best_set[k];
    }
    return q.best;
}

/* The stages' choices for a complete partition, in rcs[S] (1: the stage recomputes) and
 * x->rcmask (which layers): none where the stage fits without; else, for v = 1, its cheapest
 * layers to recompute (rb_select), for v > 1 all its layers, where that rb_fits (the step time only
 * grows with an op's duration, so this is the fastest choice that meets the limit). Returns 0
 * when some stage fits no way (its choice is then all its layers when recomputation is
 * allowed). */
int rb_decide(rb_ctx *x, const int *b, uint8_t *rcs)
{
    int ok = 1;
    for (int s = 0; s < x->S; s++) {
        rcs[s] = 0;
        for (int j = s; x->rcmask && j < x->P; j += x->S)
            memset(x->rcmask + b[j], 0, (size_t)(b[j + 1] - b[j]));
        if (!x->limit || rb_stage_mem(x, s, b, 0) <= x->limit)
            continue;
        if (!x->rc_ok) {
            ok = 0;
            continue;
        }
        rcs[s] = 1;
        double add = x->sel_order ? rb_select(x, s, b[s], b[s + 1], x->rcmask, 0) : NAN;
        if (isfinite(add))
            continue;
        for (int j = s; j < x->P; j += x->S)
            memset(x->rcmask + b[j], 1, (size_t)(b[j + 1] - b[j]));
        if (!isnan(add) || rb_stage_mem(x, s, b, 1) > x->limit)
            ok = 0;
    }
    return ok;
}

/* Builds the peak candidates of every stage and chunk from the schedule's lists, replaying them
 * as memmodel.c does: a FWD puts a micro-batch in flight and runs in a workspace, a BWD runs in
 * one before it ends the micro-batch, an input-gradient op holds one until the weight half,
 * which ends the micro-batch. */
static int mvec_add(rb_mvec *m, int *cap, const int32_t *aw)
{
    int d2 = 2 * m->dim;
    for (int i = 0; i < m->n; i++) {
        int32_t *o = &m->aw[(size_t)i * (size_t)d2];
        int ge = 1, le = 1;
        for (int k = 0; k < d2; k++) {
            ge &= o[k] >= aw[k];
            le &= o[k] <= aw[k];
        }
        if (ge)
            return 1; /* dominated (or equal) */
        if (le) {     /* dominates o: replace it, then drop the others it dominates */
            memcpy(o, aw, sizeof(int32_t) * (size_t)d2);
            for (int j = m->n - 1; j > i; j--) {
                int32_t *q = &m->aw[(size_t)j * (size_t)d2];
                int dom = 1;
                for (int k = 0; k < d2; k++)
                    dom &= q[k] <= aw[k];
                if (dom) {
                    memcpy(q, &m->aw[(size_t)(m->n - 1) * (size_t)d2], sizeof(int32_t) * (size_t)d2);
                    m->n--;
                }
            }
            return 1;
        }
    }
    if (m->n == *cap) {
        int nc = *cap ? *cap * 2 : 8;
        int32_t *g = pp_alloc(sizeof(int32_t) * (size_t)nc * (size_t)d2);
        if (!g)
            return 0;
        if (m->n)
            memcpy(g, m->aw, sizeof(int32_t) * (size_t)m->n * (size_t)d2);
        pp_free(m->aw);
        m->aw = g;
        *cap = nc;
    }
    memcpy(&m->aw[(size_t)m->n * (size_t)d2], aw, sizeof(int32_t) * (size_t)d2);
    m->n++;
    return 1;
}

pp_status rb_build_mem_vectors(rb_ctx *x, const pp_schedule *sc)
{
    int S = x->S, v = x->v;
    x->mv = pp_alloc(sizeof(rb_mvec) * (size_t)S);
    x->cv = pp_alloc(sizeof(rb_mvec) * (size_t)S * (size_t)v);
    if (!x->mv || !x->cv)
        return PP_ERR(PP_ERR_NOMEM, "rebalance: out of memory for the memory model");
    memset(x->mv, 0, sizeof(rb_mvec) * (size_t)S);
    memset(x->cv, 0, sizeof(rb_mvec) * (size_t)S * (size_t)v);
    int32_t infl[RB_MAX_V], held[RB_MAX_V], aw[2 * RB_MAX_V], one[2];
    for (int s = 0; s < S; s++) {
        int cap = 0, ccap[RB_MAX_V] = {0};
        x->mv[s].dim = v;
        for (int k = 0; k < v; k++)
            x->cv[s * v + k].dim = 1;
        memset(infl, 0, sizeof infl);
        memset(held, 0, sizeof held);
        for (int i = 0; i < sc->n_instrs[s]; i++) {
            const pp_instr *in = &sc->instrs[s][i];
            int k = in->chunk, run = 0;
            if (k < 0 || k >= v)
                continue;
            switch ((pp_op)in->op) {
            case PP_OP_FWD: infl[k]++; run = 1; break;
            case PP_OP_BWD: run = 1; break;
            case PP_OP_BWD_INPUT: held[k]++; break;
            case PP_OP_BWD_WEIGHT:
                held[k] -= held[k] > 0;
                infl[k] -= infl[k] > 0;
                continue;
            default: continue;
            }
            for (int q = 0; q < v; q++) {
                aw[q] = infl[q];
                aw[v + q] = held[q] + (run && q == k);
            }
            if (!mvec_add(&x->mv[s], &cap, aw))
                return PP_ERR(PP_ERR_NOMEM, "rebalance: out of memory for the memory model");
            for (int q = 0; q < v; q++) {
                one[0] = aw[q];
                one[1] = aw[v + q];
                if (!mvec_add(&x->cv[s * v + q], &ccap[q], one))
                    return PP_ERR(PP_ERR_NOMEM, "rebalance: out of memory for the memory model");
            }
            if ((pp_op)in->op == PP_OP_BWD)
                infl[k] -= infl[k] > 0;
        }
    }
    return PP_OK;
}

/* ---- the smallest achievable largest stage memory, for the message when nothing fits ---- */

/* v = 1: exact min-max over contiguous pieces. v > 1: the same over pieces, each charged alone
 * (a lower bound on the stages' memory). */
uint64_t rb_min_max_memory(const rb_ctx *x)
{
    int L = x->L, P = x->P;
    uint64_t *T = pp_alloc(sizeof(uint64_t) * (size_t)(P + 1) * (size_t)(L + 1));
    if (!T)
        return 0;
#define TC(k, p) T[(size_t)(k) * (L + 1) + (p)]
    for (int pos = 0; pos <= L; pos++)
        TC(P, pos) = pos == L ? 0 : UINT64_MAX;
    for (int k = P - 1; k >= 0; k--)
        for (int pos = 0; pos <= L; pos++) {
            uint64_t best = UINT64_MAX;
            for (int e = pos + 1; e <= L - (P - k - 1); e++) {
                uint64_t m = rb_piece_mem(x, k, pos, e, 0, NULL);
                if (x->rc_ok) {
                    uint64_t m1 = rb_piece_mem(x, k, pos, e, 1, NULL);
                    m = m1 < m ? m1 : m;
                }
                uint64_t t = TC(k + 1, e);
                uint64_t g = m > t ? m : t;
                best = g < best ? g : best;
            }
            TC(k, pos) = best;
        }
    uint64_t r = TC(0, 0);
#undef TC
    pp_free(T);
    return r;
}
