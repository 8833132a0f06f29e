/* rebalance_pair.c: the pair DP for v = 2, the stage bound minimised over all partitions by a DP
 * over stages with both chunks of each stage fixed. Part of pp_rebalance (rebalance.c);
 * docs/rebalancer.md "The bounds". */
#include "rebalance_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- v = 2: the stage bound over all partitions, by a DP over stages ---- */

/* The pair DP's back-pointers hold (S + 1) x (L + 1)^2 entries at most (64 MiB), its per-state
 * arrays (L + 1)^2 entries (with the label bitsets, 2 x 64 bytes each: 64 MiB); beyond, the DP
 * is skipped. */
#define MAX_PAIR_TABLE ((int64_t)1 << 24)
#define MAX_PAIR_STATES ((int64_t)1 << 19)

/* Per-micro-batch-independent work of piece j over [lo, hi): all its ops, ns. */
static double piece_work_ns(const rb_ctx *x, const int *total, int lo, int hi)
{
    double d[N_COMPUTE];
    for (int q = 0; q < N_COMPUTE; q++)
        d[q] = (x->pre[q][hi] - x->pre[q][lo]) * 1e3;
    return rb_dot(total, d);
}

/* The part of stage s's fill-and-drain path outside its list when its first piece starts at
 * layer `lo`: the forward of layers [0, lo) to its first FWD and the gradient of its last op (a
 * backward of chunk 0, interleaved) down through them, with the transfers of s boundaries each
 * way. It grows with lo. */
double rb_fill_drain_ns(const rb_ctx *x, int s, int lo)
{
    return (x->pre[K_F][lo] + x->pre_bb[lo]) * 1e3 + 2.0 * s * x->tmin;
}

/* Labels of the first stage's choices that the pair DP carries to the last stage for rb_ends_bound;
 * the last label stands for every choice beyond the others (no rb_ends_bound for it). */
#define PAIR_LABEL_WORDS 8
#define PAIR_LABELS (64 * PAIR_LABEL_WORDS)

/* Scratch of the pair DP. */
typedef struct rb_pair {
    double *va, *vb;  /* [(L + 1)^2] best value of each state of the current / next stage */
    int32_t *la, *lb; /* [(L + 1)^2] the states reached */
    int32_t *par;     /* [(S + 1) (L + 1)^2] back-pointers */
    int *tb;          /* [P + 1] */
    double *room;     /* [(S + 1) (L + 1)] room_table */
    uint64_t *ma, *mb; /* [(L + 1)^2 * PAIR_LABEL_WORDS] which first-stage choices reach a state */
    int *lab_x, *lab_y; /* [PAIR_LABELS] the first stage's ends (b_1, b_{S+1}) of each label */
    double *ga, *gb;  /* [(L + 1)^2] with the chain mixture: the least sum of its H over the
                         boundaries fixed so far, over the paths that reach a state */
    double *gx;       /* [S (L + 1)] the mixture's cost to go over the first round (lag_round) */
} rb_pair;

/* For one R and cut: room[s][pos] = the most room that stages s .. S-1 can leave for their
 * second-round pieces when their first-round pieces tile [pos, R): stage s' with first piece
 * [lo, e) keeps its fill, busy time and drain below the cut only if its second piece's work is
 * below sigma = cut - opt - fill_drain(s', lo) - work(lo, e); the sum of sigma over those stages,
 * each sigma > 0, maximised over the tilings (-inf: no tiling keeps every sigma > 0). The second
 * round's pieces must hold all the work after the state's second boundary: a state whose room is
 * not above that work cannot lead below the cut. */
static void room_table(const rb_ctx *x, rb_pair *w, int R, double cut, const int *tot)
{
    int S = x->S, L = x->L;
    double lim = cut / BOUND_SAFETY - x->opt_ns;
#define ROOM(s, p) w->room[(size_t)(s) * (L + 1) + (p)]
    for (int pos = 0; pos <= L; pos++)
        ROOM(S, pos) = pos == R ? 0.0 : -INFINITY;
    for (int s = S - 1; s >= 1; s--)
        for (int pos = 0; pos <= R; pos++) {
            double best = -INFINITY, f = rb_fill_drain_ns(x, s, pos);
            int rest = S - 1 - s;
            for (int e = pos + 1; e <= R - rest; e++) {
                double sig = lim - f - piece_work_ns(x, tot, pos, e);
                if (sig <= 0)
                    break; /* only shrinks as e grows */
                double t = ROOM(s + 1, e);
                if (t > -INFINITY && sig + t > best)
                    best = sig + t;
            }
            ROOM(s, pos) = best;
        }
}

