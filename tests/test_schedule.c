/* test_schedule.c: unit tests of the pipeline schedules (plan/schedule.c): every schedule over
 * a grid of (S, M, v) generates, validates and keeps its documented activation bound; the op
 * counts; argument checks; the validator catching broken lists; and the step time of each
 * schedule under unit costs against the formulas of docs/schedules.md, computed by a small
 * discrete-event replay written here independently of the library. */
#include "pp_plan.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const int k_S[] = {1, 2, 3, 4, 8, 16};
static const int k_M[] = {1, 2, 3, 4, 8, 16, 64};
static const int k_v[] = {2, 3, 4};
/* Interleaved needs M a multiple of S: M = k * S for these k. */
static const int k_M_per_S[] = {1, 2, 3, 4, 8};

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int imin(int a, int b) { return a < b ? a : b; }

static pp_schedule *make(pp_schedule_kind kind, int S, int M, int v)
{
    pp_schedule *sc = NULL;
    pp_status st = pp_schedule_create(kind, S, M, v, &sc);
    cr_assert_eq(st, PP_OK, "create %s S=%d M=%d v=%d: %s", pp_schedule_kind_name(kind), S, M, v,
                 pp_error_message());
    cr_assert_not_null(sc);
    return sc;
}

/* The activation bound each schedule is documented to keep on stage s, and to reach. */
static int expected_peak(pp_schedule_kind kind, int S, int M, int v, int s)
{
    switch (kind) {
    case PP_SCHED_GPIPE: return M;
    case PP_SCHED_1F1B: return imin(S - s, M);
    case PP_SCHED_INTERLEAVED: return imin((S - s - 1) * 2 + (v - 1) * S + 1, v * M);
    case PP_SCHED_ZBH1: return imin(S, M);
    }
    return -1;
}

static void check_one(pp_schedule_kind kind, int S, int M, int v)
{
    pp_schedule *sc = make(kind, S, M, v);
    pp_schedule_report rep;
    pp_status st = pp_schedule_validate(sc, &rep);
    cr_assert_eq(st, PP_OK, "validate %s S=%d M=%d v=%d: %s", pp_schedule_kind_name(kind), S, M,
                 v, pp_error_message());
    cr_assert_eq(rep.S, S);
    for (int s = 0; s < S; s++) {
        int want = expected_peak(kind, S, M, v, s);
        cr_assert_eq(rep.peak_inflight[s], want, "%s S=%d M=%d v=%d stage %d: peak in-flight %d, "
                     "expected %d", pp_schedule_kind_name(kind), S, M, v, s,
                     rep.peak_inflight[s], want);
        /* Every send is received, so a link never holds more than all the micro-batches. */
        cr_assert_leq(rep.peak_queued_act[s], M * v);
        cr_assert_leq(rep.peak_queued_grad[s], M * v);
        if (S == 1)
            cr_assert(rep.peak_queued_act[s] == 0 && rep.peak_queued_grad[s] == 0);
    }
    cr_assert_gt(rep.n_rounds, 0);
    pp_schedule_report_free(&rep);
    pp_schedule_destroy(sc);
}

static void check_grid(pp_schedule_kind kind)
{
    for (int i = 0; i < N_OF(k_S); i++)
        for (int j = 0; j < N_OF(k_M); j++)
            check_one(kind, k_S[i], k_M[j], 1);
}

Test(schedule, gpipe_validates_and_holds_all_micro_batches) { check_grid(PP_SCHED_GPIPE); }

Test(schedule, one_f_one_b_validates_and_holds_min_of_s_minus_stage_and_m)
{
    check_grid(PP_SCHED_1F1B);
}

Test(schedule, zbh1_validates_and_holds_min_of_s_and_m) { check_grid(PP_SCHED_ZBH1); }

Test(schedule, interleaved_validates_and_holds_megatron_warmup_plus_one)
{
    for (int i = 0; i < N_OF(k_S); i++) {
        if (k_S[i] < 2)
            continue;
        for (int j = 0; j < N_OF(k_M_per_S); j++)
            for (int k = 0; k < N_OF(k_v); k++)
                check_one(PP_SCHED_INTERLEAVED, k_S[i], k_M_per_S[j] * k_S[i], k_v[k]);
    }
}

/* ---- op counts --------------------------------------------------------------------------- */

static void count_ops(const pp_schedule *sc, int s, int counts[9])
{
    memset(counts, 0, 9 * sizeof(int));
    for (int i = 0; i < sc->n_instrs[s]; i++) {
        cr_assert_lt(sc->instrs[s][i].op, 9);
        counts[sc->instrs[s][i].op]++;
    }
}

static void check_counts(pp_schedule_kind kind, int S, int M, int v)
{
    pp_schedule *sc = make(kind, S, M, v);
    int P = S * v, split = kind == PP_SCHED_ZBH1;
    for (int s = 0; s < S; s++) {
        int c[9];
        count_ops(sc, s, c);
        /* Pieces of this stage with a neighbour on another stage downstream / upstream. */
        int down = 0, up = 0;
        for (int ch = 0; ch < v; ch++) {
            int p = ch * S + s;
            down += p < P - 1 && S > 1;
            up += p > 0 && S > 1;
        }
        cr_assert_eq(c[PP_OP_FWD], M * v, "%s S=%d M=%d s=%d", pp_schedule_kind_name(kind), S, M,
                     s);
        cr_assert_eq(c[PP_OP_BWD], split ? 0 : M * v);
        cr_assert_eq(c[PP_OP_BWD_INPUT], split ? M * v : 0);
        cr_assert_eq(c[PP_OP_BWD_WEIGHT], split ? M * v : 0);
        cr_assert_eq(c[PP_OP_SEND_ACT], M * down);
        cr_assert_eq(c[PP_OP_RECV_GRAD], M * down);
        cr_assert_eq(c[PP_OP_RECV_ACT], M * up);
        cr_assert_eq(c[PP_OP_SEND_GRAD], M * up);
        cr_assert_eq(c[PP_OP_OPT_STEP], 1);
        cr_assert_eq(sc->instrs[s][sc->n_instrs[s] - 1].op, PP_OP_OPT_STEP);
    }
    pp_schedule_destroy(sc);
}

