/* capture.c: libpprof's life cycle (docs/profiler.md): configuration from the environment
 * (the contract with pprof-run), per-thread rings, the writer thread that drains them into the
 * .pft file every PPROF_FLUSH_MS, the exit flush with its footer, fork handling and the "never
 * harm the job" rule: any internal failure logs one line, turns capture off and counts drops. */
#define _GNU_SOURCE /* syscall(SYS_gettid), pthread_setname_np */

#include "pprof_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define g g_pprof

pprof_global g_pprof = {
    .reg_mu = PTHREAD_MUTEX_INITIALIZER,
    .meta_mu = PTHREAD_MUTEX_INITIALIZER,
    .io_mu = PTHREAD_MUTEX_INITIALIZER,
    .wake_mu = PTHREAD_MUTEX_INITIALIZER,
    .wake_cv = PTHREAD_COND_INITIALIZER,
    .last_step = -1,
};

_Thread_local pprof_thread *pprof_tls_self;

/* A thread that has exited (its key destructor ran) or could get no state at all: records
 * nothing, counts its events as dropped. Shared, so its depths are approximate. */
static pprof_thread g_nothread = {.cur_step = -1, .slot = -1};

static pthread_mutex_t g_init_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_init_state; /* 0 not yet, 1 capturing, -1 off for the whole process */
static int g_io_warned, g_alloc_warned, g_writer_warned;

/* ---- logging ---- */

void pprof_log(const char *fmt, ...)
{
    if (g.quiet)
        return;
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    /* One write(2): lines of concurrent processes do not interleave. */
    ssize_t w = write(2, line, (size_t)n);
    (void)w;
}

void pprof_log_once(int *flag, const char *fmt, ...)
{
    if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED))
        return;
    char line[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pprof_log("%s", line);
}

/* ---- clock test hooks ---- */

uint64_t pprof_clock_adjust(uint64_t ts)
{
    int64_t d = (int64_t)(ts - g.clock_mono0);
    double scaled = (double)d * (1.0 + g.clock_drift);
    return g.clock_mono0 + (uint64_t)(int64_t)scaled + (uint64_t)g.clock_offset_ns;
}

/* ---- environment ---- */

int pprof_env_int(const char *name, int64_t lo, int64_t hi, int64_t *out)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 1;
}

static int env_i64(const char *name, int64_t lo, int64_t hi, int64_t *out)
{
    int r = pprof_env_int(name, lo, hi, out);
    if (r < 0)
        pprof_log("pprof: ignoring %s=%s (expected an integer in %lld..%lld)", name,
                  getenv(name), (long long)lo, (long long)hi);
    return r > 0;
}

static void parse_steps(const char *s)
{
    char *end;
    errno = 0;
    long long lo = strtoll(s, &end, 10), hi = LLONG_MAX;
    int ok = !errno && end != s && *end == ':' && lo >= 1;
    if (ok && end[1]) {
        char *e2;
        hi = strtoll(end + 1, &e2, 10);
        ok = !errno && !*e2 && hi >= lo;
    }
    if (!ok) {
        pprof_log("pprof: ignoring PPROF_STEPS=%s (expected N:M or N:, 1 <= N <= M)", s);
        return;
    }
    g.step_lo = lo;
    g.step_hi = hi;
    atomic_fetch_or(&g.flags, PPROF_F_STEPS);
}

static int32_t rank_from_env(void)
{
    static const char *const vars[] = {"PPROF_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                       "PMIX_RANK",  "SLURM_PROCID",         "RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        int64_t v;
        if (env_i64(vars[i], 0, INT32_MAX, &v))
            return (int32_t)v;
    }
    return -1;
}

