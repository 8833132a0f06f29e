/* analyzer.c: run directory -> pipeline metrics (pp_analyzer.h, formulas in docs/metrics.md).
 *
 * Reading: every trace file is streamed block by block, files taken round-robin so that they
 * advance together. Push/pop (and start/end) records are paired per thread into ranges; ranges
 * of the "pipeprof" domain are decoded per docs/nvtx-convention.md (extended payload first, the
 * message grammar as fallback) into pipeline ops, layer ops and step ranges.
 *
 * Steps: ops are collected per step number; a step is finalized once every stage has started a
 * later step (or the traces end), reduced to its numbers and its ops freed, so memory follows
 * the steps in flight, not the trace length. */
#include "pp_analyzer.h"
#include "pp_clock.h"

#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PIPEPROF_SCHEMA_ID UINT64_C(0x01007070)

enum { RESERVOIR = 4096 };

/* ======================================================================================== */
/* Small containers                                                                           */
/* ======================================================================================== */

typedef struct vec {
    void *data;
    size_t n, cap, elem;
} vec;

static void *vec_push(vec *v)
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
static void *vec_push_raw(vec *v)
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

static void vec_free(vec *v)
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

static void series_add(series *s, double x)
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
    if (s->n_res == s->cap_res && s->cap_res < RESERVOIR) {
        /* grown by what is added: a series of a few samples costs a few doubles, not 32 KB */
        size_t cap = s->cap_res ? s->cap_res * 2 : 8;
        double *r = realloc(s->res, cap * sizeof(double));
        if (!r)
            return;
        if (!s->res)
            s->rng = 0x9e3779b97f4a7c15ull;
        s->res = r;
        s->cap_res = cap;
    }
    if (s->n_res < RESERVOIR) {
        s->res[s->n_res++] = x;
    } else {
        /* reservoir sampling: keep each of the count samples with probability R / count; the
         * slot is the high word of rng x count, uniform in [0, count) (a 64-bit division here
         * was a twentieth of the analysis once the reservoirs are full) */
        s->rng = s->rng * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t j = (uint64_t)(((unsigned __int128)s->rng * s->count) >> 64);
        if (j < RESERVOIR)
            s->res[j] = x;
    }
}

/* Rearranges v so that v[k] is the value a sort would put there, smaller ones before it and
 * larger ones after (Hoare's selection): the order statistics without sorting the reservoir,
 * which was the analysis' largest cost after decoding. */
static void select_nth(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        /* median of three as the pivot */
        double a = v[lo], b = v[mid], c = v[hi];
        double pivot = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                double t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return;
    }
}

/* The q-quantile of v[0, n) with linear interpolation between order statistics (the value a
 * sorted array gives at q (n - 1)); reorders v. */
static double quantile_select(double *v, size_t n, double q)
{
    if (n == 0)
        return 0.0;
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    double f = pos - (double)i;
    select_nth(v, n, i);
    if (i + 1 >= n)
        return v[i];
    double next = v[i + 1]; /* the smallest of what lies above v[i] */
    for (size_t k = i + 2; k < n; k++)
        next = v[k] < next ? v[k] : next;
    return v[i] * (1 - f) + next * f;
}

static pp_astats series_stats(series *s)
{
    pp_astats st = {0};
    st.count = s->count;
    if (!s->count)
        return st;
    st.sum = s->sum;
    st.mean = s->sum / (double)s->count;
    st.max = s->max;
    st.min = s->min;
    if (s->res && s->n_res) {
        st.median = quantile_select(s->res, s->n_res, 0.5);
        st.p95 = quantile_select(s->res, s->n_res, 0.95);
    }
    return st;
}

static void series_free(series *s)
{
    free(s->res);
    s->res = NULL;
    s->n_res = s->cap_res = 0;
}

/* ======================================================================================== */
/* Per-file decoding state                                                                    */
/* ======================================================================================== */

/* What decode() makes of a range. */
/* A range's fields as the trace states them, wide enough for any value it can hold: they are
 * checked against the bounds (check_bounds) before any of them is narrowed or used. */
typedef struct decoded {
    int kind;
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
    /* decode() of it, once its extended payload is in: a range is decoded once, not at its push,
     * its payload and its pop (valid while the file's definitions are those of dec_gen) */
    int has_dec;
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
} thread_state;

/* What the message grammar says about one registered string (decode_message's fields), worked
 * out once per string id: every PUSH of the pipeprof domain consults its message, and strings
 * never change once defined (the first definition wins). */
typedef struct msg_info {
    int valid;
    int kind;
    int64_t mb, chunk, layer, peer;
} msg_info;

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
    uint64_t off[8];    /* field offsets of pipeprof.event: kind stage mb chunk layer peer bytes step */
    int schema_ok;
    vec threads;        /* thread_state */
    vec starts;         /* open_range with range_id (start/end) */
    uint64_t events;
    pp_afile *info;
    int32_t min_stage;  /* lowest stage among its ranges (clock pass), -1 none */
    pp_clock_fit clk;   /* its clock against the reference (PP_CLOCK_SHARED: untouched) */
    int32_t replica;    /* data-parallel replica, from its config mark (0 when none) */
    uint32_t meta_gen;  /* META blocks read: decode() results depend on their definitions */
    int default_layout; /* off[] is the convention's layout (k_event_offsets) */
    int32_t proj_stage; /* host pass: the stage of its projected ranges, -1 none, -2 several */
} file_state;

/* The pipeprof.event fields' offsets in the convention: kind stage mb chunk layer peer bytes
 * step. */
static const uint64_t k_event_offsets[8] = {0, 4, 8, 12, 16, 20, 24, 32};

/* ======================================================================================== */
/* Steps in flight                                                                            */
/* ======================================================================================== */

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
} layer_acc;

typedef struct link_acc {
    int used;
    pp_alink l;
    series lat;
    series bw; /* per-message bandwidth of timed messages, bytes/ns = GB/s */
} link_acc;

