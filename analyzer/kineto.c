/* kineto.c: Kineto (PyTorch profiler) trace JSON -> .pft (pp_kineto.h; mapping in
 * docs/kineto.md). One streaming pass over the JSON (kineto_json.c) writes the CPU ranges, per
 * thread, into a scratch trace out.part, and spills the GPU and CUDA API records into a
 * temporary file; a second pass over the scratch trace writes `out` with its final header (the
 * rank, host and pid are only known at the end) and the spilled records merged in by time, so
 * that the GPU projection's window (pp_gpu.h) finds the ranges they belong to even where Kineto
 * wrote every GPU event after every CPU event. Without GPU records there is nothing to merge:
 * the scratch trace gets its final header in place and becomes `out` (finish_in_place).
 *
 * CPU events (sorted by start in Kineto's output, nearly) pass through a bounded min-heap that
 * restores their order; a trace that overflows it is written out in sorted runs (torch writes
 * its Python tracer's events after every CPU op: a run of their own) and merged back by time at
 * the end. Each thread keeps a stack of its open ranges: an event that ends before
 * the range it starts in is nested (PUSH/POP), one that outlives it (gloo:send and gloo:recv
 * outlive the action they start in) becomes a START/END pair with a range id.
 *
 * Begin and end events ("ph" "B" and "E", which Kineto does not write but other Chrome traces
 * do) are paired per thread, an end with the latest begin of its name (the latest begin when it
 * has none), and go in as one complete event. A file of events one after another (JSON lines)
 * is read as their array: PaddlePaddle's pipeline timeline (pp_configs.profiling) is such a
 * file of begins and ends, in milliseconds. */
#include "kineto_json.h"
#include "pp_analyzer.h"
#include "pp_kineto.h"
#include "pp_trace.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

enum {
    THREAD_BUF = 16 * 1024,   /* a thread's EVENTS block is written when this full */
    META_BUF = 256 * 1024,
    GPU_BUF = 64 * 1024,
    MAX_OPEN_TOTAL = 1 << 18, /* open ranges (nested and async) over all threads */
    NAME_BYTES_MAX = 64 << 20,
    SMALL = 256
};

/* A process group's ranks kept from distributedInfo: a pipeline of more ranks than the analysis
 * has stages is not one (pp_analyzer.h's PP_ANALYSIS_MAX_STAGES). */
enum { PIPE_CAP = 4096 };
/* DeepSpeed's pipeline engine, as its methods' stack events name it */
#define DS_ENGINE "deepspeed/runtime/pipe/engine.py("
enum { DS_ENGINE_LEN = sizeof DS_ENGINE - 1, DS_GROUPS = 16 };

/* "[memory]" events: device types and ids kept apart (the rest are malformed) */
enum { MEM_DEVICE_TYPES = 16, MEM_DEVICE_IDS = 256 };
#define MEM_BYTES_MAX 4.0e18 /* an allocator total beyond this is not a real one */

/* Times: microseconds (floats) in the file, up to this many; ns in the trace. */
#define TS_MAX_US 4.0e15
#define DUR_MAX_US 1.0e12

/* ---- names: the file's strings, each defined once in the trace ---- */
typedef struct name_entry {
    uint64_t off;
    uint32_t len, hash;
} name_entry;

typedef struct names {
    char *bytes;
    size_t n_bytes, cap_bytes;
    name_entry *e;   /* by id - 1 */
    size_t n, cap;
    uint32_t *slots; /* open addressing: id, 0 empty */
    size_t n_slots;
    uint32_t capped; /* the shared id of names beyond the table, 0 until needed */
} names;

typedef struct open_entry {
    uint64_t t1;
    uint64_t id; /* async: the range id; nested: the domain */
} open_entry;

typedef struct kthread {
    uint32_t tid;
    uint8_t *buf;
    size_t len;
    uint32_t n;
    uint64_t ts_first, ts_last; /* of the records in buf */
    open_entry *stack; /* nested ranges, ends non-increasing from the bottom */
    size_t depth, cap_stack;
    open_entry *ends;  /* async ranges: a min-heap by end */
    size_t n_ends, cap_ends;
    struct kbegin {    /* "B" events not ended yet, the latest last */
        uint64_t t0, tol;
        uint32_t name, domain;
        int named;     /* the begin has a name (an end's name must then match it) */
    } *begins;
    size_t n_begins, cap_begins;
    uint64_t tl_end; /* the latest end of its Paddle timeline ops */
    uint32_t proc;   /* another tool's trace: the name id of its process's key, 0 none */
} kthread;

/* One CPU event waiting in the reorder window. */
typedef struct kev {
    uint64_t t0, t1, seq;
    uint32_t thread, name, domain;
    uint32_t mark;
    uint64_t tol; /* ns its end may stick out of its parent's by rounding alone */
    uint64_t counter; /* != 0: a sample of this counter id (on_memory: mark 1, the value an
                         int64; on_counter: mark 2, a double's bits) */
    int64_t value;
} kev;

/* The fields of one traceEvents element, as far as the converter reads them. */
typedef struct kin {
    char ph;
    int has_ts, has_dur, pid_num, tid_num, bad;
    double ts, dur, pid, tid;
    double correlation, device, stream, bytes, cbid;
    int has_corr, has_device, has_stream, has_bytes, has_cbid;
    /* "[memory]" events (profile_memory=True): the allocator's totals and the device */
    double mem_alloc, mem_reserved, mem_dtype, mem_did;
    int has_alloc, has_reserved, has_dtype, has_did;
    char cat[SMALL], tid_str[SMALL], arg_name[SMALL];
    /* async events' "id" (a number as text), or "id2"'s "local" or "global", and "scope" (cut
     * to 63 bytes: the key hashes them, and Chrome's ids are numbers or hexadecimal text) */
    char aid[64], scope[64];
    char aid_kind; /* 0 none, 'i' "id", 'l' "id2" local, 'g' "id2" global */
    int n_cargs, cargs_more;
    char name[KJ_STR_CAP + 1];
    size_t name_len;
    /* a counter ("C") event's series: the numbers among its args (those of an event whose
     * "ph" is "C" or not read yet), the first 8 of them */
    struct carg {
        char key[64];
        double v;
    } cargs[8];
    char pid_str[64]; /* a "pid" that is text (Ray's timeline: "Node 10.0.0.1"), cut to 63 */
} kin;

typedef struct conv {
    const pp_kineto_options *o;
    pp_kineto_stats *s;
    kj_lexer *lx;
    pp_trace_writer *w;
    names nm;
    uint32_t domain_cat[PP_KINETO_MAX_DOMAINS + 1]; /* domain id -> its name's id */
    uint32_t n_domains;
    kthread *threads;
    size_t n_threads;
    uint32_t thread_slots[2 * PP_KINETO_MAX_THREADS]; /* index + 1, 0 empty */
    uint8_t *meta;
    size_t meta_len;
    uint32_t meta_n;
    kev *heap;  /* the window's events that came out of order (docs/kineto.md "Order") */
    size_t n_heap, window;
    kev *ring;  /* and those that came in order: sorted, a ring of `window` */
    size_t r_head, r_n;
    uint64_t seq, watermark, range_id;
    int watermark_set;
    size_t open_total;
    size_t begins_total; /* "B" events waiting over all threads (PP_KINETO_MAX_BEGINS) */
    FILE *spill[2]; /* the API records, the GPU records: each in the order of its kind's events */
    uint64_t spilled;
    /* sorted runs (docs/kineto.md "Order"): once the window first fills, the events it releases
     * go in order to a temporary file instead of to process(), and an event earlier than the
     * last one released begins the next run (the window emptied into the current one first);
     * at the end the runs are merged by time into process(). torch writes its Python tracer's
     * events (with_stack: the modules, the schedules' functions) after every CPU op. */
    FILE *runs;
    uint64_t run_start[PP_KINETO_MAX_RUNS + 1]; /* each run's first event's index in the file */
    int n_runs;                                 /* runs begun; 0: nothing spilled */
    int no_runs;                                /* no temporary file could be made */
    uint64_t run_events;
    /* header */
    int32_t rank;
    uint32_t pid;
    int have_pid;
    uint64_t t_min;
    double base_ns;
    char host[64], exe[96];
    /* distributedInfo's process groups (pg_walk): the pipeline's, where one is named so */
    int32_t pg_ranks[PIPE_CAP], pipe_ranks[PIPE_CAP];
    size_t pipe_n;
    size_t other_min; /* the smallest other group of more than one rank, 0 when none */
    int pipe_named;
    double world_size; /* the job's ranks: world_size, or its largest group's when larger */
    /* DeepSpeed (its engine's stack events seen): the groups without a pipeline description
     * whose ranks step evenly (first, stride, count), the first DS_GROUPS of them */
    int deepspeed, ds_recv_act, ds_send_act;
    struct even_group {
        int32_t first, stride, n;
    } even[DS_GROUPS];
    size_t n_even;
    int saw_events;
    /* Paddle's pipeline timeline: the thread of its events (tid = stage + 1), and how many
     * threads they were on (0, 1, 2 = several: a merged file) */
    uint32_t tl_tid;
    int tl_tids;
    kin ev;
    pp_status err;
    /* memory counters defined (on_memory): bit per (device type, device id, reserved) */
    uint8_t mem_defined[MEM_DEVICE_TYPES * MEM_DEVICE_IDS * 2 / 8];
    uint32_t mem_domain;
    /* another tool's Chrome trace (stats any_category): every category read, threads by process
     * and thread, and a bit per name id of the thread keys that a thread_name event named */
    int any_cat;
    uint8_t *named;
    /* and their processes' and threads' names (process_name, thread_name events): a table from
     * a process's key (the name id of "pid P", or of its text pid) and one from a thread's tid
     * to the name's id, for the names given when the file holds several processes */
    struct pname {
        uint32_t key, name; /* key 0: an empty slot */
    } proc_names[2 * PP_KINETO_MAX_THREADS], thread_names[2 * PP_KINETO_MAX_THREADS];
    size_t n_proc_names, n_thread_names;
    /* async events ("b" and "e", "S" and "F") waiting for their end: a pool (free ones linked
     * by prev) and a table from an id's key to the latest begin open with it; begins_total
     * counts them too */
    struct kasync {
        uint64_t key, t0, tol;
        uint32_t name, domain, thread;
        uint32_t prev; /* the begin open before it with the same key (pool index + 1), 0 none */
    } *async;
    size_t n_async, cap_async, async_open;
    uint32_t async_free; /* pool index + 1 of a free entry, 0 none */
    struct aslot {
        uint64_t key;
        uint32_t top; /* pool index + 1, 0: an empty slot */
    } *aslots;
    uint64_t async_seed;
    /* another tool's counters ("C" events): each (process, category, name, id, series) a
     * counter, its id from FOREIGN_COUNTER_BASE; the table from its key to its id */
    struct cslot {
        uint64_t key;
        uint32_t id; /* 0: an empty slot */
    } cslots[2 * PP_KINETO_MAX_COUNTERS];
    uint32_t n_counters;
    /* another tool's reading tried first (convert_input): it stops (restart) at the first event
     * torch's reading reads; spec_foreign: it met one that torch's counts as another tool's */
    int speculative, restart, spec_foreign;
    int became_torch; /* torch's header came first: this reading turned into torch's */
} conv;

static void problem(conv *c, const char *fmt, const char *arg)
{
    if (!c->s->problem[0])
        snprintf(c->s->problem, sizeof c->s->problem, fmt, arg);
}

/* ---- names ---- */

/* The names' table hash: 8 bytes a step (a byte at a time, FNV-1a, was 5% of converting a
 * trace with kernels, whose names run to hundreds of characters); only the slots depend on it. */
static uint32_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15u ^ (uint64_t)n, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdu;
        h ^= h >> 32;
    }
    w = 0;
    for (unsigned k = 0; i < n; i++, k += 8) /* (a memcpy of n - i bytes is a call) */
        w |= (uint64_t)(uint8_t)s[i] << k;
    h = (h ^ w) * 0xc4ceb9fe1a85ec53u;
    h ^= h >> 29;
    return (uint32_t)h;
}

static int meta_flush(conv *c);

/* Appends a definition to the META buffer (written before the next EVENTS block). */
static int meta_room(conv *c, size_t need)
{
    if (c->meta_len + need > META_BUF && !meta_flush(c))
        return 0;
    return 1;
}

static int names_grow(names *t)
{
    size_t ns = t->n_slots ? t->n_slots * 2 : 1024;
    uint32_t *sl = calloc(ns, sizeof *sl);
    if (!sl)
        return 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t k = t->e[i].hash & (ns - 1);
        while (sl[k])
            k = (k + 1) & (ns - 1);
        sl[k] = (uint32_t)(i + 1);
    }
    free(t->slots);
    t->slots = sl;
    t->n_slots = ns;
    return 1;
}

/* The string id of s (defined in the trace at its first use); 0 when out of memory. */
/* Whether s[0 .. len) holds pat[0 .. n). */
static int holds(const char *s, size_t len, const char *pat, size_t n)
{
    for (const char *p = s, *end = s + len; (size_t)(end - p) >= n;) {
        const char *q = memchr(p, pat[0], (size_t)(end - p) - n + 1);
        if (!q)
            return 0;
        if (memcmp(q, pat, n) == 0)
            return 1;
        p = q + 1;
    }
    return 0;
}

static uint32_t name_id(conv *c, const char *s, size_t len)
{
    names *t = &c->nm;
    uint32_t h = hash_bytes(s, len);
    if (t->n_slots) {
        for (size_t k = h & (t->n_slots - 1); t->slots[k]; k = (k + 1) & (t->n_slots - 1)) {
            const name_entry *e = &t->e[t->slots[k] - 1];
            if (e->hash == h && e->len == len && memcmp(t->bytes + e->off, s, len) == 0)
                return t->slots[k];
        }
    }
    if (t->capped || t->n >= PP_KINETO_MAX_NAMES || t->n_bytes + len > NAME_BYTES_MAX) {
        c->s->names_capped++;
        if (t->capped)
            return t->capped;
        static const char k_capped[] = "(names beyond the importer's table)";
        /* a definition outside the table (never looked up); no name is added after it */
        uint32_t id = (uint32_t)t->n + 1;
        if (!meta_room(c, 64 + sizeof k_capped))
            return 0;
        c->meta_len += pp_trace_enc_string(c->meta + c->meta_len, META_BUF - c->meta_len, id,
                                           k_capped, sizeof k_capped - 1);
        c->meta_n++;
        t->capped = id;
        return id;
    }
    if ((t->n + 1) * 2 > t->n_slots && !names_grow(t))
        return 0;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        name_entry *e = pp_realloc_array(t->e, cap, sizeof *e);
        if (!e)
            return 0;
        t->e = e;
        t->cap = cap;
    }
    if (t->n_bytes + len + 1 > t->cap_bytes) {
        size_t cap = t->cap_bytes ? t->cap_bytes * 2 : 64 * 1024;
        while (cap < t->n_bytes + len + 1)
            cap *= 2;
        char *b = realloc(t->bytes, cap);
        if (!b)
            return 0;
        t->bytes = b;
        t->cap_bytes = cap;
    }
    if (!meta_room(c, 32 + len))
        return 0;
    memcpy(t->bytes + t->n_bytes, s, len);
    t->e[t->n] = (name_entry){.off = t->n_bytes, .len = (uint32_t)len, .hash = h};
    t->n_bytes += len;
    uint32_t id = (uint32_t)++t->n;
    size_t k = h & (t->n_slots - 1);
    while (t->slots[k])
        k = (k + 1) & (t->n_slots - 1);
    t->slots[k] = id;
    c->meta_len += pp_trace_enc_string(c->meta + c->meta_len, META_BUF - c->meta_len, id, s, len);
    c->meta_n++;
    if (holds(s, len, DS_ENGINE, DS_ENGINE_LEN)) {
        /* a DeepSpeed pipeline engine's stack events, and whether the process receives or
         * sends activations: where its stage lies (pipe_header) */
        c->deepspeed = 1;
        c->ds_recv_act |= holds(s, len, "): _exec_recv_activations", 25);
        c->ds_send_act |= holds(s, len, "): _exec_send_activations", 25);
    }
    return id;
}

