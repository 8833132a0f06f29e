/* pp_plan.h: the planning library's one public header (plan/): pure data and parsing, no
 * threads, no runtime state. Schedules (the per-stage instruction lists of GPipe, 1F1B,
 * interleaved 1F1B and ZB-H1, their validation and the facts each schedule kind implies), the
 * partition of the layer list into stages, the cost file that drives the sim backend and the
 * simulator, and the plan file the tuner writes. Used by the runtime (pptrain, the executor) and
 * by the analyzer (simulator, rebalancer, tuner), which links this library and not the trainer. */
#ifndef PP_PLAN_H
#define PP_PLAN_H

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

/* ======================================================================================== */
/* Partition: the layer list [0, L) cut into P = S * v contiguous pieces                      */
/* ======================================================================================== */

typedef struct pp_partition {
    int L;       /* layers in the model's layer list */
    int S;       /* stages */
    int v;       /* virtual chunks per stage (1 unless interleaved) */
    int P;       /* pieces = S * v */
    int *bounds; /* [P + 1]: piece p holds layers [bounds[p], bounds[p+1]); bounds[0] = 0,
                    bounds[P] = L, strictly increasing */
} pp_partition;

/* Even split by layer count; the remainder goes to the later pieces (L = 14, P = 4 gives
 * 3, 3, 4, 4). PP_ERR_INVALID when P > L. */
pp_status pp_partition_even(int L, int S, int v, pp_partition *out);
/* From explicit boundaries (n = P + 1 values); the message names the first bad value. */
pp_status pp_partition_from_bounds(const int *bounds, int n, int L, int S, int v,
                                   pp_partition *out);
/* Parses "0,3,7,12,14" (P + 1 comma-separated integers) for a model of L layers; S is inferred
 * as P / v (P must be a multiple of v). */
pp_status pp_partition_parse(const char *text, int L, int v, pp_partition *out);
void pp_partition_free(pp_partition *p);
/* Writes "0,3,7,12,14" into buf. */
void pp_partition_format(const pp_partition *p, char *buf, size_t cap);

/* ======================================================================================== */
/* Cost file (docs/cost-file.md): per-layer, per-micro-batch costs that the sim backend      */
/* replays and that pprof-tune --export-costs writes                                          */
/* ======================================================================================== */

typedef struct pp_layer_cost {
    char name[64];
    double fwd_us;
    double bwd_us;
    double bwd_input_us;  /* split backward (ZB); both 0 and has_split = 0 when absent */
    double bwd_weight_us;
    int has_split;
    uint64_t activation_bytes; /* tensor this layer hands to the next one, per micro-batch */
    uint64_t param_bytes;
} pp_layer_cost;

typedef struct pp_costs {
    int n_layers;
    pp_layer_cost *layers;
    double p2p_GBps;       /* inter-stage bandwidth; 0 = transfers cost latency only */
    double p2p_latency_us; /* per message */
    double optimizer_us;   /* per stage per optimizer step */
    int microbatch_size;   /* sequences per micro-batch the costs were measured at; 0 = not
                              recorded */
} pp_costs;

/* Loads and validates a cost file; every problem (missing file, bad JSON, missing or negative
 * field, unknown key, wrong type) is PP_ERR_INVALID (PP_ERR_IO when unreadable) with a message
 * naming the file, the layer index and the field. */
pp_status pp_costs_load(const char *path, pp_costs **out);
/* The same from a JSON text (`origin` names it in messages). */
pp_status pp_costs_parse(const char *json, const char *origin, pp_costs **out);
/* Writes a cost file (atomically). */
pp_status pp_costs_write(const pp_costs *c, const char *path);
/* A cost set of n uniform layers (tests and examples). */
pp_status pp_costs_uniform(int n_layers, double fwd_us, double bwd_us, uint64_t act_bytes,
                           pp_costs **out);
void pp_costs_destroy(pp_costs *c);
/* Time of one transfer of `bytes` under the cost file's link model, in microseconds. */
double pp_costs_transfer_us(const pp_costs *c, uint64_t bytes);

/* ======================================================================================== */
/* Plan file (docs/plan-file.md): written by pprof-tune, read by pptrain --plan / PPROF_PLAN   */
/* ======================================================================================== */

typedef struct pp_plan {
    int version;     /* 1 */
    int num_layers;  /* the model's layer-list length the plan was made for */
    pp_partition partition;
    char schedule[32];   /* "gpipe", "1f1b", "interleaved", "zb-h1" */
    int microbatches;    /* M */
    int microbatch_size; /* sequences per micro-batch; 0 = not set */
    uint64_t memory_limit_bytes; /* per stage, 0 = none */
    double predicted_step_ms;    /* < 0 when absent */
    double predicted_bubble;     /* < 0 when absent */
    char baseline[512];          /* run the plan came from, "" when absent */
} pp_plan;

/* Loads and validates a plan; messages name the file and field. PP_ERR_INVALID for bad
 * content, PP_ERR_IO when unreadable. */
pp_status pp_plan_load(const char *path, pp_plan *out);
pp_status pp_plan_parse(const char *json, const char *origin, pp_plan *out);
pp_status pp_plan_write(const pp_plan *p, const char *path);
void pp_plan_free(pp_plan *p);

#ifdef __cplusplus
}
#endif

#endif /* PP_PLAN_H */
