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
#include "pp_sim.h"
#include "pp_rebalance.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Bounds are scaled down by this much before they are compared with simulated times, so that
 * rounding in their prefix sums (a different summation order than the replay's) can never make
 * a bound exceed the value it bounds: pruning stays exact. */
#define BOUND_SAFETY (1.0 - 1e-12)
/* A node is pruned when it cannot beat the incumbent by more than this relative amount: step
 * times are sums of measured costs, far coarser, and without it every tie of the incumbent
 * (common: many partitions share the bottleneck) would have to be searched to its leaves.
 * "Exact" therefore means: no partition is faster than step * (1 - PRUNE_TOL). */
#define PRUNE_TOL 1e-9
/* The DP table and the per-level child lists hold (P + 1) x (L + 1) entries. */
#define MAX_TABLE ((int64_t)1 << 25)
/* piece_bound is tabulated over all (piece, lo, hi) up to this many entries (32 MiB). */
#define MAX_PIECE_TABLE ((int64_t)1 << 22)

/* pp_schedule_check_args allows v <= 64: stage_bound's per-chunk terms live on the stack. */
#define RB_MAX_V 64

enum { K_F = 0, K_B = 1, K_BI = 2, K_BW = 3, K_RECV = 4, N_COMPUTE = 4 };

/* One step of the compiled replay, in an order where every dependency comes first. */
typedef struct rb_step {
    int32_t dep;    /* RECV: the step whose end is the send time (-1: time 0); else unused */
    int32_t q;      /* RECV: boundary crossed (between piece q and q + 1) */
    int32_t piece;  /* compute: piece whose cost it takes */
    int32_t stage;
    int32_t mb;     /* compute: micro-batch */
    uint8_t kind;   /* K_* */
} rb_step;

/* A piece's compute ops in its stage's order, for the path bound (piece_bound). */
typedef struct rb_seq {
    int n;
    uint8_t *kind;    /* [n] K_F .. K_BW */
    int32_t *partner; /* [n] input-gradient ops: the latest earlier FWD of this piece from
                         which a path through all later pieces leads to this op; -1 none */
    int total[N_COMPUTE]; /* ops of each kind */
} rb_seq;

/* A stage's compute ops of all its chunks in list order, for the stage bound (stage_bound). */
typedef struct rb_sseq {
    int n;
    uint8_t *kind;    /* [n] K_F .. K_BW */
    uint8_t *chunk;   /* [n] */
    int32_t *round;   /* [n] FWD(m) of chunk c >= 1: the op FWD(m) of chunk c - 1; input-gradient
                         op of m for chunk c <= v - 2: that of chunk c + 1; else -1 */
    int32_t *partner; /* [n * v] input-gradient ops: for each chunk c, the latest earlier FWD of
                         chunk c from which a path through all later pieces leads here; -1 */
} rb_sseq;

/* The compute ops of the first and the last stage merged in replay order, for ends_bound. */
typedef struct rb_eseq {
    int n;
    uint8_t *kind;  /* [n] K_F .. K_BW */
    int32_t *piece; /* [n] */
    int32_t *prev;  /* [n] the previous op of the same stage, -1 none */
    int32_t *hop;   /* [n] FWD(m) of piece j: FWD(m) of the nearest earlier piece of the two
                       stages; input-gradient op of m: that of the nearest later piece; -1 */
    double *val;    /* [n] scratch */
} rb_eseq;

/* The path-mixture bound's state (lag_solve): chains (rows) and partitions (columns) of the
 * game, their lengths, the restricted game's mixtures and the best mixture's boundary DP. */
#define LAG_MAX 128
#define LAG_QMAX 64 /* constraint rows of a restricted game */
typedef struct rb_lag {
    int m, n;          /* chains, partitions */
    double *chain;     /* [LAG_MAX * LAG_NC] counts of each chain */
    int *part;         /* [LAG_MAX * (P + 1)] */
    double *len;       /* [LAG_MAX * LAG_MAX] chain i's length on partition j, ns */
    double *K, *tab;   /* the game's matrix and simplex tableau */
    int *basis;
    double *lam, *y;   /* [LAG_MAX] the restricted game's mixtures */
    double *agg, *best_agg; /* [LAG_NC] aggregated counts: current, best */
    double *coef;      /* [LAG_NC] scratch chain */
    double *mdur, *mtr; /* [4P], [P] the partition mixture's average durations */
    double *G;         /* [P * (L + 1)] cost to go of the mixture in agg (lag_table) */
    int *arg;          /* [P * (L + 1)] its minimising next boundary */
    double c0;         /* the mixture's constant term */
    double bound;      /* the best proven bound, ns (0: none) */
    double upper;      /* the least mixed replay of the last solve's rounds: the relaxation's
                          value (of its box and constraints) is below */
    int cap;           /* rows and columns kept before the unweighted ones are dropped */
    double tol;        /* stop when the two sides are this close (relative) */
    double enough;     /* stop when the bound reaches this (ns) */
    double cut;        /* pieces whose piece bound reaches this are left out (+inf: none) */
    int q;             /* stage-count constraints on the mixture (a node of lag_branch) */
    const int *cs;     /* [3q]: stage, sign, count: sign * (layers of the stage - count) <= 0 */
    double *Q;         /* [LAG_QMAX * LAG_MAX] each constraint's value on each partition */
    double *lin;       /* [P + 1] the constraints' multipliers as a term per boundary, ns/layer */
    double lin0;       /* and their constant, ns */
    double *mu;        /* [LAG_QMAX] the constraints' multipliers, ns per layer */
    uint8_t *viol;     /* [LAG_QMAX] the last DP answer breaks the constraint */
    const int *lo, *hi; /* [P + 1] or NULL: boundary k restricted to lo[k] .. hi[k] (a node of
                          lag_branch); the bound then holds for those partitions only */
} rb_lag;

/* The memory model's peak candidates of one stage (or one chunk of it): at each op of its list,
 * how many micro-batches of each chunk are in flight (a) and how many recompute workspaces of each
 * chunk are held (w); the stage's activation peak is the largest sum over chunks of a x the
 * chunk's bytes per micro-batch + w x its workspace. Vectors another one dominates are dropped. */
typedef struct rb_mvec {
    int n, dim;        /* vectors, chunks per vector */
    int32_t *aw;       /* [n * 2 * dim]: a[0 .. dim-1] then w[0 .. dim-1] */
} rb_mvec;

typedef struct rb_child {
    int e;
    double bound;
    double tie;
    double lh; /* the chain mixture's H over the boundaries fixed with this child */
} rb_child;

typedef struct rb_ctx {
    const pp_rebalance_opts *o;
    const pp_costs *c;
    int L, S, v, M, P, split;
    int *peak;         /* [S] peak in-flight (micro-batch-chunks) per stage */
    rb_step *steps;
    int n_steps;
    int32_t *sprev;    /* [n_steps] the previous step of the same stage, -1 none */
    int32_t *last_step; /* [S] each stage's last step, -1 none */
    double *fin;       /* [n_steps] */
    double *clock;     /* [S] */
    double *dur;       /* [N_COMPUTE * P] ns */
    double *tr;        /* [P] ns, boundary q between piece q and q + 1 */
    double opt_ns;
    rb_seq *seq;       /* [P] */
    rb_sseq *sseq;     /* [S] v > 1: the stages' lists for stage_bound, else NULL */
    rb_eseq ends;      /* v > 1: the first and last stage's ops, for ends_bound */
    int fill_ok;       /* v > 1: every stage's list starts with a FWD of chunk 0 and ends with
                          an input-gradient op of chunk 0 (fill_drain_ns holds) */
    double *G;         /* [P * (L+1) * (L+1)] piece_bound table, NULL when too large */
    double *val;       /* scratch of piece_bound: [longest sequence] */
    double *pre[N_COMPUTE]; /* [L + 1] prefix sums of per-layer op costs, us */
    double *pre_bb;    /* [L + 1] prefix of the backward op that passes gradients on */
    double *tl;        /* [L] transfer after layer l, ns */
    double tmin;       /* smallest transfer over all possible boundaries, ns */
    uint64_t *pre_param, *pre_act; /* [L + 1] */
    uint64_t limit;    /* 0 = none */
    /* the memory model (pp_stage_memory_model's, term by term; used only with a limit) */
    int rc_ok;         /* o->recompute: a stage may recompute all its layers */
    pp_costs *crc;     /* rc_ok: the costs with every layer recomputed */
    uint64_t *pre_in;  /* [L + 1] prefix of what a recomputed layer keeps (its input) */
    int *slots;        /* [S] the executor's receive buffers per chunk */
    rb_mvec *mv;       /* [S] a stage's peak candidates over its chunks */
    rb_mvec *cv;       /* [S * v] the same for chunk k of stage s alone (index s * v + k) */
    uint8_t *rcs;      /* [S] scratch: each stage's recompute choice */
    uint8_t *rcmask;   /* [L] scratch: the layers recomputed (decide) */
    /* v = 1: the scratch of rb_select, which picks a stage's cheapest layers to recompute */
    uint8_t *selmask, *sel_cur, *sel_best;
    int *sel_order;
    double *sel_cost, *sel_ratio, *sel_save, *sel_suffix, *sel_need, *sel_left;
    int sel_max_m;     /* peak vectors per stage it has room for */
    int sel_truncated; /* some rb_select reached its node cap: its set may not be the cheapest */
    double *D;         /* [(P + 1) * (L + 1)] best bound over completions */
    /* search state */
    int *bounds;       /* [P + 1] current partial partition */
    int *best;         /* [P + 1] incumbent */
    double best_step;
    double *stage_work;          /* [S] v > 1: fixed work per stage, ns */
    uint64_t *stage_fixed;       /* [S] v > 1, with a limit: fixed chunks' static bytes */
    uint64_t *stage_dyn[2];      /* [S] and the largest of their peaks alone, without (0) and
                                    with (1) recomputation */
    rb_child *kids;    /* [P * (L + 1)] */
    rb_lag *lag;       /* the path-mixture bound, NULL when not computed */
    double *lag_fixed; /* [P + 1] sum of the mixture's H_j over the fixed boundaries 1 .. k */
    int *kid_cur, *kid_save; /* [P + 1] scratch of the mixture's incumbents (lag_starts,
                                lag_branch) */
    uint64_t t0, deadline;
    int aborted;
    int64_t nodes, evaluated;
} rb_ctx;

/* ---- saturating byte arithmetic ---- */

static uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

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
static uint64_t mem_act(const pp_layer_cost *l)
{
    return l->has_kept ? l->kept_bytes : l->activation_bytes;
}

static uint64_t range_u64(const pp_costs *c, int lo, int hi, int act)
{
    uint64_t s = 0;
    for (int l = lo; l < hi; l++)
        s = add_sat(s, act ? mem_act(&c->layers[l]) : c->layers[l].param_bytes);
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
static uint64_t mem_input(const pp_costs *c, int l)
{
    if (c->layers[l].has_kept)
        return c->layers[l].input_bytes;
    return l > 0 ? c->layers[l - 1].activation_bytes : 0;
}

/* One chunk's charges under the model: static bytes (4 x parameters and the receive buffers),
 * bytes per micro-batch in flight, one recompute workspace (0 without recomputation). */
typedef struct rb_cmem {
    uint64_t fixed, mb, set;
} rb_cmem;

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
        mb = add_sat(mb, mem_input(c, hi));
    if (lo > 0)
        mb = add_sat(mb, mem_input(c, lo));
    out->mb = mb;
    out->set = kept;
}

/* The same with the layers of mask[L] recomputed, by the model's own rule (a set of a stage's
 * layers, not all or none: rb_select's candidates and the proposal's choice). */
static void chunk_mem_masked(const rb_ctx *x, int piece, int lo, int hi, const uint8_t *mask,
                             rb_cmem *out)
{
    chunk_mem(x, piece, lo, hi, 0, out);
    pp_costs_chunk_memory(x->c, lo, hi, mask, &out->mb, &out->set);
}

/* The largest activation sum over m's vectors for the chunks' charges ch[0 .. m->dim-1]. */
static uint64_t mvec_peak(const rb_mvec *m, const rb_cmem *ch)
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
static uint64_t stage_mem(const rb_ctx *x, int s, const int *b, int r)
{
    rb_cmem ch[RB_MAX_V] = {{0, 0, 0}};
    uint64_t fixed = 0;
    for (int k = 0; k < x->v; k++) {
        int j = k * x->S + s;
        chunk_mem(x, j, b[j], b[j + 1], r, &ch[k]);
        fixed = add_sat(fixed, ch[k].fixed);
    }
    return add_sat(fixed, mvec_peak(&x->mv[s], ch));
}

/* Piece j = [lo, hi) alone: its static bytes and its peak with no other chunk in flight; for
 * v = 1 the stage's memory, for v > 1 a lower bound on it (every term is nonnegative). */
static uint64_t piece_mem(const rb_ctx *x, int j, int lo, int hi, int r, uint64_t *dyn)
{
    rb_cmem ch;
    chunk_mem(x, j, lo, hi, r, &ch);
    uint64_t d = mvec_peak(&x->cv[(j % x->S) * x->v + j / x->S], &ch);
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
#define RB_SEL_MAX_LAYERS 1024

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
    chunk_mem_masked(x, q->s, q->lo, q->hi, x->selmask, &ch);
    return add_sat(ch.fixed, mvec_peak(&x->mv[q->s], &ch));
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
static double rb_select(rb_ctx *x, int s, int lo, int hi, uint8_t *mask, int bound_only)
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
        double in = (double)mem_input(c, l), end = 0;
        if (l == hi - 1 && hi < x->L)
            end += (double)mem_input(c, hi);
        if (l == lo && lo > 0)
            end += (double)mem_input(c, lo);
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
 * layers to recompute (rb_select), for v > 1 all its layers, where that fits (the step time only
 * grows with an op's duration, so this is the fastest choice that meets the limit). Returns 0
 * when some stage fits no way (its choice is then all its layers when recomputation is
 * allowed). */
static int decide(rb_ctx *x, const int *b, uint8_t *rcs)
{
    int ok = 1;
    for (int s = 0; s < x->S; s++) {
        rcs[s] = 0;
        for (int j = s; x->rcmask && j < x->P; j += x->S)
            memset(x->rcmask + b[j], 0, (size_t)(b[j + 1] - b[j]));
        if (!x->limit || stage_mem(x, s, b, 0) <= x->limit)
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
        if (!isnan(add) || stage_mem(x, s, b, 1) > x->limit)
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

static pp_status build_mem_vectors(rb_ctx *x, const pp_schedule *sc)
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

/* ---- op kinds of the compiled replay ---- */

/* The cost file's op for each compute kind (the cost rule is pp_costs_layer_us). */
static const pp_op k_kind_op[N_COMPUTE] = {PP_OP_FWD, PP_OP_BWD, PP_OP_BWD_INPUT,
                                           PP_OP_BWD_WEIGHT};

static double layer_us(const pp_layer_cost *l, int kind)
{
    return pp_costs_layer_us(l, k_kind_op[kind]);
}

static int op_kind(uint8_t op)
{
    switch (op) {
    case PP_OP_FWD: return K_F;
    case PP_OP_BWD: return K_B;
    case PP_OP_BWD_INPUT: return K_BI;
    case PP_OP_BWD_WEIGHT: return K_BW;
    default: return -1;
    }
}

/* ---- the compiled replay ---- */

/* What compile_schedule's hook keeps while the lists are replayed. */
typedef struct rb_compile {
    rb_ctx *x;
    const pp_schedule *sc;
    int *last;     /* [S] the stage's latest recorded step, -1 none */
    int *msg_step; /* [n_msgs] a message's send time is the end of this step (-1: time 0) */
    int *msg_q;    /* [n_msgs] boundary it crosses (between piece q and q + 1) */
} rb_compile;

static pp_status record_step(void *ctx, int s, int k, const pp_instr *in, int64_t msg)
{
    (void)k;
    rb_compile *cp = ctx;
    rb_ctx *x = cp->x;
    int piece = in->chunk >= 0 ? pp_schedule_piece(cp->sc, s, in->chunk) : -1;
    if (in->op == PP_OP_SEND_ACT || in->op == PP_OP_SEND_GRAD) {
        cp->msg_step[msg] = cp->last[s];
        cp->msg_q[msg] = in->op == PP_OP_SEND_GRAD ? piece - 1 : piece;
        return PP_OK;
    }
    if (in->op == PP_OP_OPT_STEP)
        return PP_OK;
    rb_step *t = &x->steps[x->n_steps];
    int recv = in->op == PP_OP_RECV_ACT || in->op == PP_OP_RECV_GRAD;
    t->kind = (uint8_t)(recv ? K_RECV : op_kind(in->op));
    t->dep = recv ? cp->msg_step[msg] : -1;
    t->q = recv ? cp->msg_q[msg] : -1;
    t->stage = s;
    t->piece = piece;
    t->mb = in->mb;
    x->sprev[x->n_steps] = cp->last[s];
    cp->last[s] = x->n_steps++;
    return PP_OK;
}

/* Replays the lists once (pp_schedule_replay, as pp_sim_run does), recording each compute op
 * and each receive in an order where what it waits for comes first. Sends only name the step
 * that precedes them on their stage: in pp_sim_run a message is available at the sender's clock
 * plus the transfer, and that clock is the end of the sender's previous step. */
static pp_status compile_schedule(rb_ctx *x, const pp_schedule *sc)
{
    pp_status st = PP_OK;
    int S = sc->S;
    size_t n_msgs = pp_schedule_n_msgs(sc);
    int64_t total = 0;
    for (int s = 0; s < S; s++)
        total += sc->n_instrs[s];
    rb_compile cp = {.x = x, .sc = sc};
    int *pc = pp_alloc(sizeof(int) * (size_t)S);
    cp.last = pp_alloc(sizeof(int) * (size_t)S);
    cp.msg_step = pp_alloc(sizeof(int) * n_msgs);
    cp.msg_q = pp_alloc(sizeof(int) * n_msgs);
    x->steps = pp_alloc(sizeof(rb_step) * (size_t)total);
    x->fin = pp_alloc(sizeof(double) * (size_t)total);
    x->sprev = pp_alloc(sizeof(int32_t) * (size_t)total);
    x->last_step = pp_alloc(sizeof(int32_t) * (size_t)S);
    if (!pc || !cp.last || !cp.msg_step || !cp.msg_q || !x->steps || !x->fin || !x->sprev ||
        !x->last_step) {
        st = PP_ERR(PP_ERR_NOMEM, "rebalance: out of memory compiling the schedule");
        goto done;
    }
    for (int s = 0; s < S; s++)
        cp.last[s] = -1;
    pp_replay_hooks h = {.run = record_step, .ctx = &cp, .barrier = 0};
    if ((st = pp_schedule_replay(sc, &h, pc, NULL)) != PP_OK)
        st = pp_error_wrap(st, "rebalance");
    for (int s = 0; s < S; s++)
        x->last_step[s] = cp.last[s];
done:
    pp_free(pc);
    pp_free(cp.last);
    pp_free(cp.msg_step);
    pp_free(cp.msg_q);
    return st;
}

/* The simulated step time of partition `b` (P + 1 boundaries): the arithmetic of pp_sim_run
 * with pp_sim_costs_from_file's costs, operation for operation, so the result is the same double. */
static double evaluate_with(rb_ctx *x, const int *b, const uint8_t *rcs)
{
    const pp_costs *c = x->c;
    for (int p = 0; p < x->P; p++) {
        if (rcs && rcs[p % x->S]) {
            /* its recomputed layers (x->rcmask) cost what pp_costs_with_recompute gives them,
             * summed in pp_costs_op_us's order: the same double as pp_sim_file's */
            for (int k = 0; k < N_COMPUTE; k++) {
                double us = 0.0;
                for (int l = b[p]; l < b[p + 1]; l++)
                    us += layer_us(x->rcmask[l] ? &x->crc->layers[l] : &c->layers[l], k);
                x->dur[k * x->P + p] = us * 1e3;
            }
        } else {
            for (int k = 0; k < N_COMPUTE; k++)
                x->dur[k * x->P + p] = pp_costs_op_us(c, k_kind_op[k], b[p], b[p + 1]) * 1e3;
        }
        if (p < x->P - 1)
            x->tr[p] = pp_costs_transfer_us(c, pp_costs_boundary_bytes(c, b[p + 1])) * 1e3;
    }
    for (int s = 0; s < x->S; s++)
        x->clock[s] = 0.0;
    for (int i = 0; i < x->n_steps; i++) {
        const rb_step *t = &x->steps[i];
        double clk = x->clock[t->stage];
        if (t->kind == K_RECV) {
            double a = (t->dep >= 0 ? x->fin[t->dep] : 0.0) + x->tr[t->q];
            clk = fmax(clk, a);
        } else {
            clk += x->dur[t->kind * x->P + t->piece];
        }
        x->fin[i] = clk;
        x->clock[t->stage] = clk;
    }
    double barrier = 0.0;
    for (int s = 0; s < x->S; s++)
        barrier = fmax(barrier, x->clock[s]);
    x->evaluated++;
    if (c->optimizer_us_per_MB <= 0)
        return barrier + x->opt_ns;
    /* each stage's optimizer step from its parameters (pp_costs_opt_us), all starting at the
     * barrier; x->opt_ns, its part without them, is what the bounds count */
    double step = barrier;
    for (int s = 0; s < x->S; s++) {
        uint64_t bytes = 0;
        for (int p = s; p < x->P; p += x->S)
            bytes += x->pre_param[b[p + 1]] - x->pre_param[b[p]];
        step = fmax(step, barrier + pp_costs_opt_us(c, bytes) * 1e3 * 1.0);
    }
    return step;
}

/* The same with the stages recomputed that need it to meet the limit (decide): the step the
 * partition runs at under the search's rules. */
static double evaluate(rb_ctx *x, const int *b)
{
    if (!x->limit || !x->rc_ok)
        return evaluate_with(x, b, NULL);
    decide(x, b, x->rcs);
    return evaluate_with(x, b, x->rcs);
}

/* ---- the bounds ---- */

/* Position of each micro-batch's FWD and input-gradient op in one stage's list, for chunk ch. */
static void op_positions(const pp_schedule *sc, int s, int ch, int *fpos, int *bpos)
{
    for (int i = 0; i < sc->n_instrs[s]; i++) {
        const pp_instr *in = &sc->instrs[s][i];
        if (in->chunk != ch)
            continue;
        if (in->op == PP_OP_FWD)
            fpos[in->mb] = i;
        else if (in->op == PP_OP_BWD || in->op == PP_OP_BWD_INPUT)
            bpos[in->mb] = i;
    }
}

/* Builds each piece's op sequence and, for each of its input-gradient ops bwd(m'), the partner
 * FWD(m): a path can leave the piece after FWD(m), follow m's forward through all later
 * pieces, walk the last piece's list from FWD(m) to bwd(m') and follow m''s gradient back. It
 * exists when the last piece runs FWD(m) before bwd(m'). */
static pp_status extract_paths(rb_ctx *x, const pp_schedule *sc)
{
    int M = sc->M, P = x->P, S = sc->S;
    int *lf = pp_alloc(sizeof(int) * (size_t)M), *lb = pp_alloc(sizeof(int) * (size_t)M);
    int *mbs = NULL;
    int longest = 0;
    pp_status st = PP_OK;
    for (int s = 0; s < S; s++)
        longest = sc->n_instrs[s] > longest ? sc->n_instrs[s] : longest;
    mbs = pp_alloc(sizeof(int) * (size_t)(longest + 1));
    x->val = pp_alloc(sizeof(double) * (size_t)(longest + 1));
    if (!lf || !lb || !mbs || !x->val) {
        st = PP_ERR(PP_ERR_NOMEM, "rebalance: out of memory for the bounds");
        goto done;
    }
    op_positions(sc, pp_schedule_piece_stage(sc, P - 1), pp_schedule_piece_chunk(sc, P - 1), lf,
                 lb);
    for (int j = 0; j < P; j++) {
        int s = pp_schedule_piece_stage(sc, j), ch = pp_schedule_piece_chunk(sc, j);
        rb_seq *q = &x->seq[j];
        q->kind = pp_alloc((size_t)sc->n_instrs[s] + 1);
        q->partner = pp_alloc(sizeof(int32_t) * ((size_t)sc->n_instrs[s] + 1));
        if (!q->kind || !q->partner) {
            st = PP_ERR(PP_ERR_NOMEM, "rebalance: out of memory for the bounds");
            goto done;
        }
        for (int i = 0; i < sc->n_instrs[s]; i++) {
            const pp_instr *in = &sc->instrs[s][i];
            int k = op_kind(in->op);
            if (in->chunk != ch || k < 0)
                continue;
            if (q->n == 0 && k != K_F) {
                st = PP_ERR(PP_ERR_INVALID, "rebalance: piece %d starts with %s, not FWD", j,
                            pp_op_name((pp_op)in->op));
                goto done;
            }
            q->kind[q->n] = (uint8_t)k;
            mbs[q->n] = in->mb;
            q->partner[q->n] = -1;
            if (k == K_B || k == K_BI) {
                for (int f = q->n - 1; f >= 0; f--)
                    if (q->kind[f] == K_F && lf[mbs[f]] < lb[in->mb]) {
                        q->partner[q->n] = f;
                        break;
                    }
            }
            q->total[k]++;
            q->n++;
        }
    }
done:
    pp_free(lf);
    pp_free(lb);
    pp_free(mbs);
    return st;
}

static double dot(const int *n, const double *d)
{
    return n[0] * d[0] + n[1] * d[1] + n[2] * d[2] + n[3] * d[3];
}

/* Lower bound on the step time of every partition in which piece j holds layers [lo, hi): the
 * longest of a family of paths of the replay that use piece j's ops (docs/rebalancer.md). A path
 * reaches piece j's first FWD through the forwards of the layers before lo, runs along piece
 * j's ops in its stage's order, may leave after a FWD(m) and come back at the partner
 * input-gradient op (through the forward and backward work of every layer after hi), and ends
 * either at the piece's last op or, after an input-gradient op, with that gradient's way back
 * through the layers before lo. Ops of other pieces on the path count by the work of their
 * layers (their split into pieces is unknown), transfers at boundaries other than lo and hi by
 * the smallest transfer any boundary can have; the optimizer step follows the barrier. */
static int piece_forced(const rb_ctx *x, int j, int lo, int hi);

static double piece_bound_dp(const rb_ctx *x, int j, int lo, int hi)
{
    double d[N_COMPUTE];
    for (int k = 0; k < N_COMPUTE; k++)
        d[k] = (x->pre[k][hi] - x->pre[k][lo]) * 1e3;
    /* a piece that cannot meet the limit without recomputation runs its backward ops with the
     * forward again (pp_costs_layer_rc_us): of all its layers for v > 1 (the stage recomputes
     * whole), for v = 1 at least the fractional bound of its cheapest set (rb_select; its
     * scratch is all the context it changes) */
    if (piece_forced(x, j, lo, hi)) {
        double add = x->v == 1 && x->sel_order ? rb_select((rb_ctx *)x, j, lo, hi, NULL, 1) : NAN;
        if (isnan(add)) /* recomputed whole */
            add = x->pre[K_F][hi] - x->pre[K_F][lo];
        add = isfinite(add) ? add * 1e3 : 0.0;
        d[K_B] += add;
        d[K_BI] += add;
    }
    double fpre = x->pre[K_F][lo] * 1e3, bpre = x->pre_bb[lo] * 1e3;
    double down = (x->pre[K_F][x->L] - x->pre[K_F][hi] + x->pre_bb[x->L] - x->pre_bb[hi]) * 1e3;
    double tpre = j >= 1 ? x->tl[lo - 1] + (j - 1) * x->tmin : 0.0;
    double tsuf = j <= x->P - 2 ? x->tl[hi - 1] + (x->P - 2 - j) * x->tmin : 0.0;
    down += 2 * tsuf;
    const rb_seq *q = &x->seq[j];
    double *val = x->val, t = fpre + tpre, best = 0.0;
    for (int i = 0; i < q->n; i++) {
        int k = q->kind[i];
        if (q->partner[i] >= 0)
            t = fmax(t, val[q->partner[i]] + down);
        t += d[k];
        val[i] = t;
        if (k == K_B || k == K_BI)
            best = fmax(best, t + bpre + tpre);
    }
    best = fmax(best, t);
    return (best + x->opt_ns) * BOUND_SAFETY;
}

/* ---- the stage bound (v > 1) ---- */

/* Builds each stage's op list over all its chunks for stage_bound: the links of a micro-batch's
 * forward (backward) from one chunk of the stage to the next round's chunk, and for each
 * input-gradient op and each chunk c the latest earlier FWD of chunk c from which a path
 * through all later pieces (the last piece running that FWD before this op's backward) leads
 * here. */
static pp_status extract_stage_paths(rb_ctx *x, const pp_schedule *sc)
{
    int M = sc->M, P = x->P, S = sc->S, v = x->v;
    pp_status st = PP_OK;
    int *lf = pp_alloc(sizeof(int) * (size_t)M), *lb = pp_alloc(sizeof(int) * (size_t)M);
    int *fidx = pp_alloc(sizeof(int) * (size_t)M * (size_t)v);
    int *bidx = pp_alloc(sizeof(int) * (size_t)M * (size_t)v);
    int *mbs = NULL;
    x->sseq = pp_alloc(sizeof(rb_sseq) * (size_t)S);
    int longest = 0;
    for (int s = 0; s < S; s++)
        longest = sc->n_instrs[s] > longest ? sc->n_instrs[s] : longest;
    mbs = pp_alloc(sizeof(int) * (size_t)(longest + 1));
    if (!lf || !lb || !fidx || !bidx || !mbs || !x->sseq) {
        st = PP_ERR(PP_ERR_NOMEM, "rebalance: out of memory for the stage bounds");
        goto done;
    }
    memset(x->sseq, 0, sizeof(rb_sseq) * (size_t)S);
    op_positions(sc, pp_schedule_piece_stage(sc, P - 1), pp_schedule_piece_chunk(sc, P - 1), lf,
                 lb);
    for (int s = 0; s < S; s++) {
        rb_sseq *q = &x->sseq[s];
        size_t n = (size_t)sc->n_instrs[s] + 1;
        q->kind = pp_alloc(n);
        q->chunk = pp_alloc(n);
        q->round = pp_alloc(sizeof(int32_t) * n);
        q->partner = pp_alloc(sizeof(int32_t) * n * (size_t)v);
        if (!q->kind || !q->chunk || !q->round || !q->partner) {
            st = PP_ERR(PP_ERR_NOMEM, "rebalance: out of memory for the stage bounds");
            goto done;
        }
        for (int i = 0; i < M * v; i++)
            fidx[i] = bidx[i] = -1;
        for (int i = 0; i < sc->n_instrs[s]; i++) {
            const pp_instr *in = &sc->instrs[s][i];
            int k = op_kind(in->op);
            if (k < 0 || in->chunk < 0 || in->chunk >= v || in->mb < 0 || in->mb >= M)
                continue;
            int n_ = q->n, c = in->chunk;
            q->kind[n_] = (uint8_t)k;
            q->chunk[n_] = (uint8_t)c;
            q->round[n_] = -1;
            mbs[n_] = in->mb;
            for (int c0 = 0; c0 < v; c0++)
                q->partner[(size_t)n_ * v + c0] = -1;
            if (k == K_F) {
                fidx[in->mb * v + c] = n_;
                if (c >= 1)
                    q->round[n_] = fidx[in->mb * v + c - 1];
            } else if (k == K_B || k == K_BI) {
                bidx[in->mb * v + c] = n_;
                if (c <= v - 2)
                    q->round[n_] = bidx[in->mb * v + c + 1];
                for (int c0 = 0; c0 < v; c0++)
                    for (int f = n_ - 1; f >= 0; f--)
                        if (q->kind[f] == K_F && q->chunk[f] == c0 && lf[mbs[f]] < lb[in->mb]) {
                            q->partner[(size_t)n_ * v + c0] = f;
                            break;
                        }
            }
            q->n++;
        }
    }
    x->fill_ok = 1;
    for (int s = 0; s < S; s++) {
        const rb_sseq *q = &x->sseq[s];
        int last = q->n - 1;
        if (q->n == 0 || q->kind[0] != K_F || q->chunk[0] != 0 || q->chunk[last] != 0 ||
            (q->kind[last] != K_B && q->kind[last] != K_BI))
            x->fill_ok = 0;
    }
done:
    pp_free(lf);
    pp_free(lb);
    pp_free(fidx);
    pp_free(bidx);
    pp_free(mbs);
    return st;
}

/* max without fmax's NaN rules (a library call in the hot loops; no NaN reaches them). */
static inline double dmax(double a, double b) { return a > b ? a : b; }
static inline double dmin(double a, double b) { return a < b ? a : b; }

/* Layers [a, b) of a prefix sum (us) in ns. */
static double span_ns(const double *pre, int a, int b) { return (pre[b] - pre[a]) * 1e3; }

/* Lower bound on the step time of partition b: the longest of a family of paths of the replay
 * that walk stage s's whole list, all its chunks, each op at its exact duration
 * (docs/rebalancer.md, "The stage bound"). A path enters at a FWD of chunk c through the
 * forwards of the layers before piece c·S+s; goes from FWD(m) of chunk c to FWD(m) of chunk c+1
 * through the pieces between them, and from the input-gradient op of chunk c+1 to that of chunk
 * c likewise; leaves after a FWD(m) through all later pieces and comes back at an
 * input-gradient op of m' (partner); and ends at the list's last op, after an input-gradient op
 * with the gradient's way down through the layers before the piece, or after a FWD with the
 * forward to the end and the backward of every layer. Transfers count t_min each. It reads
 * only the boundaries of stage s's own pieces, b[c·S+s] and b[c·S+s+1]. */
static double stage_bound(const rb_ctx *x, int s, const int *b)
{
    int S = x->S, v = x->v, P = x->P, L = x->L;
    double tm = x->tmin;
    const double *pf = x->pre[K_F], *pb = x->pre_bb;
    double dur[RB_MAX_V][N_COMPUTE], enter[RB_MAX_V], exitb[RB_MAX_V], exitf[RB_MAX_V],
        out[RB_MAX_V], back[RB_MAX_V], rf[RB_MAX_V], rbk[RB_MAX_V];
    for (int c = 0; c < v; c++) {
        int j = c * S + s, lo = b[j], hi = b[j + 1];
        for (int q = 0; q < N_COMPUTE; q++)
            dur[c][q] = (x->pre[q][hi] - x->pre[q][lo]) * 1e3;
        enter[c] = span_ns(pf, 0, lo) + j * tm;
        exitb[c] = span_ns(pb, 0, lo) + j * tm;
        out[c] = span_ns(pf, hi, L) + (P - 1 - j) * tm;
        back[c] = span_ns(pb, hi, L) + (P - 1 - j) * tm;
        exitf[c] = out[c] + span_ns(pb, 0, L) + (P - 1) * tm;
        /* pieces j-S+1 .. j-1 lie between chunk c-1 and c: layers [end of c-1, start of c) */
        rf[c] = c >= 1 ? span_ns(pf, b[j - S + 1], lo) + S * tm : 0.0;
        rbk[c] = c <= v - 2 ? span_ns(pb, hi, b[j + S]) + S * tm : 0.0;
    }
    const rb_sseq *q = &x->sseq[s];
    double *val = x->val, t = 0.0, best = 0.0;
    for (int i = 0; i < q->n; i++) {
        int kd = q->kind[i], c = q->chunk[i];
        double a = t;
        if (kd == K_F) {
            a = dmax(a, enter[c]);
            if (q->round[i] >= 0)
                a = dmax(a, val[q->round[i]] + rf[c]);
        } else if (kd == K_B || kd == K_BI) {
            if (q->round[i] >= 0)
                a = dmax(a, val[q->round[i]] + rbk[c]);
            const int32_t *pt = &q->partner[(size_t)i * v];
            for (int c0 = 0; c0 < v; c0++)
                if (pt[c0] >= 0)
                    a = dmax(a, val[pt[c0]] + out[c0] + back[c]);
        }
        t = a + dur[c][kd];
        val[i] = t;
        if (kd == K_B || kd == K_BI)
            best = dmax(best, t + exitb[c]);
        else if (kd == K_F)
            best = dmax(best, t + exitf[c]);
    }
    best = dmax(best, t);
    return (best + x->opt_ns) * BOUND_SAFETY;
}

/* ---- the bound of the first and the last stage together (v > 1) ---- */

static int is_end_piece(const rb_ctx *x, int j) { return j % x->S == 0 || j % x->S == x->S - 1; }

/* Index of an end piece among the 2v pieces of stages 0 and S-1. */
static int end_slot(const rb_ctx *x, int j) { return (j / x->S) * 2 + (j % x->S == 0 ? 0 : 1); }

/* Merges the compute ops of stages 0 and S-1 in the replay's order (every dependency first) and
 * links each FWD(m) to FWD(m) of the nearest earlier piece on those two stages and each
 * input-gradient op of m to that of the nearest later one. */
static pp_status extract_ends(rb_ctx *x)
{
    int S = x->S, P = x->P, M = x->M;
    rb_eseq *e = &x->ends;
    int n = 0;
    for (int i = 0; i < x->n_steps; i++)
        n += x->steps[i].kind != K_RECV && (x->steps[i].stage == 0 || x->steps[i].stage == S - 1);
    e->kind = pp_alloc((size_t)n + 1);
    e->piece = pp_alloc(sizeof(int32_t) * ((size_t)n + 1));
    e->prev = pp_alloc(sizeof(int32_t) * ((size_t)n + 1));
    e->hop = pp_alloc(sizeof(int32_t) * ((size_t)n + 1));
    e->val = pp_alloc(sizeof(double) * ((size_t)n + 1));
    size_t nslot = (size_t)M * 2 * (size_t)x->v;
    int *fidx = pp_alloc(sizeof(int) * nslot);
    int *bidx = pp_alloc(sizeof(int) * nslot);
    pp_status st = PP_OK;
    if (!e->kind || !e->piece || !e->prev || !e->hop || !e->val || !fidx || !bidx) {
        st = PP_ERR(PP_ERR_NOMEM, "rebalance: out of memory for the end stages' bound");
        goto done;
    }
    for (size_t i = 0; i < nslot; i++)
        fidx[i] = bidx[i] = -1;
    int last[2] = {-1, -1};
    for (int i = 0; i < x->n_steps; i++) {
        const rb_step *t = &x->steps[i];
        if (t->kind == K_RECV || (t->stage != 0 && t->stage != S - 1) || t->mb < 0 ||
            t->mb >= M || t->piece < 0 || t->piece >= P)
            continue;
        int k = e->n++, side = t->stage == 0 ? 0 : 1, j = t->piece;
        e->kind[k] = t->kind;
        e->piece[k] = j;
        e->prev[k] = last[side];
        e->hop[k] = -1;
        last[side] = k;
        if (t->kind == K_F) {
            int i0 = j - 1;
            while (i0 >= 0 && !is_end_piece(x, i0))
                i0--;
            if (i0 >= 0)
                e->hop[k] = fidx[(size_t)t->mb * 2 * x->v + end_slot(x, i0)];
            fidx[(size_t)t->mb * 2 * x->v + end_slot(x, j)] = k;
        } else if (t->kind == K_B || t->kind == K_BI) {
            int i0 = j + 1;
            while (i0 < P && !is_end_piece(x, i0))
                i0++;
            if (i0 < P)
                e->hop[k] = bidx[(size_t)t->mb * 2 * x->v + end_slot(x, i0)];
            bidx[(size_t)t->mb * 2 * x->v + end_slot(x, j)] = k;
        }
    }
done:
    pp_free(fidx);
    pp_free(bidx);
    return st;
}

/* Lower bound on the step time of partition b: the longest path over the ops of the first and
 * the last stage, each at its exact duration, in list order on each stage and linked by a
 * micro-batch's forward (backward) through the pieces between two of their pieces
 * (docs/rebalancer.md, "The end stages' bound"). Piece 0 and the last piece are on these stages,
 * so the path starts at time 0 and needs no entry or exit terms. Transfers count t_min each. It
 * reads the boundaries of those two stages' pieces only. */
static double ends_bound(const rb_ctx *x, const int *b)
{
    const rb_eseq *e = &x->ends;
    int P = x->P;
    double tm = x->tmin, best = 0.0;
    double *val = e->val;
    for (int i = 0; i < e->n; i++) {
        int j = e->piece[i], kd = e->kind[i];
        double a = e->prev[i] >= 0 ? val[e->prev[i]] : 0.0;
        int h = e->hop[i];
        if (h >= 0) {
            int i0 = e->piece[h];
            double w = kd == K_F ? span_ns(x->pre[K_F], b[i0 + 1], b[j]) + (j - i0) * tm
                                 : span_ns(x->pre_bb, b[j + 1], b[i0]) + (i0 - j) * tm;
            a = dmax(a, val[h] + w);
        }
        val[i] = a + (x->pre[kd][b[j + 1]] - x->pre[kd][b[j]]) * 1e3;
        best = dmax(best, val[i]);
    }
    (void)P;
    return (best + x->opt_ns) * BOUND_SAFETY;
}

static double *gcell(const rb_ctx *x, int j, int lo, int hi)
{
    return &x->G[((size_t)j * (x->L + 1) + lo) * (x->L + 1) + hi];
}

static double piece_bound(const rb_ctx *x, int j, int lo, int hi)
{
    return x->G ? *gcell(x, j, lo, hi) : piece_bound_dp(x, j, lo, hi);
}

/* Piece j = [lo, hi) alone already breaks the memory limit, recomputed or not where that is
 * allowed (for v > 1: its stage's memory is at least that of this one chunk). */
static int piece_over_limit(const rb_ctx *x, int j, int lo, int hi)
{
    if (!x->limit || piece_mem(x, j, lo, hi, 0, NULL) <= x->limit)
        return 0;
    if (!x->rc_ok)
        return 1;
    if (x->sel_order) { /* v = 1: no set of its layers can save enough, even fractionally */
        double add = rb_select((rb_ctx *)x, j, lo, hi, NULL, 1);
        if (!isnan(add))
            return isinf(add);
    }
    return piece_mem(x, j, lo, hi, 1, NULL) > x->limit;
}

/* Piece j = [lo, hi) breaks the limit without recomputation: its stage must recompute. */
static int piece_forced(const rb_ctx *x, int j, int lo, int hi)
{
    return x->limit && x->rc_ok && piece_mem(x, j, lo, hi, 0, NULL) > x->limit;
}

/* Tabulates piece_bound over every range a piece can hold, when the table is small enough. */
static void build_piece_table(rb_ctx *x)
{
    int L = x->L, P = x->P;
    if ((int64_t)P * (L + 1) * (L + 1) > MAX_PIECE_TABLE)
        return;
    x->G = pp_alloc(sizeof(double) * (size_t)P * (size_t)(L + 1) * (size_t)(L + 1));
    if (!x->G)
        return; /* computed on demand instead */
    for (int j = 0; j < P; j++)
        for (int lo = j; lo <= L - (P - j); lo++)
            for (int hi = lo + 1; hi <= L - (P - j - 1); hi++)
                *gcell(x, j, lo, hi) = piece_bound_dp(x, j, lo, hi);
}

static double *dcell(const rb_ctx *x, int k, int pos) { return &x->D[(size_t)k * (x->L + 1) + pos]; }

/* D[k][pos] = min over partitions of [pos, L) into pieces k .. P-1 of the largest piece_bound:
 * the best any completion can do against the bounds. +inf where none meets the limit. */
static void build_table(rb_ctx *x)
{
    int L = x->L, P = x->P;
    for (int pos = 0; pos <= L; pos++)
        *dcell(x, P, pos) = pos == L ? 0.0 : INFINITY;
    for (int k = P - 1; k >= 0; k--) {
        for (int pos = 0; pos <= L; pos++) {
            double best = INFINITY;
            int rest = P - k - 1;
            for (int e = pos + 1; e <= L - rest; e++) {
                double tail = *dcell(x, k + 1, e);
                if (tail >= best)
                    continue;
                if (piece_over_limit(x, k, pos, e))
                    continue;
                double g = fmax(piece_bound(x, k, pos, e), tail);
                if (g < best)
                    best = g;
            }
            *dcell(x, k, pos) = best;
        }
    }
}

/* ---- setup ---- */

static void lag_free(rb_lag *lg);
static void local_search(rb_ctx *x);

static void ctx_free(rb_ctx *x)
{
    pp_free(x->peak);
    pp_free(x->steps);
    pp_free(x->fin);
    pp_free(x->sprev);
    pp_free(x->last_step);
    lag_free(x->lag);
    pp_free(x->lag_fixed);
    pp_free(x->kid_cur);
    pp_free(x->kid_save);
    pp_free(x->clock);
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
    x->dur = pp_alloc(sizeof(double) * N_COMPUTE * (size_t)P);
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
             x->rcs;
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
    if ((st = compile_schedule(x, sc)) != PP_OK || (st = extract_paths(x, sc)) != PP_OK ||
        (st = build_mem_vectors(x, sc)) != PP_OK)
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
    if (x->v > 1 && ((st = extract_stage_paths(x, sc)) != PP_OK || (st = extract_ends(x)) != PP_OK))
        goto done;
    const pp_costs *c = x->c;
    x->opt_ns = pp_costs_op_us(c, PP_OP_OPT_STEP, 0, 0) * 1e3 * 1.0;
    x->tmin = INFINITY;
    for (int l = 0; l < L; l++) {
        const pp_layer_cost *ly = &c->layers[l];
        for (int k = 0; k < N_COMPUTE; k++)
            x->pre[k][l + 1] = x->pre[k][l] + layer_us(ly, k);
        x->pre_bb[l + 1] = x->pre_bb[l] + layer_us(ly, x->split ? K_BI : K_B);
        x->pre_param[l + 1] = add_sat(x->pre_param[l], ly->param_bytes);
        x->pre_act[l + 1] = add_sat(x->pre_act[l], mem_act(ly));
        x->pre_in[l + 1] = add_sat(x->pre_in[l], mem_input(c, l));
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
static int fits(rb_ctx *x, const int *b)
{
    return !x->limit || decide(x, b, x->rcs);
}

/* Scores a complete partition and keeps it if it is the best so far. */
static void offer(rb_ctx *x, const int *b)
{
    if (!fits(x, b)) /* which also leaves the stages' choices in x->rcs, x->rcmask */
        return;
    double t = evaluate_with(x, b, x->limit && x->rc_ok ? x->rcs : NULL);
    if (t < x->best_step) {
        x->best_step = t;
        memcpy(x->best, b, sizeof(int) * (size_t)(x->P + 1));
    }
}

/* ---- the path-mixture (Lagrangian) bound ---- */

/* A chain of the replay: a path of real dependencies (list order on a stage, a message) that
 * starts at time 0. Its length on any partition is the sum of its compute ops' durations and
 * its messages' transfers, each a difference of prefix sums at the two boundaries of its piece
 * or the transfer of one boundary, so it is linear in per-boundary terms, and at most the
 * barrier of that partition. A chain is kept as its counts: coef[t * P + p] ops of kind t of
 * piece p, coef[4 * P + q] messages across boundary q (between pieces q and q + 1). */
#define LAG_NC(P) (5 * (size_t)(P))
/* The chain bound is computed from prefix sums with coefficients up to a few hundred, in another
 * order than the replay: scaled by this much it stays below the mixture it bounds. */
#define LAG_SAFETY (1.0 - 1e-9)

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
            clk = fmax(clk, (t->dep >= 0 ? x->fin[t->dep] : 0.0) + x->tr[t->q]);
        else
            clk += x->dur[t->kind * x->P + t->piece];
        x->fin[i] = clk;
        x->clock[t->stage] = clk;
    }
    int s_end = 0;
    for (int s = 1; s < x->S; s++)
        if (x->clock[s] > x->clock[s_end])
            s_end = s;
    memset(coef, 0, sizeof(double) * LAG_NC(x->P));
    int i = x->last_step[s_end];
    while (i >= 0) {
        const rb_step *t = &x->steps[i];
        int pv = x->sprev[i];
        if (t->kind != K_RECV) {
            coef[t->kind * x->P + t->piece] += 1.0;
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
    return x->clock[s_end];
}

/* Fills x->dur and x->tr with partition b's durations (evaluate's). */
static void fill_durations(rb_ctx *x, const int *b)
{
    for (int p = 0; p < x->P; p++) {
        for (int k = 0; k < N_COMPUTE; k++)
            x->dur[k * x->P + p] = pp_costs_op_us(x->c, k_kind_op[k], b[p], b[p + 1]) * 1e3;
        if (p < x->P - 1)
            x->tr[p] = x->tl[b[p + 1] - 1];
    }
}

/* A chain's length on partition b (without the optimizer step). */
static double chain_len(const rb_ctx *x, const double *coef, const int *b)
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
    return t;
}

/* The per-boundary cost of a mixture of chains with aggregated counts `agg` (weights summing to
 * 1): boundary k (1 .. P-1) at layer pos costs
 *   H_k(pos) = sum_t (agg[t][k-1] - agg[t][k]) W_t(pos) + agg_msg[k-1] t(pos),
 * and the rest is the constant sum_t agg[t][P-1] W_t(L). */
static double lag_h(const rb_ctx *x, const double *agg, int k, int pos)
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
    return h;
}

static double lag_const(const rb_ctx *x, const double *agg)
{
    double c = 0.0;
    for (int t = 0; t < N_COMPUTE; t++)
        c += agg[(size_t)t * x->P + x->P - 1] * x->pre[t][x->L] * 1e3;
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
        int ok = pos < L && (!cut || (pos >= P - 1 && piece_bound(x, P - 1, pos, L) < lg->cut));
        LG(P - 1, pos) = ok ? 0.0 : INFINITY;
        LA(P - 1, pos) = L;
    }
    for (int k = P - 2; k >= 0; k--) {
        int elo, ehi;
        lag_range(x, lg, k + 1, &elo, &ehi);
        double m = INFINITY;
        int am = -1;
        /* without the cut: a suffix minimum over e > pos; with it, e runs from pos + 1 until
         * the piece [pos, e) reaches the cut (a longer piece's bound is no smaller) */
        for (int pos = L; pos >= 0; pos--) {
            if (cut) {
                m = INFINITY;
                am = -1;
            }
            for (int e = cut ? (elo > pos + 1 ? elo : pos + 1) : pos + 1;
                 e <= ehi && e >= elo && (!cut || pos >= k); e++) {
                if (cut && !(piece_bound(x, k, pos, e) < lg->cut))
                    break;
                double v = lag_h(x, lg->agg, k + 1, e) + lg->lin[k + 1] * e + LG(k + 1, e);
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
static double lag_node_bound(const rb_ctx *x, const rb_lag *lg, int k, int pos, double fixed_h)
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

/* Solves the matrix game max over mixtures u of rows, min over columns j, of sum_i u_i K[i][j]
 * (m rows, n columns, row stride ld, every entry > 0), the columns' mixture y also held to
 * sum_j y_j Q[r][j] <= 0 for q more rows (stride ld; q = 0: a plain game), by the simplex method
 * on
 *   max sum_j w_j  subject to  sum_j K[i][j] w_j <= 1 (each i),  sum_j Q[r][j] w_j <= 0 (each
 *   r),  w >= 0
 * (the slacks are a feasible start; the K rows keep it bounded), whose optimum is 1 / value; the
 * column player's mixture is w / sum w, the row player's the duals of the K rows normalised to
 * sum 1, and the Q rows' duals on the same scale are their multipliers: for every column j,
 * sum_i lam_i K[i][j] + sum_r lam_{m+r} Q[r][j] >= value. Writes lam[m + q] and y[n]; returns
 * 0, or -1 when the pivots ran out (then lam is uniform over the K rows, 0 on the Q rows, and y
 * uniform), -2 when no mixture of the columns meets the Q rows (w = 0 is the only solution). */
static int solve_game(const double *K, const double *Q, int ld, int m, int q, int n, double *lam,
                      double *y, double *tab, int *basis)
{
    int R = m + q, W = n + R + 1; /* columns: w, slacks, right-hand side */
#define TB(r, c) tab[(size_t)(r) * W + (c)]
    for (int i = 0; i < R; i++) {
        const double *src = i < m ? &K[(size_t)i * ld] : &Q[(size_t)(i - m) * ld];
        for (int j = 0; j < n; j++)
            TB(i, j) = src[j];
        for (int j = 0; j < R; j++)
            TB(i, n + j) = i == j ? 1.0 : 0.0;
        TB(i, W - 1) = i < m ? 1.0 : 0.0;
        basis[i] = n + i;
    }
    for (int j = 0; j < W; j++)
        TB(R, j) = j < n ? -1.0 : 0.0;
    int ok = 0;
    for (int it = 0, limit = 50 * (R + n) + 100; it < limit; it++) {
        int bland = it > 10 * (R + n);
        int e = -1;
        double most = -1e-11;
        for (int j = 0; j < n + R; j++)
            if (TB(R, j) < most) {
                e = j;
                if (bland)
                    break;
                most = TB(R, j);
            }
        if (e < 0) {
            ok = 1;
            break;
        }
        int r = -1;
        double ratio = INFINITY;
        for (int i = 0; i < R; i++)
            if (TB(i, e) > 1e-12) {
                double qt = TB(i, W - 1) / TB(i, e);
                if (qt < ratio || (qt == ratio && r >= 0 && basis[i] < basis[r])) {
                    ratio = qt;
                    r = i;
                }
            }
        if (r < 0)
            break; /* unbounded: not while every column meets a K row */
        double pv = TB(r, e);
        for (int j = 0; j < W; j++)
            TB(r, j) /= pv;
        for (int i = 0; i <= R; i++) {
            double f = TB(i, e);
            if (i == r || f == 0.0)
                continue;
            for (int j = 0; j < W; j++)
                TB(i, j) -= f * TB(r, j);
        }
        basis[r] = e;
    }
    double su = 0.0, sw = 0.0;
    if (ok) {
        for (int j = 0; j < n; j++)
            y[j] = 0.0;
        for (int i = 0; i < R; i++)
            if (basis[i] < n)
                y[basis[i]] = fmax(TB(i, W - 1), 0.0);
        for (int i = 0; i < R; i++)
            lam[i] = fmax(TB(R, n + i), 0.0);
        for (int i = 0; i < m; i++)
            su += lam[i];
        for (int j = 0; j < n; j++)
            sw += y[j];
    }
    if (!ok || !(su > 0) || !(sw > 0)) {
        for (int i = 0; i < R; i++)
            lam[i] = i < m ? 1.0 / m : 0.0;
        for (int j = 0; j < n; j++)
            y[j] = 1.0 / n;
        return ok && !(sw > 0) && q > 0 ? -2 : -1;
    }
    for (int i = 0; i < R; i++)
        lam[i] /= su;
    for (int j = 0; j < n; j++)
        y[j] /= sw;
    return 0;
#undef TB
}

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
        lg->len[(size_t)i * LAG_MAX + j] = chain_len(x, &lg->chain[(size_t)i * LAG_NC(x->P)], b);
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
    for (int j = 0; j < lg->n; j++)
        lg->len[(size_t)i * LAG_MAX + j] =
            chain_len(x, lg->coef, &lg->part[(size_t)j * ((size_t)x->P + 1)]);
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
    int m2 = 0, n2 = 0;
    for (int i = 0; i < lg->m; i++)
        if (lg->lam[i] > 0)
            ri[m2++] = i;
    for (int i = 0; i < m2; i++) {
        memmove(&lg->chain[(size_t)i * nc], &lg->chain[(size_t)ri[i] * nc], sizeof(double) * nc);
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
static void lag_solve(rb_ctx *x, rb_lag *lg, uint64_t deadline, int rounds)
{
    int P = x->P;
    size_t nc = LAG_NC(P), nb = (size_t)P + 1;
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
        double kmin = INFINITY, kmax = 0.0;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double v = lg->len[(size_t)i * LAG_MAX + j];
                kmin = fmin(kmin, v);
                kmax = fmax(kmax, v);
            }
        double sc = kmax > 0 ? 1.0 / kmax : 1.0;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                lg->K[(size_t)i * LAG_MAX + j] =
                    (lg->len[(size_t)i * LAG_MAX + j] - kmin) * sc + 0.05;
        for (int r = 0; r < lg->q; r++)
            for (int j = 0; j < n; j++)
                lg->Q[(size_t)r * LAG_MAX + j] =
                    lag_cons_value(x, &lg->cs[3 * r], &lg->part[(size_t)j * nb]);
        int infeasible = solve_game(lg->K, lg->Q, LAG_MAX, m, lg->q, n, lg->lam, lg->y, lg->tab,
                                    lg->basis) == -2;
        if (!infeasible || !have_agg) {
            memset(lg->agg, 0, sizeof(double) * nc);
            for (int i = 0; i < m; i++)
                for (size_t q = 0; q < nc; q++)
                    lg->agg[q] += lg->lam[i] * lg->chain[(size_t)i * nc + q];
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
                lg->mu[r] = lg->mu[r] > 0 ? 2 * lg->mu[r] : kmax / x->L;
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
        offer(x, b);
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
        for (int j = 0; j < n; j++) {
            if (lg->y[j] <= 0)
                continue;
            fill_durations(x, &lg->part[(size_t)j * nb]);
            for (size_t q = 0; q < (size_t)(N_COMPUTE * P); q++)
                lg->mdur[q] += lg->y[j] * x->dur[q];
            for (int q = 0; q + 1 < P; q++)
                lg->mtr[q] += lg->y[j] * x->tr[q];
        }
        memcpy(x->dur, lg->mdur, sizeof(double) * (size_t)(N_COMPUTE * P));
        memcpy(x->tr, lg->mtr, sizeof(double) * (size_t)P);
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

static void lag_free(rb_lag *lg)
{
    if (!lg)
        return;
    pp_free(lg->chain);
    pp_free(lg->part);
    pp_free(lg->len);
    pp_free(lg->K);
    pp_free(lg->tab);
    pp_free(lg->basis);
    pp_free(lg->lam);
    pp_free(lg->Q);
    pp_free(lg->lin);
    pp_free(lg->mu);
    pp_free(lg->viol);
    pp_free(lg->y);
    pp_free(lg->agg);
    pp_free(lg->best_agg);
    pp_free(lg->coef);
    pp_free(lg->mdur);
    pp_free(lg->mtr);
    pp_free(lg->G);
    pp_free(lg->arg);
    pp_free(lg);
}

static rb_lag *lag_new(const rb_ctx *x)
{
    rb_lag *lg = pp_alloc(sizeof *lg);
    if (!lg)
        return NULL;
    memset(lg, 0, sizeof *lg);
    size_t nc = LAG_NC(x->P), LM = LAG_MAX, QM = LAG_QMAX;
    size_t tw = (LM + QM + 1) * (2 * LM + QM + 1);
    size_t gt = (size_t)x->P * ((size_t)x->L + 1);
    lg->chain = pp_alloc(sizeof(double) * LM * nc);
    lg->part = pp_alloc(sizeof(int) * LM * ((size_t)x->P + 1));
    lg->len = pp_alloc(sizeof(double) * LM * LM);
    lg->K = pp_alloc(sizeof(double) * LM * LM);
    lg->tab = pp_alloc(sizeof(double) * tw);
    lg->basis = pp_alloc(sizeof(int) * (LM + QM));
    lg->lam = pp_alloc(sizeof(double) * (LM + QM));
    lg->Q = pp_alloc(sizeof(double) * QM * LM);
    lg->mu = pp_alloc(sizeof(double) * QM);
    lg->viol = pp_alloc(QM);
    lg->lin = pp_alloc(sizeof(double) * ((size_t)x->P + 1));
    lg->y = pp_alloc(sizeof(double) * LM);
    lg->agg = pp_alloc(sizeof(double) * nc);
    lg->best_agg = pp_alloc(sizeof(double) * nc);
    lg->coef = pp_alloc(sizeof(double) * nc);
    lg->mdur = pp_alloc(sizeof(double) * N_COMPUTE * (size_t)x->P);
    lg->mtr = pp_alloc(sizeof(double) * (size_t)x->P);
    lg->G = pp_alloc(sizeof(double) * gt);
    lg->arg = pp_alloc(sizeof(int) * gt);
    if (!lg->chain || !lg->part || !lg->len || !lg->K || !lg->tab || !lg->basis || !lg->lam ||
        !lg->y || !lg->agg || !lg->best_agg || !lg->coef || !lg->mdur || !lg->mtr || !lg->G ||
        !lg->arg || !lg->Q || !lg->lin || !lg->mu || !lg->viol) {
        lag_free(lg);
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

/* ---- the search ---- */

static int over_time(rb_ctx *x)
{
    if (x->aborted)
        return 1;
    if (x->deadline && (x->nodes & 255) == 0 && pp_now_ns() > x->deadline)
        x->aborted = 1;
    return x->aborted;
}

/* Expands the node whose pieces 0 .. k-1 are fixed (x->bounds[0 .. k]) with bound `nb`.
 * Returns the smallest bound of the nodes left unexplored below it when the time budget ran
 * out, +inf when the subtree was searched to the end. */
static double cutoff(const rb_ctx *x) { return x->best_step * (1.0 - PRUNE_TOL); }

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
        uint64_t d, m = piece_mem(x, k, pos, e, r, &d);
        if (r == 0)
            *fixed = add_sat(x->stage_fixed[s], m - d);
        dyn[r] = d > x->stage_dyn[r][s] ? d : x->stage_dyn[r][s];
    }
}

static int stage_over_limit(const rb_ctx *x, int k, int pos, int e)
{
    uint64_t fixed, dyn[2] = {0, 0};
    piece_fix_terms(x, k, pos, e, &fixed, dyn);
    if (add_sat(fixed, dyn[0]) <= x->limit)
        return 0;
    return !x->rc_ok || add_sat(fixed, dyn[1]) > x->limit;
}

static void stage_fix_piece(rb_ctx *x, int k, int pos, int e)
{
    uint64_t fixed, dyn[2] = {0, 0};
    piece_fix_terms(x, k, pos, e, &fixed, dyn);
    int s = k % x->S;
    x->stage_fixed[s] = fixed;
    x->stage_dyn[0][s] = dyn[0];
    x->stage_dyn[1][s] = dyn[1];
}

static double search(rb_ctx *x, int k, double nb)
{
    int L = x->L, P = x->P, S = x->S, pos = x->bounds[k];
    x->nodes++;
    if (over_time(x))
        return nb;
    if (k == P - 1) {
        x->bounds[P] = L;
        if (!piece_over_limit(x, k, pos, L))
            offer(x, x->bounds);
        return INFINITY;
    }
    rb_child *kids = &x->kids[(size_t)k * (L + 1)];
    int n = 0, s = k % S;
    double share = load_us(x, pos, L) / (P - k);
    for (int e = pos + 1; e <= L - (P - k - 1); e++) {
        double tail = *dcell(x, k + 1, e);
        if (tail >= cutoff(x) || piece_over_limit(x, k, pos, e))
            continue;
        double b = fmax(fmax(nb, tail), piece_bound(x, k, pos, e));
        double lh = 0.0;
        if (x->lag) {
            /* the chain mixture with boundaries 1 .. k+1 fixed, the rest at their best */
            lh = x->lag_fixed[k] + lag_h(x, x->lag->agg, k + 1, e);
            b = fmax(b, lag_node_bound(x, x->lag, k + 1, e, lh));
        }
        if (x->v > 1) {
            /* the stage runs all ops of its fixed chunks one after another */
            double d[N_COMPUTE];
            for (int q = 0; q < N_COMPUTE; q++)
                d[q] = (x->pre[q][e] - x->pre[q][pos]) * 1e3;
            double work = x->stage_work[s] + dot(x->seq[k].total, d);
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
            x->stage_work[s] += dot(x->seq[k].total, d);
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
    return dot(total, d);
}

/* The part of stage s's fill-and-drain path outside its list when its first piece starts at
 * layer `lo`: the forward of layers [0, lo) to its first FWD and the gradient of its last op (a
 * backward of chunk 0, interleaved) down through them, with the transfers of s boundaries each
 * way. It grows with lo. */
static double fill_drain_ns(const rb_ctx *x, int s, int lo)
{
    return (x->pre[K_F][lo] + x->pre_bb[lo]) * 1e3 + 2.0 * s * x->tmin;
}

/* Labels of the first stage's choices that the pair DP carries to the last stage for ends_bound;
 * the last label stands for every choice beyond the others (no ends_bound for it). */
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
            double best = -INFINITY, f = fill_drain_ns(x, s, pos);
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
                m = dmin(m, lag_h(x, lg->agg, k + 1, e) + GX(k + 1, e));
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
            lag0 = lg->c0 + lag_h(x, lg->agg, S, R) + x->opt_ns;
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
                double fill = fill_drain_ns(x, s, xs);
                for (int x2 = xlo; x2 <= xhi; x2++) {
                    double w0 = piece_work_ns(x, q0->total, xs, x2);
                    if ((fill + w0 + x->opt_ns) * BOUND_SAFETY >= cut)
                        break; /* grows with x2 */
                    double later = rest ? fill_drain_ns(x, s + 1, x2) : 0.0;
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
                            gnew += lag_h(x, lg->agg, s + 1, x2) + lag_h(x, lg->agg, S + s + 1, y2);
                            double togo = w->gx[(size_t)(s + 1) * (L + 1) + x2] +
                                          lg->G[(size_t)(S + s + 1) * (L + 1) + y2];
                            if ((lag0 + gnew + togo) * LAG_SAFETY >= cut)
                                continue;
                        }
                        w->tb[s] = xs;
                        w->tb[s + 1] = x2;
                        w->tb[S + s] = ys;
                        w->tb[S + s + 1] = y2;
                        if (x->limit && stage_mem(x, s, w->tb, 0) > x->limit &&
                            (!x->rc_ok || stage_mem(x, s, w->tb, 1) > x->limit))
                            continue; /* this stage's two chunks are both fixed: exact */
                        double nv = dmax(val, dmax(piece_bound(x, s, xs, x2),
                                                   piece_bound(x, S + s, ys, y2)));
                        if (nv >= cut)
                            continue;
                        nv = dmax(nv, stage_bound(x, s, w->tb));
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
                                e = fmin(e, dmax(nv, ends_bound(x, w->tb)));
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
        offer(x, w->tb);
    }
    return best;
}

/* For v = 2, stage s's stage bound depends on its two pieces only: [b_s, b_{s+1}) and
 * [b_{S+s}, b_{S+s+1}). So, for each first layer R = b_S of the second round, the least value
 * over all partitions of max_s stage_bound (and of the piece bounds) is a DP over stages whose
 * state after stage s is the pair (b_{s+1}, b_{S+s+1}). States are dropped when their bounds
 * reach a cut T: a stage whose fill, busy time and drain reach it, a state whose later stages
 * must (their average remaining work after the fill up to x2), a stage whose bound does. A pass
 * that keeps no partition proves the minimum at T or above; T starts at the root bound and grows
 * by 1% until a pass keeps one (then its value is the minimum) or T reaches the incumbent. Each
 * R's best partition is offered as an incumbent. Returns the proven lower bound on the optimum,
 * or -1 when the DP does not apply (v != 2, tables too large, out of memory) or ran out of
 * time. */
static int pair_dp_applies(const rb_ctx *x)
{
    int64_t ns = (int64_t)(x->L + 1) * (x->L + 1);
    return x->v == 2 && x->sseq && x->fill_ok && ns <= MAX_PAIR_STATES &&
           (int64_t)(x->S + 1) * ns <= MAX_PAIR_TABLE;
}

static double pair_dp(rb_ctx *x, double root)
{
    int S = x->S, L = x->L, P = x->P;
    if (!pair_dp_applies(x))
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

/* Local moves (local_search) from partition b (simulated to kb); keeps the result when it beats
 * the incumbent. `save` is scratch of P + 1 entries. */
static void search_from(rb_ctx *x, const int *b, double kb, int *save)
{
    size_t nb = (size_t)x->P + 1;
    if (!fits(x, b))
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
    search_from(x, cur, evaluate(x, cur), save);
}

/* Incumbents from the chain mixture, until `deadline`: local moves from the mixture's average
 * boundaries (rounded, kept increasing) and from each partition of its support, best simulated
 * first (partitions good on average against the chains, often bad alone); then, while time
 * remains, from the incumbent with a few random run moves applied (seeded: an iterated local
 * search). */
static void lag_starts(rb_ctx *x, rb_lag *lg, uint64_t deadline)
{
    int P = x->P;
    size_t nb = (size_t)P + 1;
    int *save = x->kid_save, *cur = x->kid_cur; /* lag_setup's scratch */
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
        double t = evaluate(x, &lg->part[(size_t)j * nb]);
        int i = n++;
        while (i > 0 && key[i - 1] > t) {
            key[i] = key[i - 1];
            ord[i] = ord[i - 1];
            i--;
        }
        key[i] = t;
        ord[i] = j;
    }
    for (int i = 0; i < n && pp_now_ns() < deadline; i++)
        search_from(x, &lg->part[(size_t)ord[i] * nb], key[i], save);
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
        search_from(x, cur, evaluate(x, cur), save);
        if (x->best_step < before * (1 - PRUNE_TOL))
            stall = -1;
    }
done:
    x->deadline = full;
    pp_free(key);
    pp_free(ord);
}

/* ---- branching on the mixture (v > 1) ---- */

/* A node of lag_branch: the partitions whose boundary k lies in lo[k] .. hi[k] and whose stage s
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

/* How to split a node: the layer count of a stage (kind 1) where the mixture's average is
 * furthest from whole, else the boundary (kind 0) on whose position its partitions disagree
 * most (weighted variance); the children take "<= at" and "> at". Returns 0 when the mixture is
 * one partition (nothing to split). */
static int lag_split(const rb_ctx *x, const lag_node *nd, int *kind, int *idx, int *at)
{
    size_t nb = (size_t)x->P + 1;
    const int *lo = nd->lim, *hi = lo + nb, *cmin = hi + nb, *cmax = cmin + x->S;
    double sw = 0.0;
    for (int j = 0; j < nd->n; j++)
        sw += nd->w[j];
    if (!(sw > 0))
        return 0;
    int q = 0; /* constraint rows the node has */
    for (int s = 0; s < x->S; s++)
        q += (cmin[s] > 0) + (cmax[s] < x->L);
    double most = 1e-6;
    int found = 0;
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
            found = 1;
            *kind = 1;
            *idx = s;
            *at = a;
        }
    }
    if (found)
        return 1;
    most = 1e-9;
    for (int k = 1; k < x->P; k++) {
        double m1 = 0.0, m2 = 0.0;
        for (int j = 0; j < nd->n; j++) {
            double b = nd->part[(size_t)j * nb + (size_t)k];
            m1 += nd->w[j] * b;
            m2 += nd->w[j] * b * b;
        }
        m1 /= sw;
        double var = m2 / sw - m1 * m1;
        int a = (int)floor(m1);
        a = a < lo[k] ? lo[k] : a >= hi[k] ? hi[k] - 1 : a;
        if (var > most && a >= lo[k]) {
            most = var;
            found = 1;
            *kind = 0;
            *idx = k;
            *at = a;
        }
    }
    return found;
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
    lag_solve(x, lg, deadline, rounds);
}

#define LAG_NODES 4096
#define LAG_NODE_BYTES ((size_t)64 << 20) /* the open nodes' supports, at most */

/* A node is closed when its value reaches the incumbent's cutoff up to the mixture bound's own
 * safety factor (a node whose relaxation equals the incumbent's step is then closed, not kept
 * open by rounding). */
static double lag_cut(const rb_ctx *x) { return cutoff(x) * LAG_SAFETY; }

/* Branch and bound on the path-mixture relaxation (v > 1). The mixture's value over all
 * partitions (x->lag) is in effect that of a partition with fractional layers: its partitions
 * average to stages of fractional layer counts. Each node splits on the count of the stage whose
 * average is furthest from whole (at most c, or at least c + 1 layers: a constraint on the
 * mixture, priced into the DP by its multiplier), and when every count is whole, on the range of
 * the boundary its partitions disagree on most; every partition lies in one child, and each
 * child's restricted game bounds its partitions. Best-first (the least value next), until
 * `deadline` or until every open node reaches the incumbent's cutoff; the restricted games' best
 * responses are offered as incumbents on the way, and pieces whose own bound reaches the cutoff
 * are left out of the DP. Returns the least value over the open nodes, a proven lower bound on
 * every partition's step, or the cutoff when none is left open. */
static double lag_branch(rb_ctx *x, uint64_t deadline, int max_splits, int *closed)
{
    int P = x->P, S = x->S;
    size_t nb = (size_t)P + 1, nl = LAG_LIMS(x);
    rb_lag *lg = lag_new(x);
    lag_node *open = pp_alloc(sizeof(lag_node) * LAG_NODES);
    int *lim = pp_alloc(sizeof(int) * nl), *cs = pp_alloc(sizeof(int) * 3 * LAG_QMAX);
    int n_open = 0;
    double result = x->lag ? x->lag->bound : 0.0;
    *closed = 0;
    if (!lg || !open || !lim || !cs || !x->lag)
        goto done;
    /* the nodes' games: their support is about P + 1 chains and partitions, and a smaller
     * tableau solves faster; a bound within a microsecond per millisecond of its game's value
     * is enough to order the nodes */
    lg->cap = P + 16 < LAG_MAX ? P + 16 : LAG_MAX;
    lg->tol = 1e-3;
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
    for (int split = 0; n_open > 0 && (!deadline || pp_now_ns() < deadline) &&
                        (!max_splits || split < max_splits);
         split++) {
        int pick = -1;
        for (int i = 0; i < n_open; i++)
            if (open[i].resolved < 2 && (pick < 0 || open[i].value < open[pick].value))
                pick = i;
        if (pick < 0 || !(open[pick].value < lag_cut(x)))
            break; /* every open node is at the incumbent or above, or set aside */
        int kind = 0, idx = 0, at = 0;
        if (!lag_split(x, &open[pick], &kind, &idx, &at)) {
            /* its last game's mixture is one partition: the game was stopped by the tolerance
             * with the oracle's two sides apart; solve it again to the end, from its support */
            lag_node *nd = &open[pick], again;
            if (nd->resolved) {
                nd->resolved = 2; /* still one partition: set aside, its value stays a bound */
                continue;
            }
            lg->enough = lag_cut(x);
            lg->cut = cutoff(x);
            lg->tol = 1e-6;
            memcpy(lim, nd->lim, sizeof(int) * nl);
            lag_solve_node(x, lg, nd, lim, cs, deadline, 400);
            lg->tol = 1e-3;
            if (lag_node_take(x, lg, lim, fmax(nd->value, lg->bound), &again) != 0)
                break;
            held += again.bytes - nd->bytes;
            lag_node_free(nd);
            *nd = again;
            nd->resolved = 1;
            continue;
        }
        lag_node nd = open[pick];
        open[pick] = open[--n_open];
        int n_kids = 0, failed = 0;
        lag_node kids[2];
        for (int side = 0; side < 2; side++) {
            memcpy(lim, nd.lim, sizeof(int) * nl);
            if (kind == 0)
                (side == 0 ? hi : lo)[idx] = side == 0 ? at : at + 1;
            else
                (side == 0 ? cmax : cmin)[idx] = side == 0 ? at : at + 1;
            lg->enough = lag_cut(x);
            lg->cut = cutoff(x);
            lag_solve_node(x, lg, &nd, lim, cs, deadline, 400);
            double v = fmax(nd.value, lg->bound);
            /* the children's average partitions, rounded and polished by the local moves, are
             * good incumbents (whole stage counts where the node fixed them) */
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
    lag_free(lg);
    return result;
}

/* For v > 1: the chain mixture's bound (lag_solve) on at most 35% of the budget (3 s without
 * one); raises the root bound and gives the search its node bound (x->lag). Skipped when out of
 * memory (only a bound). */
static void lag_setup(rb_ctx *x, double *root)
{
    x->lag = lag_new(x);
    x->lag_fixed = pp_alloc(sizeof(double) * ((size_t)x->P + 1));
    x->kid_cur = pp_alloc(sizeof(int) * ((size_t)x->P + 1));
    x->kid_save = pp_alloc(sizeof(int) * ((size_t)x->P + 1));
    if (!x->lag || !x->lag_fixed || !x->kid_cur || !x->kid_save) {
        lag_free(x->lag);
        x->lag = NULL;
        return;
    }
    uint64_t now = pp_now_ns(), left = x->deadline > now ? x->deadline - now : 0;
    uint64_t dl = x->deadline ? now + left * 7 / 20 : now + 3000000000ull;
    lag_solve(x, x->lag, dl, 4000);
    *root = fmax(*root, x->lag->bound);

    x->lag_fixed[0] = 0.0;
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
            if (!isfinite(tail) || piece_over_limit(x, k, pos, e))
                continue;
            double g = fmax(piece_bound(x, k, pos, e), tail);
            if (g < best) {
                best = g;
                arg = e;
            }
        }
        if (arg < 0)
            return;
        b[k + 1] = arg;
    }
    offer(x, b);
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
                if (piece_over_limit(x, k, pos, e))
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
        offer(x, x->bounds);
    }
#undef TI
done:
    pp_free(T);
    pp_free(arg);
}

/* Moves single boundaries by one layer while that shortens the simulated step. */
/* With v > 1 the moves are runs: boundaries q1 .. q2 all move by one layer, which hands a layer
 * from piece q1 - 1 to piece q2 (or back) and shifts the pieces between: interleaved stages hold
 * pieces far apart, and balancing them needs such moves. */
static void local_search(rb_ctx *x)
{
    if (!isfinite(x->best_step))
        return;
    int *b = x->bounds, P = x->P, span = x->v > 1 ? P - 1 : 1;
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
                    double before = x->best_step;
                    offer(x, b);
                    improved |= x->best_step < before;
                }
            }
            if (x->deadline && pp_now_ns() > x->deadline)
                return;
        }
    }
}

/* ---- the smallest achievable largest stage memory, for the message when nothing fits ---- */

/* v = 1: exact min-max over contiguous pieces. v > 1: the same over pieces, each charged alone
 * (a lower bound on the stages' memory). */
static uint64_t min_max_memory(const rb_ctx *x)
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
                uint64_t m = piece_mem(x, k, pos, e, 0, NULL);
                if (x->rc_ok) {
                    uint64_t m1 = piece_mem(x, k, pos, e, 1, NULL);
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
    build_piece_table(&x);
    build_table(&x);
    double root = *dcell(&x, 0, 0);
    r->even_step_ns = -1.0;
    pp_partition even;
    if (pp_partition_even(x.L, x.S, x.v, &even) == PP_OK) {
        r->even_step_ns = evaluate_with(&x, even.bounds, NULL);
        offer(&x, even.bounds);
        pp_partition_free(&even);
    }
    if (isfinite(root)) {
        seed_from_table(&x);
        seed_min_max_load(&x);
        local_search(&x);
        double pair = -1.0;
        int proven = 0;
        if (x.v > 1) {
            lag_setup(&x, &root);
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
                    /* v = 2: incumbents until 40% of what is left, the mixture's branch and
                     * bound (which finds better ones too) until 95%; v > 2: incumbents until
                     * 85% (their nodes' games solve too slowly to pay, docs/rebalancer.md) */
                    uint64_t left = full > now ? full - now : 0;
                    int branch = x.v == 2;
                    lag_starts(&x, x.lag,
                               full ? now + left / 20 * (branch ? 8 : 17)
                                    : now + (branch ? 1000000000ull : 2000000000ull));
                    if (branch) {
                        int closed;
                        root = fmax(root, lag_branch(&x, full ? now + left / 20 * 19
                                                              : now + 3000000000ull, 0, &closed));
                        proven = closed;
                    }
                }
                if (!proven && pair_dp_applies(&x)) {
                    pair = pair_dp(&x, root);
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
        uint64_t m = min_max_memory(&x);
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
    decide(&x, x.best, x.rcs);
    if (x.rcmask)
        memcpy(r->recompute, x.rcmask, (size_t)x.L);
    for (int s = 0; s < x.S; s++) {
        rb_cmem ch[RB_MAX_V];
        uint64_t fixed = 0;
        for (int k = 0; k < x.v; k++) {
            int j = k * x.S + s;
            chunk_mem_masked(&x, j, x.best[j], x.best[j + 1], x.rcs[s] ? r->recompute : NULL,
                             &ch[k]);
            fixed = add_sat(fixed, ch[k].fixed);
        }
        r->stage_memory_bytes[s] = add_sat(fixed, mvec_peak(&x.mv[s], ch));
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
        *step_ns = evaluate(&x, p->bounds);
    if (bound_ns) {
        double b = 0.0;
        for (int j = 0; j < x.P; j++)
            b = fmax(b, piece_bound(&x, j, p->bounds[j], p->bounds[j + 1]));
        for (int s = 0; s < x.S; s++) {
            double work = 0.0;
            for (int ch = 0; ch < x.v; ch++) {
                int j = ch * x.S + s;
                double d[N_COMPUTE];
                for (int q = 0; q < N_COMPUTE; q++)
                    d[q] = (x.pre[q][p->bounds[j + 1]] - x.pre[q][p->bounds[j]]) * 1e3;
                work += dot(x.seq[j].total, d);
            }
            b = fmax(b, (work + x.opt_ns) * BOUND_SAFETY);
            if (x.v > 1)
                b = fmax(b, stage_bound(&x, s, p->bounds));
            if (x.v > 1 && s == 0)
                b = fmax(b, ends_bound(&x, p->bounds));
            if (x.v > 1 && x.fill_ok) /* the pair DP's first test */
                b = fmax(b, (fill_drain_ns(&x, s, p->bounds[s]) + work + x.opt_ns) * BOUND_SAFETY);
        }
        if (x.v > 1 && (x.lag = lag_new(&x)) != NULL) {
            /* the chain mixture of a few rounds of lag_solve (deterministic: no deadline) at this
             * partition's boundaries, the search's node bound at a leaf, and each chain alone */
            x.best_step = INFINITY;
            lag_solve(&x, x.lag, 0, 12);
            double h = x.lag->c0;
            for (int k = 1; k < x.P; k++)
                h += lag_h(&x, x.lag->agg, k, p->bounds[k]);
            b = fmax(b, (h + x.opt_ns) * LAG_SAFETY);
            for (int i = 0; i < x.lag->m; i++)
                b = fmax(b, (chain_len(&x, &x.lag->chain[(size_t)i * LAG_NC(x.P)], p->bounds) +
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
        offer(&x, incumbent->bounds);
    }
    build_piece_table(&x);
    x.lag = lag_new(&x);
    x.kid_cur = pp_alloc(sizeof(int) * ((size_t)x.P + 1));
    x.kid_save = pp_alloc(sizeof(int) * ((size_t)x.P + 1));
    if (!x.lag || !x.kid_cur || !x.kid_save) {
        st = PP_ERR(PP_ERR_NOMEM, "rebalance: out of memory");
        goto done;
    }
    lag_solve(&x, x.lag, 0, 4000);
    if (root_ns)
        *root_ns = x.lag->bound;
    int closed;
    double b = lag_branch(&x, 0, max_splits, &closed);
    if (bound_ns)
        *bound_ns = b;
    if (best_ns)
        *best_ns = x.best_step;
done:
    ctx_free(&x);
    return st;
}