typedef struct stage_acc {
    series fwd, bwd, bwd_in, bwd_w, opt;
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

typedef struct state {
    const pp_analysis_options *o;
    pp_analysis *a;
    int S_cfg;            /* from the config mark, 0 unknown */
    int M_cfg, v_cfg, L_cfg; /* its M, v and layers: the bounds of check_bounds (0 unknown) */
    char oob_first[320];  /* the first range out of bounds, for the warning */
    int S_seen;
    vec buckets;          /* bucket */
    int64_t *stage_max_step; /* [cap_stages] latest step started per stage */
    int cap_stages;
    stage_seen *seen;     /* [cap_seen] where each stage's step ranges open, for lost ranks */
    int cap_seen;
    int64_t last_finalized;
    vec steps;            /* pp_astep */
    vec steps_S;          /* int by step: the stages its stage[] was allocated for (the set of
                             stages can grow after a step is finalized; results() widens) */
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
    vec collected;        /* pp_aop of the transfers, rank = file index */
    vec syncs;            /* sync_mark: the clock ping-pong's marks (clock pass) */
    pp_gpu_proj *gpu;     /* GPU pass: the projection the ranges and records go to */
    int gpu_pass;         /* GPU pass: ranges go to `gpu` only */
    uint64_t gpu_records; /* host pass: GPU-capture records of the analyzed replica */
    uint32_t cfg_gen;     /* configuration marks read: decode()'s bounds depend on them */
    vec nccl_members;     /* host pass: pp_gpu_nccl_member, each (communicator, rank) once */
} state;

/* One "clocksync send|recv peer=P phase=F seq=K" mark (docs/nvtx-convention.md), keyed by the
 * message it brackets: from world rank src to dst. */
typedef struct sync_mark {
    int32_t src, dst, phase, seq;
    int32_t recv;
    int32_t file;
    uint64_t ts;
} sync_mark;

static void warn(pp_analysis *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(pp_analysis *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pp_append_linev(a->warnings, sizeof a->warnings, fmt, ap);
    va_end(ap);
}

static void note_step_open(state *st, const file_state *f, int s, int64_t step)
{
    if (s < 0 || s >= 4096 || step < 0)
        return;
    if (s >= st->cap_seen) {
        int cap = st->cap_seen ? st->cap_seen : 8;
        while (cap <= s)
            cap *= 2;
        stage_seen *m = realloc(st->seen, sizeof *m * (size_t)cap);
        if (!m)
            return; /* only a warning is lost */
        for (int i = st->cap_seen; i < cap; i++)
            m[i] = (stage_seen){.last_step = -1, .rank = -1, .file = -1};
        st->seen = m;
        st->cap_seen = cap;
    }
    if (step > st->seen[s].last_step)
        st->seen[s] = (stage_seen){.last_step = step, .rank = f->rank, .file = f->index};
}

static int ensure_stage_grow(state *st, int s);

/* Whether stage s is tracked, making room for it (s < 4096); 0 when out of range or memory.
 * Every range asks: the known case is inline. */
static inline int ensure_stage(state *st, int s)
{
    if (s >= 0 && s < st->S_seen && s < st->cap_stages && (size_t)s < st->stage_acc.n)
        return 1;
    return ensure_stage_grow(st, s);
}

static int ensure_stage_grow(state *st, int s)
{
    if (s < 0 || s >= 4096)
        return 0;
    if (s >= st->cap_stages) {
        int cap = st->cap_stages ? st->cap_stages : 8;
        while (cap <= s)
            cap *= 2;
        int64_t *m = realloc(st->stage_max_step, sizeof(int64_t) * (size_t)cap);
        if (!m)
            return 0;
        for (int i = st->cap_stages; i < cap; i++)
            m[i] = -1;
        st->stage_max_step = m;
        st->cap_stages = cap;
    }
    while (st->stage_acc.n <= (size_t)s)
        if (!vec_push(&st->stage_acc))
            return 0;
    if (s + 1 > st->S_seen)
        st->S_seen = s + 1;
    return 1;
}

static bucket *bucket_get(state *st, int64_t step)
{
    bucket *b = st->buckets.data;
    /* consecutive ranges mostly belong to one step */
    if (st->last_bucket < st->buckets.n && b[st->last_bucket].used &&
        b[st->last_bucket].step == step)
        return &b[st->last_bucket];
    for (size_t i = 0; i < st->buckets.n; i++)
        if (b[i].used && b[i].step == step) {
            st->last_bucket = i;
            return &b[i];
        }
    if (step <= st->last_finalized) {
        if (!st->late_warned) {
            warn(st->a, "ranges of step %lld arrived after it was analyzed (ignored)",
                 (long long)step);
            st->late_warned = 1;
        }
        return NULL;
    }
    for (size_t i = 0; i < st->buckets.n; i++)
        if (!b[i].used) {
            b[i].used = 1;
            b[i].step = step;
            return &b[i];
        }
    bucket *nb = vec_push(&st->buckets);
    if (!nb)
        return NULL;
    nb->ops.elem = nb->layer_ops.elem = sizeof(pp_aop);
    nb->ranges.elem = sizeof(step_range);
    nb->allred.elem = sizeof(ar_range);
    nb->used = 1;
    nb->step = step;
    return nb;
}

/* ======================================================================================== */
/* Step finalization: the numbers                                                             */
/* ======================================================================================== */

static int step_wanted(const state *st, int64_t step)
{
    if (st->o->step_lo && step < st->o->step_lo)
        return 0;
    if (st->o->step_hi && step > st->o->step_hi)
        return 0;
    return 1;
}

/* A stable merge sort of n T's by LESS(const T *, const T *), the comparison inlined: the two
 * per-step sorts (ops by stage and time, transfers by link) through qsort's callback were a
 * tenth of the analysis. Runs of 16 by insertion, then merges; an already ordered pair of runs
 * costs one comparison, and a step's ranges arrive nearly ordered. tmp holds n elements. */
#define DEFINE_STABLE_SORT(name, T, LESS)                                                      \
    static void name(T *v, size_t n, T *tmp)                                                   \
    {                                                                                          \
        enum { RUN = 16 };                                                                     \
        for (size_t lo = 0; lo < n; lo += RUN) {                                               \
            size_t hi = lo + RUN < n ? lo + RUN : n;                                           \
            for (size_t i = lo + 1; i < hi; i++) {                                             \
                if (!LESS(&v[i], &v[i - 1]))                                                   \
                    continue;                                                                  \
                T x = v[i];                                                                    \
                size_t j = i;                                                                  \
                for (; j > lo && LESS(&x, &v[j - 1]); j--)                                     \
                    v[j] = v[j - 1];                                                           \
                v[j] = x;                                                                      \
            }                                                                                  \
        }                                                                                      \
        for (size_t w = RUN; w < n; w *= 2)                                                    \
            for (size_t lo = 0; lo + w < n; lo += 2 * w) {                                     \
                size_t mid = lo + w, hi = lo + 2 * w < n ? lo + 2 * w : n;                     \
                if (!LESS(&v[mid], &v[mid - 1]))                                               \
                    continue;                                                                  \
                memcpy(tmp, v + lo, (mid - lo) * sizeof(T));                                   \
                size_t a = 0, na = mid - lo, b = mid, k = lo;                                  \
                while (a < na && b < hi)                                                       \
                    v[k++] = LESS(&v[b], &tmp[a]) ? v[b++] : tmp[a++];                         \
                while (a < na)                                                                 \
                    v[k++] = tmp[a++];                                                         \
            }                                                                                  \
    }

static inline int op_time_less(const pp_aop *x, const pp_aop *y)
{
    if (x->stage != y->stage)
        return x->stage < y->stage;
    if (x->t0 != y->t0)
        return x->t0 < y->t0;
    return x->t1 < y->t1;
}

DEFINE_STABLE_SORT(sort_ops_by_time, pp_aop, op_time_less)

/* sort_ops_by_time, faster on a step's ops: stable counting by stage (the ops of the stages
 * arrive interleaved, each stage's nearly in time order), then each stage's run by time. tmp
 * holds n ops. Falls back to the merge sort when a stage lies outside [0, S). */
static void sort_ops(pp_aop *v, size_t n, pp_aop *tmp, int S)
{
    size_t *start = S > 0 ? calloc((size_t)S + 1, sizeof *start) : NULL;
    for (size_t i = 0; start && i < n; i++) {
        if (v[i].stage < 0 || v[i].stage >= S) {
            free(start);
            start = NULL;
        } else {
            start[v[i].stage + 1]++;
        }
    }
    if (!start) {
        sort_ops_by_time(v, n, tmp);
        return;
    }
    for (int s = 0; s < S; s++)
        start[s + 1] += start[s];
    size_t *at = start; /* at[s]: the next slot of stage s */
    for (size_t i = 0; i < n; i++)
        tmp[at[v[i].stage]++] = v[i];
    memcpy(v, tmp, n * sizeof *v);
    /* at[s] is now the end of stage s, which is where stage s + 1 begins */
    size_t lo = 0;
    for (int s = 0; s < S; s++) {
        size_t hi = at[s];
        if (hi > lo + 1)
            sort_ops_by_time(v + lo, hi - lo, tmp);
        lo = hi;
    }
    free(start);
}

/* Scratch of at least `bytes` for the per-step sorts, kept from step to step; NULL when out of
 * memory. */
static void *sort_scratch(state *st, size_t bytes)
{
    if (bytes > st->scratch_bytes) {
        void *p = realloc(st->scratch, bytes);
        if (!p)
            return NULL;
        st->scratch = p;
        st->scratch_bytes = bytes;
    }
    return st->scratch;
}

/* The observed lists of one step as a schedule the simulator can replay. */
typedef struct replay {
    pp_schedule sc;
    double **dur; /* [S][n] measured durations of compute instructions */
    double *kind_mean; /* [PP_AOP_COUNT] mean duration per kind over all stages */
    int balanced;
} replay;

static uint8_t op_of(uint8_t k)
{
    switch (k) {
    case PP_AOP_FWD: return PP_OP_FWD;
    case PP_AOP_BWD: return PP_OP_BWD;
    case PP_AOP_BWD_INPUT: return PP_OP_BWD_INPUT;
    case PP_AOP_BWD_WEIGHT: return PP_OP_BWD_WEIGHT;
    case PP_AOP_OPT: return PP_OP_OPT_STEP;
    case PP_AOP_SEND_ACT: return PP_OP_SEND_ACT;
    case PP_AOP_RECV_ACT: return PP_OP_RECV_ACT;
    case PP_AOP_SEND_GRAD: return PP_OP_SEND_GRAD;
    default: return PP_OP_RECV_GRAD;
    }
}

static double replay_op_ns(void *ctx, int stage, int index, const pp_instr *in)
{
    replay *r = ctx;
    if (!r->balanced)
        return r->dur[stage][index];
    switch (in->op) {
    case PP_OP_FWD: return r->kind_mean[PP_AOP_FWD];
    case PP_OP_BWD: return r->kind_mean[PP_AOP_BWD];
    case PP_OP_BWD_INPUT: return r->kind_mean[PP_AOP_BWD_INPUT];
    case PP_OP_BWD_WEIGHT: return r->kind_mean[PP_AOP_BWD_WEIGHT];
    default: return r->kind_mean[PP_AOP_OPT];
    }
}

static double replay_zero_ns(void *ctx, int stage, int index, const pp_instr *in)
{
    (void)ctx;
    (void)stage;
    (void)index;
    (void)in;
    return 0.0;
}

static void replay_free(replay *r, int S)
{
    if (r->sc.instrs)
        for (int s = 0; s < S; s++)
            free(r->sc.instrs[s]);
    if (r->dur)
        for (int s = 0; s < S; s++)
            free(r->dur[s]);
    free(r->sc.instrs);
    free(r->sc.n_instrs);
    free(r->dur);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The micro-batch ids of the step's ops, sorted and distinct, into mbs (capacity n): the
 * replay numbers them 0 .. count-1, so its message table follows the micro-batches the step
 * really ran, not the largest id a trace states. */
static size_t distinct_mbs(const pp_aop *ops, size_t n, int32_t *mbs)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (ops[i].mb >= 0)
            mbs[k++] = ops[i].mb;
    if (k)
        qsort(mbs, k, sizeof *mbs, cmp_i32);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || mbs[i] != mbs[u - 1])
            mbs[u++] = mbs[i];
    return u;
}

/* Builds the replay from ops sorted by (stage, t0). Returns 0 when the data cannot form one. */
static int replay_build(replay *r, const pp_aop *ops, size_t n, int S)
{
    memset(r, 0, sizeof *r);
    r->sc.S = S;
    r->sc.kind = PP_SCHED_1F1B; /* not used by the simulator */
    if (n > INT32_MAX)
        return 0; /* a list longer than the schedule's int counts */
    int32_t *mbs = malloc((n ? n : 1) * sizeof *mbs);
    if (!mbs)
        return 0;
    /* The dense number of each id: by a table indexed by id when the ids are small next to the
     * step (every real step), else by sorting and binary search (distinct_mbs). Both number the
     * distinct ids in increasing order. */
    int32_t max_mb = -1;
    for (size_t i = 0; i < n; i++)
        max_mb = ops[i].mb > max_mb ? ops[i].mb : max_mb;
    int32_t *dense = NULL;
    size_t n_mbs = 0;
    if (max_mb >= 0 && (size_t)max_mb < 4 * n + 1024 &&
        (dense = malloc(((size_t)max_mb + 1) * sizeof *dense)) != NULL) {
        for (int32_t m = 0; m <= max_mb; m++)
            dense[m] = -1;
        for (size_t i = 0; i < n; i++)
            if (ops[i].mb >= 0)
                dense[ops[i].mb] = 0;
        for (int32_t m = 0; m <= max_mb; m++)
            if (dense[m] == 0)
                dense[m] = (int32_t)n_mbs++;
    } else {
        n_mbs = distinct_mbs(ops, n, mbs);
    }
    int v = 0;
    for (size_t i = 0; i < n; i++)
        if (ops[i].chunk >= v) /* bounded by check_bounds: < 64 or the announced v */
            v = ops[i].chunk + 1;
    r->sc.M = n_mbs > 0 ? (int)n_mbs : 1;
    r->sc.v = v > 0 ? v : 1;
    r->sc.n_instrs = calloc((size_t)S, sizeof(int));
    r->sc.instrs = calloc((size_t)S, sizeof(pp_instr *));
    r->dur = calloc((size_t)S, sizeof(double *));
    if (!r->sc.n_instrs || !r->sc.instrs || !r->dur) {
        free(mbs);
        free(dense);
        return 0;
    }
    int ok = 1;
    size_t i = 0;
    for (int s = 0; s < S; s++) {
        size_t j = i;
        while (j < n && ops[j].stage == s)
            j++;
        size_t cnt = j - i;
        r->sc.instrs[s] = calloc(cnt + 1, sizeof(pp_instr));
        r->dur[s] = calloc(cnt + 1, sizeof(double));
        if (!r->sc.instrs[s] || !r->dur[s]) {
            ok = 0;
            break;
        }
        for (size_t k = 0; k < cnt && ok; k++) {
            const pp_aop *o = &ops[i + k];
            pp_instr *in = &r->sc.instrs[s][k];
            in->op = op_of(o->kind);
            int opt = o->kind == PP_AOP_OPT;
            int32_t dense_mb = -1;
            if (o->mb >= 0 && dense) {
                dense_mb = dense[o->mb];
            } else if (o->mb >= 0) {
                const int32_t *m = bsearch(&o->mb, mbs, n_mbs, sizeof *mbs, cmp_i32);
                dense_mb = m ? (int32_t)(m - mbs) : -1;
            }
            if (!opt && dense_mb < 0)
                ok = 0; /* a micro-batch op without its micro-batch */
            if (!pp_aop_is_compute((pp_aop_kind)o->kind) && (o->peer < 0 || o->peer >= S))
                ok = 0;
            in->mb = opt ? -1 : dense_mb;
            in->chunk = (int16_t)(opt ? -1 : (o->chunk >= 0 ? o->chunk : 0));
            in->peer = (int16_t)(pp_aop_is_compute((pp_aop_kind)o->kind) ? -1 : o->peer);
            r->dur[s][k] = (double)(o->t1 - o->t0);
        }
        r->sc.n_instrs[s] = (int)cnt;
        i = j;
    }
    free(mbs);
    free(dense);
    return ok;
}

/* Walks the critical path of a replay back from its last instruction and returns the stage
 * holding the largest share of compute time on it. */
static int critical_culprit(const replay *r, const pp_sim_result *res, double *share)
{
    const pp_schedule *sc = &r->sc;
    int S = sc->S;
    double *on_path = calloc((size_t)S, sizeof(double));
    if (!on_path)
        return -1;
    int s = 0;
    for (int k = 1; k < S; k++)
        if (res->end_ns[k] > res->end_ns[s])
            s = k;
    int idx = sc->n_instrs[s] - 1;
    size_t guard = 0, total = 0;
    for (int k = 0; k < S; k++)
        total += (size_t)sc->n_instrs[k];
    while (s >= 0 && idx >= 0 && guard++ <= total + 8) {
        const pp_instr *in = &sc->instrs[s][idx];
        double st0 = res->start_ns[s][idx], st1 = res->finish_ns[s][idx];
        if (in->op == PP_OP_OPT_STEP) {
            on_path[s] += st1 - st0;
            /* the barrier: continue on the stage that arrived last */
            int late = s;
            double arr = -1;
            for (int k = 0; k < S; k++) {
                int last = sc->n_instrs[k] - 1;
                while (last >= 0 && sc->instrs[k][last].op != PP_OP_OPT_STEP)
                    last--;
                if (last < 1)
                    continue;
                double a = res->finish_ns[k][last - 1];
                if (a > arr) {
                    arr = a;
                    late = k;
                }
            }
            int last = sc->n_instrs[late] - 1;
            while (last >= 0 && sc->instrs[late][last].op != PP_OP_OPT_STEP)
                last--;
            s = late;
            idx = last - 1;
            continue;
        }
        if ((in->op == PP_OP_RECV_ACT || in->op == PP_OP_RECV_GRAD) && st1 > st0) {
            /* it waited: the path goes through the matching send */
            int grad = in->op == PP_OP_RECV_GRAD;
            int piece = pp_schedule_piece(sc, s, in->chunk);
            int peer = in->peer, found = -1;
            for (int k = 0; k < sc->n_instrs[peer] && found < 0; k++) {
                const pp_instr *x = &sc->instrs[peer][k];
                if (x->op != (grad ? PP_OP_SEND_GRAD : PP_OP_SEND_ACT) || x->mb != in->mb)
                    continue;
                int xp = pp_schedule_piece(sc, peer, x->chunk);
                if ((grad ? xp - 1 : xp + 1) == piece)
                    found = k;
            }
            if (found < 0)
                break;
            s = peer;
            idx = found - 1;
            continue;
        }
        if (in->op == PP_OP_FWD || in->op == PP_OP_BWD || in->op == PP_OP_BWD_INPUT ||
            in->op == PP_OP_BWD_WEIGHT)
            on_path[s] += st1 - st0;
        idx--;
    }
    int best = -1;
    double sum = 0;
    for (int k = 0; k < S; k++) {
        sum += on_path[k];
        if (best < 0 || on_path[k] > on_path[best])
            best = k;
    }
    *share = sum > 0 && best >= 0 ? on_path[best] / sum : 0;
    free(on_path);
    return best;
}

static link_acc *link_get(state *st, int src, int dst, int grad)
{
    link_acc *l = st->links.data;
    for (size_t i = 0; i < st->links.n; i++)
        if (l[i].l.src == src && l[i].l.dst == dst && l[i].l.grad == grad)
            return &l[i];
    link_acc *n = vec_push(&st->links);
    if (!n)
        return NULL;
    n->used = 1;
    n->l.src = src;
    n->l.dst = dst;
    n->l.grad = grad;
    return n;
}

/* A send or receive of a step, keyed by the link it travels: (grad, src, dst). */
typedef struct xfer {
    int32_t grad, src, dst;
    int32_t recv;
    size_t index; /* in the step's ops */
} xfer;

/* By link, then sends before receives; the sort is stable, so each group stays in op order. */
static inline int xfer_less(const xfer *x, const xfer *y)
{
    if (x->grad != y->grad)
        return x->grad < y->grad;
    if (x->src != y->src)
        return x->src < y->src;
    if (x->dst != y->dst)
        return x->dst < y->dst;
    return x->recv < y->recv;
}

DEFINE_STABLE_SORT(sort_xfers, xfer, xfer_less)

/* For each send of ops, the index of its receive (SIZE_MAX when none) in st->match: links are
 * FIFO (docs/schedules.md), so the k-th send on (src, dst, kind) meets the k-th receive there.
 * Sorting the transfers by link keeps this O(n log n); scanning the step for every send was
 * O(n^2) and the analyzer's largest cost on long steps. Returns 0 when out of memory. */
static int match_transfers(state *st, const pp_aop *ops, size_t n)
{
    st->xfers.n = st->match.n = 0;
    for (size_t i = 0; i < n; i++) {
        if (!vec_push(&st->match))
            return 0;
        ((size_t *)st->match.data)[i] = SIZE_MAX;
        const pp_aop *o = &ops[i];
        int send = o->kind == PP_AOP_SEND_ACT || o->kind == PP_AOP_SEND_GRAD;
        int recv = o->kind == PP_AOP_RECV_ACT || o->kind == PP_AOP_RECV_GRAD;
        if (!send && !recv)
            continue;
        xfer *x = vec_push(&st->xfers);
        if (!x)
            return 0;
        x->grad = o->kind == PP_AOP_SEND_GRAD || o->kind == PP_AOP_RECV_GRAD;
        x->src = send ? o->stage : o->peer;
        x->dst = send ? o->peer : o->stage;
        x->recv = recv;
        x->index = i;
    }
    xfer *x = st->xfers.data;
    size_t nx = st->xfers.n, *match = st->match.data;
    if (nx) {
        xfer *tmp = sort_scratch(st, nx * sizeof *x);
        if (!tmp)
            return 0;
        sort_xfers(x, nx, tmp);
    }
    /* per link: its sends in op order, then its receives in op order */
    for (size_t g = 0; g < nx;) {
        size_t r = g;
        while (r < nx && !x[r].recv && x[r].grad == x[g].grad && x[r].src == x[g].src &&
               x[r].dst == x[g].dst)
            r++;
        size_t e = r;
        while (e < nx && x[e].grad == x[g].grad && x[e].src == x[g].src && x[e].dst == x[g].dst)
            e++;
        for (size_t k = 0; g + k < r && r + k < e; k++)
            match[x[g + k].index] = x[r + k].index;
        g = e;
    }
    return 1;
}

/* Per-link counts, bytes and times of the step's transfers. */
static void step_links(state *st, const pp_aop *ops, size_t n)
{
    if (!match_transfers(st, ops, n))
        return;
    const size_t *match = st->match.data;
    for (size_t i = 0; i < n; i++) {
        const pp_aop *s = &ops[i];
        if (s->kind != PP_AOP_SEND_ACT && s->kind != PP_AOP_SEND_GRAD)
            continue;
        int grad = s->kind == PP_AOP_SEND_GRAD;
        link_acc *l = link_get(st, s->stage, s->peer, grad);
        if (!l)
            return;
        l->l.messages++;
        l->l.bytes += s->bytes;
        l->l.send_ns += (double)(s->t1 - s->t0);
        if (match[i] == SIZE_MAX)
            continue;
        const pp_aop *r = &ops[match[i]];
        double wait = (double)(r->t1 - r->t0);
        l->l.wait_ns += wait;
        /* Arrival is observed only when the receive overlaps the send: the receiver was
         * there before the sender had handed the data over, so the data cannot have been
         * waiting for it. In flight: from the later of the two starts to the receive's end
         * (docs/metrics.md). A receive that began after the send ended found its data waiting
         * (a queue, a mailbox): its length is the receiver's own cost, not the link's. */
        if (r->t0 <= s->t1 && r->t1 > s->t0 && r->t1 > r->t0) {
            double t = (double)(r->t1 - (r->t0 > s->t0 ? r->t0 : s->t0));
            l->l.timed++;
            l->l.transfer_ns += t;
            series_add(&l->lat, t);
            series_add(&l->bw, (double)s->bytes / t);
        }
    }
}

static void keep_ops(state *st, bucket *b)
{
    int keep_last = !st->o->keep_lo && !st->o->keep_hi;
    int in_range = b->step >= st->o->keep_lo && (!st->o->keep_hi || b->step <= st->o->keep_hi);
    if (keep_last) {
        st->kept_ops.n = 0;
        st->kept_layer_ops.n = 0;
        st->kept_ar_ops.n = 0;
        st->kept_step = b->step;
    } else if (!in_range) {
        return;
    }
    for (size_t i = 0; i < b->ops.n; i++) {
        pp_aop *d = vec_push(&st->kept_ops);
        if (d)
            *d = ((pp_aop *)b->ops.data)[i];
    }
    for (size_t i = 0; i < b->layer_ops.n; i++) {
        pp_aop *d = vec_push(&st->kept_layer_ops);
        if (d)
            *d = ((pp_aop *)b->layer_ops.data)[i];
    }
    /* data-parallel all-reduce ranges (kind PP_AOP_OPT is a placeholder: they are kept apart) */
    for (size_t i = 0; i < b->allred.n; i++) {
        const ar_range *r = &((const ar_range *)b->allred.data)[i];
        pp_aop *d = vec_push(&st->kept_ar_ops);
        if (d)
            *d = (pp_aop){.kind = PP_AOP_OPT, .stage = r->stage, .mb = -1, .chunk = -1,
                          .peer = -1, .bytes = r->bytes, .step = b->step, .t0 = r->t0,
                          .t1 = r->t1, .rank = r->rank};
    }
    if (!st->a->kept_lo || b->step < st->a->kept_lo)
        st->a->kept_lo = b->step;
    if (b->step > st->a->kept_hi)
        st->a->kept_hi = b->step;
    if (keep_last)
        st->a->kept_lo = st->a->kept_hi = b->step;
}

/* Each stage's start and end of b's step into t0[S], t1[S] (UINT64_MAX / 0: no step range of
 * that stage). */
static void stage_bounds(const bucket *b, uint64_t *t0, uint64_t *t1, int S)
{
    for (int s = 0; s < S; s++) {
        t0[s] = UINT64_MAX;
        t1[s] = 0;
    }
    const step_range *rg = b->ranges.data;
    for (size_t i = 0; i < b->ranges.n; i++) {
        int s = rg[i].stage;
        if (s < 0 || s >= S)
            continue;
        t0[s] = rg[i].t0 < t0[s] ? rg[i].t0 : t0[s];
        t1[s] = rg[i].t1 > t1[s] ? rg[i].t1 : t1[s];
    }
}

static const bucket *bucket_find(const state *st, int64_t step)
{
    const bucket *b = st->buckets.data;
    for (size_t i = 0; i < st->buckets.n; i++)
        if (b[i].used && b[i].step == step)
            return &b[i];
    return NULL;
}

/* The mean over stages of b - a where both are known and b > a (0 when none). */
static double mean_spacing(const uint64_t *a, const uint64_t *b, int S, uint64_t none, int *n)
{
    double sum = 0;
    *n = 0;
    for (int s = 0; s < S; s++)
        if (a[s] != none && b[s] != none && b[s] > a[s]) {
            sum += (double)(b[s] - a[s]);
            (*n)++;
        }
    return *n ? sum / *n : 0.0;
}

/* The pipeline's period at b's step (docs/metrics.md): the mean over stages of the spacing of
 * a stage's step starts, from this step to the next; for the last step of the traces (no next
 * start), the spacing of the stage's step ends, from the previous step to this one; the step's
 * window when neither is known (a lone step). A job without a barrier before its optimizer step
 * runs its stages' step ranges into each other, so their union is longer than a step takes.
 * bd[4 S]: b's starts and ends (filled by the caller), then scratch. */
static double step_period_ns(const state *st, const bucket *b, uint64_t *bd, int S,
                             double window_ns)
{
    int n = 0;
    double p = 0;
    const bucket *nb = b->step < INT64_MAX ? bucket_find(st, b->step + 1) : NULL;
    if (nb) {
        stage_bounds(nb, bd + 2 * S, bd + 3 * S, S);
        p = mean_spacing(bd, bd + 2 * S, S, UINT64_MAX, &n);
    }
    if (!n && st->prev_step >= 0 && st->prev_step == b->step - 1 && st->cap_prev >= S)
        p = mean_spacing(st->prev_bound + S, bd + S, S, 0, &n);
    return n ? p : window_ns;
}

/* Keeps b's stage starts and ends for the next step's period (a step with no ranges forgets
 * them). */
static void remember_bounds(state *st, const uint64_t *bd, int S, int64_t step)
{
    st->prev_step = -1;
    if (!bd || S <= 0)
        return;
    if (S != st->cap_prev) {
        uint64_t *m = realloc(st->prev_bound, sizeof *m * 2 * (size_t)S);
        if (!m)
            return;
        st->prev_bound = m;
        st->cap_prev = S;
    }
    memcpy(st->prev_bound, bd, sizeof *bd * 2 * (size_t)S);
    st->prev_step = step;
}

static void finalize(state *st, bucket *b)
{
    pp_analysis *a = st->a;
    int S = st->S_cfg > st->S_seen ? st->S_cfg : st->S_seen;
    uint64_t *bd = NULL; /* [4 S]: the stages' starts and ends of this step, scratch */
    if (b->step > st->last_finalized)
        st->last_finalized = b->step;
    if (b->ranges.n && S > 0 && (bd = malloc(4 * sizeof *bd * (size_t)S)) != NULL)
        stage_bounds(b, bd, bd + S, S);
    if (!step_wanted(st, b->step) || b->ranges.n == 0 || S <= 0 || !bd)
        goto done;
    if (a->warmup_skipped < st->o->warmup) {
        a->warmup_skipped++;
        goto done;
    }
    const step_range *rg = b->ranges.data;
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (size_t i = 0; i < b->ranges.n; i++) {
        t0 = rg[i].t0 < t0 ? rg[i].t0 : t0;
        t1 = rg[i].t1 > t1 ? rg[i].t1 : t1;
    }
    if (t1 <= t0)
        goto done;
    pp_aop *ops = b->ops.data;
    size_t n = b->ops.n;
    pp_aop *tmp = n ? sort_scratch(st, n * sizeof *ops) : NULL;
    if (n && !tmp)
        goto done;
    if (n)
        sort_ops(ops, n, tmp, S);
    pp_astep *sp = vec_push(&st->steps);
    if (!sp)
        goto done;
    sp->step = b->step;
    sp->t0_ns = (double)t0;
    sp->window_ns = (double)(t1 - t0);
    sp->step_ns = step_period_ns(st, b, bd, S, sp->window_ns);
    sp->culprit = -1;
    sp->stage = calloc((size_t)S, sizeof(pp_stage_step));
    int *sp_S = vec_push(&st->steps_S);
    if (!sp->stage || !sp_S) {
        free(sp->stage);
        st->steps.n--; /* not a step without its stages */
        if (sp_S)
            st->steps_S.n--;
        goto done;
    }
    *sp_S = S;
    double kind_sum[PP_AOP_COUNT] = {0}, kind_n[PP_AOP_COUNT] = {0};
    int *fwd_n = calloc((size_t)S, sizeof(int)), *bwd_n = calloc((size_t)S, sizeof(int));
    if (!fwd_n || !bwd_n) {
        free(fwd_n);
        free(bwd_n);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const pp_aop *o = &ops[i];
        if (o->stage < 0 || o->stage >= S || !ensure_stage(st, o->stage))
            continue;
        double d = (double)(o->t1 - o->t0);
        stage_acc *sa = &((stage_acc *)st->stage_acc.data)[o->stage];
        switch (o->kind) {
        case PP_AOP_FWD: series_add(&sa->fwd, d); break;
        case PP_AOP_BWD: series_add(&sa->bwd, d); break;
        case PP_AOP_BWD_INPUT: series_add(&sa->bwd_in, d); break;
        case PP_AOP_BWD_WEIGHT: series_add(&sa->bwd_w, d); break;
        case PP_AOP_OPT: series_add(&sa->opt, d); break;
        default: break;
        }
        if (pp_aop_is_compute((pp_aop_kind)o->kind)) {
            sp->stage[o->stage].busy_ns += d;
            kind_sum[o->kind] += d;
            kind_n[o->kind] += 1;
        }
        if (o->kind == PP_AOP_FWD) {
            sp->stage[o->stage].fwd_ns += d;
            fwd_n[o->stage]++;
        } else if (o->kind == PP_AOP_BWD || o->kind == PP_AOP_BWD_INPUT) {
            sp->stage[o->stage].bwd_ns += d;
            bwd_n[o->stage]++;
        } else if (o->kind == PP_AOP_BWD_WEIGHT) {
            sp->stage[o->stage].bwd_ns += d; /* joins its input half */
        }
    }
    for (int s = 0; s < S; s++) {
        if (fwd_n[s])
            sp->stage[s].fwd_ns /= fwd_n[s];
        if (bwd_n[s])
            sp->stage[s].bwd_ns /= bwd_n[s];
    }
    free(fwd_n);
    free(bwd_n);
    /* data-parallel all-reduce: communication outside the pipeline's schedule */
    const ar_range *ar = b->allred.data;
    double *ar_bytes = calloc((size_t)S, sizeof(double));
    for (size_t i = 0; i < b->allred.n; i++) {
        if (ar[i].stage < 0 || ar[i].stage >= S || ar[i].t1 < ar[i].t0)
            continue;
        sp->stage[ar[i].stage].allreduce_ns += (double)(ar[i].t1 - ar[i].t0);
        if (ar_bytes)
            ar_bytes[ar[i].stage] += (double)ar[i].bytes;
    }
    for (int s = 0; s < S && b->allred.n; s++) {
        stage_acc *sa = &((stage_acc *)st->stage_acc.data)[s];
        series_add(&sa->allred, sp->stage[s].allreduce_ns);
        sa->allred_bytes += ar_bytes ? ar_bytes[s] : 0;
    }
    free(ar_bytes);
    double idle_sum = 0, busy_max = 0, busy_sum = 0;
    for (int s = 0; s < S; s++) {
        pp_stage_step *ss = &sp->stage[s];
        ss->idle_ns = sp->step_ns - ss->busy_ns;
        ss->bubble_ratio = ss->idle_ns / sp->step_ns;
        idle_sum += ss->idle_ns;
        busy_sum += ss->busy_ns;
        busy_max = ss->busy_ns > busy_max ? ss->busy_ns : busy_max;
    }
    sp->bubble_ratio = idle_sum / (S * sp->step_ns);
    st->bubble_sum += sp->bubble_ratio;
    if (busy_sum > 0)
        st->imbalance_sum += busy_max / (busy_sum / S);
    series_add(&st->step_series, sp->step_ns);

    /* The decomposition: replay the step's own lists (docs/metrics.md). */
    replay r;
    if (replay_build(&r, ops, n, S)) {
        double means[PP_AOP_COUNT];
        for (int k = 0; k < PP_AOP_COUNT; k++)
            means[k] = kind_n[k] > 0 ? kind_sum[k] / kind_n[k] : 0.0;
        r.kind_mean = means;
        pp_sim_costs c = {replay_op_ns, replay_zero_ns, &r};
        pp_sim_result nocomm, bal;
        r.balanced = 0;
        int ok = pp_sim_run(&r.sc, &c, &nocomm) == PP_OK;
        if (ok) {
            r.balanced = 1;
            if (pp_sim_run(&r.sc, &c, &bal) == PP_OK) {
                for (int s = 0; s < S; s++) {
                    pp_stage_step *ss = &sp->stage[s];
                    double idle_nocomm = nocomm.step_ns - ss->busy_ns;
                    double idle_bal = bal.step_ns - bal.busy_ns[s];
                    ss->fill_drain_ns = idle_bal;
                    ss->imbalance_ns = idle_nocomm - idle_bal;
                    ss->transfer_ns = ss->idle_ns - idle_nocomm - ss->allreduce_ns;
                }
                sp->decomposed = 1;
                r.balanced = 0;
                sp->culprit = critical_culprit(&r, &nocomm, &sp->critical_share);
                st->n_decomp++;
                pp_sim_result_free(&bal);
            }
            pp_sim_result_free(&nocomm);
        }
        r.kind_mean = NULL;
    }
    replay_free(&r, S);
    if (!sp->decomposed && !strstr(a->warnings, "could not be replayed"))
        warn(a, "step %lld: its ranges could not be replayed (partial data?); no bubble "
                "decomposition for it",
             (long long)b->step);
    for (int s = 0; s < S; s++) {
        stage_acc *sa = &((stage_acc *)st->stage_acc.data)[s];
        pp_stage_step *ss = &sp->stage[s];
        sa->n++;
        sa->busy += ss->busy_ns;
        sa->idle += ss->idle_ns;
        sa->fill += ss->fill_drain_ns;
        sa->imb += ss->imbalance_ns;
        sa->xfer += ss->transfer_ns;
        sa->ar += ss->allreduce_ns;
        if (sp->culprit >= 0) {
            sa->culprit_votes.elem = sizeof(int);
            while (sa->culprit_votes.n <= (size_t)sp->culprit)
                vec_push(&sa->culprit_votes);
            if (sa->culprit_votes.n > (size_t)sp->culprit)
                ((int *)sa->culprit_votes.data)[sp->culprit]++;
        }
    }
    step_links(st, ops, n);
    /* layers */
    const pp_aop *lo = b->layer_ops.data;
    for (size_t i = 0; i < b->layer_ops.n; i++) {
        int L = lo[i].chunk; /* layer index */
        if (L < 0 || L > 1 << 20)
            continue;
        while (st->layers.n <= (size_t)L)
            if (!vec_push(&st->layers))
                break;
        if (st->layers.n <= (size_t)L)
            continue;
        layer_acc *la = &((layer_acc *)st->layers.data)[L];
        la->used = 1;
        double d = (double)(lo[i].t1 - lo[i].t0);
        if (lo[i].kind == PP_AOP_FWD)
            series_add(&la->fwd, d);
        else if (lo[i].kind == PP_AOP_BWD)
            series_add(&la->bwd, d);
        else
            series_add(&la->bwdw, d);
    }
    keep_ops(st, b);
done:
    remember_bounds(st, bd, S, b->step);
    free(bd);
    b->ops.n = b->layer_ops.n = b->ranges.n = b->allred.n = 0;
    b->used = 0;
}

/* Finalizes every step that all stages have moved past (all of them at the end). */
static void finalize_ready(state *st, int at_end)
{
    int S = st->S_cfg > st->S_seen ? st->S_cfg : st->S_seen;
    int64_t ready = INT64_MAX;
    if (!at_end) {
        if (S <= 0)
            return;
        for (int s = 0; s < S; s++) {
            int64_t m = s < st->cap_stages ? st->stage_max_step[s] : -1;
            ready = m < ready ? m : ready;
        }
        /* Without the config mark the set of stages may still grow: keep one more step. */
        ready -= st->S_cfg ? 1 : 2;
    }
    for (;;) {
        bucket *b = st->buckets.data, *oldest = NULL;
        for (size_t i = 0; i < st->buckets.n; i++)
            if (b[i].used && b[i].step <= ready && (!oldest || b[i].step < oldest->step))
                oldest = &b[i];
        if (!oldest)
            break;
        finalize(st, oldest);
    }
}

/* ======================================================================================== */
/* Decoding ranges                                                                            */
/* ======================================================================================== */

const char *pp_aop_kind_name(pp_aop_kind k)
{
    static const char *const names[] = {"fwd",      "bwd",      "bwd_input", "bwd_weight",
                                        "opt_step", "send_act", "recv_act",  "send_grad",
                                        "recv_grad"};
    return (unsigned)k < PP_AOP_COUNT ? names[k] : "?";
}

int pp_aop_is_compute(pp_aop_kind k) { return k <= PP_AOP_OPT; }

/* The convention's kinds (pp_nvtx.h numbering) as decoded. */
enum {
    K_STEP = 0, K_FWD, K_BWD, K_BWD_INPUT, K_BWD_WEIGHT, K_SEND_ACT, K_RECV_ACT, K_SEND_GRAD,
    K_RECV_GRAD, K_OPT, K_LAYER_FWD, K_LAYER_BWD, K_LAYER_BWD_WEIGHT, K_ALLREDUCE, K_NONE = -1
};

static int cmp_far(const void *a, const void *b)
{
    uint32_t x = ((const far_string *)a)->id, y = ((const far_string *)b)->id;
    return (x > y) - (x < y);
}

static const char *str_of(file_state *f, uint32_t id)
{
    if (id == 0)
        return "";
    if (id < f->strings.n && ((char **)f->strings.data)[id])
        return ((char **)f->strings.data)[id];
    far_string key = {.id = id};
    const far_string *x = f->far_strings.n ? bsearch(&key, f->far_strings.data, f->far_strings.n,
                                                     sizeof key, cmp_far)
                                           : NULL;
    return x && x->s ? x->s : "";
}

/* Where string `id` is stored: the dense table while the id stays within four times the
 * strings defined (plus 4096: the capture library numbers them 1, 2, ...), else the sorted
 * far list. NULL when out of memory. */
static char **string_slot(file_state *f, uint32_t id)
{
    /* an id stored far before the table grew past it stays there */
    far_string key = {.id = id};
    far_string *fs = f->far_strings.data;
    size_t lo = 0, hi = f->far_strings.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (fs[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < f->far_strings.n && fs[lo].id == id)
        return &fs[lo].s;
    if (id < f->strings.n)
        return &((char **)f->strings.data)[id];
    if ((size_t)id < 4 * f->n_strings + 4096) {
        while (f->strings.n <= id)
            if (!vec_push(&f->strings))
                return NULL;
        return &((char **)f->strings.data)[id];
    }
    if (!vec_push(&f->far_strings))
        return NULL;
    fs = f->far_strings.data;
    memmove(&fs[lo + 1], &fs[lo], (f->far_strings.n - 1 - lo) * sizeof *fs);
    fs[lo] = key;
    return &fs[lo].s;
}

static uint64_t get_u(const uint8_t *p, size_t n, uint64_t off, int bytes)
{
    if (off > n || (uint64_t)bytes > n - off) /* off is the trace's schema offset: no wrap */
        return 0;
    uint64_t v = 0;
    memcpy(&v, p + off, (size_t)bytes);
    return v;
}

/* "<prefix><digits>": the number, saturated at INT64_MAX (strtoll's overflow value), so that
 * a number too large for any bound reads as too large, never as a smaller one. */
static int parse_int_after(const char *tok, const char *prefix, int64_t *out)
{
    size_t n = strlen(prefix);
    if (strncmp(tok, prefix, n) != 0 || !isdigit((unsigned char)tok[n]))
        return 0;
    char *end;
    long long v = strtoll(tok + n, &end, 10);
    if (*end && *end != ' ')
        return 0;
    *out = v;
    return 1;
}

/* The message grammar (fallback when no pipeprof.event payload is attached). */
static void decode_message(const char *msg, decoded *d)
{
    static const struct {
        const char *word;
        int kind;
    } words[] = {{"step", K_STEP},           {"fwd", K_FWD},           {"bwd", K_BWD},
                 {"bwd_input", K_BWD_INPUT}, {"bwd_weight", K_BWD_WEIGHT},
                 {"send_act", K_SEND_ACT},   {"recv_act", K_RECV_ACT}, {"send_grad", K_SEND_GRAD},
                 {"recv_grad", K_RECV_GRAD}, {"opt_step", K_OPT},
                 {"allreduce", K_ALLREDUCE}};
    char buf[160];
    snprintf(buf, sizeof buf, "%s", msg);
    char *tok[8];
    int nt = 0;
    for (char *p = strtok(buf, " "); p && nt < 8; p = strtok(NULL, " "))
        tok[nt++] = p;
    if (!nt)
        return;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcmp(tok[0], words[i].word) == 0)
            d->kind = words[i].kind;
    if (d->kind == K_NONE && nt >= 2) {
        /* "<layer> fwd" */
        if (strcmp(tok[1], "fwd") == 0)
            d->kind = K_LAYER_FWD;
        else if (strcmp(tok[1], "bwd") == 0)
            d->kind = K_LAYER_BWD;
        else if (strcmp(tok[1], "bwd_weight") == 0)
            d->kind = K_LAYER_BWD_WEIGHT;
        int64_t li;
        if (d->kind != K_NONE && parse_int_after(tok[0], "layer", &li))
            d->layer = li;
        return;
    }
    for (int i = 1; i < nt; i++) {
        int64_t x;
        if (parse_int_after(tok[i], "mb", &x))
            d->mb = x;
        else if (parse_int_after(tok[i], "c", &x))
            d->chunk = x;
        else if (parse_int_after(tok[i], "peer", &x))
            d->peer = x;
    }
}

/* decode_message of string `id`, from the file's cache; d holds decode's defaults. Ids past
 * MSG_CACHE_IDS are parsed every time, so a hostile id cannot make the cache large. */
enum { MSG_CACHE_IDS = 1 << 16 };

static void decode_message_id(file_state *f, uint32_t id, decoded *d)
{
    if (id == 0)
        return; /* "" : the grammar matches nothing */
    if (id >= f->strings.n || !((char **)f->strings.data)[id]) {
        const char *m = str_of(f, id); /* a far id (string_slot): parsed every time */
        if (*m)
            decode_message(m, d);
        return;
    }
    while (f->msgs.n <= id && id < MSG_CACHE_IDS)
        if (!vec_push(&f->msgs))
            break;
    if (f->msgs.n <= id) {
        decode_message(str_of(f, id), d);
        return;
    }
    msg_info *m = &((msg_info *)f->msgs.data)[id];
    if (!m->valid) {
        decoded x = *d;
        decode_message(str_of(f, id), &x);
        m->kind = x.kind;
        m->mb = x.mb;
        m->chunk = x.chunk;
        m->layer = x.layer;
        m->peer = x.peer;
        m->valid = 1;
    }
    d->kind = m->kind;
    d->mb = m->mb;
    d->chunk = m->chunk;
    d->layer = m->layer;
    d->peer = m->peer;
}

/* Checks a decoded range against the bounds of pp_analyzer.h (the configuration mark's S, M, v
 * and layers where it stated them). -1 is "unset" for every field. On a broken bound the
 * range becomes K_NONE, so no caller uses any of its values, and d->oob says which bound. */
static void check_bounds(const state *st, decoded *d)
{
    if (d->kind == K_NONE)
        return;
    int64_t S = st->S_cfg > 0 ? st->S_cfg : PP_ANALYSIS_MAX_STAGES;
    int64_t M = st->M_cfg > 0 ? st->M_cfg : PP_ANALYSIS_MAX_MB;
    int64_t v = st->v_cfg > 0 ? st->v_cfg : PP_ANALYSIS_MAX_CHUNKS;
    int64_t L = st->L_cfg > 0 ? st->L_cfg : PP_ANALYSIS_MAX_LAYERS;
    if (d->stage < -1 || d->stage >= S)
        d->oob = st->S_cfg > 0 ? "stage >= the announced S" : "stage outside [0, 4096)";
    else if (d->peer < -1 || d->peer >= S)
        d->oob = st->S_cfg > 0 ? "peer >= the announced S" : "peer outside [0, 4096)";
    else if (d->mb < -1 || d->mb >= M)
        d->oob = st->M_cfg > 0 ? "micro-batch >= the announced M"
                               : "micro-batch outside [0, 2^20)";
    else if (d->chunk < -1 || d->chunk >= v)
        d->oob = st->v_cfg > 0 ? "chunk >= the announced v" : "chunk outside [0, 64)";
    else if (d->layer < -1 || d->layer >= L)
        d->oob = st->L_cfg > 0 ? "layer >= the announced layers"
                               : "layer outside [0, 2^16)";
    else if (d->step < -1 || d->step > PP_ANALYSIS_MAX_STEP)
        d->oob = "step outside [0, 2^48]";
    if (d->oob)
        d->kind = K_NONE;
}

/* A 32-bit signed field of the extended payload, widened. */
static int64_t get_i32(const uint8_t *p, size_t n, uint64_t off)
{
    return (int64_t)(int32_t)(uint32_t)get_u(p, n, off, 4);
}

static void decode(const state *st, file_state *f, const open_range *o, decoded *d)
{
    memset(d, 0, sizeof *d);
    d->kind = K_NONE;
    d->step = -1;
    d->stage = d->mb = d->chunk = d->layer = d->peer = -1;
    if (o->has_ext && f->schema_ok && f->default_layout && o->ext_bytes >= 40) {
        /* the convention's layout (docs/nvtx-convention.md), as every libpprof capture has it:
         * the fields at fixed offsets, without an offset check per field (values: check_bounds) */
        struct {
            uint32_t kind;
            int32_t stage, mb, chunk, layer, peer;
            uint64_t bytes;
            int64_t step;
        } e;
        _Static_assert(sizeof e == 40, "pipeprof.event is 40 bytes");
        memcpy(&e, o->ext, sizeof e);
        d->kind = e.kind > K_ALLREDUCE ? K_NONE : (int)e.kind;
        d->stage = e.stage;
        d->mb = e.mb;
        d->chunk = e.chunk;
        d->layer = e.layer;
        d->peer = e.peer;
        d->bytes = e.bytes;
        d->has_bytes = 1;
        d->step = e.step;
        check_bounds(st, d);
        return;
    }
    if (o->has_ext && f->schema_ok) {
        const uint8_t *p = o->ext;
        size_t n = o->ext_bytes;
        uint32_t kind = (uint32_t)get_u(p, n, f->off[0], 4);
        d->kind = kind > K_ALLREDUCE ? K_NONE : (int)kind; /* a later kind: not ours to read */
        d->stage = get_i32(p, n, f->off[1]);
        d->mb = get_i32(p, n, f->off[2]);
        d->chunk = get_i32(p, n, f->off[3]);
        d->layer = get_i32(p, n, f->off[4]);
        d->peer = get_i32(p, n, f->off[5]);
        d->bytes = get_u(p, n, f->off[6], 8);
        d->has_bytes = 1;
        d->step = (int64_t)get_u(p, n, f->off[7], 8);
        check_bounds(st, d);
        return;
    }
    decode_message_id(f, o->message, d);
    /* the category is a uint32: stage = category - 1 computed wide (no overflow) */
    d->stage = o->category > 0 ? (int64_t)o->category - 1 : -1;
    int is_int = o->payload_type == 1 || o->payload_type == 2 || o->payload_type == 4 ||
                 o->payload_type == 5;
    if (is_int) {
        /* an unsigned 64-bit payload past INT64_MAX reads as INT64_MAX: too large, not
         * negative */
        int64_t x = o->payload > (uint64_t)INT64_MAX && o->payload_type == 1
                        ? INT64_MAX
                        : (int64_t)o->payload;
        if (o->payload_type == 4)
            x = (uint32_t)o->payload;
        if (o->payload_type == 5)
            x = (int32_t)o->payload;
        switch (d->kind) {
        case K_STEP: d->step = x; break;
        case K_FWD: case K_BWD: case K_BWD_INPUT: case K_BWD_WEIGHT:
        case K_LAYER_FWD: case K_LAYER_BWD: case K_LAYER_BWD_WEIGHT: d->mb = x; break;
        case K_SEND_ACT: case K_RECV_ACT: case K_SEND_GRAD: case K_RECV_GRAD: case K_ALLREDUCE:
            d->bytes = o->payload_type == 1 ? o->payload : (uint64_t)x;
            d->has_bytes = 1;
            break;
        default: break;
        }
    }
    check_bounds(st, d);
}

static thread_state *thread_of(file_state *f, uint32_t tid)
{
    thread_state *t = f->threads.data;
    for (size_t i = 0; i < f->threads.n; i++)
        if (t[i].tid == tid)
            return &t[i];
    thread_state *n = vec_push(&f->threads);
    if (!n)
        return NULL;
    n->tid = tid;
    n->stack.elem = sizeof(open_range);
    n->cur_step = -1;
    n->cur_stage = -1;
    n->cur_mb = -1;
    return n;
}

/* "layer index=3 name=block2 param_bytes=197376 activation_bytes=262144" */
static void on_layer_mark(state *st, const char *msg)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", msg + 5);
    long long index = -1;
    unsigned long long params = 0, acts = 0;
    char name[48] = "";
    for (char *p = strtok(buf, " "); p; p = strtok(NULL, " ")) {
        char *eq = strchr(p, '=');
        if (!eq)
            continue;
        *eq = '\0';
        const char *k = p, *v = eq + 1;
        if (strcmp(k, "index") == 0)
            index = strtoll(v, NULL, 10);
        else if (strcmp(k, "name") == 0)
            snprintf(name, sizeof name, "%s", v);
        else if (strcmp(k, "param_bytes") == 0)
            params = strtoull(v, NULL, 10);
        else if (strcmp(k, "activation_bytes") == 0)
            acts = strtoull(v, NULL, 10);
    }
    if (index < 0 || index >= 1 << 20)
        return;
    while (st->layers.n <= (size_t)index)
        if (!vec_push(&st->layers))
            return;
    layer_acc *la = &((layer_acc *)st->layers.data)[index];
    la->has_info = 1;
    la->param_bytes = params;
    la->activation_bytes = acts;
    if (name[0])
        snprintf(la->name, sizeof la->name, "%s", name);
}

