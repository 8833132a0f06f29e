/* pprof_internal.h: state shared by the files of libpprof.so (docs/profiler.md): the global
 * configuration, the per-thread single-producer/single-consumer rings and their inline hot-path
 * helpers, the string/domain registry and the writer. Private to profiler/; the library's only
 * public surface is the two NVTX entry points.
 *
 * Threads: application threads only produce (their own ring, lock-free); the writer thread only
 * consumes. Locks: io_mu (file output) > meta_mu (registry, meta log) > reg_mu (thread slots),
 * always taken in that order. */
#ifndef PPROF_INTERNAL_H
#define PPROF_INTERNAL_H

#include "pp_convention.h" /* the NVTX convention: domain, schema id, step offset */
#include "pp_trace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <wchar.h>

#define NVTX_NO_IMPL /* a tool: NVTX's types only, no NVTX instance of our own */
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>

#define PPROF_EXPORT __attribute__((visibility("default")))
#define PPROF_LIKELY(x) __builtin_expect(!!(x), 1)
#define PPROF_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Bounds. Ext payload data is copied up to PPROF_EXT_MAX_BYTES per event (all elements
 * together; the rest is truncated and counted); strings up to PPROF_STRING_MAX bytes. */
enum {
    PPROF_EXT_MAX_BYTES = 256,
    PPROF_EXT_MAX_ITEMS = 8,
    PPROF_STRING_MAX = 4096,
    PPROF_DEPTH_SLOTS = 64, /* push/pop depth slots per thread; domain id modulo this */
    PPROF_BLOCK_CAP = 1 << 20,
    PPROF_SCHEMA_MAX_ENTRIES = 1024,
    PPROF_INTERN_SLOTS = 1 << 17 /* at most half of them used: 65536 distinct strings */
};


/* g.flags bits, read with one relaxed load per event. */
/* PPROF_F_TSC: the hot path stores raw TSC ticks; the writer converts them to CLOCK_MONOTONIC
 * ns (and applies the clock test hooks) before a block is written. */
enum { PPROF_F_CAPTURE = 1u, PPROF_F_STEPS = 2u, PPROF_F_CLOCK = 4u, PPROF_F_TSC = 8u };

/* Handles NVTX passes back to us are ours to define. A registered string is its intern entry,
 * so registering the same text twice gives the same handle and id. */
struct nvtxStringRegistration_st {
    uint64_t hash;
    uint32_t id;
    uint32_t len;
    int is_step; /* text is "step": the convention's step range message */
    char str[];
};

struct nvtxDomainRegistration_st {
    uint32_t id;
    uint32_t name; /* string id */
    int is_pipeprof;
    struct nvtxDomainRegistration_st *next;
};

enum { PPROF_THREAD_LIVE = 0, PPROF_THREAD_DEAD = 1 };

/* One application thread. The fields before `head` belong to the owning thread (and to the
 * writer only through the atomics); head and tail sit on their own cache lines. */
typedef struct pprof_thread {
    uint8_t *ring;          /* NULL: this thread records nothing (over PPROF_MAX_THREADS) */
    uint64_t mask;          /* ring bytes - 1 (a power of two) */
    uint64_t head_local;    /* producer's copy of head */
    uint64_t tail_cache;    /* producer's last view of tail */
    uint64_t index;         /* process-unique thread index (range ids) */
    uint64_t range_counter; /* start/end ids made by this thread */
    int64_t cur_step;       /* last step range this thread opened; -1 none */
    int has_steps;
    int slot;               /* position in g.threads, -1 when not there */
    _Atomic uint32_t tid;
    _Atomic int state;      /* PPROF_THREAD_LIVE or DEAD (exited, ring reusable once drained) */
    _Atomic uint64_t dropped;  /* single writer: the owner; relaxed load + store */
    _Atomic uint64_t filtered;
    int32_t depth[PPROF_DEPTH_SLOTS];
    _Alignas(64) _Atomic uint64_t head; /* bytes ever committed (release by the producer) */
    _Alignas(64) _Atomic uint64_t tail; /* bytes ever consumed (release by the writer) */
} pprof_thread;

/* Writes records as one EVENTS block of thread tid (the writer, io_mu held). */
typedef void (*pprof_block_fn)(uint32_t tid, const void *records, size_t bytes, uint32_t n);

