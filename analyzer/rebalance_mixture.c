/* rebalance_mixture.c: the path-mixture (Lagrangian) bound of interleaved schedules: chains of
 * the replay as functions of the boundaries, their best mixture by a double oracle (lag_solve),
 * the incumbents it suggests, and the branch and bound over its partitions (lag_branch). Part of
 * pp_rebalance (rebalance.c); docs/rebalancer.md "The path-mixture bound", "Branching on the
 * mixture". */
#include "rebalance_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The counts of the longest chain of the replay just run (x->fin, x->dur, x->tr), ending at
 * stage s_end's last op and, with a data-parallel all-reduce, that stage's all-reduce; into
 * `coef` (LAG_NC(P) entries). */
static void walk_chain(rb_ctx *x, int s_end, double *coef)
{
    memset(coef, 0, sizeof(double) * LAG_NC(x->P));
    if (x->has_ar) {
        coef[LAG_SEND(x->P)] += x->c->dp_allreduce_us * 1e3;
        for (int p = s_end; p < x->P; p += x->S)
            coef[LAG_PARAM(x->P) + (size_t)p] = 1.0;
    }
    int i = x->last_step[s_end];
    while (i >= 0) {
        const rb_step *t = &x->steps[i];
        int pv = x->sprev[i];
        if (t->kind != K_RECV) {
            if (t->kind >= K_SEND_ACT) { /* a sender's or a receiver's own time */
                coef[LAG_SEND(x->P)] += x->dur[t->kind * x->P + t->piece];
            } else {
                coef[t->kind * x->P + t->piece] += 1.0;
                /* the op's own gap (op_gap_us): the same on every partition */
                coef[LAG_SEND(x->P)] += x->c->op_gap_us * 1e3;
            }
            i = pv;
            continue;
        }
        double a = (t->dep >= 0 ? x->fin[t->dep] : 0.0) + x->tr[t->q];
        double c = pv >= 0 ? x->fin[pv] : 0.0;
        if (a >= c) {
            coef[4 * x->P + t->q] += 1.0;
            i = t->dep;
        } else {
            i = pv;
        }
    }
}

/* Replays the schedule with the durations and transfers in x->dur, x->tr (any nonnegative
 * values: one partition's, or a mixture's averages) and writes the counts of a longest chain to
 * `coef` (LAG_NC(P) entries). Returns the barrier, the chain's length. */
static double replay_chain(rb_ctx *x, double *coef)
{
    for (int s = 0; s < x->S; s++)
        x->clock[s] = 0.0;
    for (int i = 0; i < x->n_steps; i++) {
        const rb_step *t = &x->steps[i];
        double clk = x->clock[t->stage];
        if (t->kind == K_RECV)
            clk = dmax(clk, (t->dep >= 0 ? x->fin[t->dep] : 0.0) + x->tr[t->q]);
        else /* a compute op, a send or a receiver's own time: x->dur holds them all */
            clk += x->dur[t->kind * x->P + t->piece];
        x->fin[i] = clk;
        x->clock[t->stage] = clk;
    }
    /* the stage that reaches the barrier last: after its data-parallel all-reduce, if any */
    int s_end = 0;
    for (int s = 1; s < x->S; s++)
        if (x->clock[s] + x->ar_s[s] > x->clock[s_end] + x->ar_s[s_end])
            s_end = s;
    walk_chain(x, s_end, coef);
    return x->clock[s_end] + x->ar_s[s_end];
}

void rb_chain_of_evaluated(rb_ctx *x, const int *b, double *coef)
{
    int s_end = 0;
    double end = -1.0;
    for (int s = 0; s < x->S; s++) {
        double t = x->clock[s] + (x->has_ar ? rb_stage_ar_ns(x, s, b) : 0.0);
        if (t > end) {
            end = t;
            s_end = s;
        }
    }
    walk_chain(x, s_end, coef);
}

/* Fills x->dur and x->tr with partition b's durations (evaluate's up to rounding: the compute
 * ops' from the layers' prefix sums, as rb_chain_len counts them; a chain is a chain whatever
 * replay found it), x->ar_s with its stages' all-reduces. */
static void fill_durations(rb_ctx *x, const int *b)
{
    double gap = x->c->op_gap_us;
    for (int p = 0; p < x->P; p++) {
        for (int k = 0; k < N_COMPUTE; k++)
            x->dur[k * x->P + p] = (x->pre[k][b[p + 1]] - x->pre[k][b[p]] + gap) * 1e3;
        if (p < x->P - 1)
            x->tr[p] = x->tl[b[p + 1] - 1];
    }
    for (int s = 0; s < x->S; s++)
        x->ar_s[s] = rb_stage_ar_ns(x, s, b);
}

/* ns per byte of a stage's parameters in its all-reduce (0 without one). */
static double ar_per_byte_ns(const rb_ctx *x)
{
    return x->has_ar ? x->c->dp_allreduce_us_per_MB * 1e-3 : 0.0;
}

/* A chain's length on partition b (without the optimizer step). */
double rb_chain_len(const rb_ctx *x, const double *coef, const int *b)
{
    int P = x->P;
    double t = 0.0;
    for (int k = 0; k < N_COMPUTE; k++) {
        const double *pre = x->pre[k];
        const double *ck = coef + (size_t)k * P;
        for (int p = 0; p < P; p++)
            if (ck[p] != 0.0)
                t += ck[p] * (pre[b[p + 1]] - pre[b[p]]) * 1e3;
    }
    for (int q = 0; q + 1 < P; q++)
        if (coef[4 * P + q] != 0.0)
            t += coef[4 * P + q] * x->tl[b[q + 1] - 1];
    double k = ar_per_byte_ns(x);
    for (int p = 0; p < P && k > 0; p++)
        if (coef[LAG_PARAM(P) + (size_t)p] != 0.0)
            t += coef[LAG_PARAM(P) + (size_t)p] * k *
                 (double)(x->pre_param[b[p + 1]] - x->pre_param[b[p]]);
    return t + coef[LAG_SEND(P)];
}

/* Chain i's nonzero counts (in lg->chain): their indices, ascending, in lg->nz, and where each
 * part of them begins in lg->nz_at (the 4 compute ops' counts, the transfers', the send
 * constant's, the parameters'; the last entry, the end). About a third of a chain's counts are
 * nonzero (125 of 384 on bench_rebalance's v = 4 case), and its lengths (a new chain's on every
 * partition, every chain's on a new partition) were 14-17% of the branch and bound's time in
 * `perf`, the mixture's aggregated counts (every round) another few. */
_Static_assert(LAG_NZ_PARTS == N_COMPUTE + 4, "a chain's parts: compute, transfers, send, params");
static void lag_chain_nz(const rb_ctx *x, rb_lag *lg, int i)
{
    int P = x->P, n = 0;
    size_t nc = LAG_NC(P), u = 0;
    const double *coef = &lg->chain[(size_t)i * nc];
    int32_t *nz = &lg->nz[(size_t)i * nc], *at = &lg->nz_at[(size_t)i * LAG_NZ_PARTS];
    for (int part = 0; part < LAG_NZ_PARTS - 1; part++) {
        size_t end = part < N_COMPUTE          ? (size_t)(part + 1) * (size_t)P
                     : part == N_COMPUTE      ? LAG_SEND(P)
                     : part == N_COMPUTE + 1  ? LAG_PARAM(P)
                                              : nc;
        at[part] = n;
        for (; u < end; u++)
            if (coef[u] != 0.0)
                nz[n++] = (int32_t)u;
    }
    at[LAG_NZ_PARTS - 1] = n;
}

/* Chain i's length on partition b: rb_chain_len's sum over its nonzero counts only, term for
 * term and in the same order (the same double): the compute ops', the transfers', the
 * parameters' (with an all-reduce), then the send constant. */
static double lag_chain_len(const rb_ctx *x, const rb_lag *lg, int i, const int *b)
{
    int P = x->P;
    size_t nc = LAG_NC(P);
    const double *coef = &lg->chain[(size_t)i * nc];
    const int32_t *nz = &lg->nz[(size_t)i * nc], *at = &lg->nz_at[(size_t)i * LAG_NZ_PARTS];
    double t = 0.0;
    for (int k = 0; k < N_COMPUTE; k++) {
        const double *pre = x->pre[k];
        int base = k * P;
        for (int e = at[k]; e < at[k + 1]; e++) {
            int p = nz[e] - base;
            t += coef[nz[e]] * (pre[b[p + 1]] - pre[b[p]]) * 1e3;
        }
    }
    for (int e = at[N_COMPUTE]; e < at[N_COMPUTE + 1]; e++) {
        int q = nz[e] - N_COMPUTE * P;
        t += coef[nz[e]] * x->tl[b[q + 1] - 1];
    }
    double k = ar_per_byte_ns(x);
    for (int e = at[N_COMPUTE + 2]; k > 0 && e < at[N_COMPUTE + 3]; e++) {
        int p = nz[e] - (int)LAG_PARAM(P);
        t += coef[nz[e]] * k * (double)(x->pre_param[b[p + 1]] - x->pre_param[b[p]]);
    }
    return t + coef[LAG_SEND(P)];
}

