/* nccl_plugin.c: pipeprof's NCCL profiler plugin (pprof-run --nccl; docs/profiler.md "NCCL").
 * pprof-run sets NCCL_PROFILER_PLUGIN to libpprof.so itself; NCCL 2.28 dlopens it and takes the
 * data symbol ncclProfiler_v5 (the newest ABI it probes). Each point-to-point operation and
 * collective becomes one PP_REC_NCCL record: function, peer, bytes (count x datatype size),
 * the host-side event span, and the GPU-side span from its kernel channels' GPU timers.
 *
 * ABI: pp_nccl_abi.h. Callbacks come from application threads and from
 * NCCL's proxy thread, concurrently: events are reference-counted (a kernel channel may stop
 * after its operation) and each record is written once, by whichever thread ends the last of
 * them, into that thread's ring. */
#include "pprof_internal.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "pp_nccl_abi.h"

/* ---- events ---- */
typedef struct nccl_comm {
    uint64_t id;
    int rank, nranks;
} nccl_comm;

typedef struct nccl_op {
    int is_channel;          /* 0: an operation (P2p/Coll), 1: one of its kernel channels */
    struct nccl_op *parent;  /* channels: their operation */
    _Atomic int refs;        /* operations: itself + open channels */
    /* operation (the communicator's numbers copied: it may be finalized before a late channel
     * stop arrives) */
    uint64_t comm_id;
    int32_t rank, nranks;
    uint8_t func;
    int32_t peer;
    uint16_t channels;
    uint64_t bytes;
    uint64_t start, end;
    _Atomic uint64_t gpu_start, gpu_end; /* globaltimer ns; gpu_start UINT64_MAX: none */
    uint32_t name;
    /* channel */
    uint64_t ch_start;
} nccl_op;

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

static void emit(nccl_op *op)
{
    pprof_thread *t = pprof_self();
    pp_rec_nccl r;
    memset(&r, 0, sizeof r);
    r.h.type = PP_REC_NCCL;
    r.h.size = sizeof r;
    r.h.tid = atomic_load_explicit(&t->tid, memory_order_relaxed);
    r.func = op->func;
    r.channels = op->channels;
    r.peer = op->peer;
    r.rank = op->rank;
    r.nranks = op->nranks;
    r.comm = op->comm_id;
    r.bytes = op->bytes;
    r.start = clock_out(op->start);
    r.end = clock_out(op->end);
    uint64_t g0 = atomic_load(&op->gpu_start), g1 = atomic_load(&op->gpu_end);
    if (g0 != UINT64_MAX && g1 > g0) {
        int64_t off = atomic_load(&g_real_minus_mono);
        r.timed = 1;
        r.gpu_start = clock_out((uint64_t)((int64_t)g0 - off));
        r.gpu_end = clock_out((uint64_t)((int64_t)g1 - off));
    }
    r.name = op->name;
    uint8_t *p = pprof_ring_reserve(t, sizeof r);
    if (p) {
        memcpy(p, &r, sizeof r);
        pprof_ring_commit(t, sizeof r);
    } else {
        pprof_drop(t);
    }
}

static void release(nccl_op *op)
{
    if (atomic_fetch_sub(&op->refs, 1) == 1) {
        emit(op);
        free(op);
    }
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

static pp_nccl_result p_start(void *ctx, void **handle, pp_nccl_descr_v5 *d)
{
    *handle = NULL; /* NCCL skips later calls for a NULL handle */
    nccl_comm *c = ctx;
    if (!c || !d || !(atomic_load_explicit(&g_pprof.flags, memory_order_relaxed) & PPROF_F_CAPTURE))
        return 0;
    if (d->type == PP_NCCL_EV_P2P || d->type == PP_NCCL_EV_COLL) {
        nccl_op *op = calloc(1, sizeof *op);
        if (!op)
            return 0;
        op->comm_id = c->id;
        op->rank = c->rank;
        op->nranks = c->nranks;
        op->start = now_mono();
        atomic_init(&op->refs, 1);
        atomic_init(&op->gpu_start, UINT64_MAX);
        atomic_init(&op->gpu_end, 0);
        const char *func;
        if (d->type == PP_NCCL_EV_P2P) {
            func = d->p2p.func;
            op->func = func && strcmp(func, "Recv") == 0 ? PP_NCCL_RECV : PP_NCCL_SEND;
            op->peer = d->p2p.peer;
            op->channels = d->p2p.nChannels;
            op->bytes = (uint64_t)d->p2p.count * dtype_size(d->p2p.datatype);
        } else {
            func = d->coll.func;
            op->func = PP_NCCL_COLL;
            op->peer = -1;
            op->channels = d->coll.nChannels;
            op->bytes = (uint64_t)d->coll.count * dtype_size(d->coll.datatype);
        }
        struct nvtxStringRegistration_st *e = func ? pprof_intern_cstr(func) : NULL;
        op->name = e ? e->id : 0;
        *handle = op;
    } else if (d->type == PP_NCCL_EV_KERNEL_CH && d->parentObj) {
        nccl_op *parent = d->parentObj;
        if (parent->is_channel)
            return 0;
        nccl_op *ch = calloc(1, sizeof *ch);
        if (!ch)
            return 0;
        ch->is_channel = 1;
        ch->parent = parent;
        ch->ch_start = d->kernelCh.pTimer;
        atomic_fetch_add(&parent->refs, 1);
        *handle = ch;
    }
    return 0;
}

static pp_nccl_result p_state(void *handle, int state, pp_nccl_state_args_v5 *args)
{
    nccl_op *ch = handle;
    if (!ch || !ch->is_channel || state != PP_NCCL_STATE_KERNEL_CH_STOP || !args)
        return 0;
    nccl_op *op = ch->parent;
    uint64_t s = ch->ch_start, e = args->kernelCh.pTimer;
    if (e <= s)
        return 0;
    /* the operation's GPU span: earliest channel start, latest channel stop */
    uint64_t cur = atomic_load(&op->gpu_start);
    while (s < cur && !atomic_compare_exchange_weak(&op->gpu_start, &cur, s)) {
    }
    cur = atomic_load(&op->gpu_end);
    while (e > cur && !atomic_compare_exchange_weak(&op->gpu_end, &cur, e)) {
    }
    return 0;
}

static pp_nccl_result p_stop(void *handle)
{
    nccl_op *x = handle;
    if (!x)
        return 0;
    if (x->is_channel) {
        nccl_op *op = x->parent;
        free(x);
        release(op);
    } else {
        x->end = now_mono();
        release(x);
    }
    return 0;
}

static pp_nccl_result p_finalize(void *ctx)
{
    free(ctx); /* operations keep copies of what they need from it */
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
