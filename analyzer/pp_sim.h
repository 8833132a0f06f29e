/* pp_sim.h: the schedule simulator. A discrete-event replay of the runtime's own instruction
 * lists (plan/pp_plan.h, the same generator the executor runs) under given op durations
 * and a transfer model, with the executor's semantics: each stage runs its list in order,
 * sends do not block, a receive waits until the message is available (sender's clock at the
 * send + transfer time), and the optimizer step waits for every stage (the gradient-norm
 * all-reduce). Used by the analyzer (bubble decomposition: replays under counterfactual costs)
 * and the tuner (predictions, rebalancing). Pure computation: no threads, no clocks. */
#ifndef PP_SIM_H
#define PP_SIM_H

#include "pp_plan.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Durations in nanoseconds. `instr` is sched->instrs[stage][index]. */
typedef struct pp_sim_costs {
    /* Duration of a compute op (FWD, BWD, BWD_INPUT, BWD_WEIGHT, OPT_STEP) at list position
     * `index` of `stage`. */
    double (*op_ns)(void *ctx, int stage, int index, const pp_instr *instr);
    /* Time from a send at list position `index` of `stage` until the data is at the receiver. */
    double (*transfer_ns)(void *ctx, int stage, int index, const pp_instr *instr);
    void *ctx;
} pp_sim_costs;

typedef struct pp_sim_result {
    int S;
    double step_ns;       /* last stage end - 0 */
    double *busy_ns;      /* [S] sum of compute op durations */
    double *idle_ns;      /* [S] step_ns - busy_ns */
    double *end_ns;       /* [S] when the stage finished its list */
    double **start_ns;    /* [S][n_instrs[s]] start of each instruction (recv: when it began to
                             wait; compute: when it ran) */
    double **finish_ns;   /* [S][n_instrs[s]] end of each instruction (recv: data available) */
    double bubble_ratio;  /* sum idle / (S * step) */
} pp_sim_result;

/* Replays `sched` (validated) under `costs`. Fills res (free with pp_sim_result_free). */
pp_status pp_sim_run(const pp_schedule *sched, const pp_sim_costs *costs, pp_sim_result *res);
void pp_sim_result_free(pp_sim_result *res);

/* Costs from a cost file and a partition by the planning library's cost rule (pp_plan.h): an
 * op of chunk c on stage s costs pp_costs_op_us of its piece's layers (split backward halves:
 * bwd_input_us / bwd_weight_us, or halves of bwd_us when the file has no split), the optimizer
 * step optimizer_us; transfers pp_costs_transfer_us of pp_costs_boundary_bytes. `mult` (NULL =
 * all 1) scales each stage's compute. */
typedef struct pp_sim_file_costs {
    const pp_costs *costs;
    const pp_partition *part;
    const double *mult;
} pp_sim_file_costs;

void pp_sim_costs_from_file(pp_sim_file_costs *fc, pp_sim_costs *out);

/* Convenience: simulate (kind, partition, M) with a cost file. */
pp_status pp_sim_file(pp_schedule_kind kind, const pp_partition *part, int M,
                      const pp_costs *costs, const double *mult, pp_sim_result *res);

#ifdef __cplusplus
}
#endif
#endif /* PP_SIM_H */