/* agg += w times chain i, over its nonzero counts (adding w x 0 changes no sum). */
static inline void lag_chain_add(const rb_ctx *x, const rb_lag *lg, int i, double w, double *agg)
{
    size_t nc = LAG_NC(x->P);
    const double *coef = &lg->chain[(size_t)i * nc];
    const int32_t *nz = &lg->nz[(size_t)i * nc];
    for (int e = 0, end = lg->nz_at[(size_t)i * LAG_NZ_PARTS + LAG_NZ_PARTS - 1]; e < end; e++)
        agg[nz[e]] += w * coef[nz[e]];
}

/* The per-boundary cost of a mixture of chains with aggregated counts `agg` (weights summing to
 * 1): boundary k (1 .. P-1) at layer pos costs
 *   H_k(pos) = sum_t (agg[t][k-1] - agg[t][k]) W_t(pos) + agg_msg[k-1] t(pos),
 * and the rest is the constant sum_t agg[t][P-1] W_t(L) plus the sends' time. */
double rb_lag_h(const rb_ctx *x, const double *agg, int k, int pos)
{
    int P = x->P;
    double h = 0.0;
    for (int t = 0; t < N_COMPUTE; t++) {
        double a = agg[(size_t)t * P + k - 1] - agg[(size_t)t * P + k];
        if (a != 0.0)
            h += a * x->pre[t][pos] * 1e3;
    }
    double m = agg[4 * (size_t)P + k - 1];
    if (m != 0.0)
        h += m * x->tl[pos - 1];
    double a = agg[LAG_PARAM(P) + (size_t)k - 1] - agg[LAG_PARAM(P) + (size_t)k];
    if (a != 0.0)
        h += a * ar_per_byte_ns(x) * (double)x->pre_param[pos];
    return h;
}

static double lag_const(const rb_ctx *x, const double *agg)
{
    double c = agg[LAG_SEND(x->P)];
    for (int t = 0; t < N_COMPUTE; t++)
        c += agg[(size_t)t * x->P + x->P - 1] * x->pre[t][x->L] * 1e3;
    c += agg[LAG_PARAM(x->P) + (size_t)x->P - 1] * ar_per_byte_ns(x) * (double)x->pre_param[x->L];
    return c;
}

/* Where boundary k may lie: k .. L - (P - k), within lg's box if it has one. */
static void lag_range(const rb_ctx *x, const rb_lag *lg, int k, int *lo, int *hi)
{
    *lo = k;
    *hi = x->L - (x->P - k);
    if (lg->lo) {
        *lo = *lo > lg->lo[k] ? *lo : lg->lo[k];
        *hi = *hi < lg->hi[k] ? *hi : lg->hi[k];
    }
}

/* lg->emax for lg->cut: for each piece k (but the last) and start pos >= k, the first end e
 * whose piece [pos, e) has a bound at the cut or above (a longer piece's is no smaller). It
 * changes only with the incumbent, and lag_table, run every round, then reads a window of a
 * few ints per piece and start instead of the piece table's rows (P (L + 1)^2 doubles, 8.5 MB
 * at 128 layers and P = 64: two thirds of lag_table's time were its loads, in `perf`). */
static void lag_emax(const rb_ctx *x, rb_lag *lg)
{
    int L = x->L, P = x->P;
    for (int k = 0; k + 1 < P; k++)
        for (int pos = k; pos <= L; pos++) {
            const double *pb = rb_piece_row(x, k, pos);
            int e = pos + 1;
            while (e <= L && (pb ? pb[e] : rb_piece_bound(x, k, pos, e)) < lg->cut)
                e++;
            lg->emax[(size_t)k * (L + 1) + pos] = e;
        }
    lg->emax_cut = lg->cut;
}

/* The mixture's cost to go: lag->G[k][pos] = the least sum of H_j (with the constraints'
 * multipliers, lg->lin) over boundaries j = k+1 .. P-1 when boundary k is at pos (b_P = L),
 * over every partition in lg's box and, with a finite lg->cut, without the pieces whose own
 * bound reaches it (memory not considered: a relaxation, still a lower bound); lag->arg its
 * minimiser of b_{k+1}. */
static void lag_table(const rb_ctx *x, rb_lag *lg)
{
    int L = x->L, P = x->P, cut = isfinite(lg->cut);
#define LG(k, p) lg->G[(size_t)(k) * (L + 1) + (p)]
#define LA(k, p) lg->arg[(size_t)(k) * (L + 1) + (p)]
    for (int pos = 0; pos <= L; pos++) {
        int ok = pos < L && (!cut || (pos >= P - 1 && rb_piece_bound(x, P - 1, pos, L) < lg->cut));
        LG(P - 1, pos) = ok ? 0.0 : INFINITY;
        LA(P - 1, pos) = L;
    }
    double *next = lg->next;
    if (cut && !(lg->emax_cut == lg->cut))
        lag_emax(x, lg);
    for (int k = P - 2; k >= 0; k--) {
        int elo, ehi;
        lag_range(x, lg, k + 1, &elo, &ehi);
        /* boundary k + 1 at e costs the same whatever the piece before it: once per e */
        for (int e = elo; e <= ehi; e++)
            next[e] = rb_lag_h(x, lg->agg, k + 1, e) + lg->lin[k + 1] * e + LG(k + 1, e);
        double m = INFINITY;
        int am = -1;
        /* without the cut: a suffix minimum over e > pos; with it, e runs from pos + 1 until
         * the piece [pos, e) reaches the cut (a longer piece's bound is no smaller) */
        for (int pos = L; pos >= 0; pos--) {
            int stop = L + 1; /* with the cut: lag_emax's end of the piece's window */
            if (cut) {
                m = INFINITY;
                am = -1;
                stop = pos >= k ? lg->emax[(size_t)k * (L + 1) + pos] : 0;
            }
            for (int e = cut ? (elo > pos + 1 ? elo : pos + 1) : pos + 1;
                 e <= ehi && e >= elo && e < stop; e++) {
                double v = next[e];
                if (v < m) {
                    m = v;
                    am = e;
                }
                if (!cut)
                    break;
            }
            LG(k, pos) = m;
            LA(k, pos) = am;
        }
    }
    lg->c0 = lag_const(x, lg->agg) + lg->lin0 + lg->lin[P] * L;
#undef LG
#undef LA
}

/* The bound of a node whose boundaries b_0 .. b_k are fixed, under the mixture in lg. */
double rb_lag_node_bound(const rb_ctx *x, const rb_lag *lg, int k, int pos, double fixed_h)
{
    double g = lg->G[(size_t)k * (x->L + 1) + pos];
    return (lg->c0 + fixed_h + g + x->opt_ns) * LAG_SAFETY;
}

/* The partition that attains lg->G[0] (lag_table's minimiser) into b[P + 1]. */
static void lag_argmin(const rb_ctx *x, const rb_lag *lg, int *b)
{
    b[0] = 0;
    for (int k = 0; k < x->P - 1; k++)
        b[k + 1] = lg->arg[(size_t)k * (x->L + 1) + b[k]];
    b[x->P] = x->L;
}

/* Constraint c = (stage, sign, count) on partition b: sign * (layers of the stage - count);
 * the partition meets it when this is <= 0. */
static double lag_cons_value(const rb_ctx *x, const int *c, const int *b)
{
    int n = 0;
    for (int j = c[0]; j < x->P; j += x->S)
        n += b[j + 1] - b[j];
    return (double)(c[1] * (n - c[2]));
}

