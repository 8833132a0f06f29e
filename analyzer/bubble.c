/* bubble.c: the bubble decomposition of a step (docs/metrics.md), for metrics.c. The step's own
 * op lists become a schedule (its instructions and measured durations) that the simulator
 * replays twice: with the transfers free (what the lists cost without communication) and, in
 * addition, with every op at its kind's mean (a balanced pipeline). The differences split each
 * stage's idle time into fill/drain, imbalance and transfers; the critical path of the first
 * replay names the stage the step waited on most. */
#include "analyzer_internal.h"

/* The observed lists of one step as a schedule the simulator can replay. */
typedef struct replay {
    pp_schedule sc;
    double **dur; /* [S][n] measured durations of compute instructions */
    const double *kind_mean; /* [PP_AOP_COUNT] mean duration per kind over all stages */
    int balanced;
    int no_barrier; /* the optimizer steps wait for no other stage (pp_astep.opt_barrier 0) */
} replay;

/* The schedule instruction (pp_op) of an op of the convention's kind. */
static uint8_t op_of(uint8_t k)
{
    switch (k) {
    case PP_AOP_FWD: return PP_OP_FWD;
    case PP_AOP_BWD: return PP_OP_BWD;
    case PP_AOP_BWD_INPUT: return PP_OP_BWD_INPUT;
    case PP_AOP_BWD_WEIGHT: return PP_OP_BWD_WEIGHT;
    case PP_AOP_OPT: return PP_OP_OPT_STEP;
    case PP_AOP_SEND_ACT: return PP_OP_SEND_ACT;
    case PP_AOP_RECV_ACT: return PP_OP_RECV_ACT;
    case PP_AOP_SEND_GRAD: return PP_OP_SEND_GRAD;
    default: return PP_OP_RECV_GRAD;
    }
}

static double replay_op_ns(void *ctx, int stage, int index, const pp_instr *in)
{
    replay *r = ctx;
    if (!r->balanced)
        return r->dur[stage][index];
    switch (in->op) {
    case PP_OP_FWD: return r->kind_mean[PP_AOP_FWD];
    case PP_OP_BWD: return r->kind_mean[PP_AOP_BWD];
    case PP_OP_BWD_INPUT: return r->kind_mean[PP_AOP_BWD_INPUT];
    case PP_OP_BWD_WEIGHT: return r->kind_mean[PP_AOP_BWD_WEIGHT];
    default: return r->kind_mean[PP_AOP_OPT];
    }
}

static double replay_zero_ns(void *ctx, int stage, int index, const pp_instr *in)
{
    (void)ctx;
    (void)stage;
    (void)index;
    (void)in;
    return 0.0;
}

static void replay_free(replay *r, int S)
{
    if (r->sc.instrs)
        for (int s = 0; s < S; s++)
            free(r->sc.instrs[s]);
    if (r->dur)
        for (int s = 0; s < S; s++)
            free(r->dur[s]);
    free(r->sc.instrs);
    free(r->sc.n_instrs);
    free(r->dur);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The micro-batch ids of the step's ops, sorted and distinct, into mbs (capacity n): the
 * replay numbers them 0 .. count-1, so its message table follows the micro-batches the step
 * really ran, not the largest id a trace states. */
static size_t distinct_mbs(const pp_aop *ops, size_t n, int32_t *mbs)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (ops[i].mb >= 0)
            mbs[k++] = ops[i].mb;
    if (k)
        qsort(mbs, k, sizeof *mbs, cmp_i32);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || mbs[i] != mbs[u - 1])
            mbs[u++] = mbs[i];
    return u;
}

/* Appends to stage s's list at *k the message instruction op (mb, chunk) with piece q's stage
 * as its peer (a receive the schedule implies: duration 0). */
static void implied_msg(replay *r, int s, int *k, uint8_t op, int32_t mb, int16_t chunk, int q)
{
    pp_instr *in = &r->sc.instrs[s][*k];
    in->op = op;
    in->mb = mb;
    in->chunk = chunk;
    in->peer = (int16_t)pp_schedule_piece_stage(&r->sc, q);
    r->dur[s][(*k)++] = 0;
}

/* Builds the replay from ops sorted by (stage, t0), chunks placed by `placement`
 * (pp_placement). With `implied`, a step whose lists hold no transfer (a trace that times only
 * the compute: Paddle's pipeline timeline) gets the messages its schedule implies: each forward
 * receives from the piece before and sends to the one after, each (input) backward the other
 * way, where that piece is on another stage; without them the stages would not wait for each
 * other in the replay, and their fill and drain would read as transfer time. Returns 0 when the
 * data cannot form one. */