static void on_clocksync(state *st, file_state *f, const char *msg, uint64_t ts)
{
    char dir[8];
    int peer, phase, seq;
    if (!st->collect || f->rank < 0 ||
        sscanf(msg, "clocksync %7s peer=%d phase=%d seq=%d", dir, &peer, &phase, &seq) != 4)
        return;
    int recv = strcmp(dir, "recv") == 0;
    if (!recv && strcmp(dir, "send") != 0)
        return;
    sync_mark *m = vec_push(&st->syncs);
    if (m)
        *m = (sync_mark){.src = recv ? peer : f->rank, .dst = recv ? f->rank : peer,
                         .phase = phase, .seq = seq, .recv = recv, .file = f->index, .ts = ts};
}

/* A whole-number config value in [lo, max] (lo: 0 for replica, else 1); a value outside, or
 * not a number, is warned about once per key and not used. */
static int config_int(pp_analysis *a, const char *key, const char *v, int64_t max, int64_t *out)
{
    int64_t lo = strcmp(key, "replica") == 0 ? 0 : 1;
    if (pp_parse_i64(v, key, lo, max, out) == PP_OK)
        return 1;
    pp_error_clear();
    if (strcmp(v, "0") == 0)
        return 0; /* 0: unknown, as for the counts */
    char line[96];
    snprintf(line, sizeof line, "config mark: %s=", key);
    if (!strstr(a->warnings, line))
        warn(a, "config mark: %s=%.32s is not a whole number in [%lld, %lld]: ignored", key, v,
             (long long)lo, (long long)max);
    return 0;
}

