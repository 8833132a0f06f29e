/* fake_cupti.c: a stand-in for libcupti.so.13 (libpprof loads it through PPROF_CUPTI_LIB), so
 * that the GPU capture's glue runs end to end on a machine without a GPU: the start-up
 * sequence, the buffer callbacks, the flush at exit and the encoding into the trace.
 *
 * FAKE_CUPTI_MODE=busy: cuptiActivityEnable answers CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
 * as when Nsight Systems or torch.profiler already holds CUPTI. Otherwise every call succeeds,
 * and fake_cupti_launch(dur_ns) (called by the test job inside its NVTX ranges) records a
 * runtime API call on the calling thread and a kernel of dur_ns starting 10 us later, with the
 * clock libpprof registered; cuptiActivityFlushAll hands them over through the registered
 * buffer callbacks, as CUPTI does. Records are laid out as CUDA 13's structs.
 * FAKE_CUPTI_MODE=flood: the flush also hands over FAKE_FLOOD kernels (no API call of theirs
 * recorded) in as many full buffers as they take, back to back, as CUPTI does for a
 * launch-bound job: far more than a ring of the capture holds. */
#define _GNU_SOURCE
#include <cupti.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static CUpti_TimestampCallbackFunc g_clock;
static CUpti_BuffersCallbackRequestFunc g_request;
static CUpti_BuffersCallbackCompleteFunc g_complete;
static CUpti_ActivityAPI g_api[256];
static CUpti_ActivityKernel10 g_kern[256];
static int g_n;
static uint32_t g_corr;

#define FAKE_EXPORT __attribute__((visibility("default")))

enum { FAKE_FLOOD = 150000 };

FAKE_EXPORT CUptiResult cuptiGetVersion(uint32_t *v)
{
    *v = 130001;
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
    *s = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
             ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
             : "fake";
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
    g_clock = f;
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType t)
{
    (void)t;
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                       CUpti_BuffersCallbackCompleteFunc done)
{
    g_request = req;
    g_complete = done;
    return CUPTI_SUCCESS;
}

/* What the library asked for, said on stderr at the flush (the tests read it). */
static int g_driver_kind, g_runtime_kind, g_kernel_kind;
static char g_driver_apis[256], g_runtime_apis[256], g_kinds[256];

FAKE_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
    const char *m = getenv("FAKE_CUPTI_MODE");
    if (m && strcmp(m, "busy") == 0)
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    size_t used = strlen(g_kinds);
    snprintf(g_kinds + used, sizeof g_kinds - used, " %d", (int)kind);
    if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
        g_kernel_kind = 1;
    if (kind == CUPTI_ACTIVITY_KIND_DRIVER)
        g_driver_kind = 1;
    if (kind == CUPTI_ACTIVITY_KIND_RUNTIME)
        g_runtime_kind = 1;
    return CUPTI_SUCCESS;
}

/* A few of the driver API's callback ids, with their names as CUPTI 13 gives them. */
static const char *driver_name(uint32_t cbid)
{
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent: return "cuCtxGetCurrent";
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: return "cuLaunchKernel";
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: return "cuLaunchKernelEx";
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2: return "cuMemcpyHtoDAsync_v2";
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async: return "cuMemsetD32Async";
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch: return "cuGraphLaunch";
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize: return "cuStreamSynchronize";
    default: return NULL;
    }
}

/* And of the runtime's, the launch the stand-in's records name (211) among them. */
static const char *runtime_name(uint32_t cbid)
{
    switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020: return "cudaGetDevice_v3020";
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020: return "cudaGetLastError_v3020";
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020: return "cudaMemcpyAsync_v3020";
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000: return "cudaLaunchKernel_v7000";
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000: return "cudaGraphLaunch_v10000";
    default: return NULL;
    }
}

FAKE_EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid,
                                             const char **name)
{
    *name = domain == CUPTI_CB_DOMAIN_DRIVER_API    ? driver_name(cbid)
            : domain == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime_name(cbid)
                                                    : NULL;
    return *name ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

static void note_api(char *list, size_t cap, const char *n, uint8_t enable)
{
    size_t len = strlen(list);
    if (enable && n && len + strlen(n) + 2 < cap)
        snprintf(list + len, cap - len, " %s", n);
}

FAKE_EXPORT CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable)
{
    note_api(g_driver_apis, sizeof g_driver_apis, driver_name(cbid), enable);
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable)
{
    note_api(g_runtime_apis, sizeof g_runtime_apis, runtime_name(cbid), enable);
    return CUPTI_SUCCESS;
}