static int meta_flush(conv *c)
{
    if (!c->meta_len)
        return 1;
    pp_status st = pp_trace_writer_block(c->w, PP_BLOCK_META, 0, c->meta, c->meta_len, c->meta_n);
    c->meta_len = 0;
    c->meta_n = 0;
    if (st != PP_OK) {
        c->err = st;
        return 0;
    }
    return 1;
}

/* The domain of a category (one per category name, PP_KINETO_MAX_DOMAINS at most: later ones
 * share the last); 0 when out of memory. */
static uint32_t domain_of(conv *c, const char *cat)
{
    if (!cat[0])
        cat = "(no category)"; /* another tool's events may have none */
    uint32_t name = name_id(c, cat, strlen(cat));
    if (!name)
        return 0;
    for (uint32_t d = 1; d <= c->n_domains; d++)
        if (c->domain_cat[d] == name)
            return d;
    if (c->n_domains == PP_KINETO_MAX_DOMAINS)
        return c->n_domains;
    if (!meta_room(c, sizeof(pp_rec_domain)))
        return 0;
    uint32_t d = ++c->n_domains;
    c->domain_cat[d] = name;
    pp_rec_domain r = {.h = {.type = PP_REC_DOMAIN, .size = sizeof r}, .id = d, .name = name};
    memcpy(c->meta + c->meta_len, &r, sizeof r);
    c->meta_len += sizeof r;
    c->meta_n++;
    return d;
}

/* ---- threads ---- */

static int thread_flush(conv *c, kthread *t)
{
    if (!t->len)
        return 1;
    if (!meta_flush(c))
        return 0;
    pp_status st = pp_trace_writer_block(c->w, PP_BLOCK_EVENTS, t->tid, t->buf, t->len, t->n);
    t->len = 0;
    t->n = 0;
    if (st != PP_OK) {
        c->err = st;
        return 0;
    }
    return 1;
}

/* t's buffer is full: it is written, and so is every other thread's that holds a record from
 * before t's last, so that the blocks of a thread with few events (the process group's, whose
 * collectives the analysis gives to the step open at their time) follow the busy threads' in
 * the file instead of coming at its end, after their steps were finalized. */
static int thread_flush_full(conv *c, kthread *t)
{
    uint64_t upto = t->ts_last;
    if (!thread_flush(c, t))
        return 0;
    for (size_t i = 0; i < c->n_threads; i++) {
        kthread *o = &c->threads[i];
        if (o != t && o->len && o->ts_first <= upto && !thread_flush(c, o))
            return 0;
    }
    return 1;
}

static int thread_emit(conv *c, kthread *t, const void *rec, size_t size)
{
    if (t->len + size > THREAD_BUF && !thread_flush_full(c, t))
        return 0;
    pp_rec_header h;
    memcpy(&h, rec, sizeof h);
    if (!t->len)
        t->ts_first = h.ts;
    t->ts_last = h.ts;
    memcpy(t->buf + t->len, rec, size);
    t->len += size;
    t->n++;
    return 1;
}

/* The thread of a trace tid; NULL (counted) beyond PP_KINETO_MAX_THREADS or out of memory. */
static kthread *thread_get(conv *c, uint32_t tid, uint32_t *index)
{
    size_t ns = sizeof c->thread_slots / sizeof c->thread_slots[0];
    size_t k = (tid * 2654435761u) & (ns - 1);
    for (; c->thread_slots[k]; k = (k + 1) & (ns - 1))
        if (c->threads[c->thread_slots[k] - 1].tid == tid) {
            *index = c->thread_slots[k] - 1;
            return &c->threads[*index];
        }
    if (c->n_threads == PP_KINETO_MAX_THREADS)
        return NULL;
    kthread *t = &c->threads[c->n_threads];
    memset(t, 0, sizeof *t);
    t->tid = tid;
    if (!(t->buf = malloc(THREAD_BUF)))
        return NULL;
    c->thread_slots[k] = (uint32_t)++c->n_threads;
    *index = (uint32_t)(c->n_threads - 1);
    return t;
}

/* The trace tid of an event's "tid": a number as it is, a name ("PyTorch Profiler") a stable
 * id of its own above 2^31, and so a whole number that is no small thread id (py-spy writes
 * pthread_self(), near 2^47; a tid below 0); UINT32_MAX for one that is not a whole number. */
static uint32_t tid_of_scoped(conv *c, const kin *e, int process);

/* A numeric "tid" as text: 0 when it is not a whole number within 64 bits. */
static int tid_text(const kin *e, char *buf, size_t cap)
{
    if (!(e->tid >= -9223372036854775808.0 && e->tid < 9223372036854775808.0) ||
        e->tid != floor(e->tid))
        return 0;
    return snprintf(buf, cap, "%lld", (long long)e->tid) > 0;
}

static uint32_t tid_of(conv *c, const kin *e)
{
    return tid_of_scoped(c, e, 0);
}

/* tid_of, or with process set (another tool's counters, which belong to their process) the
 * track of the event's process, whatever its tid. */
static uint32_t tid_of_scoped(conv *c, const kin *e, int process)
{
    if (c->any_cat) {
        /* a Chrome trace of several processes (TensorFlow's host and devices, one per JAX
         * device) numbers their threads each from 1: a thread is its process's and its tid's */
        char key[2 * SMALL + 16], tid[SMALL];
        if (process) {
            tid[0] = '\0';
        } else if (e->tid_num) {
            if (!tid_text(e, tid, sizeof tid))
                return UINT32_MAX;
        } else if (e->tid_str[0]) {
            snprintf(tid, sizeof tid, "%s", e->tid_str);
        } else {
            tid[0] = '\0'; /* an instant of the process's or the global scope ("s": "p", "g") */
        }
        int pid = e->pid_num && e->pid >= 0 && e->pid < 4294967296.0 && e->pid == floor(e->pid);
        int named = !e->pid_num && e->pid_str[0]; /* two processes' "worker 1" are two threads */
        int n = pid && tid[0] ? snprintf(key, sizeof key, "pid %u tid %s", (unsigned)e->pid, tid)
                : pid         ? snprintf(key, sizeof key, "pid %u", (unsigned)e->pid)
                : named && tid[0] ? snprintf(key, sizeof key, "%s tid %s", e->pid_str, tid)
                : named       ? snprintf(key, sizeof key, "%s", e->pid_str)
                : tid[0]      ? snprintf(key, sizeof key, "tid %s", tid)
                              : snprintf(key, sizeof key, "global");
        uint32_t id = name_id(c, key, (size_t)n < sizeof key ? (size_t)n : sizeof key - 1);
        return id ? 0x80000000u | id : UINT32_MAX;
    }
    char text[32];
    const char *name = e->tid_str;
    if (e->tid_num) {
        if (e->tid >= 0 && e->tid < 2147483648.0 && e->tid == floor(e->tid))
            return (uint32_t)e->tid;
        if (!tid_text(e, text, sizeof text))
            return UINT32_MAX;
        name = text;
    }
    if (!name[0])
        return UINT32_MAX;
    uint32_t id = name_id(c, name, strlen(name));
    return id ? 0x80000000u | id : UINT32_MAX;
}

static void heap_end_push(kthread *t, open_entry x)
{
    size_t i = t->n_ends++;
    t->ends[i] = x;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (t->ends[p].t1 <= t->ends[i].t1)
            break;
        open_entry tmp = t->ends[p];
        t->ends[p] = t->ends[i];
        t->ends[i] = tmp;
        i = p;
    }
}

static open_entry heap_end_pop(kthread *t)
{
    open_entry top = t->ends[0];
    t->ends[0] = t->ends[--t->n_ends];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < t->n_ends && t->ends[l].t1 < t->ends[m].t1)
            m = l;
        if (r < t->n_ends && t->ends[r].t1 < t->ends[m].t1)
            m = r;
        if (m == i)
            break;
        open_entry tmp = t->ends[m];
        t->ends[m] = t->ends[i];
        t->ends[i] = tmp;
        i = m;
    }
    return top;
}

/* Closes, in time order, every range of t that ends by `ts` (all of them for UINT64_MAX). */
static int thread_advance(conv *c, kthread *t, uint64_t ts)
{
    for (;;) {
        uint64_t a = t->depth ? t->stack[t->depth - 1].t1 : UINT64_MAX;
        uint64_t b = t->n_ends ? t->ends[0].t1 : UINT64_MAX;
        if (!t->depth && !t->n_ends)
            return 1;
        if (a <= b && t->depth && a <= ts) {
            open_entry x = t->stack[--t->depth];
            pp_rec_pop r = {.h = {.type = PP_REC_POP, .size = sizeof r, .tid = t->tid, .ts = x.t1},
                            .domain = (uint32_t)x.id};
            c->open_total--;
            if (!thread_emit(c, t, &r, sizeof r))
                return 0;
        } else if (t->n_ends && b <= ts && (b < a || !t->depth)) {
            open_entry x = heap_end_pop(t);
            pp_rec_end r = {.h = {.type = PP_REC_END, .size = sizeof r, .tid = t->tid, .ts = x.t1},
                            .range_id = x.id};
            c->open_total--;
            if (!thread_emit(c, t, &r, sizeof r))
                return 0;
        } else {
            return 1;
        }
    }
}

static int grow_entries(open_entry **p, size_t *cap, size_t max)
{
    size_t n = *cap ? *cap * 2 : 16;
    if (n > max)
        n = max;
    open_entry *x = pp_realloc_array(*p, n, sizeof *x);
    if (!x)
        return 0;
    *p = x;
    *cap = n;
    return 1;
}

/* One CPU event, in start order: a mark, a nested range or an async one. */
static int process(conv *c, const kev *e)
{
    kthread *t = &c->threads[e->thread];
    if (!thread_advance(c, t, e->t0))
        return 0;
    if (e->counter) {
        pp_rec_counter m = {.h = {.type = PP_REC_COUNTER, .size = sizeof m, .tid = t->tid,
                                  .ts = e->t0},
                            .counter_id = e->counter,
                            .domain = e->domain,
                            .kind = e->mark == 2 ? PP_COUNTER_FLOAT64 : PP_COUNTER_INT64,
                            .value = (uint64_t)e->value};
        if (e->mark == 2)
            c->s->counter_samples++;
        else
            c->s->memory_samples++;
        return thread_emit(c, t, &m, sizeof m);
    }
    pp_rec_range r = {.h = {.type = PP_REC_PUSH, .size = sizeof r, .tid = t->tid, .ts = e->t0},
                      .domain = e->domain,
                      .message = e->name};
    if (e->mark) {
        r.h.type = PP_REC_MARK;
        c->s->marks++;
        return thread_emit(c, t, &r, sizeof r);
    }
    /* a child whose end sticks out of its parent's by no more than the times' own rounding
     * still nests, ending with it (the thread's records must stay in time order): Kineto's
     * microsecond doubles near 1.7e15 (absolute timestamps) hold quarter microseconds only */
    uint64_t t1 = e->t1;
    if (t->depth && t1 > t->stack[t->depth - 1].t1 && t1 - t->stack[t->depth - 1].t1 <= e->tol)
        t1 = t->stack[t->depth - 1].t1;
    int nested = !t->depth || t1 <= t->stack[t->depth - 1].t1;
    if (c->open_total >= MAX_OPEN_TOTAL) {
        c->s->dropped_caps++;
        problem(c, "%s", "too many ranges open at once (a cap of the importer): some dropped");
        return 1;
    }
    if (nested) {
        if (t->depth == PP_KINETO_MAX_DEPTH ||
            (t->depth == t->cap_stack &&
             !grow_entries(&t->stack, &t->cap_stack, PP_KINETO_MAX_DEPTH))) {
            c->s->dropped_caps++;
            problem(c, "%s", "ranges nested deeper than 1024: the deeper ones dropped");
            return 1;
        }
        t->stack[t->depth++] = (open_entry){.t1 = t1, .id = e->domain};
    } else {
        if (t->n_ends == PP_KINETO_MAX_OPEN_ASYNC ||
            (t->n_ends == t->cap_ends &&
             !grow_entries(&t->ends, &t->cap_ends, PP_KINETO_MAX_OPEN_ASYNC))) {
            c->s->dropped_caps++;
            problem(c, "%s", "too many overlapping ranges open on a thread: some dropped");
            return 1;
        }
        r.h.type = PP_REC_START;
        r.range_id = ++c->range_id;
        heap_end_push(t, (open_entry){.t1 = e->t1, .id = r.range_id});
        c->s->async_ranges++;
    }
    c->open_total++;
    c->s->ranges++;
    return thread_emit(c, t, &r, sizeof r);
}

/* ---- the reorder window: by (start, longer first, arrival) ----
 * Two parts: the events that arrive in order (none before the latest of them) are appended to a
 * ring, which is therefore sorted; the others go into a min-heap. The window's least event is the
 * lesser of the ring's first and the heap's top. A trace written in order (most of torch's CPU
 * ops) never touches the heap: each event is written once and read once, where a heap of the
 * whole window cost a tenth of a conversion in its sift-downs. */

static int kev_less(const kev *a, const kev *b)
{
    if (a->t0 != b->t0)
        return a->t0 < b->t0;
    if (a->t1 != b->t1)
        return a->t1 > b->t1; /* the enclosing range of two that start together first */
    return a->seq < b->seq;
}

/* The least event, out of the heap. Floyd's way: the hole at the root goes down to a leaf by
 * the lesser child (one comparison a level), then the last event comes up from there to its
 * place (a step or two: it is among the latest). Half the comparisons of a plain sift-down, and
 * each event moves once instead of being swapped (64 bytes each, the window larger than the
 * caches). kev_less is a strict total order (arrival breaks ties), so the events come out in the
 * same order whatever the heap's inner arrangement. */
static kev heap_pop(conv *c)
{
    kev *h = c->heap, top = h[0];
    size_t n = --c->n_heap, i = 0;
    if (n == 0)
        return top;
    for (size_t l; (l = 2 * i + 1) < n; ) {
        size_t m = l + 1 < n && kev_less(&h[l + 1], &h[l]) ? l + 1 : l;
        h[i] = h[m];
        i = m;
    }
    kev last = h[n]; /* up from the hole to its place */
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!kev_less(&last, &h[parent]))
            break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = last;
    return top;
}

enum { RUN_IO_BYTES = 512 * 1024 }; /* the runs' write buffer; their read buffers together */

/* An event released by the window into the current run. */
static int run_write(conv *c, const kev *e)
{
    if (fwrite(e, sizeof *e, 1, c->runs) != 1) {
        c->err = PP_ERR(PP_ERR_IO, "kineto: writing the events' temporary file failed");
        return 0;
    }
    c->run_events++;
    return 1;
}