/* samples_per_step / tokens_per_step: a finite count >= 0, else 0 (unknown). */
static double config_count(const char *v)
{
    double x = atof(v);
    return isfinite(x) && x >= 0 && x < 1e18 ? x : 0.0;
}

static void on_config(state *st, file_state *f, const char *msg, uint64_t ts)
{
    if (strncmp(msg, "clocksync ", 10) == 0) {
        on_clocksync(st, f, msg, ts);
        return;
    }
    if (strncmp(msg, "layer ", 6) == 0) {
        on_layer_mark(st, msg);
        return;
    }
    if (strncmp(msg, "config", 6) != 0)
        return;
    pp_analysis *a = st->a;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", msg + 6);
    for (char *p = strtok(buf, " "); p; p = strtok(NULL, " ")) {
        char *eq = strchr(p, '=');
        if (!eq)
            continue;
        *eq = '\0';
        const char *k = p, *v = eq + 1;
        /* numbers outside their bounds are not announced (docs/nvtx-convention.md) */
        int64_t x = 0;
        if (strcmp(k, "schedule") == 0)
            snprintf(a->schedule, sizeof a->schedule, "%s", v);
        else if (strcmp(k, "schedules") == 0 && strlen(v) < sizeof a->schedules)
            snprintf(a->schedules, sizeof a->schedules, "%s", v);
        else if (strcmp(k, "S") == 0)
            st->S_cfg = config_int(a, k, v, PP_ANALYSIS_MAX_STAGES, &x) ? (int)x : 0;
        else if (strcmp(k, "M") == 0)
            a->M = st->M_cfg = config_int(a, k, v, PP_ANALYSIS_MAX_MB, &x) ? (int)x : 0;
        else if (strcmp(k, "v") == 0)
            a->v = st->v_cfg = config_int(a, k, v, PP_ANALYSIS_MAX_CHUNKS, &x) ? (int)x : 0;
        else if (strcmp(k, "layers") == 0)
            st->L_cfg = config_int(a, k, v, PP_ANALYSIS_MAX_LAYERS, &x) ? (int)x : 0;
        else if (strcmp(k, "samples_per_step") == 0)
            a->samples_per_step = config_count(v);
        else if (strcmp(k, "tokens_per_step") == 0)
            a->tokens_per_step = config_count(v);
        else if (strcmp(k, "dp") == 0)
            a->dp = config_int(a, k, v, 1 << 20, &x) ? (int)x : a->dp;
        else if (strcmp(k, "replica") == 0)
            f->replica = config_int(a, k, v, (1 << 20) - 1, &x) ? (int)x : 0;
    }
    st->cfg_gen++; /* the bounds decode() checks may have changed */
    if (st->S_cfg)
        ensure_stage(st, st->S_cfg - 1);
}

