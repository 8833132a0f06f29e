/* rebalance_internal.h: what the rebalancer's files share and pp_rebalance.h does not promise:
 * the search context (rb_ctx) and its tables, the constants every bound is scaled by, and the
 * functions one file calls in another. rebalance.c (setup, the search, the API),
 * rebalance_eval.c (the compiled replay and the piece, stage and end-stage bounds),
 * rebalance_memory.c (the memory model and recomputation), rebalance_mixture.c (the path-mixture
 * bound and its branch and bound) and rebalance_pair.c (the pair DP, v = 2); docs/rebalancer.md
 * has the method. */
#ifndef PP_REBALANCE_INTERNAL_H
#define PP_REBALANCE_INTERNAL_H

#include "pp_sim.h"
#include "pp_rebalance.h"

#include <math.h>
#include <stdint.h>

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
/* rb_piece_bound is tabulated over all (piece, lo, hi) up to this many entries (32 MiB). */
#define MAX_PIECE_TABLE ((int64_t)1 << 22)

/* pp_schedule_check_args allows v <= 64: rb_stage_bound's per-chunk terms live on the stack. */
#define RB_MAX_V 64

/* The local moves' chains (rb_ctx.pool). */
#define RB_POOL 16

/* rb_select handles stages of up to this many layers (its scratch, rebalance_memory.c). */
#define RB_SEL_MAX_LAYERS 1024

/* K_SEND_ACT, K_SEND_GRAD: the sender's own time in a send (the cost file's send_act_us /
 * send_grad_us), a step only when that is not 0; its duration sits in rb_ctx.dur like a compute
 * op's, the same for every piece. K_RECV_ACT_OWN, K_RECV_GRAD_OWN: the receiver's own time
 * (recv_act_us / recv_grad_us), a step just before its receive when not 0: the receive then
 * ends at max(clock + own, arrival), pp_sim_run's double. The piece, stage and end stages'
 * bounds count all four as 0. */
enum {
    K_F = 0,
    K_B = 1,
    K_BI = 2,
    K_BW = 3,
    K_RECV = 4,
    K_SEND_ACT = 5,
    K_SEND_GRAD = 6,
    K_RECV_ACT_OWN = 7,
    K_RECV_GRAD_OWN = 8,
    N_COMPUTE = 4,
    N_DUR = 9 /* rb_ctx.dur's kinds */
};

/* The cost file's op for each compute kind (the cost rule is pp_costs_layer_us); inline, so
 * the replay's loops over the kinds fold it. */
static inline pp_op rb_kind_op(int kind)
{
    return kind == K_F ? PP_OP_FWD : kind == K_B ? PP_OP_BWD
                                   : kind == K_BI ? PP_OP_BWD_INPUT : PP_OP_BWD_WEIGHT;
}

/* One step of the compiled replay, in an order where every dependency comes first. */
typedef struct rb_step {
    int32_t dep;    /* RECV: the step whose end is the send time (-1: time 0); else unused */
    int32_t q;      /* RECV: boundary crossed (between piece q and q + 1) */
    int32_t piece;  /* compute: piece whose cost it takes */
    int32_t stage;
    int32_t mb;     /* compute: micro-batch */
    uint8_t kind;   /* K_* */
} rb_step;

/* A piece's compute ops in its stage's order, for the path bound (rb_piece_bound). */
typedef struct rb_seq {
    int n;
    uint8_t *kind;    /* [n] K_F .. K_BW */
    int32_t *partner; /* [n] input-gradient ops: the latest earlier FWD of this piece from
                         which a path through all later pieces leads to this op; -1 none */
    int total[N_COMPUTE]; /* ops of each kind */
    int32_t down_last; /* the input-gradient op whose gradient's way down ends at the first
                          stage's last op (of piece 0: the data-parallel all-reduce of stage 0
                          follows it), -1 none */
} rb_seq;

/* A stage's compute ops of all its chunks in list order, for the stage bound (rb_stage_bound). */
typedef struct rb_sseq {
    int n;
    uint8_t *kind;    /* [n] K_F .. K_BW */
    uint8_t *chunk;   /* [n] */
    int32_t *round;   /* [n] FWD(m) of chunk c >= 1: the op FWD(m) of chunk c - 1; input-gradient
                         op of m for chunk c <= v - 2: that of chunk c + 1; else -1 */
    int32_t *partner; /* [n * v] input-gradient ops: for each chunk c, the latest earlier FWD of
                         chunk c from which a path through all later pieces leads here; -1 */
} rb_sseq;

