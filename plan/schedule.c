/* schedule.c: pipeline schedules as data (GPipe, 1F1B, interleaved 1F1B, ZB-H1): their names,
 * the facts each kind implies (splits the backward, allowed v), the generators of the
 * per-stage lists and their text form. Called by the executor, the analyzer's simulator and
 * rebalancer and the tools' --explain views; docs/schedules.md describes every order and its
 * bounds. Validation is validate.c, the replay replay.c, the message rules messages.c. */
#include "pp_plan.h"

#include <stdio.h>
#include <string.h>

/* Generated lists beyond this many instructions in total are refused before allocating: the
 * arguments may be individually allowed while their product is not something to materialise
 * (1024 stages x 2^20 micro-batches). 2^26 instructions are 768 MiB. */
#define SCHED_MAX_TOTAL_INSTRS ((int64_t)1 << 26)

static const char *const k_kind_names[] = {"gpipe", "1f1b", "interleaved", "zb-h1"};
static const char *const k_op_names[] = {"FWD",       "BWD",      "BWD_INPUT",
                                         "BWD_WEIGHT", "SEND_ACT", "RECV_ACT",
                                         "SEND_GRAD",  "RECV_GRAD", "OPT_STEP"};
enum { N_KINDS = PP_SCHED_N_KINDS, N_OPS = 9 };

pp_status pp_schedule_kind_parse(const char *name, pp_schedule_kind *out)
{
    for (int k = 0; name && k < N_KINDS; k++) {
        if (strcmp(name, k_kind_names[k]) == 0) {
            *out = (pp_schedule_kind)k;
            return PP_OK;
        }
    }
    return PP_ERR(PP_ERR_INVALID, "unknown schedule '%s' (known: gpipe, 1f1b, interleaved, zb-h1)",
                  name ? name : "(null)");
}

const char *pp_schedule_kind_name(pp_schedule_kind k)
{
    return (unsigned)k < N_KINDS ? k_kind_names[k] : "unknown";
}

void pp_schedule_kind_list(char *buf, size_t cap)
{
    size_t len = 0;
    if (!cap)
        return;
    buf[0] = '\0';
    for (int k = 0; k < N_KINDS && len < cap; k++) {
        snprintf(buf + len, cap - len, "%s%s", k ? "," : "", k_kind_names[k]);
        len += strlen(buf + len);
    }
}

const char *pp_op_name(pp_op op) { return (unsigned)op < N_OPS ? k_op_names[op] : "UNKNOWN"; }

int pp_schedule_splits_backward(pp_schedule_kind kind) { return kind == PP_SCHED_ZBH1; }

int pp_schedule_default_v(pp_schedule_kind kind) { return kind == PP_SCHED_INTERLEAVED ? 2 : 1; }

int pp_schedule_allows_v(pp_schedule_kind kind, int S, int M, int v, char *why, size_t cap)
{
    char spare[8];
    if (!why || !cap) {
        why = spare;
        cap = sizeof spare;
    }
    if (kind != PP_SCHED_INTERLEAVED) {
        if (v == 1)
            return 1;
        snprintf(why, cap,
                 "schedule %s has one chunk per stage: v = %d must be 1 (only interleaved takes "
                 "v > 1)",
                 pp_schedule_kind_name(kind), v);
        return 0;
    }
    if (S < 2)
        snprintf(why, cap,
                 "schedule interleaved needs S >= 2 stages (S = %d); use 1f1b on one stage", S);
    else if (v < 2)
        snprintf(why, cap,
                 "schedule interleaved needs v >= 2 chunks per stage (v = %d); with one chunk it "
                 "is 1f1b",
                 v);
    else if (M % S != 0)
        snprintf(why, cap,
                 "schedule interleaved needs micro-batches M a multiple of stages S (M = %d, "
                 "S = %d), as Megatron-LM does",
                 M, S);
    else
        return 1;
    return 0;
}