static int replay_build(replay *r, const pp_aop *ops, size_t n, int S, int placement,
                        int implied)
{
    memset(r, 0, sizeof *r);
    r->sc.S = S;
    r->sc.placement = placement; /* its pieces, hence which messages match */
    r->sc.kind = PP_SCHED_1F1B; /* not used by the simulator */
    if (n > INT32_MAX)
        return 0; /* a list longer than the schedule's int counts */
    int32_t *mbs = malloc((n ? n : 1) * sizeof *mbs);
    if (!mbs)
        return 0;
    /* The dense number of each id: by a table indexed by id when the ids are small next to the
     * step (every real step), else by sorting and binary search (distinct_mbs). Both number the
     * distinct ids in increasing order. */
    int32_t max_mb = -1;
    for (size_t i = 0; i < n; i++)
        max_mb = ops[i].mb > max_mb ? ops[i].mb : max_mb;
    int32_t *dense = NULL;
    size_t n_mbs = 0;
    if (max_mb >= 0 && (size_t)max_mb < 4 * n + 1024 &&
        (dense = malloc(((size_t)max_mb + 1) * sizeof *dense)) != NULL) {
        for (int32_t m = 0; m <= max_mb; m++)
            dense[m] = -1;
        for (size_t i = 0; i < n; i++)
            if (ops[i].mb >= 0)
                dense[ops[i].mb] = 0;
        for (int32_t m = 0; m <= max_mb; m++)
            if (dense[m] == 0)
                dense[m] = (int32_t)n_mbs++;
    } else {
        n_mbs = distinct_mbs(ops, n, mbs);
    }
    int v = 0;
    for (size_t i = 0; i < n; i++)
        if (ops[i].chunk >= v) /* bounded by check_bounds: < 64 or the announced v */
            v = ops[i].chunk + 1;
    r->sc.M = n_mbs > 0 ? (int)n_mbs : 1;
    r->sc.v = v > 0 ? v : 1;
    r->sc.n_instrs = calloc((size_t)S, sizeof(int));
    r->sc.instrs = calloc((size_t)S, sizeof(pp_instr *));
    r->dur = calloc((size_t)S, sizeof(double *));
    if (!r->sc.n_instrs || !r->sc.instrs || !r->dur) {
        free(mbs);
        free(dense);
        return 0;
    }
    int ok = 1;
    size_t i = 0;
    for (int s = 0; s < S; s++) {
        size_t j = i;
        while (j < n && ops[j].stage == s)
            j++;
        size_t cnt = j - i, cap = implied ? 3 * cnt + 1 : cnt + 1;
        if (cap > INT32_MAX) {
            ok = 0;
            break;
        }
        r->sc.instrs[s] = calloc(cap, sizeof(pp_instr));
        r->dur[s] = calloc(cap, sizeof(double));
        if (!r->sc.instrs[s] || !r->dur[s]) {
            ok = 0;
            break;
        }
        int at = 0, P = S * r->sc.v;
        for (size_t k = 0; k < cnt && ok; k++) {
            const pp_aop *o = &ops[i + k];
            int opt = o->kind == PP_AOP_OPT;
            int32_t dense_mb = -1;
            if (o->mb >= 0 && dense) {
                dense_mb = dense[o->mb];
            } else if (o->mb >= 0) {
                const int32_t *m = bsearch(&o->mb, mbs, n_mbs, sizeof *mbs, cmp_i32);
                dense_mb = m ? (int32_t)(m - mbs) : -1;
            }
            if (!opt && dense_mb < 0)
                ok = 0; /* a micro-batch op without its micro-batch */
            if (!an_is_compute(o->kind) && (o->peer < 0 || o->peer >= S))
                ok = 0;
            int16_t ch = (int16_t)(opt ? -1 : (o->chunk >= 0 ? o->chunk : 0));
            /* the implied messages: from the piece before (a forward) or after (a backward),
             * to the other one */
            int fwd = o->kind == PP_AOP_FWD,
                bwd = o->kind == PP_AOP_BWD || o->kind == PP_AOP_BWD_INPUT;
            int piece = implied && (fwd || bwd) && dense_mb >= 0 && ch < r->sc.v
                            ? pp_schedule_piece(&r->sc, s, ch)
                            : -1;
            int from = fwd ? piece - 1 : piece + 1, to = fwd ? piece + 1 : piece - 1;
            if (piece >= 0 && from >= 0 && from < P && pp_schedule_piece_stage(&r->sc, from) != s)
                implied_msg(r, s, &at, fwd ? PP_OP_RECV_ACT : PP_OP_RECV_GRAD, dense_mb, ch, from);
            pp_instr *in = &r->sc.instrs[s][at];
            in->op = op_of(o->kind);
            in->mb = opt ? -1 : dense_mb;
            in->chunk = ch;
            in->peer = (int16_t)(an_is_compute(o->kind) ? -1 : o->peer);
            r->dur[s][at++] = (double)(o->t1 - o->t0);
            if (piece >= 0 && to >= 0 && to < P && pp_schedule_piece_stage(&r->sc, to) != s)
                implied_msg(r, s, &at, fwd ? PP_OP_SEND_ACT : PP_OP_SEND_GRAD, dense_mb, ch, to);
        }
        r->sc.n_instrs[s] = at;
        i = j;
    }
    free(mbs);
    free(dense);
    return ok;
}

