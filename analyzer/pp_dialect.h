/* pp_dialect.h: naming dialects, how the analyzer's decode stage (decode.c) recognises pipeline
 * ranges that do not follow pipeprof's NVTX convention (docs/dialects.md). Two kinds:
 *   - a user dialect file (JSON, `--dialect FILE`): ordered rules from a name pattern to the
 *     convention's kind and where stage, micro-batch, chunk, layer and step come from;
 *   - the built-in torch.distributed.pipelining names (`PP:<s><ACTION><mb>`, `Forward <i>`,
 *     `Backward <i>`, `ProfilerStep#<n>`, the stack events of forward_one_chunk /
 *     backward_one_chunk, `nn.Module: <Class>_<k>`).
 * Both are pure functions of a range's name (and domain): decode.c caches the result per string
 * id and resolves "rank" and "sequence" itself. A pp_dialect is immutable once loaded and may be
 * shared by threads. */
#ifndef PP_DIALECT_H
#define PP_DIALECT_H

#include "pp_common.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bounds of a dialect file (outside input): more is refused with a message. */
enum {
    PP_DIALECT_MAX_RULES = 64,
    PP_DIALECT_MAX_PATTERN = 128,  /* bytes of a rule's "match" */
    PP_DIALECT_MAX_CAPTURES = 8,   /* {...} fields of one pattern */
    PP_DIALECT_MAX_ANY = 2,        /* {*} of one pattern (they backtrack) */
    PP_DIALECT_MAX_KINDS = 32,     /* entries of a rule's "kinds" map */
    PP_DIALECT_MAX_NAME = 256,     /* a range name longer than this matches no rule */
    PP_DIALECT_MATCH_BUDGET = 4096, /* pattern pieces tried per name, over all rules: past it
                                       the name matches no (further) rule */
    PP_DIALECT_MAX_FILE = 1 << 20  /* bytes of a dialect file */
};

/* The fields a rule gives a value to (pp_dialect_match.v[] by these). */
typedef enum pp_dialect_field {
    PP_DF_STAGE = 0,
    PP_DF_MB,
    PP_DF_CHUNK,
    PP_DF_LAYER,
    PP_DF_STEP,
    PP_DF_COUNT
} pp_dialect_field;

/* Where a field's value comes from. */
typedef enum pp_dialect_from {
    PP_DFROM_UNSET = 0, /* the convention's "unset" (-1): stage: the enclosing step range's,
                           step: the enclosing step range's, mb: the enclosing compute range's */
    PP_DFROM_VALUE,     /* v[]: a constant of the rule or a number the pattern captured */
    PP_DFROM_RANK,      /* the trace's pipeline rank (decode.c) */
    PP_DFROM_SEQUENCE,  /* counted per thread (docs/dialects.md "sequence") */
    PP_DFROM_THREAD     /* the range's thread id - 1 (Paddle's pipeline timeline: no rule) */
} pp_dialect_from;

/* What a name is, by a dialect. kind: a pp_nvtx_kind, PP_NVTX_KIND_NONE (-1) when no rule
 * matched or the rule maps it to "other". */
typedef struct pp_dialect_match {
    int kind;
    int rule;                /* the rule that matched (user dialects), -1 none */
    int64_t v[PP_DF_COUNT];  /* values where from[] is PP_DFROM_VALUE, else -1 */
    uint8_t from[PP_DF_COUNT];
    /* torch: the stage id the name states (PP:<s>...), -1 when it states none; decode.c turns
     * it into (stage, chunk) by the trace it is in */
    int64_t torch_stage_id;
    /* torch: a point-to-point operation's own range (gloo:recv, nccl:send, ...: PP_DCOMM_*),
     * which takes the pipeline op of the action it is posted in (docs/dialects.md "Waits") */
    int torch_comm;
    int torch; /* 1: a torch name (its compute ops get the waits taken out) */
    /* torch: a stack event of Schedule1F1B (forward_one_chunk, backward_one_chunk: a compute
     * op unless inside a torch action), or a module ("nn.Module: <Class>_<k>": a layer range
     * when it is the outermost module inside a compute op; its name from byte 11) */
    int torch_stack, torch_module;
    /* torch: a stack event of DeepSpeed's PipelineEngine: 1 its _exec_forward_pass /
     * _exec_backward_pass (a compute op as torch_stack's; its trace's layers are the modules
     * directly inside its stage module), 2 its _exec_optimizer_step (kind PP_NVTX_KIND_NONE:
     * the collectives after it are the optimizer's); docs/dialects.md "DeepSpeed" */
    int torch_deepspeed;
    /* torch: a stack event of Megatron-LM's schedules, "megatron/core/pipeline_parallel/
     * schedules.py(<line>): forward_step" / "backward_step" (1: a compute op as torch_stack's;
     * its trace's layers are found by megatron_layer in decode.c), or its interleaved schedule's
     * function (2, kind PP_NVTX_KIND_NONE); docs/dialects.md "Megatron-LM in a torch trace" */
    int torch_megatron;
    /* torch: DualPipeV's "PP:(<s>F<m>;<s'>B<m'>)OVERLAP_F_B", two compute actions of two
     * stages run one after the other in one range (kind PP_NVTX_KIND_NONE): their kinds
     * (PP_NVTX_KIND_NONE when the name does not parse), stage ids and mbs, in order; see
     * pp_dialect_torch_sub */
    int torch_overlap;
    int torch_sub_kind[2];
    int64_t torch_sub_sid[2], torch_sub_mb[2];
} pp_dialect_match;