/* Releases the window's earliest event: into the runs once they have begun (the first time the
 * window is full they begin), else to process() (the end of a file that never filled it). */
static int heap_take_one(conv *c, int spill_it)
{
    if (spill_it && c->n_runs == 0 && !c->no_runs) {
        /* without a temporary file (none can be made: $TMPDIR missing or not writable) the
         * window alone orders the events, and events further back are dropped, counted and
         * said */
        if ((c->runs = pp_scratch_file("pprof-kineto"))) {
            setvbuf(c->runs, NULL, _IOFBF, RUN_IO_BYTES); /* fewer system calls; stdio's if not */
            c->run_start[0] = 0;
            c->n_runs = 1;
        } else {
            c->no_runs = 1;
        }
    }
    kev e;
    if (c->r_n && (!c->n_heap || kev_less(&c->ring[c->r_head], &c->heap[0]))) {
        e = c->ring[c->r_head];
        c->r_head = c->r_head + 1 == c->window ? 0 : c->r_head + 1;
        c->r_n--;
    } else {
        e = heap_pop(c);
    }
    c->watermark = e.t0;
    c->watermark_set = 1;
    return c->n_runs ? run_write(c, &e) : process(c, &e);
}

static int enqueue(conv *c, kev e)
{
    if (c->watermark_set && e.t0 < c->watermark) {
        if (c->no_runs) {
            c->s->dropped_late++;
            problem(c, "%s",
                    "events further out of order than the reorder window, and no temporary file "
                    "for sorted runs could be made (TMPDIR): dropped");
            return 1;
        }
        if (c->n_runs >= PP_KINETO_MAX_RUNS) {
            c->s->dropped_late++;
            problem(c, "%s",
                    "events out of order in more runs than the importer merges: the later "
                    "runs' earlier events dropped");
            return 1;
        }
        /* the window's events all follow the last one released: the current run's rest */
        while (c->n_heap + c->r_n)
            if (!heap_take_one(c, 1))
                return 0;
        c->run_start[c->n_runs++] = c->run_events;
        c->watermark_set = 0;
    }
    e.seq = c->seq++;
    size_t tail = c->r_head + c->r_n; /* the ring's next slot, and its last event before it */
    tail -= tail >= c->window ? c->window : 0;
    if (!c->r_n || !kev_less(&e, &c->ring[tail ? tail - 1 : c->window - 1])) {
        c->ring[tail] = e;
        c->r_n++;
    } else {
        size_t i = c->n_heap++;
        c->heap[i] = e;
        while (i > 0) {
            size_t p = (i - 1) / 2;
            if (!kev_less(&c->heap[i], &c->heap[p]))
                break;
            kev tmp = c->heap[p];
            c->heap[p] = c->heap[i];
            c->heap[i] = tmp;
            i = p;
        }
    }
    if (c->n_heap + c->r_n >= c->window)
        return heap_take_one(c, 1);
    return 1;
}

/* Merges the runs by time into process(): each run's next events in its share of a buffer of
 * RUN_IO_BYTES, the earliest head first (a linear choice: the runs are few, two for a torch
 * trace with stacks). */
typedef struct run_head {
    kev *buf;
    size_t i, n, cap;
    uint64_t next, end; /* the run's next event to read, its end (event indices) */
} run_head;

static int run_fill(conv *c, run_head *h)
{
    size_t want = h->end - h->next < h->cap ? (size_t)(h->end - h->next) : h->cap;
    h->i = h->n = 0;
    if (!want)
        return 1;
    size_t bytes = want * sizeof(kev);
    ssize_t got = pread(fileno(c->runs), h->buf, bytes, (off_t)(h->next * sizeof(kev)));
    if (got != (ssize_t)bytes) {
        c->err = PP_ERR(PP_ERR_IO, "kineto: reading the events' temporary file failed");
        return 0;
    }
    h->n = want;
    h->next += want;
    return 1;
}

static int merge_runs(conv *c)
{
    if (fflush(c->runs) != 0) {
        c->err = PP_ERR(PP_ERR_IO, "kineto: writing the events' temporary file failed");
        return 0;
    }
    int k = c->n_runs;
    c->s->runs = (uint32_t)k;
    c->run_start[k] = c->run_events;
    run_head *h = calloc((size_t)k, sizeof *h);
    size_t cap = RUN_IO_BYTES / sizeof(kev) / (size_t)k;
    kev *bufs = malloc((size_t)k * cap * sizeof *bufs);
    if (!h || !bufs) {
        free(h);
        free(bufs);
        return 0;
    }
    int ok = 1;
    for (int r = 0; r < k && ok; r++) {
        h[r].buf = bufs + (size_t)r * cap;
        h[r].cap = cap;
        h[r].next = c->run_start[r];
        h[r].end = c->run_start[r + 1];
        ok = run_fill(c, &h[r]);
    }
    while (ok) {
        run_head *b = NULL;
        for (int r = 0; r < k; r++)
            if (h[r].i < h[r].n && (!b || kev_less(&h[r].buf[h[r].i], &b->buf[b->i])))
                b = &h[r];
        if (!b)
            break;
        ok = process(c, &b->buf[b->i++]);
        if (ok && b->i == b->n)
            ok = run_fill(c, b);
    }
    free(bufs);
    free(h);
    return ok;
}

/* ---- events ---- */

/* PaddlePaddle's profiler (paddle.profiler, export_chrome_tracing) writes its host events
 * under categories of its own: its operators and their inner steps, the user's RecordEvent
 * ranges, each layer's forward (named by its class), the optimizer's step, its ProfileStep#N. */
static int is_paddle_cat(const char *cat)
{
    if (cat[0] < 'A' || cat[0] > 'Z')
        return 0; /* all of them capitalised, torch's categories not (but Runtime): one test */
    static const char *const k[] = {"Operator",     "OperatorInner", "UserDefined",
                                    "PythonUserDefined", "PythonOp",  "Forward",
                                    "Backward",     "Optimization",  "Dataloader",
                                    "ProfileStep",  "Communication", "DygraphKernelLaunch",
                                    "StaticKernelLaunch"};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (strcmp(cat, k[i]) == 0)
            return 1;
    return 0;
}

static int is_cpu_cat(const char *cat)
{
    static const char *const k[] = {"cpu_op", "user_annotation", "python_function",
                                    "cpu_instant_event", "python", "Runtime"};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (strcmp(cat, k[i]) == 0)
            return 1;
    return is_paddle_cat(cat);
}

/* PaddlePaddle's pipeline timeline (fleet's PipelineParallel with pp_configs.profiling): begin
 * and end events of each micro-batch's forward and backward, their "ts" in milliseconds
 * (int(time.time() * 1000)), not the microseconds of a Chrome trace. */
static int is_timeline_cat(const char *cat)
{
    return (cat[0] == 'p' && strcmp(cat, "pipeline timeline") == 0) ||
           (cat[0] == 'v' && strcmp(cat, "virtual pipeline timeline") == 0);
}

/* The length of a Paddle event's name without the duration Paddle appends to every name
 * ("forward[291.275 us]", "ProfileStep#1[21.889 ms]"): a final "[<number> <ns|us|ms|s>]". Any
 * other name keeps its length. */
static size_t paddle_name_len(const char *name, size_t len)
{
    if (len < 5 || name[len - 1] != ']')
        return len;
    size_t i = len - 1;
    while (i > 0 && name[i - 1] >= 'a' && name[i - 1] <= 'z')
        i--;
    size_t unit = len - 1 - i;
    if (unit < 1 || unit > 2 || i == 0 || name[i - 1] != ' ')
        return len;
    size_t j = i - 1, digits = 0;
    while (j > 0 && ((name[j - 1] >= '0' && name[j - 1] <= '9') || name[j - 1] == '.'))
        j--, digits++;
    if (!digits || j == 0 || name[j - 1] != '[' || j - 1 == 0)
        return len;
    const char *u = name + i;
    int known = (unit == 2 && (strncmp(u, "ns", 2) == 0 || strncmp(u, "us", 2) == 0 ||
                               strncmp(u, "ms", 2) == 0)) ||
                (unit == 1 && u[0] == 's');
    return known ? j - 1 : len;
}

static int gpu_kind_of(const char *cat)
{
    if (strcmp(cat, "kernel") == 0)
        return PP_GPU_KERNEL;
    if (strcmp(cat, "gpu_memcpy") == 0)
        return PP_GPU_MEMCPY;
    if (strcmp(cat, "gpu_memset") == 0)
        return PP_GPU_MEMSET;
    return 0;
}

