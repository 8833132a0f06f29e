/* validate.c: pp_schedule_validate (pp_plan.h), the proof that a set of per-stage lists is
 * executable. A structural pass indexes every keyed op by (op, stage, mb, chunk) and checks
 * counts, peers and the order within each (mb, chunk); then the lists are replayed
 * (pp_schedule_replay, plan/replay.c) to prove they finish, counting the activations and queued
 * messages each stage holds. Called by pptrain's set-up, the rebalancer and the tools' --explain
 * views; docs/schedules.md describes the execution model. */
#include "pp_plan.h"

#include <stdio.h>
#include <string.h>

enum { N_OPS = PP_OP_OPT_STEP + 1, N_KEYED_OPS = PP_OP_OPT_STEP /* OPT_STEP has no (mb, chunk) */ };


typedef struct validator {
    const pp_schedule *sc;
    int S, M, v, P;
    int32_t *pos[N_KEYED_OPS]; /* [S*M*v]: index of the op in its stage's list, -1 if absent */
    int *pc;                   /* [S] next instruction of each stage in the replay */
} validator;

static size_t vkey(const validator *V, int s, int mb, int chunk)
{
    return ((size_t)s * (size_t)V->M + (size_t)mb) * (size_t)V->v + (size_t)chunk;
}

static int32_t vpos(const validator *V, pp_op op, int s, int mb, int chunk)
{
    return V->pos[op][vkey(V, s, mb, chunk)];
}

static const char *op_str(int op) { return pp_op_name((pp_op)op); }

/* Which communication an op of piece p needs, and the peer; -2 if the op must not exist. */
static int expected_peer(const validator *V, int op, int s, int p)
{
    const pp_schedule *sc = V->sc;
    int next = p < V->P - 1 ? pp_schedule_piece_stage(sc, p + 1) : s;
    int prev = p > 0 ? pp_schedule_piece_stage(sc, p - 1) : s;
    switch (op) {
    case PP_OP_SEND_ACT:
    case PP_OP_RECV_GRAD:
        return next != s ? next : -2;
    case PP_OP_RECV_ACT:
    case PP_OP_SEND_GRAD:
        return prev != s ? prev : -2;
    default:
        return -1;
    }
}

static pp_status check_instr(validator *V, int s, int i)
{
    const pp_schedule *sc = V->sc;
    const pp_instr *in = &sc->instrs[s][i];
    int n = sc->n_instrs[s];
    if (in->op >= N_OPS)
        return PP_ERR(PP_ERR_INVALID, "stage %d instruction %d: unknown op %d", s, i, in->op);
    if (in->op == PP_OP_OPT_STEP) {
        if (i != n - 1)
            return PP_ERR(PP_ERR_INVALID,
                          "stage %d instruction %d: OPT_STEP must be the last instruction, "
                          "but %d follow it",
                          s, i, n - 1 - i);
        if (in->mb != -1 || in->chunk != -1 || in->peer != -1)
            return PP_ERR(PP_ERR_INVALID,
                          "stage %d instruction %d: OPT_STEP takes mb = chunk = peer = -1 "
                          "(has %d, %d, %d)",
                          s, i, in->mb, in->chunk, in->peer);
        return PP_OK;
    }
    if (i == n - 1)
        return PP_ERR(PP_ERR_INVALID,
                      "stage %d: the list must end with OPT_STEP, ends with %s (instruction %d)",
                      s, op_str(in->op), i);
    if (in->mb < 0 || in->mb >= V->M || in->chunk < 0 || in->chunk >= V->v)
        return PP_ERR(PP_ERR_INVALID,
                      "stage %d instruction %d (%s): mb %d chunk %d out of range (M = %d, v = %d)",
                      s, i, op_str(in->op), in->mb, in->chunk, V->M, V->v);
    int p = pp_schedule_piece(sc, s, in->chunk);
    int want = expected_peer(V, in->op, s, p);
    if (want == -2) {
        const char *why = (in->op == PP_OP_SEND_ACT || in->op == PP_OP_RECV_GRAD)
                              ? (p == V->P - 1 ? "it is the last piece" : "piece p+1 is on "
                                                                          "the same stage")
                              : (p == 0 ? "it is the first piece" : "piece p-1 is on the "
                                                                    "same stage");
        return PP_ERR(PP_ERR_INVALID,
                      "stage %d instruction %d: %s of mb %d chunk %d (piece %d) should not be "
                      "there: %s",
                      s, i, op_str(in->op), in->mb, in->chunk, p, why);
    }
    if (in->peer != want)
        return PP_ERR(PP_ERR_INVALID,
                      "stage %d instruction %d: %s of mb %d chunk %d (piece %d) has peer %d, "
                      "must be %d",
                      s, i, op_str(in->op), in->mb, in->chunk, p, in->peer, want);
    int32_t *slot = &V->pos[in->op][vkey(V, s, in->mb, in->chunk)];
    if (*slot >= 0)
        return PP_ERR(PP_ERR_INVALID,
                      "stage %d instruction %d: duplicate %s of mb %d chunk %d (first at "
                      "instruction %d)",
                      s, i, op_str(in->op), in->mb, in->chunk, *slot);
    *slot = i;
    return PP_OK;
}

