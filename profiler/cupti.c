/* cupti.c: GPU activity capture in libpprof.so (pprof-run --cuda; docs/profiler.md "GPU").
 * pprof-run names this library in CUDA_INJECTION64_PATH; libcuda calls InitializeInjection at
 * cuInit. libcupti is dlopened then (never linked: NVTX-only captures never map it, and a
 * missing libcupti only turns GPU capture off). CUPTI timestamps come through a registered
 * callback on CLOCK_MONOTONIC, the NVTX ranges' clock; completed activity buffers are handed
 * to the writer thread, which encodes them (cupti_encode.c) into blocks of the capture's own
 * file; past a bound, into the delivering thread's ring like any other event, with the
 * capture's drop counting.
 *
 * Never harm the job: every CUPTI failure (no driver, no device, another CUPTI client such as
 * Nsight or torch.profiler already subscribed) is said once on stderr, GPU capture stays off,
 * NVTX capture goes on, and InitializeInjection returns 1. */
#define _GNU_SOURCE
#include "cupti_encode.h"
#include "pprof_internal.h"

#include <cupti.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct cupti_fns {
    CUptiResult (*GetVersion)(uint32_t *);
    CUptiResult (*GetResultString)(CUptiResult, const char **);
    CUptiResult (*RegisterTimestampCallback)(CUpti_TimestampCallbackFunc);
    CUptiResult (*SetThreadIdType)(CUpti_ActivityThreadIdType);
    CUptiResult (*RegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                     CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*Enable)(CUpti_ActivityKind);
    CUptiResult (*GetNextRecord)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*GetNumDropped)(CUcontext, uint32_t, size_t *);
    CUptiResult (*FlushAll)(uint32_t);
    /* optional: per-call selection of the API calls' records */
    CUptiResult (*EnableDriverApi)(CUpti_CallbackId, uint8_t);
    CUptiResult (*EnableRuntimeApi)(CUpti_CallbackId, uint8_t);
    CUptiResult (*GetCallbackName)(CUpti_CallbackDomain, uint32_t, const char **);
} cupti_fns;

static cupti_fns C;
static _Atomic int g_cupti_on;
static pthread_mutex_t g_cupti_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_cupti_tried;
static _Atomic uint64_t g_cupti_dropped; /* records CUPTI itself dropped */

enum { PPROF_CUPTI_BUFFER = 8 << 20 };

