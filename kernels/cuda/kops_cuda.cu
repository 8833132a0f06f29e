// kops_cuda.cu: the layer kernels on a GPU: CUDA kernels for everything but the GEMMs, cuBLAS
// (cublasGemmStridedBatchedEx) for those, all enqueued on one stream per table, behind the
// pp_kops interface that runtime/layers.c drives. Arithmetic per element and per row comes
// from pp_kmath.h, shared with the host-side tests; layouts and semantics are pp_kernels.h's.
#include "pp_cuda.h"
#include "pp_kmath.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

struct cuda_ctx {
    int device;
    pp_cuda_precision prec;
    cudaStream_t stream;
    cublasHandle_t blas;
    cudaError_t err;      // first CUDA error since the last check
    cublasStatus_t berr;  // first cuBLAS error
    char where[96];       // the call that failed first
    bool bf16_fast;       // cuBLAS converts inside the GEMM; PP_CUDA_BF16=convert: our kernels do
    __nv_bfloat16 *ws[2]; // bf16 copies of GEMM operands (grown on demand)
    size_t ws_n[2];
    double *red;          // one double for reductions
};

void note(cuda_ctx *c, cudaError_t e, const char *what)
{
    if (e != cudaSuccess && c->err == cudaSuccess && c->berr == CUBLAS_STATUS_SUCCESS) {
        c->err = e;
        snprintf(c->where, sizeof c->where, "%s", what);
    }
}

void note_blas(cuda_ctx *c, cublasStatus_t s, const char *what)
{
    if (s != CUBLAS_STATUS_SUCCESS && c->err == cudaSuccess && c->berr == CUBLAS_STATUS_SUCCESS) {
        c->berr = s;
        snprintf(c->where, sizeof c->where, "%s", what);
    }
}

#define LAUNCHED(c, what) note((c), cudaGetLastError(), (what))

constexpr int kThreads = 256;

unsigned blocks_for(size_t n, int threads = kThreads)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 65535u * 32u ? (b ? b : 1) : 65535u * 32u);
}

template <typename T> __device__ T warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    return __shfl_sync(0xffffffffu, v, 0);
}

__device__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    return __shfl_sync(0xffffffffu, v, 0);
}

// ---- elementwise --------------------------------------------------------------------------

__global__ void k_embed_forward(float *out, const int32_t *tok, const float *wte, const float *wpe,
                                int T, int C, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t row = i / C;
        int c = (int)(i % C);
        int t = (int)(row % T);
        out[i] = wte[(size_t)tok[row] * C + c] + wpe[(size_t)t * C + c];
    }
}

// rows of dwte can repeat (a token occurs many times): atomics
__global__ void k_embed_backward_wte(float *dwte, const float *dout, const int32_t *tok, int C,
                                     size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t row = i / C;
        atomicAdd(&dwte[(size_t)tok[row] * C + (i % C)], dout[i]);
    }
}

// one thread per (t, c), summing the batch in order: deterministic
__global__ void k_embed_backward_wpe(float *dwpe, const float *dout, int B, int T, int C)
{
    size_t n = (size_t)T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int b = 0; b < B; b++)
            s += dout[(size_t)b * n + i];
        dwpe[i] += s;
    }
}

__global__ void k_bias_rows(float *out, const float *bias, int OC, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = bias[i % OC];
}

// column sums of dout [N, OC] into dbias; blockIdx.y takes a slice of the rows (atomics join
// the slices)
__global__ void k_bias_grad(float *dbias, const float *dout, int N, int OC, int rows_per)
{
    int oc = blockIdx.x * blockDim.x + threadIdx.x;
    if (oc >= OC)
        return;
    int r0 = blockIdx.y * rows_per, r1 = min(N, r0 + rows_per);
    float s = 0.0f;
    for (int r = r0; r < r1; r++)
        s += dout[(size_t)r * OC + oc];
    atomicAdd(&dbias[oc], s);
}

__global__ void k_gelu_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = pp_km_gelu(inp[i]);
}

__global__ void k_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dinp[i] += pp_km_gelu_grad(inp[i]) * dout[i];
}

__global__ void k_residual(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = a[i] + b[i];
}

__global__ void k_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr,
                        float b1, float b2, float eps, float wd, float gs, float c1, float c2)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        pp_km_adamw(&p[i], g[i], &m[i], &v[i], lr, b1, b2, eps, wd, gs, c1, c2);
}

