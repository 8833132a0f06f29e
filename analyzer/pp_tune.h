/* pp_tune.h: the tuning driver behind pprof-tune (docs/cli/pprof-tune.md). From runs captured by
 * pprof-run it proposes layouts (the rebalancer, pp_rebalance.h, over the schedules the job can
 * run), explains them (the comparison table and the --formula arithmetic), advises the
 * micro-batch size and count from runs at several sizes (pp_advise.h), verifies that a run ran a
 * plan, and drives the capture-tune-rerun loop of --auto (the job itself is run by the caller's
 * callback: process handling stays in the tool). Files: tune.c (loading, proposals, plans,
 * verification), tune_explain.c (what is printed about one run), tune_advise.c, tune_auto.c.
 * Output goes to the FILE given; diagnostics through the caller's note function. No shared state:
 * concurrent calls on different arguments are safe. */
#ifndef PP_TUNE_H
#define PP_TUNE_H

#include "pp_advise.h"
#include "pp_analyzer.h"
#include "pp_extract.h"
#include "pp_jitter.h"
#include "pp_plan.h"
#include "pp_rebalance.h"
#include "pp_sim.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { PP_TUNE_MAX_KINDS = PP_SCHED_N_KINDS };

/* A diagnostic for stderr ("run X has no layer marks ..."), shown unless quiet and, when
 * verbose_only, only when verbose; the tool's pp_tool_note fits. */
