/* nvtx_ext.c: libpprof's handlers for two NVTX extension modules (docs/profiler.md), installed by
 * InitializeInjectionNvtxExtension (nvtx_inject.c):
 *  - counters (nvToolsExtCounters.h, module 4): a registration becomes a COUNTER_DEF in the meta
 *    log (rare: takes meta_mu); each Int64 / Float64 sample one COUNTER record in the caller's
 *    ring, as cheap as a range (no lock, no allocation, no system call);
 *  - memory (nvToolsExtMem.h, module 1): heap register / unregister / reset and region register
 *    / resize / unregister, one MEM record per heap call and per region of a batch.
 * Neither is subject to the step window (PPROF_STEPS): static sizes are sampled once, at
 * registration, and would be lost outside it. */
#include "pprof_internal.h"

#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtMem.h>
#include <nvtx3/nvToolsExtSemanticsCounters.h>

#include <stddef.h>
#include <string.h>

#define g g_pprof

static _Atomic uint64_t g_next_counter; /* dynamic counter ids handed out */
static _Atomic uint64_t g_next_heap;    /* heap ids handed out */

/* The unit of a counter's semantics list (bounded walk: the list is the caller's memory). */
static const char *semantics_unit(const nvtxSemanticsHeader_t *s)
{
    for (int hop = 0; s && hop < 16; hop++, s = s->next)
        if (s->semanticId == NVTX_SEMANTIC_ID_COUNTERS_V1 &&
            s->structSize >= offsetof(nvtxSemanticsCounter_t, unit) + sizeof(const char *))
            return ((const nvtxSemanticsCounter_t *)(const void *)s)->unit;
    return NULL;
}

#define ATTR_HAS(a, field) ((a)->structSize >= offsetof(nvtxCounterAttr_t, field) + \
                            sizeof((a)->field))

static uint64_t h_counter_register(nvtxDomainHandle_t d, const nvtxCounterAttr_t *a)
{
    if (!a || !ATTR_HAS(a, name))
        return NVTX_COUNTER_ID_NONE;
    uint64_t id = ATTR_HAS(a, counterId) ? a->counterId : NVTX_COUNTER_ID_NONE;
    if (id < NVTX_COUNTER_ID_STATIC_START || id >= NVTX_COUNTER_ID_DYNAMIC_START)
        id = NVTX_COUNTER_ID_DYNAMIC_START + atomic_fetch_add(&g_next_counter, 1);
    const char *unit = ATTR_HAS(a, semantics) ? semantics_unit(a->semantics) : NULL;
    uint32_t schema = a->schemaId < (UINT64_C(1) << 32) ? (uint32_t)a->schemaId : 0;
    pprof_counter_define(d ? d->id : 0, id, a->name ? a->name : "", unit, schema);
    return id;
}

/* One COUNTER record in the caller's ring; ts taken last. */
static inline void counter_sample(nvtxDomainHandle_t d, uint64_t id, uint32_t kind, uint64_t bits)
{
    pprof_thread *t = pprof_self();
    unsigned flags = atomic_load_explicit(&g.flags, memory_order_relaxed);
    if (PPROF_UNLIKELY(!(flags & PPROF_F_CAPTURE) || !t->ring)) {
        pprof_drop(t);
        return;
    }
    pp_rec_counter *r = (pp_rec_counter *)pprof_ring_reserve(t, sizeof *r);
    if (PPROF_UNLIKELY(!r)) {
        pprof_drop(t);
        return;
    }
    r->h.type = PP_REC_COUNTER;
    r->h.size = sizeof *r;
    r->h.tid = atomic_load_explicit(&t->tid, memory_order_relaxed);
    r->counter_id = id;
    r->domain = d ? d->id : 0;
    r->kind = kind;
    r->value = bits;
    r->h.ts = pprof_now(flags);
    pprof_ring_commit(t, sizeof *r);
}

static void h_counter_int64(nvtxDomainHandle_t d, uint64_t id, int64_t v)
{
    counter_sample(d, id, PP_COUNTER_INT64, (uint64_t)v);
}

static void h_counter_float64(nvtxDomainHandle_t d, uint64_t id, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    counter_sample(d, id, PP_COUNTER_FLOAT64, bits);
}

