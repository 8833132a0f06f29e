/* analyzer_internal.h: what the analyzer's files share, private to analyzer/ (the public API is
 * pp_analyzer.h). Before it, inputs.c resolves what a tool's paths name into .pft files
 * (kineto.c converts PyTorch profiler traces, over kineto_json.c's tokenizer: pp_kineto.h).
 * The analysis runs as a data flow, one file a stage:
 *   decode.c     trace blocks -> ranges: string and schema tables, push/pop pairing, the
 *                convention's decoding rule (extended payload, else the message grammar of
 *                common/pp_convention.h), the bounds, the marks; other domains' ranges by the
 *                dialects (dialect.c, pp_dialect.h: a dialect file, the torch names);
 *   steps.c      ranges -> steps: each decoded range into its step's bucket as an op, a layer op,
 *                a step range or an all-reduce; a step is finalized once every stage moved past;
 *   metrics.c    a finalized step -> its numbers (period, busy, idle, per-stage and per-link
 *                times), accumulated; an_results() turns the accumulators into the pp_analysis;
 *   bubble.c     the bubble decomposition: a step's own lists replayed by the simulator, and its
 *                critical path;
 *   clock_pass.c the clock-alignment pass before the analysis (beside clock.c, the estimate);
 *   gpu_pass.c   the GPU pass after it (beside gpu.c, the projection);
 *   analyzer.c   the driver (pp_analyze_files; pp_analyze_dir goes through inputs.c);
 *   report_text.c the text summary (pp_analysis_print).
 * One analysis is one `state`, used by one thread. */
#ifndef PP_ANALYZER_INTERNAL_H
#define PP_ANALYZER_INTERNAL_H

#include "pp_analyzer.h"
#include "pp_clock.h"
#include "pp_convention.h"
#include "pp_dialect.h"

#include <stdlib.h>
#include <string.h>

enum { RESERVOIR = 4096, CHUNK_RESERVOIR = 1024 };

typedef struct vec {
    void *data;
    size_t n, cap, elem;
} vec;

static inline void *vec_push(vec *v)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 16;
        void *d = cap > v->cap ? pp_realloc_array(v->data, cap, v->elem) : NULL;
        if (!d)
            return NULL;
        v->data = d;
        v->cap = cap;
    }
    void *p = (char *)v->data + v->n * v->elem;
    memset(p, 0, v->elem);
    v->n++;
    return p;
}

/* vec_push without zeroing: for the hot paths that set every field they read. */
static inline void *vec_push_raw(vec *v)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 16;
        void *d = realloc(v->data, cap * v->elem);
        if (!d)
            return NULL;
        v->data = d;
        v->cap = cap;
    }
    return (char *)v->data + v->n++ * v->elem;
}

/* Hands v's array over (its count into *n); v is left empty. */
static inline void *vec_take(vec *v, size_t *n)
{
    void *d = v->data;
    *n = v->n;
    v->data = NULL;
    v->n = v->cap = 0;
    return d;
}

static inline void vec_free(vec *v)
{
    free(v->data);
    v->data = NULL;
    v->n = v->cap = 0;
}

/* Order statistics with a bounded reservoir (deterministic replacement). */
typedef struct series {
    uint64_t count;
    double sum, max, min;
    double *res;
    size_t n_res, cap_res; /* the reservoir grows with the samples, up to RESERVOIR */
    uint64_t rng;
} series;

/* Makes room for one more sample in s's reservoir (below RESERVOIR); 0 when out of memory. */
int an_series_grow(series *s);

/* Adds sample x, keeping at most `cap` of them for the median (a power of two up to
 * RESERVOIR; past it a uniform sample): inline, as it runs for every op of every step
 * (metrics.c); the reservoir grows out of line (an_series_grow). */
static inline void an_series_add_cap(series *s, double x, size_t cap)
{
    if (s->count == 0) {
        s->max = s->min = x;
    }
    s->count++;
    s->sum += x;
    if (x > s->max)
        s->max = x;
    if (x < s->min)
        s->min = x;
    if (s->n_res == s->cap_res && s->cap_res < cap && !an_series_grow(s))
        return;
    if (s->n_res < cap) {
        s->res[s->n_res++] = x;
    } else {
        /* reservoir sampling: keep each of the count samples with probability cap / count;
         * the slot is the high word of rng x count, uniform in [0, count) (a 64-bit division
         * here was a twentieth of the analysis once the reservoirs are full) */
        s->rng = s->rng * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t j = (uint64_t)(((unsigned __int128)s->rng * s->count) >> 64);
        if (j < cap)
            s->res[j] = x;
    }
}

