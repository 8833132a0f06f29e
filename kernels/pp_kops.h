/* pp_kops.h: the layer kernels as a table of operations, so that one layer implementation
 * (runtime/layers.c) runs on any device: pp_kops_cpu calls the CPU kernels of pp_kernels.h on
 * host memory; pp_cuda_kops_create (kernels/cuda/pp_cuda.h) gives the same operations as CUDA
 * kernels and cuBLAS GEMMs enqueued on one stream, on device memory.
 *
 * Every kernel has the semantics written in pp_kernels.h (shapes, accumulation into gradient
 * outputs). Device tables enqueue asynchronously: results are there once the table's stream has
 * reached them (operations of one table run in order). Memory operations work within the
 * table's memory space (host for cpu, device for cuda).
 *
 * Thread-safety: a table may be used from one thread at a time (a stage worker); pp_kops_cpu is
 * stateless and safe from any thread. */
#ifndef PP_KOPS_H
#define PP_KOPS_H

#include "pp_common.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_kops pp_kops;

struct pp_kops {
    const char *name;
    int on_device; /* 1: every pointer passed to the table is device memory */
    void *ctx;     /* the table's own state */

    /* memory, in the table's space: zeroed allocation (NULL when out of memory; a device table
     * zeroes it on its stream, so it reads as zero to everything enqueued on the table after
     * the call), copy, zero */
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *p);
    void (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
    void (*zero)(void *ctx, void *dst, size_t bytes);

    /* pp_kernels.h, in its order */
    void (*embed_forward)(void *ctx, float *out, const int32_t *tokens, const float *wte,
                          const float *wpe, int B, int T, int C);
    void (*embed_backward)(void *ctx, float *dwte, float *dwpe, const float *dout,
                           const int32_t *tokens, int B, int T, int C);
    void (*linear_forward)(void *ctx, float *out, const float *inp, const float *w,
                           const float *bias, int N, int IC, int OC);
    void (*linear_backward_input)(void *ctx, float *dinp, const float *dout, const float *w,
                                  int N, int IC, int OC);
    void (*linear_backward_weight)(void *ctx, float *dw, float *dbias, const float *dout,
                                   const float *inp, int N, int IC, int OC);
    void (*layernorm_forward)(void *ctx, float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, int N, int C);
    void (*layernorm_backward_input)(void *ctx, float *dinp, const float *dout, const float *inp,
                                     const float *w, const float *mean, const float *rstd, int N,
                                     int C);
    void (*layernorm_backward_weight)(void *ctx, float *dw, float *db, const float *dout,
                                      const float *inp, const float *mean, const float *rstd,
                                      int N, int C);
    void (*attention_forward)(void *ctx, float *out, float *att, const float *qkv, int B, int T,
                              int C, int NH);
    /* scratch: attention_scratch_floats(B, T, NH) floats */
    void (*attention_backward)(void *ctx, float *dqkv, float *scratch, const float *dout,
                               const float *qkv, const float *att, int B, int T, int C, int NH);
    size_t (*attention_scratch_floats)(int B, int T, int NH);
    void (*gelu_forward)(void *ctx, float *out, const float *inp, size_t n);
    void (*gelu_backward)(void *ctx, float *dinp, const float *dout, const float *inp, size_t n);
    void (*residual_forward)(void *ctx, float *out, const float *a, const float *b, size_t n);
    void (*xent_forward)(void *ctx, float *losses, float *probs, const float *logits,
                         const int32_t *targets, int N, int V);
    void (*xent_backward)(void *ctx, float *dlogits, const float *probs, const int32_t *targets,
                          float scale, int N, int V);
    /* *mean = the mean of losses[0..N), accumulated in double; mean is in the table's space */
    void (*loss_mean)(void *ctx, float *mean, const float *losses, int N);
    void (*adamw_update)(void *ctx, float *params, const float *grads, float *m, float *v,
                         size_t n, float lr, float beta1, float beta2, float eps,
                         float weight_decay, float grad_scale, int64_t t);
    /* Sum of squares in double, returned to the host: a device table waits for its stream. */
    double (*sumsq)(void *ctx, const float *x, size_t n);
    /* Optional (NULL: nothing runs behind the caller's back, as on the host). Waits for the
     * work enqueued so far and returns the first error the table saw since the last call
     * (clearing it), with a message naming the call and the device's error: the one place a
     * device table reports a fault of an asynchronous kernel or copy. */
    pp_status (*sync)(void *ctx);
};

/* GEMM precision of a device table (kernels/cuda/pp_cuda.h); the CPU kernels are float32. */
typedef enum pp_cuda_precision {
    PP_CUDA_FP32 = 0,
    PP_CUDA_TF32 = 1,
    PP_CUDA_BF16 = 2
} pp_cuda_precision;

/* "fp32", "tf32", "bf16" <-> the enum; -1 for an unknown name. */
const char *pp_cuda_precision_name(pp_cuda_precision p);
int pp_cuda_precision_parse(const char *s);

/* A GPU's peak dense FLOP/s for GEMMs in precision p, from what the device reports (name,
 * compute capability, SMs, the clock in kHz the driver gives): NVIDIA's datasheet figure for the
 * products it knows (source "datasheet"), else the architecture's dense rate per SM and clock x
 * SMs x that clock (source "clock": a boost clock, so an upper bound), else 0 (source
 * "unknown"). Pure (kernels/gpu_peak.c); pp_cuda_peak_flops asks the device. */
typedef struct pp_gpu_peak {
    double flops;
    const char *source; /* "datasheet", "clock" or "unknown" (static) */
} pp_gpu_peak;
pp_gpu_peak pp_gpu_peak_lookup(const char *name, int major, int minor, int sms, int clock_khz,
                               pp_cuda_precision p);

/* The CPU kernels on host memory. */
extern const pp_kops pp_kops_cpu;

#ifdef __cplusplus
}
#endif
#endif /* PP_KOPS_H */