Test(schedule, every_stage_has_each_op_once_per_micro_batch_chunk)
{
    static const pp_schedule_kind kinds[] = {PP_SCHED_GPIPE, PP_SCHED_1F1B, PP_SCHED_ZBH1};
    for (int k = 0; k < N_OF(kinds); k++)
        for (int i = 0; i < N_OF(k_S); i++)
            check_counts(kinds[k], k_S[i], 8, 1);
    check_counts(PP_SCHED_INTERLEAVED, 2, 4, 2);
    check_counts(PP_SCHED_INTERLEAVED, 4, 8, 3);
    check_counts(PP_SCHED_INTERLEAVED, 8, 16, 4);
}

Test(schedule, single_stage_lists_have_no_messages)
{
    static const pp_schedule_kind kinds[] = {PP_SCHED_GPIPE, PP_SCHED_1F1B, PP_SCHED_ZBH1};
    for (int k = 0; k < N_OF(kinds); k++) {
        pp_schedule *sc = make(kinds[k], 1, 5, 1);
        int c[9];
        count_ops(sc, 0, c);
        cr_assert_eq(c[PP_OP_SEND_ACT] + c[PP_OP_RECV_ACT] + c[PP_OP_SEND_GRAD] +
                         c[PP_OP_RECV_GRAD],
                     0);
        for (int i = 0; i < sc->n_instrs[0]; i++)
            cr_assert_eq(sc->instrs[0][i].peer, -1);
        pp_schedule_destroy(sc);
    }
}

/* ---- the orders themselves, on small cases written out by hand --------------------------- */

static void assert_printed(pp_schedule_kind kind, int S, int M, int v, const char *want)
{
    pp_schedule *sc = make(kind, S, M, v);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    pp_schedule_print(sc, f);
    fclose(f);
    cr_assert_str_eq(buf, want);
    free(buf);
    pp_schedule_destroy(sc);
}

Test(schedule, one_f_one_b_order_on_three_stages)
{
    assert_printed(PP_SCHED_1F1B, 3, 4, 1,
                   "# 1f1b S=3 M=4 v=1\n"
                   "s0: F0 sa0>1 F1 sa1>1 F2 sa2>1 rg0<1 B0 F3 sa3>1 rg1<1 B1 rg2<1 B2 rg3<1 B3 "
                   "OPT\n"
                   "s1: ra0<0 F0 sa0>2 ra1<0 F1 sa1>2 rg0<2 B0 sg0>0 ra2<0 F2 sa2>2 rg1<2 B1 sg1>0 "
                   "ra3<0 F3 sa3>2 rg2<2 B2 sg2>0 rg3<2 B3 sg3>0 OPT\n"
                   "s2: ra0<1 F0 B0 sg0>1 ra1<1 F1 B1 sg1>1 ra2<1 F2 B2 sg2>1 ra3<1 F3 B3 sg3>1 "
                   "OPT\n");
}

Test(schedule, gpipe_order_on_two_stages)
{
    assert_printed(PP_SCHED_GPIPE, 2, 2, 1,
                   "# gpipe S=2 M=2 v=1\n"
                   "s0: F0 sa0>1 F1 sa1>1 rg0<1 B0 rg1<1 B1 OPT\n"
                   "s1: ra0<0 F0 ra1<0 F1 B0 sg0>0 B1 sg1>0 OPT\n");
}

Test(schedule, zbh1_order_on_one_stage_and_two)
{
    assert_printed(PP_SCHED_ZBH1, 1, 3, 1,
                   "# zb-h1 S=1 M=3 v=1\n"
                   "s0: F0 Bi0 W0 F1 Bi1 W1 F2 Bi2 W2 OPT\n");
    /* Stage 1 holds back one W: it fills the time stage 0 spends on its last B. */
    assert_printed(PP_SCHED_ZBH1, 2, 3, 1,
                   "# zb-h1 S=2 M=3 v=1\n"
                   "s0: F0 sa0>1 F1 sa1>1 rg0<1 Bi0 W0 F2 sa2>1 rg1<1 Bi1 W1 rg2<1 Bi2 W2 OPT\n"
                   "s1: ra0<0 F0 Bi0 sg0>0 ra1<0 F1 Bi1 sg1>0 W0 ra2<0 F2 Bi2 sg2>0 W1 W2 OPT\n");
}

Test(schedule, interleaved_order_follows_megatron_groups)
{
    /* Warm-up (S-s-1)*2 + (v-1)*S: stage 0 all four micro-batch-chunks, stage 1 two; chunk 0
     * of mbs 0..S-1 first, then chunk 1; backwards from chunk 1 down. */
    assert_printed(PP_SCHED_INTERLEAVED, 2, 2, 2,
                   "# interleaved S=2 M=2 v=2\n"
                   "s0: F0.0 sa0.0>1 F1.0 sa1.0>1 ra0.1<1 F0.1 sa0.1>1 ra1.1<1 F1.1 sa1.1>1 "
                   "rg0.1<1 B0.1 sg0.1>1 rg1.1<1 B1.1 sg1.1>1 rg0.0<1 B0.0 rg1.0<1 B1.0 OPT\n"
                   "s1: ra0.0<0 F0.0 sa0.0>0 ra1.0<0 F1.0 sa1.0>0 ra0.1<0 F0.1 B0.1 sg0.1>0 "
                   "ra1.1<0 F1.1 B1.1 sg1.1>0 rg0.0<0 B0.0 sg0.0>0 rg1.0<0 B1.0 sg1.0>0 OPT\n");
}

