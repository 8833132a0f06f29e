/* cuda_inject_app.c: a job for tests/test_cupti.c. It emits three pipeline steps through the
 * runtime's NVTX annotations, and
 * - does what libcuda does at cuInit when CUDA_INJECTION64_PATH is set: dlopen the library and
 *   call InitializeInjection, printing what it returned (on a machine without a driver libpprof
 *   must report that GPU tracing is off and keep capturing);
 * - when NCCL_PROFILER_PLUGIN is set, loads the plugin as NCCL 2.28 does (dlopen RTLD_NOW |
 *   RTLD_LOCAL, the data symbol ncclProfiler_v5) and drives its ABI as NCCL would for one
 *   communicator of 2 ranks: per step one Send of 1 Mi float32 to rank 1 over 2 kernel channels
 *   whose GPU timers span 1 ms (the second channel's stop arriving after the operation's own
 *   stop, as from NCCL's proxy thread), and one AllReduce without channels. */
#include "pp_nccl_abi.h"
#include "pp_nvtx.h"

#include <dlfcn.h>
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

static void nccl_step(void)
{
    if (!g_plugin)
        return;
    pp_nccl_descr_v5 d;
    memset(&d, 0, sizeof d);
    d.type = PP_NCCL_EV_P2P;
    d.p2p.func = "Send";
    d.p2p.datatype = "ncclFloat32";
    d.p2p.count = 1u << 20;
    d.p2p.peer = 1;
    d.p2p.nChannels = 2;
    void *op = NULL, *ch[2] = {NULL, NULL};
    g_plugin->startEvent(g_comm, &op, &d);
    uint64_t t0 = gpu_now();
    for (int c = 0; c < 2; c++) {
        pp_nccl_descr_v5 k;
        memset(&k, 0, sizeof k);
        k.type = PP_NCCL_EV_KERNEL_CH;
        k.parentObj = op;
        k.kernelCh.channelId = (uint8_t)c;
        k.kernelCh.pTimer = t0 + (uint64_t)c * 100000; /* the second starts 0.1 ms later */
        g_plugin->startEvent(g_comm, &ch[c], &k);
    }
    pp_nccl_state_args_v5 stop0 = {.kernelCh = {.pTimer = t0 + 800000}};
    pp_nccl_state_args_v5 stop1 = {.kernelCh = {.pTimer = t0 + 1000000}};
    g_plugin->recordEventState(ch[0], PP_NCCL_STATE_KERNEL_CH_STOP, &stop0);
    g_plugin->stopEvent(ch[0]);
    g_plugin->stopEvent(op); /* the host side ends before the last channel */
    g_plugin->recordEventState(ch[1], PP_NCCL_STATE_KERNEL_CH_STOP, &stop1);
    g_plugin->stopEvent(ch[1]);
    memset(&d, 0, sizeof d);
    d.type = PP_NCCL_EV_COLL;
    d.coll.func = "AllReduce";
    d.coll.datatype = "ncclBfloat16";
    d.coll.count = 1000;
    void *coll = NULL;
    g_plugin->startEvent(g_comm, &coll, &d);
    g_plugin->stopEvent(coll);
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
    if (g_plugin)
        g_plugin->finalize(g_comm);
    return 0;
}