/* Records in the buffer follow each other at 8-byte-aligned sizes of their structs. */
static size_t rec_size(const CUpti_Activity *a)
{
    size_t s = a->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? sizeof(CUpti_ActivityAPI)
                                                      : sizeof(CUpti_ActivityKernel10);
    return (s + 7) & ~(size_t)7;
}

FAKE_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buf, size_t valid,
                                                   CUpti_Activity **rec)
{
    uint8_t *next = *rec ? (uint8_t *)*rec + rec_size(*rec) : buf;
    if (next >= buf + valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = (CUpti_Activity *)next;
    return CUPTI_SUCCESS;
}

/* FAKE_CUPTI_MODE=cuptidrop: CUPTI lost 7 records before the first buffer it completes. */
FAKE_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t *n)
{
    (void)c;
    (void)s;
    static int told;
    const char *m = getenv("FAKE_CUPTI_MODE");
    *n = m && strcmp(m, "cuptidrop") == 0 && !told++ ? 7 : 0;
    return CUPTI_SUCCESS;
}

/* FAKE_FLOOD kernels of 1 us, 2 us apart, on stream 9, in full buffers one after another. */
static void flood(void)
{
    size_t k = rec_size((const CUpti_Activity *)&g_kern[0]);
    uint64_t t = g_clock ? g_clock() : 0;
    for (int left = FAKE_FLOOD; left > 0;) {
        uint8_t *buf = NULL;
        size_t size = 0, max = 0, used = 0;
        g_request(&buf, &size, &max);
        if (!buf)
            return;
        for (; left > 0 && used + k <= size; left--) {
            CUpti_ActivityKernel10 r;
            memset(&r, 0, sizeof r);
            r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
            r.start = t;
            r.end = t + 1000;
            t += 2000;
            r.streamId = 9;
            r.correlationId = ++g_corr;
            r.name = "flood_kernel";
            memcpy(buf + used, &r, sizeof r);
            used += k;
        }
        g_complete(NULL, 9, buf, size, used);
    }
}

FAKE_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
    (void)flag;
    fprintf(stderr, "fake_cupti: kinds enabled:%s\n", g_kinds);
    fprintf(stderr, "fake_cupti: DRIVER kind %s; driver calls enabled:%s\n",
            g_driver_kind ? "on" : "off", g_driver_apis[0] ? g_driver_apis : " none");
    fprintf(stderr, "fake_cupti: RUNTIME kind %s; runtime calls enabled:%s\n",
            g_runtime_kind ? "on" : "off", g_runtime_apis[0] ? g_runtime_apis : " none");
    if (!g_request || !g_complete || !g_n)
        return CUPTI_SUCCESS;
    uint8_t *buf = NULL;
    size_t size = 0, max = 0, used = 0;
    g_request(&buf, &size, &max);
    if (!buf)
        return CUPTI_ERROR_OUT_OF_MEMORY;
    /* only the kinds (and the launch call, id 211) asked for, as CUPTI would */
    int api_on = g_runtime_kind || strstr(g_runtime_apis, "cudaLaunchKernel") != NULL;
    int kernel_on = g_kernel_kind;
    for (int i = 0; i < g_n; i++) {
        size_t a = api_on ? rec_size((const CUpti_Activity *)&g_api[i]) : 0;
        size_t k = kernel_on ? rec_size((const CUpti_Activity *)&g_kern[i]) : 0;
        if (used + a + k > size)
            break;
        memcpy(buf + used, &g_api[i], a);
        used += a;
        memcpy(buf + used, &g_kern[i], k);
        used += k;
    }
    g_n = 0;
    g_complete(NULL, 0, buf, size, used);
    const char *m = getenv("FAKE_CUPTI_MODE");
    if (m && strcmp(m, "flood") == 0)
        flood();
    return CUPTI_SUCCESS;
}

FAKE_EXPORT void fake_cupti_launch(uint64_t dur_ns)
{
    if (!g_clock || g_n >= 256)
        return;
    uint64_t t = g_clock();
    CUpti_ActivityAPI *a = &g_api[g_n];
    CUpti_ActivityKernel10 *k = &g_kern[g_n];
    memset(a, 0, sizeof *a);
    memset(k, 0, sizeof *k);
    a->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a->cbid = 211;
    a->start = t;
    a->end = t + 5000;
    a->processId = (uint32_t)getpid();
    a->threadId = (uint32_t)syscall(SYS_gettid);
    a->correlationId = ++g_corr;
    k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k->start = t + 10000;
    k->end = k->start + dur_ns;
    k->streamId = 7;
    k->correlationId = g_corr;
    k->name = "fake_kernel";
    g_n++;
}
