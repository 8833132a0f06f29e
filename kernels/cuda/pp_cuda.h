/* pp_cuda.h: the CUDA side of the kernels, for C callers (no CUDA headers needed): device
 * discovery, kernel tables (pp_kops.h) bound to one device and one stream, events, and the few
 * host <-> device operations the CUDA stage backend and transports need.
 *
 * Built only when CMake finds a CUDA compiler (PP_HAVE_CUDA); every function reports CUDA and
 * cuBLAS errors as pp_status with the failing call named. Without a device or driver,
 * pp_cuda_device_count returns 0 and says why in *why.
 *
 * Precision (docs/kernels.md): fp32 GEMMs in float32; tf32 lets cuBLAS use TF32 tensor cores
 * (10-bit mantissa inputs, float32 accumulation); bf16 rounds both GEMM operands to bfloat16
 * (8-bit mantissa) and accumulates in float32, with float32 master weights, activations and
 * every non-GEMM kernel, as mixed-precision training does.
 *
 * Thread-safety: a table is used by one thread at a time; distinct tables (one per stage) may
 * be used concurrently. */
#ifndef PP_CUDA_H
#define PP_CUDA_H

#include "pp_common.h"
#include "pp_kops.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* pp_cuda_precision and its names: pp_kops.h (built without CUDA too, for the flags). */

/* Usable devices (0 with a reason in why[n] when there is no driver or no device). */
int pp_cuda_device_count(char *why, size_t n);
/* "NVIDIA H200, sm_90, 139 GiB" */
pp_status pp_cuda_device_describe(int device, char *out, size_t n);
/* Peak dense throughput of the device in FLOP/s for a precision (for MFU): pp_gpu_peak_lookup
 * (pp_kops.h) on what the device reports; *source (may be NULL) says where it came from
 * ("datasheet", "clock", "unknown"); 0 when unknown. */
double pp_cuda_peak_flops(int device, pp_cuda_precision p, const char **source);

/* A kernel table on `device` with its own stream (non-blocking) and cuBLAS handle. */
pp_status pp_cuda_kops_create(int device, pp_cuda_precision prec, pp_kops **out);
void pp_cuda_kops_destroy(pp_kops *k);
/* The table's stream as cudaStream_t. */
void *pp_cuda_kops_stream(const pp_kops *k);
int pp_cuda_kops_device(const pp_kops *k);
/* Waits for the table's stream; returns the first error of its work. */
pp_status pp_cuda_kops_sync(pp_kops *k);
/* The first CUDA error the table saw since the last call (PP_OK when none), and clears it. */
pp_status pp_cuda_kops_error(pp_kops *k);

/* Asynchronous copies on the table's stream. Host memory should be pinned (pp_cuda_host_alloc)
 * for the copy to overlap; it must stay valid until the stream reaches the copy. */
void pp_cuda_h2d(pp_kops *k, void *dst, const void *src, size_t bytes);
void pp_cuda_d2h(pp_kops *k, void *dst, const void *src, size_t bytes);
/* dst (device float) += scale * src (device float), one element, on the stream. */
void pp_cuda_accumulate(pp_kops *k, float *dst, const float *src, float scale);
/* Device memory of `device` (zeroed before it returns), NULL when out of memory; free it with
 * pp_cuda_dev_free. */
void *pp_cuda_dev_alloc(int device, size_t bytes);
void pp_cuda_dev_free(void *p);
/* Pinned host memory (zeroed), NULL when out of memory. */
void *pp_cuda_host_alloc(size_t bytes);
void pp_cuda_host_free(void *p);

/* Events: ordering between the streams of different tables, without the host waiting. */
typedef struct pp_cuda_event pp_cuda_event;
pp_status pp_cuda_event_create(int device, pp_cuda_event **out);
void pp_cuda_event_destroy(pp_cuda_event *e);
/* Records e on k's stream; makes k's stream wait for the last record of e. */
void pp_cuda_event_record(pp_cuda_event *e, pp_kops *k);
void pp_cuda_stream_wait(pp_kops *k, pp_cuda_event *e);
/* Milliseconds between two completed records (cudaEventElapsedTime), after waiting for b. */
pp_status pp_cuda_event_elapsed_ms(pp_cuda_event *a, pp_cuda_event *b, float *ms);

#ifdef __cplusplus
}
#endif
#endif /* PP_CUDA_H */