/* The compute ops of the first and the last stage merged in replay order, for rb_ends_bound. */
typedef struct rb_eseq {
    int n;
    uint8_t *kind;  /* [n] K_F .. K_BW */
    int32_t *piece; /* [n] */
    int32_t *prev;  /* [n] the previous op of the same stage, -1 none */
    int32_t *hop;   /* [n] FWD(m) of piece j: FWD(m) of the nearest earlier piece of the two
                       stages; input-gradient op of m: that of the nearest later piece; -1 */
    double *val;    /* [n] scratch */
    int last[2];    /* the last op of the first stage (0) and of the last one (1), -1 none */
} rb_eseq;

/* The path-mixture bound's state (rb_lag_solve): chains (rows) and partitions (columns) of the
 * game, their lengths, the restricted game's mixtures and the best mixture's boundary DP. */
#define LAG_MAX 128
#define LAG_QMAX 64 /* constraint rows of a restricted game */
#define LAG_NZ_PARTS 8 /* a chain's nonzero counts: the 4 compute ops', the transfers', the
                          send constant's, the parameters', the end */
typedef struct rb_lag {
    int m, n;          /* chains, partitions */
    double *chain;     /* [LAG_MAX * LAG_NC] counts of each chain */
    int32_t *nz;       /* [LAG_MAX * LAG_NC] each chain's nonzero counts' indices, ascending
                          (lag_chain_nz) */
    int32_t *nz_at;    /* [LAG_MAX * LAG_NZ_PARTS]: where each part of them begins (lag_chain_nz) */
    int *part;         /* [LAG_MAX * (P + 1)] */
    double *len;       /* [LAG_MAX * LAG_MAX] chain i's length on partition j, ns */
    double *tab;       /* the restricted game's simplex tableau, kept from round to round */
    int *basis;        /* [LAG_MAX + LAG_QMAX] each row's basic column */
    double *tw_a;      /* [2 * LAG_MAX] scratch: a new column's entries (up to LAG_MAX +
                          LAG_QMAX), or tw_verify's two rows of columns */
    int tw_ok;         /* the tableau holds the game of tw_m chains, tw_n partitions and q rows */
    int tw_m, tw_n, tw_rounds; /* ... solved warm tw_rounds times since it was built */
    double tw_base, tw_sc; /* its scale: K = (length - tw_base) * tw_sc + 0.05 */
    double *lam, *y;   /* [LAG_MAX] the restricted game's mixtures */
    double *agg, *best_agg; /* [LAG_NC] aggregated counts: current, best */
    double *coef;      /* [LAG_NC] scratch chain */
    double *mdur, *mtr; /* [4P], [P] the partition mixture's average durations */
    double *mar;        /* [S] and its stages' all-reduces (rb_ctx.ar_s) */
    double *G;         /* [P * (L + 1)] cost to go of the mixture in agg (lag_table) */
    double *next;      /* [L + 1] lag_table's scratch: each place of the next boundary's cost */
    int *arg;          /* [P * (L + 1)] its minimising next boundary */
    double c0;         /* the mixture's constant term */
    double bound;      /* the best proven bound, ns (0: none) */
    double upper;      /* the least mixed replay of the last solve's rounds: the relaxation's
                          value (of its box and constraints) is below */
    int cap;           /* rows and columns kept before the unweighted ones are dropped */
    double tol;        /* stop when the two sides are this close (relative) */
    double enough;     /* stop when the bound reaches this (ns) */
    double cut;        /* pieces whose piece bound reaches this are left out (+inf: none) */
    int32_t *emax;     /* [P * (L + 1)] under cut emax_cut: the least e > pos whose piece k =
                          [pos, e) reaches it (L + 1: none), lag_table's window (lag_emax) */
    double emax_cut;   /* the cut emax holds (NaN: none yet) */
    int q;             /* stage-count constraints on the mixture (a node of rb_lag_branch) */
    const int *cs;     /* [3q]: stage, sign, count: sign * (layers of the stage - count) <= 0 */
    double *lin;       /* [P + 1] the constraints' multipliers as a term per boundary, ns/layer */
    double lin0;       /* and their constant, ns */
    double *mu;        /* [LAG_QMAX] the constraints' multipliers, ns per layer */
    uint8_t *viol;     /* [LAG_QMAX] the last DP answer breaks the constraint */
    const int *lo, *hi; /* [P + 1] or NULL: boundary k restricted to lo[k] .. hi[k] (a node of
                          rb_lag_branch); the bound then holds for those partitions only */
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
    double *ar_s;      /* [S] ns: each stage's data-parallel all-reduce under the durations in
                          dur (a partition's or a mixture's average), for the chain replay */
    double *dur;       /* [N_DUR * P] ns: kind k of piece p at k * P + p (the sends' kinds set
                          once, the compute kinds per partition) */
    double *tr;        /* [P] ns, boundary q between piece q and q + 1 */
    double opt_ns;
    int has_ar;        /* the cost file charges a data-parallel all-reduce before the barrier
                          (pp_costs_has_dp_allreduce): the bounds add it where a path ends at
                          its stage's last op */
    rb_seq *seq;       /* [P] */
    rb_sseq *sseq;     /* [S] v > 1: the stages' lists for rb_stage_bound, else NULL */
    rb_eseq ends;      /* v > 1: the first and last stage's ops, for rb_ends_bound */
    int fill_ok;       /* v > 1: every stage's list starts with a FWD of chunk 0 and ends with
                          an input-gradient op of chunk 0 (rb_fill_drain_ns holds) */
    double *G;         /* [P * (L+1) * (L+1)] rb_piece_bound table, NULL when too large */
    double *val;       /* scratch of rb_piece_bound: [longest sequence] */
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
    int *kid_cur, *kid_save; /* [P + 1] scratch of the mixture's incumbents (rb_lag_starts,
                                rb_lag_branch) */
    /* v > 1 without a memory limit: critical chains of partitions the local moves simulated
     * (local_search), each a lower bound on every partition's step; a move that one of them
     * shows cannot beat the incumbent is not simulated. Most recently useful first. */
    double *pool;      /* [RB_POOL * LAG_NC(P)] */
    int pool_n, pool_ord[RB_POOL];
    double *pool_run;  /* [RB_POOL * 2 * P] each chain's length on the incumbent (x->best) in
                          slot 0 of each direction, then the prefix sums over boundaries 1 ..
                          q of what moving each by -1 (first half) or +1 changes it */
    int pool_fresh;    /* pool_run is for the current x->best */
    int no_pool;       /* every move simulated (pp_rebalance_moves' chains = 0) */
    uint64_t t0, deadline;
    int aborted;
    int64_t nodes, evaluated;
} rb_ctx;