/* The chain mixture's cost to go over the first round for this R: gx[k][pos] = the least sum
 * of its H_j over boundaries j = k+1 .. S-1 with boundary k at pos and b_S = R. */
static void lag_round(const rb_ctx *x, rb_pair *w, int R)
{
    int S = x->S, L = x->L;
    const rb_lag *lg = x->lag;
#define GX(k, p) w->gx[(size_t)(k) * (L + 1) + (p)]
    for (int pos = 0; pos <= L; pos++)
        GX(S - 1, pos) = pos < R ? 0.0 : INFINITY;
    for (int k = S - 2; k >= 1; k--) {
        double m = INFINITY;
        for (int pos = L; pos >= 0; pos--) {
            int e = pos + 1;
            if (e < R && e >= k + 1)
                m = dmin(m, rb_lag_h(x, lg->agg, k + 1, e) + GX(k + 1, e));
            GX(k, pos) = m;
        }
    }
#undef GX
}

/* One pass of the pair DP below with states pruned at min(T, the incumbent's cutoff). Returns the
 * least max of the bounds over all partitions (of any R) whose bounds all stay below that cut, or
 * +inf when none does; offers each R's best partition. Sets x->aborted when out of time. */
static double pair_pass(rb_ctx *x, rb_pair *w, double T)
{
    int S = x->S, L = x->L, P = x->P;
    size_t NS = (size_t)(L + 1) * (size_t)(L + 1);
    double best = INFINITY;
    int tot[N_COMPUTE]; /* each piece runs at least these many ops of each kind */
    for (int q = 0; q < N_COMPUTE; q++) {
        tot[q] = x->seq[0].total[q];
        for (int j = 1; j < P; j++)
            tot[q] = x->seq[j].total[q] < tot[q] ? x->seq[j].total[q] : tot[q];
    }
    for (int R = S; R <= L - S; R++) {
        if (x->deadline && pp_now_ns() > x->deadline) {
            x->aborted = 1;
            return best;
        }
        room_table(x, w, R, fmin(T, cutoff(x)), tot);
        const rb_lag *lg = x->lag;
        double lag0 = 0.0; /* the mixture's constant and H_S(R), with the optimizer step */
        if (lg) {
            lag_round(x, w, R);
            lag0 = lg->c0 + rb_lag_h(x, lg->agg, S, R) + x->opt_ns;
        }
        int na = 0;
        w->va[(size_t)R] = 0.0; /* state (b_0, b_S) = (0, R) */
        w->ga[(size_t)R] = 0.0;
        w->la[na++] = R;
        for (int s = 0; s < S && na > 0; s++) {
            int nb = 0, rest = S - 1 - s;
            const rb_seq *q0 = &x->seq[s], *q1 = &x->seq[S + s];
            for (int i = 0; i < na; i++) {
                int32_t st = w->la[i];
                double val = w->va[st], gval = w->ga[st];
                w->va[st] = INFINITY;
                int xs = st / (L + 1), ys = st % (L + 1);
                double cut = fmin(T, cutoff(x));
                if (val >= cut)
                    continue;
                x->nodes++;
                int xlo = rest ? xs + 1 : R, xhi = rest ? R - rest : R;
                int ylo = rest ? ys + 1 : L, yhi = rest ? L - rest : L;
                /* this stage's fill and drain around all the ops of its list */
                double fill = rb_fill_drain_ns(x, s, xs);
                for (int x2 = xlo; x2 <= xhi; x2++) {
                    double w0 = piece_work_ns(x, q0->total, xs, x2);
                    if ((fill + w0 + x->opt_ns) * BOUND_SAFETY >= cut)
                        break; /* grows with x2 */
                    double later = rest ? rb_fill_drain_ns(x, s + 1, x2) : 0.0;
                    for (int y2 = ylo; y2 <= yhi; y2++) {
                        double wk = w0 + piece_work_ns(x, q1->total, ys, y2);
                        if ((fill + wk + x->opt_ns) * BOUND_SAFETY >= cut)
                            break; /* grows with y2 */
                        if (rest) {
                            /* some later stage gets at least the average remaining work, and
                             * each later stage's first piece starts at x2 or later */
                            double rem = piece_work_ns(x, tot, x2, R) + piece_work_ns(x, tot, y2, L);
                            if ((later + rem / rest + x->opt_ns) * BOUND_SAFETY >= cut)
                                continue;
                            /* the later stages' room for the second round's work */
                            double need = piece_work_ns(x, tot, y2, L);
                            if (w->room[(size_t)(s + 1) * (L + 1) + x2] * (1 + 1e-12) <= need)
                                continue;
                        }
                        double gnew = gval;
                        if (lg && rest) {
                            /* the chain mixture over this partial partition and the least its
                             * remaining boundaries can add */
                            gnew += rb_lag_h(x, lg->agg, s + 1, x2) +
                                    rb_lag_h(x, lg->agg, S + s + 1, y2);
                            double togo = w->gx[(size_t)(s + 1) * (L + 1) + x2] +
                                          lg->G[(size_t)(S + s + 1) * (L + 1) + y2];
                            if ((lag0 + gnew + togo) * LAG_SAFETY >= cut)
                                continue;
                        }
                        w->tb[s] = xs;
                        w->tb[s + 1] = x2;
                        w->tb[S + s] = ys;
                        w->tb[S + s + 1] = y2;
                        if (x->limit && rb_stage_mem(x, s, w->tb, 0) > x->limit &&
                            (!x->rc_ok || rb_stage_mem(x, s, w->tb, 1) > x->limit))
                            continue; /* this stage's two chunks are both fixed: exact */
                        double nv = dmax(val, dmax(rb_piece_bound(x, s, xs, x2),
                                                   rb_piece_bound(x, S + s, ys, y2)));
                        if (nv >= cut)
                            continue;
                        nv = dmax(nv, rb_stage_bound(x, s, w->tb));
                        if (nv >= cut)
                            continue;
                        if (!rest) {
                            /* the last stage: the first and last stages' bound for each first-stage
                             * choice that reaches this state; the least of them */
                            double e = INFINITY;
                            const uint64_t *m = &w->ma[(size_t)st * PAIR_LABEL_WORDS];
                            for (int l = 0; l < PAIR_LABELS && e > nv; l++) {
                                if (!(m[l / 64] >> (l % 64) & 1))
                                    continue;
                                if (l == PAIR_LABELS - 1) {
                                    e = nv;
                                    break;
                                }
                                w->tb[0] = 0;
                                w->tb[1] = w->lab_x[l];
                                w->tb[S + 1] = w->lab_y[l];
                                w->tb[S - 1] = xs;
                                w->tb[2 * S - 1] = ys;
                                w->tb[S] = R;
                                w->tb[2 * S] = L;
                                e = fmin(e, dmax(nv, rb_ends_bound(x, w->tb)));
                            }
                            nv = e;
                            if (nv >= cut)
                                continue;
                        }
                        int32_t ni = x2 * (L + 1) + y2;
                        uint64_t *mn = &w->mb[(size_t)ni * PAIR_LABEL_WORDS];
                        if (w->vb[ni] == INFINITY) {
                            w->gb[ni] = INFINITY;
                            w->lb[nb++] = ni;
                            memset(mn, 0, sizeof(uint64_t) * PAIR_LABEL_WORDS);
                        }
                        if (s == 0) {
                            int l = nb - 1 < PAIR_LABELS - 1 ? nb - 1 : PAIR_LABELS - 1;
                            w->lab_x[l] = x2;
                            w->lab_y[l] = y2;
                            mn[l / 64] |= (uint64_t)1 << (l % 64);
                        } else {
                            const uint64_t *m = &w->ma[(size_t)st * PAIR_LABEL_WORDS];
                            for (int q = 0; q < PAIR_LABEL_WORDS; q++)
                                mn[q] |= m[q];
                        }
                        w->gb[ni] = dmin(w->gb[ni], gnew);
                        if (nv < w->vb[ni]) {
                            w->vb[ni] = nv;
                            w->par[(size_t)(s + 1) * NS + (size_t)ni] = st;
                        }
                    }
                }
            }
            double *tv = w->va;
            w->va = w->vb;
            w->vb = tv;
            tv = w->ga;
            w->ga = w->gb;
            w->gb = tv;
            uint64_t *tm = w->ma;
            w->ma = w->mb;
            w->mb = tm;
            int32_t *tl = w->la;
            w->la = w->lb;
            w->lb = tl;
            na = nb;
        }
        if (na == 0)
            continue;
        /* the one final state (R, L) */
        int32_t st = w->la[0];
        double val = w->va[st];
        w->va[st] = INFINITY;
        best = fmin(best, val);
        w->tb[0] = 0;
        w->tb[P] = L;
        for (int s = S; s >= 1; s--) {
            w->tb[s] = st / (L + 1);
            w->tb[S + s] = st % (L + 1);
            st = w->par[(size_t)s * NS + (size_t)st];
        }
        rb_offer(x, w->tb);
    }
    return best;
}