/* The restricted game, by the simplex method, kept from round to round (rb_lag's tw_* state).
 * The game max over mixtures u of rows (chains), min over columns j (partitions), of
 * sum_i u_i K[i][j], with K the chains' lengths shifted and scaled to positive entries, the
 * columns' mixture y also held to sum_j y_j Q[r][j] <= 0 (the stage-count constraints), is the
 * linear program
 *   max sum_j w_j  subject to  sum_j Q[r][j] w_j <= 0 (each r),  sum_j K[i][j] w_j <= 1 (each
 *   i),  w >= 0
 * (w = 0 is feasible, the K rows keep it bounded), whose optimum is 1 / value; y = w / sum w,
 * the K rows' duals normalised to sum 1 are the chains' mixture, and the Q rows' duals on the
 * same scale their multipliers. The tableau (lg->tab, TW_COLS a row) holds the Q rows first,
 * then one row per chain, then the objective; a column per partition (w_j at j), then a slack
 * per row (at TW_SLACK(r)) and the right-hand side. A round adds a chain or two and a partition:
 * a new row is written in the current basis (its slack basic, negative where the last solution
 * breaks it) and put right by the dual simplex method, which keeps the reduced costs; a new
 * column is priced through the slacks' columns (the basis inverse) and entered by the primal
 * method. The tableau is built afresh when the tables were compacted, a node starts, a length
 * falls outside the scale fixed at the last build, every TW_REBUILD rounds (rounding), or when
 * the warm solve does not end optimal. */
#define TW_COLS (2 * LAG_MAX + LAG_QMAX + 1)
#define TW_RHS (2 * LAG_MAX + LAG_QMAX)
#define TW_OBJ (LAG_MAX + LAG_QMAX)
#define TW_SLACK(r) (LAG_MAX + (r))
#define TW_REBUILD 48
#define TW_PIV 1e-9 /* the least pivot: smaller ones grow the tableau's rounding */
#define TW_CHECK 1e-7 /* a warm solution that breaks a row or a dual by more is solved again */
#define TB(r, c) lg->tab[(size_t)(r) * TW_COLS + (size_t)(c)]

/* K[i][j] on the scale of the last build; < 0.001 when the length lies outside it */
static inline double tw_k(const rb_lag *lg, int i, int j)
{
    return (lg->len[(size_t)i * LAG_MAX + j] - lg->tw_base) * lg->tw_sc + 0.05;
}

/* the entry of row r (Q rows first, then the chains) in column j */
static inline double tw_entry(const rb_ctx *x, const rb_lag *lg, int r, int j)
{
    return r < lg->q ? lag_cons_value(x, &lg->cs[3 * r], &lg->part[(size_t)j * ((size_t)x->P + 1)])
                     : tw_k(lg, r - lg->q, j);
}

/* Row tr less f times row pr over the columns in use (n partitions, R slacks, the right-hand
 * side): the pivot's and a new row's elimination. Two rows apart, said so (restrict): GCC then
 * runs the loops two doubles a step, where, with both rows read through lg->tab, it ran them one
 * at a time (each entry the same double; 0.9% fewer instructions on the deterministic v = 4
 * test, its time within the VM's noise). */
static inline void tw_row_sub(double *restrict tr, const double *restrict pr, double f, int n,
                              int R)
{
    for (int j = 0; j < n; j++)
        tr[j] -= f * pr[j];
    for (int j = 0; j < R; j++)
        tr[TW_SLACK(j)] -= f * pr[TW_SLACK(j)];
    tr[TW_RHS] -= f * pr[TW_RHS];
}

/* Pivots the tableau of R rows and n columns on (r, e). */
static void tw_pivot(rb_lag *lg, int R, int n, int r, int e)
{
    double *pr = &TB(r, 0);
    double pv = pr[e];
    for (int j = 0; j < n; j++)
        pr[j] /= pv;
    for (int j = 0; j < R; j++)
        pr[TW_SLACK(j)] /= pv;
    pr[TW_RHS] /= pv;
    for (int i = 0; i <= R; i++) {
        int row = i == R ? TW_OBJ : i;
        double f = TB(row, e);
        if (row == r || f == 0.0)
            continue;
        tw_row_sub(&TB(row, 0), pr, f, n, R);
    }
    lg->basis[r] = e;
}

/* Primal simplex from a feasible basis; 1 when optimal, 0 when the pivots ran out. */
static int tw_primal(rb_lag *lg, int R, int n)
{
    for (int it = 0, limit = 50 * (R + n) + 100; it < limit; it++) {
        int bland = it > 10 * (R + n), e = -1;
        double most = -1e-11;
        for (int c = 0; c < n + R; c++) {
            int col = c < n ? c : TW_SLACK(c - n);
            if (TB(TW_OBJ, col) < most) {
                e = col;
                if (bland)
                    break;
                most = TB(TW_OBJ, col);
            }
        }
        if (e < 0)
            return 1;
        int r = -1;
        double ratio = INFINITY;
        for (int i = 0; i < R; i++)
            if (TB(i, e) > TW_PIV) {
                double qt = TB(i, TW_RHS) / TB(i, e);
                if (qt < ratio || (qt == ratio && r >= 0 && lg->basis[i] < lg->basis[r])) {
                    ratio = qt;
                    r = i;
                }
            }
        if (r < 0)
            return 0; /* unbounded: not while every column meets a K row */
        tw_pivot(lg, R, n, r, e);
    }
    return 0;
}

/* Dual simplex from a basis whose reduced costs are all >= 0; 1 when primal feasible (then
 * optimal), 0 otherwise. */
static int tw_dual(rb_lag *lg, int R, int n)
{
    for (int it = 0, limit = 50 * (R + n) + 100; it < limit; it++) {
        int r = -1;
        double least = -1e-12;
        for (int i = 0; i < R; i++)
            if (TB(i, TW_RHS) < least) {
                least = TB(i, TW_RHS);
                r = i;
            }
        if (r < 0)
            return 1;
        int e = -1;
        double ratio = INFINITY;
        for (int c = 0; c < n + R; c++) {
            int col = c < n ? c : TW_SLACK(c - n);
            if (TB(r, col) < -TW_PIV) {
                double qt = fmax(TB(TW_OBJ, col), 0.0) / -TB(r, col);
                if (qt < ratio || (qt == ratio && TB(r, col) < TB(r, e))) {
                    ratio = qt;
                    e = col;
                }
            }
        }
        if (e < 0)
            return 0; /* the row cannot be met: not while w = 0 meets every row */
        tw_pivot(lg, R, n, r, e);
    }
    return 0;
}

/* Builds the tableau afresh (slack basis) with the scale of the current lengths. */
static void tw_build(rb_lag *lg, const rb_ctx *x)
{
    int m = lg->m, n = lg->n, R = lg->q + m;
    double kmin = INFINITY, kmax = 0.0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double v = lg->len[(size_t)i * LAG_MAX + j];
            kmin = fmin(kmin, v);
            kmax = fmax(kmax, v);
        }
    lg->tw_base = kmin;
    lg->tw_sc = kmax > kmin ? 1.0 / (kmax - kmin) : kmax > 0 ? 1.0 / kmax : 1.0;
    for (int r = 0; r <= R; r++) {
        int row = r == R ? TW_OBJ : r;
        for (int j = 0; j < n; j++)
            TB(row, j) = r == R ? -1.0 : tw_entry(x, lg, r, j);
        for (int j = 0; j < R; j++)
            TB(row, TW_SLACK(j)) = r == j ? 1.0 : 0.0;
        TB(row, TW_RHS) = r < lg->q || r == R ? 0.0 : 1.0;
        if (r < R)
            lg->basis[r] = TW_SLACK(r);
    }
    lg->tw_m = m;
    lg->tw_n = n;
    lg->tw_rounds = 0;
    lg->tw_ok = 1;
}

/* Writes the chains tw_m .. m - 1 as rows in the current basis; 0 when one falls outside the
 * scale. */
static int tw_add_rows(rb_lag *lg)
{
    int n = lg->tw_n;
    for (int i = lg->tw_m; i < lg->m; i++) {
        int r = lg->q + i, R = r + 1; /* rows 0 .. r - 1 exist */
        for (int j = 0; j < n; j++)
            if (!(tw_k(lg, i, j) >= 1e-3))
                return 0;
        for (int i2 = 0; i2 <= R; i2++) /* the new slack's column: 0 but in its own row */
            TB(i2 == R ? TW_OBJ : i2, TW_SLACK(r)) = i2 == r ? 1.0 : 0.0;
        for (int j = 0; j < n; j++)
            TB(r, j) = tw_k(lg, i, j);
        for (int j = 0; j < r; j++)
            TB(r, TW_SLACK(j)) = 0.0;
        TB(r, TW_RHS) = 1.0;
        for (int i2 = 0; i2 < r; i2++) { /* the basic columns out of the new row */
            int bcol = lg->basis[i2];
            double f = bcol < LAG_MAX ? TB(r, bcol) : 0.0;
            if (f != 0.0)
                tw_row_sub(&TB(r, 0), &TB(i2, 0), f, n, r);
        }
        lg->basis[r] = TW_SLACK(r);
        lg->tw_m = i + 1;
    }
    return 1;
}

