/* nccl_plugin.c: pipeprof's NCCL profiler plugin (pprof-run --nccl; docs/profiler.md "NCCL").
 * pprof-run sets NCCL_PROFILER_PLUGIN to libpprof.so itself; NCCL 2.28 dlopens it and takes the
 * data symbol ncclProfiler_v5 (the newest ABI it probes). Each point-to-point operation and
 * collective becomes one PP_REC_NCCL record: function, peer, bytes (count x datatype size),
 * the host-side event span, and the GPU-side span from its kernel channels' GPU timers.
 *
 * ABI: pp_nccl_abi.h. What NCCL 2.28.9 does with it (read in its sources):
 * - src/enqueue.cc hostStreamPlanTask: ncclProfilerStartTaskEvents starts a P2p/Coll event per
 *   task, the work is handed to the proxy thread (uploadProxyOps, ncclProxyStart), and
 *   ncclProfilerStopTaskEvents stops the events right away: an operation's stop means
 *   "enqueued", not "done" (plugins/profiler/README.md says the same);
 * - src/transport/profiler.cc profilerProxyProgress, on the proxy thread, later starts one
 *   KernelCh event per channel the task runs on (parentObj: the task's P2p/Coll handle, from
 *   src/plugin/profiler.cc ncclProfilerStartKernelChEvent) when the kernel has started it, then
 *   records ncclProfilerKernelChStop with the stop timer and stops it. The channels are
 *   descriptor.nChannels of them (src/enqueue.cc: one profiler proxy op per channel of the
 *   task);
 * - src/init.cc commFree destroys the proxy (ncclProxyDestroy) before it calls finalize, so no
 *   event of the communicator comes after finalize.
 * So an operation stays open past its stop until its nChannels channels have stopped; then it
 * is written, by whichever thread ended it last, into that thread's ring. An operation whose
 * channels never all come (a channel-less path, an aborted communicator) is written at finalize
 * without GPU time. A channel's parentObj is trusted only while it names an open operation of
 * the same communicator (a list searched under the communicator's lock): a channel naming an
 * operation already written is ignored rather than followed into freed memory. The lock is
 * taken once per NCCL callback, a path NCCL itself takes with its own allocations and locks,
 * not the NVTX hot path. At most PP_NCCL_MAX_OPEN unfinished operations are kept per
 * communicator; beyond that the oldest stopped one is written as it is. */
#include "pprof_internal.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "pp_nccl_abi.h"

enum {
    KIND_OP = 1,
    KIND_CH = 2,
    MAX_CHANNELS = 64,          /* NCCL's MAXCHANNELS: channel ids are below it */
    PP_NCCL_MAX_OPEN = 4096,    /* unfinished operations kept per communicator */
};

/* ---- events ---- */
typedef struct nccl_op nccl_op;

/* A kernel channel's handle lives inside its operation: freed with it. */
typedef struct nccl_ch {
    int kind; /* KIND_CH (first, as in nccl_op: a handle tells what it is) */
    int open;
    nccl_op *op;
    uint64_t start; /* globaltimer ns */
} nccl_ch;

typedef struct nccl_comm {
    uint64_t id;
    int rank, nranks;
    pthread_mutex_t mu;       /* guards the list and every operation's state below */
    nccl_op *head, *tail;     /* operations not yet freed, newest first */
    int n_unwritten;          /* of them: not yet written */
} nccl_comm;

struct nccl_op {
    int kind; /* KIND_OP */
    nccl_comm *comm;
    nccl_op *prev, *next;
    int host_stopped;   /* NCCL stopped the event (the operation is enqueued) */
    int written;        /* its record is out (it waits only for open channels to be freed) */
    int expected;       /* channels announced (descriptor nChannels) */
    int ended;          /* channels stopped */
    int open_ch;        /* channels started and not stopped */
    uint8_t func;
    int32_t peer;
    uint16_t channels;
    uint64_t bytes;
    uint64_t start, end;
    uint64_t gpu_start, gpu_end; /* globaltimer ns; gpu_start UINT64_MAX: none */
    uint32_t name;
    nccl_ch ch[MAX_CHANNELS];
};

