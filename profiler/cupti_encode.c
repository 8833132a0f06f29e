/* cupti_encode.c: CUPTI activity record -> trace record (cupti_encode.h). */
#include "cupti_encode.h"

#include <cupti_activity.h>
#include <string.h>

static size_t put_gpu(const pprof_cupti_env *env, void *out, size_t cap, uint8_t kind,
                      uint8_t copy_kind, uint32_t device, uint32_t stream, uint32_t corr,
                      uint64_t start, uint64_t end, uint64_t bytes, const char *name)
{
    if (cap < sizeof(pp_rec_gpu))
        return (size_t)-1;
    pp_rec_gpu r;
    memset(&r, 0, sizeof r);
    r.h.type = PP_REC_GPU;
    r.h.size = sizeof r;
    r.h.tid = env->tid;
    r.h.ts = 0;
    r.kind = kind;
    r.copy_kind = copy_kind;
    r.device = device;
    r.stream = stream;
    r.correlation = corr;
    r.start = env->clock(env->u, start);
    r.end = env->clock(env->u, end);
    r.bytes = bytes;
    r.name = name && env->name_id ? env->name_id(env->u, name) : 0;
    memcpy(out, &r, sizeof r);
    return sizeof r;
}

size_t pprof_cupti_encode(const void *record, const pprof_cupti_env *env, void *out, size_t cap)
{
    const CUpti_Activity *a = record;
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = record;
        return put_gpu(env, out, cap, PP_GPU_KERNEL, 0, k->deviceId, k->streamId,
                       k->correlationId, k->start, k->end, 0, k->name);
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = record;
        return put_gpu(env, out, cap, PP_GPU_MEMCPY, m->copyKind, m->deviceId, m->streamId,
                       m->correlationId, m->start, m->end, m->bytes, NULL);
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = record;
        return put_gpu(env, out, cap, PP_GPU_MEMSET, 0, m->deviceId, m->streamId,
                       m->correlationId, m->start, m->end, m->bytes, NULL);
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const CUpti_ActivitySynchronization2 *s = record;
        return put_gpu(env, out, cap, PP_GPU_SYNC, 0, 0, s->streamId, s->correlationId,
                       s->start, s->end, 0, NULL);
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const CUpti_ActivityAPI *x = record;
        if (cap < sizeof(pp_rec_api))
            return (size_t)-1;
        pp_rec_api r;
        memset(&r, 0, sizeof r);
        r.h.type = PP_REC_API;
        r.h.size = sizeof r;
        r.h.tid = env->tid;
        r.correlation = x->correlationId;
        r.thread = x->threadId;
        r.cbid = x->cbid;
        r.driver = a->kind == CUPTI_ACTIVITY_KIND_DRIVER;
        r.start = env->clock(env->u, x->start);
        r.end = env->clock(env->u, x->end);
        memcpy(out, &r, sizeof r);
        return sizeof r;
    }
    default:
        return 0;
    }
}