/* Requires op `a` of (mb, chunk) on stage s to come before op `b` when both are present. */
static pp_status check_before(const validator *V, int s, int mb, int c, pp_op a, pp_op b)
{
    int32_t ia = vpos(V, a, s, mb, c), ib = vpos(V, b, s, mb, c);
    if (ia >= 0 && ib >= 0 && ia > ib)
        return PP_ERR(PP_ERR_INVALID,
                      "stage %d instruction %d: %s of mb %d chunk %d comes before its %s "
                      "(instruction %d)",
                      s, ib, op_str(b), mb, c, op_str(a), ia);
    return PP_OK;
}

static pp_status check_item(const validator *V, int s, int mb, int c)
{
    int32_t f = vpos(V, PP_OP_FWD, s, mb, c), bw = vpos(V, PP_OP_BWD, s, mb, c);
    int32_t bi = vpos(V, PP_OP_BWD_INPUT, s, mb, c), ww = vpos(V, PP_OP_BWD_WEIGHT, s, mb, c);
    if (f < 0)
        return PP_ERR(PP_ERR_INVALID, "stage %d: no FWD of mb %d chunk %d", s, mb, c);
    if (bw >= 0 && (bi >= 0 || ww >= 0))
        return PP_ERR(PP_ERR_INVALID,
                      "stage %d: mb %d chunk %d has both a BWD (instruction %d) and a split "
                      "backward (BWD_INPUT/BWD_WEIGHT)",
                      s, mb, c, bw);
    if (bw < 0 && bi < 0 && ww < 0)
        return PP_ERR(PP_ERR_INVALID, "stage %d: no backward (BWD, or BWD_INPUT + BWD_WEIGHT) "
                                      "of mb %d chunk %d",
                      s, mb, c);
    if (bw < 0 && (bi < 0 || ww < 0))
        return PP_ERR(PP_ERR_INVALID, "stage %d: mb %d chunk %d has %s (instruction %d) but no %s",
                      s, mb, c, bi >= 0 ? "BWD_INPUT" : "BWD_WEIGHT", bi >= 0 ? bi : ww,
                      bi >= 0 ? "BWD_WEIGHT" : "BWD_INPUT");
    pp_op back = bw >= 0 ? PP_OP_BWD : PP_OP_BWD_INPUT;
    int p = pp_schedule_piece(V->sc, s, c);
    static const pp_op comm[4] = {PP_OP_SEND_ACT, PP_OP_RECV_ACT, PP_OP_SEND_GRAD,
                                  PP_OP_RECV_GRAD};
    for (int k = 0; k < 4; k++)
        if (expected_peer(V, comm[k], s, p) >= 0 && vpos(V, comm[k], s, mb, c) < 0)
            return PP_ERR(PP_ERR_INVALID,
                          "stage %d: no %s of mb %d chunk %d (piece %d %s stage %d)", s,
                          op_str(comm[k]), mb, c, p,
                          comm[k] == PP_OP_SEND_ACT || comm[k] == PP_OP_SEND_GRAD ? "to"
                                                                                  : "from",
                          expected_peer(V, comm[k], s, p));
    pp_status st;
    if ((st = check_before(V, s, mb, c, PP_OP_RECV_ACT, PP_OP_FWD)) != PP_OK ||
        (st = check_before(V, s, mb, c, PP_OP_FWD, PP_OP_SEND_ACT)) != PP_OK ||
        (st = check_before(V, s, mb, c, PP_OP_FWD, back)) != PP_OK ||
        (st = check_before(V, s, mb, c, PP_OP_RECV_GRAD, back)) != PP_OK ||
        (st = check_before(V, s, mb, c, back, PP_OP_SEND_GRAD)) != PP_OK ||
        (st = check_before(V, s, mb, c, PP_OP_BWD_INPUT, PP_OP_BWD_WEIGHT)) != PP_OK)
        return st;
    return PP_OK;
}