/* ---- links are FIFO ------------------------------------------------------------------------ */

/* On every link, the receiver takes messages in the order the sender sends them, so a plain
 * FIFO transport without tags can carry these lists. */
static void check_fifo(pp_schedule_kind kind, int S, int M, int v)
{
    pp_schedule *sc = make(kind, S, M, v);
    for (int from = 0; from < S; from++)
        for (int to = 0; to < S; to++)
            for (int grad = 0; grad < 2; grad++) {
                pp_op sop = grad ? PP_OP_SEND_GRAD : PP_OP_SEND_ACT;
                pp_op rop = grad ? PP_OP_RECV_GRAD : PP_OP_RECV_ACT;
                /* The k-th send on the link (from -> to) must match the k-th receive. */
                int i = 0, j = 0, n = 0;
                for (;;) {
                    while (i < sc->n_instrs[from] &&
                           !(sc->instrs[from][i].op == sop && sc->instrs[from][i].peer == to))
                        i++;
                    while (j < sc->n_instrs[to] &&
                           !(sc->instrs[to][j].op == rop && sc->instrs[to][j].peer == from))
                        j++;
                    int ends = (i == sc->n_instrs[from]) + (j == sc->n_instrs[to]);
                    cr_assert(ends != 1, "%s S=%d M=%d v=%d link %d->%d: unmatched message",
                              pp_schedule_kind_name(kind), S, M, v, from, to);
                    if (ends == 2)
                        break;
                    const pp_instr *a = &sc->instrs[from][i], *b = &sc->instrs[to][j];
                    int pa = a->chunk * S + from, pb = b->chunk * S + to;
                    cr_assert_eq(a->mb, b->mb, "%s S=%d M=%d v=%d link %d->%d message %d",
                                 pp_schedule_kind_name(kind), S, M, v, from, to, n);
                    cr_assert_eq(pb, grad ? pa - 1 : pa + 1);
                    i++, j++, n++;
                }
            }
    pp_schedule_destroy(sc);
}

Test(schedule, every_link_delivers_in_send_order)
{
    static const pp_schedule_kind kinds[] = {PP_SCHED_GPIPE, PP_SCHED_1F1B, PP_SCHED_ZBH1};
    for (int k = 0; k < N_OF(kinds); k++)
        for (int i = 0; i < N_OF(k_S); i++)
            check_fifo(kinds[k], k_S[i], 16, 1);
    for (int i = 1; i < N_OF(k_S); i++)
        for (int k = 0; k < N_OF(k_v); k++)
            check_fifo(PP_SCHED_INTERLEAVED, k_S[i], 2 * k_S[i], k_v[k]);
}

/* ---- arguments ----------------------------------------------------------------------------- */

typedef struct bad_args {
    pp_schedule_kind kind;
    int S, M, v;
    const char *msg;
} bad_args;

static const bad_args k_bad[] = {
    {PP_SCHED_1F1B, 0, 4, 1, "stages S = 0"},
    {PP_SCHED_1F1B, 1025, 4, 1, "stages S = 1025"},
    {PP_SCHED_GPIPE, 2, 0, 1, "micro-batches M = 0"},
    {PP_SCHED_GPIPE, 2, (1 << 20) + 1, 1, "micro-batches M = 1048577"},
    {PP_SCHED_INTERLEAVED, 2, 4, 0, "virtual stages v = 0"},
    {PP_SCHED_INTERLEAVED, 2, 4, 65, "virtual stages v = 65"},
    {PP_SCHED_1F1B, 4, 8, 2, "only interleaved takes v > 1"},
    {PP_SCHED_GPIPE, 4, 8, 2, "v = 2 must be 1"},
    {PP_SCHED_ZBH1, 4, 8, 3, "schedule zb-h1 has one chunk"},
    {PP_SCHED_INTERLEAVED, 1, 4, 2, "needs S >= 2"},
    {PP_SCHED_INTERLEAVED, 4, 8, 1, "needs v >= 2"},
    {PP_SCHED_INTERLEAVED, 4, 6, 2, "multiple of stages S (M = 6, S = 4)"},
    {PP_SCHED_INTERLEAVED, 4, 1, 2, "multiple of stages S"},
    {(pp_schedule_kind)7, 4, 8, 1, "unknown schedule kind 7"},
};

Test(schedule, disallowed_arguments_are_rejected_with_a_reason)
{
    for (int i = 0; i < N_OF(k_bad); i++) {
        const bad_args *b = &k_bad[i];
        pp_error_clear();
        cr_assert_eq(pp_schedule_check_args(b->kind, b->S, b->M, b->v), PP_ERR_INVALID,
                     "case %d", i);
        cr_assert(strstr(pp_error_message(), b->msg), "case %d: '%s' lacks '%s'", i,
                  pp_error_message(), b->msg);
        pp_schedule *sc = (pp_schedule *)&sc; /* not NULL, so create must clear it */
        cr_assert_eq(pp_schedule_create(b->kind, b->S, b->M, b->v, &sc), PP_ERR_INVALID);
        cr_assert_null(sc);
    }
}

Test(schedule, allowed_edge_arguments_are_accepted)
{
    cr_assert_eq(pp_schedule_check_args(PP_SCHED_GPIPE, 1, 1, 1), PP_OK);
    cr_assert_eq(pp_schedule_check_args(PP_SCHED_ZBH1, 1024, 1 << 20, 1), PP_OK);
    cr_assert_eq(pp_schedule_check_args(PP_SCHED_INTERLEAVED, 2, 2, 64), PP_OK);
    cr_assert_eq(pp_schedule_check_args(PP_SCHED_INTERLEAVED, 1024, 1024, 2), PP_OK);
}