/* Prices the partitions tw_n .. n - 1 as columns through the basis inverse; 0 when one falls
 * outside the scale. */
static int tw_add_cols(rb_lag *lg, const rb_ctx *x, double *a)
{
    int R = lg->q + lg->m;
    for (int j = lg->tw_n; j < lg->n; j++) {
        for (int r = 0; r < R; r++) {
            a[r] = tw_entry(x, lg, r, j);
            if (r >= lg->q && !(a[r] >= 1e-3))
                return 0;
        }
        for (int i = 0; i <= R; i++) {
            int row = i == R ? TW_OBJ : i;
            double v = i == R ? -1.0 : 0.0;
            for (int r = 0; r < R; r++)
                v += TB(row, TW_SLACK(r)) * a[r];
            TB(row, j) = v;
        }
        lg->tw_n = j + 1;
    }
    return 1;
}

/* Whether the tableau's solution is one: its columns' values meet every row, its rows' duals
 * meet every column, and the two objectives agree, each within TW_CHECK (rounding grows with
 * the warm rounds' pivots). One pass over the entries, O(rows x columns), against a solve's
 * O(rows^2 x columns). */
static int tw_verify(rb_lag *lg, const rb_ctx *x)
{
    int n = lg->n, R = lg->q + lg->m;
    /* scratch: the columns' values, then each column's sum of the rows' duals */
    double *w = lg->tw_a, *dual = lg->tw_a + LAG_MAX, sw = 0.0, sd = 0.0;
    for (int j = 0; j < n; j++)
        w[j] = dual[j] = 0.0;
    for (int i = 0; i < R; i++)
        if (lg->basis[i] < LAG_MAX) {
            if (!(TB(i, TW_RHS) >= -TW_CHECK))
                return 0;
            w[lg->basis[i]] = TB(i, TW_RHS);
        }
    for (int r = 0; r < R; r++) {
        double v = 0.0, d = TB(TW_OBJ, TW_SLACK(r));
        if (!(d >= -TW_CHECK))
            return 0;
        for (int j = 0; j < n; j++) {
            double a = tw_entry(x, lg, r, j);
            v += a * w[j];
            dual[j] += d * a;
        }
        if (!(v <= (r < lg->q ? 0.0 : 1.0) + TW_CHECK))
            return 0;
        sd += r < lg->q ? 0.0 : d;
    }
    for (int j = 0; j < n; j++) {
        if (!(dual[j] >= 1.0 - TW_CHECK))
            return 0;
        sw += w[j];
    }
    return fabs(sw - sd) <= TW_CHECK * fmax(sw, 1.0);
}

/* Solves the restricted game of lg's chains and partitions (lg->m, lg->n, lg->q constraint
 * rows). Writes lg->lam[m + q] (the chains' mixture, then the constraints' multipliers on the
 * chains' scale, lg->tw_sc) and lg->y[n]; returns 0, or -1 when the pivots ran out (then lam is
 * uniform over the chains, 0 on the constraints, and y uniform), -2 when no mixture of the
 * columns meets the constraints (w = 0 is the only solution). */
static int solve_game(rb_lag *lg, const rb_ctx *x)
{
    int m = lg->m, n = lg->n, q = lg->q, R = q + m;
    int ok = 0;
    if (lg->tw_ok && lg->tw_rounds < TW_REBUILD && tw_add_rows(lg) &&
        tw_dual(lg, q + lg->tw_m, lg->tw_n) && tw_add_cols(lg, x, lg->tw_a) &&
        tw_primal(lg, R, n) && tw_verify(lg, x)) {
        ok = 1;
        lg->tw_rounds++;
    } else {
        tw_build(lg, x);
        ok = tw_primal(lg, R, n);
    }
    if (!ok)
        lg->tw_ok = 0;
    double su = 0.0, sw = 0.0;
    if (ok) {
        for (int j = 0; j < n; j++)
            lg->y[j] = 0.0;
        for (int i = 0; i < R; i++)
            if (lg->basis[i] < LAG_MAX)
                lg->y[lg->basis[i]] = fmax(TB(i, TW_RHS), 0.0);
        for (int i = 0; i < m; i++)
            su += lg->lam[i] = fmax(TB(TW_OBJ, TW_SLACK(q + i)), 0.0);
        for (int r = 0; r < q; r++)
            lg->lam[m + r] = fmax(TB(TW_OBJ, TW_SLACK(r)), 0.0);
        for (int j = 0; j < n; j++)
            sw += lg->y[j];
    }
    if (!ok || !(su > 0) || !(sw > 0)) {
        for (int i = 0; i < R; i++)
            lg->lam[i] = i < m ? 1.0 / m : 0.0;
        for (int j = 0; j < n; j++)
            lg->y[j] = 1.0 / n;
        return ok && !(sw > 0) && q > 0 ? -2 : -1;
    }
    for (int i = 0; i < R; i++)
        lg->lam[i] /= su;
    for (int j = 0; j < n; j++)
        lg->y[j] /= sw;
    return 0;
}
#undef TB

/* Whether partition b lies in lg's box (always, without one). */
static int lag_in_box(const rb_ctx *x, const rb_lag *lg, const int *b)
{
    if (lg->lo)
        for (int k = 1; k < x->P; k++)
            if (b[k] < lg->lo[k] || b[k] > lg->hi[k])
                return 0;
    return 1;
}

/* Adds partition b as a column (when new, in the box and there is room); returns its index or
 * -1. */
static int lag_add_part(rb_ctx *x, rb_lag *lg, const int *b)
{
    size_t nb = (size_t)x->P + 1;
    if (!lag_in_box(x, lg, b))
        return -1;
    for (int j = 0; j < lg->n; j++)
        if (!memcmp(&lg->part[(size_t)j * nb], b, sizeof(int) * nb))
            return -1;
    if (lg->n >= LAG_MAX)
        return -1;
    int j = lg->n++;
    memcpy(&lg->part[(size_t)j * nb], b, sizeof(int) * nb);
    for (int i = 0; i < lg->m; i++)
        lg->len[(size_t)i * LAG_MAX + j] = lag_chain_len(x, lg, i, b);
    return j;
}

/* Adds the chain in lg->coef as a row (when new and there is room); returns its index or -1. */
static int lag_add_chain(rb_ctx *x, rb_lag *lg)
{
    size_t nc = LAG_NC(x->P);
    for (int i = 0; i < lg->m; i++)
        if (!memcmp(&lg->chain[(size_t)i * nc], lg->coef, sizeof(double) * nc))
            return -1;
    if (lg->m >= LAG_MAX)
        return -1;
    int i = lg->m++;
    memcpy(&lg->chain[(size_t)i * nc], lg->coef, sizeof(double) * nc);
    lag_chain_nz(x, lg, i);
    for (int j = 0; j < lg->n; j++)
        lg->len[(size_t)i * LAG_MAX + j] =
            lag_chain_len(x, lg, i, &lg->part[(size_t)j * ((size_t)x->P + 1)]);
    return i;
}

/* A partition's own critical chain as a row. */
static void lag_add_part_chain(rb_ctx *x, rb_lag *lg, const int *b)
{
    fill_durations(x, b);
    replay_chain(x, lg->coef);
    lag_add_chain(x, lg);
}

/* Drops the chains and partitions that the last restricted game left without weight, when the
 * tables are nearly full (the game's solution only needs its support). */