__global__ void k_to_bf16(__nv_bfloat16 *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16(src[i]);
}

__global__ void k_accumulate(float *dst, const float *src, float scale) { *dst += scale * *src; }

// ---- reductions ---------------------------------------------------------------------------

// Each warp reduces with `warp`, then warp 0 reduces the warps' results (lanes past the last
// warp count as `none`). The result is valid in warp 0; the closing barrier lets the caller
// reuse the block's shared memory at once.
template <typename T, typename WarpOp> __device__ T block_reduce(T v, T none, WarpOp warp)
{
    __shared__ T part[32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    v = warp(v);
    if (lane == 0)
        part[w] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    v = threadIdx.x < nw ? part[threadIdx.x] : none;
    if (w == 0)
        v = warp(v);
    __syncthreads();
    return v;
}

struct WarpSum {
    __device__ double operator()(double v) const { return warp_sum(v); }
};
struct WarpMax {
    __device__ float operator()(float v) const { return warp_max(v); }
};

__device__ double block_sum_double(double v)
{
    return block_reduce(v, 0.0, WarpSum()); // valid in warp 0
}

// The maximum, in every thread.
__device__ float block_max(float v)
{
    v = block_reduce(v, -INFINITY, WarpMax());
    __shared__ float out;
    if (threadIdx.x == 0)
        out = v;
    __syncthreads();
    return out;
}

__global__ void k_sumsq(double *out, const float *x, size_t n)
{
    double s = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        s += (double)x[i] * (double)x[i];
    s = block_sum_double(s);
    if (threadIdx.x == 0)
        atomicAdd(out, s);
}

__global__ void k_loss_mean(float *mean, const float *losses, int N)
{
    double s = 0.0;
    for (int i = threadIdx.x; i < N; i += blockDim.x)
        s += losses[i];
    s = block_sum_double(s);
    if (threadIdx.x == 0)
        *mean = (float)(s / N);
}

// ---- layernorm: one warp per row ----------------------------------------------------------

__global__ void k_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                    const float *w, const float *b, int N, int C)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (row >= N)
        return;
    const float *x = inp + (size_t)row * C;
    double s = 0.0;
    for (int c = lane; c < C; c += 32)
        s += x[c];
    double m = pp_km_ln_mean(warp_sum(s), C);
    double sq = 0.0;
    for (int c = lane; c < C; c += 32) {
        double d = x[c] - m;
        sq += d * d;
    }
    float r = pp_km_ln_rstd(warp_sum(sq), C);
    float mf = (float)m;
    float *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32)
        o[c] = (x[c] - mf) * r * w[c] + b[c];
    if (lane == 0) {
        mean[row] = mf;
        rstd[row] = r;
    }
}

__global__ void k_layernorm_backward_input(float *dinp, const float *dout, const float *inp,
                                           const float *w, const float *mean, const float *rstd,
                                           int N, int C)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (row >= N)
        return;
    const float *x = inp + (size_t)row * C, *d = dout + (size_t)row * C;
    float *dx = dinp + (size_t)row * C;
    float mu = mean[row], s = rstd[row];
    float gm = 0.0f, gxm = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float g = d[c] * w[c];
        gm += g;
        gxm += g * (x[c] - mu) * s;
    }
    gm = warp_sum(gm) / (float)C;
    gxm = warp_sum(gxm) / (float)C;
    for (int c = lane; c < C; c += 32)
        dx[c] += pp_km_ln_dx(d[c], w[c], x[c], mu, s, gm, gxm);
}

// a thread per channel, blockIdx.y a slice of the rows
__global__ void k_layernorm_backward_weight(float *dw, float *db, const float *dout,
                                            const float *inp, const float *mean,
                                            const float *rstd, int N, int C, int rows_per)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    int r0 = blockIdx.y * rows_per, r1 = min(N, r0 + rows_per);
    float sw = 0.0f, sb = 0.0f;
    for (int r = r0; r < r1; r++) {
        float d = dout[(size_t)r * C + c];
        sw += d * (inp[(size_t)r * C + c] - mean[r]) * rstd[r];
        sb += d;
    }
    atomicAdd(&dw[c], sw);
    atomicAdd(&db[c], sb);
}

// ---- attention rows: one warp per (batch, head, query row) --------------------------------