Test(schedule, arguments_too_large_to_materialise_are_refused_before_allocating)
{
    pp_schedule *sc = NULL;
    cr_assert_eq(pp_schedule_create(PP_SCHED_1F1B, 1024, 1 << 20, 1, &sc), PP_ERR_NOMEM);
    cr_assert(strstr(pp_error_message(), "more than the limit"), "%s", pp_error_message());
    cr_assert_null(sc);
}

Test(schedule, kind_names_parse_and_round_trip)
{
    static const struct {
        const char *name;
        pp_schedule_kind kind;
    } names[] = {{"gpipe", PP_SCHED_GPIPE},
                 {"1f1b", PP_SCHED_1F1B},
                 {"interleaved", PP_SCHED_INTERLEAVED},
                 {"zb-h1", PP_SCHED_ZBH1}};
    for (int i = 0; i < N_OF(names); i++) {
        pp_schedule_kind k = (pp_schedule_kind)-1;
        cr_assert_eq(pp_schedule_kind_parse(names[i].name, &k), PP_OK);
        cr_assert_eq(k, names[i].kind);
        cr_assert_str_eq(pp_schedule_kind_name(k), names[i].name);
    }
    static const char *const bad[] = {"", "GPipe ", "zbh1", "1F1B-", "interleave"};
    for (int i = 0; i < N_OF(bad); i++) {
        pp_schedule_kind k;
        cr_assert_eq(pp_schedule_kind_parse(bad[i], &k), PP_ERR_INVALID, "'%s'", bad[i]);
        cr_assert(strstr(pp_error_message(), "known: gpipe, 1f1b, interleaved, zb-h1"));
    }
    pp_schedule_kind k;
    cr_assert_eq(pp_schedule_kind_parse(NULL, &k), PP_ERR_INVALID);
    cr_assert_str_eq(pp_schedule_kind_name((pp_schedule_kind)9), "unknown");
    cr_assert_str_eq(pp_op_name(PP_OP_BWD_WEIGHT), "BWD_WEIGHT");
    cr_assert_str_eq(pp_op_name(PP_OP_OPT_STEP), "OPT_STEP");
    cr_assert_str_eq(pp_op_name((pp_op)42), "UNKNOWN");
}

Test(schedule, identical_arguments_give_identical_lists)
{
    static const struct {
        pp_schedule_kind kind;
        int S, M, v;
    } cases[] = {{PP_SCHED_GPIPE, 4, 8, 1},
                 {PP_SCHED_1F1B, 8, 16, 1},
                 {PP_SCHED_INTERLEAVED, 4, 12, 3},
                 {PP_SCHED_ZBH1, 8, 5, 1}};
    for (int i = 0; i < N_OF(cases); i++) {
        pp_schedule *a = make(cases[i].kind, cases[i].S, cases[i].M, cases[i].v);
        pp_schedule *b = make(cases[i].kind, cases[i].S, cases[i].M, cases[i].v);
        cr_assert(a->kind == b->kind && a->S == b->S && a->M == b->M && a->v == b->v);
        for (int s = 0; s < a->S; s++) {
            cr_assert_eq(a->n_instrs[s], b->n_instrs[s]);
            for (int j = 0; j < a->n_instrs[s]; j++) {
                const pp_instr *x = &a->instrs[s][j], *y = &b->instrs[s][j];
                cr_assert(x->op == y->op && x->mb == y->mb && x->chunk == y->chunk &&
                          x->peer == y->peer, "case %d stage %d instruction %d", i, s, j);
            }
        }
        pp_schedule_destroy(a);
        pp_schedule_destroy(b);
    }
}

Test(schedule, destroy_and_report_free_accept_null)
{
    pp_schedule_destroy(NULL);
    pp_schedule_report_free(NULL);
    pp_schedule_report rep = {0};
    pp_schedule_report_free(&rep);
}

/* ---- the validator catches broken lists ---------------------------------------------------- */

static int find(const pp_schedule *sc, int s, pp_op op, int mb, int chunk)
{
    for (int i = 0; i < sc->n_instrs[s]; i++) {
        const pp_instr *in = &sc->instrs[s][i];
        if (in->op == op && in->mb == mb && in->chunk == chunk)
            return i;
    }
    cr_assert_fail("stage %d has no %s of mb %d chunk %d", s, pp_op_name(op), mb, chunk);
    return -1;
}

static void swap_instrs(pp_schedule *sc, int s, int i, int j)
{
    pp_instr t = sc->instrs[s][i];
    sc->instrs[s][i] = sc->instrs[s][j];
    sc->instrs[s][j] = t;
}

static void remove_instr(pp_schedule *sc, int s, int i)
{
    memmove(&sc->instrs[s][i], &sc->instrs[s][i + 1],
            (size_t)(sc->n_instrs[s] - i - 1) * sizeof(pp_instr));
    sc->n_instrs[s]--;
}

/* Lists are pp_alloc'd (pp_plan.h), so a longer one may replace them. */
static void insert_instr(pp_schedule *sc, int s, int at, pp_instr in)
{
    int n = sc->n_instrs[s];
    pp_instr *list = pp_alloc((size_t)(n + 1) * sizeof *list);
    cr_assert_not_null(list);
    memcpy(list, sc->instrs[s], (size_t)at * sizeof *list);
    list[at] = in;
    memcpy(list + at + 1, sc->instrs[s] + at, (size_t)(n - at) * sizeof *list);
    pp_free(sc->instrs[s]);
    sc->instrs[s] = list;
    sc->n_instrs[s] = n + 1;
}

static void expect_invalid(const pp_schedule *sc, const char *const *parts, int n_parts)
{
    pp_schedule_report rep;
    pp_error_clear();
    cr_assert_eq(pp_schedule_validate(sc, &rep), PP_ERR_INVALID, "mutated schedule validated");
    for (int i = 0; i < n_parts; i++)
        cr_assert(strstr(pp_error_message(), parts[i]), "message '%s' lacks '%s'",
                  pp_error_message(), parts[i]);
    cr_assert_null(rep.peak_inflight, "report must stay empty on failure");
    pp_schedule_report_free(&rep);
}

