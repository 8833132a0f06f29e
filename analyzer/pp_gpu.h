/* pp_gpu.h: GPU time for the pipeline (pprof-run --cuda / --nccl; docs/metrics.md "GPU time").
 * The analyzer feeds it, per trace file, the pipeline ranges it found (thread, step, stage, kind,
 * times), the CUDA API calls (correlation id, calling thread, start) and the GPU activity
 * (kernels, copies, memsets with their correlation ids), and NCCL's operations. It projects
 * every GPU record onto the pipeline range that launched it: the range open on the launching
 * thread when the API call began (the innermost one: pipeline op ranges do not nest). Work
 * launched by a thread with no range open then (PyTorch's autograd thread runs every backward
 * while the stage's thread waits in its backward range) is adopted by the range open on another
 * thread of the same process, where that is unambiguous: of the stage the record's stream was
 * seen working for, or the one stage with a range open.
 * From that come per-stage forward/backward times, busy time and bubble in GPU time, device
 * utilisation, and per-link NCCL bandwidth.
 *
 * Streaming: created with the analyzed steps (the analyzer's GPU pass follows its host pass),
 * it reduces each record as it is joined. Ranges and API calls are kept only for a window: the
 * latest `window` pipeline ranges of each trace file (PP_GPU_WINDOW_RANGES by default, about 56
 * bytes each, at most twice that between joins) and twice as many API calls; GPU records wait
 * for their API call and range at most `window` records. Work launched from a range that has
 * left the window is counted as `late`. Memory is bounded by the window and the analyzed steps
 * (8 bytes per step and stage), not by the trace's length. Not thread-safe: one analysis, one
 * user. */
#ifndef PP_GPU_H
#define PP_GPU_H

#include "pp_common.h"
#include "pp_convention.h"
#include "pp_trace.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_gpu_proj pp_gpu_proj;

/* Pipeline ranges of one trace file that GPU records can still be projected onto. CUPTI hands
 * the records over in 8 MB buffers (about 30 000 launches): a window of 16384 ranges covers one
 * buffer's launches when each range launches two kernels or more. */
enum { PP_GPU_WINDOW_RANGES = 16384 };

/* The kinds of pipeline range GPU work is projected onto. */
typedef enum pp_gpu_op {
    PP_GOP_FWD = 0,
    PP_GOP_BWD = 1,   /* BWD, BWD_INPUT and BWD_WEIGHT together */
    PP_GOP_OPT = 2,
    PP_GOP_COMM = 3,  /* sends, receives, all-reduce */
    PP_GOP_COUNT = 4
} pp_gpu_op;

/* The class of a pipeline range of the convention's kind (pp_nvtx_kind); PP_GOP_COUNT for the
 * kinds GPU work is not projected onto (steps, layer ranges). */
static inline pp_gpu_op pp_gpu_op_of(int kind)
{
    switch (kind) {
    case PP_NVTX_FWD: return PP_GOP_FWD;
    case PP_NVTX_BWD: case PP_NVTX_BWD_INPUT: case PP_NVTX_BWD_WEIGHT: return PP_GOP_BWD;
    case PP_NVTX_OPT_STEP: return PP_GOP_OPT;
    case PP_NVTX_SEND_ACT: case PP_NVTX_RECV_ACT: case PP_NVTX_SEND_GRAD: case PP_NVTX_RECV_GRAD:
    case PP_NVTX_ALLREDUCE: return PP_GOP_COMM;
    default: return PP_GOP_COUNT;
    }
}

typedef struct pp_gpu_stage {
    /* GPU time (sum of the kernels, copies and memsets projected onto the range) per range */
    double fwd_median_ns, bwd_median_ns;
    uint64_t fwd_ranges, bwd_ranges;
    /* means over the analyzed steps */
    double busy_ns;             /* all of the stage's projected GPU work in a step */
    double kind_ns[PP_GOP_COUNT];
    double bubble_ratio;        /* 1 - busy / the step's GPU span */
    double launch_lag_ns;       /* median: range start (host) -> its first GPU work */
} pp_gpu_stage;

typedef struct pp_gpu_device {
    uint32_t device;
    uint64_t records;
    double busy_ns;      /* union of its GPU intervals over the analyzed steps' span */
    double span_ns;      /* first start to last end of that work */
    double utilisation;  /* busy / span */
} pp_gpu_device;

typedef struct pp_gpu_link {
    int src, dst;               /* communicator ranks (the stages of a pipeline communicator) */
    uint64_t messages, bytes, timed;
    double algbw_GBps;          /* median over timed sends of bytes / GPU time */
    double busbw_GBps;          /* nccl-tests' bus bandwidth: equal to algbw for send/recv */
} pp_gpu_link;

/* GPU work of the kept steps, for the pictures: a projected GPU record, or an NCCL operation's
 * GPU span. */
