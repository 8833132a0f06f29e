/* pp_sim.h: the schedule simulator. A discrete-event replay of the runtime's own instruction
 * lists (plan/pp_plan.h, the same generator the executor runs) under given op durations
 * and a transfer model, with the executor's semantics: each stage runs its list in order,
 * sends do not wait for their receiver (they take the sender's own send time, if any), a
 * receive waits until the message is available (sender's clock at the send + transfer time),
 * and the optimizer step waits for every stage (the gradient-norm all-reduce; unless
 * pp_sim_costs.no_barrier). Used by the analyzer (bubble decomposition: replays under counterfactual costs)
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
    /* The sender's own time in a send at list position `index` of `stage`: its clock moves on by
     * it (it runs nothing else meanwhile); the transfer still counts from the send's start.
     * NULL: sends take no time on the sender. */
    double (*send_ns)(void *ctx, int stage, int index, const pp_instr *instr);
    /* The stage's time after its last op before it reaches the optimizer step's barrier (its
     * data-parallel gradient all-reduce): the barrier is the latest of the stages' ends plus
     * their own. NULL: none, the barrier is the latest end. */
    double (*pre_barrier_ns)(void *ctx, int stage);
    /* 1: the optimizer step waits for no other stage (a job without a gradient-norm all-reduce:
     * torch.optim's plain step): each stage runs it as its next compute op, and pre_barrier_ns
     * is not used. 0: the barrier above (pptrain's, Megatron-LM's). pp_sim_run's only: the
     * Monte Carlo replay (pp_sim_dist) and the rebalancer's evaluator model the barrier, as a
     * cost file's job has it. */
    int no_barrier;
    /* The receiver's own time in a receive at list position `index` of `stage`: the receive
     * ends at the later of its start plus this and its message's arrival. NULL: none (a
     * receive whose message is there takes no time). */
    double (*recv_ns)(void *ctx, int stage, int index, const pp_instr *instr);
} pp_sim_costs;

typedef struct pp_sim_result {
    int S;
    double step_ns;       /* last stage end - 0 */
    double *busy_ns;      /* [S] sum of compute op durations */
    double *idle_ns;      /* [S] step_ns - busy_ns */
    double *end_ns;       /* [S] when the stage finished its list */
    double **start_ns;    /* [S][n_instrs[s]] start of each instruction (recv: when it began to
                             wait; compute: when it ran) */
    double **finish_ns;   /* [S][n_instrs[s]] end of each instruction (recv: the data's
                             arrival, or its start plus the receiver's time if later) */
    double bubble_ratio;  /* sum idle / (S * step) */
} pp_sim_result;

/* Replays `sched` (validated) under `costs`. Fills res (free with pp_sim_result_free). */
pp_status pp_sim_run(const pp_schedule *sched, const pp_sim_costs *costs, pp_sim_result *res);
void pp_sim_result_free(pp_sim_result *res);

/* Costs from a cost file and a partition by the planning library's cost rule (pp_plan.h): an
 * op of chunk c on stage s costs pp_costs_op_us of its piece's layers (split backward halves:
 * bwd_input_us / bwd_weight_us, or halves of bwd_us when the file has no split), the optimizer
 * step optimizer_us; transfers pp_costs_transfer_us of pp_costs_boundary_bytes, each send
 * pp_costs_send_us on its sender. `mult` (NULL =
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

/* ---- The step's distribution: Monte Carlo replays (sim_dist.c, docs/sim-dist.md) ---- */

/* Kinds of compute op a noise model describes: FWD, BWD, BWD_INPUT, BWD_WEIGHT, OPT_STEP (the
 * order of pp_analyzer.h's PP_ASTAGE_*). */
enum {
    PP_SIM_NOISE_KINDS = 5,
    PP_SIM_NOISE_MAX_SAMPLES = 4096,
    PP_SIM_NOISE_MAX_STEP_CELLS = 1 << 20, /* steps x stages of pp_sim_noise.step_f: 8 MiB */
    PP_SIM_DIST_MAX_REPLAYS = 1 << 20
};
/* Bounds of a fitted model, whatever the capture holds: |log factor| of one op (1000x its
 * median), log-sd of the per-step parts (as pp_jitter's lognormal). */
#define PP_SIM_NOISE_MAX_LOG 6.907755278982137
#define PP_SIM_NOISE_MAX_SIGMA 2.0

/* One (stage, op kind)'s per-op variation: factors = duration / the kind's median on the stage,
 * from a capture. */
/* The own-time kinds of pp_sim_noise.own: a send's of activations and of gradients, a
 * receive's of activations and of gradients. */
enum { PP_SIM_OWN_SEND_ACT, PP_SIM_OWN_SEND_GRAD, PP_SIM_OWN_RECV_ACT, PP_SIM_OWN_RECV_GRAD };

