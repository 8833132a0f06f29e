/* pp_convention.h: the NVTX convention of docs/nvtx-convention.md, written once: the domain, the
 * range kinds, the pipeprof.event payload (its layout, schema name and id), and the grammar of
 * the range messages and marks, both ways (format and parse). The runtime emits by it
 * (runtime/nvtx.c, behind runtime/pp_nvtx.h), libpprof.so recognises step ranges by it
 * (profiler/), and the analyzer's decode stage reads traces by it (analyzer/decode.c).
 *
 * Pure: no NVTX headers (common/ builds without them), no state; every function is thread-safe.
 * A new trace dialect decodes into these kinds (analyzer/decode.c); a new kind is added here,
 * in the table of convention.c, and in docs/nvtx-convention.md. */
#ifndef PP_CONVENTION_H
#define PP_CONVENTION_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The domain every pipeline range lives in, and the extended payload's static schema: a tool
 * decodes the payload by this id without parsing the message. The id is
 * NVTX_PAYLOAD_SCHEMA_ID_STATIC_START (1 << 24) + 0x7070 ("pp"). */
#define PP_NVTX_DOMAIN "pipeprof"
#define PP_NVTX_SCHEMA_NAME "pipeprof.event"
#define PP_NVTX_SCHEMA_ID UINT64_C(0x01007070)

/* The range kinds: the number in the payload's `kind` field. The one enum of what a pipeline
 * range is; the analyzer's ops (pp_aop.kind), the GPU projection's classes (pp_gpu_op) and the
 * schedule's instructions (pp_op) map from it. */
typedef enum pp_nvtx_kind {
    PP_NVTX_STEP = 0,       /* one optimizer step on one stage */
    PP_NVTX_FWD = 1,        /* forward of (mb, chunk) on a stage */
    PP_NVTX_BWD = 2,        /* full backward */
    PP_NVTX_BWD_INPUT = 3,  /* input-gradient half (ZB's B) */
    PP_NVTX_BWD_WEIGHT = 4, /* weight-gradient half (ZB's W) */
    PP_NVTX_SEND_ACT = 5,
    PP_NVTX_RECV_ACT = 6,
    PP_NVTX_SEND_GRAD = 7,
    PP_NVTX_RECV_GRAD = 8,
    PP_NVTX_OPT_STEP = 9,
    PP_NVTX_LAYER_FWD = 10, /* one layer inside a FWD range */
    PP_NVTX_LAYER_BWD = 11, /* one layer inside a BWD / BWD_INPUT range */
    PP_NVTX_LAYER_BWD_WEIGHT = 12, /* one layer inside a BWD_WEIGHT range */
    PP_NVTX_ALLREDUCE = 13, /* data-parallel gradient all-reduce of a stage (bytes: gradients) */
    PP_NVTX_KIND_COUNT = 14,
    PP_NVTX_KIND_NONE = -1  /* not a pipeline range (a message the grammar does not match) */
} pp_nvtx_kind;

/* How a kind's message is built: a bare word, "<word> mb<N>[ c<K>]", or "<layer> <word>". */
typedef enum pp_nvtx_class {
    PP_NVTX_CLASS_PLAIN,
    PP_NVTX_CLASS_MB,
    PP_NVTX_CLASS_LAYER
} pp_nvtx_class;

/* The kind's message word ("fwd" for PP_NVTX_FWD and PP_NVTX_LAYER_FWD), its class and its
 * colour (ARGB; for people, tools never rely on it). Out of range: "unknown", PLAIN, grey. */
const char *pp_nvtx_kind_word(pp_nvtx_kind kind);
pp_nvtx_class pp_nvtx_kind_class(pp_nvtx_kind kind);
uint32_t pp_nvtx_kind_color(pp_nvtx_kind kind);

/* The extended payload every pipeprof range carries; its layout is the convention's (40 bytes,
 * little-endian, natural alignment, no padding). */
typedef struct pp_nvtx_event {
    uint32_t kind; /* pp_nvtx_kind */
    int32_t stage;
    int32_t mb;
    int32_t chunk;
    int32_t layer;
    int32_t peer;
    uint64_t bytes;
    int64_t step;
} pp_nvtx_event;

_Static_assert(sizeof(pp_nvtx_event) == 40, "pipeprof.event is 40 bytes");
_Static_assert(offsetof(pp_nvtx_event, stage) == 4 && offsetof(pp_nvtx_event, mb) == 8 &&
                   offsetof(pp_nvtx_event, chunk) == 12 && offsetof(pp_nvtx_event, layer) == 16 &&
                   offsetof(pp_nvtx_event, peer) == 20 && offsetof(pp_nvtx_event, bytes) == 24 &&
                   offsetof(pp_nvtx_event, step) == 32,
               "pipeprof.event offsets are part of the convention");

/* Where the step number sits in the payload, unless a capture registers another layout. */
#define PP_NVTX_STEP_OFFSET offsetof(pp_nvtx_event, step)

/* The payload's fields, in the schema's order (the index of pp_nvtx_fields). */
enum {
    PP_NVTX_F_KIND, PP_NVTX_F_STAGE, PP_NVTX_F_MB, PP_NVTX_F_CHUNK, PP_NVTX_F_LAYER,
    PP_NVTX_F_PEER, PP_NVTX_F_BYTES, PP_NVTX_F_STEP, PP_NVTX_FIELD_COUNT
};
typedef struct pp_nvtx_field {
    const char *name;  /* the schema entry's name: "kind", "stage", ... */
    const char *desc;  /* what it holds, and its unset value */
    uint32_t offset;   /* in pp_nvtx_event */
    uint32_t size;     /* 4 or 8 bytes */
    int is_signed;
} pp_nvtx_field;
extern const pp_nvtx_field pp_nvtx_fields[PP_NVTX_FIELD_COUNT];