/* GPU globaltimer -> CLOCK_MONOTONIC: the globaltimer counts ns close to the Unix epoch
 * (INSTRUMENTATION.md 4.2), so the offset is CLOCK_REALTIME - CLOCK_MONOTONIC, read at init. */
static _Atomic int64_t g_real_minus_mono;

static uint64_t now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t clock_out(uint64_t mono)
{
    unsigned flags = atomic_load_explicit(&g_pprof.flags, memory_order_relaxed);
    return flags & PPROF_F_CLOCK ? pprof_clock_adjust(mono) : mono;
}

static uint64_t dtype_size(const char *t)
{
    static const struct {
        const char *name;
        uint64_t size;
    } k[] = {{"ncclInt8", 1},      {"ncclUint8", 1},       {"ncclChar", 1},
             {"ncclInt32", 4},     {"ncclUint32", 4},      {"ncclFloat32", 4},
             {"ncclInt64", 8},     {"ncclUint64", 8},      {"ncclFloat64", 8},
             {"ncclFloat16", 2},   {"ncclBfloat16", 2},    {"ncclFloat8e4m3", 1},
             {"ncclFloat8e5m2", 1}};
    for (size_t i = 0; t && i < sizeof k / sizeof k[0]; i++)
        if (strcmp(t, k[i].name) == 0)
            return k[i].size;
    return 1; /* "Unknown": NCCL 2.28.9 names ncclUint8 so; bytes then equal the count */
}

/* The operation's record, built under the communicator's lock, written after it. */
static void record_of(const nccl_op *op, pp_rec_nccl *r)
{
    memset(r, 0, sizeof *r);
    r->h.type = PP_REC_NCCL;
    r->h.size = sizeof *r;
    r->func = op->func;
    r->channels = op->channels;
    r->peer = op->peer;
    r->rank = op->comm->rank;
    r->nranks = op->comm->nranks;
    r->comm = op->comm->id;
    r->bytes = op->bytes;
    r->start = clock_out(op->start);
    r->end = clock_out(op->host_stopped ? op->end : now_mono());
    if (op->gpu_start != UINT64_MAX && op->gpu_end > op->gpu_start) {
        int64_t off = atomic_load(&g_real_minus_mono);
        r->timed = 1;
        r->gpu_start = clock_out((uint64_t)((int64_t)op->gpu_start - off));
        r->gpu_end = clock_out((uint64_t)((int64_t)op->gpu_end - off));
    }
    r->name = op->name;
}

static void emit(pp_rec_nccl *r)
{
    pprof_thread *t = pprof_self();
    r->h.tid = atomic_load_explicit(&t->tid, memory_order_relaxed);
    uint8_t *p = pprof_ring_reserve(t, sizeof *r);
    if (p) {
        memcpy(p, r, sizeof *r);
        pprof_ring_commit(t, sizeof *r);
    } else {
        pprof_drop(t);
    }
}

/* Under the lock: unlinks op. */
static void unlink_op(nccl_comm *c, nccl_op *op)
{
    if (op->prev)
        op->prev->next = op->next;
    else
        c->head = op->next;
    if (op->next)
        op->next->prev = op->prev;
    else
        c->tail = op->prev;
    op->prev = op->next = NULL;
}

/* Under the lock: marks op written (its record into *r), and unlinks it when nothing can name
 * it any more (NCCL stopped it and no channel of it is open); returns 1 when the caller must
 * free it after the lock. */
static int write_op(nccl_comm *c, nccl_op *op, pp_rec_nccl *r)
{
    record_of(op, r);
    op->written = 1;
    c->n_unwritten--;
    if (op->host_stopped && op->open_ch == 0) {
        unlink_op(c, op);
        return 1;
    }
    return 0;
}