__global__ void k_causal_softmax(float *att, int rows, int T)
{
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    int i = r % T;
    float *row = att + (size_t)r * T;
    float mx = -INFINITY;
    for (int j = lane; j <= i; j += 32)
        mx = fmaxf(mx, row[j]);
    mx = warp_max(mx);
    float s = 0.0f;
    for (int j = lane; j <= i; j += 32) {
        float e = expf(row[j] - mx);
        row[j] = e;
        s += e;
    }
    float inv = 1.0f / warp_sum(s);
    for (int j = lane; j < T; j += 32)
        row[j] = j <= i ? row[j] * inv : 0.0f;
}

__global__ void k_softmax_backward(float *datt, const float *att, int rows, int T, float scale)
{
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    int i = r % T;
    float *d = datt + (size_t)r * T;
    const float *a = att + (size_t)r * T;
    float dot = 0.0f;
    for (int j = lane; j <= i; j += 32)
        dot += a[j] * d[j];
    dot = warp_sum(dot);
    for (int j = lane; j < T; j += 32)
        d[j] = j <= i ? a[j] * (d[j] - dot) * scale : 0.0f;
}

// ---- cross-entropy: one block per row ------------------------------------------------------

__global__ void k_xent_forward(float *losses, float *probs, const float *logits,
                               const int32_t *targets, int V)
{
    int n = blockIdx.x;
    const float *l = logits + (size_t)n * V;
    float *p = probs + (size_t)n * V;
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        mx = fmaxf(mx, l[i]);
    mx = block_max(mx);
    double s = 0.0;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float e = expf(l[i] - mx);
        p[i] = e;
        s += e;
    }
    __shared__ double total;
    s = block_sum_double(s);
    if (threadIdx.x == 0)
        total = s;
    __syncthreads();
    float inv = (float)(1.0 / total);
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        p[i] *= inv;
    if (threadIdx.x == 0)
        losses[n] = pp_km_xent_loss(total, l[targets[n]], mx);
}

__global__ void k_xent_backward(float *dlogits, const float *probs, const int32_t *targets,
                                float scale, int V, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t row = i / V;
        int v = (int)(i % V);
        dlogits[i] += scale * (probs[i] - (v == targets[row] ? 1.0f : 0.0f));
    }
}

// ---- GEMM (column-major, cuBLAS's convention) ----------------------------------------------

// The elements a strided batch of (rows x cols) matrices with leading dimension ld spans.
size_t extent(int rows, int cols, int ld, long long stride, int batch)
{
    return (size_t)(batch - 1) * (size_t)stride + (size_t)(cols - 1) * (size_t)ld + (size_t)rows;
}

const __nv_bfloat16 *as_bf16(cuda_ctx *c, int slot, const float *src, size_t n)
{
    if (c->ws_n[slot] < n) {
        if (c->ws[slot])
            note(c, cudaFreeAsync(c->ws[slot], c->stream), "cudaFreeAsync");
        size_t want = n + n / 4;
        void *p = NULL;
        note(c, cudaMallocAsync(&p, want * sizeof(__nv_bfloat16), c->stream), "cudaMallocAsync");
        c->ws[slot] = (__nv_bfloat16 *)p;
        c->ws_n[slot] = p ? want : 0;
        if (!p)
            return NULL;
    }
    k_to_bf16<<<blocks_for(n), kThreads, 0, c->stream>>>(c->ws[slot], src, n);
    LAUNCHED(c, "bf16 conversion");
    return c->ws[slot];
}