static inline void an_series_add(series *s, double x) { an_series_add_cap(s, x, RESERVOIR); }

pp_astats an_series_stats(series *s); /* reorders the reservoir */
void an_series_free(series *s);

/* What decode() makes of a range: its fields as the trace states them, wide enough for any
 * value it can hold; they are checked against the bounds (check_bounds) before any of them is
 * narrowed or used. */
/* decoded.peer / pp_aop.peer of a dialect's transfer: implied from the stages only when its
 * step is finalized (a dialect job states no S: the stages seen so far may be too few). */
enum { AN_PEER_LATE = -2 };

typedef struct decoded {
    int kind; /* pp_nvtx_kind, PP_NVTX_KIND_NONE when not a pipeline range */
    int64_t step;
    int64_t stage, mb, chunk, layer, peer;
    uint64_t bytes;
    int has_bytes;
    const char *oob; /* which bound a field broke (check_bounds), NULL when none */
} decoded;

typedef struct open_range {
    uint32_t domain;
    uint64_t t0;
    uint32_t message, category;
    uint32_t payload_type;
    uint64_t payload;
    int has_ext;
    uint8_t ext[64];
    uint32_t ext_bytes;
    uint64_t range_id; /* START */
    uint32_t tid;      /* START: the thread it opened on (a dialect's enclosing action) */
    /* decode() of it, once its extended payload is in: a range is decoded once, not at its push,
     * its payload and its pop (valid while the file's definitions are those of dec_gen) */
    int has_dec;
    int8_t pend_dir; /* DEC_PEND_RECV: what it feeds (decode.c, STACK_RECV_*) */
    uint32_t dec_gen, dec_cfg; /* the file's meta_gen and the run's cfg_gen it was made with */
    decoded dec;
} open_range;

typedef struct thread_state {
    uint32_t tid;
    vec stack;          /* open_range */
    int64_t cur_step;   /* step range open on this thread (fallback step numbering) */
    int64_t n_steps;    /* step ranges seen (fallback numbering) */
    int32_t cur_stage;
    int32_t cur_mb;     /* enclosing compute range's mb (layer ranges' fallback) */
    /* dialects (decode.c): "sequence" counters, per kind since the step range opened, and of
     * layer ranges since the compute range opened */
    int32_t dseq[PP_NVTX_KIND_COUNT];
    int32_t dlayer_seq;
    int32_t dbwd_seen;  /* a dialect's backward opened since the step range did (shape) */
    /* a step made of the micro-batch sequence, for dialect ops outside any step range
     * (docs/dialects.md "Steps"): its number, stage and extent so far */
    int syn_open;
    int syn_more;       /* its sequence moved past micro-batch 0 (a later one, a backward) */
    int syn_trains;     /* the thread ran a backward: its passes are training steps */
    int32_t syn_stage;
    int64_t syn_step;
    uint64_t syn_t0, syn_t1;
} thread_state;

/* What the message grammar says about one registered string (pp_nvtx_message_parse), worked
 * out once per string id: every PUSH of the pipeprof domain consults its message, and strings
 * never change once defined (the first definition wins). */
typedef struct msg_info {
    int valid;
    pp_nvtx_message m;
} msg_info;

/* What the dialects (pp_dialect.h) say about one string id in one domain, worked out once
 * (decode.c's dialect_of): the user's file first, then the torch names. */
typedef struct dialect_info {
    uint8_t valid, src; /* src: 0 no match, 1 the user's dialect, 2 torch */
    uint32_t domain;    /* the domain it was worked out for */
    pp_dialect_match m;
} dialect_info;

/* torch: when a compute op's input arrived (a receive's end) or its own send was posted, by
 * (chunk, direction 0 forward / 1 backward, mb); decode.c's small rings (docs/dialects.md
 * "Waits"). */
typedef struct torch_time {
    int32_t chunk, dir, mb;
    int32_t used;
    uint64_t t;
} torch_time;
enum { TORCH_TIMES = 32 };
enum { MG_FWD_CAP = 4096 }; /* Megatron interleaved forwards kept per step (decode.c) */

/* A domain the file registered (dialect rules may name one). */
typedef struct domain_name {
    uint32_t id, name;  /* name: a string id */
} domain_name;