static void read_config(void)
{
    const char *q = getenv("PPROF_QUIET");
    g.quiet = q && *q && strcmp(q, "0") != 0;
    int64_t kb = 4096, threads = 512, ms = 20;
    env_i64("PPROF_BUFFER_KB", 64, 1 << 20, &kb);
    env_i64("PPROF_MAX_THREADS", 1, 1 << 16, &threads);
    env_i64("PPROF_FLUSH_MS", 1, 60000, &ms);
    /* The ring indexes with a mask: round down to a power of two. */
    size_t bytes = (size_t)kb * 1024, p = 1;
    while (p * 2 <= bytes)
        p *= 2;
    g.ring_bytes = p;
    g.max_threads = (int)threads;
    g.flush_ms = (int)ms;
    g.rank = rank_from_env();
    const char *steps = getenv("PPROF_STEPS");
    if (steps && *steps)
        parse_steps(steps);
    int64_t off = 0;
    int hooked = env_i64("PPROF_TEST_CLOCK_OFFSET_NS", INT64_MIN, INT64_MAX, &off);
    g.clock_offset_ns = off;
    const char *drift = getenv("PPROF_TEST_CLOCK_DRIFT");
    if (drift && *drift) {
        char *end;
        double d = strtod(drift, &end);
        if (*end || d <= -0.5 || d >= 0.5)
            pprof_log("pprof: ignoring PPROF_TEST_CLOCK_DRIFT=%s (expected |x| < 0.5)", drift);
        else {
            g.clock_drift = d;
            hooked |= d != 0.0;
        }
    }
    if (hooked)
        atomic_fetch_or(&g.flags, PPROF_F_CLOCK);
    const char *clk = getenv("PPROF_CLOCK");
    if (clk && *clk && strcmp(clk, "monotonic") != 0 && strcmp(clk, "tsc") != 0 &&
        strcmp(clk, "auto") != 0)
        pprof_log("pprof: ignoring PPROF_CLOCK=%s (expected auto, tsc or monotonic)", clk);
    g.want_tsc = !(clk && strcmp(clk, "monotonic") == 0);
    if (gethostname(g.host, sizeof g.host - 1) != 0)
        strcpy(g.host, "unknown");
    for (char *c = g.host; *c; c++)
        if (*c == '/')
            *c = '_';
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        const char *b = strrchr(exe, '/');
        b = b ? b + 1 : exe;
        size_t len = strnlen(b, sizeof g.exe - 1);
        memcpy(g.exe, b, len);
        g.exe[len] = '\0';
    }
}

/* ---- output ---- */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- TSC clock ---- */

/* Only an invariant TSC (same rate in every P-state and C-state, kept in sync across cores by
 * the kernel) is a clock; /proc/cpuinfo says whether this one is. */
static int tsc_invariant(void)
{
#if PPROF_HAVE_TSC
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0;
    char line[4096];
    int ok = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) == 0) {
            ok = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc");
            break;
        }
    }
    fclose(f);
    return ok;
#else
    return 0;
#endif
}

/* A (ticks, ns) pair read as close together as possible: of a few tries, the one whose two
 * tick reads around clock_gettime are closest (an interrupt in between spoils a try); the ticks
 * are their midpoint. */
static void tsc_pair(uint64_t *ticks, uint64_t *ns)
{
#if PPROF_HAVE_TSC
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t a = __rdtsc();
        uint64_t n = mono_ns();
        uint64_t b = __rdtsc();
        if (b - a < best) {
            best = b - a;
            *ticks = a + (b - a) / 2;
            *ns = n;
        }
    }
#else
    *ticks = 0;
    *ns = mono_ns();
#endif
}

/* Anchors the conversion and measures the tick rate over ~200 us: enough for the first
 * drain; every later drain refines the rate over the interval since the previous one. */
static void tsc_calibrate_start(void)
{
    uint64_t t0, n0, t1, n1;
    tsc_pair(&t0, &n0);
    do
        tsc_pair(&t1, &n1);
    while (n1 - n0 < 200000);
    g.ns_per_tick = t1 > t0 ? (double)(n1 - n0) / (double)(t1 - t0) : 0.0;
    g.cal_tsc = t1;
    g.cal_ns = n1;
}

/* Called with io_mu held at the start of a drain, after the ring heads were read: every record
 * to convert now has ticks below the new anchor. Returns the rate to use for this drain. */