typedef struct pp_sim_noise_kind {
    uint32_t n;          /* factors held (<= PP_SIM_NOISE_MAX_SAMPLES); 0: the kind does not vary */
    double *factor;      /* [n] the op's own (independent) factor: the measured ones, clipped,
                            with the per-step parts taken out (log-space shrink), owned */
    double median_ns;    /* the measured durations' median */
    double p05, p95;     /* quantiles of the measured factor (duration / median) */
    double sigma_log;    /* standard deviation of log(duration / median): all of the variation */
    double sigma_robust; /* 1.4826 x median |log(duration / median)| (<= sigma_log): the bulk's */
    double sigma_kept;   /* of the logs clipped as kept (docs/sim-dist.md), before the shrink */
    double step_ns;      /* the kind's ops in one step of their stage: the sum of their medians
                            (the chunks' with v > 1), and step_ns2 the sum of their squares:
                            what the stage's busy time is made of (pp_sim_noise_level) */
    double step_ns2;
} pp_sim_noise_kind;

/* The variation of a step's op durations. A compute op of stage s in a step takes its cost times
 * C x D_s x e: C shared by every op of the step (the machine was busy), D_s shared by the
 * stage's ops of the step (sigma_step and sigma_stage[s] their log-sds; drawn together from the
 * run's own steps, step_f, or lognormal without them), e the op's own factor, drawn
 * from kind[s * PP_SIM_NOISE_KINDS + kind].factor. Stages past S use stage % S. */
typedef struct pp_sim_noise {
    int S;                   /* stages described; 0: no variation */
    pp_sim_noise_kind *kind; /* [S * PP_SIM_NOISE_KINDS] */
    double sigma_step;
    double *sigma_stage;     /* [S] */
    double common_share;     /* the share of the log-variance the per-step parts explain (C and
                                D_s together, mean over the stages' kinds): reported */
    int n_steps;             /* steps the per-step parts were estimated from (0: not estimated) */
    /* The run's own per-step parts: C x D_s of measured step i at step_f[i * S + s] (each
     * stage's busy time against its median, its log scaled to the variance the fit gives C and
     * D_s together, so that the ops' own part is not counted twice). A replay draws one step
     * for all stages, keeping their correlation and the measured shape (two regimes, a tail).
     * n_step_f = 0 (a model made by hand): C and D_s lognormal with the sigmas above. At most
     * PP_SIM_NOISE_MAX_SAMPLES steps and PP_SIM_NOISE_MAX_STEP_CELLS cells, evenly spaced
     * over the run. */
    int n_step_f;
    double *step_f;
    /* Each stage's measured median busy time (ns; 0: fewer than 8 steps had one) and its level:
     * a replay's per-step part (step_f) of stage s is times level[s], so that the stage's busy
     * time, replayed as the run ran it (its ops' medians times their own factors, times a drawn
     * step), has the measured median (pp_sim_noise_level; NULL or 1: as drawn). */
    double *busy_median_ns; /* [S] */
    double *level;          /* [S] */
    /* Transfers' own variation, activations [0] and gradients [1]: each timed message's transfer
     * over its link's median (factor, n; p05, p95 and median_ns their quantiles, reported; the
     * rest unused); a replay's message takes
     * the link model's time times one drawn uniformly. n = 0: transfers do not vary. */
    pp_sim_noise_kind xfer[2];
    /* Set: the replays keep transfers at the link model's time even where xfer has factors (the
     * extraction's choice for a run whose delays after a receive do not move its step, as on
     * the sim backend: docs/sim-dist.md "Why transfers vary"). */
    int xfer_fixed;
    /* The senders' and receivers' own times' variation (the cost file's send_act_us,
     * send_grad_us, recv_act_us, recv_grad_us: own[PP_SIM_OWN_*]): each measured own time over
     * its link's median, as xfer; a replay's send or receive takes its own time times one drawn
     * uniformly. n = 0: it does not vary. own_fixed set: the replays keep the cost file's times
     * (the extraction's choice, as for transfers: docs/sim-dist.md "Senders' and receivers' own
     * time"). */
    pp_sim_noise_kind own[4];
    int own_fixed;
    /* The ops' own factors (kind[].factor) as fitted, their logs times op_scale (0 .. 1; the
     * fit sets 1): the extraction shrinks them where the run's own steps vary less than the
     * replays of its layout would (docs/sim-dist.md, "Variation that does not move the step") */
    double op_scale;
} pp_sim_noise;

/* What the fit takes, from a capture: per (stage, kind) op durations in any order (a uniform
 * sample: pp_astage.sample), and per step each stage's busy time (pp_stage_step.busy_ns: the
 * sum of its compute ops). Nothing here sizes memory beyond the arrays given: samples past
 * PP_SIM_NOISE_MAX_SAMPLES are not read. */