/* A string whose id is far beyond the number of strings defined: kept apart, so that one
 * large id cannot size the table of ids. */
typedef struct far_string {
    uint32_t id;
    char *s;
} far_string;

typedef struct file_state {
    pp_trace_reader *r;
    int done;
    int index;
    int32_t rank;
    vec strings;        /* char* by id, for ids up to what the strings defined justify */
    vec far_strings;    /* far_string sorted by id: ids beyond that (string_slot) */
    size_t n_strings;   /* strings defined */
    vec msgs;           /* msg_info by string id */
    uint32_t pipeprof_domain; /* 0 = not seen */
    uint32_t paddle_tl[2];    /* PaddlePaddle's "pipeline timeline" and "virtual pipeline
                                 timeline" domains (docs/dialects.md), 0 = not seen */
    uint64_t off[PP_NVTX_FIELD_COUNT]; /* field offsets of pipeprof.event (pp_nvtx_fields order) */
    int schema_ok;
    vec threads;        /* thread_state */
    vec starts;         /* open_range with range_id (start/end) */
    uint64_t events;
    pp_afile *info;
    int32_t min_stage;  /* lowest stage among its ranges (clock pass), -1 none */
    pp_clock_fit clk;   /* its clock against the reference (PP_CLOCK_SHARED: untouched) */
    int32_t replica;    /* data-parallel replica: info->replica, or its config mark's */
    int32_t pipe_rank;  /* info->pipe_rank where info->pipe_known, else -1 */
    int32_t n_stages;   /* the pipeline's ranks as the files read tell (an_count_stages) */
    uint32_t meta_gen;  /* META blocks read: decode() results depend on their definitions */
    int default_layout; /* off[] is the convention's layout (pp_nvtx_fields) */
    int32_t proj_stage; /* host pass: the stage of its projected ranges, -1 none, -2 several */
    const pp_dialect *dialect; /* the user's dialect file (not owned), NULL none */
    vec dinfo;          /* dialect_info by string id (bounded like msgs) */
    vec domains;        /* domain_name: the file's domains, for dialect rules naming one */
    /* its latest step ranges opened (any thread): step and start (its own clock), a ring; the
     * step of a range on a thread with no step range of its own (torch's collectives run on
     * the process group's thread: an_file_step_at) */
    struct {
        int64_t step;
        uint64_t t0;
    } step_opens[8];
    unsigned n_step_opens;
    /* its latest step ranges closed (any thread), a ring: step, start and end (its own clock);
     * and the pipeline ranges of threads that open no step range of their own (a driver
     * thread's step around worker threads, one per stage) waiting for the step range that
     * encloses them in time to close (at most AN_PENDING_MAX: steps.c, an_pending_*) */
    struct {
        int64_t step;
        uint64_t t0, t1;
    } steps_closed[64];
    unsigned n_steps_closed;
    vec pending; /* pending_op */
    int stepless; /* it has such ranges: its stages advance by their ops, not its step ranges */
    uint64_t pending_lo, pending_hi; /* bounds of their starts (loose after removals) */
    uint64_t pending_added, pending_visits; /* the scans' budget: steps.c */
    int32_t torch_ids[64]; /* torch stage ids in the order the file first names them: chunk */
    int n_torch_ids;
    int torch_pair_noted; /* its first two ids went into the state's placement (an_placement) */
    /* torch: the OVERLAP_F_B action open in the file (decode.c): its two sub-actions, decoded
     * at its opening, its thread, where the backward's compute inside it started (0: not yet
     * seen), and the last end of an aten op on its thread before that (0: none) */
    int ov_open;
    uint32_t ov_tid;
    uint64_t ov_t0, ov_split, ov_fend;
    decoded ov_sub[2];
    torch_time t_arrive[TORCH_TIMES], t_send[TORCH_TIMES]; /* rings (torch waits) */
    int n_arrive, n_send;
    /* torch's Schedule1F1B, whose actions are its stack events and whose point-to-point
     * operations are posted between them (decode.c, docs/dialects.md "Schedule1F1B"): the
     * latest such compute op (a send posted after it is its output's), its thread, and the
     * receives posted outside any action, held until the next one says what they fed */
    int has_stack_op;
    /* a DeepSpeed PipelineEngine's trace (its compute ops seen): layers are the modules
     * directly inside its stage module, the first module inside a forward op (decode.c,
     * deepspeed_layer): that op's start and thread, the stage module's start */
    int deepspeed;
    uint32_t ds_op_tid;
    uint64_t ds_op_t0, ds_stage_module_t0;
    /* the latest _exec_optimizer_step's start, and its step + 1 (0: none yet) */
    uint64_t ds_opt_t0;
    int64_t ds_opt_step;
    /* a Megatron-LM schedule's trace (its forward_step / backward_step seen: decode.c,
     * megatron_layer): the latest forward op whose model chunk showed, its thread, the model
     * chunk's module (start, name: the one inside the wrappers) and its decoder block's (a
     * TransformerBlock: its start and name, 0 before it opened) */
    int megatron;
    uint32_t mg_op_tid, mg_chunk_msg, mg_block_msg;
    uint64_t mg_op_t0, mg_chunk_t0, mg_block_t0;
    /* Megatron-LM's interleaved schedule (its function seen; decode.c, megatron_chunk_*): a
     * forward_step says which model chunk it runs only by the module it calls, so a forward is
     * decoded when that module opens (pending until then: its start and thread); the names of
     * the chunks' outermost modules in the order first run (chunk = index), the step's
     * forwards so far (their chunk and micro-batch, the first MG_FWD_CAP: backward k runs
     * forward k's micro-batch on chunk v - 1 - its chunk) and its backwards so far */
    int mg_interleaved, mg_pending, mg_n_chunks;
    uint32_t mg_pend_tid, mg_chunk_names[16];
    uint64_t mg_pend_t0;
    pp_dialect_match mg_pend_match;
    uint32_t mg_fwd_n, mg_bwd_n, mg_chunk_fwds[16];
    struct mg_fwd {
        int32_t chunk, mb;
    } *mg_fwd; /* MG_FWD_CAP of them, allocated at the schedule's first call */
    /* torch (no DeepSpeed): the latest compute op whose stage module showed, its thread, that
     * module's start and name (valid once tm_n_names > 0), and the names of the stage modules
     * seen (a chunk's each, the first 8: decode.c, torch_module_layer) */
    uint32_t tm_op_tid, tm_msg;
    uint64_t tm_op_t0, tm_mod_t0;
    int tm_n_names;
    uint32_t tm_names[8];
    uint32_t stack_tid;
    decoded stack_op;
    /* Megatron-LM: the latest forward and backward op (has_: seen) a send's direction picks,
     * and the p2p_communication call open around the transfers (its start, and the sends and
     * receives posted in it so far: decode.c, megatron_p2p_dir) */
    int has_stack_fwd, has_stack_bwd;
    decoded stack_fwd, stack_bwd;
    uint64_t mg_p2p_t0;
    int mg_p2p_sends, mg_p2p_recvs;
    struct stack_recv {
        uint64_t t0, t1;
        uint32_t message, category, tid;
        int dir; /* STACK_RECV_*: what it feeds */
    } pend[8];
    int n_pend;
    struct rg_file *generic; /* ranges.c: its domain, category and thread names (an_other_meta) */
    struct mem_file *mem;    /* memory.c: its counters, heaps and live regions (NULL: none yet) */
    vec early_ends;     /* early_end: END records read before their START (another thread's
                           block came first), at most 4096 */
} file_state;