// C (m x n) = alpha op(A) op(B) + beta C, batched with strides; column-major.
void gemm(cuda_ctx *c, bool ta, bool tb, int m, int n, int k, float alpha, const float *A,
          int lda, long long sA, const float *B, int ldb, long long sB, float beta, float *C,
          int ldc, long long sC, int batch)
{
    cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (m <= 0 || n <= 0 || k <= 0 || batch <= 0)
        return;
    if (c->prec == PP_CUDA_BF16 && c->bf16_fast) {
        // fp32 operands, converted to bf16 by cuBLAS inside the GEMM: no conversion kernels
        note_blas(c,
                  cublasGemmStridedBatchedEx(c->blas, oa, ob, m, n, k, &alpha, A, CUDA_R_32F, lda,
                                             sA, B, CUDA_R_32F, ldb, sB, &beta, C, CUDA_R_32F,
                                             ldc, sC, batch, CUBLAS_COMPUTE_32F_FAST_16BF,
                                             CUBLAS_GEMM_DEFAULT),
                  "cublasGemmStridedBatchedEx (fast bf16)");
        return;
    }
    if (c->prec == PP_CUDA_BF16) {
        size_t na = ta ? extent(k, m, lda, sA, batch) : extent(m, k, lda, sA, batch);
        size_t nb = tb ? extent(n, k, ldb, sB, batch) : extent(k, n, ldb, sB, batch);
        const __nv_bfloat16 *a16 = as_bf16(c, 0, A, na), *b16 = as_bf16(c, 1, B, nb);
        if (!a16 || !b16)
            return;
        note_blas(c,
                  cublasGemmStridedBatchedEx(c->blas, oa, ob, m, n, k, &alpha, a16, CUDA_R_16BF,
                                             lda, sA, b16, CUDA_R_16BF, ldb, sB, &beta, C,
                                             CUDA_R_32F, ldc, sC, batch, CUBLAS_COMPUTE_32F,
                                             CUBLAS_GEMM_DEFAULT),
                  "cublasGemmStridedBatchedEx (bf16)");
        return;
    }
    cublasComputeType_t ct =
        c->prec == PP_CUDA_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    note_blas(c,
              cublasGemmStridedBatchedEx(c->blas, oa, ob, m, n, k, &alpha, A, CUDA_R_32F, lda, sA,
                                         B, CUDA_R_32F, ldb, sB, &beta, C, CUDA_R_32F, ldc, sC,
                                         batch, ct, CUBLAS_GEMM_DEFAULT),
              "cublasGemmStridedBatchedEx");
}

// ---- the table's operations -----------------------------------------------------------------

// Every operation goes through here: the calling thread (a stage worker) is bound to the
// table's device once, as CUDA's current device is per thread.
thread_local int t_device = -1;

cuda_ctx *C_(void *ctx)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (t_device != c->device) {
        note(c, cudaSetDevice(c->device), "cudaSetDevice");
        t_device = c->device;
    }
    return c;
}

// Zeroed on the table's own stream: the table's stream is non-blocking, so a cudaMemset (the
// legacy stream) would not be ordered before the uploads and kernels enqueued on it next (the
// parameters uploaded, the AdamW moments updated, could then be zeroed after). Other streams
// that touch the memory (the transports') wait for this stream before they do.
void *d_alloc(void *ctx, size_t bytes)
{
    cuda_ctx *c = C_(ctx);
    void *p = NULL;
    size_t n = bytes ? bytes : 1;
    cudaSetDevice(c->device);
    if (cudaMalloc(&p, n) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    if (cudaMemsetAsync(p, 0, n, c->stream) != cudaSuccess) {
        cudaGetLastError();
        cudaFree(p);
        return NULL;
    }
    return p;
}

void d_free(void *ctx, void *p)
{
    cudaSetDevice(C_(ctx)->device);
    cudaFree(p);
}

void d_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    cuda_ctx *c = C_(ctx);
    if (bytes)
        note(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream),
             "cudaMemcpyAsync");
}

void d_zero(void *ctx, void *dst, size_t bytes)
{
    cuda_ctx *c = C_(ctx);
    if (bytes)
        note(c, cudaMemsetAsync(dst, 0, bytes, c->stream), "cudaMemsetAsync");
}

void d_embed_forward(void *ctx, float *out, const int32_t *tokens, const float *wte,
                     const float *wpe, int B, int T, int C)
{
    cuda_ctx *c = C_(ctx);
    size_t n = (size_t)B * T * C;
    k_embed_forward<<<blocks_for(n), kThreads, 0, c->stream>>>(out, tokens, wte, wpe, T, C, n);
    LAUNCHED(c, "embedding forward");
}

void d_embed_backward(void *ctx, float *dwte, float *dwpe, const float *dout,
                      const int32_t *tokens, int B, int T, int C)
{
    cuda_ctx *c = C_(ctx);
    size_t n = (size_t)B * T * C;
    k_embed_backward_wte<<<blocks_for(n), kThreads, 0, c->stream>>>(dwte, dout, tokens, C, n);
    k_embed_backward_wpe<<<blocks_for((size_t)T * C), kThreads, 0, c->stream>>>(dwpe, dout, B,
                                                                                T, C);
    LAUNCHED(c, "embedding backward");
}

// The GEMM plans of pp_kmath.h, run through cuBLAS.
void plan_gemm(void *u, int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
               long long sA, const float *B, int ldb, long long sB, float beta, float *C, int ldc,
               long long sC, int batch)
{
    gemm((cuda_ctx *)u, ta != 0, tb != 0, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc,
         sC, batch);
}