#define EXPECT_INVALID(sc, ...)                                                                    \
    do {                                                                                           \
        static const char *const parts_[] = {__VA_ARGS__};                                         \
        expect_invalid((sc), parts_, N_OF(parts_));                                                \
    } while (0)

Test(schedule, swapping_a_send_behind_a_receive_deadlocks)
{
    /* GPipe S=2 M=2, stage 0: F0 sa0 F1 sa1 rg0 B0 ... Moving rg0 before sa1 makes stage 0
     * wait for a gradient that stage 1 can only compute after receiving activation 1. */
    pp_schedule *sc = make(PP_SCHED_GPIPE, 2, 2, 1);
    swap_instrs(sc, 0, find(sc, 0, PP_OP_SEND_ACT, 1, 0), find(sc, 0, PP_OP_RECV_GRAD, 0, 0));
    EXPECT_INVALID(sc, "deadlock", "stage 0 waits at instruction 3 (RECV_GRAD mb 0 chunk 0",
                   "stage 1 waits at instruction 2 (RECV_ACT mb 1 chunk 0 from stage 0");
    pp_schedule_destroy(sc);
}

Test(schedule, reordering_interleaved_backwards_deadlocks)
{
    /* S=2 v=2 M=2, stage 1: ... F0.1 B0.1 sg0.1 ... rg0.0 B0.0 sg0.0 ... Moving "rg0.0 B0.0
     * sg0.0" in front of B0.1 makes stage 1 wait for the gradient of piece 2 (chunk 1 of stage
     * 0), which stage 0 computes only after stage 1's B0.1 has sent it the gradient of piece 3. */
    pp_schedule *sc = make(PP_SCHED_INTERLEAVED, 2, 2, 2);
    cr_assert_eq(pp_schedule_validate(sc, NULL), PP_OK, "%s", pp_error_message());
    int to = find(sc, 1, PP_OP_BWD, 0, 1), from = find(sc, 1, PP_OP_RECV_GRAD, 0, 0);
    pp_instr block[3];
    memcpy(block, &sc->instrs[1][from], sizeof block);
    memmove(&sc->instrs[1][to + 3], &sc->instrs[1][to], (size_t)(from - to) * sizeof(pp_instr));
    memcpy(&sc->instrs[1][to], block, sizeof block);
    cr_assert_eq(sc->instrs[1][to + 1].op, PP_OP_BWD);
    cr_assert_eq(sc->instrs[1][to + 3].op, PP_OP_BWD);
    EXPECT_INVALID(sc, "deadlock: stage 0 waits at instruction",
                   "(RECV_GRAD mb 0 chunk 1 from stage 1",
                   "stage 1 waits at instruction 8 (RECV_GRAD mb 0 chunk 0 from stage 0");
    pp_schedule_destroy(sc);
}

Test(schedule, dropped_send_is_caught)
{
    pp_schedule *sc = make(PP_SCHED_1F1B, 4, 4, 1);
    remove_instr(sc, 1, find(sc, 1, PP_OP_SEND_ACT, 2, 0));
    EXPECT_INVALID(sc, "stage 1: no SEND_ACT of mb 2 chunk 0", "to stage 2");
    pp_schedule_destroy(sc);

    sc = make(PP_SCHED_ZBH1, 3, 4, 1);
    remove_instr(sc, 2, find(sc, 2, PP_OP_SEND_GRAD, 3, 0));
    EXPECT_INVALID(sc, "stage 2: no SEND_GRAD of mb 3 chunk 0");
    pp_schedule_destroy(sc);
}

Test(schedule, duplicated_fwd_is_caught)
{
    pp_schedule *sc = make(PP_SCHED_1F1B, 2, 4, 1);
    int i = find(sc, 0, PP_OP_FWD, 1, 0);
    insert_instr(sc, 0, i + 1, sc->instrs[0][i]);
    EXPECT_INVALID(sc, "stage 0 instruction", "duplicate FWD of mb 1 chunk 0",
                   "first at instruction");
    pp_schedule_destroy(sc);
}

Test(schedule, early_or_missing_opt_step_is_caught)
{
    pp_schedule *sc = make(PP_SCHED_GPIPE, 2, 2, 1);
    int last = sc->n_instrs[1] - 1;
    swap_instrs(sc, 1, 0, last);
    EXPECT_INVALID(sc, "stage 1 instruction 0: OPT_STEP must be the last instruction");
    pp_schedule_destroy(sc);

    sc = make(PP_SCHED_GPIPE, 2, 2, 1);
    sc->n_instrs[0]--;
    EXPECT_INVALID(sc, "stage 0: the list must end with OPT_STEP");
    pp_schedule_destroy(sc);
}

Test(schedule, wrong_peer_is_caught)
{
    pp_schedule *sc = make(PP_SCHED_1F1B, 4, 4, 1);
    sc->instrs[1][find(sc, 1, PP_OP_SEND_ACT, 0, 0)].peer = 3;
    EXPECT_INVALID(sc, "stage 1 instruction", "SEND_ACT of mb 0 chunk 0 (piece 1) has peer 3",
                   "must be 2");
    pp_schedule_destroy(sc);

    sc = make(PP_SCHED_INTERLEAVED, 4, 4, 2);
    /* Chunk 1 of stage 0 is piece 4: its input comes from stage 3. */
    sc->instrs[0][find(sc, 0, PP_OP_RECV_ACT, 0, 1)].peer = 1;
    EXPECT_INVALID(sc, "RECV_ACT of mb 0 chunk 1 (piece 4) has peer 1, must be 3");
    pp_schedule_destroy(sc);
}

