/* pp_plan.h: the planning library's one public header (plan/): pure data and parsing, no
 * threads, no runtime state. Schedules (the per-stage instruction lists of GPipe, 1F1B,
 * interleaved 1F1B and ZB-H1, their validation and the facts each schedule kind implies), the
 * partition of the layer list into stages, the cost file that drives the sim backend and the
 * simulator, and the plan file the tuner writes. Used by the runtime (pptrain, the executor) and
 * by the analyzer (simulator, rebalancer, tuner), which links this library and not the trainer. */
#ifndef PP_PLAN_H
#define PP_PLAN_H

#include "pp_common.h"
#include <stddef.h>
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
/* Kinds are numbered 0 .. PP_SCHED_N_KINDS - 1. */
enum { PP_SCHED_N_KINDS = PP_SCHED_ZBH1 + 1 };

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
/* Where a stage's chunks lie in the model (docs/schedules.md, "Placement"). */
typedef enum pp_placement {
    PP_PLACE_LOOPED = 0, /* piece c*S + s: every chunk in stage order (Megatron's interleaved
                            1F1B, torch's looped schedules) */
    PP_PLACE_V = 1       /* odd chunks in reverse stage order, piece c*S + S-1-s: the model goes
                            down the stages and back up (torch's ZBV and DualPipeV) */
} pp_placement;

typedef struct pp_schedule {
    pp_schedule_kind kind;
    int S, M, v;
    int *n_instrs;       /* [S] */
    pp_instr **instrs;   /* [S][n_instrs[s]] */
    int placement;       /* pp_placement: pp_schedule_create's kinds are looped; a run's own
                            lists replayed by the analyzer may be V */
} pp_schedule;

/* Limits of pp_schedule_check_args. */
enum { PP_SCHED_MAX_S = 1024, PP_SCHED_MAX_M = 1 << 20, PP_SCHED_MAX_V = 64 };

/* Parses "gpipe", "1f1b", "interleaved", "zb-h1"; PP_ERR_INVALID naming the known ones. */
pp_status pp_schedule_kind_parse(const char *name, pp_schedule_kind *out);
const char *pp_schedule_kind_name(pp_schedule_kind k);
/* Every kind's name, comma-separated without spaces ("gpipe,1f1b,interleaved,zb-h1"), into
 * buf[cap] (truncated at cap). */
void pp_schedule_kind_list(char *buf, size_t cap);
const char *pp_op_name(pp_op op);

/* The facts each schedule kind implies, asked here rather than by comparing kinds, so that a new
 * kind states them once (docs/schedules.md, "Adding a schedule"). */

/* 1 when the kind's lists split the backward into BWD_INPUT and BWD_WEIGHT (ZB-H1), 0 when they
 * run whole BWDs. Costs of the halves: pp_costs_layer_us. */
int pp_schedule_splits_backward(pp_schedule_kind kind);
/* The chunks per stage a kind runs with when none is asked for: 2 for interleaved, 1 for the
 * kinds that take only v = 1. */
int pp_schedule_default_v(pp_schedule_kind kind);
/* The kind's own rule on v (ranges aside): 1 when it runs v chunks per stage on S stages with M
 * micro-batches, else 0 and the reason in why[cap] (may be NULL). v > 1 only for interleaved,
 * which needs S >= 2, v >= 2 and M a multiple of S. */
int pp_schedule_allows_v(pp_schedule_kind kind, int S, int M, int v, char *why, size_t cap);

/* Checks that (kind, S, M, v) is allowed and explains why not: 1 <= S <= PP_SCHED_MAX_S,
 * 1 <= M <= PP_SCHED_MAX_M, 1 <= v <= PP_SCHED_MAX_V, and pp_schedule_allows_v. */
pp_status pp_schedule_check_args(pp_schedule_kind kind, int S, int M, int v);
/* Generates the lists. */
pp_status pp_schedule_create(pp_schedule_kind kind, int S, int M, int v, pp_schedule **out);
void pp_schedule_destroy(pp_schedule *s);