/* GPU pass: a pipeline range the GPU work it launched is projected onto (the step numbering
 * as the host pass has it). */
static void gpu_range(state *st, file_state *f, thread_state *t, const decoded *d, uint64_t t0,
                      uint64_t t1)
{
    if (d->kind == K_STEP) {
        t->n_steps++; /* fallback numbering */
        return;
    }
    int64_t step = d->step >= 0 ? d->step : t->cur_step;
    if (step < 0 || !((d->kind >= K_FWD && d->kind <= K_OPT) || d->kind == K_ALLREDUCE))
        return;
    pp_gpu_op g = d->kind == K_FWD                            ? PP_GOP_FWD
                  : d->kind >= K_BWD && d->kind <= K_BWD_WEIGHT ? PP_GOP_BWD
                  : d->kind == K_OPT                           ? PP_GOP_OPT
                                                               : PP_GOP_COMM;
    pp_gpu_proj_range(st->gpu, f->index, t->tid, step, d->stage, g, t0, t1);
}

/* A closed range of file f on thread t, of the pipeprof domain; raw is decode() of it. */
/* Counts a pipeline range that broke a bound (check_bounds, or its end before its start) and
 * describes the first one in the warnings. */
static void note_out_of_bounds(state *st, file_state *f, const open_range *o, const char *why)
{
    if (st->a->ranges_out_of_bounds++ == 0)
        snprintf(st->oob_first, sizeof st->oob_first, "'%.60s' (category %u) in %.200s: %s",
                 str_of(f, o->message), o->category, f->info ? f->info->path : "?", why);
}

static void on_range(state *st, file_state *f, thread_state *t, const open_range *o,
                     uint64_t t1, const decoded *raw)
{
    decoded d = *raw;
    if (!d.oob && d.kind != K_NONE && t1 < o->t0)
        d.oob = "it ends before it starts";
    if (d.oob) {
        if (!st->collect)
            note_out_of_bounds(st, f, o, d.oob);
        return;
    }
    if (d.kind == K_NONE)
        return;
    if (d.stage < 0)
        d.stage = t->cur_stage;
    if (d.stage < 0 || !ensure_stage(st, d.stage))
        return;
    if (f->min_stage < 0 || d.stage < f->min_stage)
        f->min_stage = d.stage;
    /* onto the reference clock (identity unless this process's clock was estimated) */
    uint64_t t0 = pp_clock_to_ref(&f->clk, o->t0);
    t1 = pp_clock_to_ref(&f->clk, t1);
    /* Data-parallel replicas run the same pipeline: one of them is analyzed (the others' clocks
     * are still aligned, from their own transfers, in the clock pass). */
    if (f->replica != st->o->replica && !st->collect)
        return;
    if (st->gpu_pass) {
        gpu_range(st, f, t, &d, t0, t1);
        return;
    }
    /* the stage of the ranges the GPU pass will project onto: NCCL's ranks become stages */
    if (!st->collect && ((d.kind >= K_FWD && d.kind <= K_OPT) || d.kind == K_ALLREDUCE) &&
        (d.step >= 0 || t->cur_step >= 0))
        f->proj_stage = f->proj_stage == -1 || f->proj_stage == d.stage ? d.stage : -2;
    if (d.kind == K_ALLREDUCE) {
        int64_t ar_step = d.step >= 0 ? d.step : t->cur_step;
        bucket *ab = st->collect || ar_step < 0 ? NULL : bucket_get(st, ar_step);
        ar_range *x = ab ? vec_push(&ab->allred) : NULL;
        if (x)
            *x = (ar_range){.stage = d.stage, .rank = f->rank >= 0 ? f->rank : f->index,
                            .t0 = t0, .t1 = t1, .bytes = d.bytes};
        return;
    }
    if (d.kind == K_STEP) {
        if (d.step < 0)
            d.step = t->n_steps + 1; /* fallback numbering */
        t->n_steps++;
        if (st->collect)
            return;
        bucket *b = bucket_get(st, d.step);
        if (b) {
            step_range *r = vec_push(&b->ranges);
            if (r) {
                r->stage = d.stage;
                r->t0 = t0;
                r->t1 = t1;
            }
        }
        return;
    }
    int64_t step = d.step >= 0 ? d.step : t->cur_step;
    if (step < 0)
        return;
    bucket *b = NULL;
    if (st->collect) {
        if (d.kind < K_SEND_ACT || d.kind > K_RECV_GRAD)
            return;
    } else if (!(b = bucket_get(st, step))) {
        return;
    }
    pp_aop op = {0};
    op.stage = d.stage;
    op.mb = d.mb;
    op.chunk = d.chunk >= 0 ? d.chunk : 0;
    op.peer = d.peer;
    op.bytes = d.bytes;
    op.step = step;
    op.t0 = t0;
    op.t1 = t1;
    op.rank = st->collect ? f->index : f->rank >= 0 ? f->rank : f->index;
    op.replica = f->replica;
    int S = st->S_cfg > st->S_seen ? st->S_cfg : st->S_seen;
    switch (d.kind) {
    case K_FWD: op.kind = PP_AOP_FWD; break;
    case K_BWD: op.kind = PP_AOP_BWD; break;
    case K_BWD_INPUT: op.kind = PP_AOP_BWD_INPUT; break;
    case K_BWD_WEIGHT: op.kind = PP_AOP_BWD_WEIGHT; break;
    case K_OPT: op.kind = PP_AOP_OPT; break;
    case K_SEND_ACT: op.kind = PP_AOP_SEND_ACT; break;
    case K_RECV_ACT: op.kind = PP_AOP_RECV_ACT; break;
    case K_SEND_GRAD: op.kind = PP_AOP_SEND_GRAD; break;
    case K_RECV_GRAD: op.kind = PP_AOP_RECV_GRAD; break;
    default: {
        /* layer ranges: kept separately, chunk = layer index */
        op.kind = d.kind == K_LAYER_FWD ? PP_AOP_FWD
                  : d.kind == K_LAYER_BWD ? PP_AOP_BWD
                                          : PP_AOP_BWD_WEIGHT;
        op.chunk = d.layer;
        if (op.mb < 0)
            op.mb = t->cur_mb;
        pp_aop *lp = vec_push_raw(&b->layer_ops);
        if (lp)
            *lp = op;
        if (d.layer >= 0) {
            while (st->layers.n <= (size_t)d.layer && d.layer < 1 << 20)
                if (!vec_push(&st->layers))
                    break;
            if (st->layers.n > (size_t)d.layer) {
                layer_acc *la = &((layer_acc *)st->layers.data)[d.layer];
                if (!la->name[0]) {
                    const char *m = str_of(f, o->message);
                    const char *sp = strchr(m, ' ');
                    size_t len = sp ? (size_t)(sp - m) : strlen(m);
                    if (len >= sizeof la->name)
                        len = sizeof la->name - 1;
                    memcpy(la->name, m, len);
                    la->name[len] = '\0';
                }
            }
        }
        return;
    }
    }
    if (st->collect) {
        /* implied peers once every stage is known (clock_align) */
        pp_aop *p = vec_push(&st->collected);
        if (p)
            *p = op;
        return;
    }
    if (op.peer < 0 && !pp_aop_is_compute((pp_aop_kind)op.kind) && S > 0) {
        /* the neighbour the transfer implies (wrapping for interleaved schedules) */
        int up = op.kind == PP_AOP_SEND_ACT || op.kind == PP_AOP_RECV_GRAD;
        op.peer = (op.stage + (up ? 1 : S - 1)) % S;
    }
    pp_aop *p = vec_push_raw(&b->ops);
    if (p)
        *p = op;
}

static void on_gpu_record(state *st, file_state *f, uint16_t type, const uint8_t *rec,
                          uint16_t size)
{
    if (type == PP_REC_GPU && size >= sizeof(pp_rec_gpu)) {
        pp_rec_gpu g;
        memcpy(&g, rec, sizeof g);
        g.start = pp_clock_to_ref(&f->clk, g.start);
        g.end = pp_clock_to_ref(&f->clk, g.end);
        pp_gpu_proj_gpu(st->gpu, f->index, &g);
    } else if (type == PP_REC_API && size >= sizeof(pp_rec_api)) {
        pp_rec_api a;
        memcpy(&a, rec, sizeof a);
        a.start = pp_clock_to_ref(&f->clk, a.start);
        a.end = pp_clock_to_ref(&f->clk, a.end);
        pp_gpu_proj_api(st->gpu, f->index, &a);
    } else if (type == PP_REC_NCCL && size >= sizeof(pp_rec_nccl)) {
        pp_rec_nccl n;
        memcpy(&n, rec, sizeof n);
        n.start = pp_clock_to_ref(&f->clk, n.start);
        n.end = pp_clock_to_ref(&f->clk, n.end);
        if (n.timed) {
            n.gpu_start = pp_clock_to_ref(&f->clk, n.gpu_start);
            n.gpu_end = pp_clock_to_ref(&f->clk, n.gpu_end);
        }
        pp_gpu_proj_nccl(st->gpu, f->index, &n);
    }
}

/* Host pass: which trace file holds each NCCL communicator's rank (pp_gpu_proj_nccl_stages). A
 * hostile trace cannot make the list longer than 65536. */
static void note_nccl_member(state *st, const file_state *f, const uint8_t *rec)
{
    pp_rec_nccl n;
    memcpy(&n, rec, sizeof n);
    const pp_gpu_nccl_member *m = st->nccl_members.data;
    for (size_t j = 0; j < st->nccl_members.n; j++)
        if (m[j].comm == n.comm && m[j].rank == n.rank)
            return;
    if (st->nccl_members.n >= 65536)
        return;
    pp_gpu_nccl_member *x = vec_push(&st->nccl_members);
    if (x)
        *x = (pp_gpu_nccl_member){n.comm, n.rank, f->index};
}

/* Whether the record after the one ending at `off` is a pipeprof.event extended payload (which
 * then belongs to it). */
static int ext_follows(const uint8_t *p, size_t bytes, size_t off)
{
    pp_rec_ext e;
    if (off + sizeof e > bytes)
        return 0;
    memcpy(&e, p + off, sizeof e);
    const size_t keep = sizeof ((open_range *)0)->ext; /* what a range keeps of it */
    size_t nb = e.data_bytes < keep ? e.data_bytes : keep;
    return e.h.type == PP_REC_EXT_PAYLOAD && e.h.size >= sizeof e && off + e.h.size <= bytes &&
           e.schema_id == PIPEPROF_SCHEMA_ID && sizeof e + nb <= e.h.size;
}