/* CUPTI's memcpy kind from Kineto's name ("Memcpy HtoD (Pageable -> Device)"). */
static uint8_t copy_kind_of(const char *name)
{
    static const struct { const char *k; uint8_t v; } m[] = {
        {"HtoD", 1}, {"DtoH", 2}, {"HtoA", 3}, {"AtoH", 4}, {"AtoA", 5},
        {"AtoD", 6}, {"DtoA", 7}, {"DtoD", 8}, {"HtoH", 9}, {"PtoP", 10}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (strstr(name, m[i].k))
            return m[i].v;
    return 0;
}

/* A value as an integer in [0, max], else `dflt`. */
static uint64_t bounded(int has, double v, double max, uint64_t dflt)
{
    if (!has || !(v >= 0) || v > max || v != floor(v))
        return dflt;
    return (uint64_t)v;
}

/* The event's start and end in ns; 0 when its times are missing, not finite or beyond the
 * bounds. */
static int times_of(conv *c, const kin *e, uint64_t *t0, uint64_t *t1, int need_dur,
                    uint64_t *tol)
{
    if (!e->has_ts || !(e->ts >= 0) || !(e->ts <= TS_MAX_US) ||
        (need_dur && (!e->has_dur || !(e->dur >= 0) || !(e->dur <= DUR_MAX_US)))) {
        c->s->malformed++;
        problem(c, "%s", "events with a missing, negative, NaN or huge ts/dur: skipped");
        return 0;
    }
    *t0 = (uint64_t)llround(e->ts * 1000.0);
    *t1 = *t0 + (need_dur ? (uint64_t)llround(e->dur * 1000.0) : 0);
    /* the rounding error of the file's starts and of their products in ns (both a double's ulp
     * each, for the parent and the child): 4 ulps of the start, in ns, and the ns rounding */
    if (tol)
        *tol = (uint64_t)(4000.0 * (nextafter(e->ts, INFINITY) - e->ts)) + 1;
    if (*t0 < c->t_min)
        c->t_min = *t0;
    return 1;
}

static int spill(conv *c, int which, const void *rec, size_t size)
{
    if (!c->spill[which] && !(c->spill[which] = pp_scratch_file("pprof-kineto"))) {
        c->err = PP_ERR(PP_ERR_IO, "kineto: cannot create a temporary file for GPU records");
        return 0;
    }
    if (fwrite(rec, size, 1, c->spill[which]) != 1) {
        c->err = PP_ERR(PP_ERR_IO, "kineto: writing the GPU records' temporary file failed");
        return 0;
    }
    c->spilled++;
    return 1;
}

static int on_gpu(conv *c, const kin *e, int kind)
{
    uint64_t t0, t1;
    if (!times_of(c, e, &t0, &t1, 1, NULL))
        return 1;
    uint32_t name = name_id(c, e->name, e->name_len);
    if (!name)
        return 0;
    pp_rec_gpu g = {.h = {.type = PP_REC_GPU, .size = sizeof g},
                    .kind = (uint8_t)kind,
                    .copy_kind = kind == PP_GPU_MEMCPY ? copy_kind_of(e->name) : 0,
                    .device = (uint32_t)bounded(e->has_device, e->device, 65535,
                                                bounded(e->pid_num, e->pid, 65535, 0)),
                    .stream = (uint32_t)bounded(e->has_stream, e->stream, UINT32_MAX,
                                                bounded(e->tid_num, e->tid, UINT32_MAX, 0)),
                    .correlation = (uint32_t)bounded(e->has_corr, e->correlation, UINT32_MAX, 0),
                    .start = t0,
                    .end = t1,
                    .bytes = kind == PP_GPU_KERNEL ? 0 : bounded(e->has_bytes, e->bytes, 9.0e18, 0),
                    .name = name};
    c->s->gpu++;
    return spill(c, 1, &g, sizeof g);
}

static int on_api(conv *c, const kin *e, int driver)
{
    uint64_t t0, t1;
    if (!times_of(c, e, &t0, &t1, 1, NULL))
        return 1;
    uint32_t tid = tid_of(c, e);
    uint64_t corr = bounded(e->has_corr, e->correlation, UINT32_MAX, 0);
    if (tid == UINT32_MAX || corr == 0) { /* launches nothing the projection can join */
        c->s->skipped_other++;
        return 1;
    }
    pp_rec_api a = {.h = {.type = PP_REC_API, .size = sizeof a},
                    .correlation = (uint32_t)corr,
                    .thread = tid,
                    .cbid = (uint32_t)bounded(e->has_cbid, e->cbid, UINT32_MAX, 0),
                    .driver = (uint32_t)driver,
                    .start = t0,
                    .end = t1};
    c->s->api++;
    return spill(c, 0, &a, sizeof a);
}

/* The event's thread (its index in *index); NULL, counted, when its tid is unusable or past
 * the threads' cap. Its pid becomes the trace's when it is the first. */
static int thread_name(conv *c, uint32_t tid, uint32_t name);
static uint32_t process_key(conv *c, const kin *e);

/* event_thread, or with process set (another tool's counters) the track of the event's
 * process (tid_of_scoped). */
static inline kthread *event_thread_scoped(conv *c, const kin *e, int process, uint32_t *index)
{
    uint32_t tid = tid_of_scoped(c, e, process);
    if (tid == UINT32_MAX) {
        c->s->malformed++;
        problem(c, "%s", "events without a usable tid: skipped");
        return NULL;
    }
    size_t had = c->n_threads;
    kthread *t = thread_get(c, tid, index);
    if (!t) {
        c->s->dropped_caps++;
        problem(c, "%s", "more than 1024 threads: the later threads' events dropped");
        return NULL;
    }
    if (c->any_cat && c->n_threads > had)
        t->proc = process_key(c, e);
    /* another tool's thread that no thread_name event named (yet: a later one renames it) is
     * called by its key, "pid P tid T" */
    if (c->any_cat && c->n_threads > had && c->named &&
        !(c->named[(tid & 0x7fffffffu) / 8] & (1u << (tid & 7))) &&
        !thread_name(c, tid, tid & 0x7fffffffu)) {
        c->err = PP_ERR(PP_ERR_NOMEM, "kineto: out of memory");
        return NULL;
    }
    if (!c->have_pid && e->pid_num && e->pid >= 0 && e->pid <= UINT32_MAX) {
        c->pid = (uint32_t)e->pid;
        c->have_pid = 1;
    }
    return t;
}

static kthread *event_thread(conv *c, const kin *e, uint32_t *index)
{
    return event_thread_scoped(c, e, 0, index);
}

/* The event's name's id (Paddle's duration suffix cut), 0 when out of memory. */
static uint32_t event_name(conv *c, const kin *e)
{
    size_t name_len =
        is_paddle_cat(e->cat) ? paddle_name_len(e->name, e->name_len) : e->name_len;
    return name_id(c, e->name, name_len);
}

static int on_cpu(conv *c, const kin *e, int mark)
{
    uint64_t t0, t1, tol = 1;
    if (!times_of(c, e, &t0, &t1, !mark, &tol))
        return 1;
    uint32_t index;
    if (!event_thread(c, e, &index))
        return 1;
    uint32_t domain = domain_of(c, e->cat);
    uint32_t name = event_name(c, e);
    if (!domain || !name)
        return 0;
    kev k = {.t0 = t0, .t1 = t1, .thread = index, .name = name, .domain = domain,
             .mark = (uint32_t)mark, .tol = tol};
    return enqueue(c, k);
}

/* A begin or end event's time (and its rounding, *tol) and thread; NULL, counted, when either
 * is unusable. */
static kthread *edge_of(conv *c, const kin *e, uint64_t *ts, uint64_t *tol, uint32_t *index)
{
    uint64_t same;
    return times_of(c, e, ts, &same, 0, tol) ? event_thread(c, e, index) : NULL;
}

/* A "B" event: kept on its thread until the "E" that ends it. */
static int on_begin(conv *c, const kin *e)
{
    uint64_t t0, tol = 1;
    uint32_t index;
    kthread *t = edge_of(c, e, &t0, &tol, &index);
    if (!t)
        return 1;
    if (c->begins_total == PP_KINETO_MAX_BEGINS || t->n_begins == PP_KINETO_MAX_DEPTH) {
        c->s->dropped_caps++;
        problem(c, "%s", "too many begin (\"B\") events waiting for their end: some dropped");
        return 1;
    }
    if (t->n_begins == t->cap_begins) {
        size_t cap = t->cap_begins ? 2 * t->cap_begins : 8;
        struct kbegin *p = pp_realloc_array(t->begins, cap, sizeof *p);
        if (!p)
            return 0;
        t->begins = p;
        t->cap_begins = cap;
    }
    uint32_t domain = domain_of(c, e->cat);
    uint32_t name = event_name(c, e);
    if (!domain || !name)
        return 0;
    t->begins[t->n_begins++] = (struct kbegin){.t0 = t0, .tol = tol, .name = name,
                                               .domain = domain, .named = e->name_len > 0};
    c->begins_total++;
    return 1;
}

enum { END_MATCH_DEPTH = 64 }; /* the open begins an end's name is looked for among */

/* An "E" event: ends its thread's latest begin, or, when the end has a name, the latest begin of
 * that name (or of none) among the END_MATCH_DEPTH latest, as Perfetto pairs them; it goes in
 * as a complete event. An end whose name no such begin has ends nothing (counted): uftrace
 * writes the end of a context switch ("linux:schedule") on a thread that never began one,
 * which, paired with the latest begin, shifted every range after it on the thread. A Paddle
 * timeline's op (tl) never overlaps another of its thread: where one does, a merged file holds
 * several copies of a stage on that thread, whose ops no reading can tell apart (said; the
 * rank files can). */
static int on_end(conv *c, const kin *e, int tl)
{
    uint64_t t1, tol = 1;
    uint32_t index;
    kthread *t = edge_of(c, e, &t1, &tol, &index);
    if (!t)
        return 1;
    if (!t->n_begins) {
        c->s->unpaired++;
        problem(c, "%s", "end (\"E\") events with no begin open on their thread: skipped");
        return 1;
    }
    size_t k = t->n_begins; /* the begin it ends is k - 1 */
    if (e->name_len) {
        uint32_t name = event_name(c, e);
        if (!name)
            return 0;
        size_t lim = k > END_MATCH_DEPTH ? k - END_MATCH_DEPTH : 0;
        while (k > lim && t->begins[k - 1].named && t->begins[k - 1].name != name)
            k--;
        if (k == lim) {
            c->s->unpaired++;
            problem(c, "%s", "end (\"E\") events naming no begin open on their thread: "
                             "skipped");
            return 1;
        }
    }
    struct kbegin b = t->begins[k - 1];
    memmove(&t->begins[k - 1], &t->begins[k], (t->n_begins - k) * sizeof *t->begins);
    t->n_begins--;
    c->begins_total--;
    if (t1 < b.t0) {
        c->s->malformed++;
        problem(c, "%s", "end (\"E\") events before their begin: skipped");
        return 1;
    }
    if (tl && b.t0 < t->tl_end)
        problem(c, "%s", "Paddle's pipeline timeline: ops of one stage overlap on its thread "
                         "(a merged pipeline_profile.json of a data- or tensor-parallel job puts "
                         "every copy of a stage on one thread): analyze the "
                         "profile_record_tmp_file_for_rank_* files instead");
    if (tl && t1 > t->tl_end)
        t->tl_end = t1;
    kev ev = {.t0 = b.t0, .t1 = t1, .thread = index, .name = b.name, .domain = b.domain,
              .tol = b.tol > tol ? b.tol : tol};
    return enqueue(c, ev);
}

/* ---- async events: Chrome's nestable ("b", "e", "n") and legacy ("S", "F") ones ---- */

enum { ASYNC_SLOTS = 2 * PP_KINETO_MAX_BEGINS }; /* the table: at most half full */

static uint64_t fnv64(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The key of the tree (nestable) or the operation (legacy, which also match by name) that an
 * async event belongs to: its category, scope and id, and its process unless the id is
 * global (id2 "global": another process may end it). */
static uint64_t async_key(const kin *e, int legacy)
{
    uint64_t h = 14695981039346656037ull;
    char pid[80] = "-";
    if (e->aid_kind != 'g' && e->pid_num)
        snprintf(pid, sizeof pid, "%.17g", e->pid);
    else if (e->aid_kind != 'g' && e->pid_str[0])
        snprintf(pid, sizeof pid, "\"%s\"", e->pid_str);
    h = fnv64(h, &e->aid_kind, 1);
    h = fnv64(h, pid, strlen(pid) + 1);
    h = fnv64(h, e->cat, strlen(e->cat) + 1);
    h = fnv64(h, e->scope, strlen(e->scope) + 1);
    h = fnv64(h, e->aid, strlen(e->aid) + 1);
    if (legacy)
        h = fnv64(h, e->name, e->name_len);
    return h;
}

/* The key's home in the table, mixed with a seed of the conversion's own (the output does not
 * depend on it; a file crafted to pile its ids onto one run of slots does not know it). */
static size_t aslot_home(const conv *c, uint64_t key)
{
    uint64_t x = key ^ c->async_seed;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return (size_t)(x ^ (x >> 31)) & (ASYNC_SLOTS - 1);
}

/* The key's slot, or the empty slot where it would go. */
static size_t aslot_find(const conv *c, uint64_t key)
{
    size_t i = aslot_home(c, key);
    while (c->aslots[i].top && c->aslots[i].key != key)
        i = (i + 1) & (ASYNC_SLOTS - 1);
    return i;
}

/* Empties slot i, moving back the entries after it that would no longer be found (linear
 * probing's deletion, no tombstones). */
static void aslot_remove(conv *c, size_t i)
{
    size_t j = i;
    for (;;) {
        j = (j + 1) & (ASYNC_SLOTS - 1);
        if (!c->aslots[j].top)
            break;
        size_t k = aslot_home(c, c->aslots[j].key);
        /* entry j may move to i when its home is not in (i, j] (cyclically) */
        if (i <= j ? (k <= i || k > j) : (k <= i && k > j)) {
            c->aslots[i] = c->aslots[j];
            i = j;
        }
    }
    c->aslots[i].top = 0;
}

static int async_no_id(conv *c)
{
    c->s->malformed++;
    problem(c, "%s", "async events (\"b\", \"e\", \"S\", \"F\") without an id: skipped");
    return 1;
}

/* A "b" (or legacy "S") event: kept, on its thread, until the end of its id closes it. */
static __attribute__((noinline, cold)) int on_async_begin(conv *c, const kin *e, int legacy)
{
    if (!e->aid_kind)
        return async_no_id(c);
    uint64_t t0, tol = 1;
    uint32_t index;
    if (!edge_of(c, e, &t0, &tol, &index))
        return 1;
    if (c->begins_total == PP_KINETO_MAX_BEGINS) {
        c->s->dropped_caps++;
        problem(c, "%s", "too many begin (\"B\", \"b\", \"S\") events waiting for their end: "
                         "some dropped");
        return 1;
    }
    if (!c->aslots) {
        if (!(c->aslots = calloc(ASYNC_SLOTS, sizeof *c->aslots)))
            return 0;
        c->async_seed = (uint64_t)(uintptr_t)c * 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
    }
    uint32_t slot;
    if (c->async_free) {
        slot = c->async_free - 1;
        c->async_free = c->async[slot].prev;
    } else {
        if (c->n_async == c->cap_async) {
            size_t cap = c->cap_async ? 2 * c->cap_async : 64;
            struct kasync *p = pp_realloc_array(c->async, cap, sizeof *p);
            if (!p)
                return 0;
            c->async = p;
            c->cap_async = cap;
        }
        slot = (uint32_t)c->n_async++;
    }
    uint32_t domain = domain_of(c, e->cat);
    uint32_t name = event_name(c, e);
    uint64_t key = async_key(e, legacy);
    size_t i = aslot_find(c, key);
    c->async[slot] = (struct kasync){.key = key, .t0 = t0, .tol = tol, .name = name,
                                     .domain = domain, .thread = index,
                                     .prev = c->aslots[i].top};
    c->aslots[i] = (struct aslot){.key = key, .top = slot + 1};
    c->begins_total++;
    c->async_open++;
    return domain && name;
}

/* An "e" (or legacy "F") event: ends the latest begin open with its id (whatever either
 * names, as Chrome nests a tree's events; a legacy one's name is in its key), which goes in as
 * a range on the begin's thread from the begin to the end. */
static __attribute__((noinline, cold)) int on_async_end(conv *c, const kin *e, int legacy)
{
    if (!e->aid_kind)
        return async_no_id(c);
    uint64_t t1, same, tol = 1;
    if (!times_of(c, e, &t1, &same, 0, &tol))
        return 1;
    size_t i = c->aslots ? aslot_find(c, async_key(e, legacy)) : 0;
    if (!c->aslots || !c->aslots[i].top) {
        c->s->unpaired++;
        problem(c, "%s", "async end (\"e\", \"F\") events with no begin open for their id: "
                         "skipped");
        return 1;
    }
    uint32_t slot = c->aslots[i].top - 1;
    struct kasync b = c->async[slot];
    if (b.prev)
        c->aslots[i].top = b.prev;
    else
        aslot_remove(c, i);
    c->async[slot].prev = c->async_free;
    c->async_free = slot + 1;
    c->begins_total--;
    c->async_open--;
    if (t1 < b.t0) {
        c->s->malformed++;
        problem(c, "%s", "async end (\"e\", \"F\") events before their begin: skipped");
        return 1;
    }
    kev k = {.t0 = b.t0, .t1 = t1, .thread = b.thread, .name = b.name, .domain = b.domain,
             .tol = b.tol > tol ? b.tol : tol};
    return enqueue(c, k);
}

/* The counter id of (device type, device id, reserved), its COUNTER_DEF written the first time:
 * "allocated cuda:0", "reserved cuda:0", "allocated cpu" in the domain "torch.memory", bytes. 0
 * when out of memory. */
static uint64_t mem_counter(conv *c, int dtype, int did, int reserved)
{
    unsigned bit = ((unsigned)dtype * MEM_DEVICE_IDS + (unsigned)did) * 2 + (unsigned)reserved;
    uint64_t id = (uint64_t)bit + 1;
    if (c->mem_defined[bit / 8] & (1u << (bit % 8)))
        return id;
    if (!c->mem_domain && !(c->mem_domain = domain_of(c, "torch.memory")))
        return 0;
    char name[64];
    const char *what = reserved ? "reserved" : "allocated";
    if (dtype == 0)
        snprintf(name, sizeof name, "%s cpu", what);
    else
        snprintf(name, sizeof name, "%s %s:%d", what, dtype == 1 ? "cuda" : "device", did);
    uint32_t n = name_id(c, name, strlen(name)), u = name_id(c, "bytes", 5);
    if (!n || !u || !meta_room(c, sizeof(pp_rec_counter_def)))
        return 0;
    pp_rec_counter_def r = {.h = {.type = PP_REC_COUNTER_DEF, .size = sizeof r},
                            .counter_id = id, .domain = c->mem_domain, .name = n, .unit = u,
                            .schema = 2 /* int64 */};
    memcpy(c->meta + c->meta_len, &r, sizeof r);
    c->meta_len += sizeof r;
    c->meta_n++;
    c->mem_defined[bit / 8] |= (uint8_t)(1u << (bit % 8));
    return id;
}

/* A "[memory]" instant event (profile_memory=True): the allocator's "Total Allocated" (and
 * "Total Reserved") after it, as samples of its device's counters on the event's thread. One
 * without "Total Allocated" is skipped (counted). */
static int on_memory(conv *c, const kin *e)
{
    if (!e->has_alloc) {
        c->s->skipped_memory++;
        return 1;
    }
    int dtype = e->has_dtype ? (int)e->mem_dtype : 0;
    int did = e->has_did && e->mem_did >= 0 ? (int)e->mem_did : 0; /* the CPU's id is -1 */
    if ((e->has_dtype && (!(e->mem_dtype >= 0) || e->mem_dtype >= MEM_DEVICE_TYPES)) ||
        (e->has_did && !(e->mem_did < MEM_DEVICE_IDS)) || !(e->mem_alloc >= -MEM_BYTES_MAX) ||
        !(e->mem_alloc <= MEM_BYTES_MAX) ||
        (e->has_reserved && !(fabs(e->mem_reserved) <= MEM_BYTES_MAX))) {
        c->s->malformed++;
        problem(c, "%s", "memory events with a device or a total out of range: skipped");
        return 1;
    }
    uint64_t t0, t1;
    if (!times_of(c, e, &t0, &t1, 0, NULL))
        return 1;
    uint32_t tid = tid_of(c, e);
    uint32_t index;
    if (tid == UINT32_MAX) {
        c->s->malformed++;
        problem(c, "%s", "events without a usable tid: skipped");
        return 1;
    }
    if (!thread_get(c, tid, &index)) {
        c->s->dropped_caps++;
        problem(c, "%s", "more than 1024 threads: the later threads' events dropped");
        return 1;
    }
    for (int res = 0; res < 1 + e->has_reserved; res++) {
        uint64_t id = mem_counter(c, dtype, did, res);
        if (!id)
            return 0;
        kev k = {.t0 = t0, .t1 = t0, .thread = index, .domain = c->mem_domain, .mark = 1,
                 .counter = id, .value = (int64_t)llround(res ? e->mem_reserved : e->mem_alloc)};
        if (!enqueue(c, k))
            return 0;
    }
    return 1;
}

/* ---- another tool's counters ("C" events) ---- */

enum { FOREIGN_COUNTER_BASE = 1 << 20 }; /* above the memory counters' ids (mem_counter) */
/* more would be ignored by the analysis (memory.c), so they are dropped here, counted */
_Static_assert((int)PP_KINETO_MAX_COUNTERS == (int)PP_ANALYSIS_MAX_COUNTERS,
               "the importer keeps the counters the analysis keeps");

/* The id of the counter of series `key` of counter event e, its COUNTER_DEF written the first
 * time: "<name>.<key> (pid <P>)" ("<name>[<id>]" with an id, as Chrome's viewer names them; the
 * process, since the analysis shows a file's series together and such a file holds several),
 * in the category's domain, no unit; 0 beyond PP_KINETO_MAX_COUNTERS (counted), UINT32_MAX
 * when out of memory. */
static uint32_t foreign_counter(conv *c, const kin *e, const char *key, uint32_t domain)
{
    char pid[80] = "-";
    if (e->pid_num)
        snprintf(pid, sizeof pid, "%.17g", e->pid);
    else if (e->pid_str[0])
        snprintf(pid, sizeof pid, "%s", e->pid_str);
    uint64_t h = 14695981039346656037ull;
    h = fnv64(h, pid, strlen(pid) + 1);
    h = fnv64(h, e->cat, strlen(e->cat) + 1);
    h = fnv64(h, e->name, e->name_len + 1);
    h = fnv64(h, e->aid, strlen(e->aid) + 1);
    h = fnv64(h, key, strlen(key) + 1);
    size_t n = sizeof c->cslots / sizeof c->cslots[0];
    size_t i = (size_t)(h ^ (h >> 29)) & (n - 1);
    for (; c->cslots[i].id; i = (i + 1) & (n - 1))
        if (c->cslots[i].key == h)
            return c->cslots[i].id;
    if (c->n_counters == PP_KINETO_MAX_COUNTERS) {
        c->s->dropped_caps++;
        problem(c, "%s", "more than 1024 counters (\"C\" events' series): the later ones' "
                         "samples dropped");
        return 0;
    }
    char label[KJ_STR_CAP + 200], idp[80] = "", pidp[96] = "";
    if (e->aid[0])
        snprintf(idp, sizeof idp, "[%s]", e->aid);
    if (e->pid_num)
        snprintf(pidp, sizeof pidp, " (pid %s)", pid);
    else if (e->pid_str[0])
        snprintf(pidp, sizeof pidp, " (%s)", pid);
    int len = snprintf(label, sizeof label, "%s%s.%s%s", e->name, idp, key, pidp);
    uint32_t name = name_id(c, label, (size_t)len < sizeof label ? (size_t)len : sizeof label - 1);
    if (!name || !meta_room(c, sizeof(pp_rec_counter_def)))
        return UINT32_MAX;
    uint32_t id = FOREIGN_COUNTER_BASE + c->n_counters++;
    pp_rec_counter_def r = {.h = {.type = PP_REC_COUNTER_DEF, .size = sizeof r},
                            .counter_id = id, .domain = domain, .name = name};
    memcpy(c->meta + c->meta_len, &r, sizeof r);
    c->meta_len += sizeof r;
    c->meta_n++;
    c->cslots[i] = (struct cslot){.key = h, .id = id};
    return id;
}

/* A counter ("C") event of another tool's trace: each number among its args a sample of its
 * counter, on the track of its process (Chrome's counters are the process's). */
static __attribute__((noinline, cold)) int on_counter(conv *c, const kin *e)
{
    if (!e->n_cargs) {
        c->s->skipped_other++;
        return 1;
    }
    uint64_t t0, t1;
    if (!times_of(c, e, &t0, &t1, 0, NULL))
        return 1;
    uint32_t index;
    if (!event_thread_scoped(c, e, 1, &index))
        return c->err == PP_OK;
    uint32_t domain = domain_of(c, e->cat);
    if (!domain)
        return 0;
    if (e->cargs_more) {
        c->s->dropped_caps++;
        problem(c, "%s", "counter (\"C\") events of more than 8 series: the others dropped");
    }
    for (int k = 0; k < e->n_cargs; k++) {
        double v = e->cargs[k].v;
        if (!isfinite(v)) {
            c->s->malformed++;
            problem(c, "%s", "counter (\"C\") values that are not finite numbers: skipped");
            continue;
        }
        uint32_t id = foreign_counter(c, e, e->cargs[k].key, domain);
        if (id == UINT32_MAX)
            return 0;
        if (!id)
            continue;
        int64_t bits;
        memcpy(&bits, &v, sizeof bits);
        kev q = {.t0 = t0, .t1 = t0, .thread = index, .domain = domain, .mark = 2, .counter = id,
                 .value = bits};
        if (!enqueue(c, q))
            return 0;
    }
    return 1;
}

/* A thread-name record: thread tid is called name (an id). 0 when out of memory. */
static int thread_name(conv *c, uint32_t tid, uint32_t name)
{
    if (!meta_room(c, sizeof(pp_rec_thread_name)))
        return 0;
    pp_rec_thread_name r = {.h = {.type = PP_REC_THREAD_NAME, .size = sizeof r, .tid = tid},
                            .os_tid = tid,
                            .name = name};
    memcpy(c->meta + c->meta_len, &r, sizeof r);
    c->meta_len += sizeof r;
    c->meta_n++;
    c->s->thread_names++;
    return 1;
}

/* The text of name id `id` (*len bytes, not NUL-terminated); NULL for none or the shared id of
 * the names beyond the table. */
static const char *name_text(const conv *c, uint32_t id, size_t *len)
{
    if (!id || id > c->nm.n)
        return NULL;
    const name_entry *x = &c->nm.e[id - 1];
    *len = x->len;
    return c->nm.bytes + x->off;
}

/* The name id of the key of an event's process in another tool's trace: "pid P" (as
 * tid_of_scoped begins its threads' keys), or its text pid; 0 for none (the global track), or
 * out of memory (the thread then goes without its process's name). */
static uint32_t process_key(conv *c, const kin *e)
{
    char key[80];
    int n;
    if (e->pid_num && e->pid >= 0 && e->pid < 4294967296.0 && e->pid == floor(e->pid))
        n = snprintf(key, sizeof key, "pid %u", (unsigned)e->pid);
    else if (!e->pid_num && e->pid_str[0])
        n = snprintf(key, sizeof key, "%s", e->pid_str);
    else
        return 0;
    return name_id(c, key, (size_t)n < sizeof key ? (size_t)n : sizeof key - 1);
}

enum { PNAME_SLOTS = 2 * PP_KINETO_MAX_THREADS }; /* at most half of them used */

/* The name of key in a table of process or thread names, 0 none. */
static uint32_t pname_get(const struct pname *t, uint32_t key)
{
    size_t k = (key * 2654435761u) & (PNAME_SLOTS - 1);
    for (; t[k].key; k = (k + 1) & (PNAME_SLOTS - 1))
        if (t[k].key == key)
            return t[k].name;
    return 0;
}

/* Names key (the latest name given wins); a key past PP_KINETO_MAX_THREADS goes unnamed. */
static void pname_put(struct pname *t, size_t *n, uint32_t key, uint32_t name)
{
    size_t k = (key * 2654435761u) & (PNAME_SLOTS - 1);
    for (; t[k].key; k = (k + 1) & (PNAME_SLOTS - 1))
        if (t[k].key == key) {
            t[k].name = name;
            return;
        }
    if (*n >= PP_KINETO_MAX_THREADS)
        return;
    t[k] = (struct pname){key, name};
    ++*n;
}

/* Another tool's trace of several processes (Chrome's browser, renderers and GPU process,
 * TensorFlow's host and devices, a process per JAX device) names or numbers each process's
 * threads alike ("CrRendererMain" in every renderer, "Stream #14" on every device): there a
 * thread that its thread_name event names is "<process> / <name>" (with " (tid T)" when another
 * thread of its process has the name: Chrome's pool workers), one it does not name
 * "<process> tid T", a process's own track (its counters, its instants) "<process>"; the
 * process is its process_name event's name (followed by its key, "(pid P)", when another
 * process has the same name), else its key, "pid P" (so an unnamed process's threads keep their
 * keys). In a file of one process only threads that share a name are told apart, "<name> (tid
 * T)" (a Python job's worker threads made anew each step). The names go in after every event (a
 * thread's latest name is the one read), since the metadata events may come last. */
/* The length of s[0 .. n) cut to at most max bytes, at a UTF-8 character's start. */
static size_t utf8_cut(const char *s, size_t n, size_t max)
{
    if (n <= max)
        return n;
    while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
        max--;
    return max;
}

static int name_threads_by_process(conv *c)
{
    /* what the analysis keeps of a thread's name (pp_athread) */
    enum { LABEL_MAX = sizeof(((pp_athread *)0)->name) - 1, HEAD_MIN = 16 };
    if (!c->any_cat)
        return 1;
    uint32_t first = 0;
    int several = 0;
    for (size_t i = 0; i < c->n_threads && !several; i++) {
        uint32_t p = c->threads[i].proc;
        if (p && !first)
            first = p;
        several = p && p != first;
    }
    uint32_t pn[PP_KINETO_MAX_THREADS], tn[PP_KINETO_MAX_THREADS];
    for (size_t i = 0; i < c->n_threads; i++) {
        pn[i] = c->threads[i].proc ? pname_get(c->proc_names, c->threads[i].proc) : 0;
        tn[i] = pname_get(c->thread_names, c->threads[i].tid);
    }
    for (size_t i = 0; i < c->n_threads; i++) {
        const kthread *t = &c->threads[i];
        size_t klen = 0, plen = 0, tlen = 0, tklen = 0;
        const char *ktext = name_text(c, t->proc, &klen);
        const char *ptext = name_text(c, pn[i], &plen);
        uint32_t own = t->tid & 0x7fffffffu;
        const char *ttext = name_text(c, tn[i], &tlen);
        const char *tk = own != t->proc ? name_text(c, own, &tklen) : NULL;
        if (!ktext || (several && !ptext && (own == t->proc || !ttext)))
            continue; /* its key, "pid P" or "pid P tid T", names it already */
        /* the thread's tid: the rest of its key, "<process key> tid T" */
        if (tk && (tklen <= klen + 5 || memcmp(tk, ktext, klen) != 0 ||
                   memcmp(tk + klen, " tid ", 5) != 0))
            tk = NULL;
        int shared = 0; /* another process has its name (Chrome's renderers) */
        for (size_t j = 0; ptext && j < c->n_threads && !shared; j++)
            shared = pn[j] == pn[i] && c->threads[j].proc != t->proc;
        int twin = 0;   /* another thread of its process has its name (Chrome's pool workers) */
        for (size_t j = 0; ttext && j < c->n_threads && !twin; j++)
            twin = j != i && tn[j] == tn[i] && c->threads[j].proc == t->proc;
        char head[2 * SMALL + 96], tail[2 * SMALL + 96];
        if (!several) {
            /* one process: only threads of one name told apart */
            if (!ttext || !twin || !tk)
                continue;
            snprintf(head, sizeof head, "%.*s", (int)tlen, ttext);
            snprintf(tail, sizeof tail, " (tid %.*s)", (int)(tklen - klen - 5), tk + klen + 5);
        } else {
            if (!ptext)
                snprintf(head, sizeof head, "%.*s", (int)klen, ktext);
            else if (shared)
                snprintf(head, sizeof head, "%.*s (%.*s)", (int)plen, ptext, (int)klen, ktext);
            else
                snprintf(head, sizeof head, "%.*s", (int)plen, ptext);
            if (own == t->proc)
                tail[0] = '\0';
            else if (ttext && twin && tk)
                snprintf(tail, sizeof tail, " / %.*s (tid %.*s)", (int)tlen, ttext,
                         (int)(tklen - klen - 5), tk + klen + 5);
            else if (ttext)
                snprintf(tail, sizeof tail, " / %.*s", (int)tlen, ttext);
            else if (tk)
                snprintf(tail, sizeof tail, " tid %.*s", (int)(tklen - klen - 5), tk + klen + 5);
            else
                continue;
        }
        /* within what the analysis keeps: the process's name is cut first (marked ".."), so
         * that what tells a process's threads apart stays */
        size_t hn = strlen(head), tl = strlen(tail);
        char label[LABEL_MAX + 1];
        if (hn + tl <= LABEL_MAX) {
            memcpy(label, head, hn);
            memcpy(label + hn, tail, tl + 1);
        } else {
            size_t keep = tl + HEAD_MIN + 2 <= LABEL_MAX ? LABEL_MAX - tl - 2 : HEAD_MIN;
            keep = utf8_cut(head, hn, keep);
            size_t room = LABEL_MAX - keep - 2;
            snprintf(label, sizeof label, "%.*s..%.*s", (int)keep, head,
                     (int)utf8_cut(tail, tl, room), tail);
        }
        uint32_t id = name_id(c, label, strlen(label));
        if (!id || !thread_name(c, t->tid, id))
            return 0;
    }
    return 1;
}

static int on_meta_event(conv *c, const kin *e)
{
    if (strcmp(e->name, "process_name") == 0 && e->arg_name[0]) {
        snprintf(c->exe, sizeof c->exe, "%.95s", e->arg_name);
        uint32_t key = c->any_cat ? process_key(c, e) : 0;
        if (key) {
            uint32_t name = name_id(c, e->arg_name, strlen(e->arg_name));
            if (!name)
                return 0;
            pname_put(c->proc_names, &c->n_proc_names, key, name);
        }
        return 1;
    }
    if (strcmp(e->name, "thread_name") != 0 || !e->arg_name[0]) {
        c->s->skipped_other++;
        return 1;
    }
    uint32_t tid = tid_of(c, e);
    if (tid == UINT32_MAX)
        return 1;
    uint32_t name = name_id(c, e->arg_name, strlen(e->arg_name));
    if (!name)
        return 0;
    if (c->named && (tid & 0x7fffffffu) < PP_KINETO_MAX_NAMES + 1)
        c->named[(tid & 0x7fffffffu) / 8] |= (uint8_t)(1u << (tid & 7));
    if (c->any_cat)
        pname_put(c->thread_names, &c->n_thread_names, tid, name);
    return thread_name(c, tid, name);
}

/* What torch's reading (any_cat == 0) does with an event in dispatch below: hands it to a
 * handler that may keep it (a CPU op, a GPU or API record, a memory sample, Paddle's
 * categories), counts it as another tool's (a category neither profiler writes: `foreign`, and
 * skipped), reads a thread or process name, or skips it (flows, other phases: `skipped_other`).
 * Only another tool's reading tried first asks (dispatch's own tests stay where torch's hot path
 * had them); tests/test_kineto.c checks the two agree on every phase and kind of category. */
typedef enum { TORCH_READS, TORCH_FOREIGN, TORCH_META, TORCH_SKIPS } torch_class;

/* gk, api: for a complete event, its GPU kind (gpu_kind_of) and whether it is a CUDA API call */
static __attribute__((noinline)) torch_class torch_class_of(const kin *e, int gk, int api)
{
    switch (e->ph) {
    case 'X': return gk || api || is_cpu_cat(e->cat) ? TORCH_READS : TORCH_FOREIGN;
    case 'R': /* a mark (performance.mark in Chrome's traces); neither torch nor Paddle */
    case 'C':
        return TORCH_FOREIGN;
    case 'i':
    case 'I':
        return strcmp(e->name, "[memory]") == 0 || (e->cat[0] && is_cpu_cat(e->cat))
                   ? TORCH_READS
                   : TORCH_FOREIGN;
    case 'B':
    case 'E': return is_timeline_cat(e->cat) || is_cpu_cat(e->cat) ? TORCH_READS : TORCH_FOREIGN;
    case 'b':
    case 'e':
    case 'n':
    case 'S':
    case 'F': return is_cpu_cat(e->cat) ? TORCH_READS : TORCH_FOREIGN;
    case 'M': return TORCH_META;
    default: return TORCH_SKIPS;
    }
}

/* One parsed element of traceEvents to its records. 0: out of memory, or (c->restart) another
 * tool's reading tried first met an event torch's reading reads. */
static int dispatch(conv *c, const kin *e)
{
    if (e->bad) {
        c->s->malformed++;
        problem(c, "%s", "events with a field of the wrong type: skipped");
        return 1;
    }
    int gk = 0, api = 0;
    if (e->ph == 'X' && (gk = gpu_kind_of(e->cat)) == 0)
        api = strcmp(e->cat, "cuda_runtime") == 0 ? 1 : strcmp(e->cat, "cuda_driver") == 0 ? 2 : 0;
    if (c->speculative) {
        torch_class k = torch_class_of(e, gk, api);
        if (k == TORCH_READS) {
            c->restart = 1;
            return 0;
        }
        c->spec_foreign |= k == TORCH_FOREIGN;
    }
    switch (e->ph) {
    case 'X':
        if (gk)
            return on_gpu(c, e, gk);
        if (api)
            return on_api(c, e, api == 2);
        if (c->any_cat || is_cpu_cat(e->cat))
            return on_cpu(c, e, 0);
        c->s->foreign++;
        break;
    case 'R':
        if (!c->any_cat) {
            c->s->foreign++;
            break;
        }
        return on_cpu(c, e, 1);
    case 'i':
    case 'I':
        if (strcmp(e->name, "[memory]") == 0)
            return on_memory(c, e);
        if (c->any_cat || (e->cat[0] && is_cpu_cat(e->cat)))
            return on_cpu(c, e, 1);
        c->s->foreign++;
        break;
    case 'B':
    case 'E': {
        int tl = is_timeline_cat(e->cat);
        if (tl) {
            uint32_t tid = tid_of(c, e);
            if (c->tl_tids == 0 || (c->tl_tids == 1 && tid != c->tl_tid))
                c->tl_tids++;
            c->tl_tid = tid;
        } else if (!c->any_cat && !is_cpu_cat(e->cat)) {
            c->s->foreign++;
            break;
        }
        return e->ph == 'B' ? on_begin(c, e) : on_end(c, e, tl);
    }
    case 'b':
    case 'e':
    case 'n':
    case 'S':
    case 'F':
        if (!c->any_cat && !is_cpu_cat(e->cat)) {
            c->s->foreign++;
            break;
        }
        if (e->ph == 'n')
            return on_cpu(c, e, 1);
        return e->ph == 'b' || e->ph == 'S' ? on_async_begin(c, e, e->ph == 'S')
                                            : on_async_end(c, e, e->ph == 'F');
    case 'C':
        if (!c->any_cat) {
            c->s->foreign++;
            break;
        }
        return on_counter(c, e);
    case 'M': return on_meta_event(c, e);
    default: break;
    }
    c->s->skipped_other++;
    return 1;
}

/* ---- the JSON walk ---- */

/* A string value into dst[cap] (cut to fit), or a type error. */
static void take_str(conv *c, kj_tok t, char *dst, size_t cap, int *bad)
{
    if (t != KJ_STR) {
        *bad = 1;
        return;
    }
    size_t n;
    const char *s = kj_str(c->lx, &n);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, s, n);
    dst[n] = '\0';
}

static void take_num(kj_tok t, const kj_lexer *lx, double *v, int *has, int *bad)
{
    if (t == KJ_NUM) {
        *v = kj_num(lx);
        *has = 1;
    } else if (t != KJ_NULL) {
        *bad = 1;
    }
}

/* The members of an object whose '{' was read, each handed to fn(key, first token of the
 * value); fn consumes the value. Returns the token that ended it: KJ_OBJ_END, or KJ_EOF /
 * KJ_ERR. */
typedef kj_tok (*member_fn)(conv *c, const char *key, kj_tok v, void *ctx);

static kj_tok walk_object(conv *c, member_fn fn, void *ctx)
{
    char key[64];
    kj_tok t = kj_key(c->lx, key, sizeof key);
    if (t == KJ_OBJ_END)
        return t;
    for (;;) {
        if (t != KJ_STR) /* no key, or no colon after it */
            return t == KJ_EOF ? t : KJ_ERR;
        kj_tok v = fn(c, key, kj_next(c->lx), ctx);
        if (v == KJ_EOF || v == KJ_ERR)
            return v;
        t = kj_next_key(c->lx, key, sizeof key);
        if (t == KJ_OBJ_END)
            return t;
    }
}

static kj_tok args_member(conv *c, const char *key, kj_tok v, void *ctx)
{
    kin *e = ctx;
    int ignored = 0; /* a wrong type in args costs only that value */
    /* by first letter: most keys are none of these (torch's "External id", "Ev Idx", ...) */
    switch (key[0]) {
    case 'c':
        if (strcmp(key, "correlation") == 0)
            take_num(v, c->lx, &e->correlation, &e->has_corr, &ignored);
        else if (strcmp(key, "cbid") == 0)
            take_num(v, c->lx, &e->cbid, &e->has_cbid, &ignored);
        break;
    case 'd':
        if (strcmp(key, "device") == 0)
            take_num(v, c->lx, &e->device, &e->has_device, &ignored);
        break;
    case 's':
        if (strcmp(key, "stream") == 0)
            take_num(v, c->lx, &e->stream, &e->has_stream, &ignored);
        break;
    case 'b':
        if (strcmp(key, "bytes") == 0)
            take_num(v, c->lx, &e->bytes, &e->has_bytes, &ignored);
        break;
    case 'T':
        if (strcmp(key, "Total Allocated") == 0)
            take_num(v, c->lx, &e->mem_alloc, &e->has_alloc, &ignored);
        else if (strcmp(key, "Total Reserved") == 0)
            take_num(v, c->lx, &e->mem_reserved, &e->has_reserved, &ignored);
        break;
    case 'D':
        if (strcmp(key, "Device Type") == 0)
            take_num(v, c->lx, &e->mem_dtype, &e->has_dtype, &ignored);
        else if (strcmp(key, "Device Id") == 0)
            take_num(v, c->lx, &e->mem_did, &e->has_did, &ignored);
        break;
    case 'n':
        if (strcmp(key, "name") == 0 && v == KJ_STR)
            take_str(c, v, e->arg_name, sizeof e->arg_name, &ignored);
        break;
    default: break;
    }
    return kj_skip(c->lx, v);
}

/* An async event's id: a string as it is, a number as its shortest text (1 and "1" are one id,
 * "0x1" another, as Chrome's viewer reads them); any other type is no id. */
static void async_id(conv *c, kj_tok v, kin *e, char kind)
{
    int bad = 0;
    if (v == KJ_STR)
        take_str(c, v, e->aid, sizeof e->aid, &bad);
    else if (v == KJ_NUM)
        snprintf(e->aid, sizeof e->aid, "%.17g", kj_num(c->lx));
    else
        return;
    e->aid_kind = kind;
}

static kj_tok id2_member(conv *c, const char *key, kj_tok v, void *ctx)
{
    if (strcmp(key, "local") == 0 || strcmp(key, "global") == 0)
        async_id(c, v, ctx, key[0]);
    return kj_skip(c->lx, v);
}

/* The args of an event whose "ph" is "C" or not read yet: as args_member, and each number kept
 * as a counter's series (the first 8). Apart from args_member, which every torch event's args
 * go through: the check there made the conversion of torch's traces 3-5% slower (code
 * placement, benchmarks/README.md). */
static kj_tok counter_args_member(conv *c, const char *key, kj_tok v, void *ctx)
{
    kin *e = ctx;
    if (v == KJ_NUM) {
        if (e->n_cargs < (int)(sizeof e->cargs / sizeof e->cargs[0])) {
            snprintf(e->cargs[e->n_cargs].key, sizeof e->cargs[0].key, "%s", key);
            e->cargs[e->n_cargs++].v = kj_num(c->lx);
        } else {
            e->cargs_more++;
        }
    }
    return args_member(c, key, v, ctx);
}

/* An event's members that only async events use ("id", "id2", "scope"; the others of their
 * first letters skipped): out of line, so that the walk of every event keeps its shape. */
static __attribute__((noinline)) kj_tok async_member(conv *c, const char *key, kj_tok v, kin *e)
{
    if (strcmp(key, "id") == 0) {
        async_id(c, v, e, 'i');
    } else if (strcmp(key, "id2") == 0 && v == KJ_OBJ) {
        return walk_object(c, id2_member, e);
    } else if (strcmp(key, "scope") == 0) {
        int ignored = 0;
        take_str(c, v, e->scope, sizeof e->scope, &ignored);
    }
    return kj_skip(c->lx, v);
}

/* One member of an event object. Inlined where it is used (the events' walk, and the top level
 * for a file of events one after another): out of line, its key comparisons are calls
 * (bench_kineto 5% slower, measured). */
static inline __attribute__((always_inline)) kj_tok event_member(conv *c, const char *key,
                                                                  kj_tok v, void *ctx)
{
    kin *e = ctx;
    switch (key[0]) {
    case 'p':
        if (strcmp(key, "ph") == 0) {
            char ph[4] = "";
            take_str(c, v, ph, sizeof ph, &e->bad);
            e->ph = ph[0];
            return kj_skip(c->lx, v);
        }
        if (strcmp(key, "pid") == 0) {
            if (v == KJ_NUM) {
                e->pid = kj_num(c->lx);
                e->pid_num = 1;
            } else if (v == KJ_STR) {
                int ignored = 0;
                take_str(c, v, e->pid_str, sizeof e->pid_str, &ignored);
            }
            return kj_skip(c->lx, v);
        }
        break;
    case 't':
        if (strcmp(key, "ts") == 0) {
            take_num(v, c->lx, &e->ts, &e->has_ts, &e->bad);
            return kj_skip(c->lx, v);
        }
        if (strcmp(key, "tid") == 0) {
            if (v == KJ_NUM) {
                e->tid = kj_num(c->lx);
                e->tid_num = 1;
            } else if (v == KJ_STR) {
                int ignored = 0;
                take_str(c, v, e->tid_str, sizeof e->tid_str, &ignored);
            }
            return kj_skip(c->lx, v);
        }
        break;
    case 'd':
        if (strcmp(key, "dur") == 0) {
            take_num(v, c->lx, &e->dur, &e->has_dur, &e->bad);
            return kj_skip(c->lx, v);
        }
        break;
    case 'c':
        if (strcmp(key, "cat") == 0) {
            take_str(c, v, e->cat, sizeof e->cat, &e->bad);
            return kj_skip(c->lx, v);
        }
        break;
    case 'n':
        if (strcmp(key, "name") == 0) {
            if (v == KJ_STR) {
                const char *s = kj_str(c->lx, &e->name_len);
                memcpy(e->name, s, e->name_len + 1);
            } else {
                e->bad = 1;
            }
            return kj_skip(c->lx, v);
        }
        break;
    case 'a':
        if (strcmp(key, "args") == 0 && v == KJ_OBJ)
            return walk_object(c, e->ph == 'C' || !e->ph ? counter_args_member : args_member, e);
        break;
    default:
        if (key[0] == 'i' || key[0] == 's')
            return async_member(c, key, v, e);
        break;
    }
    return kj_skip(c->lx, v);
}

static void event_reset(kin *e)
{
    e->ph = 0;
    e->has_ts = e->has_dur = e->pid_num = e->tid_num = e->bad = 0;
    e->has_corr = e->has_device = e->has_stream = e->has_bytes = e->has_cbid = 0;
    e->has_alloc = e->has_reserved = e->has_dtype = e->has_did = 0;
    e->cat[0] = e->tid_str[0] = e->arg_name[0] = e->name[0] = '\0';
    e->aid[0] = e->scope[0] = e->pid_str[0] = '\0';
    e->aid_kind = 0;
    e->n_cargs = e->cargs_more = 0;
    e->name_len = 0;
}

/* The event just walked into c->ev (its object read) to its records: KJ_OBJ_END, or KJ_ERR
 * with c->err set. */
static kj_tok event_done(conv *c)
{
    kin *e = &c->ev;
    c->saw_events = 1;
    if ((e->ph == 'B' || e->ph == 'E') && e->has_ts && is_timeline_cat(e->cat))
        e->ts *= 1000.0; /* Paddle's milliseconds (TS_MAX_US still bounds them after) */
    if (dispatch(c, e))
        return KJ_OBJ_END;
    if (c->restart)
        return KJ_ERR;
    if (c->err == PP_OK)
        c->err = PP_ERR(PP_ERR_NOMEM, "kineto: out of memory");
    return KJ_ERR;
}

/* One element of traceEvents (its first token read). */
static kj_tok event(conv *c, kj_tok t)
{
    c->s->events_in++;
    if (t != KJ_OBJ) {
        c->s->malformed++;
        problem(c, "%s", "traceEvents elements that are not objects: skipped");
        return kj_skip(c->lx, t);
    }
    event_reset(&c->ev);
    kj_tok end = walk_object(c, event_member, &c->ev);
    return end != KJ_OBJ_END ? end : event_done(c);
}

/* The elements of an array whose '[' was read, each handed to fn(first token); fn consumes it.
 * Returns KJ_ARR_END, or KJ_EOF / KJ_ERR. Inlined, so that the events' loop calls event()
 * directly. */
typedef kj_tok (*element_fn)(conv *c, kj_tok v, void *ctx);

static inline __attribute__((always_inline)) kj_tok walk_array(conv *c, element_fn fn, void *ctx)
{
    kj_tok t = kj_next(c->lx);
    if (t == KJ_ARR_END)
        return t;
    for (;;) {
        kj_tok v = fn(c, t, ctx);
        if (v == KJ_EOF || v == KJ_ERR)
            return v;
        t = kj_next(c->lx);
        if (t == KJ_ARR_END)
            return t;
        if (t != KJ_COMMA)
            return t == KJ_EOF ? t : KJ_ERR;
        t = kj_next(c->lx);
    }
}

static kj_tok event_element(conv *c, kj_tok t, void *ctx)
{
    (void)ctx;
    return event(c, t);
}

static kj_tok events_array(conv *c) { return walk_array(c, event_element, NULL); }

/* One process group of distributedInfo.pg_config: its description and ranks (the first
 * PIPE_CAP of them kept; more, or one that is no whole number in [0, 2^20), and the group is
 * not taken for a pipeline). */
typedef struct pg_walk {
    char desc[64];
    size_t n;
    int bad;
} pg_walk;

static kj_tok pg_rank(conv *c, kj_tok v, void *ctx)
{
    pg_walk *g = ctx;
    if (v != KJ_NUM) {
        g->bad = 1;
        return kj_skip(c->lx, v);
    }
    double r = kj_num(c->lx);
    if (!(r >= 0 && r < (1 << 20) && r == floor(r)) || g->n == PIPE_CAP)
        g->bad = 1;
    else
        c->pg_ranks[g->n++] = (int32_t)r;
    return v;
}

static kj_tok pg_member(conv *c, const char *key, kj_tok v, void *ctx)
{
    pg_walk *g = ctx;
    if (strcmp(key, "pg_desc") == 0 && v == KJ_STR) {
        int ignored = 0;
        take_str(c, v, g->desc, sizeof g->desc, &ignored);
        return v;
    }
    if (strcmp(key, "ranks") == 0 && v == KJ_ARR)
        return walk_array(c, pg_rank, g);
    return kj_skip(c->lx, v);
}

/* Whether desc holds word (any case). */
static int holds_word(const char *desc, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = desc; *p; p++)
        if (strncasecmp(p, word, n) == 0)
            return 1;
    return 0;
}

