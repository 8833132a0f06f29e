/* pp_advise.h: the tuner's advice beyond one partition: per-layer costs as a function of the
 * micro-batch size (a least-squares line through runs at several sizes), the per-stage memory of
 * a layout under the rebalancer's memory model, and the partition written in the forms other
 * frameworks take (Megatron-LM's --pipeline-model-parallel-layout, DeepSpeed's `parts`).
 * Called by pprof-tune (docs/cli/pprof-tune.md). Pure computation, no shared state: concurrent
 * calls on different arguments are safe. */
#ifndef PP_ADVISE_H
#define PP_ADVISE_H

#include "pp_plan.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One fitted line t(b) = a + c * b (microseconds, b in samples per micro-batch) and how well it
 * matches the measured points. */
typedef struct pp_advise_line {
    double a_us, c_us;   /* intercept and slope */
    double rms_us;       /* root mean square residual over the runs */
    double max_rel;      /* largest |residual| / measured value (0 when the value is 0) */
} pp_advise_line;

typedef struct pp_advise_layer {
    char name[64];
    pp_advise_line fwd, bwd, bwd_input, bwd_weight;
    int has_split;                   /* every run measured the split backward */
    double activation_bytes_per_sample; /* activations proportional to b */
    uint64_t param_bytes;            /* independent of b */
} pp_advise_layer;

typedef struct pp_advise_fit {
    int L;
    int n_runs;
    int n_sizes;                     /* distinct micro-batch sizes among the runs */
    pp_advise_layer *layers;         /* [L] */
    double p2p_GBps, p2p_latency_us; /* means over the runs */
    double optimizer_us;             /* mean over the runs (does not depend on b) */
    double optimizer_us_per_MB;      /* mean over the runs */
    double grad_norm_us;             /* mean over the runs */
    double step_fixed_us;            /* mean over the runs */
    double dp_allreduce_us, dp_allreduce_us_per_MB; /* means over the runs (gradients: no b) */
    double send_act_us, send_grad_us; /* means over the runs (per message, whatever its size) */
    double recv_act_us, recv_grad_us; /* means over the runs (per message, whatever its size) */
    double op_gap_us;                 /* mean over the runs (per compute op, whatever its size) */
    double worst_rel;                /* largest max_rel over layers and fields */
    int worst_layer;                 /* where it is, -1 when every residual is 0 */
} pp_advise_fit;

/* Fits every layer's fwd, bwd (and split halves) against the micro-batch size over `n` runs:
 * costs[i] measured at sizes[i] samples per micro-batch. Needs n >= 2, at least two distinct
 * sizes, and the same layer list (count and names) in every run; PP_ERR_INVALID naming the run
 * otherwise. Free with pp_advise_fit_free. */
pp_status pp_advise_fit_costs(const pp_costs *const *costs, const int *sizes, int n,
                              pp_advise_fit *out);
void pp_advise_fit_free(pp_advise_fit *f);

/* The cost file the fit predicts at micro-batch size b: each time a + c * b (clamped at 0),
 * activation bytes proportional to b, parameters unchanged, the mean link model and optimizer.
 * `clamped` (may be NULL) receives how many values were clamped. */
pp_status pp_advise_costs_at(const pp_advise_fit *f, int b, pp_costs **out, int *clamped);

/* Per-stage memory of `part` under (kind, M), the layers of `recompute` ([L], NULL: none)
 * recomputed: pp_stage_memory_model's totals, the model the rebalancer's limit judges, and the
 * schedule's peak in-flight micro-batches (pp_schedule_report). `mem` and `peak_inflight`
 * (either may be NULL) have part->S entries. */
pp_status pp_advise_stage_memory(const pp_costs *c, const pp_partition *part,
                                 pp_schedule_kind kind, int M, const uint8_t *recompute,
                                 uint64_t *mem, int *peak_inflight);

/* Megatron-LM's --pipeline-model-parallel-layout for `part`: the pieces in piece order (chunk 0
 * stages 0..S-1, then chunk 1, ...) separated by '|'; 'E' for a layer named "embedding", 'L' for
 * one named "head", 't' for every other layer, runs of 3 or more 't' as "t*N". Example
 * "Et|tt|tt|tL". Truncated (still NUL-terminated) when cap is too small. */
void pp_advise_megatron_layout(const pp_costs *c, const pp_partition *part, char *buf,
                               size_t cap);

/* DeepSpeed's PipelineModule `parts` for `part` (v = 1): "[0, 2, 4, 6]". */
void pp_advise_deepspeed_parts(const pp_partition *part, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* PP_ADVISE_H */
