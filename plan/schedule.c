/* schedule.c: pipeline schedules as data (GPipe, 1F1B, interleaved 1F1B, ZB-H1) and the
 * validator that proves a set of per-stage lists executable. Called by the executor, the
 * analyzer's simulator and the tools' --explain views; docs/schedules.md describes every order,
 * its bounds and the validator's execution model. */
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
enum { N_KINDS = 4, N_OPS = 9, N_KEYED_OPS = 8 /* every op but OPT_STEP has an (mb, chunk) */ };

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

const char *pp_op_name(pp_op op) { return (unsigned)op < N_OPS ? k_op_names[op] : "UNKNOWN"; }

pp_status pp_schedule_check_args(pp_schedule_kind kind, int S, int M, int v)
{
    if ((unsigned)kind >= N_KINDS)
        return PP_ERR(PP_ERR_INVALID, "unknown schedule kind %d", (int)kind);
    const char *name = k_kind_names[kind];
    if (S < 1 || S > PP_SCHED_MAX_S)
        return PP_ERR(PP_ERR_INVALID, "stages S = %d must be in [1, %d]", S, PP_SCHED_MAX_S);
    if (M < 1 || M > PP_SCHED_MAX_M)
        return PP_ERR(PP_ERR_INVALID, "micro-batches M = %d must be in [1, %d]", M,
                      PP_SCHED_MAX_M);
    if (v < 1 || v > PP_SCHED_MAX_V)
        return PP_ERR(PP_ERR_INVALID, "virtual stages v = %d must be in [1, %d]", v,
                      PP_SCHED_MAX_V);
    if (kind != PP_SCHED_INTERLEAVED) {
        if (v != 1)
            return PP_ERR(PP_ERR_INVALID,
                          "schedule %s has one chunk per stage: v = %d must be 1 (only "
                          "interleaved takes v > 1)",
                          name, v);
        return PP_OK;
    }
    if (S < 2)
        return PP_ERR(PP_ERR_INVALID,
                      "schedule interleaved needs S >= 2 stages (S = %d); use 1f1b on one stage",
                      S);
    if (v < 2)
        return PP_ERR(PP_ERR_INVALID,
                      "schedule interleaved needs v >= 2 chunks per stage (v = %d); with one "
                      "chunk it is 1f1b",
                      v);
    if (M % S != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "schedule interleaved needs micro-batches M a multiple of stages S "
                      "(M = %d, S = %d), as Megatron-LM does",
                      M, S);
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

static void emit_fwd(list_builder *b, int mb, int chunk)
{
    int S = b->sc->S, P = S * b->sc->v, p = pp_schedule_piece(b->sc, b->s, chunk);
    if (p > 0 && (p - 1) % S != b->s)
        emit(b, PP_OP_RECV_ACT, mb, chunk, (p - 1) % S);
    emit(b, PP_OP_FWD, mb, chunk, -1);
    if (p < P - 1 && (p + 1) % S != b->s)
        emit(b, PP_OP_SEND_ACT, mb, chunk, (p + 1) % S);
}

/* `op` is PP_OP_BWD or PP_OP_BWD_INPUT: whichever produces the input gradient. */
static void emit_bwd(list_builder *b, pp_op op, int mb, int chunk)
{
    int S = b->sc->S, P = S * b->sc->v, p = pp_schedule_piece(b->sc, b->s, chunk);
    if (p < P - 1 && (p + 1) % S != b->s)
        emit(b, PP_OP_RECV_GRAD, mb, chunk, (p + 1) % S);
    emit(b, op, mb, chunk, -1);
    if (p > 0 && (p - 1) % S != b->s)
        emit(b, PP_OP_SEND_GRAD, mb, chunk, (p - 1) % S);
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
 * Validation: a structural pass that indexes every keyed op by (op, stage, mb, chunk), then a
 * replay. Because every op occurs at most once per (stage, mb, chunk), "has run" is simply
 * "its index is below the stage's program counter", which keeps every readiness test O(1). */

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

static int vran(const validator *V, pp_op op, int s, int mb, int chunk)
{
    int32_t i = vpos(V, op, s, mb, chunk);
    return i >= 0 && i < V->pc[s];
}

static const char *op_str(int op) { return pp_op_name((pp_op)op); }

/* Which communication an op of piece p needs, and the peer; -2 if the op must not exist. */
static int expected_peer(const validator *V, int op, int s, int p)
{
    int S = V->S;
    switch (op) {
    case PP_OP_SEND_ACT:
    case PP_OP_RECV_GRAD:
        return p < V->P - 1 && (p + 1) % S != s ? (p + 1) % S : -2;
    case PP_OP_RECV_ACT:
    case PP_OP_SEND_GRAD:
        return p > 0 && (p - 1) % S != s ? (p - 1) % S : -2;
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

/* Whether instruction `in` of stage s can run now; `peer_at` gets the peer's instruction a
 * blocked RECV waits for (or the same-stage op a hand-off waits for). */
static int instr_ready(const validator *V, int s, const pp_instr *in, int *peer_at)
{
    int S = V->S, p;
    *peer_at = -1;
    switch (in->op) {
    case PP_OP_RECV_ACT:
        p = pp_schedule_piece(V->sc, s, in->chunk) - 1;
        *peer_at = vpos(V, PP_OP_SEND_ACT, in->peer, in->mb, p / S);
        return vran(V, PP_OP_SEND_ACT, in->peer, in->mb, p / S);
    case PP_OP_RECV_GRAD:
        p = pp_schedule_piece(V->sc, s, in->chunk) + 1;
        *peer_at = vpos(V, PP_OP_SEND_GRAD, in->peer, in->mb, p / S);
        return vran(V, PP_OP_SEND_GRAD, in->peer, in->mb, p / S);
    case PP_OP_FWD:
        /* A hand-off between pieces on one stage (S = 1): the previous piece's FWD. */
        p = pp_schedule_piece(V->sc, s, in->chunk);
        if (p > 0 && (p - 1) % S == s) {
            *peer_at = vpos(V, PP_OP_FWD, s, in->mb, in->chunk - 1);
            return vran(V, PP_OP_FWD, s, in->mb, in->chunk - 1);
        }
        return 1;
    case PP_OP_BWD:
    case PP_OP_BWD_INPUT:
        p = pp_schedule_piece(V->sc, s, in->chunk);
        if (p < V->P - 1 && (p + 1) % S == s) {
            int c = in->chunk + 1;
            int32_t a = vpos(V, PP_OP_BWD, s, in->mb, c);
            if (a < 0)
                a = vpos(V, PP_OP_BWD_INPUT, s, in->mb, c);
            *peer_at = a;
            return a >= 0 && a < V->pc[s];
        }
        return 1;
    default:
        /* SENDs follow their producer, W its B and OPT_STEP everything, in list order
         * (checked structurally), so they are ready when reached. */
        return 1;
    }
}

static void describe_wait(const validator *V, int s, char *buf, size_t cap)
{
    int i = V->pc[s], peer_at;
    const pp_instr *in = &V->sc->instrs[s][i];
    instr_ready(V, s, in, &peer_at);
    if (in->op == PP_OP_RECV_ACT || in->op == PP_OP_RECV_GRAD)
        snprintf(buf, cap,
                 "stage %d waits at instruction %d (%s mb %d chunk %d from stage %d, whose "
                 "matching %s is its instruction %d)",
                 s, i, op_str(in->op), in->mb, in->chunk, in->peer,
                 in->op == PP_OP_RECV_ACT ? "SEND_ACT" : "SEND_GRAD", (int)peer_at);
    else
        snprintf(buf, cap,
                 "stage %d waits at instruction %d (%s mb %d chunk %d, for its own "
                 "instruction %d)",
                 s, i, op_str(in->op), in->mb, in->chunk, peer_at);
}

static pp_status replay(validator *V, pp_schedule_report *rep)
{
    const pp_schedule *sc = V->sc;
    int S = V->S, finished = 0;
    int inflight[PP_SCHED_MAX_S] = {0}, qa[PP_SCHED_MAX_S] = {0}, qg[PP_SCHED_MAX_S] = {0};
    int64_t rounds = 0;
    for (int s = 0; s < S; s++)
        V->pc[s] = 0;
    while (finished < S) {
        int progress = 0;
        rounds++;
        for (int s = 0; s < S; s++) {
            int n = sc->n_instrs[s];
            if (V->pc[s] == n)
                continue;
            int peer_at;
            while (V->pc[s] < n && instr_ready(V, s, &sc->instrs[s][V->pc[s]], &peer_at)) {
                const pp_instr *in = &sc->instrs[s][V->pc[s]];
                switch (in->op) {
                case PP_OP_FWD:
                    if (++inflight[s] > rep->peak_inflight[s])
                        rep->peak_inflight[s] = inflight[s];
                    break;
                case PP_OP_BWD:
                case PP_OP_BWD_WEIGHT: inflight[s]--; break;
                case PP_OP_SEND_ACT:
                    if (++qa[in->peer] > rep->peak_queued_act[in->peer])
                        rep->peak_queued_act[in->peer] = qa[in->peer];
                    break;
                case PP_OP_RECV_ACT: qa[s]--; break;
                case PP_OP_SEND_GRAD:
                    if (++qg[in->peer] > rep->peak_queued_grad[in->peer])
                        rep->peak_queued_grad[in->peer] = qg[in->peer];
                    break;
                case PP_OP_RECV_GRAD: qg[s]--; break;
                default: break;
                }
                V->pc[s]++;
                progress = 1;
            }
            if (V->pc[s] == n)
                finished++;
        }
        if (!progress) {
            char msg[900], part[256];
            size_t len = 0;
            int shown = 0;
            msg[0] = '\0';
            for (int s = 0; s < S; s++) {
                if (V->pc[s] == sc->n_instrs[s])
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
            return PP_ERR(PP_ERR_INVALID, "deadlock: %s (no stage can advance after %lld rounds)",
                          msg, (long long)rounds);
        }
    }
    rep->n_rounds = rounds;
    return PP_OK;
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