static uint64_t CUPTIAPI monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *result_string(CUptiResult r)
{
    const char *s = NULL;
    if (C.GetResultString && C.GetResultString(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "unknown CUPTI error";
}

static uint32_t name_id(void *u, const char *name)
{
    (void)u;
    struct nvtxStringRegistration_st *e = pprof_intern_cstr(name);
    return e ? e->id : 0;
}

static uint64_t trace_clock(void *u, uint64_t ns)
{
    (void)u;
    unsigned flags = atomic_load_explicit(&g_pprof.flags, memory_order_relaxed);
    return flags & PPROF_F_CLOCK ? pprof_clock_adjust(ns) : ns;
}

/* What the GPU capture did, said at exit with PPROF_CUPTI_STATS=1 (docs/profiler.md): where its
 * time goes on a GPU, measured only when asked. */
static struct {
    _Atomic uint64_t requested, completed, deferred, ringed, on_job_thread, valid_bytes;
    _Atomic uint64_t completed_ns, completed_max_ns, drains, drain_ns, drain_max_ns, held_max;
} S;
static int g_stats;

static void stat_max(_Atomic uint64_t *m, uint64_t v)
{
    uint64_t old = atomic_load_explicit(m, memory_order_relaxed);
    while (v > old && !atomic_compare_exchange_weak(m, &old, v)) {
    }
}

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    if (g_stats)
        atomic_fetch_add_explicit(&S.requested, 1, memory_order_relaxed);
    *buf = aligned_alloc(8, PPROF_CUPTI_BUFFER);
    *size = *buf ? PPROF_CUPTI_BUFFER : 0;
    *max_records = 0;
}

/* Completed buffers handed to the writer: a lock-free stack (pushed by whichever thread CUPTI
 * delivers on, taken whole by the writer), so the delivering thread, which may be one of the
 * job's, never waits on a lock or the disk. Bounded: past PPROF_CUPTI_DEFER_MB held (128 by
 * default), a buffer is encoded into the delivering thread's ring instead, dropping and counting
 * what does not fit. */
typedef struct deferred {
    struct deferred *next;
    uint8_t *buf;
    size_t size, valid;
    uint32_t tid; /* the delivering thread: the records' header tid, as before */
} deferred;

static _Atomic(deferred *) g_deferred;
static _Atomic size_t g_deferred_bytes;
static size_t g_defer_max = (size_t)128 << 20; /* PPROF_CUPTI_DEFER_MB, read at start */
static uint8_t *g_block; /* the writer's block to encode into: made at start, or nothing deferred */

static int defer(uint8_t *buf, size_t size, size_t valid, uint32_t tid)
{
    size_t held = atomic_fetch_add(&g_deferred_bytes, size);
    deferred *d = held + size <= g_defer_max ? malloc(sizeof *d) : NULL;
    if (!d) {
        atomic_fetch_sub(&g_deferred_bytes, size);
        return 0;
    }
    if (g_stats)
        stat_max(&S.held_max, held + size);
    *d = (deferred){.buf = buf, .size = size, .valid = valid, .tid = tid};
    deferred *head = atomic_load_explicit(&g_deferred, memory_order_relaxed);
    do
        d->next = head;
    while (!atomic_compare_exchange_weak_explicit(&g_deferred, &head, d, memory_order_release,
                                                  memory_order_relaxed));
    return 1;
}

/* Encodes a buffer's records into the ring of t (t set: what finds no room is dropped and
 * counted), or else into blocks of at most PPROF_BLOCK_CAP bytes (in `block`) through emit (the
 * writer). */
static void encode_buffer(uint8_t *buf, size_t valid, const pprof_cupti_env *env,
                          pprof_thread *t, pprof_block_fn emit, uint8_t *block)
{
    CUpti_Activity *rec = NULL;
    size_t used = 0;
    uint32_t n = 0;
    while (C.GetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        _Static_assert(sizeof(pp_rec_gpu) >= sizeof(pp_rec_api) &&
                           sizeof(pp_rec_gpu) >= sizeof(pp_rec_gpu_mem),
                       "tmp holds every encoded record");
        uint8_t tmp[sizeof(pp_rec_gpu)];
        size_t len = pprof_cupti_encode(rec, env, tmp, sizeof tmp);
        if (len == 0 || len == (size_t)-1)
            continue;
        if (t) {
            uint8_t *p = pprof_ring_reserve(t, (uint32_t)len);
            if (!p) {
                pprof_drop(t);
                continue;
            }
            memcpy(p, tmp, len);
            pprof_ring_commit(t, (uint32_t)len);
            continue;
        }
        if (used + len > PPROF_BLOCK_CAP) {
            emit(env->tid, block, used, n);
            used = 0;
            n = 0;
        }
        memcpy(block + used, tmp, len);
        used += len;
        n++;
    }
    if (!t && n)
        emit(env->tid, block, used, n);
}

static void count_cupti_drops(CUcontext ctx, uint32_t stream)
{
    size_t dropped = 0;
    if (C.GetNumDropped && C.GetNumDropped(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped) {
        atomic_fetch_add(&g_cupti_dropped, dropped);
        /* lost events like any other: in the footer's count, which pprof-run and the report say */
        atomic_fetch_add_explicit(&g_pprof.dropped_global, dropped, memory_order_relaxed);
    }
}

/* A completed buffer: handed to the writer, which encodes it at its next flush (writer_drain),
 * or, past the bound, encoded here into this thread's ring. Either way no thread waits: one
 * 8 MB buffer of a launch-bound job holds more records than a ring, and encoding it into a
 * full ring dropped them (on an H200, 402 135 records of pptrain's capture). */
static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                      size_t valid)
{
    static _Thread_local int ring_made_here; /* this thread's ring is the one made below */
    uint64_t t0 = g_stats ? monotonic_ns() : 0;
    int kept = 0;
    if (valid && atomic_load_explicit(&g_cupti_on, memory_order_acquire)) {
        uint32_t tid = (uint32_t)syscall(SYS_gettid);
        if (g_stats && pprof_tls_self && !ring_made_here)
            atomic_fetch_add_explicit(&S.on_job_thread, 1, memory_order_relaxed);
        count_cupti_drops(ctx, stream);
        kept = defer(buf, size, valid, tid); /* then the writer frees it */
        if (!kept) {
            ring_made_here |= pprof_tls_self == NULL;
            pprof_thread *t = pprof_self(); /* a ring only for a thread that needs one */
            pprof_cupti_env env = {.name_id = name_id, .clock = trace_clock, .u = NULL,
                                   .tid = tid};
            encode_buffer(buf, valid, &env, t, NULL, NULL);
        }
    }
    if (!kept)
        free(buf);
    if (g_stats) {
        uint64_t ns = monotonic_ns() - t0;
        atomic_fetch_add_explicit(&S.completed, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(kept ? &S.deferred : &S.ringed, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&S.valid_bytes, valid, memory_order_relaxed);
        atomic_fetch_add_explicit(&S.completed_ns, ns, memory_order_relaxed);
        stat_max(&S.completed_max_ns, ns);
    }
}

static int writer_pending(void)
{
    return atomic_load_explicit(&g_deferred, memory_order_acquire) != NULL;
}

/* The writer's part (io_mu held): every buffer handed over so far, oldest first, encoded into
 * blocks and freed. */
static void writer_drain(pprof_block_fn emit)
{
    deferred *d = atomic_exchange_explicit(&g_deferred, NULL, memory_order_acquire), *fifo = NULL;
    while (d) { /* the stack is newest first */
        deferred *next = d->next;
        d->next = fifo;
        fifo = d;
        d = next;
    }
    uint64_t t0 = g_stats && fifo ? monotonic_ns() : 0;
    for (d = fifo; d; d = fifo) {
        fifo = d->next;
        pprof_cupti_env env = {.name_id = name_id, .clock = trace_clock, .u = NULL,
                               .tid = d->tid};
        encode_buffer(d->buf, d->valid, &env, NULL, emit, g_block);
        atomic_fetch_sub(&g_deferred_bytes, d->size);
        free(d->buf);
        free(d);
    }
    if (t0) {
        uint64_t ns = monotonic_ns() - t0;
        atomic_fetch_add_explicit(&S.drains, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&S.drain_ns, ns, memory_order_relaxed);
        stat_max(&S.drain_max_ns, ns);
    }
}

/* PPROF_CUPTI_STATS=1: one line on stderr after the last flush, even under pprof-run -q. */
static void stats_at_exit(void)
{
    if (!g_stats)
        return;
    uint64_t comp = atomic_load(&S.completed), drains = atomic_load(&S.drains);
    fprintf(stderr,
            "pprof: CUPTI stats: %llu buffers requested, %llu completed (%llu to the "
            "writer, %llu encoded in place, %llu on a thread with events of its own), %.1f MiB of "
            "records; completion %.1f us mean, %.1f us max; writer %llu drains, %.1f us mean, "
            "%.1f us max; %.1f MiB held at most\n",
            (unsigned long long)atomic_load(&S.requested),
            (unsigned long long)comp, (unsigned long long)atomic_load(&S.deferred),
            (unsigned long long)atomic_load(&S.ringed),
            (unsigned long long)atomic_load(&S.on_job_thread),
            (double)atomic_load(&S.valid_bytes) / 1048576.0,
            comp ? (double)atomic_load(&S.completed_ns) / (double)comp / 1e3 : 0.0,
            (double)atomic_load(&S.completed_max_ns) / 1e3, (unsigned long long)drains,
            drains ? (double)atomic_load(&S.drain_ns) / (double)drains / 1e3 : 0.0,
            (double)atomic_load(&S.drain_max_ns) / 1e3,
            (double)atomic_load(&S.held_max) / 1048576.0);
}

/* A forked child: the parent's buffers are the parent's to write. */
static void forget_deferred_in_child(void)
{
    deferred *d = atomic_exchange(&g_deferred, NULL);
    while (d) {
        deferred *next = d->next;
        free(d->buf);
        free(d);
        d = next;
    }
    atomic_store(&g_deferred_bytes, 0);
}

static void flush_at_exit(void)
{
    if (atomic_load(&g_cupti_on) && C.FlushAll)
        C.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    uint64_t d = atomic_load(&g_cupti_dropped);
    if (d) /* a loss and its cause: said even when quiet (pprof-run -q) */
        fprintf(stderr, "pprof: CUPTI dropped %llu GPU activity records (its buffers were full); "
                        "they count among the capture's dropped events\n",
                (unsigned long long)d);
}

#define LOAD(field, sym)                                                                         \
    do {                                                                                         \
        *(void **)(&C.field) = dlsym(lib, sym);                                                  \
        if (!C.field) {                                                                          \
            pprof_log("pprof: --cuda: %s lacks %s; GPU activity not captured, NVTX capture "   \
                      "goes on",                                                                 \
                      path, sym);                                                                \
            return 0;                                                                            \
        }                                                                                        \
    } while (0)

/* Whether an API call (by name) can launch GPU work: kernels, graphs, copies, memsets. */
static int launches_work(const char *name, int driver)
{
    static const char *const drv[] = {"cuLaunch", "cuGraphLaunch", "cuMemcpy", "cuMemset"};
    static const char *const rt[] = {"cudaLaunch", "cudaGraphLaunch", "cudaMemcpy", "cudaMemset"};
    const char *const *p = driver ? drv : rt;
    for (size_t i = 0; i < 4; i++)
        if (strncmp(name, p[i], strlen(p[i])) == 0)
            return 1;
    return 0;
}

/* The API calls' records (RUNTIME or DRIVER kind). The kinds record every call: the many
 * queries frameworks make between launches (PyTorch checks cudaGetLastError after each), and
 * for the driver every call the runtime and the libraries make inside each of theirs. The
 * projection needs only the calls that launch GPU work (a kernel's correlation id names its
 * launching call), so by default only those are enabled, one callback id at a time
 * (cuptiActivityEnable{Runtime,Driver}Api, which work without their kind), chosen by name
 * (cuptiGetCallbackName, so a newer CUPTI's new launch calls are in). PPROF_CUPTI_API=all records
 * every call, as does a CUPTI without that selection or one that refuses it. */
static CUptiResult enable_api_records(CUpti_ActivityKind kind)
{
    const char *mode = getenv("PPROF_CUPTI_API");
    int all = mode && strcmp(mode, "all") == 0, driver = kind == CUPTI_ACTIVITY_KIND_DRIVER;
    static int warned;
    if (mode && *mode && !all && strcmp(mode, "launch") != 0)
        pprof_log_once(&warned, "pprof: --cuda: PPROF_CUPTI_API=%s is neither \"launch\" nor "
                                "\"all\"; using \"launch\"",
                       mode);
    CUptiResult (*select)(CUpti_CallbackId, uint8_t) = driver ? C.EnableDriverApi
                                                               : C.EnableRuntimeApi;
    if (all || !select || !C.GetCallbackName)
        return C.Enable(kind);
    CUpti_CallbackDomain domain = driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
    uint32_t size = driver ? (uint32_t)CUPTI_DRIVER_TRACE_CBID_SIZE
                           : (uint32_t)CUPTI_RUNTIME_TRACE_CBID_SIZE;
    int enabled = 0;
    for (uint32_t cbid = 1; cbid < size; cbid++) {
        const char *name = NULL;
        if (C.GetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name ||
            !launches_work(name, driver))
            continue;
        if (select(cbid, 1) != CUPTI_SUCCESS)
            return C.Enable(kind); /* every call rather than none */
        enabled++;
    }
    return enabled ? CUPTI_SUCCESS : C.Enable(kind);
}

/* A count from the environment in 0..max, else (unset, or not such a number: said once) dflt. */
static unsigned long long env_count(const char *name, unsigned long long max,
                                    unsigned long long dflt)
{
    int64_t v = 0;
    int r = pprof_env_int(name, 0, (int64_t)max, &v);
    if (r > 0)
        return (unsigned long long)v;
    if (r < 0)
        pprof_log("pprof: --cuda: %s=%s is not a number in 0..%llu; using %llu", name,
                  getenv(name), max, dflt);
    return dflt;
}

/* The activity kinds recorded, by the names PPROF_CUPTI_KINDS takes; memory (the optional one)
 * last. */
static const struct {
    const char *name;
    CUpti_ActivityKind kind;
} kind_names[] = {
    {"kernel", CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
    {"memcpy", CUPTI_ACTIVITY_KIND_MEMCPY},
    {"memset", CUPTI_ACTIVITY_KIND_MEMSET},
    {"runtime", CUPTI_ACTIVITY_KIND_RUNTIME},
    {"driver", CUPTI_ACTIVITY_KIND_DRIVER},
    {"sync", CUPTI_ACTIVITY_KIND_SYNCHRONIZATION},
    {"memory", CUPTI_ACTIVITY_KIND_MEMORY2},
};

/* PPROF_CUPTI_KINDS: a comma-separated subset of kind_names (a diagnosis: without the runtime
 * and driver records no kernel can be projected onto its launching thread's ranges); unset, or
 * naming anything else (said once), every kind but sync. Synchronisation records (every wait of
 * a host thread on the GPU) are recorded only when asked for: the analysis reads none of them,
 * and each is one more record per wait on the thread that waits. */
static unsigned kinds_wanted(void)
{
    unsigned n = (unsigned)(sizeof kind_names / sizeof kind_names[0]);
    unsigned dflt = 0;
    for (unsigned i = 0; i < n; i++)
        if (kind_names[i].kind != CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)
            dflt |= 1u << i;
    const char *s = getenv("PPROF_CUPTI_KINDS");
    if (!s || !*s)
        return dflt;
    unsigned mask = 0;
    for (const char *p = s; *p;) {
        size_t len = strcspn(p, ",");
        unsigned i = 0;
        while (i < n && (strlen(kind_names[i].name) != len || strncmp(p, kind_names[i].name, len)))
            i++;
        if (i == n) {
            pprof_log("pprof: --cuda: PPROF_CUPTI_KINDS=%s: \"%.*s\" is none of kernel, memcpy, "
                      "memset, runtime, driver, sync, memory; recording the default kinds (all "
                      "but sync)",
                      s, (int)len, p);
            return dflt;
        }
        mask |= 1u << i;
        p += len + (p[len] == ',');
    }
    return mask;
}

static int cupti_start(void)
{
    const char *path = getenv("PPROF_CUPTI_LIB");
    if (!path || !*path)
        path = "libcupti.so.13";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        pprof_log("pprof: --cuda: cannot load %s (%s); GPU activity not captured, NVTX capture "
                  "goes on",
                  path, dlerror());
        return 0;
    }
    /* never dlclosed: CUDA 13.0/13.1's libcupti crashes when unloaded (INSTRUMENTATION.md 5) */
    LOAD(GetVersion, "cuptiGetVersion");
    LOAD(GetResultString, "cuptiGetResultString");
    LOAD(RegisterTimestampCallback, "cuptiActivityRegisterTimestampCallback");
    LOAD(SetThreadIdType, "cuptiSetThreadIdType");
    LOAD(RegisterCallbacks, "cuptiActivityRegisterCallbacks");
    LOAD(Enable, "cuptiActivityEnable");
    LOAD(GetNextRecord, "cuptiActivityGetNextRecord");
    LOAD(GetNumDropped, "cuptiActivityGetNumDroppedRecords");
    LOAD(FlushAll, "cuptiActivityFlushAll");
    *(void **)(&C.EnableDriverApi) = dlsym(lib, "cuptiActivityEnableDriverApi");
    *(void **)(&C.EnableRuntimeApi) = dlsym(lib, "cuptiActivityEnableRuntimeApi");
    *(void **)(&C.GetCallbackName) = dlsym(lib, "cuptiGetCallbackName");
    uint32_t version = 0;
    C.GetVersion(&version);
    if (version && version < 130001)
        pprof_log("pprof: --cuda: CUPTI API version %u is older than 13.0 Update 1 (130001), "
                  "whose fixes GPU capture relies on",
                  version);
    /* the clock first: every record after this is on CLOCK_MONOTONIC */
    CUptiResult r = C.RegisterTimestampCallback(monotonic_ns);
    if (r != CUPTI_SUCCESS) {
        pprof_log("pprof: --cuda: no GPU tracing (%s: no device or driver?); NVTX capture goes "
                  "on",
                  result_string(r));
        return 0;
    }
    C.SetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM); /* gettid, as the NVTX records */
    if ((r = C.RegisterCallbacks(buffer_requested, buffer_completed)) != CUPTI_SUCCESS) {
        pprof_log("pprof: --cuda: CUPTI buffer callbacks refused (%s); NVTX capture goes on",
                  result_string(r));
        return 0;
    }
    /* completed buffers go to the writer (writer_drain), up to PPROF_CUPTI_DEFER_MB held;
     * PPROF_CUPTI_STATS: what it cost */
    g_defer_max = (size_t)env_count("PPROF_CUPTI_DEFER_MB", 65536, 128) << 20;
    if (g_defer_max && !(g_block = malloc(PPROF_BLOCK_CAP)))
        g_defer_max = 0; /* every buffer into the delivering thread's ring, drops counted */
    g_stats = env_count("PPROF_CUPTI_STATS", 1, 0) != 0;
    unsigned wanted = kinds_wanted();
    pthread_mutex_lock(&g_pprof.io_mu);
    g_pprof.gpu = (pprof_gpu_hooks){
        .pending = writer_pending, .drain = writer_drain, .at_exit = stats_at_exit};
    pthread_mutex_unlock(&g_pprof.io_mu);
    pthread_atfork(NULL, NULL, forget_deferred_in_child);
    atomic_store(&g_cupti_on, 1);
    for (size_t i = 0; i < sizeof kind_names / sizeof kind_names[0] - 1; i++) {
        if (!(wanted & 1u << i))
            continue;
        CUpti_ActivityKind kind = kind_names[i].kind;
        r = kind == CUPTI_ACTIVITY_KIND_DRIVER || kind == CUPTI_ACTIVITY_KIND_RUNTIME
                ? enable_api_records(kind)
                : C.Enable(kind);
        if (r == CUPTI_SUCCESS)
            continue;
        atomic_store(&g_cupti_on, 0);
        if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
            pprof_log("pprof: --cuda: another CUPTI client is attached (Nsight Systems, "
                      "torch.profiler ...); GPU activity not captured, NVTX capture goes on");
        else
            pprof_log("pprof: --cuda: no GPU tracing (enabling activity kind %d: %s); NVTX "
                      "capture goes on",
                      (int)kind, result_string(r));
        return 0;
    }
    /* device memory allocations and releases (issue 17): optional, the rest goes on without */
    unsigned memory = 1u << (sizeof kind_names / sizeof kind_names[0] - 1);
    if ((wanted & memory) && (r = C.Enable(CUPTI_ACTIVITY_KIND_MEMORY2)) != CUPTI_SUCCESS)
        pprof_log("pprof: --cuda: no device memory activity (%s); kernels and copies are "
                  "still captured",
                  result_string(r));
    atexit(flush_at_exit);
    return 1;
}

/* Called by libcuda at cuInit through CUDA_INJECTION64_PATH (once per process). */
PPROF_EXPORT int InitializeInjection(void)
{
    pthread_mutex_lock(&g_cupti_mu);
    if (!g_cupti_tried) {
        g_cupti_tried = 1;
        if (pprof_global_init())
            cupti_start();
    }
    pthread_mutex_unlock(&g_cupti_mu);
    return 1; /* always: 0's effect is undocumented (INSTRUMENTATION.md 2.1) */
}