/* Whether a process group's description names it as the pipeline's: DeviceMesh's "mesh_pp"
 * (torchtitan's mesh dimension "pp"), Megatron-LM's "PIPELINE_MODEL_PARALLEL_GROUP", or any
 * description holding "pipeline" and no other dimension: Megatron-LM's
 * "EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP" (the experts' tensor x pipeline ranks, in every
 * process of a megatron-core >= 0.13 job) is no pipeline (docs/kineto.md "Process groups"). */
static int pg_names_pipeline(const char *desc)
{
    if (strcmp(desc, "mesh_pp") == 0 || strcmp(desc, "pp") == 0)
        return 1;
    static const char *const other[] = {"tensor", "data", "expert", "context"};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        if (holds_word(desc, other[i]))
            return 0;
    return holds_word(desc, "pipeline");
}

static kj_tok pg_group(conv *c, kj_tok v, void *ctx)
{
    (void)ctx;
    if (v != KJ_OBJ)
        return kj_skip(c->lx, v);
    pg_walk g = {0};
    kj_tok end = walk_object(c, pg_member, &g);
    if (end != KJ_OBJ_END || g.bad || g.n == 0)
        return end;
    if (pg_names_pipeline(g.desc)) {
        if (!c->pipe_named++) { /* torch lists the groups the process is in: one pipeline */
            memcpy(c->pipe_ranks, c->pg_ranks, g.n * sizeof c->pg_ranks[0]);
            c->pipe_n = g.n;
        }
    } else if (g.n > 1 && (!c->other_min || g.n < c->other_min)) {
        c->other_min = g.n; /* against the job's size at the end (pipe_header) */
    }
    if (!pg_names_pipeline(g.desc) && g.n > 1 && c->n_even < DS_GROUPS) {
        int32_t lo = INT32_MAX, hi = -1;
        for (size_t i = 0; i < g.n; i++) {
            lo = c->pg_ranks[i] < lo ? c->pg_ranks[i] : lo;
            hi = c->pg_ranks[i] > hi ? c->pg_ranks[i] : hi;
        }
        int32_t stride = (int32_t)((hi - lo) / (int32_t)(g.n - 1));
        int even = stride > 0 && (int64_t)stride * (int64_t)(g.n - 1) == hi - lo;
        unsigned char seen[PIPE_CAP] = {0}; /* on the grid and distinct: its n points, once */
        for (size_t i = 0; even && i < g.n; i++) {
            int32_t k = (c->pg_ranks[i] - lo) / stride;
            even = (c->pg_ranks[i] - lo) % stride == 0 && !seen[k];
            seen[k] = 1;
        }
        if (even)
            c->even[c->n_even++] = (struct even_group){lo, stride, (int32_t)g.n};
    }
    if ((double)g.n > c->world_size)
        c->world_size = (double)g.n; /* the job has at least the ranks of its groups */
    return end;
}