Test(schedule, ops_that_should_not_be_there_are_caught)
{
    pp_schedule *sc = make(PP_SCHED_1F1B, 3, 2, 1);
    pp_instr extra = {.op = PP_OP_SEND_ACT, .mb = 0, .chunk = 0, .peer = 0};
    insert_instr(sc, 2, find(sc, 2, PP_OP_FWD, 0, 0) + 1, extra);
    EXPECT_INVALID(sc, "SEND_ACT of mb 0 chunk 0 (piece 2) should not be there",
                   "it is the last piece");
    pp_schedule_destroy(sc);

    sc = make(PP_SCHED_1F1B, 3, 2, 1);
    pp_instr recv = {.op = PP_OP_RECV_ACT, .mb = 1, .chunk = 0, .peer = 2};
    insert_instr(sc, 0, 0, recv);
    EXPECT_INVALID(sc, "stage 0 instruction 0", "it is the first piece");
    pp_schedule_destroy(sc);

    sc = make(PP_SCHED_1F1B, 3, 2, 1);
    sc->instrs[1][find(sc, 1, PP_OP_FWD, 1, 0)].mb = 2;
    EXPECT_INVALID(sc, "FWD): mb 2 chunk 0 out of range (M = 2");
    pp_schedule_destroy(sc);

    sc = make(PP_SCHED_1F1B, 3, 2, 1);
    sc->instrs[1][find(sc, 1, PP_OP_FWD, 1, 0)].op = 42;
    EXPECT_INVALID(sc, "unknown op 42");
    pp_schedule_destroy(sc);

    sc = make(PP_SCHED_1F1B, 3, 2, 1);
    sc->instrs[1][find(sc, 1, PP_OP_BWD, 1, 0)].op = PP_OP_BWD_INPUT;
    EXPECT_INVALID(sc, "stage 1: mb 1 chunk 0 has BWD_INPUT", "but no BWD_WEIGHT");
    pp_schedule_destroy(sc);
}

Test(schedule, local_order_violations_are_caught)
{
    pp_schedule *sc = make(PP_SCHED_ZBH1, 2, 3, 1);
    swap_instrs(sc, 0, find(sc, 0, PP_OP_BWD_INPUT, 1, 0), find(sc, 0, PP_OP_BWD_WEIGHT, 1, 0));
    EXPECT_INVALID(sc, "BWD_WEIGHT of mb 1 chunk 0 comes before its BWD_INPUT");
    pp_schedule_destroy(sc);

    sc = make(PP_SCHED_1F1B, 2, 3, 1);
    swap_instrs(sc, 1, find(sc, 1, PP_OP_RECV_ACT, 2, 0), find(sc, 1, PP_OP_FWD, 2, 0));
    EXPECT_INVALID(sc, "stage 1 instruction", "FWD of mb 2 chunk 0 comes before its RECV_ACT");
    pp_schedule_destroy(sc);

    sc = make(PP_SCHED_GPIPE, 1, 3, 1);
    swap_instrs(sc, 0, find(sc, 0, PP_OP_FWD, 2, 0), find(sc, 0, PP_OP_BWD, 2, 0));
    EXPECT_INVALID(sc, "BWD of mb 2 chunk 0 comes before its FWD");
    pp_schedule_destroy(sc);
}

Test(schedule, same_stage_hand_offs_replay_without_messages)
{
    /* Not a generated schedule (interleaved needs S >= 2), but the execution model allows it:
     * one stage holding both pieces of a two-piece model. */
    pp_schedule sc = {.kind = PP_SCHED_INTERLEAVED, .S = 1, .M = 1, .v = 2};
    pp_instr good[] = {{PP_OP_FWD, 0, 0, -1}, {PP_OP_FWD, 0, 1, -1}, {PP_OP_BWD, 0, 1, -1},
                       {PP_OP_BWD, 0, 0, -1}, {PP_OP_OPT_STEP, -1, -1, -1}};
    pp_instr *lists[1] = {good};
    int n[1] = {N_OF(good)};
    sc.instrs = lists;
    sc.n_instrs = n;
    pp_schedule_report rep;
    cr_assert_eq(pp_schedule_validate(&sc, &rep), PP_OK, "%s", pp_error_message());
    cr_assert_eq(rep.peak_inflight[0], 2);
    pp_schedule_report_free(&rep);

    pp_instr bad[] = {{PP_OP_FWD, 0, 0, -1}, {PP_OP_FWD, 0, 1, -1}, {PP_OP_BWD, 0, 0, -1},
                      {PP_OP_BWD, 0, 1, -1}, {PP_OP_OPT_STEP, -1, -1, -1}};
    lists[0] = bad;
    EXPECT_INVALID(&sc, "deadlock: stage 0 waits at instruction 2 (BWD mb 0 chunk 0",
                   "its own instruction 3");

    pp_instr msg[] = {{PP_OP_FWD, 0, 0, -1}, {PP_OP_SEND_ACT, 0, 0, 0},
                      {PP_OP_FWD, 0, 1, -1}, {PP_OP_BWD, 0, 1, -1},
                      {PP_OP_BWD, 0, 0, -1}, {PP_OP_OPT_STEP, -1, -1, -1}};
    lists[0] = msg;
    n[0] = N_OF(msg);
    EXPECT_INVALID(&sc, "should not be there: piece p+1 is on the same stage");
}