/* ---- memory ---- */

static inline void mem_record(nvtxDomainHandle_t d, uint32_t op, uint64_t heap, uint64_t addr,
                              uint64_t bytes, uint32_t name, uint32_t usage)
{
    pprof_thread *t = pprof_self();
    unsigned flags = atomic_load_explicit(&g.flags, memory_order_relaxed);
    if (PPROF_UNLIKELY(!(flags & PPROF_F_CAPTURE) || !t->ring)) {
        pprof_drop(t);
        return;
    }
    pp_rec_mem *r = (pp_rec_mem *)pprof_ring_reserve(t, sizeof *r);
    if (PPROF_UNLIKELY(!r)) {
        pprof_drop(t);
        return;
    }
    r->h.type = PP_REC_MEM;
    r->h.size = sizeof *r;
    r->h.tid = atomic_load_explicit(&t->tid, memory_order_relaxed);
    r->op = op;
    r->domain = d ? d->id : 0;
    r->heap = heap;
    r->addr = addr;
    r->bytes = bytes;
    r->name = name;
    r->usage = usage;
    r->h.ts = pprof_now(flags);
    pprof_ring_commit(t, sizeof *r);
}

#define DESC_HAS(p, type, field) ((p)->structSize >= offsetof(type, field) + sizeof((p)->field))

static nvtxMemHeapHandle_t h_heap_register(nvtxDomainHandle_t d, const nvtxMemHeapDesc_t *desc)
{
    /* Heap handles are ids, never dereferenced; 0 (process-wide) and -1 (no tool) are NVTX's. */
    uint64_t id = atomic_fetch_add(&g_next_heap, 1) + 1;
    uint64_t addr = 0, bytes = 0;
    uint32_t name = 0, usage = 0;
    if (desc && DESC_HAS(desc, nvtxMemHeapDesc_t, typeSpecificDesc)) {
        usage = desc->usage;
        if (desc->type == NVTX_MEM_TYPE_VIRTUAL_ADDRESS && desc->typeSpecificDesc &&
            desc->typeSpecificDescSize >= sizeof(nvtxMemVirtualRangeDesc_t)) {
            const nvtxMemVirtualRangeDesc_t *v = desc->typeSpecificDesc;
            addr = (uint64_t)(uintptr_t)v->ptr;
            bytes = v->size;
        }
    }
    if (desc && DESC_HAS(desc, nvtxMemHeapDesc_t, message)) {
        const struct nvtxStringRegistration_st *s = NULL;
        if (desc->messageType == NVTX_MESSAGE_TYPE_ASCII && desc->message.ascii)
            s = pprof_intern_cstr(desc->message.ascii);
        else if (desc->messageType == NVTX_MESSAGE_TYPE_UNICODE && desc->message.unicode)
            s = pprof_intern_wstr(desc->message.unicode);
        else if (desc->messageType == NVTX_MESSAGE_TYPE_REGISTERED)
            s = desc->message.registered;
        name = s ? s->id : 0;
    }
    mem_record(d, PP_MEM_HEAP_REGISTER, id, addr, bytes, name, usage);
    return (nvtxMemHeapHandle_t)(uintptr_t)id;
}

static void h_heap_unregister(nvtxDomainHandle_t d, nvtxMemHeapHandle_t heap)
{
    mem_record(d, PP_MEM_HEAP_UNREGISTER, (uint64_t)(uintptr_t)heap, 0, 0, 0, 0);
}

static void h_heap_reset(nvtxDomainHandle_t d, nvtxMemHeapHandle_t heap)
{
    mem_record(d, PP_MEM_HEAP_RESET, (uint64_t)(uintptr_t)heap, 0, 0, 0, 0);
}