typedef struct pp_sim_noise_input {
    int S;
    const double *const *sample; /* [S * PP_SIM_NOISE_KINDS], NULL entries: none */
    const uint32_t *n_sample;    /* [S * PP_SIM_NOISE_KINDS] */
    size_t n_steps;
    const double *step_busy;     /* [n_steps * S]: stage s in step i at i * S + s; <= 0: none */
    int ops_per_step;            /* ops of each compute kind per stage and step: M x v */
    /* With v > 1 chunks per stage: each (stage, kind)'s chunk medians (ns; <= 0 unknown) at
     * [(s * PP_SIM_NOISE_KINDS + kind) * v + chunk], NULL when unknown: a duration is taken
     * relative to the nearest one, so unequal chunks do not read as spread */
    int v;
    const double *chunk_median;
    /* Per kind (activations, gradients): timed messages' transfer times over their link's
     * median, pooled over the links; NULL / 0: none. At most PP_SIM_NOISE_MAX_SAMPLES read. */
    const double *xfer[2];
    uint32_t n_xfer[2];
    /* Per PP_SIM_OWN_* kind: the senders' and receivers' own times over their link's median,
     * pooled; NULL / 0: none. At most PP_SIM_NOISE_MAX_SAMPLES read. */
    const double *own[4];
    uint32_t n_own[4];
} pp_sim_noise_input;

/* Fits the model (docs/sim-dist.md, "The model"): per (stage, kind) the factors and their
 * spread; C's variance from the covariance of different stages' per-step means, D_s's from what
 * the stage's per-step means vary beyond C and beyond a mean of M independent ops; e keeps the
 * rest of the factors' robust spread. Fewer than 8 steps: no per-step parts (e has the robust
 * spread). Free with pp_sim_noise_free. */
pp_status pp_sim_noise_fit(const pp_sim_noise_input *in, pp_sim_noise *out);
void pp_sim_noise_free(pp_sim_noise *n);
/* Sets each stage's level (pp_sim_noise.level) from its measured median busy time and its ops'
 * factors as they are now: the fit calls it, and whoever changes the factors afterwards (the
 * extraction's op_scale) calls it again. Stages without a measured busy time or without step_f
 * keep 1. docs/sim-dist.md, "The busy time's level". */
void pp_sim_noise_level(pp_sim_noise *n);

/* Replays until the median's Monte Carlo error is small enough: n_min (0: 1000) replays,
 * doubled until the median's relative error <= target (0: 0.003, i.e. 0.3%) and the p95's <= 3 x
 * target, at most n_max (0: 65536; never more than PP_SIM_DIST_MAX_REPLAYS). */
typedef struct pp_sim_dist_opts {
    const pp_sim_noise *noise; /* the capture's distribution, or NULL for draw */
    /* Instead of noise: the factor of compute instruction k of `stage` in a replay, from `key`,
     * unique per (seed, replay, stage, k): a jitter spec's draw. NULL with noise NULL: no
     * variation (the distribution is the noise-free step). */
    double (*draw)(void *ctx, int stage, int k, const pp_instr *in, uint64_t key);
    void *draw_ctx;
    uint64_t seed;
    int n_min, n_max;
    double target;
    /* Optional: receives every replay's step (ns), in replay order, res->n of them; room for
     * n_max (capped as above) */
    double *samples;
    /* Optional, with noise: [S] the noise model's stage whose variation stage s takes (its op
     * factors, per-step parts and level); NULL, or an entry outside 0 .. noise->S - 1: s mod
     * noise->S */
    const int *noise_stage;
} pp_sim_dist_opts;

typedef struct pp_sim_dist_result {
    double noise_free_ns;          /* pp_sim_run's step */
    double median_ns, p95_ns, mean_ns;
    /* 95% confidence intervals of the two quantiles: the order statistics a binomial count of
     * replays below the quantile puts around it; err = half-width / value */
    double median_lo_ns, median_hi_ns, p95_lo_ns, p95_hi_ns;
    double median_err, p95_err;
    int n;                         /* replays run */
} pp_sim_dist_result;

/* The step's distribution under `costs` (the noise-free durations) and o's variation: seeded
 * (same seed, same numbers), no allocation per replay (the replay's order is recorded once and
 * re-timed). Transfers vary by noise's xfer factors, unless noise->xfer_fixed or under draw. */
pp_status pp_sim_dist(const pp_schedule *sched, const pp_sim_costs *costs,
                      const pp_sim_dist_opts *o, pp_sim_dist_result *res);

/* The 95% confidence interval of quantile q over sorted v[n] (order statistics: the binomial
 * count of values below the quantile, normal approximation); n >= 1. */
void pp_sim_quantile_ci(const double *v, size_t n, double q, double *lo, double *hi);

/* Convenience: pp_sim_dist of (kind, partition, M) with a cost file. */
pp_status pp_sim_dist_file(pp_schedule_kind kind, const pp_partition *part, int M,
                           const pp_costs *costs, const pp_sim_dist_opts *o,
                           pp_sim_dist_result *res);

#ifdef __cplusplus
}
#endif
#endif /* PP_SIM_H */