/* Walks the critical path of a replay back from its last instruction and returns the stage
 * holding the largest share of compute time on it. */
static int critical_culprit(const replay *r, const pp_sim_result *res, double *share)
{
    const pp_schedule *sc = &r->sc;
    int S = sc->S;
    double *on_path = calloc((size_t)S, sizeof(double));
    if (!on_path)
        return -1;
    int s = 0;
    for (int k = 1; k < S; k++)
        if (res->end_ns[k] > res->end_ns[s])
            s = k;
    int idx = sc->n_instrs[s] - 1;
    size_t guard = 0, total = 0;
    for (int k = 0; k < S; k++)
        total += (size_t)sc->n_instrs[k];
    while (s >= 0 && idx >= 0 && guard++ <= total + 8) {
        const pp_instr *in = &sc->instrs[s][idx];
        double st0 = res->start_ns[s][idx], st1 = res->finish_ns[s][idx];
        if (in->op == PP_OP_OPT_STEP && r->no_barrier) {
            on_path[s] += st1 - st0; /* its own stage's next op, as compute */
            idx--;
            continue;
        }
        if (in->op == PP_OP_OPT_STEP) {
            on_path[s] += st1 - st0;
            /* the barrier: continue on the stage that arrived last */
            int late = s;
            double arr = -1;
            for (int k = 0; k < S; k++) {
                int last = sc->n_instrs[k] - 1;
                while (last >= 0 && sc->instrs[k][last].op != PP_OP_OPT_STEP)
                    last--;
                if (last < 1)
                    continue;
                double a = res->finish_ns[k][last - 1];
                if (a > arr) {
                    arr = a;
                    late = k;
                }
            }
            int last = sc->n_instrs[late] - 1;
            while (last >= 0 && sc->instrs[late][last].op != PP_OP_OPT_STEP)
                last--;
            s = late;
            idx = last - 1;
            continue;
        }
        if ((in->op == PP_OP_RECV_ACT || in->op == PP_OP_RECV_GRAD) && st1 > st0) {
            /* it waited: the path goes through the matching send */
            int grad = in->op == PP_OP_RECV_GRAD;
            int piece = pp_schedule_piece(sc, s, in->chunk);
            int peer = in->peer, found = -1;
            for (int k = 0; k < sc->n_instrs[peer] && found < 0; k++) {
                const pp_instr *x = &sc->instrs[peer][k];
                if (x->op != (grad ? PP_OP_SEND_GRAD : PP_OP_SEND_ACT) || x->mb != in->mb)
                    continue;
                int xp = pp_schedule_piece(sc, peer, x->chunk);
                if ((grad ? xp - 1 : xp + 1) == piece)
                    found = k;
            }
            if (found < 0)
                break;
            s = peer;
            idx = found - 1;
            continue;
        }
        if (in->op == PP_OP_FWD || in->op == PP_OP_BWD || in->op == PP_OP_BWD_INPUT ||
            in->op == PP_OP_BWD_WEIGHT)
            on_path[s] += st1 - st0;
        idx--;
    }
    int best = -1;
    double sum = 0;
    for (int k = 0; k < S; k++) {
        sum += on_path[k];
        if (best < 0 || on_path[k] > on_path[best])
            best = k;
    }
    *share = sum > 0 && best >= 0 ? on_path[best] / sum : 0;
    free(on_path);
    return best;
}