typedef struct pp_gpu_span {
    int32_t file;          /* trace file index */
    uint32_t device, stream;
    int32_t stage, kind;   /* pp_gpu_op; -1 for NCCL */
    int64_t step;
    uint64_t start, end;
    int nccl;              /* 1: an NCCL operation (func in kind: pp_nccl_func) */
    int32_t rank;          /* NCCL: this process's communicator rank */
    int32_t peer;
    uint64_t bytes;
} pp_gpu_span;

typedef struct pp_gpu_result {
    int present;                /* any GPU or NCCL record at all */
    int replayed;               /* how the analyzer's GPU pass got its input: 1 replayed from
                                   what the host pass recorded, 0 by reading the traces again
                                   (analyzer/gpu_rec.c; the same result either way) */
    uint64_t records, api_calls, projected, unattributed, outside_steps;
    /* of projected: launched by a thread with no pipeline range open, adopted by a range of the
     * same process (pp_gpu.h's header); of unattributed: left so because ranges of two stages
     * were open at the launch */
    uint64_t adopted, ambiguous;
    uint64_t late;              /* launched from a range that had left the window */
    double step_ns;             /* mean GPU span of an analyzed step (first to last GPU work) */
    double projected_ns;        /* mean per step of all stages' projected GPU time */
    double work_ns;             /* mean per step of all GPU work starting inside the analyzed
                                   steps (projected or not): what projected_ns should cover */
    double device_busy_ns;      /* mean per step of the devices' union busy time */
    int S;
    pp_gpu_stage *stages;       /* [S] */
    size_t n_devices;
    pp_gpu_device *devices;
    size_t n_links;
    pp_gpu_link *links;
    uint64_t nccl_ops;
    size_t n_spans;
    pp_gpu_span *spans;     /* of the kept steps (pp_gpu_proj_keep), by start time */
} pp_gpu_result;

/* Over the analyzed steps (sorted; n of them, with their host time windows [win0, win1] on the
 * common clock, copied) of a pipeline of S stages; window: ranges per file, 0 = the default. */
pp_status pp_gpu_proj_create(pp_gpu_proj **out, const int64_t *steps, const uint64_t *win0,
                             const uint64_t *win1, size_t n, int S, size_t window);
void pp_gpu_proj_destroy(pp_gpu_proj *p);
/* A pipeline range of trace file `file` on OS thread `tid`. */
void pp_gpu_proj_range(pp_gpu_proj *p, int file, uint32_t tid, int64_t step, int stage,
                       pp_gpu_op kind, uint64_t t0, uint64_t t1);
/* The records of the GPU capture (times already on the analysis' common clock). */
void pp_gpu_proj_api(pp_gpu_proj *p, int file, const pp_rec_api *a);
void pp_gpu_proj_gpu(pp_gpu_proj *p, int file, const pp_rec_gpu *g);
void pp_gpu_proj_nccl(pp_gpu_proj *p, int file, const pp_rec_nccl *n);
/* Joins what is still pending and computes the metrics. out is owned by the caller
 * (pp_gpu_result_free). Fails only when out of memory. */
pp_status pp_gpu_proj_finish(pp_gpu_proj *p, pp_gpu_result *out);
void pp_gpu_result_free(pp_gpu_result *r);
/* NCCL numbers a record's rank and peer within its communicator, and point-to-point messages
 * often go over 2-rank communicators (pptrain's NCCL transport has one per link and direction,
 * PyTorch one per pair of ranks) whose ranks are 0 and 1 whatever the stages. Given, before the
 * first NCCL record, the stage of each trace file's pipeline ranges (stage_of_file[f]: -1 none,
 * -2 several) and which file holds each (communicator, rank) (from the analyzer's host pass),
 * a record's rank becomes its process's stage and its peer the stage of the process holding the
 * communicator at the peer's rank. A record whose process, or whose peer's process, has no
 * single stage keeps the communicator's numbers (a pipeline-wide communicator, where they are
 * the stages, or a one-process job). The arrays are copied. */
typedef struct pp_gpu_nccl_member {
    uint64_t comm;
    int32_t rank, file;
} pp_gpu_nccl_member;
pp_status pp_gpu_proj_nccl_stages(pp_gpu_proj *p, const int32_t *stage_of_file, size_t n_files,
                                  const pp_gpu_nccl_member *members, size_t n_members);
/* Before the first record: keep the GPU work of steps [lo, hi], whose host time is [t0, t1]
 * (NCCL operations are kept by time), for pictures. Default: none. */
void pp_gpu_proj_keep(pp_gpu_proj *p, int64_t lo, int64_t hi, uint64_t t0, uint64_t t1);

#ifdef __cplusplus
}
#endif
#endif /* PP_GPU_H */