void d_linear_forward(void *ctx, float *out, const float *inp, const float *w, const float *bias,
                      int N, int IC, int OC)
{
    cuda_ctx *c = C_(ctx);
    float beta = 0.0f;
    if (bias) {
        size_t n = (size_t)N * OC;
        k_bias_rows<<<blocks_for(n), kThreads, 0, c->stream>>>(out, bias, OC, n);
        LAUNCHED(c, "bias");
        beta = 1.0f;
    }
    pp_km_plan_linear_forward(plan_gemm, c, out, inp, w, N, IC, OC, beta);
}

void d_linear_backward_input(void *ctx, float *dinp, const float *dout, const float *w, int N,
                             int IC, int OC)
{
    pp_km_plan_linear_backward_input(plan_gemm, ctx, dinp, dout, w, N, IC, OC);
}

void d_linear_backward_weight(void *ctx, float *dw, float *dbias, const float *dout,
                              const float *inp, int N, int IC, int OC)
{
    cuda_ctx *c = C_(ctx);
    pp_km_plan_linear_backward_weight(plan_gemm, c, dw, dout, inp, N, IC, OC);
    if (dbias) {
        int rows_per = 256;
        dim3 grid((OC + kThreads - 1) / kThreads, (N + rows_per - 1) / rows_per);
        k_bias_grad<<<grid, kThreads, 0, c->stream>>>(dbias, dout, N, OC, rows_per);
        LAUNCHED(c, "bias gradient");
    }
}

unsigned warp_rows_blocks(int rows) { return (unsigned)((rows + kThreads / 32 - 1) / (kThreads / 32)); }

void d_layernorm_forward(void *ctx, float *out, float *mean, float *rstd, const float *inp,
                         const float *w, const float *b, int N, int C)
{
    cuda_ctx *c = C_(ctx);
    k_layernorm_forward<<<warp_rows_blocks(N), kThreads, 0, c->stream>>>(out, mean, rstd, inp, w,
                                                                         b, N, C);
    LAUNCHED(c, "layernorm forward");
}

void d_layernorm_backward_input(void *ctx, float *dinp, const float *dout, const float *inp,
                                const float *w, const float *mean, const float *rstd, int N,
                                int C)
{
    cuda_ctx *c = C_(ctx);
    k_layernorm_backward_input<<<warp_rows_blocks(N), kThreads, 0, c->stream>>>(
        dinp, dout, inp, w, mean, rstd, N, C);
    LAUNCHED(c, "layernorm backward (input)");
}

void d_layernorm_backward_weight(void *ctx, float *dw, float *db, const float *dout,
                                 const float *inp, const float *mean, const float *rstd, int N,
                                 int C)
{
    cuda_ctx *c = C_(ctx);
    int rows_per = 256;
    dim3 grid((C + kThreads - 1) / kThreads, (N + rows_per - 1) / rows_per);
    k_layernorm_backward_weight<<<grid, kThreads, 0, c->stream>>>(dw, db, dout, inp, mean, rstd,
                                                                  N, C, rows_per);
    LAUNCHED(c, "layernorm backward (weight)");
}

void d_attention_forward(void *ctx, float *out, float *att, const float *qkv, int B, int T, int C,
                         int NH)
{
    cuda_ctx *c = C_(ctx);
    pp_km_plan_attention_scores(plan_gemm, c, att, qkv, B, T, C, NH);
    int rows = B * NH * T;
    k_causal_softmax<<<warp_rows_blocks(rows), kThreads, 0, c->stream>>>(att, rows, T);
    LAUNCHED(c, "causal softmax");
    pp_km_plan_attention_values(plan_gemm, c, out, att, qkv, B, T, C, NH);
}

size_t d_attention_scratch(int B, int T, int NH) { return (size_t)B * NH * T * T; }

void d_attention_backward(void *ctx, float *dqkv, float *scratch, const float *dout,
                          const float *qkv, const float *att, int B, int T, int C, int NH)
{
    cuda_ctx *c = C_(ctx);
    float scale = 1.0f / sqrtf((float)(C / NH));
    pp_km_plan_attention_backward_values(plan_gemm, c, scratch, dqkv, dout, qkv, att, B, T, C,
                                         NH);
    int rows = B * NH * T;
    k_softmax_backward<<<warp_rows_blocks(rows), kThreads, 0, c->stream>>>(scratch, att, rows, T,
                                                                           scale);
    LAUNCHED(c, "softmax backward");
    pp_km_plan_attention_backward_qk(plan_gemm, c, dqkv, scratch, qkv, B, T, C, NH);
}

