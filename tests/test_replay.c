/* test_replay.c: the rules the planning library writes once for every user (plan/replay.c,
 * plan/messages.c, the facts in plan/schedule.c): the schedule facts and their agreement with
 * the argument check, the message tag rule matching every send to its receive, and the
 * lock-step replay's order, barrier, deadlock report and hook errors. */
#include "pp_plan.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static const pp_schedule_kind k_kinds[] = {PP_SCHED_GPIPE, PP_SCHED_1F1B, PP_SCHED_INTERLEAVED,
                                           PP_SCHED_ZBH1};

static pp_schedule *make(pp_schedule_kind kind, int S, int M, int v)
{
    pp_schedule *sc = NULL;
    cr_assert_eq(pp_schedule_create(kind, S, M, v, &sc), PP_OK, "%s", pp_error_message());
    return sc;
}

Test(facts, splits_backward_and_default_v_follow_the_generated_lists)
{
    for (int k = 0; k < 4; k++) {
        pp_schedule_kind kind = k_kinds[k];
        int v = pp_schedule_default_v(kind);
        cr_assert(pp_schedule_allows_v(kind, 4, 8, v, NULL, 0), "%s",
                  pp_schedule_kind_name(kind));
        pp_schedule *sc = make(kind, 4, 8, v);
        int split_ops = 0, whole = 0;
        for (int i = 0; i < sc->n_instrs[0]; i++) {
            split_ops += sc->instrs[0][i].op == PP_OP_BWD_INPUT;
            whole += sc->instrs[0][i].op == PP_OP_BWD;
        }
        cr_assert_eq(pp_schedule_splits_backward(kind), split_ops > 0, "%s",
                     pp_schedule_kind_name(kind));
        cr_assert_eq(whole == 0, split_ops > 0);
        pp_schedule_destroy(sc);
    }
    cr_assert_eq(pp_schedule_default_v(PP_SCHED_INTERLEAVED), 2);
    cr_assert_eq(pp_schedule_default_v(PP_SCHED_ZBH1), 1);
}

Test(facts, the_kind_list_names_every_kind_once_in_order)
{
    char list[64], want[64] = "";
    pp_schedule_kind_list(list, sizeof list);
    for (int k = 0; k < PP_SCHED_N_KINDS; k++) {
        strcat(want, k ? "," : "");
        strcat(want, pp_schedule_kind_name((pp_schedule_kind)k));
    }
    cr_assert_str_eq(list, want);
    cr_assert_str_eq(list, "gpipe,1f1b,interleaved,zb-h1");
    pp_schedule_kind_list(list, 8);
    cr_assert_str_eq(list, "gpipe,1");
}

Test(facts, allows_v_gives_the_reason_and_agrees_with_check_args)
{
    char why[256];
    cr_assert(!pp_schedule_allows_v(PP_SCHED_1F1B, 4, 8, 2, why, sizeof why));
    cr_assert(strstr(why, "only interleaved takes v > 1") != NULL, "%s", why);
    cr_assert(!pp_schedule_allows_v(PP_SCHED_INTERLEAVED, 1, 8, 2, why, sizeof why));
    cr_assert(strstr(why, "needs S >= 2") != NULL, "%s", why);
    cr_assert(!pp_schedule_allows_v(PP_SCHED_INTERLEAVED, 4, 6, 2, why, sizeof why));
    cr_assert(strstr(why, "a multiple of stages S (M = 6, S = 4)") != NULL, "%s", why);
    for (int k = 0; k < 4; k++)
        for (int S = 1; S <= 5; S++)
            for (int M = 1; M <= 9; M++)
                for (int v = 1; v <= 4; v++) {
                    int allowed = pp_schedule_allows_v(k_kinds[k], S, M, v, why, sizeof why);
                    pp_status st = pp_schedule_check_args(k_kinds[k], S, M, v);
                    cr_assert_eq(st == PP_OK, allowed, "%s S=%d M=%d v=%d",
                                 pp_schedule_kind_name(k_kinds[k]), S, M, v);
                    if (!allowed)
                        cr_assert_str_eq(pp_error_message(), why);
                }
}

/* Every message index is sent once and received once, by the stages the tag's piece says. */
Test(messages, each_send_and_its_receive_carry_one_tag)
{
    for (int k = 0; k < 4; k++) {
        int v = pp_schedule_default_v(k_kinds[k]);
        pp_schedule *sc = make(k_kinds[k], 3, 6, v);
        size_t n = pp_schedule_n_msgs(sc);
        int *sent = calloc(n, sizeof(int)), *recvd = calloc(n, sizeof(int));
        cr_assert(sent && recvd);
        for (int s = 0; s < sc->S; s++)
            for (int i = 0; i < sc->n_instrs[s]; i++) {
                const pp_instr *in = &sc->instrs[s][i];
                if (in->op < PP_OP_SEND_ACT || in->op > PP_OP_RECV_GRAD)
                    continue;
                pp_msg_tag t = pp_schedule_msg_tag(sc, s, in);
                size_t x = pp_schedule_msg_index(sc, t);
                cr_assert_lt(x, n);
                cr_assert_eq(t.mb, in->mb);
                int send = in->op == PP_OP_SEND_ACT || in->op == PP_OP_SEND_GRAD;
                /* a send's tag names the receiving piece, which lives on its peer */
                cr_assert_eq(pp_schedule_piece_stage(sc, t.piece), send ? in->peer : s);
                (send ? sent : recvd)[x]++;
            }
        for (size_t x = 0; x < n; x++) {
            cr_assert_leq(sent[x], 1);
            cr_assert_eq(sent[x], recvd[x], "%s message %zu", pp_schedule_kind_name(k_kinds[k]),
                         x);
        }
        free(sent);
        free(recvd);
        pp_schedule_destroy(sc);
    }
}

