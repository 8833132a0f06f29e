/* pp_schedule.h: pipeline schedules as data. Turns (schedule kind, S stages, M micro-batches,
 * v virtual chunks per stage) into one ordered instruction list per stage, and proves a set of
 * lists executable. Pure: no threads, no backends, no runtime state. The executor
 * (runtime/executor.c) runs these lists; the analyzer's simulator replays the very same lists
 * with measured costs, so this is the one definition of what a schedule is.
 *
 * Model pieces: the model's layer list is cut into P = S * v contiguous pieces. Piece p lives on
 * stage p % S as its local chunk p / S (Megatron-LM's interleaved placement; v = 1 gives piece
 * p = stage p). Micro-batch m flows forward through pieces 0 .. P-1 and backward P-1 .. 0.
 *
 * Execution model the validator proves against: each stage runs its list strictly in order;
 * a SEND never blocks (messages are buffered; pp_schedule_report gives the peak number of
 * messages queued per link so a bounded transport can be sized); a RECV blocks until the
 * matching SEND has run. Hand-offs between two pieces on the same stage (possible only with
 * S = 1) need no SEND/RECV. */
#ifndef PP_SCHEDULE_H
#define PP_SCHEDULE_H

#include "pp_common.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pp_schedule_kind {
    PP_SCHED_GPIPE = 0,       /* fill-drain: all forwards, then all backwards */
    PP_SCHED_1F1B = 1,        /* PipeDream-Flush: warm-up forwards, then one forward one backward */
    PP_SCHED_INTERLEAVED = 2, /* Megatron-LM interleaved 1F1B with v chunks per stage */
    PP_SCHED_ZBH1 = 3         /* zero bubble ZB-H1 (Qi et al. 2023): backward split into B and W */
} pp_schedule_kind;

typedef enum pp_op {
    PP_OP_FWD = 0,        /* forward of (mb, chunk); the last piece also computes the loss */
    PP_OP_BWD = 1,        /* full backward of (mb, chunk): input and weight gradients */
    PP_OP_BWD_INPUT = 2,  /* input-gradient half of the backward (ZB's B) */
    PP_OP_BWD_WEIGHT = 3, /* weight-gradient half of the backward (ZB's W) */
    PP_OP_SEND_ACT = 4,   /* send (mb, chunk)'s output activation to peer */
    PP_OP_RECV_ACT = 5,   /* receive (mb, chunk)'s input activation from peer */
    PP_OP_SEND_GRAD = 6,  /* send the gradient w.r.t. (mb, chunk)'s input to peer */
    PP_OP_RECV_GRAD = 7,  /* receive the gradient w.r.t. (mb, chunk)'s output from peer */
    PP_OP_OPT_STEP = 8    /* optimizer step of all of this stage's chunks (mb = chunk = -1) */
} pp_op;

typedef struct pp_instr {
    uint8_t op;    /* pp_op */
    int32_t mb;    /* micro-batch 0 .. M-1, -1 for OPT_STEP */
    int16_t chunk; /* local chunk 0 .. v-1 on this stage, -1 for OPT_STEP */
    int16_t peer;  /* peer stage of SEND and RECV ops, -1 otherwise */
} pp_instr;

/* Owned by the schedule and freed by pp_schedule_destroy. Every array is allocated with pp_alloc,
 * so a caller may replace instrs[s] (and set n_instrs[s]) with a pp_alloc'd list of its own, e.g.
 * a test that mutates a valid schedule to check that validation rejects it. */
typedef struct pp_schedule {
    pp_schedule_kind kind;
    int S, M, v;
    int *n_instrs;       /* [S] */
    pp_instr **instrs;   /* [S][n_instrs[s]] */
} pp_schedule;

/* Limits of pp_schedule_check_args. */
enum { PP_SCHED_MAX_S = 1024, PP_SCHED_MAX_M = 1 << 20, PP_SCHED_MAX_V = 64 };

/* Parses "gpipe", "1f1b", "interleaved", "zb-h1"; PP_ERR_INVALID naming the known ones. */
pp_status pp_schedule_kind_parse(const char *name, pp_schedule_kind *out);
const char *pp_schedule_kind_name(pp_schedule_kind k);
const char *pp_op_name(pp_op op);

/* Checks that (kind, S, M, v) is allowed and explains why not: 1 <= S <= PP_SCHED_MAX_S,
 * 1 <= M <= PP_SCHED_MAX_M, 1 <= v <= PP_SCHED_MAX_V; v > 1 only for interleaved, which needs
 * S >= 2, v >= 2 and M a multiple of S. */
pp_status pp_schedule_check_args(pp_schedule_kind kind, int S, int M, int v);
/* Generates the lists. */
pp_status pp_schedule_create(pp_schedule_kind kind, int S, int M, int v, pp_schedule **out);
void pp_schedule_destroy(pp_schedule *s);

/* Piece index of (stage, chunk), and its inverse. */
static inline int pp_schedule_piece(const pp_schedule *s, int stage, int chunk)
{
    return chunk * s->S + stage;
}
static inline int pp_schedule_piece_stage(const pp_schedule *s, int piece)
{
    return piece % s->S;
}
static inline int pp_schedule_piece_chunk(const pp_schedule *s, int piece)
{
    return piece / s->S;
}

typedef struct pp_schedule_report {
    int S;
    int *peak_inflight;      /* [S] peak micro-batch-chunks whose FWD ran and whose backward
                                (BWD, or BWD_WEIGHT when split) has not: activations held */
    int *peak_queued_act;    /* [S] peak activations queued on the link into stage s */
    int *peak_queued_grad;   /* [S] peak gradients queued on the link into stage s */
    int64_t n_rounds;        /* rounds of the lock-step replay used to prove progress */
} pp_schedule_report;

/* Proves the lists executable: every op appears exactly once per (mb, chunk) as required, every
 * RECV has exactly one matching SEND from the right peer and vice versa, data dependencies hold
 * (FWD after its input is available, backward after its FWD and its output gradient, W after
 * B, OPT_STEP last), and running every stage's list in order with blocking receives finishes
 * (no deadlock). Fills `rep` (may be NULL; free with pp_schedule_report_free; left empty on
 * failure). On failure PP_ERR_INVALID with a message naming the stage, the instruction index and
 * what is wrong. */
pp_status pp_schedule_validate(const pp_schedule *s, pp_schedule_report *rep);
void pp_schedule_report_free(pp_schedule_report *rep);

/* Writes the lists as text, one stage per line ("s0: F0 sa0>1 F1 ..."), for --explain and docs;
 * the notation is in docs/schedules.md. */
void pp_schedule_print(const pp_schedule *s, FILE *out);

#ifdef __cplusplus
}
#endif
#endif /* PP_SCHEDULE_H */