/* Pushes, pops, starts and ends of one EVENTS block. */
static void on_events(state *st, file_state *f, const pp_trace_block *blk)
{
    thread_state *t = thread_of(f, blk->h.tid);
    if (!t)
        return;
    const uint8_t *p = blk->payload;
    size_t off = 0;
    open_range *last = NULL; /* the range an EXT_PAYLOAD attaches to */
    for (uint32_t i = 0; i < blk->h.n_records && off + sizeof(pp_rec_header) <= blk->h.payload_bytes;
         i++) {
        pp_rec_header h;
        memcpy(&h, p + off, sizeof h);
        if (h.size < sizeof h || off + h.size > blk->h.payload_bytes)
            break;
        const uint8_t *rec = p + off;
        off += h.size;
        switch (h.type) {
        case PP_REC_PUSH:
        case PP_REC_START:
        case PP_REC_MARK: {
            pp_rec_range r;
            if (h.size < sizeof r)
                break;
            memcpy(&r, rec, sizeof r);
            f->events++;
            if (h.type == PP_REC_MARK) {
                if (r.domain == f->pipeprof_domain && f->pipeprof_domain)
                    on_config(st, f, str_of(f, r.message), h.ts);
                last = NULL;
                break;
            }
            /* every field but the payload's bytes and the cached decode (flagged unset): this
             * runs for every range of the trace */
            open_range spare;
            vec *target = h.type == PP_REC_PUSH ? &t->stack : &f->starts;
            last = vec_push_raw(target);
            open_range *o = last ? last : &spare;
            o->domain = r.domain;
            o->t0 = h.ts;
            o->message = r.message;
            o->category = r.category;
            o->payload_type = r.payload_type;
            o->payload = r.payload;
            o->range_id = r.range_id;
            o->has_ext = 0;
            o->ext_bytes = 0;
            o->has_dec = 0;
            /* what the enclosing ranges say, for layer ranges and fallback step numbers; when its
             * pipeprof.event payload follows, the payload's case below does this */
            if (h.type == PP_REC_PUSH && r.domain == f->pipeprof_domain && f->pipeprof_domain &&
                !ext_follows(p, blk->h.payload_bytes, off)) {
                decoded d;
                decode(st, f, o, &d);
                if (d.kind == K_STEP) {
                    t->cur_step = d.step >= 0 ? d.step : t->n_steps + 1;
                    t->cur_stage = d.stage;
                    if (f->replica == st->o->replica)
                        note_step_open(st, f, d.stage, t->cur_step);
                } else if (d.kind >= K_FWD && d.kind <= K_BWD_WEIGHT) {
                    t->cur_mb = d.mb;
                }
            }
            break;
        }
        case PP_REC_GPU:
        case PP_REC_API:
        case PP_REC_NCCL:
            /* GPU capture: onto the common clock, then to the projection (analyzed replica);
             * the host pass only counts them */
            if (f->replica != st->o->replica)
                break;
            if (st->gpu) {
                on_gpu_record(st, f, h.type, rec, h.size);
            } else {
                st->gpu_records++;
                if (h.type == PP_REC_NCCL && h.size >= sizeof(pp_rec_nccl))
                    note_nccl_member(st, f, rec);
            }
            break;
        case PP_REC_EXT_PAYLOAD: {
            pp_rec_ext e;
            if (h.size < sizeof e || !last || last->has_ext)
                break;
            memcpy(&e, rec, sizeof e);
            if (e.schema_id != PIPEPROF_SCHEMA_ID)
                break;
            uint32_t nb = e.data_bytes;
            if (nb > sizeof last->ext)
                nb = sizeof last->ext;
            if (sizeof e + nb > h.size)
                break;
            memcpy(last->ext, rec + sizeof e, nb);
            last->ext_bytes = nb;
            last->has_ext = 1;
            /* re-evaluate the enclosing-range state with the authoritative payload */
            if (last->domain == f->pipeprof_domain && t->stack.n &&
                last == &((open_range *)t->stack.data)[t->stack.n - 1]) {
                decoded d;
                decode(st, f, last, &d);
                last->dec = d;
                last->dec_gen = f->meta_gen;
                last->dec_cfg = st->cfg_gen;
                last->has_dec = 1;
                if (d.kind == K_STEP) {
                    t->cur_step = d.step;
                    t->cur_stage = d.stage;
                    if (f->replica == st->o->replica)
                        note_step_open(st, f, d.stage, d.step);
                } else if (d.kind >= K_FWD && d.kind <= K_BWD_WEIGHT) {
                    t->cur_mb = d.mb;
                    if (d.stage >= 0)
                        t->cur_stage = d.stage;
                }
            }
            break;
        }
        case PP_REC_POP: {
            pp_rec_pop r;
            if (h.size < sizeof r)
                break;
            memcpy(&r, rec, sizeof r);
            f->events++;
            last = NULL;
            /* the innermost open range of that domain on this thread */
            open_range *s = t->stack.data;
            for (size_t k = t->stack.n; k-- > 0;) {
                if (s[k].domain != r.domain)
                    continue;
                /* One decode serves the range and the step bookkeeping below (with no pipeprof
                 * domain seen, a default-domain range is still checked for a step payload).
                 * The range is used in place (nothing below touches the stack), then removed. */
                const open_range *o = &s[k];
                if (o->domain == f->pipeprof_domain) {
                    decoded d;
                    if (o->has_dec && o->dec_gen == f->meta_gen && o->dec_cfg == st->cfg_gen)
                        d = o->dec;
                    else
                        decode(st, f, o, &d);
                    if (f->pipeprof_domain)
                        on_range(st, f, t, o, h.ts, &d);
                    if (d.kind == K_STEP) {
                        int64_t step = d.step >= 0 ? d.step : t->n_steps;
                        if (d.stage >= 0 && ensure_stage(st, d.stage) &&
                            step > st->stage_max_step[d.stage])
                            st->stage_max_step[d.stage] = step;
                        t->cur_step = -1;
                    }
                }
                memmove(&s[k], &s[k + 1], (t->stack.n - k - 1) * sizeof *s);
                t->stack.n--;
                break;
            }
            break;
        }
        case PP_REC_END: {
            pp_rec_end r;
            if (h.size < sizeof r)
                break;
            memcpy(&r, rec, sizeof r);
            f->events++;
            last = NULL;
            open_range *s = f->starts.data;
            for (size_t k = 0; k < f->starts.n; k++) {
                if (s[k].range_id != r.range_id)
                    continue;
                open_range o = s[k];
                s[k] = s[f->starts.n - 1];
                f->starts.n--;
                if (f->pipeprof_domain && o.domain == f->pipeprof_domain) {
                    decoded d;
                    decode(st, f, &o, &d);
                    on_range(st, f, t, &o, h.ts, &d);
                }
                break;
            }
            break;
        }
        default: break;
        }
    }
}

static void on_meta(file_state *f, const pp_trace_block *blk)
{
    f->meta_gen++;
    const uint8_t *p = blk->payload;
    size_t off = 0;
    for (uint32_t i = 0; i < blk->h.n_records && off + sizeof(pp_rec_header) <= blk->h.payload_bytes;
         i++) {
        pp_rec_header h;
        memcpy(&h, p + off, sizeof h);
        if (h.size < sizeof h || off + h.size > blk->h.payload_bytes)
            break;
        const uint8_t *rec = p + off;
        off += h.size;
        if (h.type == PP_REC_STRING) {
            pp_rec_string s;
            if (h.size < sizeof s)
                continue;
            memcpy(&s, rec, sizeof s);
            if (s.id == 0 || sizeof s + s.len > h.size)
                continue;
            char **slot = string_slot(f, s.id);
            if (!slot)
                return;
            if (*slot)
                continue; /* first definition wins */
            *slot = malloc(s.len + 1);
            f->n_strings++;
            if (*slot) {
                memcpy(*slot, rec + sizeof s, s.len);
                (*slot)[s.len] = '\0';
            }
        } else if (h.type == PP_REC_DOMAIN) {
            pp_rec_domain d;
            if (h.size < sizeof d)
                continue;
            memcpy(&d, rec, sizeof d);
            if (!f->pipeprof_domain && strcmp(str_of(f, d.name), "pipeprof") == 0)
                f->pipeprof_domain = d.id;
        } else if (h.type == PP_REC_SCHEMA) {
            pp_rec_schema sc;
            if (h.size < sizeof sc)
                continue;
            memcpy(&sc, rec, sizeof sc);
            if (sc.schema_id != PIPEPROF_SCHEMA_ID)
                continue;
            static const char *const names[8] = {"kind", "stage", "mb",    "chunk",
                                                 "layer", "peer", "bytes", "step"};
            int found = 0;
            for (uint32_t e = 0; e < sc.n_entries; e++) {
                size_t eo = sizeof sc + (size_t)e * sizeof(pp_rec_schema_entry);
                if (eo + sizeof(pp_rec_schema_entry) > h.size)
                    break;
                pp_rec_schema_entry en;
                memcpy(&en, rec + eo, sizeof en);
                for (int k = 0; k < 8; k++)
                    if (strcmp(str_of(f, en.name), names[k]) == 0) {
                        f->off[k] = en.offset;
                        found++;
                    }
            }
            f->schema_ok = found == 8;
            f->default_layout = 1;
            for (int k = 0; k < 8; k++)
                f->default_layout &= f->off[k] == k_event_offsets[k];
        }
    }
}

/* ======================================================================================== */
/* Driver                                                                                     */
/* ======================================================================================== */

void pp_analysis_options_default(pp_analysis_options *o)
{
    memset(o, 0, sizeof *o);
    o->warmup = 1;
}

static void file_state_free(file_state *f)
{
    pp_trace_reader_close(f->r);
    char **s = f->strings.data;
    for (size_t i = 0; i < f->strings.n; i++)
        free(s[i]);
    vec_free(&f->strings);
    far_string *fs = f->far_strings.data;
    for (size_t i = 0; i < f->far_strings.n; i++)
        free(fs[i].s);
    vec_free(&f->far_strings);
    vec_free(&f->msgs);
    thread_state *t = f->threads.data;
    for (size_t i = 0; i < f->threads.n; i++)
        vec_free(&t[i].stack);
    vec_free(&f->threads);
    vec_free(&f->starts);
}

static int rank_wanted(const pp_analysis_options *o, int32_t rank)
{
    if (o->rank_filter_n <= 0)
        return 1;
    for (int i = 0; i < o->rank_filter_n; i++)
        if (o->rank_filter[i] == rank)
            return 1;
    return 0;
}

static void results(state *st)
{
    pp_analysis *a = st->a;
    int S = st->S_cfg > st->S_seen ? st->S_cfg : st->S_seen;
    a->S = S;
    a->replica = st->o->replica;
    /* every step's stage[] holds a->S entries (zeros for stages first seen after it) */
    pp_astep *sps = st->steps.data;
    const int *sps_S = st->steps_S.data;
    for (size_t i = 0; i < st->steps.n; i++) {
        if (i < st->steps_S.n && sps_S[i] >= S)
            continue;
        int had = i < st->steps_S.n ? sps_S[i] : 0;
        pp_stage_step *w = pp_realloc_array(sps[i].stage, (size_t)S, sizeof *w);
        if (!w) {
            for (size_t k = i; k < st->steps.n; k++)
                free(sps[k].stage);
            st->steps.n = i; /* out of memory: the steps up to here */
            warn(a, "out of memory widening the steps to %d stages: %zu step(s) kept", S, i);
            break;
        }
        memset(w + had, 0, (size_t)(S - had) * sizeof *w);
        sps[i].stage = w;
    }
    a->n_steps = st->steps.n;
    a->steps = st->steps.data;
    st->steps.data = NULL;
    st->steps.n = st->steps.cap = 0;
    a->step_ns = series_stats(&st->step_series);
    if (a->n_steps) {
        a->bubble_ratio = st->bubble_sum / (double)a->n_steps;
        a->imbalance = st->imbalance_sum / (double)a->n_steps;
        double secs = a->step_ns.mean * 1e-9;
        if (secs > 0) {
            a->samples_per_s = a->samples_per_step / secs;
            a->tokens_per_s = a->tokens_per_step / secs;
        }
    }
    a->stages = calloc((size_t)(S > 0 ? S : 1), sizeof(pp_astage));
    for (int s = 0; a->stages && s < S; s++) {
        pp_astage *o = &a->stages[s];
        o->stage = s;
        o->imbalance_culprit = -1;
        if ((size_t)s >= st->stage_acc.n)
            continue;
        stage_acc *sa = &((stage_acc *)st->stage_acc.data)[s];
        o->fwd_ns = series_stats(&sa->fwd);
        o->bwd_ns = series_stats(&sa->bwd);
        o->bwd_input_ns = series_stats(&sa->bwd_in);
        o->bwd_weight_ns = series_stats(&sa->bwd_w);
        o->opt_ns = series_stats(&sa->opt);
        o->allreduce_ns = series_stats(&sa->allred);
        if (o->allreduce_ns.count)
            o->allreduce_bytes = sa->allred_bytes / (double)o->allreduce_ns.count;
        /* bus bandwidth as nccl-tests defines it for all-reduce: 2 (n - 1) / n x bytes / time */
        if (o->allreduce_ns.median > 0 && a->dp > 1)
            o->allreduce_busbw_GBps = o->allreduce_bytes * 2.0 * (a->dp - 1) / a->dp /
                                      o->allreduce_ns.median;
        if (sa->n) {
            o->busy_ns = sa->busy / sa->n;
            o->idle_ns = sa->idle / sa->n;
            o->fill_drain_ns = sa->fill / sa->n;
            o->imbalance_ns = sa->imb / sa->n;
            o->transfer_ns = sa->xfer / sa->n;
            o->allreduce_mean_ns = sa->ar / sa->n;
            o->bubble_ratio = a->step_ns.mean > 0 ? o->idle_ns / a->step_ns.mean : 0;
        }
        const int *votes = sa->culprit_votes.data;
        for (size_t k = 0; k < sa->culprit_votes.n; k++)
            if (votes[k] > 0 && (o->imbalance_culprit < 0 || votes[k] > votes[o->imbalance_culprit]))
                o->imbalance_culprit = (int)k;
    }
    a->n_links = st->links.n;
    a->links = calloc(a->n_links ? a->n_links : 1, sizeof(pp_alink));
    for (size_t i = 0; a->links && i < a->n_links; i++) {
        link_acc *l = &((link_acc *)st->links.data)[i];
        a->links[i] = l->l;
        /* The median over messages: a receiver descheduled when its data arrived (an
         * oversubscribed CPU) inflates single transfers, not the median. */
        a->links[i].bandwidth_GBps = series_stats(&l->bw).median;
        a->links[i].latency_ns = series_stats(&l->lat);
    }
    size_t nl = 0;
    for (size_t i = 0; i < st->layers.n; i++)
        nl += ((layer_acc *)st->layers.data)[i].used || ((layer_acc *)st->layers.data)[i].has_info;
    a->layers = calloc(nl ? nl : 1, sizeof(pp_alayer));
    for (size_t i = 0; a->layers && i < st->layers.n; i++) {
        layer_acc *la = &((layer_acc *)st->layers.data)[i];
        if (!la->used && !la->has_info)
            continue;
        pp_alayer *o = &a->layers[a->n_layers++];
        o->layer = (int32_t)i;
        snprintf(o->name, sizeof o->name, "%s", la->name);
        o->fwd_ns = series_stats(&la->fwd);
        o->bwd_ns = series_stats(&la->bwd);
        o->bwd_weight_ns = series_stats(&la->bwdw);
        o->has_info = la->has_info;
        o->param_bytes = la->param_bytes;
        o->activation_bytes = la->activation_bytes;
    }
    a->n_ops = st->kept_ops.n;
    a->ops = st->kept_ops.data;
    st->kept_ops.data = NULL;
    a->n_layer_ops = st->kept_layer_ops.n;
    a->layer_ops = st->kept_layer_ops.data;
    st->kept_layer_ops.data = NULL;
    a->n_allreduce_ops = st->kept_ar_ops.n;
    a->allreduce_ops = st->kept_ar_ops.data;
    st->kept_ar_ops.data = NULL;
}

static void state_free(state *st)
{
    bucket *b = st->buckets.data;
    for (size_t i = 0; i < st->buckets.n; i++) {
        vec_free(&b[i].ops);
        vec_free(&b[i].layer_ops);
        vec_free(&b[i].ranges);
        vec_free(&b[i].allred);
    }
    vec_free(&st->buckets);
    free(st->stage_max_step);
    free(st->seen);
    free(st->prev_bound);
    pp_astep *sp = st->steps.data;
    for (size_t i = 0; i < st->steps.n; i++)
        free(sp[i].stage);
    vec_free(&st->steps);
    vec_free(&st->steps_S);
    series_free(&st->step_series);
    stage_acc *sa = st->stage_acc.data;
    for (size_t i = 0; i < st->stage_acc.n; i++) {
        series_free(&sa[i].fwd);
        series_free(&sa[i].bwd);
        series_free(&sa[i].bwd_in);
        series_free(&sa[i].bwd_w);
        series_free(&sa[i].opt);
        series_free(&sa[i].allred);
        vec_free(&sa[i].culprit_votes);
    }
    vec_free(&st->stage_acc);
    link_acc *l = st->links.data;
    for (size_t i = 0; i < st->links.n; i++) {
        series_free(&l[i].lat);
        series_free(&l[i].bw);
    }
    vec_free(&st->links);
    layer_acc *la = st->layers.data;
    for (size_t i = 0; i < st->layers.n; i++) {
        series_free(&la[i].fwd);
        series_free(&la[i].bwd);
        series_free(&la[i].bwdw);
    }
    vec_free(&st->layers);
    vec_free(&st->kept_ops);
    vec_free(&st->kept_layer_ops);
    vec_free(&st->kept_ar_ops);
    vec_free(&st->xfers);
    vec_free(&st->match);
    free(st->scratch);
    st->scratch = NULL;
    vec_free(&st->collected);
    vec_free(&st->syncs);
    vec_free(&st->nccl_members);
    pp_gpu_proj_destroy(st->gpu);
    st->gpu = NULL;
}

static void file_state_init(file_state *f, int index)
{
    f->index = index;
    f->min_stage = -1;
    f->strings.elem = sizeof(char *);
    f->far_strings.elem = sizeof(far_string);
    f->msgs.elem = sizeof(msg_info);
    f->threads.elem = sizeof(thread_state);
    f->starts.elem = sizeof(open_range);
    /* the convention's layout until (unless) the file registers the schema */
    memcpy(f->off, k_event_offsets, sizeof k_event_offsets);
    f->default_layout = 1;
    f->proj_stage = -1;
}

