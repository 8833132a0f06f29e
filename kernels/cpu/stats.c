/* stats.c: the single CBLAS GEMM entry point of the CPU kernels and its optional accounting
 * (time, FLOPs, calls), read by the benchmarks through pp_kernels_stats_get(). */
#include <stdatomic.h>
#include <time.h>

#include "pp_kernels.h"
#include "pp_kernels_internal.h"

/* Relaxed atomics throughout: the counters are independent sums read after the work is done, so
 * no ordering with other memory is needed, and a disabled check costs one plain load. */
static atomic_int g_enabled;
static _Atomic uint64_t g_gemm_ns;
static _Atomic uint64_t g_gemm_flops;
static _Atomic uint64_t g_gemm_calls;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void pp_kernels_gemm(enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K,
                     float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                     float *Cm, int ldc)
{
    if (!atomic_load_explicit(&g_enabled, memory_order_relaxed)) {
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, Cm, ldc);
        return;
    }
    uint64_t t0 = now_ns();
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, Cm, ldc);
    uint64_t t1 = now_ns();
    atomic_fetch_add_explicit(&g_gemm_ns, t1 - t0, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_gemm_flops, 2u * (uint64_t)M * (uint64_t)N * (uint64_t)K,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&g_gemm_calls, 1u, memory_order_relaxed);
}

void pp_kernels_stats_enable(int on)
{
    atomic_store_explicit(&g_enabled, on != 0, memory_order_relaxed);
}

void pp_kernels_stats_reset(void)
{
    atomic_store_explicit(&g_gemm_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&g_gemm_flops, 0, memory_order_relaxed);
    atomic_store_explicit(&g_gemm_calls, 0, memory_order_relaxed);
}

pp_kernel_stats pp_kernels_stats_get(void)
{
    pp_kernel_stats s;
    s.gemm_ns = atomic_load_explicit(&g_gemm_ns, memory_order_relaxed);
    s.gemm_flops = atomic_load_explicit(&g_gemm_flops, memory_order_relaxed);
    s.gemm_calls = atomic_load_explicit(&g_gemm_calls, memory_order_relaxed);
    return s;
}

/* OpenBLAS-specific: with one pipeline stage per thread, BLAS threads of their own only fight
 * the other stages for the same cores. */
void pp_kernels_set_blas_threads(int n) { openblas_set_num_threads(n < 1 ? 1 : n); }
int pp_kernels_blas_threads(void) { return openblas_get_num_threads(); }