typedef struct trace {
    const pp_schedule *sc;
    int next[PP_SCHED_MAX_S]; /* the instruction each stage must run next */
    uint8_t *sent;            /* [n_msgs] */
    int ran, non_opt, opt_seen, fail_at;
} trace;

static pp_status check_order(void *ctx, int s, int k, const pp_instr *in, int64_t msg)
{
    trace *t = ctx;
    cr_assert_eq(k, t->next[s], "stage %d ran %d, expected %d", s, k, t->next[s]);
    t->next[s]++;
    if (in->op == PP_OP_SEND_ACT || in->op == PP_OP_SEND_GRAD)
        t->sent[msg] = 1;
    else if (in->op == PP_OP_RECV_ACT || in->op == PP_OP_RECV_GRAD)
        cr_assert(t->sent[msg], "stage %d instruction %d received before the send", s, k);
    else if (in->op == PP_OP_OPT_STEP) {
        /* with the barrier, every other instruction of every stage has run */
        cr_assert_eq(t->ran - t->opt_seen, t->non_opt);
        t->opt_seen++;
    } else
        cr_assert_eq(msg, -1);
    if (t->ran++ == t->fail_at)
        return PP_ERR(PP_ERR_RUNTIME, "hook stops at %d", t->fail_at);
    return PP_OK;
}

static trace trace_for(const pp_schedule *sc)
{
    trace t = {.sc = sc, .fail_at = -1};
    t.sent = calloc(pp_schedule_n_msgs(sc), 1);
    cr_assert_not_null(t.sent);
    for (int s = 0; s < sc->S; s++)
        t.non_opt += sc->n_instrs[s] - 1;
    return t;
}

Test(replay, runs_every_instruction_once_in_list_order_receives_after_sends)
{
    for (int k = 0; k < 4; k++) {
        pp_schedule *sc = make(k_kinds[k], 4, 8, pp_schedule_default_v(k_kinds[k]));
        trace t = trace_for(sc);
        pp_replay_hooks h = {.run = check_order, .ctx = &t, .barrier = 1};
        int pc[4];
        int64_t rounds = 0;
        cr_assert_eq(pp_schedule_replay(sc, &h, pc, &rounds), PP_OK, "%s", pp_error_message());
        for (int s = 0; s < 4; s++)
            cr_assert_eq(pc[s], sc->n_instrs[s]);
        cr_assert_eq(t.opt_seen, 4);
        /* without the barrier the walk is the validator's: the same rounds */
        h.barrier = 0;
        h.run = NULL;
        int64_t plain = 0;
        cr_assert_eq(pp_schedule_replay(sc, &h, pc, &plain), PP_OK);
        pp_schedule_report rep;
        cr_assert_eq(pp_schedule_validate(sc, &rep), PP_OK);
        cr_assert_eq(plain, rep.n_rounds);
        cr_assert_geq(rounds, plain);
        pp_schedule_report_free(&rep);
        free(t.sent);
        pp_schedule_destroy(sc);
    }
}

Test(replay, a_deadlock_names_where_each_stage_waits)
{
    pp_schedule *sc = make(PP_SCHED_1F1B, 2, 2, 1);
    /* stage 0 receives its gradient before sending the activation it depends on */
    int i_send = -1, i_recv = -1;
    for (int i = 0; i < sc->n_instrs[0]; i++) {
        const pp_instr *in = &sc->instrs[0][i];
        if (in->op == PP_OP_SEND_ACT && in->mb == 0)
            i_send = i;
        if (in->op == PP_OP_RECV_GRAD && in->mb == 0)
            i_recv = i;
    }
    pp_instr tmp = sc->instrs[0][i_send];
    memmove(&sc->instrs[0][i_send], &sc->instrs[0][i_send + 1],
            sizeof(pp_instr) * (size_t)(i_recv - i_send));
    sc->instrs[0][i_recv] = tmp;
    pp_replay_hooks h = {0};
    int pc[2];
    cr_assert_eq(pp_schedule_replay(sc, &h, pc, NULL), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "the schedule deadlocks") != NULL, "%s",
              pp_error_message());
    cr_assert(strstr(pp_error_message(), "stage 0 at instruction") != NULL, "%s",
              pp_error_message());
    cr_assert_eq(sc->instrs[0][pc[0]].op, PP_OP_RECV_GRAD);
    cr_assert_eq(sc->instrs[1][pc[1]].op, PP_OP_RECV_ACT);
    pp_schedule_destroy(sc);
}

Test(replay, a_hook_error_stops_the_replay_and_is_returned)
{
    pp_schedule *sc = make(PP_SCHED_GPIPE, 2, 3, 1);
    trace t = trace_for(sc);
    t.fail_at = 5;
    pp_replay_hooks h = {.run = check_order, .ctx = &t, .barrier = 0};
    int pc[2];
    cr_assert_eq(pp_schedule_replay(sc, &h, pc, NULL), PP_ERR_RUNTIME);
    cr_assert_str_eq(pp_error_message(), "hook stops at 5");
    cr_assert_eq(t.ran, 6);
    free(t.sent);
    pp_schedule_destroy(sc);
}