pp_status pp_schedule_check_args(pp_schedule_kind kind, int S, int M, int v)
{
    if ((unsigned)kind >= N_KINDS)
        return PP_ERR(PP_ERR_INVALID, "unknown schedule kind %d", (int)kind);
    if (S < 1 || S > PP_SCHED_MAX_S)
        return PP_ERR(PP_ERR_INVALID, "stages S = %d must be in [1, %d]", S, PP_SCHED_MAX_S);
    if (M < 1 || M > PP_SCHED_MAX_M)
        return PP_ERR(PP_ERR_INVALID, "micro-batches M = %d must be in [1, %d]", M,
                      PP_SCHED_MAX_M);
    if (v < 1 || v > PP_SCHED_MAX_V)
        return PP_ERR(PP_ERR_INVALID, "virtual stages v = %d must be in [1, %d]", v,
                      PP_SCHED_MAX_V);
    char why[256];
    if (!pp_schedule_allows_v(kind, S, M, v, why, sizeof why))
        return PP_ERR(PP_ERR_INVALID, "%s", why);
    return PP_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Generation. Each generator decides the order of a stage's compute ops; emit_fwd/emit_bwd wrap
 * each one in its communication: the RECV right before the op that consumes the message, the
 * SEND right after the op that produces it. With buffered sends that adds no wait beyond the
 * data dependency itself, so a list deadlocks only if its compute order does. */

typedef struct list_builder {
    const pp_schedule *sc;
    int s;
    pp_instr *ins;
    int n;
} list_builder;

static void emit(list_builder *b, pp_op op, int mb, int chunk, int peer)
{
    pp_instr *in = &b->ins[b->n++];
    in->op = (uint8_t)op;
    in->mb = mb;
    in->chunk = (int16_t)chunk;
    in->peer = (int16_t)peer;
}

/* The stages of the pieces before and after (stage, chunk)'s, -1 at the model's ends. */
static void neighbours(const list_builder *b, int chunk, int *prev, int *next)
{
    const pp_schedule *sc = b->sc;
    int p = pp_schedule_piece(sc, b->s, chunk);
    *prev = p > 0 ? pp_schedule_piece_stage(sc, p - 1) : -1;
    *next = p < sc->S * sc->v - 1 ? pp_schedule_piece_stage(sc, p + 1) : -1;
}

/* A neighbour on the same stage hands over without a message. */
static void emit_fwd(list_builder *b, int mb, int chunk)
{
    int prev, next;
    neighbours(b, chunk, &prev, &next);
    if (prev >= 0 && prev != b->s)
        emit(b, PP_OP_RECV_ACT, mb, chunk, prev);
    emit(b, PP_OP_FWD, mb, chunk, -1);
    if (next >= 0 && next != b->s)
        emit(b, PP_OP_SEND_ACT, mb, chunk, next);
}

/* `op` is PP_OP_BWD or PP_OP_BWD_INPUT: whichever produces the input gradient. */
static void emit_bwd(list_builder *b, pp_op op, int mb, int chunk)
{
    int prev, next;
    neighbours(b, chunk, &prev, &next);
    if (next >= 0 && next != b->s)
        emit(b, PP_OP_RECV_GRAD, mb, chunk, next);
    emit(b, op, mb, chunk, -1);
    if (prev >= 0 && prev != b->s)
        emit(b, PP_OP_SEND_GRAD, mb, chunk, prev);
}

static int min_int(int a, int b) { return a < b ? a : b; }

static void gen_gpipe(list_builder *b)
{
    int M = b->sc->M;
    for (int m = 0; m < M; m++)
        emit_fwd(b, m, 0);
    /* Oldest first, like 1F1B: each link then carries gradients in the order it carried
     * activations, and GPipe differs from 1F1B only in where the backwards start. */
    for (int m = 0; m < M; m++)
        emit_bwd(b, PP_OP_BWD, m, 0);
}

/* Warm-up forwards of 1F1B and ZB-H1 on stage s: enough to keep the pipeline full until the
 * first gradient comes back. */
static int warmup_1f1b(const pp_schedule *sc, int s) { return min_int(sc->S - s - 1, sc->M); }

static void gen_1f1b(list_builder *b)
{
    int M = b->sc->M, w = warmup_1f1b(b->sc, b->s);
    for (int m = 0; m < w; m++)
        emit_fwd(b, m, 0);
    for (int i = 0; i < M - w; i++) {
        emit_fwd(b, w + i, 0);
        emit_bwd(b, PP_OP_BWD, i, 0);
    }
    for (int m = M - w; m < M; m++)
        emit_bwd(b, PP_OP_BWD, m, 0);
}

/* ZB-H1: the order of 1F1B with the backward split, and stage s holding back its weight
 * gradients (W) until s of them are pending. Those s W passes are what the stage does at the
 * end while upstream stages still wait for input gradients in 1F1B, so the bubble shrinks from
 * 1F1B's (S-1)(f+b+w) to (S-1)(f+b-w); the price is activation memory min(S, M) on every stage
 * (the F-to-W lifetime), the first stage's 1F1B peak. docs/schedules.md has the reasoning. */
static void gen_zbh1(list_builder *b)
{
    int M = b->sc->M, s = b->s, w = warmup_1f1b(b->sc, s);
    int n_b = 0, n_w = 0;
    for (int m = 0; m < w; m++)
        emit_fwd(b, m, 0);
    for (int i = 0; i < M; i++) {
        if (i < M - w)
            emit_fwd(b, w + i, 0);
        emit_bwd(b, PP_OP_BWD_INPUT, i, 0);
        n_b++;
        if (n_b - n_w > s)
            emit(b, PP_OP_BWD_WEIGHT, n_w++, 0, -1);
    }
    while (n_w < M)
        emit(b, PP_OP_BWD_WEIGHT, n_w++, 0, -1);
}

/* Megatron-LM's order of the v*M micro-batch-chunks: in rounds of S*v, chunk 0 for S
 * micro-batches, then chunk 1 for the same S, ...; backwards from the last chunk down. */
static void interleaved_item(const pp_schedule *sc, int k, int forward, int *mb, int *chunk)
{
    int group = sc->S * sc->v, c = (k % group) / sc->S;
    *chunk = forward ? c : sc->v - 1 - c;
    *mb = (k / group) * sc->S + k % sc->S;
}

static int warmup_interleaved(const pp_schedule *sc, int s)
{
    return min_int((sc->S - s - 1) * 2 + (sc->v - 1) * sc->S, sc->v * sc->M);
}

static void gen_interleaved(list_builder *b)
{
    const pp_schedule *sc = b->sc;
    int total = sc->v * sc->M, w = warmup_interleaved(sc, b->s), mb, chunk;
    for (int k = 0; k < w; k++) {
        interleaved_item(sc, k, 1, &mb, &chunk);
        emit_fwd(b, mb, chunk);
    }
    for (int k = 0; k < total - w; k++) {
        interleaved_item(sc, w + k, 1, &mb, &chunk);
        emit_fwd(b, mb, chunk);
        interleaved_item(sc, k, 0, &mb, &chunk);
        emit_bwd(b, PP_OP_BWD, mb, chunk);
    }
    for (int k = total - w; k < total; k++) {
        interleaved_item(sc, k, 0, &mb, &chunk);
        emit_bwd(b, PP_OP_BWD, mb, chunk);
    }
}

pp_status pp_schedule_create(pp_schedule_kind kind, int S, int M, int v, pp_schedule **out)
{
    *out = NULL;
    pp_status st = pp_schedule_check_args(kind, S, M, v);
    if (st != PP_OK)
        return st;
    /* Per (mb, chunk): FWD, BWD or B + W, and up to four SEND/RECV; plus OPT_STEP. */
    int64_t cap = 7 * (int64_t)M * v + 1;
    if (cap * S > SCHED_MAX_TOTAL_INSTRS)
        return PP_ERR(PP_ERR_NOMEM,
                      "schedule %s with S = %d, M = %d, v = %d would hold up to %lld "
                      "instructions, more than the limit of %lld",
                      k_kind_names[kind], S, M, v, (long long)(cap * S),
                      (long long)SCHED_MAX_TOTAL_INSTRS);

    pp_schedule *sc = pp_alloc(sizeof *sc);
    if (!sc)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for a schedule");
    sc->kind = kind;
    sc->S = S;
    sc->M = M;
    sc->v = v;
    sc->n_instrs = pp_alloc((size_t)S * sizeof *sc->n_instrs);
    sc->instrs = pp_alloc((size_t)S * sizeof *sc->instrs);
    if (!sc->n_instrs || !sc->instrs) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory for a schedule of %d stages", S);
        goto fail;
    }
    for (int s = 0; s < S; s++) {
        list_builder b = {.sc = sc, .s = s, .ins = pp_alloc((size_t)cap * sizeof(pp_instr))};
        if (!b.ins) {
            st = PP_ERR(PP_ERR_NOMEM, "out of memory for stage %d's list of up to %lld "
                                      "instructions", s, (long long)cap);
            goto fail;
        }
        sc->instrs[s] = b.ins;
        switch (kind) {
        case PP_SCHED_GPIPE: gen_gpipe(&b); break;
        case PP_SCHED_1F1B: gen_1f1b(&b); break;
        case PP_SCHED_INTERLEAVED: gen_interleaved(&b); break;
        case PP_SCHED_ZBH1: gen_zbh1(&b); break;
        }
        emit(&b, PP_OP_OPT_STEP, -1, -1, -1);
        sc->n_instrs[s] = b.n;
    }
    *out = sc;
    return PP_OK;
fail:
    pp_schedule_destroy(sc);
    return st;
}