/* The instruction a blocked one waits for: for a RECV the peer's matching SEND, for a hand-off
 * between pieces of one stage the other piece's op (-1 when absent). */
static int32_t awaited(const validator *V, int s, const pp_instr *in)
{
    int p = pp_schedule_piece(V->sc, s, in->chunk);
    switch (in->op) {
    case PP_OP_RECV_ACT:
        return vpos(V, PP_OP_SEND_ACT, in->peer, in->mb, pp_schedule_piece_chunk(V->sc, p - 1));
    case PP_OP_RECV_GRAD:
        return vpos(V, PP_OP_SEND_GRAD, in->peer, in->mb, pp_schedule_piece_chunk(V->sc, p + 1));
    case PP_OP_FWD: return vpos(V, PP_OP_FWD, s, in->mb, in->chunk - 1);
    case PP_OP_BWD:
    case PP_OP_BWD_INPUT: {
        int32_t a = vpos(V, PP_OP_BWD, s, in->mb, in->chunk + 1);
        return a >= 0 ? a : vpos(V, PP_OP_BWD_INPUT, s, in->mb, in->chunk + 1);
    }
    default: return -1;
    }
}

static void describe_wait(const validator *V, int s, char *buf, size_t cap)
{
    int i = V->pc[s];
    const pp_instr *in = &V->sc->instrs[s][i];
    int peer_at = (int)awaited(V, s, in);
    if (in->op == PP_OP_RECV_ACT || in->op == PP_OP_RECV_GRAD)
        snprintf(buf, cap,
                 "stage %d waits at instruction %d (%s mb %d chunk %d from stage %d, whose "
                 "matching %s is its instruction %d)",
                 s, i, op_str(in->op), in->mb, in->chunk, in->peer,
                 in->op == PP_OP_RECV_ACT ? "SEND_ACT" : "SEND_GRAD", peer_at);
    else
        snprintf(buf, cap,
                 "stage %d waits at instruction %d (%s mb %d chunk %d, for its own "
                 "instruction %d)",
                 s, i, op_str(in->op), in->mb, in->chunk, peer_at);
}

static pp_status deadlock_error(const validator *V, int64_t rounds)
{
    char msg[900], part[256];
    size_t len = 0;
    int shown = 0;
    msg[0] = '\0';
    for (int s = 0; s < V->S; s++) {
        if (V->pc[s] == V->sc->n_instrs[s])
            continue;
        describe_wait(V, s, part, sizeof part);
        size_t pl = strlen(part);
        if (len + pl + 8 >= sizeof msg) {
            snprintf(msg + len, sizeof msg - len, "; ...");
            break;
        }
        snprintf(msg + len, sizeof msg - len, "%s%s", shown++ ? "; " : "", part);
        len += strlen(msg + len);
    }
    return PP_ERR(PP_ERR_INVALID, "deadlock: %s (no stage can advance after %lld rounds)", msg,
                  (long long)rounds);
}

/* The replay's hook: activations held and messages queued per stage, and their peaks. */
typedef struct peaks {
    pp_schedule_report *rep;
    int inflight[PP_SCHED_MAX_S], qa[PP_SCHED_MAX_S], qg[PP_SCHED_MAX_S];
} peaks;

static void raise_peak(int *now, int *peak)
{
    if (++*now > *peak)
        *peak = *now;
}

static pp_status count_op(void *ctx, int s, int k, const pp_instr *in, int64_t msg)
{
    (void)k;
    (void)msg;
    peaks *pk = ctx;
    pp_schedule_report *rep = pk->rep;
    switch (in->op) {
    case PP_OP_FWD: raise_peak(&pk->inflight[s], &rep->peak_inflight[s]); break;
    case PP_OP_BWD:
    case PP_OP_BWD_WEIGHT: pk->inflight[s]--; break;
    case PP_OP_SEND_ACT: raise_peak(&pk->qa[in->peer], &rep->peak_queued_act[in->peer]); break;
    case PP_OP_RECV_ACT: pk->qa[s]--; break;
    case PP_OP_SEND_GRAD: raise_peak(&pk->qg[in->peer], &rep->peak_queued_grad[in->peer]); break;
    case PP_OP_RECV_GRAD: pk->qg[s]--; break;
    default: break;
    }
    return PP_OK;
}

