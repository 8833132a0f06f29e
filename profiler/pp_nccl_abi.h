/* pp_nccl_abi.h: NCCL's profiler plugin ABI, version 5 (NCCL 2.28), as pipeprof uses it: the
 * plugin (profiler/nccl_plugin.c) and the test harness that drives it the way NCCL does
 * (tests/cuda_inject_app.c). NCCL installs no header for it, so the types are transcribed from
 * NCCL 2.28.9's profiler_v5.h; the layout is checked against upstream's sizes (descriptor 112
 * bytes, state arguments 8, function table 48; INSTRUMENTATION.md 4.2). */
#ifndef PP_NCCL_ABI_H
#define PP_NCCL_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef int pp_nccl_result; /* ncclResult_t: 0 = ncclSuccess */
typedef void (*pp_nccl_logger)(int level, unsigned long flags, const char *file, int line,
                               const char *fmt, ...);

enum {
    PP_NCCL_EV_GROUP = 1 << 0,
    PP_NCCL_EV_COLL = 1 << 1,
    PP_NCCL_EV_P2P = 1 << 2,
    PP_NCCL_EV_PROXY_OP = 1 << 3,
    PP_NCCL_EV_PROXY_STEP = 1 << 4,
    PP_NCCL_EV_PROXY_CTRL = 1 << 5,
    PP_NCCL_EV_KERNEL_CH = 1 << 6,
    PP_NCCL_STATE_KERNEL_CH_STOP = 22
};

typedef struct pp_nccl_descr_v5 {
    uint64_t type;
    void *parentObj;
    int rank;
    union {
        struct {
            bool graphCaptured;
            int groupDepth;
        } groupApi;
        struct {
            const char *func;
            size_t count;
            const char *datatype;
            int root;
            void *stream;
            bool graphCaptured;
        } collApi;
        struct {
            const char *func;
            size_t count;
            const char *datatype;
            void *stream;
            bool graphCaptured;
        } p2pApi;
        struct {
            void *stream;
        } kernelLaunch;
        struct {
            uint64_t seqNumber;
            const char *func;
            const void *sendBuff;
            void *recvBuff;
            size_t count;
            int root;
            const char *datatype;
            uint8_t nChannels;
            uint8_t nWarps;
            const char *algo;
            const char *proto;
            void *parentGroup;
        } coll;
        struct {
            const char *func;
            void *buff;
            const char *datatype;
            size_t count;
            int peer;
            uint8_t nChannels;
            void *parentGroup;
        } p2p;
        struct {
            pid_t pid;
            uint8_t channelId;
            int peer;
            int nSteps;
            int chunkSize;
            int isSend;
        } proxyOp;
        struct {
            int step;
        } proxyStep;
        struct {
            uint8_t channelId;
            uint64_t pTimer;
        } kernelCh;
        struct {
            int64_t id;
            void *data;
        } netPlugin;
    };
} pp_nccl_descr_v5;

typedef union pp_nccl_state_args_v5 {
    struct {
        size_t transSize;
    } proxyStep;
    struct {
        int appendedProxyOps;
    } proxyCtrl;
    struct {
        void *data;
    } netPlugin;
    struct {
        uint64_t pTimer;
    } kernelCh;
} pp_nccl_state_args_v5;

typedef struct pp_nccl_profiler_v5 {
    const char *name;
    pp_nccl_result (*init)(void **ctx, uint64_t commId, int *eActivationMask,
                           const char *commName, int nNodes, int nranks, int rank,
                           pp_nccl_logger logfn);
    pp_nccl_result (*startEvent)(void *ctx, void **eHandle, pp_nccl_descr_v5 *eDescr);
    pp_nccl_result (*stopEvent)(void *eHandle);
    pp_nccl_result (*recordEventState)(void *eHandle, int eState, pp_nccl_state_args_v5 *args);
    pp_nccl_result (*finalize)(void *ctx);
} pp_nccl_profiler_v5;

_Static_assert(sizeof(pp_nccl_descr_v5) == 112, "NCCL v5 event descriptor layout");
_Static_assert(sizeof(pp_nccl_state_args_v5) == 8, "NCCL v5 state arguments layout");
_Static_assert(sizeof(pp_nccl_profiler_v5) == 48, "NCCL v5 function table layout");

#endif /* PP_NCCL_ABI_H */