static void tsc_recalibrate(uint64_t *anchor_tsc, uint64_t *anchor_ns, double *rate)
{
    uint64_t t1, n1;
    tsc_pair(&t1, &n1);
    *anchor_tsc = g.cal_tsc;
    *anchor_ns = g.cal_ns;
    /* Over at least 1 ms the pair's ~20 ns of read jitter is < 2e-5 of the interval. */
    if (n1 > g.cal_ns + 1000000 && t1 > g.cal_tsc) {
        double r = (double)(n1 - g.cal_ns) / (double)(t1 - g.cal_tsc);
        if (r > 0.01 && r < 100.0)
            g.ns_per_tick = r;
        g.cal_tsc = t1;
        g.cal_ns = n1;
    }
    *rate = g.ns_per_tick;
}

static uint64_t tsc_to_ns(uint64_t ticks, uint64_t anchor_tsc, uint64_t anchor_ns, double rate)
{
    double d = (double)(int64_t)(ticks - anchor_tsc) * rate;
    return anchor_ns + (uint64_t)(int64_t)llround(d);
}

/* Rewrites the ts of every record of [p, p + bytes) from ticks to ns (the writer owns that
 * part of the ring until it moves the tail). */
static void tsc_convert(uint8_t *p, size_t bytes, uint64_t anchor_tsc, uint64_t anchor_ns,
                        double rate, unsigned flags)
{
    for (size_t off = 0; off < bytes;) {
        pp_rec_header h;
        memcpy(&h, p + off, sizeof h);
        if (h.ts) {
            h.ts = tsc_to_ns(h.ts, anchor_tsc, anchor_ns, rate);
            if (flags & PPROF_F_CLOCK)
                h.ts = pprof_clock_adjust(h.ts);
            memcpy(p + off, &h, sizeof h);
        }
        off += h.size;
    }
}

/* Opens this process's file; io_mu held. Returns 1 on success. */
static int file_open(void)
{
    snprintf(g.path, sizeof g.path, "%s/%s.%d.pft", g.dir, g.host, (int)getpid());
    pp_trace_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, PP_TRACE_MAGIC, 4);
    h.version = PP_TRACE_VERSION;
    h.header_bytes = sizeof h;
    h.pid = (uint32_t)getpid();
    h.rank = g.rank;
    h.mono_ns = g.clock_mono0; /* the origin of the clock test hooks' formula */
    h.real_ns = g.clock_real0;
    h.clock_offset_ns = g.clock_offset_ns;
    h.clock_drift = g.clock_drift;
    memcpy(h.host, g.host, strnlen(g.host, sizeof h.host - 1));
    memcpy(h.exe, g.exe, strnlen(g.exe, sizeof h.exe - 1));
    pp_status st = pp_trace_writer_open(g.path, &h, &g.w);
    if (st != PP_OK) {
        g.w = NULL;
        pprof_log("pprof: cannot create %s: %s; capture off", g.path, pp_error_message());
        return 0;
    }
    return 1;
}

/* Any write failure: one line, capture off for good, what is in the rings discarded (and
 * counted as dropped). io_mu held. */
static void io_fail(void)
{
    g.io_failed = 1;
    atomic_fetch_and(&g.flags, ~PPROF_F_CAPTURE);
    pprof_log_once(&g_io_warned, "pprof: writing %s failed: %s; capture off", g.path,
                   pp_error_message());
    pp_trace_writer_close(g.w);
    g.w = NULL;
}

static int emit_meta(const void *records, size_t bytes, uint32_t n)
{
    if (!g.w)
        return 1;
    if (pp_trace_writer_block(g.w, PP_BLOCK_META, 0, records, bytes, n) != PP_OK) {
        io_fail();
        return 0;
    }
    return 1;
}

static int is_event(uint16_t type) { return type >= PP_REC_PUSH && type <= PP_REC_MARK; }

