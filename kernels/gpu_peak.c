/* gpu_peak.c: a GPU's peak dense FLOP/s for a GEMM precision, for MFU (docs/metrics.md "Model
 * FLOPs and MFU"). Pure: it takes what the CUDA runtime reports (kernels/cuda/kops_cuda.cu
 * pp_cuda_peak_flops asks the device) and is built without CUDA, so every build tests it.
 *
 * Products NVIDIA publishes dense figures for are found by compute capability, SM count and
 * name (their datasheets give tensor rates "with sparsity"; the dense rate is half). Anything
 * else of a known architecture falls back to its dense rate per SM and clock x SMs x the clock
 * the driver reports, which is the boost clock and so overstates a sustained dense peak (about
 * 8% on an H100 SXM: 1.98 GHz reported, 1.83 GHz behind the datasheet's 989.4 TFLOP/s). */
#include "pp_kops.h"

#include <string.h>

typedef struct product {
    const char *name_has; /* a part of the device name that tells it apart (NULL: any) */
    int major, minor, sms;
    double tflops[3];     /* dense fp32 (CUDA cores), tf32 and bf16 (tensor cores) */
} product;

/* NVIDIA datasheets: A100 (SXM4 and PCIe alike), A30, H100 SXM5 / PCIe / NVL, H200 SXM / NVL,
 * GH200. The first match wins, so the name tests come before the generic entries. */
static const product k_products[] = {
    {"NVL", 9, 0, 132, {60.0, 417.5, 835.5}},   /* H100 NVL, H200 NVL */
    {NULL, 9, 0, 132, {67.0, 494.7, 989.4}},    /* H100 SXM5, H200 SXM, GH200 */
    {NULL, 9, 0, 114, {51.0, 378.0, 756.0}},    /* H100 PCIe */
    {NULL, 8, 0, 108, {19.5, 156.0, 312.0}},    /* A100 SXM4 and PCIe */
    {"A30", 8, 0, 56, {10.3, 82.0, 165.0}},     /* A30 */
};

/* Dense FLOP per SM per clock (an FMA is 2), from the architecture whitepapers. */
static double per_sm_clock(int major, int minor, pp_cuda_precision p)
{
    static const double sm80[3] = {128, 1024, 2048}, sm90[3] = {256, 2048, 4096};
    if (major == 8 && minor == 0)
        return sm80[p];
    if (major == 9 && minor == 0)
        return sm90[p];
    return 0.0;
}

pp_gpu_peak pp_gpu_peak_lookup(const char *name, int major, int minor, int sms, int clock_khz,
                               pp_cuda_precision p)
{
    pp_gpu_peak out = {0.0, "unknown"};
    if (p < PP_CUDA_FP32 || p > PP_CUDA_BF16)
        return out;
    for (size_t i = 0; i < sizeof k_products / sizeof k_products[0]; i++) {
        const product *d = &k_products[i];
        if (d->major != major || d->minor != minor || d->sms != sms)
            continue;
        if (d->name_has && !(name && strstr(name, d->name_has)))
            continue;
        out.flops = d->tflops[p] * 1e12;
        out.source = "datasheet";
        return out;
    }
    double r = per_sm_clock(major, minor, p);
    if (r > 0 && sms > 0 && clock_khz > 0) {
        out.flops = r * sms * (double)clock_khz * 1e3;
        out.source = "clock";
    }
    return out;
}
