/* pp_extract.h: from a measured run to the inputs of prediction: per-layer costs (the cost file
 * the sim backend and the simulator read), the run's own partition, schedule and micro-batching,
 * and a fitted transfer model. Called by pprof-tune (--export-costs, proposals, --verify). */
#ifndef PP_EXTRACT_H
#define PP_EXTRACT_H

#include "pp_analyzer.h"
#include "pp_plan.h"
#include "pp_sim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_extract {
    pp_costs *costs;          /* per layer, per micro-batch at the run's micro-batch size */
    pp_partition partition;   /* the run's cut of the layer list (from its layer ranges) */
    pp_schedule_kind schedule;
    /* The schedules the job can run, bit k for pp_schedule_kind k: those its config mark
     * announces (`schedules=`, docs/nvtx-convention.md), its own always; only its own when it
     * announces none. pprof-tune proposes no other. */
    unsigned runnable;
    int runnable_announced;   /* 1: from the config mark */
    int M;
    int microbatch_size;      /* samples per micro-batch, 0 when unknown */
    double samples_per_step, tokens_per_step;
    double measured_step_ns;  /* median over the analyzed steps (the period) */
    double between_steps_ns;  /* the job's time a step outside the pipeline's ops (median),
                                 costs->step_fixed_us */
    double measured_bubble;
    double measured_p95_ns;   /* p95 over the analyzed steps */
    pp_aregimes regimes;      /* the analyzed steps' two speed regimes, when found */
    int torch_trace;          /* read from a torch profiler trace (torch, DeepSpeed, Megatron) */
    /* The op durations' variation (pp_sim.h, docs/sim-dist.md): per stage and op kind, and
     * the per-step parts; owned. pp_extract_predict_dist replays it. */
    pp_sim_noise noise;
    /* Each stage's measured busy share: its mean busy time over the mean step ([partition.S],
     * 0 unknown), owned: which of the run's stages a proposal's stage takes its variation from
     * (pp_extract_noise_stages) */
    double *busy_share;
    /* Each layer's spread where the capture times layers: p95 / median of its forward and
     * backward ranges ([n_layers][2], 0 when it has none), owned. Reported (--formula); the
     * replays use the stages' variation above. */
    double *layer_p95_ratio;
    int has_param_bytes;      /* every layer's parameter size is known (layer marks) */
    /* 1: the run had no layer ranges: one layer per piece (stage, chunk), costed by its ops;
     * the partition cannot move (pp_extract_from_analysis); stage_why says so and what would
     * give layers (pprof-tune shows it always) */
    int stage_level;
    char stage_why[320];
    /* Activation recomputation (config mark `recompute=`): can_recompute = 1 when the job
     * states it (it can then run a plan's choice); recompute [n_layers] the layers the run
     * recomputed (NULL: none). Their backward ranges held the forward again: `costs` has it
     * taken out (the layer's cost without recomputation, what the tuner adds back where it
     * chooses), `run_costs` has it in (the costs as the run ran: its own layout's predictions);
     * run_costs is `costs` itself when nothing was recomputed. */
    int can_recompute;
    uint8_t *recompute;
    pp_costs *run_costs;
    int latency_fitted;       /* 1: latency and bandwidth fitted from >= 2 message sizes */
    /* 1: most analyzed steps whose optimizer steps could tell showed them starting apart, each
     * stage's when its own work ended (pp_astep.opt_barrier 0: a torch job's stages step their
     * optimizers alone), so costs->grad_norm_us is the time before the optimizer step, with no
     * barrier in it; 0 otherwise (a barrier, or not known) */
    int no_barrier;
    /* ops (a piece's forward or backward) whose layers' summed medians lie beyond 0.5 .. 2 x the
     * op's median and were left as measured (the layer ranges do not describe the op: nested
     * ranges, or on pptrain's sim backend under a host stealing the CPU, layers woken late
     * catching up in a fraction of their time); 0: every layer adds up to its op */
    int layers_unscaled;
    char notes[2048];         /* the assumptions made, one per line */
} pp_extract;

/* Extracts from an analysis (which must hold layer ranges: the layer list is what the tuner
 * cuts). PP_ERR_INVALID with a message naming what is missing. */
pp_status pp_extract_from_analysis(const pp_analysis *a, pp_extract *out);
void pp_extract_free(pp_extract *e);

/* run_costs, or costs where it is not set (an extract filled by hand). */
const pp_costs *pp_extract_run_costs(const pp_extract *e);

/* The extracted costs replayed through the simulator: the predicted step of `part` under
 * (kind, M) with the costs as the run ran them (run_costs: its recomputed layers recomputed). */
pp_status pp_extract_predict(const pp_extract *e, pp_schedule_kind kind, const pp_partition *part,
                             int M, double *step_ns, double *bubble);

/* The step's distribution of `part` under (kind, M) with run_costs and the run's variation
 * (pp_sim_dist, seeded by `seed`): median, p95 and mean beside the noise-free step. */
pp_status pp_extract_predict_dist(const pp_extract *e, pp_schedule_kind kind,
                                  const pp_partition *part, int M, uint64_t seed,
                                  pp_sim_dist_result *res);

/* Which of the run's stages each stage of `part` under (kind, M) with `costs` (NULL: run_costs)
 * takes its variation from (pp_sim_dist_opts.noise_stage, map[part->S]): the stage with its
 * index while that stage's measured busy share is within PP_EXTRACT_SHARE_TOL of the busy share
 * the noise-free replay gives it beyond the nearest one's, else the run's stage whose measured
 * busy share is nearest (docs/sim-dist.md, "Idle stages vary more"). -1 entries (index kept) for
 * the run's own layout and where the run's shares are unknown. */
#define PP_EXTRACT_SHARE_TOL 0.05
pp_status pp_extract_noise_stages(const pp_extract *e, pp_schedule_kind kind,
                                  const pp_partition *part, int M, const pp_costs *costs,
                                  int *map);

/* pp_sim_dist_file of `part` under (kind, M) with `costs` (NULL: run_costs) and *o, each stage
 * taking its variation from the run's stage pp_extract_noise_stages maps it to (o->noise_stage
 * is set for the call and cleared after it). */
pp_status pp_extract_dist_mapped(const pp_extract *e, pp_schedule_kind kind,
                                 const pp_partition *part, int M, const pp_costs *costs,
                                 pp_sim_dist_opts *o, pp_sim_dist_result *res);

#ifdef __cplusplus
}
#endif
#endif /* PP_EXTRACT_H */