static kj_tok dist_member(conv *c, const char *key, kj_tok v, void *ctx)
{
    (void)ctx;
    if (strcmp(key, "rank") == 0 && v == KJ_NUM) {
        double r = kj_num(c->lx);
        if (r >= 0 && r < (1 << 20) && r == floor(r))
            c->rank = (int32_t)r;
        return v;
    }
    if (strcmp(key, "world_size") == 0 && v == KJ_NUM) {
        double w = kj_num(c->lx);
        if (w >= 1 && w < (1 << 20) && w == floor(w) && w > c->world_size)
            c->world_size = w;
        return v;
    }
    if (strcmp(key, "pg_config") == 0 && v == KJ_ARR)
        return walk_array(c, pg_group, NULL);
    return kj_skip(c->lx, v);
}

static kj_tok top_member(conv *c, const char *key, kj_tok v, void *ctx)
{
    int *found = ctx;
    if (c->speculative && (strcmp(key, "schemaVersion") == 0 ||
                           strcmp(key, "deviceProperties") == 0 ||
                           strcmp(key, "distributedInfo") == 0)) {
        /* torch's own header: its reading, from here on when no event was read yet (nothing
         * before the first event depends on the reading), else from the start */
        if (c->saw_events || c->s->events_in) {
            c->restart = 1;
            return KJ_ERR;
        }
        c->speculative = 0;
        c->any_cat = c->s->any_category = 0;
        c->became_torch = 1;
    }
    if (strcmp(key, "traceEvents") == 0 && v == KJ_ARR) {
        *found = 1;
        return events_array(c);
    }
    if (strcmp(key, "distributedInfo") == 0 && v == KJ_OBJ)
        return walk_object(c, dist_member, NULL);
    if (strcmp(key, "host_name") == 0 && v == KJ_STR) {
        int ignored = 0;
        take_str(c, v, c->host, sizeof c->host, &ignored);
        return v;
    }
    if (strcmp(key, "baseTimeNanoseconds") == 0 && v == KJ_NUM) {
        double b = kj_num(c->lx);
        if (b >= 0 && b < 9.0e18)
            c->base_ns = b;
        return v;
    }
    /* the first of a file of events one after another (JSON lines) is an event itself */
    return event_member(c, key, v, &c->ev);
}