typedef void (*pp_tune_note_fn)(int verbose_only, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

typedef struct pp_tune_opts {
    pp_schedule_kind kinds[PP_TUNE_MAX_KINDS]; /* the schedules to consider, in order, no
                                                  repeats (--schedules) */
    int n_kinds;                  /* 0: not given (the run's own; for advice: all) */
    uint64_t memory_limit_bytes;  /* per stage; 0 = none */
    int no_recompute;             /* 1: never propose activation recomputation (--recompute
                                     none); 0: propose it for the stages that need it to meet the
                                     limit, where the job can recompute (config mark recompute=) */
    double time_budget_s;         /* per rebalancer search; 0 = until optimal */
    int formula;                  /* print the arithmetic behind every proposed number */
    int verbose;                  /* every candidate, every fitted layer */
    pp_tune_note_fn note;         /* may be NULL */
    FILE *detail;                 /* the extraction notes of every run loaded, or NULL */
    /* The op durations' variation the step's median and p95 are predicted with
     * (docs/sim-dist.md): NULL, the run's own (fitted from its capture); else this jitter
     * spec's (--jitter: the sim backend's --sim-jitter distribution). */
    const pp_jitter *jitter;
} pp_tune_opts;

/* The seed of every Monte Carlo prediction the tuner prints (with --jitter, xor the spec's). */
enum { PP_TUNE_DIST_SEED = 1 };

/* The step's distribution of `part` under (kind, M) with costs `c` (NULL: run e's as it ran,
 * pp_extract_run_costs) and o's variation (pp_sim_dist: median, p95, mean, their Monte Carlo
 * errors, the noise-free step). */
pp_status pp_tune_predict_dist(const pp_tune_opts *o, const pp_extract *e, const pp_costs *c,
                               pp_schedule_kind kind, const pp_partition *part, int M,
                               pp_sim_dist_result *res);

/* Analyzes run directory `dir` and extracts its costs (pp_extract.h); errors name the directory,
 * a run without a complete step is PP_ERR_INVALID. The caller frees both. */
pp_status pp_tune_load_run(const pp_tune_opts *o, const char *dir, pp_analysis **a, pp_extract *e);

/* One evaluated layout: the rebalancer's answer for (kind, v, M) at micro-batch size b. */
typedef struct pp_tune_proposal {
    pp_schedule_kind kind;
    int v, M, b;
    int ok;              /* 0: not evaluated, why[] says why */
    char why[512];
    pp_partition part;   /* owned */
    uint8_t *recompute;  /* [L] owned: the layers it recomputes (whole stages); NULL: none */
    pp_costs *rc_costs;  /* owned: the costs with those recomputed; NULL: none */
    char recompute_text[256]; /* pptrain --recompute text ("none", "s1,s3", "full") */
    int recomputed_stages;
    double step_ns, bubble, lower_ns; /* step_ns: the noise-free step */
    pp_sim_dist_result dist;      /* its distribution (pp_tune_search_run; n = 0: none) */
    int exact;
    uint64_t *mem;       /* [S] owned */
    double seconds;
} pp_tune_proposal;

void pp_tune_proposal_free(pp_tune_proposal *p);

/* The layouts considered for one run and the best of them. */
typedef struct pp_tune_search {
    pp_tune_proposal cands[PP_TUNE_MAX_KINDS * 4];
    int n_cands;
    int best;                     /* index into cands */
    char skipped[PP_TUNE_MAX_KINDS][256]; /* "<schedule>: why not" */
    int n_skipped;
    double current_pred_ns, current_bubble; /* the run's own layout, simulated */
    pp_sim_dist_result current_dist;        /* its distribution */
    double measured_ns, measured_p95_ns;    /* median and p95 of the run's steps */
} pp_tune_search;

/* Evaluates the candidates for run e (the run's own schedule, and those of o->kinds the job can
 * run, each at its allowed v) and picks the best predicted median (ties within the Monte Carlo
 * errors: the best noise-free step). Fills `s` (free it with
 * pp_tune_search_free, also after a failure). */
pp_status pp_tune_search_run(const pp_tune_opts *o, const char *dir, const pp_extract *e,
                             pp_tune_search *s);
void pp_tune_search_free(pp_tune_search *s);

/* The comparison of the run's layout with the proposal, the candidates, the --formula view and
 * the framework forms (tune_explain.c). */
void pp_tune_search_print(const pp_tune_opts *o, const char *dir, const pp_extract *e,
                          const pp_tune_search *s, FILE *out);

/* The partition as Megatron-LM and DeepSpeed take it. */
void pp_tune_print_framework_forms(const pp_costs *c, const pp_partition *part, FILE *out);

/* A warning when the model's self-check error (percent) is over 10%, with the likely cause. */
void pp_tune_warn_model_error(double err_pct, int S, FILE *out);

/* A plan for (part, kind, M, b) with its prediction and the run it was made from; a bubble < 0
 * is "unknown", a median or p95 <= 0 absent; `recompute` the --recompute text the plan carries
 * (NULL: none written, the job keeps its own). The caller frees it (pp_plan_free). */
pp_status pp_tune_plan_make(const pp_partition *part, pp_schedule_kind kind, int M, int b,
                            uint64_t mem_limit, double step_ns, double bubble, double median_ns,
                            double p95_ns, const char *baseline, const char *recompute,
                            pp_plan *plan);
/* pp_tune_plan_make and pp_plan_write; errors name the path. */
pp_status pp_tune_plan_write(const pp_partition *part, pp_schedule_kind kind, int M, int b,
                             uint64_t mem_limit, double step_ns, double bubble, double median_ns,
                             double p95_ns, const char *baseline, const char *recompute,
                             const char *path);
/* The recompute text a plan made from proposal p for run e carries: p's choice where the job
 * can recompute (so "none" undoes the run's own), NULL where it cannot. */
const char *pp_tune_plan_recompute(const pp_extract *e, const pp_tune_proposal *p);

/* PP_ERR_INVALID naming the first difference between what run `dir` ran and the plan. */
pp_status pp_tune_check_ran_plan(const char *dir, const pp_extract *e, const pp_plan *plan,
                                 const char *plan_path);

/* How much of a plan's error is the speed of the machine (docs/sim-dist.md "Speed between
 * runs"). A plan is predicted from the costs of the run it was made from (`base`); when the run
 * of the plan (`run`) finds the same layers faster or slower, the prediction misses by that
 * much whatever the model. The layers' compute per micro-batch (pp_costs_layers_us: every
 * layer's forward and backward, the same whatever the layout) is compared between the two runs,
 * and the layout `run` ran is predicted again from base's costs with every layer's compute
 * scaled by their ratio (pp_costs_scale_layers; transfers and the optimizer's terms as they
 * were), with base's variation and run's recomputation: with ratio 1 this is the plan's own
 * prediction. */
typedef struct pp_tune_speed {
    double base_us, run_us;      /* the layers' compute per micro-batch in each run */
    double ratio;                /* run_us / base_us */
    pp_sim_dist_result adjusted; /* run's layout from base's costs at run's speed */
} pp_tune_speed;

/* PP_ERR_INVALID when the runs cannot be compared: other models (layer counts), other
 * micro-batch sizes, no compute measured in one of them, or layers in one of them that do not
 * add up to their ops (pp_extract.layers_unscaled). */
pp_status pp_tune_speed_compare(const pp_tune_opts *o, const pp_extract *base,
                                const pp_extract *run, pp_tune_speed *out);

/* --verify: checks that run `dir` ran `plan` and prints measured against predicted, and with
 * `baseline_dir` the achieved speedup against the predicted one. */
pp_status pp_tune_verify(const pp_tune_opts *o, const pp_plan *plan, const char *plan_path,
                         const char *dir, const char *baseline_dir, FILE *out);

/* --advise: costs fitted against the micro-batch size over several runs, and every micro-batch
 * count x schedule for the global batch ranked by its simulated step (tune_advise.c). */
typedef struct pp_tune_advice {
    int n_runs;
    int *sizes;                   /* [n_runs] samples per micro-batch of each run */
    pp_analysis **analyses;       /* [n_runs] */
    pp_extract *runs;             /* [n_runs] */
    pp_advise_fit fit;
    int64_t global_batch;         /* G */
    pp_tune_proposal *cands;      /* sorted: valid ones by step, then the ruled-out */
    int n_cands;
    double ref_ns;                /* run 1's layout predicted by the fit, 0 when unknown */
    int clamped;                  /* fitted times below 0 clamped to 0 */
    int n_failed;                 /* combinations ruled out */
    char fail_msg[512];           /* the first reason one was ruled out */
    const char *first_dir;
} pp_tune_advice;

/* Loads the runs (`mb_sizes`, when not NULL, gives each run's micro-batch size), fits their
 * costs and settles the global batch (`G`, 0: the first run's samples per step); then
 * pp_tune_advise_print_fit shows the fit. Free `adv` with pp_tune_advice_free, also after a
 * failure. */
pp_status pp_tune_advise_fit(const pp_tune_opts *o, const char *const *dirs, int n,
                             const int *mb_sizes, int64_t G, pp_tune_advice *adv);
void pp_tune_advise_print_fit(const pp_tune_opts *o, const pp_tune_advice *adv, FILE *out);
/* Ranks every (M, schedule, v) for the global batch; then pp_tune_advise_print shows the
 * ranking and the best (adv->cands[0]). */
pp_status pp_tune_advise_search(const pp_tune_opts *o, pp_tune_advice *adv);
void pp_tune_advise_print(const pp_tune_opts *o, const pp_tune_advice *adv, FILE *out);
void pp_tune_advice_free(pp_tune_advice *adv);

/* --auto: runs the job (iteration 0 as it is, then with each new plan), tunes from the last
 * run, and repeats while the measured gain is >= 1%, up to max_iters re-runs (tune_auto.c). */
typedef struct pp_tune_job {
    /* Runs the job under pprof-run into run directory `dir`, its output to `log`, with
     * PPROF_PLAN=plan when plan is not NULL. *failed = 1 when the job did not succeed (the
     * callback has said so); a status other than PP_OK stops the loop. */
    pp_status (*run)(void *ctx, int iter, const char *dir, const char *plan, const char *log,
                     int *failed);
    void *ctx;
} pp_tune_job;

typedef struct pp_tune_auto_opts {
    pp_tune_opts tune;
    const char *outdir;          /* exists; iterations, plans and pictures go there */
    int max_iters;
    int gantt;                   /* draw each iteration's Gantt picture (gnuplot found) */
    /* an iteration whose steps fall into two speed regimes (pp_aregimes: the machine changed
     * speed during the run) runs again, up to this many times; the last run is measured */
    int rerun_disturbed;
    pp_tune_job job;
} pp_tune_auto_opts;

/* The loop and its summary table on `out`, and OUTDIR/best-plan.json. *job_failed = 1 when a
 * run of the job failed: at iteration 0 nothing is printed; later the iterations measured so far
 * are still reported. */
pp_status pp_tune_auto(const pp_tune_auto_opts *ao, FILE *out, int *job_failed);

#ifdef __cplusplus
}
#endif
#endif /* PP_TUNE_H */