/* GPU activity buffers handed to the writer (cupti.c sets these once GPU capture is on):
 * whether any waits, their encoding into blocks by the writer at each flush, and what is said
 * after the last flush at exit (PPROF_CUPTI_STATS). */
typedef struct pprof_gpu_hooks {
    int (*pending)(void);
    void (*drain)(pprof_block_fn emit);
    void (*at_exit)(void);
} pprof_gpu_hooks;

typedef struct pprof_global {
    _Atomic unsigned flags;
    /* configuration, fixed at init */
    char dir[512];
    char host[64];
    char exe[96];
    size_t ring_bytes;
    int max_threads;
    int flush_ms;
    int quiet;
    int32_t rank;
    int64_t step_lo, step_hi;
    int64_t clock_offset_ns;
    double clock_drift;
    uint64_t clock_mono0; /* the header's mono_ns/real_ns pair, read back to back */
    uint64_t clock_real0;
    /* TSC calibration (writer side, under io_mu): ns = cal_ns + (ticks - cal_tsc) * ns_per_tick,
     * re-anchored at every drain so errors never accumulate */
    uint64_t cal_tsc, cal_ns;
    double ns_per_tick;
    int want_tsc; /* PPROF_CLOCK is not "monotonic" */
    /* threads */
    pthread_mutex_t reg_mu;
    _Atomic(pprof_thread *) *threads; /* max_threads slots */
    _Atomic int n_threads;            /* slots in use (published with release) */
    uint64_t next_index;              /* under reg_mu */
    _Atomic uint64_t threads_recorded;
    _Atomic uint64_t dropped_global;  /* events of threads without a ring */
    _Atomic int64_t last_step;        /* most recent step opened process-wide; -1 none */
    pthread_key_t key;
    int key_ok;
    /* registry and meta log */
    pthread_mutex_t meta_mu;
    _Atomic(struct nvtxStringRegistration_st *) *intern; /* PPROF_INTERN_SLOTS */
    uint32_t n_strings;
    uint32_t n_domains;
    uint64_t n_dyn_schemas;
    uint64_t step_offset; /* offset of "step" in pipeprof.event as registered */
    struct nvtxDomainRegistration_st *domains;
    uint8_t *meta;        /* encoded META records, all of them, ever */
    size_t meta_len, meta_cap, meta_written;
    int meta_failed;
    /* output */
    pthread_mutex_t io_mu;
    pp_trace_writer *w;
    char path[640];
    int file_wanted;      /* a file should exist (opened, or to be opened lazily) */
    int io_failed;
    uint8_t *stage;       /* PPROF_BLOCK_CAP bytes: one block being assembled */
    uint64_t events_written, discarded;
    _Atomic uint64_t ext_truncated;
    pid_t pid;
    /* writer thread */
    pthread_mutex_t wake_mu;
    pthread_cond_t wake_cv;
    int stop;
    int writer_running;
    pthread_t writer;
    _Atomic int exit_done;
    pprof_gpu_hooks gpu; /* set under io_mu */
} pprof_global;

extern pprof_global g_pprof;
extern _Thread_local pprof_thread *pprof_tls_self;

