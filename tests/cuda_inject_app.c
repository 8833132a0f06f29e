/* cuda_inject_app.c: a job for tests/test_cupti.c and tests/test_nccl_plugin.c. It emits three
 * pipeline steps through the runtime's NVTX annotations, and
 * - does what libcuda does at cuInit when CUDA_INJECTION64_PATH is set: dlopen the library and
 *   call InitializeInjection, printing what it returned (on a machine without a driver libpprof
 *   must report that GPU tracing is off and keep capturing);
 * - when NCCL_PROFILER_PLUGIN is set, loads the plugin as NCCL 2.28 does (dlopen RTLD_NOW |
 *   RTLD_LOCAL, the data symbol ncclProfiler_v5) and drives its ABI in NCCL's order for one
 *   communicator of 2 ranks (NCCL 2.28.9: src/enqueue.cc hostStreamPlanTask starts the P2p/Coll
 *   task events, hands the work to the proxy and stops them at once; the proxy thread's
 *   profiler progress, src/transport/profiler.cc, starts each kernel channel (parentObj: the
 *   task event) once the kernel reports it started and records ncclProfilerKernelChStop and
 *   stops it once the kernel finished; src/init.cc commFree destroys the proxy before it calls
 *   the plugin's finalize). Per step: one Send of 1 Mi float32 to rank 1 over 2 kernel
 *   channels whose GPU timers span 1 ms, both channels started and stopped by a second thread
 *   (the proxy) after the Send's own stop, and one AllReduce without channels. After the steps:
 *   a Recv announced with 1 channel whose channel never comes (the plugin must write it at
 *   finalize, untimed), and a kernel channel naming an operation that has already ended (the
 *   plugin must ignore it). */
#include "pp_nccl_abi.h"
#include "pp_nvtx.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void spin_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

/* tests/fake_cupti.c's launch hook, when the capture loaded the fake CUPTI */
static void (*g_launch)(uint64_t);

static const pp_nccl_profiler_v5 *g_plugin;
static void *g_comm;

static void nccl_load(void)
{
    const char *path = getenv("NCCL_PROFILER_PLUGIN");
    if (!path || !*path)
        return;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    g_plugin = h ? dlsym(h, "ncclProfiler_v5") : NULL;
    if (!g_plugin) {
        printf("ncclProfiler_v5 not found in %s\n", path);
        exit(1);
    }
    int mask = 0;
    if (g_plugin->init(&g_comm, 0x1234abcdULL, &mask, "test", 1, 2, 0, NULL) != 0) {
        printf("plugin init failed\n");
        exit(1);
    }
    printf("plugin %s, activation mask %#x\n", g_plugin->name, mask);
}

/* GPU globaltimer ns: close to the Unix epoch, as on a GPU */
static uint64_t gpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* What NCCL's proxy thread does for one operation's kernel channels. */
typedef struct proxy_work {
    void *op;
    int n_channels;
    uint64_t t0;
} proxy_work;

static void *proxy_main(void *arg)
{
    proxy_work *w = arg;
    void *ch[2] = {NULL, NULL};
    for (int c = 0; c < w->n_channels; c++) {
        pp_nccl_descr_v5 k;
        memset(&k, 0, sizeof k);
        k.type = PP_NCCL_EV_KERNEL_CH;
        k.parentObj = w->op;
        k.kernelCh.channelId = (uint8_t)c;
        k.kernelCh.pTimer = w->t0 + (uint64_t)c * 100000; /* the second starts 0.1 ms later */
        g_plugin->startEvent(g_comm, &ch[c], &k);
    }
    for (int c = 0; c < w->n_channels; c++) {
        /* the first ends at 0.8 ms, the second at 1 ms */
        pp_nccl_state_args_v5 stop = {.kernelCh = {.pTimer = w->t0 + 800000 + (uint64_t)c * 200000}};
        if (ch[c]) {
            g_plugin->recordEventState(ch[c], PP_NCCL_STATE_KERNEL_CH_STOP, &stop);
            g_plugin->stopEvent(ch[c]);
        }
    }
    return NULL;
}