/* After a first top-level object that held an event ("ph") and no traceEvents: the file is
 * events one after another (JSON lines), read as their array. That first event, then the
 * others; KJ_OBJ_END at a clean end (the file ends between events), else the token where it
 * broke off. */
static kj_tok events_lines(conv *c)
{
    c->s->events_in++;
    kj_tok t = event_done(c);
    while (t == KJ_OBJ_END) {
        t = kj_next(c->lx);
        if (t == KJ_COMMA) /* "{...},\n{...}": tolerated */
            t = kj_next(c->lx);
        if (t == KJ_EOF)
            return KJ_OBJ_END;
        if (t != KJ_OBJ)
            return KJ_ERR;
        t = event(c, t);
    }
    return t;
}

/* ---- the two passes ---- */

/* Whether the even group g holds rank r. */
static int even_holds(const struct even_group *g, int32_t r)
{
    return r >= g->first && (r - g->first) % g->stride == 0 && (r - g->first) / g->stride < g->n;
}

/* A DeepSpeed job's pipeline group, which DeepSpeed creates without a description: with its
 * default topology (PipeDataParallelTopology, axes pipe then data: rank = stage x dp + replica)
 * the process is in a data-parallel group of dp consecutive ranks and in a pipeline group of
 * world / dp ranks dp apart. Both found among its groups, no other reading of them (one such
 * pair only), and the place it gives the process agreeing with the activations it receives and
 * sends, the second is its pipeline; NULL otherwise (tensor parallelism too, another topology),
 * and the ranks stay stages with a warning. */
static const struct even_group *deepspeed_pipeline(const conv *c)
{
    const struct even_group *pipe = NULL;
    int pairs = 0;
    for (size_t i = 0; i < c->n_even; i++) {
        const struct even_group *d = &c->even[i];
        if (d->stride != 1 || !even_holds(d, c->rank))
            continue;
        for (size_t j = 0; j < c->n_even; j++) {
            const struct even_group *p = &c->even[j];
            if (p->stride == d->n && even_holds(p, c->rank) &&
                (double)p->n * (double)d->n == c->world_size && (!pipe || p->first != pipe->first))
                pipe = p, pairs++;
        }
    }
    if (pairs != 1)
        return NULL;
    /* and its place agrees with what it ran: the first stage receives no activations, the
     * last sends none (replicas outermost, or another topology, disagree) */
    int32_t place = (c->rank - pipe->first) / pipe->stride;
    if ((place == 0) != !c->ds_recv_act || (place == pipe->n - 1) != !c->ds_send_act)
        return NULL;
    return pipe;
}

/* The process's place in its pipeline's group (pp_trace.h), where distributedInfo named one
 * that holds its rank once, or DeepSpeed's groups show it (deepspeed_pipeline); else whether it
 * was in smaller groups than the world's. */
static void pipe_header(pp_trace_header *h, const conv *c)
{
    const struct even_group *ds =
        c->deepspeed && !c->pipe_named && c->rank >= 0 ? deepspeed_pipeline(c) : NULL;
    if (ds) {
        h->flags |= PP_TRACE_PIPELINE_GROUP;
        h->pipe_rank = (c->rank - ds->first) / ds->stride;
        h->pipe_size = ds->n;
        h->pipe_first = ds->first;
        return;
    }
    size_t at = c->pipe_n, hits = 0;
    int32_t first = INT32_MAX;
    for (size_t i = 0; i < c->pipe_n; i++) {
        if (c->pipe_ranks[i] == c->rank)
            at = i, hits++;
        if (c->pipe_ranks[i] < first)
            first = c->pipe_ranks[i];
    }
    if (c->pipe_named == 1 && c->rank >= 0 && hits == 1) {
        h->flags |= PP_TRACE_PIPELINE_GROUP;
        h->pipe_rank = (int32_t)at;
        h->pipe_size = (int32_t)c->pipe_n;
        h->pipe_first = first;
    } else if (c->pipe_named || (c->other_min && (double)c->other_min < c->world_size)) {
        h->flags |= PP_TRACE_OTHER_GROUPS; /* or a pipeline's group that does not place it */
    } else if (c->tl_tids == 1 && c->tl_tid >= 1 && c->tl_tid <= 4096) {
        h->flags |= PP_TRACE_STAGE_ONLY; /* a Paddle rank's timeline: its stage, tid - 1 */
        h->pipe_rank = (int32_t)c->tl_tid - 1;
    }
}

static void header_init(pp_trace_header *h, const conv *c)
{
    memset(h, 0, sizeof *h);
    h->pid = c->pid;
    h->rank = c->rank;
    pipe_header(h, c);
    h->mono_ns = c->t_min == UINT64_MAX ? 0 : c->t_min;
    h->real_ns = h->mono_ns + (uint64_t)c->base_ns;
    snprintf(h->host, sizeof h->host, "%s", c->host);
    snprintf(h->exe, sizeof h->exe, "%s", c->exe);
}

/* Drains the window and closes every thread's ranges. */
static int finish_events(conv *c)
{
    for (size_t i = 0; i < c->n_threads; i++)
        if (c->threads[i].n_begins) {
            c->s->unpaired += c->threads[i].n_begins;
            problem(c, "%s", "begin (\"B\") events never ended: dropped");
        }
    if (c->async_open) {
        c->s->unpaired += c->async_open;
        problem(c, "%s", "async begin (\"b\", \"S\") events never ended: dropped");
    }
    while (c->n_heap + c->r_n)
        if (!heap_take_one(c, 0))
            return 0;
    if (c->n_runs && !merge_runs(c))
        return 0;
    for (size_t i = 0; i < c->n_threads; i++)
        if (!thread_advance(c, &c->threads[i], UINT64_MAX) || !thread_flush(c, &c->threads[i]))
            return 0;
    return name_threads_by_process(c) && meta_flush(c);
}

/* The next spilled record (its size in *size, its time in *key); 0 at the end. */
static int spill_next(FILE *f, uint8_t rec[64], uint16_t *size, uint64_t *key)
{
    pp_rec_header h;
    if (!f || fread(&h, sizeof h, 1, f) != 1)
        return 0;
    if (h.size < sizeof h || h.size > 64 || fread(rec + sizeof h, h.size - sizeof h, 1, f) != 1)
        return 0;
    memcpy(rec, &h, sizeof h);
    *size = h.size;
    if (h.type == PP_REC_GPU) {
        pp_rec_gpu g;
        memcpy(&g, rec, sizeof g);
        *key = g.start;
    } else {
        pp_rec_api a;
        memcpy(&a, rec, sizeof a);
        *key = a.start;
    }
    return 1;
}

/* The two spilled streams (API calls, GPU records), each nearly in time order as Kineto wrote
 * its kind, merged by time into EVENTS blocks. */
typedef struct spill_head {
    FILE *f;
    uint8_t rec[64];
    uint16_t size;
    uint64_t key;
    int have;
} spill_head;

typedef struct merge {
    spill_head in[2];
    uint8_t buf[GPU_BUF];
    size_t len;
    uint32_t n;
} merge;

static pp_status merge_flush(merge *m, pp_trace_writer *w)
{
    pp_status st = PP_OK;
    if (m->len)
        st = pp_trace_writer_block(w, PP_BLOCK_EVENTS, 0, m->buf, m->len, m->n);
    m->len = 0;
    m->n = 0;
    return st;
}

/* The spilled records up to time `until` into w, the earlier of the two heads first. */
static pp_status merge_until(merge *m, pp_trace_writer *w, uint64_t until)
{
    pp_status st = PP_OK;
    for (;;) {
        spill_head *h = NULL;
        for (int k = 0; k < 2; k++)
            if (m->in[k].have && m->in[k].key <= until && (!h || m->in[k].key < h->key))
                h = &m->in[k];
        if (!h)
            break;
        if (m->len + h->size > sizeof m->buf && (st = merge_flush(m, w)) != PP_OK)
            return st;
        memcpy(m->buf + m->len, h->rec, h->size);
        m->len += h->size;
        m->n++;
        h->have = spill_next(h->f, h->rec, &h->size, &h->key);
    }
    return merge_flush(m, w);
}

/* Copies the blocks of `part` of one kind into w (EVENTS: with the spill merged in). */
static pp_status copy_blocks(const char *part, pp_trace_writer *w, uint32_t kind, merge *m)
{
    pp_trace_reader *r = NULL;
    pp_status st = pp_trace_reader_open(part, &r);
    pp_trace_block b;
    bool got = true;
    while (st == PP_OK && (st = pp_trace_reader_next(r, &b, &got)) == PP_OK && got) {
        if (b.h.kind != kind)
            continue;
        if (kind == PP_BLOCK_EVENTS && b.h.payload_bytes >= sizeof(pp_rec_header)) {
            pp_rec_header h;
            memcpy(&h, b.payload, sizeof h);
            if ((st = merge_until(m, w, h.ts)) != PP_OK)
                break;
        }
        st = pp_trace_writer_block(w, kind, b.h.tid, b.payload, b.h.payload_bytes, b.h.n_records);
    }
    pp_trace_reader_close(r);
    return st;
}

/* The footer of the converted trace whose header is h. */
static pp_status write_footer(const conv *c, pp_trace_writer *w, const pp_trace_header *h)
{
    pp_rec_footer f = {.real_ns = h->real_ns,
                       .events = c->s->ranges * 2 + c->s->marks + c->s->gpu + c->s->api,
                       .dropped = c->s->dropped_late + c->s->dropped_caps,
                       .threads = c->n_threads};
    f.h.ts = c->t_min == UINT64_MAX ? 0 : c->t_min;
    return pp_trace_writer_footer(w, &f);
}

/* Without GPU records to merge in, the scratch trace is the result: its header rewritten (the
 * rank, the pipeline and the first timestamp are known only now), the footer appended, and the
 * file linked to `out` (never over an existing file, as the writer's own open). Its definitions
 * come before the events that use them, not all first, which readers do not rely on
 * (docs/trace-format.md). Returns PP_OK with *done = 0 when the file system cannot link: the
 * caller copies instead. */
