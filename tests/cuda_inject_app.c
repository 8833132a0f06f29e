/* cuda_inject_app.c: a job for tests/test_cupti.c. It emits three pipeline steps through the
 * runtime's NVTX annotations, then does what libcuda does at cuInit when CUDA_INJECTION64_PATH
 * is set: dlopen the library and call InitializeInjection, printing what it returned. On a
 * machine without a driver libpprof must report that GPU tracing is off and keep capturing. */
#include "pp_nvtx.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void spin_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

int main(void)
{
    const char *inject = getenv("CUDA_INJECTION64_PATH");
    if (inject && *inject) {
        void *h = dlopen(inject, RTLD_NOW);
        int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
        if (!init) {
            printf("InitializeInjection not found in %s\n", inject);
            return 1;
        }
        printf("InitializeInjection returned %d\n", init());
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
            spin_us(200);
            pp_nvtx_pop();
        }
        for (int mb = 0; mb < 2; mb++) {
            in.mb = mb;
            pp_nvtx_push(PP_NVTX_BWD, &in);
            spin_us(400);
            pp_nvtx_pop();
        }
        in.mb = in.chunk = -1;
        pp_nvtx_push(PP_NVTX_OPT_STEP, &in);
        spin_us(50);
        pp_nvtx_pop();
        pp_nvtx_pop();
    }
    return 0;
}