static void run_proxy(void *op, int n_channels, uint64_t t0)
{
    proxy_work w = {op, n_channels, t0};
    pthread_t th;
    if (pthread_create(&th, NULL, proxy_main, &w) != 0) {
        printf("cannot start the proxy thread\n");
        exit(1);
    }
    pthread_join(th, NULL);
}

static void *start_p2p(const char *func, int peer, size_t count, int n_channels)
{
    pp_nccl_descr_v5 d;
    memset(&d, 0, sizeof d);
    d.type = PP_NCCL_EV_P2P;
    d.p2p.func = func;
    d.p2p.datatype = "ncclFloat32";
    d.p2p.count = count;
    d.p2p.peer = peer;
    d.p2p.nChannels = (uint8_t)n_channels;
    void *op = NULL;
    g_plugin->startEvent(g_comm, &op, &d);
    return op;
}

static void nccl_step(void)
{
    if (!g_plugin)
        return;
    /* hostStreamPlanTask: the task event starts, the work goes to the proxy, the event stops */
    void *op = start_p2p("Send", 1, 1u << 20, 2);
    uint64_t t0 = gpu_now();
    g_plugin->stopEvent(op);
    /* then the proxy thread follows the kernel's channels */
    run_proxy(op, 2, t0);
    pp_nccl_descr_v5 d;
    memset(&d, 0, sizeof d);
    d.type = PP_NCCL_EV_COLL;
    d.coll.func = "AllReduce";
    d.coll.datatype = "ncclBfloat16";
    d.coll.count = 1000;
    void *coll = NULL;
    g_plugin->startEvent(g_comm, &coll, &d);
    g_plugin->stopEvent(coll);
}

/* Before finalize: an operation whose channel never reports, and a channel naming an operation
 * that has already been written (its handle is stale: the plugin must not touch it). */
static void nccl_last(void)
{
    if (!g_plugin)
        return;
    void *recv = start_p2p("Recv", 1, 256, 1);
    g_plugin->stopEvent(recv);
    void *done = start_p2p("Send", 1, 256, 1);
    g_plugin->stopEvent(done);
    uint64_t t0 = gpu_now();
    run_proxy(done, 1, t0); /* ends it: written and freed */
    run_proxy(done, 1, t0); /* a late channel with the stale parent */
}

int main(void)
{
    nccl_load();
    const char *inject = getenv("CUDA_INJECTION64_PATH");
    if (inject && *inject) {
        void *h = dlopen(inject, RTLD_NOW);
        int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
        if (!init) {
            printf("InitializeInjection not found in %s\n", inject);
            return 1;
        }
        printf("InitializeInjection returned %d\n", init());
        const char *fake = getenv("PPROF_CUPTI_LIB");
        void *f = fake ? dlopen(fake, RTLD_NOW | RTLD_NOLOAD) : NULL;
        if (f)
            *(void **)&g_launch = dlsym(f, "fake_cupti_launch");
    }
    pp_nvtx_setup(1, 2, 1, 0, NULL);
    for (int step = 1; step <= 3; step++) {
        pp_nvtx_info in = pp_nvtx_info_none();
        in.step = step;
        in.stage = 0;
        pp_nvtx_push(PP_NVTX_STEP, &in);
        for (int mb = 0; mb < 2; mb++) {
            in.mb = mb;
            in.chunk = 0;
            pp_nvtx_push(PP_NVTX_FWD, &in);
            if (g_launch)
                g_launch(150000);
            spin_us(200);
            pp_nvtx_pop();
        }
        for (int mb = 0; mb < 2; mb++) {
            in.mb = mb;
            pp_nvtx_push(PP_NVTX_BWD, &in);
            if (g_launch)
                g_launch(300000);
            spin_us(400);
            pp_nvtx_pop();
        }
        nccl_step();
        in.mb = in.chunk = -1;
        pp_nvtx_push(PP_NVTX_OPT_STEP, &in);
        spin_us(50);
        pp_nvtx_pop();
        pp_nvtx_pop();
    }
    nccl_last();
    if (g_plugin)
        g_plugin->finalize(g_comm);
    return 0;
}