static pp_status finish_in_place(conv *c, const char *part, const char *out, int *done)
{
    *done = 0;
    pp_trace_header h;
    header_init(&h, c);
    pp_status st = pp_trace_writer_rewrite_header(c->w, &h);
    if (st == PP_OK)
        st = write_footer(c, c->w, &h);
    pp_trace_writer_close(c->w);
    c->w = NULL;
    if (st != PP_OK)
        return st;
    if (link(part, out) == 0) {
        *done = 1;
        return PP_OK;
    }
    if (errno == EEXIST)
        return PP_ERR(PP_ERR_IO, "trace: cannot create '%s': %s", out, strerror(errno));
    /* a link the file system refuses: the footer just written is dropped from the copy */
    return PP_OK;
}

static pp_status write_final(conv *c, const char *part, const char *out)
{
    pp_trace_header h;
    header_init(&h, c);
    pp_trace_writer *w = NULL;
    pp_status st = pp_trace_writer_open(out, &h, &w);
    if (st != PP_OK)
        return st;
    merge *m = calloc(1, sizeof *m);
    if (!m) {
        st = PP_ERR(PP_ERR_NOMEM, "kineto: out of memory");
        goto done;
    }
    for (int k = 0; k < 2; k++) {
        spill_head *sh = &m->in[k];
        if (!c->spill[k])
            continue;
        fflush(c->spill[k]);
        rewind(c->spill[k]);
        sh->f = c->spill[k];
        sh->have = spill_next(sh->f, sh->rec, &sh->size, &sh->key);
    }
    /* every definition first: the GPU records merged in early may name a kernel defined late */
    if ((st = copy_blocks(part, w, PP_BLOCK_META, m)) != PP_OK ||
        (st = copy_blocks(part, w, PP_BLOCK_EVENTS, m)) != PP_OK ||
        (st = merge_until(m, w, UINT64_MAX)) != PP_OK)
        goto done;
    st = write_footer(c, w, &h);
done:
    free(m);
    pp_trace_writer_close(w);
    if (st != PP_OK)
        unlink(out);
    return st;
}

void pp_kineto_options_default(pp_kineto_options *o)
{
    memset(o, 0, sizeof *o);
    o->default_rank = -1;
}

static void conv_free(conv *c)
{
    kj_close(c->lx);
    free(c->nm.bytes);
    free(c->nm.e);
    free(c->nm.slots);
    for (size_t i = 0; c->threads && i < c->n_threads; i++) {
        free(c->threads[i].buf);
        free(c->threads[i].stack);
        free(c->threads[i].ends);
        free(c->threads[i].begins);
    }
    free(c->threads);
    free(c->meta);
    free(c->heap);
    free(c->ring);
    free(c->named);
    free(c->async);
    free(c->aslots);
    for (int k = 0; k < 2; k++)
        if (c->spill[k])
            fclose(c->spill[k]);
    if (c->runs)
        fclose(c->runs);
}

static int ends_with(const char *s, const char *suffix);

/* The global rank in the name of Paddle's pipeline timeline file (..._for_rank_<N>, N < 2^20),
 * else -1: the files sort by name as 0, 1, 10, 11, 2, ... */
static int32_t rank_in_name(const char *path)
{
    if (!pp_kineto_name_matches(path) || ends_with(path, ".json") || ends_with(path, ".gz"))
        return -1;
    const char *d = strrchr(path, '_') + 1;
    long r = strtol(d, NULL, 10);
    return r < (1 << 20) ? (int32_t)r : -1;
}

/* How convert reads the events: as torch's profiler writes them, as another tool's trace
 * (every category), or as another tool's until an event or header key of torch's shows
 * (convert_input). */
typedef enum { READ_TORCH, READ_OTHER, READ_OTHER_FIRST } read_mode;

/* What a READ_OTHER_FIRST reading found: its result stands, it stopped (torch's reading must
 * run), it met no event that torch's reading would count as another tool's, or it turned into
 * torch's reading at torch's header (its result is torch's reading's). */
typedef enum { OTHER_STANDS, OTHER_STOPPED, OTHER_NO_FOREIGN, OTHER_BECAME_TORCH } other_outcome;

static pp_status convert(kj_lexer *lx, const char *what, const char *out,
                         const pp_kineto_options *o, pp_kineto_stats *stats, read_mode mode,
                         other_outcome *outcome, int *made)
{
    int any_cat = mode != READ_TORCH;
    pp_kineto_options od;
    pp_kineto_stats sd;
    if (!o) {
        pp_kineto_options_default(&od);
        o = &od;
    }
    if (!stats)
        stats = &sd;
    memset(stats, 0, sizeof *stats);
    conv *c = calloc(1, sizeof *c);
    char *part = NULL;
    pp_status st = PP_OK;
    if (!c) {
        kj_close(lx);
        return PP_ERR(PP_ERR_NOMEM, "kineto: out of memory");
    }
    c->lx = lx;
    c->o = o;
    c->s = stats;
    c->any_cat = stats->any_category = any_cat;
    c->speculative = mode == READ_OTHER_FIRST;
    c->rank = -1;
    c->t_min = UINT64_MAX;
    snprintf(c->host, sizeof c->host, "kineto");
    c->window = o->reorder_window ? o->reorder_window : PP_KINETO_REORDER_WINDOW;
    c->threads = calloc(PP_KINETO_MAX_THREADS, sizeof *c->threads);
    c->meta = malloc(META_BUF);
    c->heap = pp_realloc_array(NULL, c->window, sizeof *c->heap);
    c->ring = pp_realloc_array(NULL, c->window, sizeof *c->ring);
    if (any_cat)
        c->named = calloc((PP_KINETO_MAX_NAMES + 2 + 7) / 8, 1);
    size_t plen = strlen(out) + 8;
    part = malloc(plen);
    if (!c->threads || !c->meta || !c->heap || !c->ring || !part || (any_cat && !c->named)) {
        st = PP_ERR(PP_ERR_NOMEM, "kineto: out of memory");
        goto done;
    }
    snprintf(part, plen, "%s.part", out);
    const char *base = strrchr(what, '/');
    snprintf(c->exe, sizeof c->exe, "%s", base ? base + 1 : what);
    pp_trace_header h;
    header_init(&h, c);
    if ((st = pp_trace_writer_open(part, &h, &c->w)) != PP_OK)
        goto done;

    int found = 0;
    kj_tok t = kj_next(lx), end;
    if (t == KJ_ARR) { /* the bare-array form of a Chrome trace */
        found = 1;
        end = events_array(c);
    } else if (t == KJ_OBJ) {
        event_reset(&c->ev);
        end = walk_object(c, top_member, &found);
        if (end == KJ_OBJ_END && !found && c->ev.ph) {
            found = 1;
            end = events_lines(c);
        }
    } else {
        end = t == KJ_EOF ? KJ_EOF : KJ_ERR;
    }
    if (c->restart) { /* torch's: nothing of this reading is kept */
        *outcome = OTHER_STOPPED;
        goto done;
    }
    if (c->speculative && !c->spec_foreign)
        *outcome = OTHER_NO_FOREIGN;
    if (c->became_torch)
        *outcome = OTHER_BECAME_TORCH;
    if (c->err != PP_OK) {
        st = c->err;
        goto done;
    }
    if (end == KJ_EOF || end == KJ_ERR) {
        const char *why = kj_error(lx)[0] ? kj_error(lx) : "the JSON ends early";
        if (!c->saw_events) {
            st = PP_ERR(PP_ERR_CORRUPT, "%s: not a readable Kineto trace: %s", what, why);
            goto done;
        }
        stats->truncated = 1;
        char buf[224];
        snprintf(buf, sizeof buf, "the trace breaks off (%s): converted what comes before", why);
        snprintf(stats->problem, sizeof stats->problem, "%s", buf);
    } else if (!found) {
        st = PP_ERR(PP_ERR_INVALID, "%s: a JSON %s without \"traceEvents\": not a Kineto trace",
                    what, t == KJ_OBJ ? "object" : "value");
        goto done;
    }
    if (c->rank < 0)
        c->rank = rank_in_name(what);
    if (c->rank < 0)
        c->rank = o->default_rank >= 0 && o->default_rank < (1 << 20) ? o->default_rank : -1;
    if (!finish_events(c)) {
        st = c->err != PP_OK ? c->err : PP_ERR(PP_ERR_NOMEM, "kineto: out of memory");
        goto done;
    }
    int in_place = 0;
    if (!c->spill[0] && !c->spill[1] && (st = finish_in_place(c, part, out, &in_place)) != PP_OK)
        goto done;
    if (!in_place) {
        pp_trace_writer_close(c->w);
        c->w = NULL;
        if ((st = write_final(c, part, out)) != PP_OK)
            goto done;
    }
    *made = 1; /* `out` is this reading's */
    stats->rank = c->rank;
    pp_trace_header fin;
    header_init(&fin, c);
    stats->pipe_flags = fin.flags;
    stats->pipe_rank = fin.pipe_rank;
    stats->pipe_size = fin.pipe_size;
    stats->pipe_first = fin.pipe_first;
    snprintf(stats->host, sizeof stats->host, "%s", c->host);
done:
    stats->bytes_in = kj_offset(lx);
    stats->strings_truncated = kj_strings_truncated(lx);
    if (c->w)
        pp_trace_writer_close(c->w);
    if (part)
        unlink(part);
    free(part);
    conv_free(c);
    free(c);
    return st;
}

/* A conversion that kept nothing (no range, mark, GPU or API record, no memory sample) of a
 * file whose events all have categories neither torch's nor Paddle's profiler writes is done
 * again reading every category: the file is another tool's Chrome trace (TensorFlow's trace
 * viewer, JAX's, Chrome's about:tracing, a Perfetto JSON export). */
static int read_again(pp_status st, const pp_kineto_stats *s)
{
    return st == PP_OK && s->foreign > 0 &&
           s->ranges + s->marks + s->gpu + s->api + s->memory_samples == 0;
}

/* Opens the input again for another reading. */
typedef pp_status (*input_open_fn)(const void *src, size_t len, kj_lexer **lx);

static pp_status open_path(const void *src, size_t len, kj_lexer **lx)
{
    (void)len;
    return kj_open_file(src, lx);
}

static pp_status open_buffer(const void *src, size_t len, kj_lexer **lx)
{
    return kj_open_mem(src, len, lx);
}

/* The readings of one input (docs/kineto.md "Which reading"). Torch's reading decides: a file
 * it keeps nothing of, whose events have categories neither torch's nor Paddle's profiler
 * writes, is another tool's, read again that way (read_again). Such a file would be read twice;
 * another tool's reading is tried first instead. At torch's header keys before any event it
 * becomes torch's reading; at the first event torch's reading would read it stops, and the
 * readings above run as they always did. The result is the same either way: another tool's
 * trace is read once, a torch trace once, a file mixing them up to three times. */
static pp_status convert_input(input_open_fn open_input, const void *src, size_t len,
                               const char *what,
                               const char *out, const pp_kineto_options *o,
                               pp_kineto_stats *stats)
{
    pp_kineto_stats sd;
    if (!stats)
        stats = &sd;
    static const read_mode order[] = {READ_OTHER_FIRST, READ_TORCH, READ_OTHER};
    uint64_t before = 0; /* bytes of the readings before this one */
    uint32_t n = 0;      /* readings so far */
    pp_status st = PP_OK;
    int made = 0;        /* `out` was written by a reading before this one */
    for (uint32_t k = 0; k < 3; k++) {
        kj_lexer *lx = NULL;
        if (made)
            unlink(out); /* only a reading's own result: a file that was there stays */
        made = 0;
        if ((st = open_input(src, len, &lx)) != PP_OK)
            return st;
        other_outcome first = OTHER_STANDS;
        st = convert(lx, what, out, o, stats, order[k], &first, &made);
        stats->readings = ++n;
        stats->bytes_read = before + stats->bytes_in;
        before = stats->bytes_read;
        if (k == 0 && first == OTHER_BECAME_TORCH) /* it was torch's reading */
            k = 1;
        else if (k == 0 && st != PP_OK)
            pp_error_clear(); /* torch's reading gives the error, if any, as it always did */
        if (k == 0 ? st == PP_OK && first == OTHER_STANDS : k == 2 || !read_again(st, stats))
            return st;
    }
    return st;
}

pp_status pp_kineto_convert(const char *in, const char *out, const pp_kineto_options *o,
                            pp_kineto_stats *stats)
{
    return convert_input(open_path, in, 0, in, out, o, stats);
}

pp_status pp_kineto_convert_mem(const void *data, size_t len, const char *out,
                                const pp_kineto_options *o, pp_kineto_stats *stats)
{
    return convert_input(open_buffer, data, len, "(buffer)", out, o, stats);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int pp_kineto_name_matches(const char *name)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strcmp(base, "manifest.json") == 0 || strcmp(base, "summary.json") == 0)
        return 0;
    static const char paddle[] = "profile_record_tmp_file_for_rank_"; /* + the global rank */
    if (strncmp(base, paddle, sizeof paddle - 1) == 0) {
        const char *d = base + sizeof paddle - 1;
        size_t n = strspn(d, "0123456789");
        return n > 0 && n <= 9 && d[n] == '\0';
    }
    return ends_with(base, ".json") || ends_with(base, ".json.gz");
}

/* Whether an "otherData" object (its '{' read) is that of pprof-report's own Chrome export
 * ("generator": "pipeprof ..."): a Chrome trace, but not a PyTorch one. Consumes the object. */
static int own_export(kj_lexer *lx)
{
    int own = 0;
    for (kj_tok t = kj_next(lx); t == KJ_STR;) {
        int gen = strcmp(kj_str(lx, NULL), "generator") == 0;
        if (kj_next(lx) != KJ_COLON)
            return own;
        t = kj_next(lx);
        if (gen && t == KJ_STR && strncmp(kj_str(lx, NULL), "pipeprof", 8) == 0)
            own = 1;
        if (kj_skip(lx, t) == KJ_ERR || (t = kj_next(lx)) != KJ_COMMA)
            return own;
        t = kj_next(lx);
    }
    return own;
}

int pp_kineto_sniff(const char *path)
{
    kj_lexer *lx = NULL;
    if (kj_open_file(path, &lx) != PP_OK) {
        pp_error_clear();
        return 0;
    }
    /* a trace's object has "traceEvents" among its first keys, or is an array of events with
     * a "ph"; the walk stops after 64 KB */
    int yes = 0;
    kj_tok t = kj_next(lx);
    if (t == KJ_ARR) {
        yes = kj_next(lx) == KJ_OBJ;
    } else if (t == KJ_OBJ) {
        while (!yes && kj_offset(lx) < 65536) {
            if ((t = kj_next(lx)) != KJ_STR)
                break;
            size_t n;
            const char *k = kj_str(lx, &n);
            int other = strcmp(k, "otherData") == 0, ph = strcmp(k, "ph") == 0;
            if (strcmp(k, "traceEvents") == 0 || strcmp(k, "schemaVersion") == 0 ||
                strcmp(k, "deviceProperties") == 0 || strcmp(k, "distributedInfo") == 0)
                yes = 1;
            if (kj_next(lx) != KJ_COLON)
                break;
            t = kj_next(lx);
            if (ph && t == KJ_STR) /* an event: a file of events one after another */
                yes = 1;
            if (other && t == KJ_OBJ && own_export(lx)) { /* pprof-report --chrome's */
                yes = 0;
                break;
            }
            if ((!other || t != KJ_OBJ) && kj_skip(lx, t) == KJ_ERR)
                break;
            if ((t = kj_next(lx)) != KJ_COMMA)
                break;
        }
    }
    kj_close(lx);
    return yes;
}