/* An END whose START is in a block not read yet (decode.c's on_end / on_open). */
typedef struct early_end {
    uint64_t range_id, ts;
    uint32_t tid;
} early_end;


typedef struct step_range {
    int32_t stage;
    uint64_t t0, t1;
} step_range;

/* A data-parallel gradient all-reduce range of a stage. */
typedef struct ar_range {
    int32_t stage, rank;
    uint64_t t0, t1, bytes;
} ar_range;

typedef struct bucket {
    int64_t step;
    int used;
    vec ops;        /* pp_aop */
    vec layer_ops;  /* pp_aop */
    vec ranges;     /* step_range */
    vec allred;     /* ar_range */
} bucket;

typedef struct layer_acc {
    int used;
    char name[48];
    series fwd, bwd, bwdw;
    int has_info;
    uint64_t param_bytes, activation_bytes;
    int has_kept;                      /* the mark gave kept_bytes and input_bytes */
    uint64_t kept_bytes, input_bytes;  /* kept for the backward; kept when recomputed */
} layer_acc;

typedef struct link_acc {
    int used;
    pp_alink l;
    series lat;
    series bw; /* per-message bandwidth of timed messages, bytes/ns = GB/s */
    series snd; /* per-message time in the send range */
    series rcv; /* per-message time in the receive range, of receives that found their data */
} link_acc;

