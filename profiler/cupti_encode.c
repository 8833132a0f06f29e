/* cupti_encode.c: CUPTI activity record -> trace record (cupti_encode.h). */
#include "cupti_encode.h"

#include <cupti_activity.h>
#include <string.h>

/* The records below have no padding (pp_trace.h; sizes asserted in common/trace_format.c), so
 * an initializer zeroes every field it does not name. Each checks the room first: nothing,
 * not even a kernel name's string id, is made for a record that is not written. */
static size_t put_gpu(const pprof_cupti_env *env, void *out, size_t cap, uint8_t kind,
                      uint8_t copy_kind, uint32_t device, uint32_t stream, uint32_t corr,
                      uint64_t start, uint64_t end, uint64_t bytes, const char *name)
{
    if (cap < sizeof(pp_rec_gpu))
        return (size_t)-1;
    pp_rec_gpu r = {
        .h = {.type = PP_REC_GPU, .size = sizeof(pp_rec_gpu), .tid = env->tid},
        .kind = kind,
        .copy_kind = copy_kind,
        .device = device,
        .stream = stream,
        .correlation = corr,
        .start = env->clock(env->u, start),
        .end = env->clock(env->u, end),
        .bytes = bytes,
        .name = name && env->name_id ? env->name_id(env->u, name) : 0,
    };
    memcpy(out, &r, sizeof r);
    return sizeof r;
}

static size_t put_api(const pprof_cupti_env *env, void *out, size_t cap, const CUpti_ActivityAPI *x,
                      int driver)
{
    if (cap < sizeof(pp_rec_api))
        return (size_t)-1;
    pp_rec_api r = {
        .h = {.type = PP_REC_API, .size = sizeof(pp_rec_api), .tid = env->tid},
        .correlation = x->correlationId,
        .thread = x->threadId,
        .cbid = x->cbid,
        .driver = (uint32_t)driver,
        .start = env->clock(env->u, x->start),
        .end = env->clock(env->u, x->end),
    };
    memcpy(out, &r, sizeof r);
    return sizeof r;
}

/* A memory allocation or release: the prefix every CUpti_ActivityMemory2..4 shares (its fields
 * up to isAsync). Other operation types (none today) are not captured. */
static size_t put_gpu_mem(const pprof_cupti_env *env, void *out, size_t cap,
                          const CUpti_ActivityMemory4 *m)
{
    if (m->memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION &&
        m->memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
        return 0;
    if (cap < sizeof(pp_rec_gpu_mem))
        return (size_t)-1;
    pp_rec_gpu_mem r = {
        .h = {.type = PP_REC_GPU_MEM, .size = sizeof(pp_rec_gpu_mem), .tid = env->tid},
        .op = m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                  ? PP_GPU_MEM_ALLOC
                  : PP_GPU_MEM_RELEASE,
        .memory_kind = (uint8_t)m->memoryKind,
        .device = m->deviceId,
        .stream = m->streamId,
        .correlation = m->correlationId,
        .address = m->address,
        .bytes = m->bytes,
        .ts = env->clock(env->u, m->timestamp),
    };
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
    case CUPTI_ACTIVITY_KIND_DRIVER:
        return put_api(env, out, cap, record, a->kind == CUPTI_ACTIVITY_KIND_DRIVER);
    case CUPTI_ACTIVITY_KIND_MEMORY2: return put_gpu_mem(env, out, cap, record);
    default:
        return 0;
    }
}