/* For v = 2, stage s's stage bound depends on its two pieces only: [b_s, b_{s+1}) and
 * [b_{S+s}, b_{S+s+1}). So, for each first layer R = b_S of the second round, the least value
 * over all partitions of max_s rb_stage_bound (and of the piece bounds) is a DP over stages whose
 * state after stage s is the pair (b_{s+1}, b_{S+s+1}). States are dropped when their bounds
 * reach a cut T: a stage whose fill, busy time and drain reach it, a state whose later stages
 * must (their average remaining work after the fill up to x2), a stage whose bound does. A pass
 * that keeps no partition proves the minimum at T or above; T starts at the root bound and grows
 * by 1% until a pass keeps one (then its value is the minimum) or T reaches the incumbent. Each
 * R's best partition is offered as an incumbent. Returns the proven lower bound on the optimum,
 * or -1 when the DP does not apply (v != 2, tables too large, out of memory) or ran out of
 * time. */
int rb_pair_dp_applies(const rb_ctx *x)
{
    int64_t ns = (int64_t)(x->L + 1) * (x->L + 1);
    return x->v == 2 && x->sseq && x->fill_ok && ns <= MAX_PAIR_STATES &&
           (int64_t)(x->S + 1) * ns <= MAX_PAIR_TABLE;
}