/* Writes everything between tail and `head` of one ring as EVENTS blocks, straight from the ring
 * (a block is a contiguous run of records: a pad or the block cap ends it); io_mu held. The
 * tail moves after each write, so the producer gets the space back block by block. */
static void drain(pprof_thread *t, uint64_t head, const uint64_t *cal, double rate)
{
    uint64_t tail = atomic_load_explicit(&t->tail, memory_order_relaxed);
    uint64_t cap = t->mask + 1;
    static int bad_warned;
    while (tail < head) {
        uint64_t pos = tail & t->mask;
        if (*(const uint16_t *)(t->ring + pos) == 0) { /* pad: continue at the ring's start */
            tail += cap - pos;
            atomic_store_explicit(&t->tail, tail, memory_order_release);
            continue;
        }
        size_t bytes = 0;
        uint32_t n = 0;
        uint64_t ev = 0;
        while (tail + bytes < head && pos + bytes < cap) {
            const pp_rec_header *h = (const pp_rec_header *)(t->ring + pos + bytes);
            if (h->type == 0)
                break;
            if (h->size < sizeof *h || (h->size & 7) || pos + bytes + h->size > cap ||
                tail + bytes + h->size > head) {
                pprof_log_once(&bad_warned, "pprof: internal error: bad record in a ring");
                bytes = 0;
                n = 0;
                ev = 0;
                tail = head; /* skip what cannot be parsed */
                break;
            }
            if (bytes + h->size > PPROF_BLOCK_CAP)
                break;
            bytes += h->size;
            n++;
            ev += is_event(h->type);
        }
        if (n) {
            unsigned flags = atomic_load_explicit(&g.flags, memory_order_relaxed);
            if (flags & PPROF_F_TSC)
                tsc_convert(t->ring + pos, bytes, cal[0], cal[1], rate, flags);
            if (g.w && pp_trace_writer_block(g.w, PP_BLOCK_EVENTS,
                                             atomic_load_explicit(&t->tid, memory_order_relaxed),
                                             t->ring + pos, bytes, n) == PP_OK) {
                g.events_written += ev;
            } else {
                if (g.w)
                    io_fail();
                g.discarded += ev;
            }
            tail += bytes;
        }
        atomic_store_explicit(&t->tail, tail, memory_order_release);
    }
}

/* The process's resident memory (/proc/self/statm, reopened each time: after a fork /proc/self
 * must name the child) as one sample of the built-in counter, in an EVENTS block of the writer's
 * own thread; io_mu held, g.w open. Called at every flush, so any job gets a memory curve. */
static void rss_sample(void)
{
    static long page_bytes;
    if (!page_bytes)
        page_bytes = sysconf(_SC_PAGESIZE);
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0 || page_bytes <= 0)
        return;
    buf[n] = '\0';
    unsigned long long size_pages = 0, resident_pages = 0;
    if (sscanf(buf, "%llu %llu", &size_pages, &resident_pages) != 2)
        return;
    pp_rec_counter r;
    memset(&r, 0, sizeof r);
    r.h.type = PP_REC_COUNTER;
    r.h.size = sizeof r;
    r.h.tid = (uint32_t)syscall(SYS_gettid);
    r.h.ts = pprof_now(atomic_load_explicit(&g.flags, memory_order_relaxed) & ~PPROF_F_TSC);
    r.counter_id = PP_COUNTER_RSS_ID;
    r.domain = 0;
    r.kind = PP_COUNTER_INT64;
    r.value = (uint64_t)(resident_pages * (unsigned long long)page_bytes);
    if (pp_trace_writer_block(g.w, PP_BLOCK_EVENTS, r.h.tid, &r, sizeof r, 1) != PP_OK)
        io_fail();
}

/* The writer's own records (GPU activity buffers it encodes, cupti.c) as one EVENTS block of
 * thread tid; io_mu held. Definitions first: the encoding may have interned kernel names. */