Test(schedule, v_placement_maps_pieces_and_its_lists_validate)
{
    /* both placements: (stage, chunk) -> piece is a bijection onto 0 .. S v - 1 with its
     * inverse; in the V the odd chunks run back down the stages */
    for (int place = PP_PLACE_LOOPED; place <= PP_PLACE_V; place++)
        for (int S = 1; S <= 5; S++)
            for (int v = 1; v <= 4; v++) {
                pp_schedule m = {.S = S, .v = v, .placement = place};
                int hit[20] = {0};
                for (int st = 0; st < S; st++)
                    for (int c = 0; c < v; c++) {
                        int p = pp_schedule_piece(&m, st, c);
                        cr_assert(p >= 0 && p < S * v);
                        hit[p]++;
                        cr_assert_eq(pp_schedule_piece_stage(&m, p), st);
                        cr_assert_eq(pp_schedule_piece_chunk(&m, p), c);
                        int want = place == PP_PLACE_V && c % 2 ? c * S + S - 1 - st : c * S + st;
                        cr_assert_eq(p, want, "S %d v %d stage %d chunk %d", S, v, st, c);
                    }
                for (int p = 0; p < S * v; p++)
                    cr_assert_eq(hit[p], 1);
            }

    /* torch's ZBV on 2 stages, one micro-batch: pieces 0 and 3 on stage 0, 1 and 2 on stage 1,
     * which hands its own activation from piece 1 to piece 2 (and the gradient back) without a
     * message */
    pp_instr s0[] = {{PP_OP_FWD, 0, 0, -1},       {PP_OP_SEND_ACT, 0, 0, 1},
                     {PP_OP_RECV_ACT, 0, 1, 1},   {PP_OP_FWD, 0, 1, -1},
                     {PP_OP_BWD, 0, 1, -1},       {PP_OP_SEND_GRAD, 0, 1, 1},
                     {PP_OP_RECV_GRAD, 0, 0, 1},  {PP_OP_BWD, 0, 0, -1},
                     {PP_OP_OPT_STEP, -1, -1, -1}};
    pp_instr s1[] = {{PP_OP_RECV_ACT, 0, 0, 0},   {PP_OP_FWD, 0, 0, -1},
                     {PP_OP_FWD, 0, 1, -1},       {PP_OP_SEND_ACT, 0, 1, 0},
                     {PP_OP_RECV_GRAD, 0, 1, 0},  {PP_OP_BWD, 0, 1, -1},
                     {PP_OP_BWD, 0, 0, -1},       {PP_OP_SEND_GRAD, 0, 0, 0},
                     {PP_OP_OPT_STEP, -1, -1, -1}};
    pp_instr *lists[2] = {s0, s1};
    int n[2] = {N_OF(s0), N_OF(s1)};
    pp_schedule sc = {.kind = PP_SCHED_INTERLEAVED, .S = 2, .M = 1, .v = 2, .instrs = lists,
                      .n_instrs = n, .placement = PP_PLACE_V};
    pp_schedule_report rep;
    cr_assert_eq(pp_schedule_validate(&sc, &rep), PP_OK, "%s", pp_error_message());
    cr_assert_eq(rep.peak_inflight[1], 2); /* both of stage 1's pieces hold the micro-batch */
    pp_schedule_report_free(&rep);
    cr_assert(pp_schedule_links_fifo(&sc, NULL, 0));

    /* read as looped, stage 1's chunk 1 would be the last piece */
    sc.placement = PP_PLACE_LOOPED;
    EXPECT_INVALID(&sc, "stage 1 instruction 3: SEND_ACT of mb 0 chunk 1 (piece 3)",
                   "it is the last piece");
    sc.placement = PP_PLACE_V;

    /* the hand-off's order matters: chunk 1's backward before chunk 0's on stage 1 */
    pp_instr swapped[N_OF(s1)];
    memcpy(swapped, s1, sizeof s1);
    swapped[5] = s1[6];
    swapped[6] = s1[5];
    lists[1] = swapped;
    EXPECT_INVALID(&sc, "deadlock", "stage 1 waits at instruction 5 (BWD mb 0 chunk 0",
                   "for its own instruction 6");
    lists[1] = s1;

    /* a message between the pieces that share stage 1 */
    pp_instr msg[N_OF(s1) + 1];
    memcpy(msg, s1, 2 * sizeof *s1);
    msg[2] = (pp_instr){PP_OP_SEND_ACT, 0, 0, 1};
    memcpy(msg + 3, s1 + 2, (N_OF(s1) - 2) * sizeof *s1);
    lists[1] = msg;
    n[1] = N_OF(msg);
    EXPECT_INVALID(&sc, "should not be there: piece p+1 is on the same stage");
}

Test(schedule, validation_of_large_schedules_is_fast)
{
    /* Linear in the number of instructions: a quadratic validator takes minutes here. The
     * thread's own CPU time is measured, not the wall clock: other work on the machine does
     * not add to it. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    pp_schedule *sc = make(PP_SCHED_INTERLEAVED, 16, 64, 4);
    cr_assert_eq(pp_schedule_validate(sc, NULL), PP_OK, "%s", pp_error_message());
    pp_schedule_destroy(sc);
    sc = make(PP_SCHED_ZBH1, 64, 2048, 1);
    cr_assert_eq(pp_schedule_validate(sc, NULL), PP_OK, "%s", pp_error_message());
    pp_schedule_destroy(sc);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    /* Generous (sanitizer builds): the point is the order of growth. */
    cr_assert_lt(sec, 10.0, "took %.2f s of CPU", sec);
}

/* ---- step time under unit costs ------------------------------------------------------------ */

/* Costs of one micro-batch-chunk, in ticks. */
typedef struct unit_costs {
    int f, b, bi, w; /* FWD, BWD (whole), BWD_INPUT, BWD_WEIGHT; messages are free */
} unit_costs;

/* A replay with time: each stage runs its list in order; a compute op takes its cost; a RECV
 * waits until the matching SEND's time. Returns the step time (last op's end). */