/* The peer a transfer without one talks to (docs/nvtx-convention.md, decoding rule): send_act
 * and recv_grad to stage + 1, recv_act and send_grad to stage - 1, modulo the S stages seen
 * (interleaved schedules wrap from the last stage to the first). */
static inline int pp_nvtx_implied_peer(int kind, int stage, int S)
{
    int up = kind == PP_NVTX_SEND_ACT || kind == PP_NVTX_RECV_GRAD;
    return (stage + (up ? 1 : S - 1)) % S;
}

/* ---- range messages (docs/nvtx-convention.md "Messages") ---- */

/* Writes the message of a range of `kind` into buf (snprintf's return value):
 * - MB kinds: "<word> mb<mb>", with " c<chunk>" when chunk >= 0; the bare word when mb < 0;
 * - layer kinds: "<layer_name> <word>", "layer<layer> <word>" when the name is NULL or empty,
 *   "layer <word>" when layer < 0;
 * - the others: the word. */
int pp_nvtx_message_format(char *buf, size_t size, pp_nvtx_kind kind, int32_t mb, int32_t chunk,
                           int32_t layer, const char *layer_name);

/* What the grammar reads in a message; -1 where it says nothing (kind PP_NVTX_KIND_NONE when
 * it matches none of the rules). Numbers are read whole and saturate at INT64_MAX, so that a
 * number too large for any bound reads as too large, never as a smaller one. */
typedef struct pp_nvtx_message {
    int kind; /* pp_nvtx_kind */
    int64_t mb, chunk, layer, peer;
} pp_nvtx_message;
void pp_nvtx_message_parse(const char *msg, pp_nvtx_message *out);
/* The layer name of a layer range's message: its first token, at most cap - 1 bytes, into
 * name (NUL-terminated). */
void pp_nvtx_message_layer_name(const char *msg, char *name, size_t cap);

/* ---- marks (docs/nvtx-convention.md "Configuration mark" and after) ---- */

typedef enum pp_nvtx_mark {
    PP_NVTX_MARK_NONE = 0,
    PP_NVTX_MARK_CONFIG,    /* "config key=value ..." */
    PP_NVTX_MARK_LAYER,     /* "layer index=... name=... param_bytes=... activation_bytes=...
                               [kept_bytes=... input_bytes=...]" */
    PP_NVTX_MARK_CLOCKSYNC  /* "clocksync send|recv peer=P phase=F seq=K" */
} pp_nvtx_mark;
pp_nvtx_mark pp_nvtx_mark_kind(const char *msg);

/* Calls fn for each "key=value" token of a mark after its first word (tokens without '=' are
 * skipped; the mark is read up to 511 bytes). */
typedef void (*pp_nvtx_kv_fn)(void *ctx, const char *key, const char *value);
void pp_nvtx_mark_each(const char *msg, pp_nvtx_kv_fn fn, void *ctx);

typedef struct pp_nvtx_layer_info {
    long long index; /* -1 when the mark gives none */
    char name[48];
    unsigned long long param_bytes, activation_bytes;
    /* What one micro-batch keeps for the layer's backward, and what it keeps when the layer is
     * recomputed (its input); has_kept / has_input = 0 when the mark has no such key (marks
     * written before they existed). */
    unsigned long long kept_bytes, input_bytes;
    int has_kept, has_input;
} pp_nvtx_layer_info;
/* Reads a layer mark; returns 1 when msg is one. */
int pp_nvtx_layer_mark_parse(const char *msg, pp_nvtx_layer_info *out);
/* Writes one (snprintf's return value). The name is written whole (a cost file's names may be
 * longer than pp_nvtx_layer_info keeps). kept_bytes and input_bytes are written when
 * with_memory is set. */
int pp_nvtx_layer_mark_format(char *buf, size_t size, int index, const char *name,
                              unsigned long long param_bytes, unsigned long long activation_bytes,
                              int with_memory, unsigned long long kept_bytes,
                              unsigned long long input_bytes);

/* What the configuration mark states (docs/nvtx-convention.md "Configuration mark"); the
 * analyzer reads it key by key with its own range checks (analyzer/decode.c). */
typedef struct pp_nvtx_config_info {
    const char *schedule;  /* the schedule's name, e.g. "1f1b" */
    int S, M, v, layers;
    double samples_per_step, tokens_per_step; /* 0: not stated by the job */
    const char *backend;   /* "cpu", "cuda", "sim" */
    int dp, replica;
    const char *schedules; /* comma-separated kinds the job can run */
    const char *recompute; /* the job's --recompute text (it can recompute); NULL: not stated */
} pp_nvtx_config_info;
/* Writes "config schedule=... S=... ..." (snprintf's return value). */
int pp_nvtx_config_mark_format(char *buf, size_t size, const pp_nvtx_config_info *c);

typedef struct pp_nvtx_clocksync {
    int recv; /* 0: "send", 1: "recv" */
    int peer, phase, seq;
} pp_nvtx_clocksync;
/* Reads a clock ping-pong mark; returns 1 when msg is a well-formed one. */
int pp_nvtx_clocksync_parse(const char *msg, pp_nvtx_clocksync *out);
/* Writes one (snprintf's return value). */
int pp_nvtx_clocksync_format(char *buf, size_t size, const pp_nvtx_clocksync *c);

#ifdef __cplusplus
}
#endif
#endif /* PP_CONVENTION_H */