static void emit_gpu_block(uint32_t tid, const void *records, size_t bytes, uint32_t n)
{
    if (!g.w)
        return;
    pprof_meta_flush(emit_meta);
    if (pp_trace_writer_block(g.w, PP_BLOCK_EVENTS, tid, records, bytes, n) != PP_OK)
        io_fail();
}

/* One drain of everything: pending definitions first, then every ring up to the head it had
 * before the definitions were copied (so every id an event uses is already in the file), then
 * the GPU activity buffers handed to the writer. */
static void flush_all(void)
{
    pthread_mutex_lock(&g.io_mu);
    int n = atomic_load_explicit(&g.n_threads, memory_order_acquire);
    uint64_t heads_small[64];
    uint64_t *heads = n <= 64 ? heads_small : malloc((size_t)n * sizeof *heads);
    if (!heads) {
        pthread_mutex_unlock(&g.io_mu);
        return;
    }
    int any = 0;
    for (int i = 0; i < n; i++) {
        pprof_thread *t = atomic_load_explicit(&g.threads[i], memory_order_acquire);
        heads[i] = atomic_load_explicit(&t->head, memory_order_acquire);
        any |= heads[i] != atomic_load_explicit(&t->tail, memory_order_relaxed);
    }
    pprof_gpu_hooks hooks = g.gpu;
    any |= hooks.pending && hooks.pending();
    /* A forked child opens its own file on its first events. */
    if (!g.w && g.file_wanted && !g.io_failed && any) {
        g.file_wanted = 0;
        if (!file_open()) {
            g.io_failed = 1;
            atomic_fetch_and(&g.flags, ~PPROF_F_CAPTURE);
        }
    }
    uint64_t cal[2] = {0, 0};
    double rate = 0.0;
    if (atomic_load_explicit(&g.flags, memory_order_relaxed) & PPROF_F_TSC)
        tsc_recalibrate(&cal[0], &cal[1], &rate);
    if (g.w)
        pprof_meta_flush(emit_meta);
    if (g.w)
        rss_sample();
    for (int i = 0; i < n; i++)
        drain(atomic_load_explicit(&g.threads[i], memory_order_acquire), heads[i], cal, rate);
    if (hooks.drain)
        hooks.drain(emit_gpu_block);
    if (heads != heads_small)
        free(heads);
    pthread_mutex_unlock(&g.io_mu);
}

/* Set by the writer once it runs writer_main, under wake_mu; writer_start waits on started_cv. */
static int g_writer_started;
static pthread_cond_t g_started_cv = PTHREAD_COND_INITIALIZER;

/* How long writer_start waits for the writer to run: a bound, so a starved or stuck thread
 * start never holds up the job's init (or its fork) for longer than this. */
#define WRITER_START_WAIT_MS 2000

static void *writer_main(void *arg)
{
    (void)arg;
#ifdef __linux__
    pthread_setname_np(pthread_self(), "pprof-writer");
#endif
    pthread_mutex_lock(&g.wake_mu);
    g_writer_started = 1;
    pthread_cond_broadcast(&g_started_cv);
    while (!g.stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)g.flush_ms * 1000000u;
        ts.tv_sec += (time_t)(ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
        pthread_cond_timedwait(&g.wake_cv, &g.wake_mu, &ts);
        if (g.stop)
            break;
        pthread_mutex_unlock(&g.wake_mu);
        flush_all();
        pthread_mutex_lock(&g.wake_mu);
    }
    pthread_mutex_unlock(&g.wake_mu);
    return NULL;
}

/* Waits (bounded) until the new writer runs writer_main. Between pthread_create and its start
 * routine a thread is in the C library's and a sanitizer's start-up code, which may allocate;
 * the fork handlers hold io_mu and wake_mu, which keeps a running writer out of malloc during a
 * fork, but not one still starting. A job that forks right after init (or a child that forks at
 * once again) could then fork while the writer's start-up holds an allocator lock, and the
 * child's first free deadlocks; GCC 12's libasan, which has no fork handling, did so (about 1
 * run in 165 of capture::forked_child_writes_its_own_file). Only wake_mu is taken here, with
 * no other pprof lock held, so the fork handlers' lock order is kept. */