static int64_t step_ticks(const pp_schedule *sc, unit_costs c)
{
    int S = sc->S, M = sc->M, P = S * sc->v;
    int64_t *t_act = malloc((size_t)P * (size_t)M * sizeof *t_act);
    int64_t *t_grad = malloc((size_t)P * (size_t)M * sizeof *t_grad);
    int64_t *clock = calloc((size_t)S, sizeof *clock);
    int *pc = calloc((size_t)S, sizeof *pc);
    cr_assert(t_act && t_grad && clock && pc);
    for (int i = 0; i < P * M; i++)
        t_act[i] = t_grad[i] = -1;
    int left = S;
    while (left > 0) {
        int progress = 0;
        for (int s = 0; s < S; s++) {
            while (pc[s] < sc->n_instrs[s]) {
                const pp_instr *in = &sc->instrs[s][pc[s]];
                int p = in->chunk * S + s;
                int64_t t;
                if (in->op == PP_OP_RECV_ACT || in->op == PP_OP_RECV_GRAD) {
                    t = in->op == PP_OP_RECV_ACT ? t_act[(p - 1) * M + in->mb]
                                                 : t_grad[(p + 1) * M + in->mb];
                    if (t < 0)
                        break;
                    if (t > clock[s])
                        clock[s] = t;
                } else if (in->op == PP_OP_SEND_ACT) {
                    t_act[p * M + in->mb] = clock[s];
                } else if (in->op == PP_OP_SEND_GRAD) {
                    t_grad[p * M + in->mb] = clock[s];
                } else {
                    clock[s] += in->op == PP_OP_FWD          ? c.f
                                : in->op == PP_OP_BWD        ? c.b
                                : in->op == PP_OP_BWD_INPUT  ? c.bi
                                : in->op == PP_OP_BWD_WEIGHT ? c.w
                                                             : 0;
                }
                pc[s]++;
                progress = 1;
                if (pc[s] == sc->n_instrs[s])
                    left--;
            }
        }
        cr_assert(progress, "unit-cost replay stuck");
    }
    int64_t end = 0;
    for (int s = 0; s < S; s++)
        end = clock[s] > end ? clock[s] : end;
    free(t_act);
    free(t_grad);
    free(clock);
    free(pc);
    return end;
}

Test(schedule, gpipe_and_1f1b_step_time_is_m_plus_s_minus_1_times_f_plus_b)
{
    static const unit_costs costs[] = {{1, 1, 0, 0}, {1, 2, 0, 0}, {3, 5, 0, 0}};
    for (int k = 0; k < N_OF(costs); k++)
        for (int i = 0; i < N_OF(k_S); i++)
            for (int j = 0; j < N_OF(k_M); j++) {
                int S = k_S[i], M = k_M[j];
                int64_t want = (int64_t)(M + S - 1) * (costs[k].f + costs[k].b);
                for (int g = 0; g < 2; g++) {
                    pp_schedule *sc = make(g ? PP_SCHED_1F1B : PP_SCHED_GPIPE, S, M, 1);
                    cr_assert_eq(step_ticks(sc, costs[k]), want, "%s S=%d M=%d f=%d b=%d",
                                 g ? "1f1b" : "gpipe", S, M, costs[k].f, costs[k].b);
                    pp_schedule_destroy(sc);
                }
            }
}

Test(schedule, interleaved_step_time_shrinks_the_bubble_by_v)
{
    /* Chunk costs f_c, b_c; a stage's whole-model costs are f = v f_c, b = v b_c, and the step
     * takes (M + (S-1)/v)(f + b) = (v M + S - 1)(f_c + b_c). */
    static const unit_costs costs[] = {{1, 1, 0, 0}, {1, 2, 0, 0}};
    for (int k = 0; k < N_OF(costs); k++)
        for (int i = 1; i < N_OF(k_S); i++)
            for (int j = 0; j < N_OF(k_M_per_S); j++)
                for (int l = 0; l < N_OF(k_v); l++) {
                    int S = k_S[i], M = k_M_per_S[j] * S, v = k_v[l];
                    pp_schedule *sc = make(PP_SCHED_INTERLEAVED, S, M, v);
                    int64_t want = (int64_t)(v * M + S - 1) * (costs[k].f + costs[k].b);
                    cr_assert_eq(step_ticks(sc, costs[k]), want, "S=%d M=%d v=%d f=%d b=%d", S, M,
                                 v, costs[k].f, costs[k].b);
                    pp_schedule_destroy(sc);
                }
}

Test(schedule, zbh1_step_time_has_a_third_of_the_1f1b_bubble)
{
    /* With w <= min(f, b), the step takes max(M(f+b+w) + (S-1)(f+b-w), (M+S-1)(f+b) + w): the
     * first term once M >= S (f = b = w: 3M + S - 1, a third of 1F1B's 3(S-1) bubble), the
     * second, one micro-batch's round trip after the first stage's forwards, below. */
    static const unit_costs costs[] = {{1, 0, 1, 1}, {2, 0, 2, 1}, {3, 0, 2, 1}, {2, 0, 3, 2},
                                       {1, 0, 3, 1}};
    for (int k = 0; k < N_OF(costs); k++)
        for (int i = 0; i < N_OF(k_S); i++)
            for (int j = 0; j < N_OF(k_M); j++) {
                int S = k_S[i], M = k_M[j], f = costs[k].f, b = costs[k].bi, w = costs[k].w;
                int64_t full = (int64_t)M * (f + b + w) + (int64_t)(S - 1) * (f + b - w);
                int64_t trip = (int64_t)(M + S - 1) * (f + b) + w;
                pp_schedule *sc = make(PP_SCHED_ZBH1, S, M, 1);
                cr_assert_eq(step_ticks(sc, costs[k]), full > trip ? full : trip,
                             "S=%d M=%d f=%d b=%d w=%d", S, M, f, b, w);
                if (M >= S && f == b && b == w)
                    cr_assert_eq(full, 3 * M * f + (S - 1) * f);
                pp_schedule_destroy(sc);
            }
}