void d_gelu_forward(void *ctx, float *out, const float *inp, size_t n)
{
    cuda_ctx *c = C_(ctx);
    k_gelu_forward<<<blocks_for(n), kThreads, 0, c->stream>>>(out, inp, n);
    LAUNCHED(c, "gelu forward");
}

void d_gelu_backward(void *ctx, float *dinp, const float *dout, const float *inp, size_t n)
{
    cuda_ctx *c = C_(ctx);
    k_gelu_backward<<<blocks_for(n), kThreads, 0, c->stream>>>(dinp, dout, inp, n);
    LAUNCHED(c, "gelu backward");
}

void d_residual_forward(void *ctx, float *out, const float *a, const float *b, size_t n)
{
    cuda_ctx *c = C_(ctx);
    k_residual<<<blocks_for(n), kThreads, 0, c->stream>>>(out, a, b, n);
    LAUNCHED(c, "residual");
}

void d_xent_forward(void *ctx, float *losses, float *probs, const float *logits,
                    const int32_t *targets, int N, int V)
{
    cuda_ctx *c = C_(ctx);
    if (N <= 0)
        return;
    k_xent_forward<<<(unsigned)N, kThreads, 0, c->stream>>>(losses, probs, logits, targets, V);
    LAUNCHED(c, "cross-entropy forward");
}

void d_xent_backward(void *ctx, float *dlogits, const float *probs, const int32_t *targets,
                     float scale, int N, int V)
{
    cuda_ctx *c = C_(ctx);
    size_t n = (size_t)N * V;
    k_xent_backward<<<blocks_for(n), kThreads, 0, c->stream>>>(dlogits, probs, targets, scale, V,
                                                                n);
    LAUNCHED(c, "cross-entropy backward");
}

void d_loss_mean(void *ctx, float *mean, const float *losses, int N)
{
    cuda_ctx *c = C_(ctx);
    k_loss_mean<<<1, kThreads, 0, c->stream>>>(mean, losses, N);
    LAUNCHED(c, "loss mean");
}

void d_adamw_update(void *ctx, float *params, const float *grads, float *m, float *v, size_t n,
                    float lr, float beta1, float beta2, float eps, float weight_decay,
                    float grad_scale, int64_t t)
{
    cuda_ctx *c = C_(ctx);
    // the bias corrections in double on the host, as the CPU kernel
    float c1 = (float)(1.0 - pow((double)beta1, (double)t));
    float c2 = (float)(1.0 - pow((double)beta2, (double)t));
    k_adamw<<<blocks_for(n), kThreads, 0, c->stream>>>(params, grads, m, v, n, lr, beta1, beta2,
                                                         eps, weight_decay, grad_scale, c1, c2);
    LAUNCHED(c, "AdamW");
}

double d_sumsq(void *ctx, const float *x, size_t n)
{
    cuda_ctx *c = C_(ctx);
    double h = 0.0;
    note(c, cudaMemsetAsync(c->red, 0, sizeof(double), c->stream), "cudaMemsetAsync");
    if (n) {
        unsigned blocks = blocks_for(n) < 1024u ? blocks_for(n) : 1024u;
        k_sumsq<<<blocks, kThreads, 0, c->stream>>>(c->red, x, n);
        LAUNCHED(c, "sum of squares");
    }
    note(c, cudaMemcpyAsync(&h, c->red, sizeof h, cudaMemcpyDeviceToHost, c->stream),
         "cudaMemcpyAsync");
    note(c, cudaStreamSynchronize(c->stream), "cudaStreamSynchronize");
    return h;
}

// The first error since the last check as a status, and cleared.
pp_status take_error(cuda_ctx *c)
{
    pp_status st = PP_OK;
    if (c->err != cudaSuccess)
        st = PP_ERR(PP_ERR_RUNTIME, "CUDA: %s failed: %s", c->where, cudaGetErrorString(c->err));
    else if (c->berr != CUBLAS_STATUS_SUCCESS)
        st = PP_ERR(PP_ERR_RUNTIME, "cuBLAS: %s failed (status %d)", c->where, (int)c->berr);
    c->err = cudaSuccess;
    c->berr = CUBLAS_STATUS_SUCCESS;
    return st;
}