/* Under the lock: whether op has all it will get (NCCL stopped it, its channels ended). */
static int op_complete(const nccl_op *op)
{
    return !op->written && op->host_stopped && op->ended >= op->expected;
}

/* Under the lock: a written operation no one can name any more is unlinked; 1: free it. */
static int op_release(nccl_comm *c, nccl_op *op)
{
    if (op->written && op->host_stopped && op->open_ch == 0) {
        unlink_op(c, op);
        return 1;
    }
    return 0;
}

static pp_nccl_result p_init(void **ctx, uint64_t commId, int *mask, const char *commName,
                             int nNodes, int nranks, int rank, pp_nccl_logger logfn)
{
    (void)commName;
    (void)nNodes;
    (void)logfn;
    *ctx = NULL;
    if (!pprof_global_init())
        return 0; /* capture off: stay loaded, record nothing */
    nccl_comm *c = calloc(1, sizeof *c);
    if (!c)
        return 0;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return 0;
    }
    c->id = commId;
    c->rank = rank;
    c->nranks = nranks;
    struct timespec r, m;
    clock_gettime(CLOCK_REALTIME, &r);
    clock_gettime(CLOCK_MONOTONIC, &m);
    atomic_store(&g_real_minus_mono, ((int64_t)r.tv_sec - (int64_t)m.tv_sec) * 1000000000 +
                                         ((int64_t)r.tv_nsec - (int64_t)m.tv_nsec));
    /* the process-wide mask NCCL reads per operation: operations and their GPU channels */
    *mask |= PP_NCCL_EV_P2P | PP_NCCL_EV_COLL | PP_NCCL_EV_KERNEL_CH;
    *ctx = c;
    return 0;
}

static nccl_op *op_create(nccl_comm *c, const pp_nccl_descr_v5 *d)
{
    nccl_op *op = calloc(1, sizeof *op);
    if (!op)
        return NULL;
    op->kind = KIND_OP;
    op->comm = c;
    op->start = now_mono();
    op->gpu_start = UINT64_MAX;
    const char *func;
    int n_ch;
    if (d->type == PP_NCCL_EV_P2P) {
        func = d->p2p.func;
        op->func = func && strcmp(func, "Recv") == 0 ? PP_NCCL_RECV : PP_NCCL_SEND;
        op->peer = d->p2p.peer;
        n_ch = d->p2p.nChannels;
        op->bytes = (uint64_t)d->p2p.count * dtype_size(d->p2p.datatype);
    } else {
        func = d->coll.func;
        op->func = PP_NCCL_COLL;
        op->peer = -1;
        n_ch = d->coll.nChannels;
        op->bytes = (uint64_t)d->coll.count * dtype_size(d->coll.datatype);
    }
    op->channels = (uint16_t)n_ch;
    op->expected = n_ch < MAX_CHANNELS ? n_ch : MAX_CHANNELS;
    struct nvtxStringRegistration_st *e = func ? pprof_intern_cstr(func) : NULL;
    op->name = e ? e->id : 0;
    for (int i = 0; i < MAX_CHANNELS; i++) {
        op->ch[i].kind = KIND_CH;
        op->ch[i].op = op;
    }
    return op;
}