static void lag_compact(rb_ctx *x, rb_lag *lg)
{
    size_t nc = LAG_NC(x->P), nb = (size_t)x->P + 1;
    int *ri = lg->basis; /* scratch: the kept rows' old indices, then the kept columns' */
    lg->tw_ok = 0;       /* the tableau is built again */
    int m2 = 0, n2 = 0;
    for (int i = 0; i < lg->m; i++)
        if (lg->lam[i] > 0)
            ri[m2++] = i;
    for (int i = 0; i < m2; i++) {
        memmove(&lg->chain[(size_t)i * nc], &lg->chain[(size_t)ri[i] * nc], sizeof(double) * nc);
        memmove(&lg->nz[(size_t)i * nc], &lg->nz[(size_t)ri[i] * nc], sizeof(int32_t) * nc);
        memmove(&lg->nz_at[(size_t)i * LAG_NZ_PARTS], &lg->nz_at[(size_t)ri[i] * LAG_NZ_PARTS],
                sizeof(int32_t) * LAG_NZ_PARTS);
        memmove(&lg->len[(size_t)i * LAG_MAX], &lg->len[(size_t)ri[i] * LAG_MAX],
                sizeof(double) * (size_t)lg->n);
        lg->lam[i] = lg->lam[ri[i]];
    }
    for (int j = 0; j < lg->n; j++)
        if (lg->y[j] > 0)
            ri[n2++] = j;
    for (int j = 0; j < n2; j++) {
        memmove(&lg->part[(size_t)j * nb], &lg->part[(size_t)ri[j] * nb], sizeof(int) * nb);
        for (int i = 0; i < m2; i++)
            lg->len[(size_t)i * LAG_MAX + j] = lg->len[(size_t)i * LAG_MAX + ri[j]];
        lg->y[j] = lg->y[ri[j]];
    }
    lg->m = m2;
    lg->n = n2;
}

/* The double oracle on the game "the search picks a partition, the adversary a chain, the step
 * is at least the chain's length": the rows are chains, the columns partitions, both sets grown
 * by best responses. Each round solves the restricted game (solve_game), then
 *  - the partition player's best response to the chain mixture over ALL partitions is the
 *    boundary DP of lag_table, and its value a proven lower bound on every partition's step
 *    (a weighted average of chains, each at most the step); the partition is also simulated as
 *    an incumbent;
 *  - the chain player's best response to the partition mixture is the longest chain of the
 *    replay with the mixture's average durations (lengths are linear in them).
 * Keeps the best bound and its mixture in lg->best_agg. Stops when the two values meet, nothing
 * new comes, or at `deadline` (pp_now_ns). */
void rb_lag_solve(rb_ctx *x, rb_lag *lg, uint64_t deadline, int rounds)
{
    int P = x->P;
    size_t nc = LAG_NC(P), nb = (size_t)P + 1;
    lg->tw_ok = 0; /* the constraint rows may have changed */
    if (isfinite(x->best_step)) {
        lag_add_part(x, lg, x->best);
        lag_add_part_chain(x, lg, x->best);
    }
    pp_partition even;
    if (pp_partition_even(x->L, x->S, x->v, &even) == PP_OK) {
        lag_add_part(x, lg, even.bounds);
        lag_add_part_chain(x, lg, even.bounds);
        pp_partition_free(&even);
    }
    if (lg->n == 0 && lg->m > 0) {
        /* a box that holds neither: the DP's minimiser under the chains' plain average */
        memset(lg->agg, 0, sizeof(double) * nc);
        for (int i = 0; i < lg->m; i++)
            for (size_t q = 0; q < nc; q++)
                lg->agg[q] += lg->chain[(size_t)i * nc + q] / lg->m;
        lag_table(x, lg);
        if (!isfinite(lg->G[0])) {
            lg->bound = INFINITY; /* the box holds no partition */
            return;
        }
        lag_argmin(x, lg, x->bounds);
        if (lag_add_part(x, lg, x->bounds) >= 0)
            lag_add_part_chain(x, lg, x->bounds);
    }
    int have_agg = 0;
    lg->upper = INFINITY;
    for (int r = 0; r < lg->q; r++) {
        lg->mu[r] = 0.0;
        lg->viol[r] = 0;
    }
    for (int it = 0; it < rounds && lg->m > 0 && lg->n > 0; it++) {
        if (deadline && pp_now_ns() > deadline)
            break;
        int m = lg->m, n = lg->n;
        int infeasible = solve_game(lg, x) == -2;
        double sc = lg->tw_sc;
        if (!infeasible || !have_agg) {
            memset(lg->agg, 0, sizeof(double) * nc);
            for (int i = 0; i < m; i++)
                if (lg->lam[i] != 0.0)
                    lag_chain_add(x, lg, i, lg->lam[i], lg->agg);
            have_agg = 1;
        }
        /* the constraints' multipliers: the game's duals, back from its scale to ns per layer;
         * when no mixture of the columns meets the constraints yet, the chains' last mixture
         * stays and each multiplier doubles while the DP's answer breaks its constraint (any
         * multipliers give a valid bound; these steer the DP to partitions that meet them) */
        for (int r = 0; r < lg->q; r++)
            if (!infeasible)
                lg->mu[r] = lg->lam[m + r] / sc;
            else if (lg->viol[r])
                lg->mu[r] = lg->mu[r] > 0 ? 2 * lg->mu[r] : 1.0 / sc / x->L;
        memset(lg->lin, 0, sizeof(double) * nb);
        lg->lin0 = 0.0;
        for (int r = 0; r < lg->q; r++) {
            double mu = lg->mu[r];
            const int *c = &lg->cs[3 * r];
            if (!(mu > 0))
                continue;
            for (int j = c[0]; j < P; j += x->S) {
                lg->lin[j + 1] += mu * c[1];
                lg->lin[j] -= mu * c[1];
            }
            lg->lin0 -= mu * c[1] * c[2];
        }
        lag_table(x, lg);
        if (!isfinite(lg->G[0])) {
            lg->bound = INFINITY; /* the box and the cut leave no partition */
            return;
        }
        double lb = (lg->c0 + lg->G[0] + x->opt_ns) * LAG_SAFETY;
        if (lg->m > lg->cap - 4 || lg->n > lg->cap - 4)
            lag_compact(x, lg);
        if (lb > lg->bound) {
            lg->bound = lb;
            memcpy(lg->best_agg, lg->agg, sizeof(double) * nc);
        }
        /* the partition player's best response */
        n = lg->n; /* the mixture's columns, after lag_compact: y[0 .. n-1] */
        int *b = x->bounds;
        lag_argmin(x, lg, b);
        rb_offer(x, b);
        int added = lag_add_part(x, lg, b) >= 0;
        if (added)
            lag_add_part_chain(x, lg, b);
        for (int r = 0; r < lg->q; r++)
            lg->viol[r] = lag_cons_value(x, &lg->cs[3 * r], b) > 0;
        if (infeasible)
            continue; /* the partitions' mixture means nothing yet */
        /* the chain player's best response to the mixture of partitions */
        for (size_t q = 0; q < (size_t)(N_COMPUTE * P); q++)
            lg->mdur[q] = 0.0;
        for (int q = 0; q < P; q++)
            lg->mtr[q] = 0.0;
        for (int q = 0; q < x->S; q++)
            lg->mar[q] = 0.0;
        for (int j = 0; j < n; j++) {
            if (lg->y[j] <= 0)
                continue;
            fill_durations(x, &lg->part[(size_t)j * nb]);
            for (size_t q = 0; q < (size_t)(N_COMPUTE * P); q++)
                lg->mdur[q] += lg->y[j] * x->dur[q];
            for (int q = 0; q + 1 < P; q++)
                lg->mtr[q] += lg->y[j] * x->tr[q];
            for (int q = 0; q < x->S; q++) /* linear in the parameters: the average's */
                lg->mar[q] += lg->y[j] * x->ar_s[q];
        }
        memcpy(x->dur, lg->mdur, sizeof(double) * (size_t)(N_COMPUTE * P));
        memcpy(x->tr, lg->mtr, sizeof(double) * (size_t)P);
        memcpy(x->ar_s, lg->mar, sizeof(double) * (size_t)x->S);
        double ub = replay_chain(x, lg->coef) + x->opt_ns;
        added |= lag_add_chain(x, lg) >= 0;
        lg->upper = fmin(lg->upper, ub);
        if (!added || lg->upper - lg->bound <= lg->tol * lg->upper || lg->bound >= lg->enough)
            break;
    }
    if (lg->q == 0 && !lg->lo) { /* the root's mixture, for the search's node bound */
        memcpy(lg->agg, lg->best_agg, sizeof(double) * nc);
        lag_table(x, lg);
    }
}

void rb_lag_free(rb_lag *lg)
{
    if (!lg)
        return;
    pp_free(lg->chain);
    pp_free(lg->emax);
    pp_free(lg->nz);
    pp_free(lg->nz_at);
    pp_free(lg->part);
    pp_free(lg->len);
    pp_free(lg->tw_a);
    pp_free(lg->tab);
    pp_free(lg->basis);
    pp_free(lg->lam);
    pp_free(lg->lin);
    pp_free(lg->mu);
    pp_free(lg->viol);
    pp_free(lg->y);
    pp_free(lg->agg);
    pp_free(lg->best_agg);
    pp_free(lg->coef);
    pp_free(lg->mdur);
    pp_free(lg->mtr);
    pp_free(lg->mar);
    pp_free(lg->G);
    pp_free(lg->arg);
    pp_free(lg->next);
    pp_free(lg);
}