/* ---- capture.c ---- */
int pprof_global_init(void); /* 1 = capture on; idempotent, thread-safe */
pprof_thread *pprof_thread_register(void);
void pprof_log_once(int *flag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pprof_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t pprof_clock_adjust(uint64_t ts);
/* The integer in environment variable `name` into *out: 1, when it is set to a whole number in
 * lo..hi; 0 when unset or empty; -1 when set to anything else (the caller says what it does
 * instead). */
int pprof_env_int(const char *name, int64_t lo, int64_t hi, int64_t *out);

/* ---- registry.c ---- */
int pprof_registry_init(void);
/* Intern a string (bytes, len <= PPROF_STRING_MAX) and return its entry; NULL when the table is
 * full or memory ran out. Lock-free when the string is known. */
struct nvtxStringRegistration_st *pprof_intern(const char *s, size_t len);
struct nvtxStringRegistration_st *pprof_intern_cstr(const char *s);
struct nvtxStringRegistration_st *pprof_intern_wstr(const wchar_t *s);
size_t pprof_utf8_from_wide(const wchar_t *w, char *out, size_t cap);
nvtxDomainHandle_t pprof_domain_create(const char *name);
void pprof_name_category(nvtxDomainHandle_t d, uint32_t category, const char *name);
void pprof_name_thread(uint32_t os_tid, const char *name);
uint64_t pprof_schema_register(nvtxDomainHandle_t d, const nvtxPayloadSchemaAttr_t *a);
/* Appends a COUNTER_DEF for (domain id, counter id) to the meta log (takes meta_mu). */
void pprof_counter_define(uint32_t domain, uint64_t counter_id, const char *name,
                          const char *unit, uint32_t schema);

/* ---- nvtx_ext.c: the counters and memory extension modules ---- */
/* Fills the module's slots when it is one of them; returns whether it was. */
int pprof_ext_install(nvtxExtModuleInfo_t *mi);
/* Copies pending META records into blocks through `emit`; called with io_mu held. */
typedef int (*pprof_emit_fn)(const void *records, size_t bytes, uint32_t n);
int pprof_meta_flush(pprof_emit_fn emit);

/* ---- hot-path helpers ---- */

static inline pprof_thread *pprof_self(void)
{
    pprof_thread *t = pprof_tls_self;
    if (PPROF_UNLIKELY(!t))
        t = pprof_thread_register();
    return t;
}

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define PPROF_HAVE_TSC 1
#else
#define PPROF_HAVE_TSC 0
#endif

/* The event clock. With an invariant TSC (constant_tsc + nonstop_tsc) one rdtsc (~8 ns) instead
 * of clock_gettime (~19 ns): the two clock reads are most of a push+pop pair's cost. */
static inline uint64_t pprof_now(unsigned flags)
{
#if PPROF_HAVE_TSC
    if (PPROF_LIKELY(flags & PPROF_F_TSC))
        return __rdtsc();
#endif
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    if (PPROF_UNLIKELY(flags & PPROF_F_CLOCK))
        t = pprof_clock_adjust(t);
    return t;
}

/* Single-writer counters: a plain load and store, no locked instruction. */
static inline void pprof_count(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static inline void pprof_drop(pprof_thread *t)
{
    if (PPROF_LIKELY(t->ring != NULL))
        pprof_count(&t->dropped);
    else
        atomic_fetch_add_explicit(&g_pprof.dropped_global, 1, memory_order_relaxed);
}

/* How far ahead of the head the ring's lines are prefetched (bytes): about a dozen push+pop pairs
 * (80 bytes each), some 300 ns at the pairs' rate, time enough for a line to come from another
 * core's cache or from memory. A ring line was last touched a lap ago, by the writer thread when
 * it drained it, and the producer's first store to it waited for the line to come back. With the
 * line asked for ahead (GCC's write prefetch: PREFETCHT0 on baseline x86-64, which measured the
 * same as PREFETCHW here), a push+pop pair measured 27.7 ns instead of 30.5 on one thread and 29.6
 * instead of 33.4 on two (medians of 5 alternating runs of benchmarks/bench_capture,
 * docs/profiler.md "Costs"). */
#define PPROF_PREFETCH_AHEAD 1024

/* Reserves `size` contiguous bytes (a multiple of 8) in the ring, or returns NULL when it is
 * full. A record never wraps: when the end of the ring is too close, an 8-byte pad marker
 * (type 0) tells the writer to skip to the start. */
static inline uint8_t *pprof_ring_reserve(pprof_thread *t, uint32_t size)
{
    uint64_t head = t->head_local;
    uint64_t cap = t->mask + 1;
    uint64_t pos = head & t->mask;
    uint64_t room = cap - pos;
    uint64_t need = room < size ? room + size : size;
    if (PPROF_UNLIKELY(head + need - t->tail_cache > cap)) {
        t->tail_cache = atomic_load_explicit(&t->tail, memory_order_acquire);
        if (head + need - t->tail_cache > cap)
            return NULL;
    }
    __builtin_prefetch(t->ring + ((pos + PPROF_PREFETCH_AHEAD) & t->mask), 1, 3);
    if (PPROF_UNLIKELY(room < size)) {
        *(uint16_t *)(t->ring + pos) = 0; /* pad: skip to the ring's start */
        t->head_local = head + room;
        pos = 0;
    }
    return t->ring + pos;
}

static inline void pprof_ring_commit(pprof_thread *t, uint32_t size)
{
    t->head_local += size;
    atomic_store_explicit(&t->head, t->head_local, memory_order_release);
}

#endif /* PPROF_INTERNAL_H */