static pp_nccl_result p_start(void *ctx, void **handle, pp_nccl_descr_v5 *d)
{
    *handle = NULL; /* NCCL skips later calls for a NULL handle */
    nccl_comm *c = ctx;
    if (!c || !d || !(atomic_load_explicit(&g_pprof.flags, memory_order_relaxed) & PPROF_F_CAPTURE))
        return 0;
    if (d->type == PP_NCCL_EV_P2P || d->type == PP_NCCL_EV_COLL) {
        nccl_op *op = op_create(c, d);
        if (!op)
            return 0;
        nccl_op *old = NULL;
        pp_rec_nccl r;
        int free_old = 0;
        pthread_mutex_lock(&c->mu);
        op->next = c->head;
        if (c->head)
            c->head->prev = op;
        c->head = op;
        if (!c->tail)
            c->tail = op;
        if (++c->n_unwritten > PP_NCCL_MAX_OPEN) {
            /* the oldest operation NCCL has stopped and that is still waiting for channels */
            for (old = c->tail; old && (old->written || !old->host_stopped); old = old->prev) {
            }
            if (old)
                free_old = write_op(c, old, &r);
        }
        pthread_mutex_unlock(&c->mu);
        if (old) {
            emit(&r);
            if (free_old)
                free(old);
        }
        *handle = op;
    } else if (d->type == PP_NCCL_EV_KERNEL_CH && d->parentObj) {
        unsigned id = d->kernelCh.channelId;
        pthread_mutex_lock(&c->mu);
        nccl_op *op = c->head;
        while (op && (void *)op != d->parentObj)
            op = op->next;
        /* only an unwritten operation of this communicator, one channel per id */
        if (op && !op->written && id < MAX_CHANNELS && !op->ch[id].open) {
            op->ch[id].open = 1;
            op->ch[id].start = d->kernelCh.pTimer;
            op->open_ch++;
            *handle = &op->ch[id];
        }
        pthread_mutex_unlock(&c->mu);
    }
    return 0;
}

static pp_nccl_result p_state(void *handle, int state, pp_nccl_state_args_v5 *args)
{
    nccl_ch *ch = handle;
    if (!ch || ch->kind != KIND_CH || state != PP_NCCL_STATE_KERNEL_CH_STOP || !args)
        return 0;
    nccl_op *op = ch->op; /* alive: the open channel holds it */
    uint64_t s = ch->start, e = args->kernelCh.pTimer;
    if (e <= s)
        return 0;
    pthread_mutex_lock(&op->comm->mu);
    /* the operation's GPU span: earliest channel start, latest channel stop */
    if (s < op->gpu_start)
        op->gpu_start = s;
    if (e > op->gpu_end)
        op->gpu_end = e;
    pthread_mutex_unlock(&op->comm->mu);
    return 0;
}

static pp_nccl_result p_stop(void *handle)
{
    if (!handle)
        return 0;
    int kind = *(int *)handle;
    nccl_op *op;
    if (kind == KIND_CH)
        op = ((nccl_ch *)handle)->op;
    else if (kind == KIND_OP)
        op = handle;
    else
        return 0;
    nccl_comm *c = op->comm;
    pp_rec_nccl r;
    int out = 0, release = 0;
    pthread_mutex_lock(&c->mu);
    if (kind == KIND_CH) {
        nccl_ch *ch = handle;
        ch->open = 0;
        op->open_ch--;
        op->ended++;
    } else {
        op->host_stopped = 1;
        op->end = now_mono();
    }
    if (op_complete(op)) {
        out = 1;
        release = write_op(c, op, &r);
    } else {
        release = op_release(c, op);
    }
    pthread_mutex_unlock(&c->mu);
    if (out)
        emit(&r);
    if (release)
        free(op);
    return 0;
}

/* NCCL has destroyed the communicator's proxy (src/init.cc commFree): nothing of it comes any
 * more. Operations still waiting for channels are written as they are. */
static pp_nccl_result p_finalize(void *ctx)
{
    nccl_comm *c = ctx;
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    nccl_op *op = c->tail;
    pthread_mutex_unlock(&c->mu);
    while (op) {
        nccl_op *prev = op->prev;
        if (!op->written) {
            pp_rec_nccl r;
            record_of(op, &r);
            emit(&r);
        }
        free(op);
        op = prev;
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
    return 0;
}

PPROF_EXPORT const pp_nccl_profiler_v5 ncclProfiler_v5 = {
    .name = "pipeprof",
    .init = p_init,
    .startEvent = p_start,
    .stopEvent = p_stop,
    .recordEventState = p_state,
    .finalize = p_finalize,
};