rb_lag *rb_lag_new(const rb_ctx *x)
{
    rb_lag *lg = pp_alloc(sizeof *lg);
    if (!lg)
        return NULL;
    memset(lg, 0, sizeof *lg);
    size_t nc = LAG_NC(x->P), LM = LAG_MAX, QM = LAG_QMAX;
    size_t tw = (LM + QM + 1) * (2 * LM + QM + 1);
    size_t gt = (size_t)x->P * ((size_t)x->L + 1);
    lg->chain = pp_alloc(sizeof(double) * LM * nc);
    lg->emax = pp_alloc(sizeof(int32_t) * (size_t)x->P * ((size_t)x->L + 1));
    lg->emax_cut = NAN;
    lg->nz = pp_alloc(sizeof(int32_t) * LM * nc);
    lg->nz_at = pp_alloc(sizeof(int32_t) * LM * LAG_NZ_PARTS);
    lg->part = pp_alloc(sizeof(int) * LM * ((size_t)x->P + 1));
    lg->len = pp_alloc(sizeof(double) * LM * LM);
    lg->tw_a = pp_alloc(sizeof(double) * 2 * LM);
    lg->tab = pp_alloc(sizeof(double) * tw);
    lg->basis = pp_alloc(sizeof(int) * (LM + QM));
    lg->lam = pp_alloc(sizeof(double) * (LM + QM));
    lg->mu = pp_alloc(sizeof(double) * QM);
    lg->viol = pp_alloc(QM);
    lg->lin = pp_alloc(sizeof(double) * ((size_t)x->P + 1));
    lg->y = pp_alloc(sizeof(double) * LM);
    lg->agg = pp_alloc(sizeof(double) * nc);
    lg->best_agg = pp_alloc(sizeof(double) * nc);
    lg->coef = pp_alloc(sizeof(double) * nc);
    lg->mdur = pp_alloc(sizeof(double) * N_COMPUTE * (size_t)x->P);
    lg->mtr = pp_alloc(sizeof(double) * (size_t)x->P);
    lg->mar = pp_alloc(sizeof(double) * (size_t)x->S);
    lg->G = pp_alloc(sizeof(double) * gt);
    lg->arg = pp_alloc(sizeof(int) * gt);
    lg->next = pp_alloc(sizeof(double) * ((size_t)x->L + 1));
    if (!lg->chain || !lg->emax || !lg->nz || !lg->nz_at || !lg->part || !lg->len || !lg->tw_a || !lg->tab || !lg->basis || !lg->lam ||
        !lg->y || !lg->agg || !lg->best_agg || !lg->coef || !lg->mdur || !lg->mtr || !lg->mar ||
        !lg->G || !lg->arg || !lg->next || !lg->lin || !lg->mu || !lg->viol) {
        rb_lag_free(lg);
        return NULL;
    }
    memset(lg->agg, 0, sizeof(double) * nc);
    memset(lg->best_agg, 0, sizeof(double) * nc);
    lg->cap = LAG_MAX;
    lg->tol = 1e-6;
    lg->enough = INFINITY;
    lg->cut = INFINITY;
    memset(lg->lin, 0, sizeof(double) * ((size_t)x->P + 1));
    return lg;
}

/* Offers the last restricted game's average partition (rounded, kept increasing) as an
 * incumbent, with the local moves from it. `cur` and `save`: scratch of P + 1 entries. */
static void lag_round_offer(rb_ctx *x, const rb_lag *lg, int *cur, int *save)
{
    int P = x->P;
    size_t nb = (size_t)P + 1;
    double sy = 0.0;
    for (int j = 0; j < lg->n; j++)
        sy += lg->y[j] > 0 ? lg->y[j] : 0.0;
    if (!(sy > 0))
        return;
    cur[0] = 0;
    for (int k = 1; k < P; k++) {
        double a = 0.0;
        for (int j = 0; j < lg->n; j++)
            if (lg->y[j] > 0)
                a += lg->y[j] * lg->part[(size_t)j * nb + (size_t)k];
        int r = (int)lround(a / sy);
        int lo = cur[k - 1] + 1, hi = x->L - (P - k);
        cur[k] = r < lo ? lo : r > hi ? hi : r;
    }
    cur[P] = x->L;
    rb_search_from(x, cur, rb_evaluate(x, cur), save);
}

/* Incumbents from the chain mixture, until `deadline`: local moves from the mixture's average
 * boundaries (rounded, kept increasing) and from each partition of its support, best simulated
 * first (partitions good on average against the chains, often bad alone); then, while time
 * remains, from the incumbent with a few random run moves applied (seeded: an iterated local
 * search). */
void rb_lag_starts(rb_ctx *x, rb_lag *lg, uint64_t deadline)
{
    int P = x->P;
    size_t nb = (size_t)P + 1;
    int *save = x->kid_save, *cur = x->kid_cur; /* rb_lag_setup's scratch */
    double *key = pp_alloc(sizeof(double) * (size_t)LAG_MAX);
    int *ord = pp_alloc(sizeof(int) * (size_t)LAG_MAX);
    uint64_t full = x->deadline;
    if (!key || !ord)
        goto done;
    x->deadline = deadline;
    lag_round_offer(x, lg, cur, save);
    int n = 0;
    for (int j = 0; j < lg->n; j++) {
        if (lg->y[j] <= 0)
            continue;
        double t = rb_evaluate(x, &lg->part[(size_t)j * nb]);
        int i = n++;
        while (i > 0 && key[i - 1] > t) {
            key[i] = key[i - 1];
            ord[i] = ord[i - 1];
            i--;
        }
        key[i] = t;
        ord[i] = j;
    }
    /* the mixed partitions' moves get a third of the time, the kicks below the rest (on
     * bench_rebalance's v = 4 case the mixed partitions' moves found nothing in 2.5 s of its 5,
     * the kicks from the incumbent found its best) */
    uint64_t now = pp_now_ns(), starts_end = now + (deadline > now ? (deadline - now) / 3 : 0);
    for (int i = 0; i < n && pp_now_ns() < starts_end; i++)
        rb_search_from(x, &lg->part[(size_t)ord[i] * nb], key[i], save);
    uint64_t rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)P * 0x100000001b3ull;
    for (int stall = 0; isfinite(x->best_step) && stall < 400 && pp_now_ns() < deadline;
         stall++) {
        double before = x->best_step;
        memcpy(cur, x->best, sizeof(int) * nb);
        for (int moves = 0; moves < 3; moves++) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            int q1 = 1 + (int)(rng % (uint64_t)(P - 1));
            int q2 = q1 + (int)((rng >> 20) % (uint64_t)(P - q1));
            int dir = (rng >> 40) & 1 ? 1 : -1;
            for (int q = q1; q <= q2; q++)
                cur[q] += dir;
            if (cur[q1] <= cur[q1 - 1] || cur[q2] >= cur[q2 + 1])
                for (int q = q1; q <= q2; q++)
                    cur[q] -= dir;
        }
        rb_search_from(x, cur, rb_evaluate(x, cur), save);
        if (x->best_step < before * (1 - PRUNE_TOL))
            stall = -1;
    }
done:
    x->deadline = full;
    pp_free(key);
    pp_free(ord);
}

/* ---- branching on the mixture (v > 1) ---- */

/* A node of rb_lag_branch: the partitions whose boundary k lies in lo[k] .. hi[k] and whose stage s
 * holds cmin[s] .. cmax[s] layers; `value`, the restricted mixture bound, proven for them; the
 * support of its last restricted game (chains; partitions and their weights) to start its
 * children from. */
typedef struct lag_node {
    double value;
    int *lim;          /* lo[P + 1], hi[P + 1], cmin[S], cmax[S] */
    double *chain;     /* [m * LAG_NC] */
    int *part;         /* [n * (P + 1)] */
    double *w;         /* [n] */
    int m, n;
    int resolved;      /* 1: its game was solved again after a one-partition mixture; 2: that
                          gave one partition again, the node is set aside (its value stays) */
    size_t bytes;      /* what it holds */
} lag_node;

#define LAG_LIMS(x) (2 * ((size_t)(x)->P + 1) + 2 * (size_t)(x)->S)