pp_status d_sync(void *ctx)
{
    cuda_ctx *c = C_(ctx);
    note(c, cudaStreamSynchronize(c->stream), "cudaStreamSynchronize");
    return take_error(c);
}

pp_kops make_table(cuda_ctx *c)
{
    pp_kops k;
    memset(&k, 0, sizeof k);
    k.name = "cuda";
    k.on_device = 1;
    k.ctx = c;
    k.alloc = d_alloc;
    k.free = d_free;
    k.copy = d_copy;
    k.zero = d_zero;
    k.embed_forward = d_embed_forward;
    k.embed_backward = d_embed_backward;
    k.linear_forward = d_linear_forward;
    k.linear_backward_input = d_linear_backward_input;
    k.linear_backward_weight = d_linear_backward_weight;
    k.layernorm_forward = d_layernorm_forward;
    k.layernorm_backward_input = d_layernorm_backward_input;
    k.layernorm_backward_weight = d_layernorm_backward_weight;
    k.attention_forward = d_attention_forward;
    k.attention_backward = d_attention_backward;
    k.attention_scratch_floats = d_attention_scratch;
    k.gelu_forward = d_gelu_forward;
    k.gelu_backward = d_gelu_backward;
    k.residual_forward = d_residual_forward;
    k.xent_forward = d_xent_forward;
    k.xent_backward = d_xent_backward;
    k.loss_mean = d_loss_mean;
    k.adamw_update = d_adamw_update;
    k.sumsq = d_sumsq;
    k.sync = d_sync;
    return k;
}

pp_status cuda_fail(cudaError_t e, const char *what)
{
    return PP_ERR(PP_ERR_RUNTIME, "CUDA: %s failed: %s (%s)", what, cudaGetErrorString(e),
                  cudaGetErrorName(e));
}

} // namespace

// ---- C API ------------------------------------------------------------------------------------

struct pp_cuda_event {
    int device;
    cudaEvent_t ev;
};

extern "C" {

int pp_cuda_device_count(char *why, size_t n)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (why && n)
            snprintf(why, n, "no CUDA device: %s", cudaGetErrorString(e));
        return 0;
    }
    if (count == 0 && why && n)
        snprintf(why, n, "no CUDA device found");
    return count;
}

pp_status pp_cuda_device_describe(int device, char *out, size_t n)
{
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaGetDeviceProperties");
    snprintf(out, n, "%s, sm_%d%d, %.0f GiB, %d SMs", p.name, p.major, p.minor,
             (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), p.multiProcessorCount);
    return PP_OK;
}

double pp_cuda_peak_flops(int device, pp_cuda_precision prec, const char **source)
{
    cudaDeviceProp p;
    int clock_khz = 0;
    if (source)
        *source = "unknown";
    if (cudaGetDeviceProperties(&p, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device) != cudaSuccess) {
        cudaGetLastError();
        return 0.0;
    }
    pp_gpu_peak g = pp_gpu_peak_lookup(p.name, p.major, p.minor, p.multiProcessorCount, clock_khz,
                                       prec);
    if (source)
        *source = g.source;
    return g.flops;
}

pp_status pp_cuda_kops_create(int device, pp_cuda_precision prec, pp_kops **out)
{
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaSetDevice");
    cuda_ctx *c = (cuda_ctx *)calloc(1, sizeof *c);
    pp_kops *k = (pp_kops *)calloc(1, sizeof *k);
    if (!c || !k) {
        free(c);
        free(k);
        return PP_ERR(PP_ERR_NOMEM, "out of memory for a CUDA kernel table");
    }
    c->device = device;
    c->prec = prec;
    const char *how = getenv("PP_CUDA_BF16"); // docs/kernels.md: "convert", the slower way
    c->bf16_fast = !(how && strcmp(how, "convert") == 0);
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaMalloc((void **)&c->red, sizeof(double))) != cudaSuccess) {
        pp_status st = cuda_fail(e, "creating the stream");
        if (c->stream)
            cudaStreamDestroy(c->stream);
        free(c);
        free(k);
        return st;
    }
    cublasStatus_t s = cublasCreate(&c->blas);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSetStream(c->blas, c->stream);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cudaStreamDestroy(c->stream);
        cudaFree(c->red);
        free(c);
        free(k);
        return PP_ERR(PP_ERR_RUNTIME, "cuBLAS: cublasCreate failed (status %d)", (int)s);
    }
    *k = make_table(c);
    *out = k;
    return PP_OK;
}