typedef struct stage_acc {
    series fwd, bwd, bwd_in, bwd_w, opt;
    /* runs with several chunks per stage: each chunk's compute ops by kind (FWD, BWD, BWD_INPUT,
     * BWD_WEIGHT), chunk c's at [4 c .. 4 c + 3]; n_chunk chunks (up to the largest seen + 1,
     * below PP_ANALYSIS_MAX_CHUNKS), each reservoir at most CHUNK_RESERVOIR */
    series *chunk_ops;
    int n_chunk;
    series allred;       /* per step: the stage's all-reduce time */
    double allred_bytes; /* summed over steps */
    double busy, idle, fill, imb, xfer, ar;
    uint64_t n;
    vec culprit_votes; /* int counts by stage */
} stage_acc;

/* The latest step range a stage opened and the trace it is in: a rank that died leaves a
 * trace ending steps before the others'. Kept apart from stage_max_step, which drives
 * finalization. */
typedef struct stage_seen {
    int64_t last_step; /* -1: no step range seen */
    int32_t rank;
    int file;          /* index into the file states */
} stage_seen;

struct pp_report_event; /* report_internal.h */

typedef struct state {
    const pp_analysis_options *o;
    pp_analysis *a;
    int S_cfg;            /* from the config mark, 0 unknown */
    int M_cfg, v_cfg, L_cfg; /* its M, v and layers: the bounds of check_bounds (0 unknown) */
    char oob_first[320];  /* the first range out of bounds, for the warning */
    int S_seen;
    int multi_chunk; /* an op of chunk > 0 was seen: the stages keep per-chunk series */
    vec buckets;          /* bucket */
    int64_t *stage_max_step; /* [cap_stages] latest step started per stage */
    int cap_stages;
    stage_seen *seen;     /* [cap_seen] where each stage's step ranges open, for lost ranks */
    int cap_seen;
    int64_t last_finalized;
    vec steps;            /* pp_astep */
    vec steps_S;          /* int by step: the stages its stage[] was allocated for (the set of
                             stages can grow after a step is finalized; an_results() widens) */
    series step_series;
    vec stage_acc;        /* stage_acc by stage */
    vec links;            /* link_acc */
    vec layers;           /* layer_acc by layer index */
    vec kept_ops, kept_layer_ops, kept_ar_ops;
    vec xfers;            /* xfer: step_links' scratch, reused from step to step */
    vec match;            /* size_t by op index: step_links' scratch */
    void *scratch;        /* the per-step sorts' scratch (sort_scratch) */
    size_t scratch_bytes;
    size_t last_bucket;   /* index of the bucket bucket_get found last */
    int64_t kept_step;    /* when keeping "the last step" */
    uint64_t *prev_bound; /* [2 cap_prev] the stages' starts, then ends, of step prev_step */
    int cap_prev;
    int64_t prev_step;    /* the step finalized last (its bounds in prev_bound), -1 none */
    double bubble_sum, imbalance_sum;
    uint64_t n_decomp;
    int late_warned;
    int collect;          /* clock pass: keep transfers only, in `collected` */
    size_t pending_total; /* ranges of stepless threads waiting over all files (steps.c) */
    vec collected;        /* pp_aop of the transfers, rank = file index */
    vec syncs;            /* sync_mark: the clock ping-pong's marks (clock pass) */
    pp_gpu_proj *gpu;     /* GPU pass: the projection the ranges and records go to */
    int gpu_pass;         /* GPU pass: ranges go to `gpu` only */
    uint64_t gpu_records; /* host pass: GPU-capture records of the analyzed replica */
    struct an_gpu_rec *gpu_rec; /* host pass: the GPU pass's inputs recorded (gpu_rec.c) */
    int gpu_rec_on;       /* ... and still being recorded (a stopped recording costs no call) */
    uint32_t cfg_gen;     /* configuration marks read: decode()'s bounds depend on them */
    vec nccl_members;     /* host pass: pp_gpu_nccl_member, each (communicator, rank) once */
    uint64_t dialect_ranges; /* pipeline ranges a dialect named (decode.c) */
    const char *dialect_used; /* the dialect of the last of them (pp_analysis.dialect) */
    /* the shape the dialect ranges show (an_dialect_shape): the largest mb and chunk of their
     * compute ops, a forward after a backward in one step, split backwards */
    int64_t dshape_mb, dshape_chunk;
    int dshape_fwd_after_bwd, dshape_split;
    /* torch's placement of its stage ids, from each trace's first two (an_placement): looped
     * ranks hold ids r, r + P, ... (one difference on every rank), V ranks r, 2P - 1 - r (one
     * sum) */
    int64_t torch_pairs, torch_sum, torch_diff;
    int torch_same_sum, torch_same_diff;
    uint64_t torch_overlaps;  /* DualPipeV's OVERLAP_F_B actions seen */
    uint64_t megatron_interleaved; /* Megatron-LM interleaved schedule calls seen (decode.c) */
    uint64_t megatron_unresolved;  /* their forward / backward calls of no known chunk */
    uint64_t torch_unsplit;   /* those not split into their forward and backward (decode.c) */
    /* torch module events where layers would be (directly inside a stage module) that compiled
     * code ran: no layers (decode.c, torch_module_layer) */
    uint64_t torch_compiled_modules;
    vec dlayers;          /* dialect_layer: torch modules by provisional layer index */
    struct rg_state *generic; /* host pass: the generic view's tables (ranges.c) */
    struct mem_state *mem;    /* host pass: memory per stage and the series (memory.c) */
    /* replay pass (pp_report_each_event): the other ranges and marks go to sink, nothing is kept */
    void (*sink)(void *ctx, const struct pp_report_event *e);
    void *sink_ctx;
} state;