static void lag_node_free(lag_node *nd)
{
    pp_free(nd->lim);
    pp_free(nd->chain);
    pp_free(nd->part);
    pp_free(nd->w);
    memset(nd, 0, sizeof *nd);
}

/* Keeps the limits and the support of lg's last game in nd; returns 0, or -1 out of memory. */
static int lag_node_take(const rb_ctx *x, const rb_lag *lg, const int *lim, double value,
                         lag_node *nd)
{
    size_t nc = LAG_NC(x->P), nb = (size_t)x->P + 1;
    int m = 0, n = 0;
    for (int i = 0; i < lg->m; i++)
        m += lg->lam[i] > 0;
    for (int j = 0; j < lg->n; j++)
        n += lg->y[j] > 0;
    memset(nd, 0, sizeof *nd);
    nd->lim = pp_alloc(sizeof(int) * LAG_LIMS(x));
    nd->chain = pp_alloc(sizeof(double) * nc * (size_t)(m > 0 ? m : 1));
    nd->part = pp_alloc(sizeof(int) * nb * (size_t)(n > 0 ? n : 1));
    nd->w = pp_alloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!nd->lim || !nd->chain || !nd->part || !nd->w) {
        lag_node_free(nd);
        return -1;
    }
    nd->bytes = sizeof(int) * LAG_LIMS(x) + sizeof(double) * nc * (size_t)m +
                (sizeof(int) * nb + sizeof(double)) * (size_t)n;
    memcpy(nd->lim, lim, sizeof(int) * LAG_LIMS(x));
    for (int i = 0; i < lg->m; i++)
        if (lg->lam[i] > 0)
            memcpy(&nd->chain[(size_t)nd->m++ * nc], &lg->chain[(size_t)i * nc],
                   sizeof(double) * nc);
    for (int j = 0; j < lg->n; j++)
        if (lg->y[j] > 0) {
            memcpy(&nd->part[(size_t)nd->n * nb], &lg->part[(size_t)j * nb], sizeof(int) * nb);
            nd->w[nd->n++] = lg->y[j];
        }
    nd->value = value;
    return 0;
}

/* The two ways to split a node, each the best of its kind (docs/rebalancer.md, "Branching on
 * the mixture"): cand[2 * LAG_SPLIT_COUNT ..] the layer count of the stage whose average over
 * the mixture is furthest from whole, cand[2 * LAG_SPLIT_BOUNDARY ..] the first boundary, in
 * layer order, whose average is not whole (or, when every average is, the first on which the
 * mixture's partitions disagree); each as (index, at), the children taking "<= at" and "> at",
 * or index -1 when there is none of that kind. Returns 0 when there is neither (the mixture is
 * one partition). */
enum { LAG_SPLIT_BOUNDARY = 0, LAG_SPLIT_COUNT = 1 };
static int lag_split(const rb_ctx *x, const lag_node *nd, int cand[4])
{
    size_t nb = (size_t)x->P + 1;
    const int *lo = nd->lim, *hi = lo + nb, *cmin = hi + nb, *cmax = cmin + x->S;
    cand[2 * LAG_SPLIT_BOUNDARY] = cand[2 * LAG_SPLIT_COUNT] = -1;
    double sw = 0.0;
    for (int j = 0; j < nd->n; j++)
        sw += nd->w[j];
    if (!(sw > 0))
        return 0;
    int q = 0; /* constraint rows the node has */
    for (int s = 0; s < x->S; s++)
        q += (cmin[s] > 0) + (cmax[s] < x->L);
    double most = 1e-6;
    for (int s = 0; s < x->S && q + 1 <= LAG_QMAX; s++) {
        double mean = 0.0;
        for (int j = 0; j < nd->n; j++) {
            const int *b = &nd->part[(size_t)j * nb];
            int n = 0;
            for (int p = s; p < x->P; p += x->S)
                n += b[p + 1] - b[p];
            mean += nd->w[j] * n;
        }
        mean /= sw;
        double fr = mean - floor(mean), off = fr < 0.5 ? fr : 1.0 - fr;
        int a = (int)floor(mean);
        if (off > most && a >= cmin[s] && a < cmax[s]) {
            most = off;
            cand[2 * LAG_SPLIT_COUNT] = s;
            cand[2 * LAG_SPLIT_COUNT + 1] = a;
        }
    }
    int spread = -1, spread_at = 0; /* the first boundary the partitions disagree on */
    for (int k = 1; k < x->P; k++) {
        if (lo[k] >= hi[k])
            continue; /* fixed */
        double m1 = 0.0, m2 = 0.0;
        for (int j = 0; j < nd->n; j++) {
            double b = nd->part[(size_t)j * nb + (size_t)k];
            m1 += nd->w[j] * b;
            m2 += nd->w[j] * b * b;
        }
        m1 /= sw;
        double fr = m1 - floor(m1), var = m2 / sw - m1 * m1;
        int a = (int)floor(m1);
        a = a < lo[k] ? lo[k] : a >= hi[k] ? hi[k] - 1 : a;
        if (fr > 1e-6 && fr < 1.0 - 1e-6) {
            cand[2 * LAG_SPLIT_BOUNDARY] = k;
            cand[2 * LAG_SPLIT_BOUNDARY + 1] = a;
            break;
        }
        if (spread < 0 && var > 1e-9) {
            spread = k;
            spread_at = a;
        }
    }
    if (cand[2 * LAG_SPLIT_BOUNDARY] < 0 && spread >= 0) {
        cand[2 * LAG_SPLIT_BOUNDARY] = spread;
        cand[2 * LAG_SPLIT_BOUNDARY + 1] = spread_at;
    }
    return cand[2 * LAG_SPLIT_BOUNDARY] >= 0 || cand[2 * LAG_SPLIT_COUNT] >= 0;
}

/* Solves the restricted game of the limits `lim` in lg, started from nd's support: the
 * boundaries' ranges bind each partition (the DP keeps to them), the stage counts bind the
 * mixture (constraint rows, their multipliers in the DP). */
static void lag_solve_node(rb_ctx *x, rb_lag *lg, const lag_node *nd, const int *lim, int *cs,
                           uint64_t deadline, int rounds)
{
    size_t nb = (size_t)x->P + 1, nc = LAG_NC(x->P);
    const int *cmin = lim + 2 * nb, *cmax = cmin + x->S;
    lg->m = lg->n = 0;
    lg->bound = 0.0;
    lg->lo = lim;
    lg->hi = lim + nb;
    lg->q = 0;
    for (int s = 0; s < x->S; s++) {
        if (cmin[s] > 0 && lg->q < LAG_QMAX) {
            cs[3 * lg->q] = s, cs[3 * lg->q + 1] = -1, cs[3 * lg->q + 2] = cmin[s];
            lg->q++;
        }
        if (cmax[s] < x->L && lg->q < LAG_QMAX) {
            cs[3 * lg->q] = s, cs[3 * lg->q + 1] = 1, cs[3 * lg->q + 2] = cmax[s];
            lg->q++;
        }
    }
    lg->cs = cs;
    memset(lg->lin, 0, sizeof(double) * nb);
    lg->lin0 = 0.0;
    for (int i = 0; i < nd->m; i++) {
        memcpy(lg->coef, &nd->chain[(size_t)i * nc], sizeof(double) * nc);
        lag_add_chain(x, lg);
    }
    for (int j = 0; j < nd->n; j++)
        lag_add_part(x, lg, &nd->part[(size_t)j * nb]);
    rb_lag_solve(x, lg, deadline, rounds);
}

#define LAG_NODES 4096
/* the branching splits on counts while, on average, a count split has raised its lesser child
 * by at least this fraction of the gap still to close (between the node's value and the
 * incumbent's cutoff), and on boundaries otherwise */
#define LAG_COUNTS_PAY 0.01
/* a node's game stops when its two sides are this close (relative): half the gap left to close,
 * within these (docs/rebalancer.md "Branching on the mixture") */
#define LAG_NODE_TOL_MIN 3e-4
#define LAG_NODE_TOL_MAX 3e-3
#define LAG_NODE_BYTES ((size_t)64 << 20) /* the open nodes' supports, at most */

/* A node is closed when its value reaches the incumbent's cutoff up to the mixture bound's own
 * safety factor (a node whose relaxation equals the incumbent's step is then closed, not kept
 * open by rounding). */
static double lag_cut(const rb_ctx *x) { return cutoff(x) * LAG_SAFETY; }

