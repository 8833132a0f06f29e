/* pp_rebalance.h: the rebalancer (analyzer/rebalance.c), the tuner's search over pipeline
 * layouts. It finds the contiguous partition of the layer list into S stages (S * v pieces) that
 * minimises the simulated step time (analyzer/pp_sim.h) of a given schedule, under a per-stage
 * memory limit, and proves how far its answer can be from the optimum. Called by the tuning
 * driver (analyzer/pp_tune.h); docs/rebalancer.md has the method, the bounds and their proofs.
 * Pure computation: no threads, no clocks besides the time budget; every call is independent,
 * so concurrent calls on different arguments are safe. */
#ifndef PP_REBALANCE_H
#define PP_REBALANCE_H

#include "pp_plan.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes stage `stage` of partition `p` holds at its peak, under the search's model
 * (docs/rebalancer.md):
 *   4 x the parameter bytes of its layers (weights, gradients and AdamW's two moments, all in
 *   the parameters' precision), plus the activations of `peak_inflight` micro-batches, a
 *   micro-batch's being the sum over the stage's layers of kept_bytes (activation_bytes for a
 *   layer whose cost has no memory keys: the model before they existed).
 * With v > 1, `peak_inflight` counts micro-batch-chunks (pp_schedule_report.peak_inflight) and
 * each is charged at the stage's heaviest chunk: an upper bound that does not depend on which
 * chunks are in flight at the peak. Saturates at UINT64_MAX. */
uint64_t pp_stage_memory_bytes(const pp_costs *c, const pp_partition *p, int stage,
                               int peak_inflight);

/* The memory model term by term (analyzer/memmodel.c, docs/rebalancer.md "Memory model"): one
 * stage's bytes at its peak, by purpose, as pptrain accounts them (runtime/memory.c). */
typedef struct pp_stage_memory {
    uint64_t params_bytes;      /* the weights: param_bytes over the stage's layers */
    uint64_t grads_bytes;       /* their gradients: the same */
    uint64_t optimizer_bytes;   /* AdamW's two moments: twice that */
    uint64_t kept_bytes;        /* at the peak: the micro-batches in flight's kept tensors */
    uint64_t workspace_bytes;   /* at the peak: recompute workspaces held */
    uint64_t activations_bytes; /* kept + workspace at the peak: the "activations" purpose */
    uint64_t transport_bytes;   /* the executor's receive buffers (static) */
    uint64_t total_bytes;       /* params + grads + optimizer + activations + transport */
    int peak_inflight;          /* micro-batch-chunks in flight at the peak */
    int schedule_peak_inflight; /* pp_schedule_report.peak_inflight[stage] */
} pp_stage_memory;

/* Replays stage `stage`'s list of `sched` (of p's shape) and fills `out`. `recompute` is [L]
 * (1 = the layer is recomputed, as pptrain --recompute resolves it) or NULL for none. A layer
 * keeps kept_bytes per micro-batch in flight, input_bytes when recomputed (plus the chunk's
 * output and input gradient at a recomputed end, and one workspace of the recomputed layers'
 * kept_bytes while a forward or a backward of that chunk runs); costs without the memory keys
 * fall back on activation_bytes (the layer's output; recomputed: its input). PP_ERR_INVALID
 * when the shapes disagree or the schedule is invalid. */
pp_status pp_stage_memory_model(const pp_costs *c, const pp_partition *p,
                                const pp_schedule *sched, int stage, const uint8_t *recompute,
                                pp_stage_memory *out);

typedef struct pp_rebalance_opts {
    pp_schedule_kind kind;
    int S;                       /* stages */
    int v;                       /* chunks per stage: 1, or >= 2 for interleaved */
    int M;                       /* micro-batches per step */
    const pp_costs *costs;       /* borrowed; its layer count is L */
    uint64_t memory_limit_bytes; /* per stage, by pp_stage_memory_model's total (what pptrain's
                                    accounting measures at the stage's peak); 0 = no limit */
    int recompute;               /* 1: a stage may recompute all its layers (pptrain
                                    --recompute sN) where that is what lets it meet the limit;
                                    0: never. Without a limit it never pays: ignored */
    double time_budget_s;        /* stop the exact search after this long and report the proven
                                    gap; 0 = search until optimality is proven */
} pp_rebalance_opts;

typedef struct pp_rebalance_result {
    pp_partition partition;      /* the proposal; freed by pp_rebalance_result_free */
    double step_ns;              /* its simulated step time (pp_sim_file's, to the last bit) */
    double lower_bound_ns;       /* proven: no partition meeting the limit simulates faster */
    int exact;                   /* 1: the search finished: step_ns is the optimum, up to ties
                                    within a relative 1e-9 (lower_bound_ns = step_ns * (1 -
                                    1e-9)); 0: the time budget ran out, the gap is
                                    step_ns / lower_bound_ns - 1 */
    uint64_t *stage_memory_bytes;/* [S] each stage of the proposal by pp_stage_memory_model,
                                    with its recompute choice */
    uint8_t *recompute;          /* [L] 1 = the layer is recomputed in the proposal (its whole
                                    stage is); all 0 without a limit or opts.recompute */
    int recomputed_stages;       /* stages recomputed */
    double even_step_ns;         /* the even split's simulated step (< 0 when it has no valid
                                    shape); for reporting the gain */
    int64_t evaluated;           /* partitions simulated */
    int64_t nodes;               /* search-tree nodes expanded */
    double seconds;              /* wall time of the call */
} pp_rebalance_result;

/* Finds the partition and, with opts.recompute, which stages recompute: for a given partition
 * the fastest choice meeting the limit is to recompute exactly the stages that cannot meet it
 * otherwise (a longer op never shortens the simulated step), so the search is over partitions
 * as without it, each scored with its stages' choices; step_ns is then pp_sim_file's on
 * pp_costs_with_recompute(costs, recompute). PP_ERR_INVALID when the arguments are not a valid schedule shape
 * (pp_schedule_check_args), when S * v > L, or when no partition meets the memory limit (the
 * message gives the smallest achievable largest stage memory). On success fills `r` (free it
 * with pp_rebalance_result_free); on failure leaves it empty. */
pp_status pp_rebalance(const pp_rebalance_opts *o, pp_rebalance_result *r);
void pp_rebalance_result_free(pp_rebalance_result *r);

/* The path-mixture bound and its branch and bound alone (docs/rebalancer.md, "Branching on the
 * mixture"), for tests and inspection; interleaved (v >= 2) only, memory limits not applied (a
 * relaxation). `root_ns`: the relaxation's value over all partitions; `bound_ns`: the least
 * value over the nodes left open after at most `max_splits` splits (0: until no node is left
 * below the incumbent); both are proven lower bounds on every partition's step. `incumbent`
 * (may be NULL) sets the cutoff below which nodes are kept; `best_ns` is the best step found,
 * the incumbent's or a better one from the nodes' partitions (+inf without either), and
 * bound_ns >= best_ns * (1 - 1e-9) proves it optimal. Deterministic: no time budget (opts'
 * time_budget_s is ignored). Any output pointer may be NULL. */
pp_status pp_rebalance_branch_bound(const pp_rebalance_opts *o, const pp_partition *incumbent,
                                    int max_splits, double *root_ns, double *bound_ns,
                                    double *best_ns);

/* The rebalancer's local moves alone (docs/rebalancer.md "The search", 2.), for tests and
 * benchmarks: from partition `start`, the moves of one boundary (a run of boundaries for v > 1)
 * by one layer, each kept when it shortens the simulated step, until none does; the result into
 * *out (pp_partition_free), its step time and the partitions simulated (`step_ns`, `simulated`
 * may be NULL). With `chains` set, a move that a critical chain of a partition simulated before
 * shows cannot shorten the step is not simulated (v > 1 without a memory limit): the result is
 * the same partition, found with fewer simulations. PP_ERR_INVALID for a start of another shape
 * or one that breaks the memory limit. */
pp_status pp_rebalance_moves(const pp_rebalance_opts *o, const pp_partition *start, int chains,
                             pp_partition *out, double *step_ns, int64_t *simulated);

/* The rebalancer's internals on one given partition, for tests and --explain: its own evaluator's
 * step time (`step_ns`, equal to pp_sim_file's, with the stages recomputed that need it to meet
 * the limit when opts.recompute is set) and the lower bound its search would use for a
 * node whose pieces are all fixed to these (`bound_ns`, <= step_ns; docs/rebalancer.md). Either
 * pointer may be NULL. */
pp_status pp_rebalance_inspect(const pp_rebalance_opts *o, const pp_partition *p, double *step_ns,
                               double *bound_ns);

#ifdef __cplusplus
}
#endif
#endif /* PP_REBALANCE_H */