void pp_cuda_kops_destroy(pp_kops *k)
{
    if (!k)
        return;
    cuda_ctx *c = C_(k->ctx);
    cudaSetDevice(c->device);
    cudaStreamSynchronize(c->stream);
    for (int i = 0; i < 2; i++)
        if (c->ws[i])
            cudaFree(c->ws[i]);
    cublasDestroy(c->blas);
    cudaFree(c->red);
    cudaStreamDestroy(c->stream);
    free(c);
    free(k);
}

void *pp_cuda_kops_stream(const pp_kops *k) { return (void *)C_(k->ctx)->stream; }
int pp_cuda_kops_device(const pp_kops *k) { return C_(k->ctx)->device; }

pp_status pp_cuda_kops_error(pp_kops *k) { return take_error(C_(k->ctx)); }

pp_status pp_cuda_kops_sync(pp_kops *k) { return d_sync(k->ctx); }

void pp_cuda_h2d(pp_kops *k, void *dst, const void *src, size_t bytes)
{
    cuda_ctx *c = C_(k->ctx);
    if (bytes)
        note(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream),
             "cudaMemcpyAsync (to the device)");
}

void pp_cuda_d2h(pp_kops *k, void *dst, const void *src, size_t bytes)
{
    cuda_ctx *c = C_(k->ctx);
    if (bytes)
        note(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream),
             "cudaMemcpyAsync (to the host)");
}

void pp_cuda_accumulate(pp_kops *k, float *dst, const float *src, float scale)
{
    cuda_ctx *c = C_(k->ctx);
    k_accumulate<<<1, 1, 0, c->stream>>>(dst, src, scale);
    LAUNCHED(c, "accumulate");
}

// No table, no stream: the zeroing is waited for here, as the streams that use the memory next
// are non-blocking ones that would not be ordered after the legacy stream's memset.
void *pp_cuda_dev_alloc(int device, size_t bytes)
{
    void *p = NULL;
    size_t n = bytes ? bytes : 1;
    if (cudaSetDevice(device) != cudaSuccess || cudaMalloc(&p, n) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    if (cudaMemsetAsync(p, 0, n, cudaStreamLegacy) != cudaSuccess ||
        cudaStreamSynchronize(cudaStreamLegacy) != cudaSuccess) {
        cudaFree(p);
        cudaGetLastError();
        return NULL;
    }
    return p;
}

void pp_cuda_dev_free(void *p)
{
    if (p)
        cudaFree(p);
}

void *pp_cuda_host_alloc(size_t bytes)
{
    void *p = NULL;
    if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    memset(p, 0, bytes ? bytes : 1);
    return p;
}

void pp_cuda_host_free(void *p)
{
    if (p)
        cudaFreeHost(p);
}

pp_status pp_cuda_event_create(int device, pp_cuda_event **out)
{
    cudaError_t e = cudaSetDevice(device);
    pp_cuda_event *ev = (pp_cuda_event *)calloc(1, sizeof *ev);
    if (!ev)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for a CUDA event");
    ev->device = device;
    if (e == cudaSuccess)
        e = cudaEventCreate(&ev->ev);
    if (e != cudaSuccess) {
        free(ev);
        return cuda_fail(e, "cudaEventCreate");
    }
    *out = ev;
    return PP_OK;
}

void pp_cuda_event_destroy(pp_cuda_event *e)
{
    if (!e)
        return;
    cudaEventDestroy(e->ev);
    free(e);
}

void pp_cuda_event_record(pp_cuda_event *e, pp_kops *k)
{
    cuda_ctx *c = C_(k->ctx);
    note(c, cudaEventRecord(e->ev, c->stream), "cudaEventRecord");
}

void pp_cuda_stream_wait(pp_kops *k, pp_cuda_event *e)
{
    cuda_ctx *c = C_(k->ctx);
    note(c, cudaStreamWaitEvent(c->stream, e->ev, 0), "cudaStreamWaitEvent");
}

pp_status pp_cuda_event_elapsed_ms(pp_cuda_event *a, pp_cuda_event *b, float *ms)
{
    cudaError_t e = cudaEventSynchronize(b->ev);
    if (e == cudaSuccess)
        e = cudaEventElapsedTime(ms, a->ev, b->ev);
    return e == cudaSuccess ? PP_OK : cuda_fail(e, "cudaEventElapsedTime");
}

} // extern "C"
