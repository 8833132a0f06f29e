/* mem_app.c: a plain NVTX program (the NVTX headers and nothing else) that reports memory the
 * two standard ways, for tests/test_memory.c to capture under pprof-run:
 *  - counters (nvToolsExtCounters.h) in the "pipeprof" domain named as pptrain names them
 *    (issue 17's contract): one thread per stage S in 0..1 registers pp.mem.stage<S>.params
 *    (sampled once: (S + 1) * 1000) and pp.mem.stage<S>.activations, sampled N times rising
 *    (k * 100 * (S + 1), k = 1..N) then N times falling back to 0; the main thread registers a
 *    float64 counter with a static id, "app.ratio" (k * 0.5, k = 1..N), unit "ratio";
 *  - the memory extension (nvToolsExtMem.h): a heap "arena" over a 4096-byte range, regions of
 *    64 and 128 bytes, the first resized to 256, the second unregistered, the heap reset, then
 *    unregistered.
 * usage: mem_app N. Literals on purpose: the program plays a foreign job. */
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtMem.h>
#include <nvtx3/nvToolsExtSemanticsCounters.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static nvtxDomainHandle_t g_dom;
static int g_n;

static uint64_t reg(nvtxDomainHandle_t d, const char *name, uint64_t schema, uint64_t id,
                    const char *unit)
{
    nvtxSemanticsCounter_t sem;
    memset(&sem, 0, sizeof sem);
    sem.header.structSize = sizeof sem;
    sem.header.semanticId = NVTX_SEMANTIC_ID_COUNTERS_V1;
    sem.header.version = NVTX_COUNTER_SEMANTIC_VERSION;
    sem.unit = unit;
    sem.unitScaleNumerator = 1;
    sem.unitScaleDenominator = 1;
    nvtxCounterAttr_t a;
    memset(&a, 0, sizeof a);
    a.structSize = sizeof a;
    a.schemaId = schema;
    a.name = name;
    a.scopeId = NVTX_SCOPE_CURRENT_SW_THREAD;
    a.semantics = &sem.header;
    a.counterId = id;
    return nvtxCounterRegister(d, &a);
}

static void *stage(void *arg)
{
    int s = (int)(intptr_t)arg;
    char name[64];
    snprintf(name, sizeof name, "pp.mem.stage%d.params", s);
    uint64_t params = reg(g_dom, name, NVTX_PAYLOAD_ENTRY_TYPE_INT64, 0, "bytes");
    snprintf(name, sizeof name, "pp.mem.stage%d.activations", s);
    uint64_t act = reg(g_dom, name, NVTX_PAYLOAD_ENTRY_TYPE_INT64, 0, "bytes");
    nvtxCounterSampleInt64(g_dom, params, (int64_t)(s + 1) * 1000);
    nvtxCounterSampleInt64(g_dom, act, 0);
    for (int k = 1; k <= g_n; k++)
        nvtxCounterSampleInt64(g_dom, act, (int64_t)k * 100 * (s + 1));
    for (int k = g_n - 1; k >= 0; k--)
        nvtxCounterSampleInt64(g_dom, act, (int64_t)k * 100 * (s + 1));
    return NULL;
}

int main(int argc, char **argv)
{
    g_n = argc > 1 ? atoi(argv[1]) : 10;
    if (g_n < 1 || g_n > 100000) {
        fprintf(stderr, "usage: mem_app N (1..100000)\n");
        return 2;
    }
    g_dom = nvtxDomainCreateA("pipeprof");
    pthread_t th[2];
    for (int s = 0; s < 2; s++)
        if (pthread_create(&th[s], NULL, stage, (void *)(intptr_t)s) != 0)
            return 3;
    for (int s = 0; s < 2; s++)
        pthread_join(th[s], NULL);

    nvtxDomainHandle_t app = nvtxDomainCreateA("app");
    uint64_t ratio = reg(app, "app.ratio", NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE,
                         NVTX_COUNTER_ID_STATIC_START + 5, "ratio");
    for (int k = 1; k <= g_n; k++)
        nvtxCounterSampleFloat64(app, ratio, k * 0.5);

    static char arena[4096];
    nvtxMemVirtualRangeDesc_t range = {sizeof arena, arena};
    nvtxMemHeapDesc_t hd;
    memset(&hd, 0, sizeof hd);
    hd.extCompatID = NVTX_EXT_COMPATID_MEM;
    hd.structSize = sizeof hd;
    hd.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
    hd.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    hd.typeSpecificDescSize = sizeof range;
    hd.typeSpecificDesc = &range;
    hd.messageType = NVTX_MESSAGE_TYPE_ASCII;
    hd.message.ascii = "arena";
    nvtxMemHeapHandle_t heap = nvtxMemHeapRegister(app, &hd);

    nvtxMemVirtualRangeDesc_t regions[2] = {{64, arena}, {128, arena + 1024}};
    nvtxMemRegionHandle_t handles[2] = {0, 0};
    nvtxMemRegionsRegisterBatch_t rb;
    memset(&rb, 0, sizeof rb);
    rb.extCompatID = NVTX_EXT_COMPATID_MEM;
    rb.structSize = sizeof rb;
    rb.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    rb.heap = heap;
    rb.regionCount = 2;
    rb.regionDescElementSize = sizeof regions[0];
    rb.regionDescElements = regions;
    rb.regionHandleElementsOut = handles;
    nvtxMemRegionsRegister(app, &rb);

    nvtxMemVirtualRangeDesc_t bigger = {256, arena};
    nvtxMemRegionsResizeBatch_t zb;
    memset(&zb, 0, sizeof zb);
    zb.extCompatID = NVTX_EXT_COMPATID_MEM;
    zb.structSize = sizeof zb;
    zb.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    zb.regionDescCount = 1;
    zb.regionDescElementSize = sizeof bigger;
    zb.regionDescElements = &bigger;
    nvtxMemRegionsResize(app, &zb);

    nvtxMemRegionRef_t ref;
    ref.pointer = arena + 1024;
    nvtxMemRegionsUnregisterBatch_t ub;
    memset(&ub, 0, sizeof ub);
    ub.extCompatID = NVTX_EXT_COMPATID_MEM;
    ub.structSize = sizeof ub;
    ub.refType = NVTX_MEM_REGION_REF_TYPE_POINTER;
    ub.refCount = 1;
    ub.refElementSize = sizeof ref;
    ub.refElements = &ref;
    nvtxMemRegionsUnregister(app, &ub);

    nvtxMemHeapReset(app, heap);
    nvtxMemHeapUnregister(app, heap);
    /* with a tool attached, a region's handle is its address */
    printf("%d\n", handles[0] == (nvtxMemRegionHandle_t)(void *)arena);
    return 0;
}