double rb_pair_dp(rb_ctx *x, double root)
{
    int S = x->S, L = x->L, P = x->P;
    if (!rb_pair_dp_applies(x))
        return -1.0;
    size_t NS = (size_t)(L + 1) * (size_t)(L + 1);
    double res = -1.0;
    rb_pair w = {.va = pp_alloc(sizeof(double) * NS),
                 .vb = pp_alloc(sizeof(double) * NS),
                 .la = pp_alloc(sizeof(int32_t) * NS),
                 .lb = pp_alloc(sizeof(int32_t) * NS),
                 .par = pp_alloc(sizeof(int32_t) * NS * (size_t)(S + 1)),
                 .tb = pp_alloc(sizeof(int) * (size_t)(P + 1)),
                 .room = pp_alloc(sizeof(double) * (size_t)(S + 1) * (size_t)(L + 1)),
                 .ma = pp_alloc(sizeof(uint64_t) * NS * PAIR_LABEL_WORDS),
                 .mb = pp_alloc(sizeof(uint64_t) * NS * PAIR_LABEL_WORDS),
                 .lab_x = pp_alloc(sizeof(int) * PAIR_LABELS),
                 .lab_y = pp_alloc(sizeof(int) * PAIR_LABELS),
                 .ga = pp_alloc(sizeof(double) * NS),
                 .gb = pp_alloc(sizeof(double) * NS),
                 .gx = pp_alloc(sizeof(double) * (size_t)S * (size_t)(L + 1))};
    if (!w.va || !w.vb || !w.la || !w.lb || !w.par || !w.tb || !w.room || !w.ma || !w.mb ||
        !w.lab_x || !w.lab_y || !w.ga || !w.gb || !w.gx)
        goto done;
    for (size_t i = 0; i < NS; i++)
        w.va[i] = w.vb[i] = INFINITY;
    double proven = -1.0; /* every partition's bounds reach this */
    for (double T = fmax(root, 0.5 * cutoff(x)) * 1.02;; T *= 1.02) {
        double m = pair_pass(x, &w, T);
        if (x->aborted) {
            res = proven;
            goto done;
        }
        if (m < INFINITY) {
            /* m mixes a state's least value with any first-stage choice reaching it, so it
             * can lie below the last cut that kept nothing; both are proven */
            res = dmax(fmin(m, cutoff(x)), proven);
            break;
        }
        proven = fmin(T, cutoff(x));
        if (T >= cutoff(x)) {
            res = cutoff(x);
            break;
        }
    }
done:
    pp_free(w.va);
    pp_free(w.vb);
    pp_free(w.la);
    pp_free(w.lb);
    pp_free(w.par);
    pp_free(w.tb);
    pp_free(w.room);
    pp_free(w.ma);
    pp_free(w.mb);
    pp_free(w.lab_x);
    pp_free(w.lab_y);
    pp_free(w.ga);
    pp_free(w.gb);
    pp_free(w.gx);
    return res;
}