/* Piece index of (stage, chunk), and its inverse. */
static inline int pp_schedule_piece(const pp_schedule *s, int stage, int chunk)
{
    return chunk * s->S + (s->placement == PP_PLACE_V && (chunk & 1) ? s->S - 1 - stage : stage);
}
static inline int pp_schedule_piece_stage(const pp_schedule *s, int piece)
{
    int r = piece % s->S;
    return s->placement == PP_PLACE_V && ((piece / s->S) & 1) ? s->S - 1 - r : r;
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

/* ---- Messages (plan/messages.c) ---- */

typedef enum pp_msg_kind { PP_MSG_ACT = 0, PP_MSG_GRAD = 1 } pp_msg_kind;

/* What a message carries: an activation or gradient of micro-batch mb for model piece `piece`
 * (the piece that RECEIVES it). Unique within a step. */
typedef struct pp_msg_tag {
    int32_t kind;
    int32_t mb;
    int32_t piece;
} pp_msg_tag;

/* The tag of the message that a SEND_ACT, RECV_ACT, SEND_GRAD or RECV_GRAD instruction of `stage`
 * moves: a send names the piece it sends to, a receive its own piece, so the two ends of one
 * message carry the same tag. The executor tags transport messages with it and every replay
 * matches a receive to its send by it. */
static inline pp_msg_tag pp_schedule_msg_tag(const pp_schedule *s, int stage,
                                             const pp_instr *in)
{
    int piece = pp_schedule_piece(s, stage, in->chunk);
    switch (in->op) {
    case PP_OP_SEND_ACT: return (pp_msg_tag){PP_MSG_ACT, in->mb, piece + 1};
    case PP_OP_RECV_ACT: return (pp_msg_tag){PP_MSG_ACT, in->mb, piece};
    case PP_OP_SEND_GRAD: return (pp_msg_tag){PP_MSG_GRAD, in->mb, piece - 1};
    default: return (pp_msg_tag){PP_MSG_GRAD, in->mb, piece};
    }
}
/* Messages of one step: 2 (kinds) x M x P; pp_schedule_msg_index numbers them densely. */
static inline size_t pp_schedule_n_msgs(const pp_schedule *s)
{
    return 2 * (size_t)s->M * (size_t)s->S * (size_t)s->v;
}
static inline size_t pp_schedule_msg_index(const pp_schedule *s, pp_msg_tag t)
{
    size_t P = (size_t)s->S * (size_t)s->v;
    return ((size_t)t.kind * (size_t)s->M + (size_t)t.mb) * P + (size_t)t.piece;
}
/* 1 when every link of the schedule receives its messages in the order they were sent (what
 * NCCL's in-order matching needs); else 0, with the first link that reorders in why. */
int pp_schedule_links_fifo(const pp_schedule *s, char *why, size_t n);
/* The stages `stage` sends to or receives from in the schedule, ascending, into peers[max];
 * returns how many (-1 when there are more than max). The relation is symmetric: the NCCL
 * transport makes a communicator per direction of each such pair. */
int pp_schedule_peers(const pp_schedule *s, int stage, int *peers, int max);

/* ---- Replay (plan/replay.c): the one lock-step walk over the lists ---- */

/* Hooks of pp_schedule_replay. */
typedef struct pp_replay_hooks {
    /* Called as instruction k of `stage` runs, in the replay's order. `msg` is the
     * pp_schedule_msg_index of the message a SEND or RECV moves, -1 for other ops. A status
     * other than PP_OK stops the replay, which returns it. */
    pp_status (*run)(void *ctx, int stage, int k, const pp_instr *in, int64_t msg);
    void *ctx;
    /* 1: OPT_STEP waits until every stage has reached one (the executor's all-reduce); the
     * simulator's timing needs it, the order of everything else does not. */
    int barrier;
} pp_replay_hooks;

/* Runs every stage's list in order with blocking receives, the executor's model: in rounds,
 * each stage in turn runs instructions while they are ready. A RECV is ready once the SEND with
 * its tag has run; a FWD (a BWD or BWD_INPUT) whose previous (next) piece is on the same stage
 * once that piece's FWD (BWD or BWD_INPUT) of the micro-batch has; with `barrier`, OPT_STEP as
 * said above; anything else at once. The lists must be in range: mb in [0, M), chunk in [0, v)
 * for every op but OPT_STEP, sends to pieces that exist (pp_schedule_validate proves it; the
 * simulator checks it). pc[S] is the caller's: each stage's next instruction. On deadlock
 * (no stage can advance) PP_ERR_INVALID naming the stages that wait, and pc[] says where.
 * rounds (may be NULL) gets the rounds used. Allocates 2 M P + S bytes for the call. */
pp_status pp_schedule_replay(const pp_schedule *s, const pp_replay_hooks *h, int *pc,
                             int64_t *rounds);

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
/* Layers [*lo, *hi) of the piece of (stage, chunk). */
static inline void pp_partition_piece_layers(const pp_partition *p, int stage, int chunk, int *lo,
                                             int *hi)
{
    int piece = chunk * p->S + stage;
    *lo = p->bounds[piece];
    *hi = p->bounds[piece + 1];
}
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
    /* The memory model's (docs/rebalancer.md "Memory model"), per micro-batch in flight: what
     * the layer keeps for its backward, and what it keeps instead when recomputed (its input);
     * has_kept = 0 when the cost file gives neither (both 0: the model falls back on
     * activation_bytes) */
    uint64_t kept_bytes, input_bytes;
    int has_kept;
} pp_layer_cost;