void pp_schedule_destroy(pp_schedule *s)
{
    if (!s)
        return;
    if (s->instrs)
        for (int i = 0; i < s->S; i++)
            pp_free(s->instrs[i]);
    pp_free(s->instrs);
    pp_free(s->n_instrs);
    pp_free(s);
}

/* ---------------------------------------------------------------------------------------------
 * Printing. Compute ops: F (FWD), B (BWD), Bi (BWD_INPUT), W (BWD_WEIGHT) followed by the
 * micro-batch; messages: sa/ra (activation) and sg/rg (gradient) with ">peer" for a send and
 * "<peer" for a receive; OPT for the optimizer step. ".chunk" follows the micro-batch when
 * v > 1. */

void pp_schedule_print(const pp_schedule *s, FILE *out)
{
    static const char *const tok[N_OPS] = {"F", "B", "Bi", "W", "sa", "ra", "sg", "rg", "OPT"};
    if (!s || !out)
        return;
    fprintf(out, "# %s S=%d M=%d v=%d\n", pp_schedule_kind_name(s->kind), s->S, s->M, s->v);
    for (int st = 0; st < s->S; st++) {
        fprintf(out, "s%d:", st);
        for (int i = 0; i < s->n_instrs[st]; i++) {
            const pp_instr *in = &s->instrs[st][i];
            if (in->op >= N_OPS) {
                fprintf(out, " ?%d", in->op);
                continue;
            }
            fprintf(out, " %s", tok[in->op]);
            if (in->op == PP_OP_OPT_STEP)
                continue;
            fprintf(out, "%d", (int)in->mb);
            if (s->v > 1)
                fprintf(out, ".%d", (int)in->chunk);
            if (in->op == PP_OP_SEND_ACT || in->op == PP_OP_SEND_GRAD)
                fprintf(out, ">%d", (int)in->peer);
            else if (in->op == PP_OP_RECV_ACT || in->op == PP_OP_RECV_GRAD)
                fprintf(out, "<%d", (int)in->peer);
        }
        fputc('\n', out);
    }
}