/* ---- saturating byte arithmetic ---- */

static inline uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* One chunk's charges under the model: static bytes (4 x parameters and the receive buffers),
 * bytes per micro-batch in flight, one recompute workspace (0 without recomputation). */
typedef struct rb_cmem {
    uint64_t fixed, mb, set;
} rb_cmem;

/* max without fmax's NaN rules (a library call in the hot loops; no NaN reaches them). */
static inline double dmax(double a, double b) { return a > b ? a : b; }
static inline double dmin(double a, double b) { return a < b ? a : b; }

static inline double *dcell(const rb_ctx *x, int k, int pos)
{
    return &x->D[(size_t)k * (x->L + 1) + pos];
}

/* ---- the path-mixture (Lagrangian) bound ---- */

/* A chain of the replay: a path of real dependencies (list order on a stage, a message) that
 * starts at time 0. Its length on any partition is the sum of its compute ops' durations and
 * its messages' transfers, each a difference of prefix sums at the two boundaries of its piece
 * or the transfer of one boundary, so it is linear in per-boundary terms, and at most the
 * barrier of that partition. A chain is kept as its counts: coef[t * P + p] ops of kind t of
 * piece p, coef[4 * P + q] messages across boundary q (between pieces q and q + 1), and in
 * the slot of boundary P - 1, which no message crosses, the time of its sends on their senders
 * and of its receives on their receivers (ns, the same on every partition: the cost file's
 * send_act_us / send_grad_us / recv_act_us / recv_grad_us) and the fixed
 * part of the all-reduce it ends with, if any; then LAG_PARAM's P slots. */
#define LAG_NC(P) (6 * (size_t)(P))
#define LAG_SEND(P) (5 * (size_t)(P) - 1)
/* coef[LAG_PARAM(P) + p]: the chain ends with the data-parallel all-reduce of a stage holding
 * piece p, whose per-MB term counts piece p's parameters (its fixed term is in the sends' slot,
 * a constant too) */
#define LAG_PARAM(P) (5 * (size_t)(P))
/* The chain bound is computed from prefix sums with coefficients up to a few hundred, in another
 * order than the replay: scaled by this much it stays below the mixture it bounds. */
#define LAG_SAFETY (1.0 - 1e-9)

/* A node is kept while its bound is below this: the incumbent's step less the tolerance. */
static inline double cutoff(const rb_ctx *x) { return x->best_step * (1.0 - PRUNE_TOL); }