static void writer_wait_started(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)WRITER_START_WAIT_MS * 1000000u;
    ts.tv_sec += (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    pthread_mutex_lock(&g.wake_mu);
    while (!g_writer_started)
        if (pthread_cond_timedwait(&g_started_cv, &g.wake_mu, &ts) == ETIMEDOUT)
            break; /* go on without it: the job must not wait on us */
    pthread_mutex_unlock(&g.wake_mu);
}

/* Starts the writer with every signal blocked, so the job's signal handlers never run on it,
 * and returns once it runs (writer_wait_started). */
static int writer_start(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    g.stop = 0;
    g_writer_started = 0;
    int rc = pthread_create(&g.writer, NULL, writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    g.writer_running = rc == 0;
    if (rc != 0)
        pprof_log_once(&g_writer_warned, "pprof: cannot start the writer thread (%s); events "
                                         "are written at exit only",
                       strerror(rc));
    else
        writer_wait_started();
    return rc == 0;
}

static void writer_stop(void)
{
    if (!g.writer_running)
        return;
    pthread_mutex_lock(&g.wake_mu);
    g.stop = 1;
    pthread_cond_signal(&g.wake_cv);
    pthread_mutex_unlock(&g.wake_mu);
    pthread_join(g.writer, NULL);
    g.writer_running = 0;
}

static void counters(uint64_t *dropped, uint64_t *filtered)
{
    uint64_t d = atomic_load(&g.dropped_global) + g.discarded, f = 0;
    int n = atomic_load_explicit(&g.n_threads, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        pprof_thread *t = atomic_load_explicit(&g.threads[i], memory_order_acquire);
        d += atomic_load_explicit(&t->dropped, memory_order_relaxed);
        f += atomic_load_explicit(&t->filtered, memory_order_relaxed);
    }
    *dropped = d;
    *filtered = f;
}

/* atexit: the last records and the footer. Idempotent; a process that is not the one the state
 * belongs to (a child made without our fork handler) leaves the parent's file alone. */
static void pprof_at_exit(void)
{
    if (atomic_exchange(&g.exit_done, 1))
        return;
    if (getpid() != g.pid)
        return;
    writer_stop();
    flush_all();
    pthread_mutex_lock(&g.io_mu);
    if (g.gpu.at_exit)
        g.gpu.at_exit();
    /* Events arriving from now on are counted as dropped, never half-written. */
    atomic_fetch_and(&g.flags, ~PPROF_F_CAPTURE);
    uint64_t dropped, filtered;
    counters(&dropped, &filtered);
    if (g.w) {
        pp_rec_footer f;
        memset(&f, 0, sizeof f);
        f.h.type = PP_REC_FOOTER;
        f.h.size = sizeof f;
        f.h.ts = mono_ns();
        f.real_ns = real_ns();
        f.events = g.events_written;
        f.dropped = dropped;
        f.filtered = filtered;
        f.blocks = pp_trace_writer_blocks(g.w);
        f.threads = atomic_load(&g.threads_recorded);
        if (pp_trace_writer_footer(g.w, &f) != PP_OK)
            io_fail();
        pp_trace_writer_close(g.w);
        g.w = NULL;
        if (atomic_load(&g.flags) & PPROF_F_STEPS)
            pprof_log("pprof: %s: %llu events, %llu dropped, %llu filtered", g.path,
                      (unsigned long long)g.events_written, (unsigned long long)dropped,
                      (unsigned long long)filtered);
        else
            pprof_log("pprof: %s: %llu events, %llu dropped", g.path,
                      (unsigned long long)g.events_written, (unsigned long long)dropped);
        uint64_t trunc = atomic_load(&g.ext_truncated);
        if (trunc)
            pprof_log("pprof: %s: %llu extended payloads truncated to %d bytes", g.path,
                      (unsigned long long)trunc, PPROF_EXT_MAX_BYTES);
    }
    pthread_mutex_unlock(&g.io_mu);
}

/* ---- threads ---- */

static void thread_exit(void *p)
{
    pprof_thread *t = p;
    if (t && t != &g_nothread) {
        if (t->slot >= 0)
            atomic_store_explicit(&t->state, PPROF_THREAD_DEAD, memory_order_release);
        else
            free(t);
    }
    /* NVTX calls from later TLS destructors of this thread record nothing. */
    pprof_tls_self = &g_nothread;
}

static void thread_reset(pprof_thread *t, uint32_t tid)
{
    memset(t->depth, 0, sizeof t->depth);
    t->cur_step = -1;
    t->has_steps = 0;
    t->range_counter = 0;
    atomic_store_explicit(&t->tid, tid, memory_order_relaxed);
}

pprof_thread *pprof_thread_register(void)
{
    uint32_t tid = (uint32_t)syscall(SYS_gettid);
    pprof_thread *t = NULL;
    pthread_mutex_lock(&g.reg_mu);
    int n = atomic_load_explicit(&g.n_threads, memory_order_relaxed);
    /* Reuse the ring of an exited thread once the writer has emptied it. */
    for (int i = 0; i < n && !t; i++) {
        pprof_thread *c = atomic_load_explicit(&g.threads[i], memory_order_relaxed);
        if (atomic_load_explicit(&c->state, memory_order_acquire) == PPROF_THREAD_DEAD &&
            atomic_load_explicit(&c->tail, memory_order_acquire) == c->head_local) {
            t = c;
            thread_reset(t, tid);
            atomic_store_explicit(&t->state, PPROF_THREAD_LIVE, memory_order_relaxed);
        }
    }
    if (!t && g.threads && n < g.max_threads) {
        t = aligned_alloc(64, (sizeof *t + 63) / 64 * 64);
        uint8_t *ring = t ? malloc(g.ring_bytes) : NULL;
        /* Touch every page now: a first-touch page fault on the hot path costs as much as the
         * event itself (INSTRUMENTATION.md 1.8). */
        if (ring)
            memset(ring, 0, g.ring_bytes);
        if (!ring) {
            free(t);
            t = NULL;
            pprof_log_once(&g_alloc_warned, "pprof: out of memory for a thread buffer; that "
                                            "thread's events are dropped");
        } else {
            memset(t, 0, sizeof *t);
            t->ring = ring;
            t->mask = g.ring_bytes - 1;
            t->slot = n;
            thread_reset(t, tid);
            atomic_store_explicit(&g.threads[n], t, memory_order_release);
            atomic_store_explicit(&g.n_threads, n + 1, memory_order_release);
        }
    }
    if (t)
        atomic_fetch_add(&g.threads_recorded, 1);
    if (!t) { /* over PPROF_MAX_THREADS (or out of memory): depths only, events dropped */
        t = calloc(1, sizeof *t);
        if (t) {
            t->slot = -1;
            thread_reset(t, tid);
        } else {
            t = &g_nothread;
        }
    }
    t->index = g.next_index++;
    pthread_mutex_unlock(&g.reg_mu);
    if (g.key_ok && t != &g_nothread)
        pthread_setspecific(g.key, t);
    pprof_tls_self = t;
    return t;
}

/* ---- fork ---- */

static void fork_prepare(void)
{
    pthread_mutex_lock(&g.io_mu);
    pthread_mutex_lock(&g.meta_mu);
    pthread_mutex_lock(&g.reg_mu);
    pthread_mutex_lock(&g.wake_mu);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&g.wake_mu);
    pthread_mutex_unlock(&g.reg_mu);
    pthread_mutex_unlock(&g.meta_mu);
    pthread_mutex_unlock(&g.io_mu);
}