typedef struct pp_costs {
    int n_layers;
    pp_layer_cost *layers;
    double p2p_GBps;       /* inter-stage bandwidth; 0 = transfers cost latency only */
    double p2p_latency_us; /* per message */
    double optimizer_us;   /* per stage per optimizer step: its part that no parameter drives */
    double optimizer_us_per_MB; /* and per 1e6 bytes of the stage's parameters (0 = none) */
    double grad_norm_us;   /* every step, the gradient norm and the barrier before the optimizer */
    double step_fixed_us;  /* every step, outside the pipeline's ops (the job's loop); both charged
                              with the optimizer step, which starts on every stage at once */
    /* The data-parallel gradient all-reduce of each stage, every step, before the optimizer's
     * barrier: dp_allreduce_us + dp_allreduce_us_per_MB x the stage's parameters / 1e6 (0 and 0:
     * no data parallelism). A stage reaches the barrier after its last op and its own all-reduce;
     * fitted from a capture at the job's data-parallel degree. */
    double dp_allreduce_us;
    double dp_allreduce_us_per_MB;
    double send_act_us;    /* the sender's own time in each send of activations (gradients): */
    double send_grad_us;   /* it runs nothing else meanwhile; the transfer counts from its start */
    double recv_act_us;    /* the receiver's own time in each receive of activations (gradients)
                              whose message is there: it ends no earlier than this after it
                              began, nor before its message arrives (0 = none) */
    double recv_grad_us;
    /* The stage's own time between its compute ops, per op (an interpreted schedule's
     * bookkeeping: torch's Python between its calls): charged on the op's stage after each
     * forward / backward op (pp_costs_op_us), 0 = none */
    double op_gap_us;
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
/* The one cost rule (docs/cost-file.md, "How the costs are used"), shared by the sim backend, the
 * simulator and the rebalancer. Time of one transfer of `bytes` under the cost file's link
 * model (p2p_latency_us + bytes / p2p_GBps), in microseconds. */
double pp_costs_transfer_us(const pp_costs *c, uint64_t bytes);
/* The sender's time in one send (handing the message over: a copy, waking the receiver),
 * send_grad_us for gradients (grad = 1), send_act_us for activations, in microseconds. The
 * stage runs nothing else meanwhile; the message's transfer time counts from the send's start.
 * 0 when the cost file gives none. */
double pp_costs_send_us(const pp_costs *c, int grad);
/* The receiver's own time in one receive (posting it, taking the message: a copy, a wake-up),
 * recv_grad_us for gradients (grad = 1), recv_act_us for activations, in microseconds: a receive
 * that begins at t ends at max(t + this, the message's arrival). 0 when the cost file gives none. */
double pp_costs_recv_us(const pp_costs *c, int grad);
/* Time of compute op `op` (FWD, BWD, BWD_INPUT, BWD_WEIGHT) on one layer for one micro-batch, in
 * microseconds: fwd_us, bwd_us, and for the halves bwd_input_us / bwd_weight_us when the layer
 * has them, else bwd_us / 2 each. 0 for other ops. */
double pp_costs_layer_us(const pp_layer_cost *l, pp_op op);
/* The same for a layer that is recomputed (pptrain --recompute) when `recomputed` is set: its
 * forward runs again inside its backward, so BWD and BWD_INPUT cost fwd_us more. The one home of
 * that rule: the sim backend and pp_costs_with_recompute use it. */
double pp_costs_layer_rc_us(const pp_layer_cost *l, pp_op op, int recomputed);
/* A copy of `c` whose layers marked in `recompute` ([n_layers], 1 = recomputed; NULL = none)
 * cost what pp_costs_layer_rc_us says, through pp_costs_layer_us, so the simulator and the
 * rebalancer predict a recomputed layout from it unchanged (a layer without split times gets
 * explicit halves: bwd_us / 2 + fwd_us and bwd_us / 2). Free with pp_costs_destroy. */
pp_status pp_costs_with_recompute(const pp_costs *c, const uint8_t *recompute, pp_costs **out);
/* A copy of `c` with every layer's compute (fwd_us, bwd_us and its halves) times k > 0, the
 * rest (bytes, the link model, the sends, the optimizer's terms) as it is: the same layers on a machine
 * running their compute k times as long (pprof-tune's speed comparison between two runs,
 * docs/sim-dist.md). PP_ERR_INVALID for k <= 0, NaN or infinite. Free with pp_costs_destroy. */
pp_status pp_costs_scale_layers(const pp_costs *c, double k, pp_costs **out);
/* One micro-batch's compute through every layer: the sum of each layer's forward and backward
 * (pp_costs_layer_us), in microseconds. The same whatever the partition. */
double pp_costs_layers_us(const pp_costs *c);
/* Parses a --recompute value (plan/recompute.c): "none", "full", or a comma-separated list of layer indices and
 * ranges of the layer list ("1-4,7") and stages ("s0", "s1-2"); ranges are inclusive. With
 * part NULL only the syntax is checked; otherwise mask[part->L] is set (1 = recompute) and
 * indices beyond the model or the stages are refused. PP_ERR_INVALID names the bad item. */
pp_status pp_recompute_parse(const char *spec, const pp_partition *part, uint8_t *mask);
/* The text of mask[part->L] that pp_recompute_parse reads back to it: "none", "full", whole
 * stages as "s1,s3", else layer ranges "2-5,9". PP_ERR_INVALID when it is cap or longer. */
pp_status pp_recompute_format(const pp_partition *part, const uint8_t *mask, char *buf,
                              size_t cap);
/* The optimizer step of a stage holding param_bytes of parameters, in microseconds:
 * optimizer_us + optimizer_us_per_MB x param_bytes / 1e6 + grad_norm_us + step_fixed_us. */
double pp_costs_opt_us(const pp_costs *c, uint64_t param_bytes);
/* The data-parallel all-reduce of a stage holding param_bytes of parameters, in microseconds:
 * dp_allreduce_us + dp_allreduce_us_per_MB x param_bytes / 1e6; it ends before the barrier of
 * the optimizer step (docs/cost-file.md). */
double pp_costs_dp_allreduce_us(const pp_costs *c, uint64_t param_bytes);
/* 1 when the cost file charges a data-parallel all-reduce (either term above 0). */
int pp_costs_has_dp_allreduce(const pp_costs *c);
/* The memory model's charges of one chunk, layers [lo, hi), with the layers of `recompute`
 * ([n_layers], 1 = recomputed; NULL: none) recomputed (docs/rebalancer.md "Memory model"):
 * `mb_bytes` what one micro-batch keeps from its forward to its backward (kept_bytes per layer,
 * input_bytes for a recomputed one, plus the chunk's output and input gradient at a recomputed
 * end; without the memory keys activation_bytes, recomputed the previous layer's), `set_bytes`
 * one recompute workspace (the recomputed layers' kept_bytes). Saturating. The one home of the
 * rule: the model (pp_stage_memory_model), the rebalancer and the sim backend charge it. */
void pp_costs_chunk_memory(const pp_costs *c, int lo, int hi, const uint8_t *recompute,
                           uint64_t *mb_bytes, uint64_t *set_bytes);
/* The parameter bytes of layers [lo, hi). */
uint64_t pp_costs_param_bytes(const pp_costs *c, int lo, int hi);
/* The parameter bytes of `stage` under `part`: its chunks' pieces, in chunk order (what its
 * optimizer step and its data-parallel all-reduce are charged for). */
uint64_t pp_costs_stage_param_bytes(const pp_costs *c, const pp_partition *part, int stage);
/* Time of op `op` of the piece holding layers [lo, hi): pp_costs_layer_us summed from lo up,
 * plus op_gap_us for a compute op (FWD, BWD, BWD_INPUT, BWD_WEIGHT); OPT_STEP is
 * pp_costs_opt_us of [lo, hi)'s parameters (a stage of several pieces: sum their parameters and
 * call pp_costs_opt_us); 0 for messages. */
double pp_costs_op_us(const pp_costs *c, pp_op op, int lo, int hi);
/* Bytes of the message that crosses layer boundary b (between layers b - 1 and b: the
 * activation layer b - 1 hands on, or its gradient coming back): 0 at the ends, b <= 0 or
 * b >= n_layers. */
uint64_t pp_costs_boundary_bytes(const pp_costs *c, int b);

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
    double predicted_median_ms;  /* the step's predicted median and p95 (docs/sim-dist.md); */
    double predicted_p95_ms;     /* <= 0 when absent (plans before issue 18) */
    char baseline[512];          /* run the plan came from, "" when absent */
    char recompute[256];         /* pptrain --recompute SPEC (none, full, or a list such as
                                    s0,s2 or 1-4,7); "" when absent (pptrain keeps its own) */
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