static void state_init(state *st, const pp_analysis_options *o, pp_analysis *a)
{
    memset(st, 0, sizeof *st);
    st->o = o;
    st->a = a;
    st->last_finalized = INT64_MIN;
    st->prev_step = -1;
    st->buckets.elem = sizeof(bucket);
    st->steps.elem = sizeof(pp_astep);
    st->steps_S.elem = sizeof(int);
    st->stage_acc.elem = sizeof(stage_acc);
    st->links.elem = sizeof(link_acc);
    st->layers.elem = sizeof(layer_acc);
    st->kept_ops.elem = st->kept_layer_ops.elem = st->kept_ar_ops.elem = sizeof(pp_aop);
    st->xfers.elem = sizeof(xfer);
    st->match.elem = sizeof(size_t);
    st->collected.elem = sizeof(pp_aop);
    st->syncs.elem = sizeof(sync_mark);
    st->nccl_members.elem = sizeof(pp_gpu_nccl_member);
}

static int cmp_sync(const void *a, const void *b)
{
    const sync_mark *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst)
        return x->dst < y->dst ? -1 : 1;
    if (x->phase != y->phase)
        return x->phase < y->phase ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return (x->recv > y->recv) - (x->recv < y->recv);
}

static int cmp_collected(const void *a, const void *b)
{
    const pp_aop *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->replica != y->replica)
        return x->replica < y->replica ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->t0 != y->t0)
        return x->t0 < y->t0 ? -1 : 1;
    return (x->t1 > y->t1) - (x->t1 < y->t1);
}

/* Clock alignment (docs/metrics.md): when the wanted files come from more than one host, or one
 * carries the profiler's clock test hook, a first pass over them collects every transfer, pairs
 * sends with receives as step_links does, and estimates each file's clock against the reference
 * (the file holding stage 0, else the lowest rank); fs[i].clk then maps its timestamps in the
 * analysis pass. Files on one host without the hook share CLOCK_MONOTONIC: nothing is done.
 * The pass keeps the run's transfers in memory (64 bytes each). */
/* Names the stages whose process died: a stage no trace holds, or one whose trace (cut off:
 * no footer) ends at an earlier step than the others'. */
static void warn_lost_ranks(state *st, const file_state *fs, size_t n, const pp_analysis_options *o)
{
    int S = st->S_cfg > st->S_seen ? st->S_cfg : st->S_seen;
    int64_t last = -1;
    for (int s = 0; s < S && s < st->cap_seen; s++)
        if (st->seen[s].last_step > last)
            last = st->seen[s].last_step;
    if (last < 0)
        return;
    for (int s = 0; s < S; s++) {
        const stage_seen *x = s < st->cap_seen ? &st->seen[s] : NULL;
        if (!x || x->last_step < 0) {
            if (!o->rank_filter_n) /* a filtered-out rank is not missing */
                warn(st->a, "stage %d: no trace holds its steps (its rank's process died or "
                            "was not captured?); the other stages reach step %lld",
                     s, (long long)last);
            continue;
        }
        if (x->last_step >= last || x->file < 0 || (size_t)x->file >= n ||
            fs[x->file].info->has_footer)
            continue;
        warn(st->a, "stage %d (rank %d): its trace ends at step %lld, the other stages reach "
                    "step %lld: the process died?",
             s, x->rank, (long long)x->last_step, (long long)last);
    }
}

static pp_status clock_align(file_state *fs, size_t n, pp_analysis *a, const pp_analysis_options *o)
{
    size_t wanted = 0, first = SIZE_MAX;
    int needed = 0;
    for (size_t i = 0; i < n; i++) {
        if (fs[i].done)
            continue;
        const pp_trace_header *h = pp_trace_reader_header(fs[i].r);
        if (h->clock_offset_ns != 0 || h->clock_drift != 0.0)
            needed = 1;
        if (first == SIZE_MAX)
            first = i;
        else if (strncmp(fs[first].info->host, fs[i].info->host, sizeof fs[i].info->host) != 0)
            needed = 1;
        wanted++;
    }
    if (wanted < 2 || !needed)
        return PP_OK;
    pp_status rc = PP_OK;
    pp_analysis *scratch = calloc(1, sizeof *scratch);
    file_state *cs = calloc(n, sizeof *cs);
    pp_clock_pair *pairs = NULL;
    pp_clock_fit *fits = calloc(n, sizeof *fits);
    uint64_t *mono0 = calloc(n, sizeof *mono0);
    state st;
    state_init(&st, o, scratch);
    st.collect = 1;
    if (!scratch || !cs || !fits || !mono0) {
        rc = PP_ERR(PP_ERR_NOMEM, "out of memory aligning clocks");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        file_state *f = &cs[i];
        file_state_init(f, (int)i);
        f->info = fs[i].info;
        f->rank = fs[i].rank;
        f->done = fs[i].done || pp_trace_reader_open(fs[i].info->path, &f->r) != PP_OK;
        mono0[i] = fs[i].r ? pp_trace_reader_header(fs[i].r)->mono_ns : 0;
        while (!f->done) {
            pp_trace_block blk;
            bool got = false;
            if (pp_trace_reader_next(f->r, &blk, &got) != PP_OK || !got)
                break;
            if (blk.h.kind == PP_BLOCK_META)
                on_meta(f, &blk);
            else if (blk.h.kind == PP_BLOCK_EVENTS)
                on_events(&st, f, &blk);
        }
    }
    /* the reference: the file with stage 0, else the lowest rank */
    int ref = -1;
    for (size_t i = 0; i < n; i++) {
        if (fs[i].done)
            continue;
        int better = ref < 0;
        if (!better && (cs[i].min_stage == 0) != (cs[ref].min_stage == 0))
            better = cs[i].min_stage == 0;
        else if (!better)
            better = fs[i].rank < fs[ref].rank;
        if (better)
            ref = (int)i;
    }
    /* implied peers with every stage known, then the sends and receives paired per step */
    int S = st.S_cfg > st.S_seen ? st.S_cfg : st.S_seen;
    pp_aop *ops = st.collected.data;
    size_t nops = st.collected.n, npairs = 0;
    for (size_t i = 0; i < nops; i++)
        if (ops[i].peer < 0 && S > 0) {
            int up = ops[i].kind == PP_AOP_SEND_ACT || ops[i].kind == PP_AOP_RECV_GRAD;
            ops[i].peer = (ops[i].stage + (up ? 1 : S - 1)) % S;
        }
    if (nops)
        qsort(ops, nops, sizeof *ops, cmp_collected);
    pairs = malloc(sizeof *pairs * (nops + st.syncs.n + 1));
    if (!pairs) {
        rc = PP_ERR(PP_ERR_NOMEM, "out of memory aligning clocks");
        goto done;
    }
    for (size_t g = 0; g < nops;) {
        size_t e = g;
        while (e < nops && ops[e].step == ops[g].step && ops[e].replica == ops[g].replica)
            e++;
        if (!match_transfers(&st, ops + g, e - g)) {
            rc = PP_ERR(PP_ERR_NOMEM, "out of memory aligning clocks");
            goto done;
        }
        const size_t *match = st.match.data;
        for (size_t k = 0; k < e - g; k++) {
            const pp_aop *snd = &ops[g + k];
            if ((snd->kind != PP_AOP_SEND_ACT && snd->kind != PP_AOP_SEND_GRAD) ||
                match[k] == SIZE_MAX)
                continue;
            const pp_aop *rcv = &ops[g + match[k]];
            pairs[npairs++] = (pp_clock_pair){.src = snd->rank, .dst = rcv->rank,
                                              .send_ns = snd->t0, .recv_ns = rcv->t1};
        }
        g = e;
    }
    /* the ping-pong's marks: a send mark and the receive mark of the same message */
    sync_mark *sm = st.syncs.data;
    if (st.syncs.n)
        qsort(sm, st.syncs.n, sizeof *sm, cmp_sync);
    size_t n_sync = 0;
    for (size_t i = 0; i + 1 < st.syncs.n; i++) {
        const sync_mark *x = &sm[i], *y = &sm[i + 1];
        if (x->recv || !y->recv || x->src != y->src || x->dst != y->dst ||
            x->phase != y->phase || x->seq != y->seq || x->file == y->file)
            continue;
        pairs[npairs++] = (pp_clock_pair){.src = x->file, .dst = y->file, .send_ns = x->ts,
                                          .recv_ns = y->ts};
        n_sync++;
        i++;
    }
    a->clock_sync_pairs = n_sync;
    rc = pp_clock_estimate(pairs, npairs, n, ref, mono0, fits);
    if (rc != PP_OK)
        goto done;
    for (size_t i = 0; i < n; i++) {
        if (fs[i].done)
            continue;
        pp_afile *info = fs[i].info;
        fs[i].clk = fits[i];
        info->clock_status = fits[i].status;
        info->clock_ref = fs[ref].rank >= 0 ? fs[ref].rank : ref;
        info->clock_offset_ns = fits[i].offset_ns;
        info->clock_drift = fits[i].drift;
        info->clock_uncertainty_ns = fits[i].uncertainty_ns;
        info->aligned = fits[i].status != PP_CLOCK_UNBOUNDED;
        if (fits[i].status == PP_CLOCK_UNBOUNDED)
            warn(a, "%s: clock offset unbounded (%llu message(s) to it, %llu from it from "
                    "aligned processes need both directions); its times stay on its own clock",
                 info->path, (unsigned long long)fits[i].n_fwd,
                 (unsigned long long)fits[i].n_bwd);
        else if (fits[i].violation_ns > 0)
            warn(a, "%s: no clock line satisfies every message (best misses by %.1f us): "
                    "mismatched pairs or a clock that is not linear",
                 info->path, fits[i].violation_ns * 1e-3);
    }
done:
    for (size_t i = 0; i < n; i++) {
        if (cs)
            file_state_free(&cs[i]);
    }
    free(cs);
    state_free(&st);
    free(scratch);
    free(pairs);
    free(fits);
    free(mono0);
    return rc;
}

/* GPU time (docs/metrics.md "GPU time"): a second pass over the files, run only when the host
 * pass saw GPU-capture records, now that the analyzed steps and their host windows are known.
 * It decodes the ranges again (the same step numbering) and hands them, the API calls and the
 * GPU and NCCL records to the projection, which keeps only a window of them (pp_gpu.h). */