static pp_status replay(validator *V, pp_schedule_report *rep)
{
    peaks *pk = pp_alloc(sizeof *pk); /* zeroed; 12 KiB, off the stack */
    if (!pk)
        return PP_ERR(PP_ERR_NOMEM, "out of memory validating a schedule");
    pk->rep = rep;
    pp_replay_hooks h = {.run = count_op, .ctx = pk, .barrier = 0};
    int64_t rounds = 0;
    pp_status st = pp_schedule_replay(V->sc, &h, V->pc, &rounds);
    if (st == PP_ERR_INVALID)
        st = deadlock_error(V, rounds);
    else if (st == PP_OK)
        rep->n_rounds = rounds;
    pp_free(pk);
    return st;
}

void pp_schedule_report_free(pp_schedule_report *rep)
{
    if (!rep)
        return;
    pp_free(rep->peak_inflight);
    pp_free(rep->peak_queued_act);
    pp_free(rep->peak_queued_grad);
    memset(rep, 0, sizeof *rep);
}

pp_status pp_schedule_validate(const pp_schedule *sc, pp_schedule_report *rep)
{
    pp_status st = PP_OK;
    validator V = {.sc = sc};
    pp_schedule_report r = {0};
    if (rep)
        memset(rep, 0, sizeof *rep);
    if (!sc || !sc->n_instrs || !sc->instrs)
        return PP_ERR(PP_ERR_INVALID, "no schedule to validate");
    if (sc->S < 1 || sc->S > PP_SCHED_MAX_S || sc->M < 1 || sc->M > PP_SCHED_MAX_M || sc->v < 1 ||
        sc->v > PP_SCHED_MAX_V)
        return PP_ERR(PP_ERR_INVALID, "schedule dimensions S = %d, M = %d, v = %d out of range",
                      sc->S, sc->M, sc->v);
    V.S = sc->S;
    V.M = sc->M;
    V.v = sc->v;
    V.P = sc->S * sc->v;
    size_t n_keys = (size_t)V.S * (size_t)V.M * (size_t)V.v;
    for (int s = 0; s < V.S; s++)
        if (sc->n_instrs[s] < 1 || !sc->instrs[s])
            return PP_ERR(PP_ERR_INVALID, "stage %d: empty list (it needs at least OPT_STEP)", s);

    r.S = V.S;
    r.peak_inflight = pp_alloc((size_t)V.S * sizeof(int));
    r.peak_queued_act = pp_alloc((size_t)V.S * sizeof(int));
    r.peak_queued_grad = pp_alloc((size_t)V.S * sizeof(int));
    V.pc = pp_alloc((size_t)V.S * sizeof(int));
    int nomem = !r.peak_inflight || !r.peak_queued_act || !r.peak_queued_grad || !V.pc;
    for (int op = 0; op < N_KEYED_OPS && !nomem; op++) {
        V.pos[op] = pp_alloc(n_keys * sizeof(int32_t));
        nomem = !V.pos[op];
        if (!nomem)
            memset(V.pos[op], 0xff, n_keys * sizeof(int32_t)); /* all -1 */
    }
    if (nomem) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory validating a schedule of S = %d, M = %d, v = %d",
                    V.S, V.M, V.v);
        goto done;
    }

    for (int s = 0; s < V.S; s++)
        for (int i = 0; i < sc->n_instrs[s]; i++)
            if ((st = check_instr(&V, s, i)) != PP_OK)
                goto done;
    for (int s = 0; s < V.S; s++)
        for (int mb = 0; mb < V.M; mb++)
            for (int c = 0; c < V.v; c++)
                if ((st = check_item(&V, s, mb, c)) != PP_OK)
                    goto done;
    if ((st = replay(&V, &r)) != PP_OK)
        goto done;
    if (rep) {
        *rep = r;
        memset(&r, 0, sizeof r);
    }
done:
    pp_schedule_report_free(&r);
    for (int op = 0; op < N_KEYED_OPS; op++)
        pp_free(V.pos[op]);
    pp_free(V.pc);
    return st;
}

