/* replay.c: the one lock-step replay of a schedule's per-stage lists (pp_schedule_replay in
 * pp_plan.h), the executor's model of running them: each stage in order, receives blocking
 * until their send has run. Its users supply what an instruction does when it runs: the
 * validator counts activations and queued messages, the simulator advances clocks
 * (analyzer/sim.c), the rebalancer records the order its evaluator replays
 * (analyzer/rebalance.c). docs/schedules.md describes the execution model. */
#include "pp_plan.h"

#include <stdio.h>
#include <string.h>

typedef struct walk {
    const pp_schedule *sc;
    const pp_replay_hooks *h;
    int *pc;
    uint8_t *posted;  /* [n_msgs] the message (or same-stage hand-off) with this index exists */
    uint8_t *arrived; /* [S] the stage has reached an OPT_STEP (barrier) */
    int n_arrived;
    /* Neighbouring pieces can share a stage: with looped pieces (chunk * S + stage,
     * pp_schedule_piece) only when S = 1, with V placement where the model turns (pieces
     * S - 1 and S, ...). Elsewhere compute ops wait for nothing. */
    int handoffs;
} walk;

static size_t tag_index(const pp_schedule *sc, int kind, int mb, int piece)
{
    return pp_schedule_msg_index(sc, (pp_msg_tag){kind, mb, piece});
}

/* Whether stage s's instruction `in` may run now. */
static int ready(walk *w, int s, const pp_instr *in)
{
    const pp_schedule *sc = w->sc;
    int S = sc->S, P = S * sc->v, p;
    switch (in->op) {
    case PP_OP_RECV_ACT:
    case PP_OP_RECV_GRAD:
        return w->posted[pp_schedule_msg_index(sc, pp_schedule_msg_tag(sc, s, in))];
    case PP_OP_FWD:
        /* a hand-off from the previous piece on this stage (S = 1): its FWD */
        if (!w->handoffs)
            return 1;
        p = pp_schedule_piece(sc, s, in->chunk);
        return !(p > 0 && pp_schedule_piece_stage(sc, p - 1) == s) ||
               w->posted[tag_index(sc, PP_MSG_ACT, in->mb, p)];
    case PP_OP_BWD:
    case PP_OP_BWD_INPUT:
        if (!w->handoffs)
            return 1;
        p = pp_schedule_piece(sc, s, in->chunk);
        return !(p < P - 1 && pp_schedule_piece_stage(sc, p + 1) == s) ||
               w->posted[tag_index(sc, PP_MSG_GRAD, in->mb, p)];
    case PP_OP_OPT_STEP:
        if (!w->h->barrier)
            return 1;
        if (!w->arrived[s]) {
            w->arrived[s] = 1;
            w->n_arrived++;
        }
        return w->n_arrived == S;
    default:
        /* sends follow their producer, W its B, in list order: ready when reached */
        return 1;
    }
}

/* Runs stage s's instruction `in` (index k): the hook, then what it makes available. */
static pp_status run(walk *w, int s, int k, const pp_instr *in)
{
    const pp_schedule *sc = w->sc;
    int S = sc->S, P = S * sc->v, p;
    int64_t msg = -1;
    if (in->op >= PP_OP_SEND_ACT && in->op <= PP_OP_RECV_GRAD)
        msg = (int64_t)pp_schedule_msg_index(sc, pp_schedule_msg_tag(sc, s, in));
    pp_status st = w->h->run ? w->h->run(w->h->ctx, s, k, in, msg) : PP_OK;
    if (st != PP_OK)
        return st;
    if (in->op == PP_OP_SEND_ACT || in->op == PP_OP_SEND_GRAD) {
        w->posted[msg] = 1;
        return PP_OK;
    }
    if (!w->handoffs)
        return PP_OK;
    switch (in->op) {
    case PP_OP_FWD:
        p = pp_schedule_piece(sc, s, in->chunk);
        if (p < P - 1 && pp_schedule_piece_stage(sc, p + 1) == s)
            w->posted[tag_index(sc, PP_MSG_ACT, in->mb, p + 1)] = 1;
        break;
    case PP_OP_BWD:
    case PP_OP_BWD_INPUT:
        p = pp_schedule_piece(sc, s, in->chunk);
        if (p > 0 && pp_schedule_piece_stage(sc, p - 1) == s)
            w->posted[tag_index(sc, PP_MSG_GRAD, in->mb, p - 1)] = 1;
        break;
    default: break;
    }
    return PP_OK;
}

/* The deadlock message: the first stages that wait, and at what. */
static pp_status deadlock(const walk *w, int64_t rounds)
{
    const pp_schedule *sc = w->sc;
    char msg[600];
    size_t len = 0;
    msg[0] = '\0';
    for (int s = 0; s < sc->S && len + 96 < sizeof msg; s++) {
        if (w->pc[s] >= sc->n_instrs[s])
            continue;
        const pp_instr *in = &sc->instrs[s][w->pc[s]];
        snprintf(msg + len, sizeof msg - len, "%sstage %d at instruction %d (%s mb %d chunk %d)",
                 len ? "; " : "", s, w->pc[s], pp_op_name((pp_op)in->op), in->mb, in->chunk);
        len += strlen(msg + len);
    }
    return PP_ERR(PP_ERR_INVALID, "the schedule deadlocks: no stage can advance after %lld "
                                  "rounds: %s",
                  (long long)rounds, msg);
}

pp_status pp_schedule_replay(const pp_schedule *sc, const pp_replay_hooks *h, int *pc,
                             int64_t *rounds_out)
{
    int S = sc->S, finished = 0;
    walk w = {.sc = sc, .h = h, .pc = pc, .handoffs = sc->S == 1 || sc->placement == PP_PLACE_V};
    size_t n_msgs = pp_schedule_n_msgs(sc);
    w.posted = pp_alloc_array(n_msgs + (size_t)S, 1);
    if (!w.posted)
        return PP_ERR(PP_ERR_NOMEM, "out of memory replaying a schedule of S = %d, M = %d, v = %d",
                      S, sc->M, sc->v);
    w.arrived = w.posted + n_msgs;
    for (int s = 0; s < S; s++)
        pc[s] = 0;
    pp_status st = PP_OK;
    int64_t rounds = 0;
    /* A stage counts as finished when it runs its last instruction, so an empty list never
     * does: every list holds at least OPT_STEP. */
    while (finished < S && st == PP_OK) {
        int progress = 0;
        rounds++;
        for (int s = 0; s < S && st == PP_OK; s++) {
            int n = sc->n_instrs[s];
            while (pc[s] < n && ready(&w, s, &sc->instrs[s][pc[s]])) {
                if ((st = run(&w, s, pc[s], &sc->instrs[s][pc[s]])) != PP_OK)
                    break;
                progress = 1;
                if (++pc[s] == n)
                    finished++;
            }
        }
        if (st == PP_OK && !progress)
            st = deadlock(&w, rounds);
    }
    if (rounds_out)
        *rounds_out = rounds;
    pp_free(w.posted);
    return st;
}