enum { PP_DCOMM_NONE = 0, PP_DCOMM_RECV = 1, PP_DCOMM_SEND = 2 };

typedef struct pp_dialect pp_dialect;

/* Reads and checks a dialect file. Errors (PP_ERR_INVALID, PP_ERR_IO) name the file, the rule
 * (by index, from 0) and the problem. *out is destroyed with pp_dialect_destroy. */
pp_status pp_dialect_load(const char *path, pp_dialect **out);
/* The same over a text (ctx names it in messages: usually the path). */
pp_status pp_dialect_parse(const char *text, const char *ctx, pp_dialect **out);
void pp_dialect_destroy(pp_dialect *d);
/* The file's "name" (what pp_analysis.dialect reports). */
const char *pp_dialect_name(const pp_dialect *d);
/* Whether some rule names a domain (decode.c then keeps the files' domain names). */
int pp_dialect_uses_domains(const pp_dialect *d);

/* The first rule of d matching (domain, name) into *m; returns 1 when one matched (m->kind may
 * still be PP_NVTX_KIND_NONE: a rule mapping to "other"), 0 when none did. domain: the range's
 * NVTX domain name, "" for the default domain. */
int pp_dialect_match_name(const pp_dialect *d, const char *domain, const char *name,
                          pp_dialect_match *m);

/* The built-in torch.distributed.pipelining names (docs/dialects.md "torch"); the same
 * contract. */
#define PP_DIALECT_TORCH "torch.distributed.pipelining"
/* What a torch trace of DeepSpeed's pipeline engine is reported as (the same built-in names) */
#define PP_DIALECT_DEEPSPEED "deepspeed (torch profiler)"
/* ... and one of Megatron-LM's pipeline schedules */
#define PP_DIALECT_MEGATRON "megatron-lm (torch profiler)"
/* The schedule such a trace of Megatron-LM's interleaved schedule is reported as: its chunks
 * cannot be told apart (decode.c) */
#define PP_SCHED_MEGATRON_INTERLEAVED "megatron-interleaved"
int pp_dialect_torch_match(const char *name, pp_dialect_match *m);
/* PaddlePaddle's pipeline timeline (built in, docs/dialects.md "PaddlePaddle's pipeline
 * timeline"): "F<mb>" / "B<mb>" of its "pipeline timeline" domain (virtual = 0), "F<mb>_VP<c>" /
 * "B<mb>_VP<c>" of its "virtual pipeline timeline" (virtual = 1); the stage is the thread's id
 * - 1. The same contract as pp_dialect_match_name. */
#define PP_DIALECT_PADDLE_TIMELINE "paddle pipeline timeline"
int pp_dialect_paddle_match(int virtual_chunks, const char *name, pp_dialect_match *m);
/* 1 when `dialect` (pp_analysis.dialect; NULL allowed) names a torch profiler trace read by the
 * built-in names: torch's, DeepSpeed's or Megatron-LM's. */
int pp_dialect_is_torch_profiler(const char *dialect);
/* Sub-action k (0, 1) of an OVERLAP_F_B match as the match of a plain torch action "PP:<s>F<m>"
 * into *out; 0 when m is none or its name did not parse. */
int pp_dialect_torch_sub(const pp_dialect_match *m, int k, pp_dialect_match *out);

#ifdef __cplusplus
}
#endif
#endif /* PP_DIALECT_H */