/* One "clocksync send|recv peer=P phase=F seq=K" mark (docs/nvtx-convention.md), keyed by the
 * message it brackets: from world rank src to dst. */
typedef struct sync_mark {
    int32_t src, dst, phase, seq;
    int32_t recv;
    int32_t file;
    uint64_t ts;
} sync_mark;

/* A send or receive of a step, keyed by the link it travels: (grad, src, dst). */
typedef struct xfer {
    int32_t grad, src, dst;
    int32_t recv;
    size_t index; /* in the step's ops */
} xfer;

int an_ensure_stage_grow(state *st, int s);

/* Whether stage s is tracked, making room for it (s < 4096); 0 when out of range or memory.
 * Every range asks: the known case is inline. */
static inline int an_ensure_stage(state *st, int s)
{
    if (s >= 0 && s < st->S_seen && s < st->cap_stages && (size_t)s < st->stage_acc.n)
        return 1;
    return an_ensure_stage_grow(st, s);
}

/* pp_aop_is_compute, inline for the per-op loops. */
static inline int an_is_compute(int kind)
{
    return (kind >= PP_AOP_FWD && kind <= PP_AOP_BWD_WEIGHT) || kind == PP_AOP_OPT;
}

/* The end of the last compute op of receive ops[r]'s stage that began inside it (ops grouped by
 * stage, each in time order), 0 when none: a receive posted early and waited for after the
 * stage computed (Megatron-LM's overlap_p2p_comm: irecv, the compute, then the wait) ends when
 * its wait returned, not when its data came (docs/metrics.md "Transfers"). */
static inline uint64_t an_recv_overlapped_end(const pp_aop *ops, size_t n, size_t r)
{
    uint64_t end = 0;
    for (size_t k = r + 1; k < n && ops[k].stage == ops[r].stage && ops[k].t0 < ops[r].t1; k++)
        if (an_is_compute(ops[k].kind) && ops[k].t0 > ops[r].t0 && ops[k].t1 > end)
            end = ops[k].t1;
    return end;
}