static pp_status gpu_pass(const file_state *fs, size_t n, const vec *nccl_members,
                          pp_analysis *a, const pp_analysis_options *o)
{
    pp_status rc = PP_OK;
    size_t ns = a->n_steps ? a->n_steps : 1;
    int64_t *steps = malloc(ns * sizeof *steps);
    uint64_t *w0 = malloc(ns * sizeof *w0), *w1 = malloc(ns * sizeof *w1);
    pp_analysis *scratch = calloc(1, sizeof *scratch);
    file_state *gs = calloc(n ? n : 1, sizeof *gs);
    state st;
    state_init(&st, o, scratch);
    st.gpu_pass = 1;
    if (!steps || !w0 || !w1 || !scratch || !gs) {
        rc = PP_ERR(PP_ERR_NOMEM, "out of memory for the GPU projection");
        goto done;
    }
    for (size_t i = 0; i < a->n_steps; i++) {
        steps[i] = a->steps[i].step;
        w0[i] = (uint64_t)a->steps[i].t0_ns;
        w1[i] = (uint64_t)(a->steps[i].t0_ns + a->steps[i].window_ns);
    }
    if ((rc = pp_gpu_proj_create(&st.gpu, steps, w0, w1, a->n_steps, a->S, o->gpu_window)) !=
        PP_OK)
        goto done;
    int32_t *stage_of_file = malloc((n ? n : 1) * sizeof *stage_of_file);
    if (!stage_of_file) {
        rc = PP_ERR(PP_ERR_NOMEM, "out of memory for the GPU projection");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        stage_of_file[i] = fs[i].proj_stage;
    rc = pp_gpu_proj_nccl_stages(st.gpu, stage_of_file, n, nccl_members->data,
                                 nccl_members->n);
    free(stage_of_file);
    if (rc != PP_OK)
        goto done;
    /* the pictures' window: the kept steps */
    uint64_t k0 = UINT64_MAX, k1 = 0;
    for (size_t i = 0; i < a->n_steps; i++)
        if (a->steps[i].step >= a->kept_lo && a->steps[i].step <= a->kept_hi) {
            k0 = w0[i] < k0 ? w0[i] : k0;
            k1 = w1[i] > k1 ? w1[i] : k1;
        }
    if (k0 < k1)
        pp_gpu_proj_keep(st.gpu, a->kept_lo, a->kept_hi, k0, k1);
    for (size_t i = 0; i < n; i++) {
        file_state *f = &gs[i];
        file_state_init(f, (int)i);
        f->info = fs[i].info;
        f->rank = fs[i].rank;
        f->clk = fs[i].clk;
        f->done = !fs[i].r || !rank_wanted(o, fs[i].rank) ||
                  pp_trace_reader_open(fs[i].info->path, &f->r) != PP_OK;
    }
    /* round-robin as in the host pass, so the files' windows advance together */
    for (int active = 1; active;) {
        active = 0;
        for (size_t i = 0; i < n; i++) {
            file_state *f = &gs[i];
            pp_trace_block blk;
            bool got = false;
            if (f->done)
                continue;
            if (pp_trace_reader_next(f->r, &blk, &got) != PP_OK || !got) {
                f->done = 1;
                continue;
            }
            active = 1;
            if (blk.h.kind == PP_BLOCK_META)
                on_meta(f, &blk);
            else if (blk.h.kind == PP_BLOCK_EVENTS)
                on_events(&st, f, &blk);
        }
    }
    if ((rc = pp_gpu_proj_finish(st.gpu, &a->gpu)) != PP_OK)
        goto done;
    if (a->gpu.present && a->gpu.unattributed)
        warn(a, "%llu of %llu GPU records could not be projected onto a pipeline range "
                "(launched outside the NVTX ranges, or their API record was lost)",
             (unsigned long long)a->gpu.unattributed, (unsigned long long)a->gpu.records);
    if (a->gpu.late)
        warn(a, "%llu GPU records arrived after the range that launched them had left the "
                "projection's window (%zu ranges per trace file): not projected",
             (unsigned long long)a->gpu.late, o->gpu_window ? o->gpu_window
                                                            : (size_t)PP_GPU_WINDOW_RANGES);
done:
    for (size_t i = 0; gs && i < n; i++)
        file_state_free(&gs[i]);
    free(gs);
    state_free(&st);
    free(scratch);
    free(steps), free(w0), free(w1);
    return rc;
}

pp_status pp_analyze_files(const char *const *paths, size_t n, const pp_analysis_options *opt,
                           pp_analysis **out)
{
    pp_status rc = PP_OK;
    pp_analysis_options defaults;
    if (!opt) {
        pp_analysis_options_default(&defaults);
        opt = &defaults;
    }
    pp_analysis *a = calloc(1, sizeof *a);
    file_state *fs = calloc(n ? n : 1, sizeof *fs);
    state st;
    state_init(&st, opt, a);
    if (!a || !fs) {
        free(a);
        free(fs);
        return PP_ERR(PP_ERR_NOMEM, "out of memory analyzing %zu traces", n);
    }
    a->files = calloc(n ? n : 1, sizeof(pp_afile));
    if (!a->files) {
        rc = PP_ERR(PP_ERR_NOMEM, "out of memory analyzing %zu traces", n);
        goto done;
    }
    size_t readable = 0;
    for (size_t i = 0; i < n; i++) {
        file_state *f = &fs[i];
        file_state_init(f, (int)i);
        pp_afile *info = &a->files[a->n_files++];
        f->info = info;
        snprintf(info->path, sizeof info->path, "%s", paths[i]);
        if (pp_trace_reader_open(paths[i], &f->r) != PP_OK) {
            warn(a, "%s: %s (skipped)", paths[i], pp_error_message());
            f->done = 1;
            continue;
        }
        const pp_trace_header *h = pp_trace_reader_header(f->r);
        f->rank = h->rank;
        info->pid = h->pid;
        info->rank = h->rank;
        info->aligned = 1;
        snprintf(info->host, sizeof info->host, "%.*s", (int)sizeof h->host, h->host);
        if (!rank_wanted(opt, h->rank)) {
            f->done = 1;
            continue;
        }
        readable++;
    }
    if (!readable) {
        rc = PP_ERR(PP_ERR_INVALID, "no readable trace to analyze%s%s", a->warnings[0] ? ": " : "",
                    a->warnings);
        goto done;
    }
    rc = clock_align(fs, n, a, opt);
    if (rc != PP_OK)
        goto done;
    /* Round-robin over the files, one block at a time. */
    for (;;) {
        int active = 0;
        for (size_t i = 0; i < n; i++) {
            file_state *f = &fs[i];
            if (f->done)
                continue;
            active = 1;
            pp_trace_block blk;
            bool got = false;
            if (pp_trace_reader_next(f->r, &blk, &got) != PP_OK || !got) {
                f->done = 1;
                continue;
            }
            if (blk.h.kind == PP_BLOCK_META)
                on_meta(f, &blk);
            else if (blk.h.kind == PP_BLOCK_EVENTS)
                on_events(&st, f, &blk);
            else if (blk.h.kind == PP_BLOCK_FOOTER && blk.h.payload_bytes >= sizeof(pp_rec_footer)) {
                pp_rec_footer ft;
                memcpy(&ft, blk.payload, sizeof ft);
                f->info->has_footer = 1;
                f->info->events = ft.events;
                f->info->dropped = ft.dropped;
                f->info->filtered = ft.filtered;
            }
        }
        finalize_ready(&st, 0);
        if (!active)
            break;
    }
    finalize_ready(&st, 1);
    for (size_t i = 0; i < n; i++) {
        file_state *f = &fs[i];
        pp_afile *info = f->info;
        if (f->r)
            info->damage = *pp_trace_reader_damage(f->r);
        if (!info->has_footer)
            info->events = f->events;
        a->events_total += info->events;
        a->dropped_total += info->dropped;
        if (f->r && !info->has_footer && info->rank >= 0)
            warn(a, "%s: no footer: rank %d died (its process was killed?); analyzed what it "
                    "holds",
                 info->path, info->rank);
        else if (f->r && !info->has_footer)
            warn(a, "%s: no footer (the process was killed?); analyzed what it holds",
                 info->path);
        if (info->dropped)
            warn(a, "%s: %llu events dropped by the capture library (buffers full); numbers "
                    "may be incomplete",
                 info->path, (unsigned long long)info->dropped);
        if (info->damage.blocks_bad || info->damage.truncated)
            warn(a, "%s: damaged trace (%llu bad blocks%s): %s", info->path,
                 (unsigned long long)info->damage.blocks_bad,
                 info->damage.truncated ? ", truncated" : "", info->damage.first_problem);
    }
    warn_lost_ranks(&st, fs, n, opt);
    if (a->ranges_out_of_bounds)
        warn(a, "%llu pipeline range(s) ignored: a value outside the bounds of "
                "docs/nvtx-convention.md (first: %s)",
             (unsigned long long)a->ranges_out_of_bounds, st.oob_first);
    results(&st);
    if (st.gpu_records && (rc = gpu_pass(fs, n, &st.nccl_members, a, opt)) != PP_OK)
        goto done;
    if (opt->replica > 0 && opt->replica >= (a->dp > 1 ? a->dp : 1)) {
        rc = PP_ERR(PP_ERR_INVALID, "replica %d: the run has %d data-parallel replica(s), "
                                    "numbered from 0", opt->replica, a->dp > 1 ? a->dp : 1);
        goto done;
    }
    if (a->n_steps == 0) {
        int S = a->S;
        uint64_t all = a->events_total + a->dropped_total;
        /* Heavy drops (a tenth of the events or more) explain missing steps better than the
         * convention does: the step ranges were likely among the events lost. */
        if (a->dropped_total > 0 && a->dropped_total >= all / 10)
            rc = PP_ERR(PP_ERR_INVALID,
                        "no pipeline steps found in the traces (%d stage(s) seen): the capture "
                        "dropped %llu of %llu events (%.0f%%; its buffers were full), so the "
                        "steps' ranges were likely lost; capture again with a larger "
                        "PPROF_BUFFER_KB or PPROF_FLUSH_MS smaller (docs/profiler.md)",
                        S, (unsigned long long)a->dropped_total, (unsigned long long)all,
                        100.0 * (double)a->dropped_total / (double)all);
        else
            rc = PP_ERR(PP_ERR_INVALID,
                        "no pipeline steps found in the traces (%d stage(s) seen, %lld warm-up "
                        "step(s) skipped): does the job emit the NVTX convention of "
                        "docs/nvtx-convention.md?",
                        S, (long long)a->warmup_skipped);
        goto done;
    }
done:
    for (size_t i = 0; i < n; i++)
        file_state_free(&fs[i]);
    free(fs);
    state_free(&st);
    if (rc != PP_OK) {
        pp_analysis_free(a);
        return rc;
    }
    *out = a;
    return PP_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

pp_status pp_analyze_dir(const char *dir, const pp_analysis_options *o, pp_analysis **out)
{
    DIR *d = opendir(dir);
    if (!d)
        return PP_ERR(PP_ERR_IO, "cannot open run directory '%s'", dir);
    vec names = {.elem = sizeof(char *)};
    struct dirent *e;
    pp_status st = PP_OK;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".pft") != 0)
            continue;
        char **slot = vec_push(&names);
        size_t plen = strlen(dir) + len + 2;
        if (!slot || !(*slot = malloc(plen))) {
            st = PP_ERR(PP_ERR_NOMEM, "out of memory listing '%s'", dir);
            break;
        }
        snprintf(*slot, plen, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (st == PP_OK && names.n == 0)
        st = PP_ERR(PP_ERR_INVALID, "'%s' holds no trace files (*.pft): is it a pprof-run "
                                    "directory?",
                    dir);
    if (st == PP_OK) {
        qsort(names.data, names.n, sizeof(char *), cmp_str);
        st = pp_analyze_files((const char *const *)names.data, names.n, o, out);
    }
    for (size_t i = 0; i < names.n; i++)
        free(((char **)names.data)[i]);
    vec_free(&names);
    return st;
}

void pp_analysis_free(pp_analysis *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n_steps; i++)
        free(a->steps[i].stage);
    free(a->steps);
    free(a->files);
    free(a->stages);
    free(a->links);
    free(a->layers);
    free(a->ops);
    free(a->layer_ops);
    free(a->allreduce_ops);
    pp_gpu_result_free(&a->gpu);
    free(a);
}

/* ======================================================================================== */
/* Text summary                                                                               */
/* ======================================================================================== */

static double ms(double ns) { return ns * 1e-6; }

void pp_analysis_print(const pp_analysis *a, FILE *out)
{
    fprintf(out, "pipeline: %d stage(s)", a->S);
    if (a->schedule[0])
        fprintf(out, ", schedule %s", a->schedule);
    if (a->M)
        fprintf(out, ", %d micro-batch(es)", a->M);
    if (a->v > 1)
        fprintf(out, ", %d chunks per stage", a->v);
    if (a->dp > 1)
        fprintf(out, ", %d data-parallel replicas (replica %d shown)", a->dp, a->replica);
    fprintf(out, "; %zu step(s) analyzed (%lld warm-up skipped), %zu process(es), %llu events",
            a->n_steps, (long long)a->warmup_skipped, a->n_files,
            (unsigned long long)a->events_total);
    fprintf(out, ", %llu dropped\n", (unsigned long long)a->dropped_total);
    fprintf(out, "step time: mean %.3f ms, median %.3f ms, p95 %.3f ms, max %.3f ms\n",
            ms(a->step_ns.mean), ms(a->step_ns.median), ms(a->step_ns.p95), ms(a->step_ns.max));
    fprintf(out, "bubble: %.1f%% of stage time idle; imbalance (max/mean busy) %.3f",
            100 * a->bubble_ratio, a->imbalance);
    /* counts the job did not announce are unknown, never 0 */
    if (a->samples_per_s > 0 || a->tokens_per_s > 0) {
        fprintf(out, "; throughput ");
        if (a->samples_per_s > 0)
            fprintf(out, "%.1f samples/s", a->samples_per_s);
        else
            fprintf(out, "unknown samples/s");
        if (a->tokens_per_s > 0)
            fprintf(out, ", %.0f tokens/s", a->tokens_per_s);
        else
            fprintf(out, ", unknown tokens/s");
    } else {
        fprintf(out, "; throughput unknown (no samples or tokens per step in a config mark)");
    }
    fprintf(out, "\n\n");
    fprintf(out, "%-6s %10s %10s %10s %10s %8s %11s %11s %10s  %s\n", "stage", "fwd ms",
            "bwd ms", "busy ms", "idle ms", "bubble", "fill/drain", "imbalance", "transfer",
            "imbalance caused by");
    for (int s = 0; s < a->S; s++) {
        const pp_astage *g = &a->stages[s];
        double bwd = g->bwd_ns.count ? g->bwd_ns.median
                                     : g->bwd_input_ns.median + g->bwd_weight_ns.median;
        char cause[32] = "-";
        if (g->imbalance_culprit >= 0 && g->imbalance_ns > 0.02 * a->step_ns.mean)
            snprintf(cause, sizeof cause, "stage %d", g->imbalance_culprit);
        fprintf(out, "%-6d %10.3f %10.3f %10.3f %10.3f %7.1f%% %11.3f %11.3f %10.3f  %s\n", s,
                ms(g->fwd_ns.median), ms(bwd), ms(g->busy_ns), ms(g->idle_ns),
                100 * g->bubble_ratio, ms(g->fill_drain_ns), ms(g->imbalance_ns),
                ms(g->transfer_ns), cause);
    }
    int any_ar = 0;
    for (int s = 0; s < a->S; s++)
        any_ar |= a->stages[s].allreduce_ns.count > 0;
    if (any_ar) {
        fprintf(out, "\n%-6s %14s %10s %10s %12s %12s\n", "stage", "all-reduce ms", "p95 ms",
                "MB", "busbw GB/s", "% of step");
        for (int s = 0; s < a->S; s++) {
            const pp_astage *g = &a->stages[s];
            fprintf(out, "%-6d %14.3f %10.3f %10.3f %12.3f %11.1f%%\n", s,
                    ms(g->allreduce_ns.median), ms(g->allreduce_ns.p95),
                    g->allreduce_bytes / 1e6, g->allreduce_busbw_GBps,
                    a->step_ns.mean > 0 ? 100 * g->allreduce_mean_ns / a->step_ns.mean : 0.0);
        }
    }
    if (a->gpu.present) {
        const pp_gpu_result *g = &a->gpu;
        fprintf(out, "\nGPU time: %llu records, %llu projected onto pipeline ranges, %llu "
                     "unattributed; step on the GPU %.3f ms; projected %.3f ms of %.3f ms of GPU "
                     "work per step\n",
                (unsigned long long)g->records, (unsigned long long)g->projected,
                (unsigned long long)g->unattributed, ms(g->step_ns), ms(g->projected_ns),
                ms(g->work_ns));
        fprintf(out, "%-6s %12s %12s %12s %12s %10s %14s\n", "stage", "gpu fwd ms",
                "gpu bwd ms", "gpu busy ms", "host busy ms", "gpu bubble", "launch lag us");
        for (int s = 0; s < g->S && s < a->S; s++) {
            const pp_gpu_stage *x = &g->stages[s];
            fprintf(out, "%-6d %12.3f %12.3f %12.3f %12.3f %9.1f%% %14.1f\n", s,
                    ms(x->fwd_median_ns), ms(x->bwd_median_ns), ms(x->busy_ns),
                    ms(a->stages[s].busy_ns), 100 * x->bubble_ratio, x->launch_lag_ns * 1e-3);
        }
        for (size_t i = 0; i < g->n_devices; i++)
            fprintf(out, "device %u: busy %.3f ms of %.3f ms, utilisation %.1f%%\n",
                    g->devices[i].device, ms(g->devices[i].busy_ns), ms(g->devices[i].span_ns),
                    100 * g->devices[i].utilisation);
        for (size_t i = 0; i < g->n_links; i++)
            fprintf(out, "nccl %d -> %d: %llu sends, %.3f MB, algbw %.3f GB/s, busbw %.3f GB/s\n",
                    g->links[i].src, g->links[i].dst, (unsigned long long)g->links[i].messages,
                    (double)g->links[i].bytes / 1e6, g->links[i].algbw_GBps,
                    g->links[i].busbw_GBps);
    }
    if (a->n_links) {
        fprintf(out, "\n%-12s %-5s %9s %12s %10s %12s %10s %10s\n", "link", "kind", "messages",
                "MB", "GB/s", "latency us", "wait ms", "send ms");
        for (size_t i = 0; i < a->n_links; i++) {
            const pp_alink *l = &a->links[i];
            char name[24];
            snprintf(name, sizeof name, "%d -> %d", l->src, l->dst);
            /* no message timed (or no bytes announced): bandwidth and latency unknown */
            char gbps[16] = "-", lat[16] = "-";
            if (l->timed && l->bandwidth_GBps > 0)
                snprintf(gbps, sizeof gbps, "%.3f", l->bandwidth_GBps);
            if (l->timed)
                snprintf(lat, sizeof lat, "%.1f", l->latency_ns.median * 1e-3);
            fprintf(out, "%-12s %-5s %9llu %12.3f %10s %12s %10.3f %10.3f\n", name,
                    l->grad ? "grad" : "act", (unsigned long long)l->messages,
                    (double)l->bytes / 1e6, gbps, lat, ms(l->wait_ns), ms(l->send_ns));
        }
    }
    /* clocks: only when some were estimated (several hosts, or the profiler's test hook) */
    int estimated = 0;
    for (size_t i = 0; i < a->n_files; i++)
        estimated |= a->files[i].clock_status >= PP_CLOCK_ESTIMATED;
    if (estimated) {
        fprintf(out, "\n%-8s %-16s %14s %12s %16s\n", "rank", "host", "clock offset us",
                "drift ppm", "uncertainty us");
        for (size_t i = 0; i < a->n_files; i++) {
            const pp_afile *f = &a->files[i];
            char rank[16];
            snprintf(rank, sizeof rank, "%d", f->rank >= 0 ? f->rank : (int)i);
            if (f->clock_status == PP_CLOCK_REFERENCE)
                fprintf(out, "%-8s %-16.16s %14s %12s %16s\n", rank, f->host, "reference", "-",
                        "-");
            else if (f->clock_status == PP_CLOCK_ESTIMATED)
                fprintf(out, "%-8s %-16.16s %+14.1f %+12.2f %16.1f\n", rank, f->host,
                        f->clock_offset_ns * 1e-3, f->clock_drift * 1e6,
                        f->clock_uncertainty_ns * 1e-3);
            else if (f->clock_status == PP_CLOCK_UNBOUNDED)
                fprintf(out, "%-8s %-16.16s %14s %12s %16s\n", rank, f->host, "unbounded", "-",
                        "not aligned");
        }
    }
    if (a->warnings[0])
        fprintf(out, "\nwarnings:\n%s", a->warnings);
}