static int decompose_once(pp_astep *sp, const pp_aop *ops, size_t n, int S, int placement,
                          const double *kind_mean, int implied);

/* Whether x waits before y on their stage when a receive waits at its end: a receive posted
 * with others in one batch (batch_isend_irecv) is waited for after the sends posted with it. */
static int wait_order_less(const pp_aop *x, const pp_aop *y)
{
    uint64_t a = x->kind == PP_AOP_RECV_ACT || x->kind == PP_AOP_RECV_GRAD ? x->t1 : x->t0;
    uint64_t b = y->kind == PP_AOP_RECV_ACT || y->kind == PP_AOP_RECV_GRAD ? y->t1 : y->t0;
    return x->stage != y->stage ? x->stage < y->stage : a < b;
}

/* ops (grouped by stage, each in time order) copied into a new list ordered by
 * wait_order_less (insertion: nearly sorted already); NULL when out of memory. */
static pp_aop *wait_ordered(const pp_aop *ops, size_t n)
{
    pp_aop *w = malloc((n ? n : 1) * sizeof *w);
    if (!w)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        while (j > 0 && wait_order_less(&ops[i], &w[j - 1]) && i - j < 64) {
            w[j] = w[j - 1];
            j--;
        }
        w[j] = ops[i];
    }
    return w;
}

int an_step_decompose(pp_astep *sp, const pp_aop *ops, size_t n, int S, int placement,
                      const double *kind_mean)
{
    /* a receive its stage computed inside (posted early: Megatron-LM's overlap_p2p_comm) is
     * waited for at its end, after that compute: replayed there from the start */
    int overlapped = 0;
    for (size_t i = 0; i < n && !overlapped; i++)
        overlapped = (ops[i].kind == PP_AOP_RECV_ACT || ops[i].kind == PP_AOP_RECV_GRAD) &&
                     an_recv_overlapped_end(ops, n, i) != 0;
    /* otherwise in start order first; a replay that deadlocked, as it does where each stage
     * posted a receive before the send the other stage's receive waits for, in one batch
     * (Megatron-LM's batched p2p; gloo records the receive first), again with each receive
     * where it was waited for */
    /* a step without any transfer op: first with the messages its schedule implies */
    int xfer = 0;
    for (size_t i = 0; i < n && !xfer; i++)
        xfer = !an_is_compute(ops[i].kind) && ops[i].kind != PP_AOP_OPT;
    if (!xfer && S > 1 && decompose_once(sp, ops, n, S, placement, kind_mean, 1))
        return 1;
    int done = !overlapped && decompose_once(sp, ops, n, S, placement, kind_mean, 0);
    if (!done) {
        pp_aop *w = wait_ordered(ops, n);
        if (w)
            done = decompose_once(sp, w, n, S, placement, kind_mean, 0);
        free(w);
    }
    if (!done && overlapped)
        done = decompose_once(sp, ops, n, S, placement, kind_mean, 0);
    return done;
}

static int decompose_once(pp_astep *sp, const pp_aop *ops, size_t n, int S, int placement,
                          const double *kind_mean, int implied)
{
    replay r;
    if (replay_build(&r, ops, n, S, placement, implied)) {
        r.kind_mean = kind_mean;
        r.no_barrier = sp->opt_barrier == 0;
        pp_sim_costs c = {replay_op_ns, replay_zero_ns, &r, NULL, NULL, sp->opt_barrier == 0, NULL};
        pp_sim_result nocomm, bal;
        r.balanced = 0;
        int ok = pp_sim_run(&r.sc, &c, &nocomm) == PP_OK;
        if (ok) {
            r.balanced = 1;
            if (pp_sim_run(&r.sc, &c, &bal) == PP_OK) {
                for (int s = 0; s < S; s++) {
                    pp_stage_step *ss = &sp->stage[s];
                    double idle_nocomm = nocomm.step_ns - ss->busy_ns;
                    double idle_bal = bal.step_ns - bal.busy_ns[s];
                    ss->fill_drain_ns = idle_bal;
                    ss->imbalance_ns = idle_nocomm - idle_bal;
                    ss->transfer_ns = ss->idle_ns - idle_nocomm - ss->allreduce_ns;
                }
                sp->decomposed = 1;
                r.balanced = 0;
                sp->culprit = critical_culprit(&r, &nocomm, &sp->critical_share);
                pp_sim_result_free(&bal);
            }
            pp_sim_result_free(&nocomm);
        }
        r.kind_mean = NULL;
    }
    replay_free(&r, S);
    return sp->decomposed;
}