/* ---- analyzer.c: the driver ---- */
void an_warn(pp_analysis *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* decode.c: the step of file f open at t0 (its own clock): the latest of its step ranges that
 * opened at or before t0 among the last 8 opened, -1 when none. */
int64_t an_file_step_at(const file_state *f, uint64_t t0);
void an_state_init(state *st, const pp_analysis_options *o, pp_analysis *a);
void an_state_free(state *st);
int an_rank_wanted(const pp_analysis_options *o, int32_t rank);
/* A second reading of the files (the clock and GPU passes): a state of its own over a scratch
 * analysis, and file states mirroring fs[] (the same info, rank and clock), open where fs[i] is
 * a wanted trace. */
typedef struct pass {
    pp_analysis *scratch;
    file_state *fs;
    state st;
} pass;
/* 0 when out of memory; an_pass_close in any case. */
int an_pass_open(pass *p, const file_state *fs, size_t n, const pp_analysis_options *o);
void an_pass_close(pass *p, size_t n);
/* One block of each file not done, round-robin so that the files advance together (a file is
 * done once it has no more); 0 when every file was done already. */
int an_read_round(state *st, file_state *fs, size_t n);
/* The stages the analysis counts: the announced S, or the stages seen when more. */
static inline int an_state_stages(const state *st)
{
    return st->S_cfg > st->S_seen ? st->S_cfg : st->S_seen;
}

/* The run's placement of chunks on stages (pp_placement): V when its torch traces name their
 * stage ids as torch's V schedules place them (ZBV, DualPipeV), else looped. */
static inline int an_placement(const state *st)
{
    return st->torch_pairs >= 2 && st->torch_same_sum && !st->torch_same_diff ? PP_PLACE_V
                                                                              : PP_PLACE_LOOPED;
}

/* The stage a transfer of kind `kind` (a send or receive, PP_AOP_*) of (stage, chunk) goes to or
 * comes from when its range does not say: the stage of the neighbouring piece under the run's
 * placement (pp_nvtx_implied_peer's ring when looped, or at the model's ends). */
static inline int an_implied_peer(const state *st, int kind, int stage, int chunk, int S)
{
    int up = kind == PP_AOP_SEND_ACT || kind == PP_AOP_RECV_GRAD;
    if (an_placement(st) != PP_PLACE_V || chunk < 0 || chunk >= PP_SCHED_MAX_V || stage < 0 ||
        stage >= S)
        return pp_nvtx_implied_peer(kind, stage, S);
    pp_schedule sc = {.S = S, .placement = PP_PLACE_V}; /* what the piece functions read */
    int p = pp_schedule_piece(&sc, stage, chunk) + (up ? 1 : -1);
    return p < 0 ? pp_nvtx_implied_peer(kind, stage, S) : pp_schedule_piece_stage(&sc, p);
}

/* ---- decode.c: trace blocks -> ranges ---- */
void an_file_state_init(file_state *f, int index);
/* Sets every file's n_stages: the largest pipeline rank among the n files read, plus 1. */
void an_count_stages(file_state *fs, size_t n);
void an_file_state_free(file_state *f);
/* Reads f's next block and hands its records on (META: the definitions; EVENTS: the ranges, to
 * steps.c; FOOTER: the file's counts into f->info); 0 once the file has no more, or a block
 * cannot be read. */
int an_read_block(state *st, file_state *f);
const char *an_str_of(file_state *f, uint32_t id); /* "" for an unknown id */

/* A torch module seen as a layer: its stage and order within it (an_dialect_layers). */
typedef struct dialect_layer {
    int32_t stage, chunk, local;
    int32_t piece; /* an_dialect_layers' sort key */
    char name[48];
} dialect_layer;
/* Renumbers the torch modules' provisional layer indices (first seen, any file) by piece (stage
 * and chunk under the run's placement), then order within the stage, in st->layers and the kept
 * layer ops (docs/dialects.md "Layers"). */
void an_dialect_layers(state *st);

/* When no configuration mark stated them: M, v and the schedule the dialect ranges show
 * (docs/dialects.md "Shape"). */
void an_dialect_shape(const state *st, pp_analysis *a);

/* ---- ranges.c: the ranges and marks outside the pipeline (the generic view) ---- */
/* A closed range that is not a pipeline range: another domain's, a pipeprof-domain range no
 * rule decodes, or any range of a trace without the pipeprof domain. Called in every pass
 * (clock, host, GPU): only the host pass keeps anything. Must stay cheap (decode's hot loop). */
void an_other_range(state *st, file_state *f, const thread_state *t, const open_range *o,
                    uint64_t t1);
/* A mark of another domain than pipeprof's (r: its record, ts its time). */
void an_other_mark(state *st, file_state *f, const thread_state *t, const pp_rec_range *r,
                   uint64_t ts);
/* A definition record of a META block (decode.c's on_meta): the domain, category and thread
 * names the generic view shows. Bounded per file. */
void an_other_meta(file_state *f, const pp_rec_header *h, const uint8_t *rec);
void an_other_file_free(file_state *f);
/* The name of a domain of f's META blocks ("" for 0 or an unknown id); for memory.c's series. */
const char *an_other_domain_name(file_state *f, uint32_t domain);
/* The host pass's tables into st->a (after an_results; fs: the files, for names and pids). */
void an_other_results(state *st, file_state *fs, size_t n);
void an_other_free(state *st);

/* ---- memory.c: counters, the memory extension, resident memory ---- */
/* A COUNTER_DEF of a META block, and a COUNTER or MEM record of an EVENTS block (host pass only:
 * the other passes return at once). Bounded per file and per run (pp_analyzer.h). */
void an_mem_meta(state *st, file_state *f, const pp_rec_header *h, const uint8_t *rec);
void an_mem_record(state *st, file_state *f, const pp_rec_header *h, const uint8_t *rec);
void an_mem_file_free(file_state *f);
/* The tables into st->a (after an_results: the peaks' steps come from a->steps). */
void an_mem_results(state *st, const file_state *fs, size_t n_files);
void an_mem_free(state *st);

/* ---- steps.c: ranges -> steps ---- */
/* A closed range of file f on thread t, of the pipeprof domain, ending at t1; raw is decode()
 * of it. */
void an_on_range(state *st, file_state *f, thread_state *t, const open_range *o, uint64_t t1,
              const decoded *raw);
/* Notes the latest step range stage s opened, and in which trace (warn_lost_ranks). */
void an_note_step_open(state *st, const file_state *f, int s, int64_t step);
/* Finalizes every step that all stages have moved past (all of them at the end). */
void an_finalize_ready(state *st, int at_end);
/* A step range of file f, step `step`, closed ([t0, t1) on its own clock): the ranges of
 * stepless threads waiting for it go into it. */
void an_pending_step_closed(state *st, file_state *f, int64_t step, uint64_t t0, uint64_t t1);
/* The end of file f: waiting ranges that a closed step encloses go into it, the others are
 * dropped. */
void an_pending_flush(state *st, file_state *f);

/* ---- metrics.c: a step -> its numbers ---- */
void an_finalize(state *st, bucket *b);
/* For each send of ops, the index of its receive (SIZE_MAX when none) in st->match; 0 when out
 * of memory. */
int an_match_transfers(state *st, const pp_aop *ops, size_t n);
/* The accumulators into st->a. */
/* The step times' regimes (regime.c) into a->regimes, and a warning when there are two; `dialect`
 * names the pipeline ranges (NULL: the convention's), a torch profiler's own cost as a cause. */
void an_regimes(pp_analysis *a, const char *dialect);
void an_results(state *st);

/* ---- bubble.c: the decomposition ---- */
/* Replays the step's ops (sorted by stage and time) and fills sp's fill/drain, imbalance and
 * transfer times, its culprit and critical share; kind_mean[PP_AOP_COUNT]: the mean duration
 * of each compute kind. 1 when the step could be replayed. */
int an_step_decompose(pp_astep *sp, const pp_aop *ops, size_t n, int S, int placement,
                      const double *kind_mean);

/* ---- clock_pass.c, gpu_pass.c ---- */
pp_status an_clock_align(file_state *fs, size_t n, pp_analysis *a, const pp_analysis_options *o);
pp_status an_gpu_pass(const file_state *fs, size_t n, const vec *nccl_members, pp_analysis *a,
                      const pp_analysis_options *o, struct an_gpu_rec *rec);

/* ---- gpu_rec.c: the GPU pass's inputs, recorded by the host pass ---- */
typedef struct an_gpu_rec an_gpu_rec;
an_gpu_rec *an_gpu_rec_open(void); /* NULL: out of memory (nothing recorded) */
void an_gpu_rec_close(an_gpu_rec *r);
/* A pipeline range the GPU pass would project onto (gpu_range's arguments). Both return
 * whether the recording goes on (0: stopped, an_gpu_rec_usable 0, the calls after it no-ops). */
int an_gpu_rec_range(an_gpu_rec *r, int32_t file, uint32_t tid, int64_t step, int32_t stage,
                     int32_t kind, uint64_t t0, uint64_t t1);
/* A GPU, API or NCCL record (`size` bytes of its struct), on the reference clock. */
int an_gpu_rec_record(an_gpu_rec *r, int32_t file, uint16_t type, const void *rec, size_t size);
/* Whether everything was recorded (else the GPU pass reads the traces again). */
int an_gpu_rec_usable(const an_gpu_rec *r);
/* The records into the projection, in their order; 0 when the recording cannot be read back
 * (then p has part of them: the caller makes another and reads the traces again). */
int an_gpu_rec_replay(an_gpu_rec *r, pp_gpu_proj *p);

#endif /* PP_ANALYZER_INTERNAL_H */