/* The child keeps the definitions (re-emitted whole into its own file), drops the parent's
 * unwritten events and counters, and gets a writer of its own. Its file is created on its first
 * events, so fork + exec leaves no empty file. */
static void fork_child(void)
{
    pthread_mutex_init(&g.io_mu, NULL);
    pthread_mutex_init(&g.meta_mu, NULL);
    pthread_mutex_init(&g.reg_mu, NULL);
    pthread_mutex_init(&g.wake_mu, NULL);
    pthread_cond_init(&g.wake_cv, NULL);
    pthread_cond_init(&g_started_cv, NULL);
    g.pid = getpid();
    g.clock_mono0 = mono_ns();
    g.clock_real0 = real_ns();
    g.writer_running = 0;
    pp_trace_writer_close(g.w); /* the parent's file: closed here, untouched */
    g.w = NULL;
    g.file_wanted = 1;
    g.io_failed = 0;
    g.meta_written = 0;
    g.events_written = g.discarded = 0;
    atomic_store(&g.ext_truncated, 0);
    atomic_store(&g.dropped_global, 0);
    atomic_store(&g.threads_recorded, 0);
    atomic_store(&g.exit_done, 0);
    pprof_thread *self = pprof_tls_self;
    int n = atomic_load(&g.n_threads);
    for (int i = 0; i < n; i++) {
        pprof_thread *t = atomic_load(&g.threads[i]);
        atomic_store(&t->head, 0);
        atomic_store(&t->tail, 0);
        t->head_local = t->tail_cache = 0;
        atomic_store(&t->dropped, 0);
        atomic_store(&t->filtered, 0);
        if (t != self)
            atomic_store(&t->state, PPROF_THREAD_DEAD); /* that thread does not exist here */
    }
    if (self && self != &g_nothread) {
        atomic_store(&self->tid, (uint32_t)syscall(SYS_gettid));
        if (self->slot >= 0)
            atomic_store(&g.threads_recorded, 1);
    }
    atomic_fetch_or(&g.flags, PPROF_F_CAPTURE);
    writer_start();
}

