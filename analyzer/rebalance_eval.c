/* rebalance_eval.c: the rebalancer's replay and its bounds on part of a partition. The schedule's
 * lists compiled once into steps in dependency order and a partition scored in one pass over them
 * (pp_sim_run's arithmetic with the one cost rule, allocation-free); the lower bounds that are
 * longest paths of that replay and depend on one piece (its layer range), one stage's list, or the
 * first and last stages together, and the min-max DP over the piece bounds that the search starts
 * from. Part of pp_rebalance (rebalance.c); docs/rebalancer.md "The bounds". */
#include "rebalance_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- op kinds of the compiled replay ---- */

double rb_layer_us(const pp_layer_cost *l, int kind)
{
    return pp_costs_layer_us(l, rb_kind_op(kind));
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

/* What rb_compile_schedule's hook keeps while the lists are replayed. */
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
    int send = in->op == PP_OP_SEND_ACT || in->op == PP_OP_SEND_GRAD;
    if (send) {
        int grad = in->op == PP_OP_SEND_GRAD;
        cp->msg_step[msg] = cp->last[s];
        cp->msg_q[msg] = grad ? piece - 1 : piece;
        if (pp_costs_send_us(x->c, grad) <= 0)
            return PP_OK;
    }
    if (in->op == PP_OP_OPT_STEP)
        return PP_OK;
    int recv = in->op == PP_OP_RECV_ACT || in->op == PP_OP_RECV_GRAD;
    if (recv && pp_costs_recv_us(x->c, in->op == PP_OP_RECV_GRAD) > 0) {
        /* the receiver's own time first, on its stage: then the receive's max */
        rb_step *o = &x->steps[x->n_steps];
        o->kind = (uint8_t)(in->op == PP_OP_RECV_GRAD ? K_RECV_GRAD_OWN : K_RECV_ACT_OWN);
        o->dep = -1;
        o->q = -1;
        o->stage = s;
        o->piece = piece;
        o->mb = in->mb;
        x->sprev[x->n_steps] = cp->last[s];
        cp->last[s] = x->n_steps++;
    }
    rb_step *t = &x->steps[x->n_steps];
    t->kind = (uint8_t)(recv   ? K_RECV
                        : send ? (in->op == PP_OP_SEND_GRAD ? K_SEND_GRAD : K_SEND_ACT)
                               : op_kind(in->op));
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
 * and each receive in an order where what it waits for comes first. Sends name the step that
 * precedes them on their stage: in pp_sim_run a message is available at the sender's clock
 * plus the transfer, and that clock is the end of the sender's previous step; a send is a step
 * itself (K_SEND_ACT, K_SEND_GRAD) only when it takes the sender time, and a receive that takes
 * the receiver time is preceded by a step of it (K_RECV_ACT_OWN, K_RECV_GRAD_OWN). */
pp_status rb_compile_schedule(rb_ctx *x, const pp_schedule *sc)
{
    pp_status st = PP_OK;
    int S = sc->S;
    size_t n_msgs = pp_schedule_n_msgs(sc);
    int64_t total = 0;
    for (int s = 0; s < S; s++)
        total += sc->n_instrs[s];
    /* a receive with the receiver's own time is two steps */
    if (pp_costs_recv_us(x->c, 0) > 0 || pp_costs_recv_us(x->c, 1) > 0)
        total *= 2;
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
double rb_evaluate_with(rb_ctx *x, const int *b, const uint8_t *rcs)
{
    const pp_costs *c = x->c;
    for (int p = 0; p < x->P; p++) {
        if (rcs && rcs[p % x->S]) {
            /* its recomputed layers (x->rcmask) cost what pp_costs_with_recompute gives them,
             * summed in pp_costs_op_us's order: the same double as pp_sim_file's */
            for (int k = 0; k < N_COMPUTE; k++) {
                double us = 0.0;
                for (int l = b[p]; l < b[p + 1]; l++)
                    us += rb_layer_us(x->rcmask[l] ? &x->crc->layers[l] : &c->layers[l], k);
                x->dur[k * x->P + p] = (us + c->op_gap_us) * 1e3; /* and its op's gap */
            }
        } else {
            for (int k = 0; k < N_COMPUTE; k++)
                x->dur[k * x->P + p] = pp_costs_op_us(c, rb_kind_op(k), b[p], b[p + 1]) * 1e3;
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
            clk = dmax(clk, a); /* pp_sim_run's fmax, inline: times are finite, never NaN */
        } else { /* a compute op, a send or a receiver's own time: x->dur holds them all */
            clk += x->dur[t->kind * x->P + t->piece];
        }
        x->fin[i] = clk;
        x->clock[t->stage] = clk;
    }
    double barrier = 0.0;
    if (!x->has_ar) {
        for (int s = 0; s < x->S; s++)
            barrier = dmax(barrier, x->clock[s]);
    } else {
        /* each stage's data-parallel all-reduce before the barrier (pp_sim_costs.
         * pre_barrier_ns); the bounds count it where their paths end at a stage's last op */
        for (int s = 0; s < x->S; s++)
            barrier = dmax(barrier, x->clock[s] + rb_stage_ar_ns(x, s, b));
    }
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
double rb_evaluate(rb_ctx *x, const int *b)
{
    if (!x->limit || !x->rc_ok)
        return rb_evaluate_with(x, b, NULL);
    rb_decide(x, b, x->rcs);
    return rb_evaluate_with(x, b, x->rcs);
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
pp_status rb_extract_paths(rb_ctx *x, const pp_schedule *sc)
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
    /* the micro-batch whose input gradient ends the first stage's list (of piece 0), -1 when
     * its last compute op is another (a W) */
    int last_mb0 = -1;
    for (int i = sc->n_instrs[0] - 1; i >= 0; i--) {
        const pp_instr *in = &sc->instrs[0][i];
        int k = op_kind(in->op);
        if (k < 0)
            continue;
        if ((k == K_B || k == K_BI) && pp_schedule_piece_stage(sc, 0) == 0 &&
            in->chunk == pp_schedule_piece_chunk(sc, 0))
            last_mb0 = in->mb;
        break;
    }
    for (int j = 0; j < P; j++) {
        int s = pp_schedule_piece_stage(sc, j), ch = pp_schedule_piece_chunk(sc, j);
        rb_seq *q = &x->seq[j];
        q->down_last = -1;
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
                if (in->mb == last_mb0)
                    q->down_last = q->n;
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

double rb_dot(const int *n, const double *d)
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

/* The piece bound's paths that end at a stage's last op, extended by that stage's data-parallel
 * all-reduce before the barrier (x->has_ar): at piece j's own last op (t) when it ends its
 * stage's list (v = 1; for v > 1 when this chunk's op is the stage's last), with at least the
 * piece's parameters (the rest of the stage's unknown here); and down to the first stage's last
 * op (the gradient of its last micro-batch, x->val[down_last] + `down`), with at least layer
 * 0's (piece 0 holds it). Apart from the walk, which runs without it. */
__attribute__((noinline)) static double piece_ar_paths(const rb_ctx *x, int j, int lo, int hi,
                                                       double t, double down)
{
    const rb_seq *q = &x->seq[j];
    double best = 0.0;
    int s = j % x->S;
    if (x->v == 1 || (x->sseq && x->sseq[s].n > 0 && x->sseq[s].chunk[x->sseq[s].n - 1] == j / x->S))
        best = t + pp_costs_dp_allreduce_us(x->c, x->pre_param[hi] - x->pre_param[lo]) * 1e3;
    if (q->down_last >= 0 && j > 0)
        best = fmax(best, x->val[q->down_last] + down +
                              pp_costs_dp_allreduce_us(x->c, x->pre_param[1]) * 1e3);
    return best;
}

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
    if (__builtin_expect(x->has_ar, 0))
        best = fmax(best, piece_ar_paths(x, j, lo, hi, t, bpre + tpre));
    return (best + x->opt_ns) * BOUND_SAFETY;
}

double rb_stage_ar_ns(const rb_ctx *x, int s, const int *b)
{
    if (!x->has_ar)
        return 0.0;
    uint64_t bytes = 0;
    for (int j = s; j < x->P; j += x->S)
        bytes += x->pre_param[b[j + 1]] - x->pre_param[b[j]];
    return pp_costs_dp_allreduce_us(x->c, bytes) * 1e3;
}

/* ---- the stage bound (v > 1) ---- */

/* Builds each stage's op list over all its chunks for rb_stage_bound: the links of a micro-batch's
 * forward (backward) from one chunk of the stage to the next round's chunk, and for each
 * input-gradient op and each chunk c the latest earlier FWD of chunk c from which a path
 * through all later pieces (the last piece running that FWD before this op's backward) leads
 * here. */
pp_status rb_extract_stage_paths(rb_ctx *x, const pp_schedule *sc)
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
double rb_stage_bound(const rb_ctx *x, int s, const int *b)
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
    best = dmax(best, t + rb_stage_ar_ns(x, s, b)); /* its last op, then its all-reduce */
    return (best + x->opt_ns) * BOUND_SAFETY;
}

/* ---- the bound of the first and the last stage together (v > 1) ---- */

static int is_end_piece(const rb_ctx *x, int j) { return j % x->S == 0 || j % x->S == x->S - 1; }

/* Index of an end piece among the 2v pieces of stages 0 and S-1. */
static int end_slot(const rb_ctx *x, int j) { return (j / x->S) * 2 + (j % x->S == 0 ? 0 : 1); }

/* Merges the compute ops of stages 0 and S-1 in the replay's order (every dependency first) and
 * links each FWD(m) to FWD(m) of the nearest earlier piece on those two stages and each
 * input-gradient op of m to that of the nearest later one. */
pp_status rb_extract_ends(rb_ctx *x)
{
    int S = x->S, P = x->P, M = x->M;
    rb_eseq *e = &x->ends;
    int n = 0;
    for (int i = 0; i < x->n_steps; i++)
        n += x->steps[i].kind < N_COMPUTE && (x->steps[i].stage == 0 || x->steps[i].stage == S - 1);
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
        if (t->kind >= N_COMPUTE || (t->stage != 0 && t->stage != S - 1) || t->mb < 0 ||
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
    e->last[0] = last[0];
    e->last[1] = last[1];
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
double rb_ends_bound(const rb_ctx *x, const int *b)
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
    /* each of the two stages' last op, then its all-reduce */
    for (int side = 0; side < 2 && x->has_ar; side++)
        if (e->last[side] >= 0)
            best = dmax(best, val[e->last[side]] + rb_stage_ar_ns(x, side ? x->S - 1 : 0, b));
    return (best + x->opt_ns) * BOUND_SAFETY;
}

static double *gcell(const rb_ctx *x, int j, int lo, int hi)
{
    return (double *)rb_piece_row(x, j, lo) + hi; /* the table is x's own, written here */
}

double rb_piece_bound(const rb_ctx *x, int j, int lo, int hi)
{
    return x->G ? *gcell(x, j, lo, hi) : piece_bound_dp(x, j, lo, hi);
}

/* Piece j = [lo, hi) alone already breaks the memory limit, recomputed or not where that is
 * allowed (for v > 1: its stage's memory is at least that of this one chunk). */
int rb_piece_over_limit(const rb_ctx *x, int j, int lo, int hi)
{
    if (!x->limit || rb_piece_mem(x, j, lo, hi, 0, NULL) <= x->limit)
        return 0;
    if (!x->rc_ok)
        return 1;
    if (x->sel_order) { /* v = 1: no set of its layers can save enough, even fractionally */
        double add = rb_select((rb_ctx *)x, j, lo, hi, NULL, 1);
        if (!isnan(add))
            return isinf(add);
    }
    return rb_piece_mem(x, j, lo, hi, 1, NULL) > x->limit;
}

/* Piece j = [lo, hi) breaks the limit without recomputation: its stage must recompute. */
static int piece_forced(const rb_ctx *x, int j, int lo, int hi)
{
    return x->limit && x->rc_ok && rb_piece_mem(x, j, lo, hi, 0, NULL) > x->limit;
}

/* Tabulates rb_piece_bound over every range a piece can hold, when the table is small enough. */
void rb_build_piece_table(rb_ctx *x)
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

/* D[k][pos] = min over partitions of [pos, L) into pieces k .. P-1 of the largest rb_piece_bound:
 * the best any completion can do against the bounds. +inf where none meets the limit. */
void rb_build_table(rb_ctx *x)
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
                if (rb_piece_over_limit(x, k, pos, e))
                    continue;
                double g = fmax(rb_piece_bound(x, k, pos, e), tail);
                if (g < best)
                    best = g;
            }
            *dcell(x, k, pos) = best;
        }
    }
}