/* rebalance.c: setup, the search, its seeds and local moves */
int rb_fits(rb_ctx *x, const int *b);
void rb_offer(rb_ctx *x, const int *b);
void rb_search_from(rb_ctx *x, const int *b, double kb, int *save);
/* The counts of a critical chain of partition b (as rb_chain_len reads them), from the replay
 * rb_evaluate_with(x, b, NULL) just ran (x->fin, x->clock): a lower bound on every partition's
 * step, rb_chain_len + opt_ns, that b's own barrier (with its all-reduce) attains. */
void rb_chain_of_evaluated(rb_ctx *x, const int *b, double *coef);

/* rebalance_eval.c: the compiled replay and the bounds on single pieces, stages and end stages */
double rb_layer_us(const pp_layer_cost *l, int kind);
pp_status rb_compile_schedule(rb_ctx *x, const pp_schedule *sc);
double rb_evaluate_with(rb_ctx *x, const int *b, const uint8_t *rcs);
double rb_evaluate(rb_ctx *x, const int *b);
pp_status rb_extract_paths(rb_ctx *x, const pp_schedule *sc);
double rb_dot(const int *n, const double *d);
pp_status rb_extract_stage_paths(rb_ctx *x, const pp_schedule *sc);
double rb_stage_bound(const rb_ctx *x, int s, const int *b);
/* Stage s's data-parallel all-reduce under partition b (pp_costs_dp_allreduce_us of all its
 * chunks' parameters), ns; 0 without one. */
double rb_stage_ar_ns(const rb_ctx *x, int s, const int *b);
pp_status rb_extract_ends(rb_ctx *x);
double rb_ends_bound(const rb_ctx *x, const int *b);
double rb_piece_bound(const rb_ctx *x, int j, int lo, int hi);
/* rb_piece_bound(x, j, lo, hi) for every hi at [hi], from the piece table; NULL without one. */
static inline const double *rb_piece_row(const rb_ctx *x, int j, int lo)
{
    return x->G ? &x->G[((size_t)j * (x->L + 1) + lo) * (x->L + 1)] : NULL;
}
int rb_piece_over_limit(const rb_ctx *x, int j, int lo, int hi);
void rb_build_piece_table(rb_ctx *x);
void rb_build_table(rb_ctx *x);

/* rebalance_memory.c: the memory model, each stage's cheapest layers to recompute, the smallest
 * achievable memory */
uint64_t rb_mem_act(const pp_layer_cost *l);
uint64_t rb_mem_input(const pp_costs *c, int l);
void rb_chunk_mem_masked(const rb_ctx *x, int piece, int lo, int hi, const uint8_t *mask,
                         rb_cmem *out);
uint64_t rb_mvec_peak(const rb_mvec *m, const rb_cmem *ch);
uint64_t rb_stage_mem(const rb_ctx *x, int s, const int *b, int r);
uint64_t rb_piece_mem(const rb_ctx *x, int j, int lo, int hi, int r, uint64_t *dyn);
double rb_select(rb_ctx *x, int s, int lo, int hi, uint8_t *mask, int bound_only);
int rb_decide(rb_ctx *x, const int *b, uint8_t *rcs);
pp_status rb_build_mem_vectors(rb_ctx *x, const pp_schedule *sc);
uint64_t rb_min_max_memory(const rb_ctx *x);

/* rebalance_mixture.c: the path-mixture bound, its incumbents and its branch and bound */
double rb_chain_len(const rb_ctx *x, const double *coef, const int *b);
double rb_lag_h(const rb_ctx *x, const double *agg, int k, int pos);
double rb_lag_node_bound(const rb_ctx *x, const rb_lag *lg, int k, int pos, double fixed_h);
void rb_lag_solve(rb_ctx *x, rb_lag *lg, uint64_t deadline, int rounds);
void rb_lag_free(rb_lag *lg);
rb_lag *rb_lag_new(const rb_ctx *x);
void rb_lag_starts(rb_ctx *x, rb_lag *lg, uint64_t deadline);
double rb_lag_branch(rb_ctx *x, uint64_t deadline, int max_splits, int *closed);
void rb_lag_setup(rb_ctx *x, double *root);

/* rebalance_pair.c: the pair DP (v = 2) */
double rb_fill_drain_ns(const rb_ctx *x, int s, int lo);
int rb_pair_dp_applies(const rb_ctx *x);
double rb_pair_dp(rb_ctx *x, double root);

#endif /* PP_REBALANCE_INTERNAL_H */