/* ---- init ---- */

static int init_once(void)
{
    read_config();
    const char *dir = getenv("PPROF_DIR");
    if (!dir || !*dir) {
        pprof_log("pprof: PPROF_DIR is not set; NVTX capture off (run the job under pprof-run)");
        return 0;
    }
    if (strlen(dir) >= sizeof g.dir) {
        pprof_log("pprof: PPROF_DIR is too long; NVTX capture off");
        return 0;
    }
    strcpy(g.dir, dir);
    g.pid = getpid();
    g.clock_mono0 = mono_ns();
    g.clock_real0 = real_ns();
    if (g.want_tsc && tsc_invariant()) {
        tsc_calibrate_start();
        if (g.ns_per_tick > 0.0)
            atomic_fetch_or(&g.flags, PPROF_F_TSC);
    }
    g.threads = calloc((size_t)g.max_threads, sizeof *g.threads);
    g.stage = malloc(PPROF_BLOCK_CAP);
    if (!g.threads || !g.stage || !pprof_registry_init()) {
        pprof_log("pprof: out of memory at start; NVTX capture off");
        return 0;
    }
    g.key_ok = pthread_key_create(&g.key, thread_exit) == 0;
    pprof_counter_define(0, PP_COUNTER_RSS_ID, PP_COUNTER_RSS_NAME, "bytes", 0);
    /* The checksum's tables and CPU test are set up here, on the thread that initializes, before
     * our writer exists: set up lazily on the writer, a fork landing inside that pthread_once
     * would leave it "in progress" in the child, whose writer would then wait for ever. */
    (void)pp_crc32c(0, NULL, 0);
    pthread_mutex_lock(&g.io_mu);
    int ok = file_open();
    pthread_mutex_unlock(&g.io_mu);
    if (!ok)
        return 0;
    atomic_fetch_or(&g.flags, PPROF_F_CAPTURE);
    writer_start();
    atexit(pprof_at_exit);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    return 1;
}

int pprof_global_init(void)
{
    pthread_mutex_lock(&g_init_mu);
    if (g_init_state == 0)
        g_init_state = init_once() ? 1 : -1;
    int st = g_init_state;
    pthread_mutex_unlock(&g_init_mu);
    return st == 1;
}