/* Branch and bound on the path-mixture relaxation (v > 1). The mixture's value over all
 * partitions (x->lag) is in effect that of a partition with fractional layers: its partitions
 * average to stages of fractional layer counts and boundaries between layers. A node splits on
 * the count of the stage whose average is furthest from whole (at most c, or at least c + 1
 * layers: a constraint on the mixture, priced into the DP by its multiplier) while such splits
 * pay (LAG_COUNTS_PAY), and otherwise on the first boundary, in layer order, whose average is
 * not whole (its range cut at the average); every partition lies in one child, and each child's
 * restricted game bounds its partitions. Best-first (the least value next), until `deadline` or
 * until every open node reaches the incumbent's cutoff; the restricted games' best responses
 * are offered as incumbents on the way, and pieces whose own bound reaches the cutoff are left
 * out of the DP. Returns the least value over the open nodes, a proven lower bound on every
 * partition's step, or the cutoff when none is left open. */
double rb_lag_branch(rb_ctx *x, uint64_t deadline, int max_splits, int *closed)
{
    int P = x->P, S = x->S;
    size_t nb = (size_t)P + 1, nl = LAG_LIMS(x);
    rb_lag *lg = rb_lag_new(x);
    lag_node *open = pp_alloc(sizeof(lag_node) * LAG_NODES);
    int *lim = pp_alloc(sizeof(int) * nl), *cs = pp_alloc(sizeof(int) * 3 * LAG_QMAX);
    int n_open = 0;
    double result = x->lag ? x->lag->bound : 0.0;
    *closed = 0;
    if (!lg || !open || !lim || !cs || !x->lag)
        goto done;
    /* the nodes' games: their support is about P + 1 chains and partitions, and a smaller
     * tableau solves faster */
    lg->cap = P + 16 < LAG_MAX ? P + 16 : LAG_MAX;
    lg->tol = LAG_NODE_TOL_MAX;
    int *lo = lim, *hi = lim + nb, *cmin = hi + nb, *cmax = cmin + S;
    for (int k = 0; k <= P; k++) {
        lo[k] = k;
        hi[k] = x->L - (P - k);
    }
    lo[0] = hi[0] = 0;
    lo[P] = hi[P] = x->L;
    for (int s2 = 0; s2 < S; s2++) {
        cmin[s2] = 0;
        cmax[s2] = x->L;
    }
    if (lag_node_take(x, x->lag, lim, x->lag->bound, &open[0]) != 0)
        goto done;
    n_open = 1;
    size_t held = open[0].bytes;
    double count_gain = 0.0; /* what the count splits paid so far (LAG_COUNTS_PAY) */
    int count_splits = 0;
    for (int split = 0; n_open > 0 && (!deadline || pp_now_ns() < deadline) &&
                        (!max_splits || split < max_splits);
         split++) {
        int pick = -1;
        for (int i = 0; i < n_open; i++)
            if (open[i].resolved < 2 && (pick < 0 || open[i].value < open[pick].value))
                pick = i;
        if (pick < 0 || !(open[pick].value < lag_cut(x)))
            break; /* every open node is at the incumbent or above, or set aside */
        int cand[4];
        if (!lag_split(x, &open[pick], cand)) {
            /* its last game's mixture is one partition: the game was stopped by the tolerance
             * with the oracle's two sides apart; solve it again to the end, from its support */
            lag_node *nd = &open[pick], again;
            if (nd->resolved) {
                nd->resolved = 2; /* still one partition: set aside, its value stays a bound */
                continue;
            }
            lg->enough = lag_cut(x);
            lg->cut = cutoff(x);
            double tol = lg->tol;
            lg->tol = 1e-6;
            memcpy(lim, nd->lim, sizeof(int) * nl);
            lag_solve_node(x, lg, nd, lim, cs, deadline, 400);
            lg->tol = tol;
            if (lag_node_take(x, lg, lim, fmax(nd->value, lg->bound), &again) != 0)
                break;
            held += again.bytes - nd->bytes;
            lag_node_free(nd);
            *nd = again;
            nd->resolved = 1;
            continue;
        }
        /* the children's games to half the gap still to close (node values that far below
         * their games' order the nodes as well, and the splits come faster) */
        double half = (lag_cut(x) - open[pick].value) / lag_cut(x) / 2;
        lg->tol = fmin(fmax(half, LAG_NODE_TOL_MIN), LAG_NODE_TOL_MAX);
        int counts_pay = !count_splits || count_gain >= LAG_COUNTS_PAY * count_splits;
        int kind = cand[2 * LAG_SPLIT_COUNT] >= 0 &&
                           (counts_pay || cand[2 * LAG_SPLIT_BOUNDARY] < 0)
                       ? LAG_SPLIT_COUNT
                       : LAG_SPLIT_BOUNDARY;
        int idx = cand[2 * kind], at = cand[2 * kind + 1];
        lag_node nd = open[pick];
        open[pick] = open[--n_open];
        int n_kids = 0, failed = 0;
        lag_node kids[2];
        double least = lag_cut(x); /* the lesser child's value (LAG_COUNTS_PAY) */
        for (int side = 0; side < 2; side++) {
            memcpy(lim, nd.lim, sizeof(int) * nl);
            if (kind == LAG_SPLIT_BOUNDARY)
                (side == 0 ? hi : lo)[idx] = side == 0 ? at : at + 1;
            else
                (side == 0 ? cmax : cmin)[idx] = side == 0 ? at : at + 1;
            lg->enough = lag_cut(x);
            lg->cut = cutoff(x);
            lag_solve_node(x, lg, &nd, lim, cs, deadline, 400);
            double v = fmax(nd.value, lg->bound);
            least = fmin(least, v);
            /* the children's average partitions, rounded and polished by the local moves, are
             * good incumbents for v = 2 (whole stage counts where the node fixed them); for
             * v > 2 they never beat the incumbent search's on bench_rebalance's cases and cost a
             * fifth of a split (docs/rebalancer.md "The search", 2.) */
            if (x->v == 2)
                lag_round_offer(x, lg, x->kid_cur, x->kid_save);
            if (!(v < lag_cut(x)))
                continue; /* no partition of this child beats the incumbent */
            if (lag_node_take(x, lg, lim, v, &kids[n_kids]) != 0) {
                failed = 1;
                break;
            }
            n_kids++;
        }
        if (failed) { /* out of memory: the node stays open as it was, and the search ends */
            for (int i = 0; i < n_kids; i++)
                lag_node_free(&kids[i]);
            open[n_open++] = nd;
            break;
        }
        if (kind == LAG_SPLIT_COUNT) { /* the lesser child's rise, over the gap still to close */
            count_gain += fmax(least - nd.value, 0.0) / (lag_cut(x) - nd.value);
            count_splits++;
        }
        held -= nd.bytes;
        lag_node_free(&nd);
        for (int i = 0; i < n_kids; i++) {
            held += kids[i].bytes;
            open[n_open++] = kids[i];
        }
        if (n_open + 2 > LAG_NODES || held > LAG_NODE_BYTES)
            break; /* the least open value stands */
    }
    result = cutoff(x);
    *closed = 1;
    for (int i = 0; i < n_open; i++)
        if (open[i].value < lag_cut(x)) {
            result = fmin(result, open[i].value);
            *closed = 0;
        }
done:
    for (int i = 0; i < n_open; i++)
        lag_node_free(&open[i]);
    pp_free(open);
    pp_free(lim);
    pp_free(cs);
    rb_lag_free(lg);
    return result;
}

/* For v > 1: the chain mixture's bound (rb_lag_solve) on at most 35% of the budget (3 s without
 * one); raises the root bound and gives the search its node bound (x->lag). Skipped when out of
 * memory (only a bound). */
void rb_lag_setup(rb_ctx *x, double *root)
{
    x->lag = rb_lag_new(x);
    x->lag_fixed = pp_alloc(sizeof(double) * ((size_t)x->P + 1));
    x->kid_cur = pp_alloc(sizeof(int) * ((size_t)x->P + 1));
    x->kid_save = pp_alloc(sizeof(int) * ((size_t)x->P + 1));
    if (!x->lag || !x->lag_fixed || !x->kid_cur || !x->kid_save) {
        rb_lag_free(x->lag);
        x->lag = NULL;
        return;
    }
    uint64_t now = pp_now_ns(), left = x->deadline > now ? x->deadline - now : 0;
    uint64_t dl = x->deadline ? now + left * 7 / 20 : now + 3000000000ull;
    rb_lag_solve(x, x->lag, dl, 4000);
    *root = fmax(*root, x->lag->bound);

    x->lag_fixed[0] = 0.0;
}