/* Region batches: virtual-address descriptions only (the one region type NVTX defines). */
static void h_regions_register(nvtxDomainHandle_t d, const nvtxMemRegionsRegisterBatch_t *b)
{
    if (!b || b->structSize < sizeof *b || b->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS ||
        !b->regionDescElements || b->regionDescElementSize < sizeof(nvtxMemVirtualRangeDesc_t))
        return;
    const uint8_t *p = b->regionDescElements;
    for (size_t i = 0; i < b->regionCount; i++) {
        const nvtxMemVirtualRangeDesc_t *v =
            (const nvtxMemVirtualRangeDesc_t *)(const void *)(p + i * b->regionDescElementSize);
        if (b->regionHandleElementsOut) /* a region's handle is its address */
            b->regionHandleElementsOut[i] = (nvtxMemRegionHandle_t)(uintptr_t)v->ptr;
        mem_record(d, PP_MEM_REGION_REGISTER, (uint64_t)(uintptr_t)b->heap,
                   (uint64_t)(uintptr_t)v->ptr, v->size, 0, 0);
    }
}

static void h_regions_resize(nvtxDomainHandle_t d, const nvtxMemRegionsResizeBatch_t *b)
{
    if (!b || b->structSize < sizeof *b || b->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS ||
        !b->regionDescElements || b->regionDescElementSize < sizeof(nvtxMemVirtualRangeDesc_t))
        return;
    const uint8_t *p = b->regionDescElements;
    for (size_t i = 0; i < b->regionDescCount; i++) {
        const nvtxMemVirtualRangeDesc_t *v =
            (const nvtxMemVirtualRangeDesc_t *)(const void *)(p + i * b->regionDescElementSize);
        mem_record(d, PP_MEM_REGION_RESIZE, 0, (uint64_t)(uintptr_t)v->ptr, v->size, 0, 0);
    }
}

static void h_regions_unregister(nvtxDomainHandle_t d, const nvtxMemRegionsUnregisterBatch_t *b)
{
    if (!b || b->structSize < sizeof *b || !b->refElements ||
        b->refElementSize < sizeof(nvtxMemRegionRef_t) ||
        (b->refType != NVTX_MEM_REGION_REF_TYPE_POINTER &&
         b->refType != NVTX_MEM_REGION_REF_TYPE_HANDLE))
        return;
    const uint8_t *p = (const uint8_t *)b->refElements;
    for (size_t i = 0; i < b->refCount; i++) {
        const nvtxMemRegionRef_t *r =
            (const nvtxMemRegionRef_t *)(const void *)(p + i * b->refElementSize);
        /* pointer or handle: the same address, since our handles are the addresses */
        mem_record(d, PP_MEM_REGION_UNREGISTER, 0, (uint64_t)(uintptr_t)r->pointer, 0, 0, 0);
    }
}

/* ---- installation ---- */

static void slot_set(const nvtxExtModuleSegment_t *s, size_t cbid, void *fn)
{
    if (cbid < s->slotCount)
        s->functionSlots[cbid] = (intptr_t)fn;
}

int pprof_ext_install(nvtxExtModuleInfo_t *mi)
{
    if (mi->segmentsCount < 1 || !mi->segments || !mi->segments[0].functionSlots)
        return 0;
    const nvtxExtModuleSegment_t *s = &mi->segments[0];
    if (mi->moduleId == NVTX_EXT_COUNTERS_MODULEID) {
        slot_set(s, NVTX3EXT_CBID_nvtxCounterRegister, (void *)h_counter_register);
        slot_set(s, NVTX3EXT_CBID_nvtxCounterSampleInt64, (void *)h_counter_int64);
        slot_set(s, NVTX3EXT_CBID_nvtxCounterSampleFloat64, (void *)h_counter_float64);
        return 1;
    }
    if (mi->moduleId == NVTX_EXT_MODULEID_MEM) {
        slot_set(s, NVTX3EXT_CBID_nvtxMemHeapRegister, (void *)h_heap_register);
        slot_set(s, NVTX3EXT_CBID_nvtxMemHeapUnregister, (void *)h_heap_unregister);
        slot_set(s, NVTX3EXT_CBID_nvtxMemHeapReset, (void *)h_heap_reset);
        slot_set(s, NVTX3EXT_CBID_nvtxMemRegionsRegister, (void *)h_regions_register);
        slot_set(s, NVTX3EXT_CBID_nvtxMemRegionsResize, (void *)h_regions_resize);
        slot_set(s, NVTX3EXT_CBID_nvtxMemRegionsUnregister, (void *)h_regions_unregister);
        return 1;
    }
    return 0;
}
