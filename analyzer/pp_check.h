/* pp_check.h: the comparison library behind pprof-check, the statistical performance-regression
 * gate. It turns runs (a run directory's analysis, a `pprof-report --json` summary, or a saved
 * baseline of one or several runs) into per-metric samples per run, writes and reads the
 * versioned baseline format (docs/baseline-format.md), compares two sets of runs metric by metric
 * with a threshold and a run-level test (Welch's t on the runs' medians, Holm-adjusted; or, where
 * steps are independent, Mann-Whitney U on the per-step samples), says how many runs a change of
 * the threshold's size needs, finds change points in a history of runs (E-Divisive means), and
 * writes the verdicts as a table, JSON, JUnit XML or Markdown (docs/cli/pprof-check.md).
 *
 * Ownership: every *_free / *_destroy takes NULL. A pp_check_run and a pp_check_result own all
 * their memory; a result does not point into the runs it came from. Nothing here keeps global
 * state: all functions are safe to call from several threads on different objects. */
#ifndef PP_CHECK_H
#define PP_CHECK_H

#include "pp_analyzer.h"
#include "pp_common.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "baseline_version" of the baseline files written here; readers refuse other versions. */
#define PP_BASELINE_VERSION 2
/* The older version readers still take (one run, its metrics at the top level). */
#define PP_BASELINE_VERSION_V1 1
/* "check_version" of pprof-check's JSON output. */
#define PP_CHECK_JSON_VERSION 2
/* "history_version" of pprof-check --history's JSON output. */
#define PP_CHECK_HISTORY_JSON_VERSION 1

#define PP_CHECK_ALPHA_DEFAULT 0.01
#define PP_CHECK_BOOTSTRAP_DEFAULT 2000
/* Exact Mann-Whitney null distribution up to this many samples per side (and no ties); the
 * normal approximation with tie and continuity corrections beyond. */
#define PP_CHECK_EXACT_MAX 50
/* The power the "runs needed" statement is made at. */
#define PP_CHECK_POWER_DEFAULT 0.8
/* Runs one set may hold (a baseline, the current runs, a history's entry). */
#define PP_CHECK_MAX_RUNS 4096

/* Metric families; a threshold applies to a family or to one named metric. */
typedef enum pp_check_kind {
    PP_CHECK_STEP = 0,       /* step_ms */
    PP_CHECK_THROUGHPUT = 1, /* throughput: samples/s, tokens/s or steps/s per step */
    PP_CHECK_BUBBLE = 2,     /* bubble_ratio; threshold and change in percentage points */
    PP_CHECK_FWD = 3,        /* stageS.fwd_ms: a step's mean forward per micro-batch */
    PP_CHECK_BWD = 4,        /* stageS.bwd_ms */
    PP_CHECK_BANDWIDTH = 5,  /* linkA-B.act|grad.bandwidth_GBps: no per-step samples, untested */
    PP_CHECK_PEAK_MEM = 6,   /* stageS.peak_mem_MiB: the stage's total memory peak (docs/metrics.md
                                "Memory"); one value, deterministic: judged by its change alone */
    PP_CHECK_KIND_COUNT = 7
} pp_check_kind;

/* The family's name as written in --threshold and in baselines ("step_ms", "throughput",
 * "bubble_ratio", "fwd_ms", "bwd_ms", "bandwidth_GBps", "peak_mem_MiB"). */
const char *pp_check_kind_name(pp_check_kind k);
/* Higher values are better for throughput and bandwidth, worse for the others. */
int pp_check_kind_higher_is_better(pp_check_kind k);
/* Change and threshold in percentage points of the value (bubble) instead of percent. */
int pp_check_kind_is_absolute(pp_check_kind k);
/* A value without run-to-run noise (peak memory: the job's allocations): an untested change
 * beyond its threshold is a regression or an improvement, not just "changed". */
int pp_check_kind_is_deterministic(pp_check_kind k);

typedef struct pp_check_metric {
    char name[64]; /* "step_ms", "stage2.fwd_ms", "link0-1.act.bandwidth_GBps", ... */
    pp_check_kind kind;
    char unit[16]; /* "ms", "samples/s", "ratio", "GB/s", ... */
    size_t n;      /* per-step samples of all runs, run after run; 0 when only summary values
                    * are known */
    double *samples;
    double value;  /* the median over runs of each run's value (one run: its median) */
    /* one entry per run of the owning pp_check_run (n_runs of them): */
    size_t *run_n;       /* that run's samples (their slice of samples[], in run order) */
    double *run_values;  /* that run's median, else its summary value; NAN: the run lacks it */
} pp_check_metric;

/* What must match for two runs to be comparable. */
typedef struct pp_check_shape {
    int S, M, v;         /* M = 0 when unknown */
    char schedule[32];   /* "" when unknown */
    int n_layers;        /* 0 when the job emits no layer ranges */
    char layer_fp[32];   /* "fnv1a64:<hex>" of the layer names in order, "" without layers */
    char layer_names[512]; /* the names, comma-separated, for messages (may be cut short) */
    double samples_per_step, tokens_per_step; /* 0 when unknown */
} pp_check_shape;

/* One run of a set: where it came from and, in a history, its label and time. */
typedef struct pp_check_run_info {
    char source[512];     /* the run directory or summary, as given ("" when unknown) */
    char label[128];      /* a commit or CI run ("" when none) */
    char time[32];        /* ISO 8601 UTC of the run or its commit ("" when unknown) */
    size_t n_steps;       /* its analyzed steps */
} pp_check_run_info;

/* One run or several runs of one configuration (a baseline, the current runs), as one object:
 * the metrics pool their samples and keep each run's median. */
typedef struct pp_check_run {
    char source[512];     /* the path it was read from */
    char source_kind[16]; /* "run", "summary" or "baseline" */
    /* provenance: for a baseline file, what it recorded; else empty */
    char origin[512];     /* the run or summary the baseline was made from */
    char created[32], host[64], version[32];
    pp_check_shape shape;
    size_t n_steps;       /* per-step samples per metric (the analyzed steps of all runs) */
    size_t n_metrics;
    pp_check_metric *metrics;
    size_t n_runs;        /* >= 1 */
    pp_check_run_info *runs;
    char warnings[1024];  /* problems of the input worth printing ('\n'-separated) */
} pp_check_run;

/* The metrics of an analysis (its per-step samples). */
pp_status pp_check_run_from_analysis(const pp_analysis *a, const char *source, pp_check_run **out);
/* A run directory (analyzed with `warmup` steps skipped, < 0: the analyzer's default), a summary
 * JSON or a baseline file, told apart by what path is. Problems are PP_ERR_INVALID / PP_ERR_IO
 * with messages that name the path. */
pp_status pp_check_run_load(const char *path, int warmup, pp_check_run **out);
/* A summary or baseline text (ctx names it in messages). */
pp_status pp_check_run_parse(const char *text, const char *ctx, pp_check_run **out);
void pp_check_run_free(pp_check_run *r);
/* Appends the runs of src to dst (the same shape, else PP_ERR_INVALID naming what differs): a
 * metric only one of them has keeps NAN for the other's runs. At most PP_CHECK_MAX_RUNS runs. */
pp_status pp_check_run_append(pp_check_run *dst, const pp_check_run *src);
/* Loads every path (as pp_check_run_load) into one set of runs (n >= 1). */
pp_status pp_check_runs_load(const char *const *paths, size_t n, int warmup, pp_check_run **out);
/* Sets run k's label and time (NULL: unchanged), as a history records them. */
void pp_check_run_label(pp_check_run *r, size_t k, const char *label, const char *time);
/* Writes r (all its runs) as a baseline file (docs/baseline-format.md); created/host/version are recorded as
 * provenance (NULL: now, this host, "unknown"). */
pp_status pp_check_baseline_write(const pp_check_run *r, const char *version, FILE *out);
/* One line such as "S=4 M=8 v=1 1f1b, 4 layers" for messages and reports. */
void pp_check_shape_format(const pp_check_shape *s, char *buf, size_t cap);

/* ---- statistics (textbook definitions; docs/cli/pprof-check.md) --------------------------- */

typedef struct pp_check_mwu {
    double u;     /* U of the first sample: pairs (x_i, y_j) with x_i > y_j, ties counting 1/2 */
    double z;     /* the normal approximation's z (0 when exact) */
    double p;     /* two-sided p-value */
    int exact;    /* 1: from the exact null distribution (no ties, both n <= EXACT_MAX) */
} pp_check_mwu;

/* Two-sided Mann-Whitney U test of x against y (nx, ny >= 1). PP_ERR_NOMEM only. */
pp_status pp_check_mann_whitney(const double *x, size_t nx, const double *y, size_t ny,
                                pp_check_mwu *out);
/* Median (mean of the two middle values for even n); NAN for n = 0. x is not changed. */
double pp_check_median(const double *x, size_t n);
/* Percentile bootstrap interval at `level` (e.g. 0.99) of median(y)/median(x) - 1 (ratio = 1)
 * or median(y) - median(x) (ratio = 0), from `reps` resamplings drawn with pp_rng seeded by
 * `seed`: the same inputs give the same interval. */
pp_status pp_check_bootstrap(const double *x, size_t nx, const double *y, size_t ny, int ratio,
                             double level, int reps, uint64_t seed, double *lo, double *hi);
/* Holm-Bonferroni adjusted p-values: adj[i] <= alpha rejects with family-wise error <= alpha. */
pp_status pp_check_holm(const double *p, size_t n, double *adj);

/* Student's t distribution: the two-sided tail P(|T| >= |t|) for df > 0 degrees of freedom
 * (through the regularized incomplete beta function), and its inverse: the t with that tail. */
double pp_check_t_tail2(double t, double df);
double pp_check_t_quantile2(double p, double df);

typedef struct pp_check_ttest {
    double diff;      /* mean(y) - mean(x) */
    double se;        /* its standard error */
    double t, df, p;  /* statistic, degrees of freedom, two-sided p */
    double lo, hi;    /* the (level) confidence interval of diff */
    int pooled;       /* 1: one side has one value; the other side's variance stands for both */
} pp_check_ttest;

/* Welch's two-sample t-test of y against x (nx, ny >= 2), or with one value on one side the
 * pooled test with the other side's variance (the other >= 2). PP_ERR_INVALID otherwise. */
pp_status pp_check_welch(const double *x, size_t nx, const double *y, size_t ny, double level,
                         pp_check_ttest *out);
/* Runs per side a two-sided two-sample t-test at `alpha` needs to detect a shift of `delta`
 * with probability `power` when runs scatter with standard deviation `sd` (normal values);
 * 0 when sd is not positive, more than `cap` reported as cap + 1. */
int pp_check_runs_needed(double delta, double sd, double alpha, double power, int cap);
/* The smallest shift the t-test at `alpha` detects with probability `power` with nb and nc runs
 * (Welch's df taken as nb + nc - 2; one run on one side: the pooled test's); NAN without sd or
 * with one run a side. power >= 0.5. */
double pp_check_detectable(double sd, size_t nb, size_t nc, double alpha, double power);

/* ---- comparison --------------------------------------------------------------------------- */

typedef enum pp_check_verdict {
    PP_VERDICT_OK = 0,          /* within its threshold */
    PP_VERDICT_REGRESSION = 1,  /* worse beyond the threshold and significant: fails the gate */
    PP_VERDICT_IMPROVEMENT = 2, /* better beyond the threshold and significant */
    PP_VERDICT_NOISE = 3,       /* beyond the threshold but not significant */
    /* (with one run a side and no per-step test, the threshold alone decides regression and
     * improvement: the row says so, and a note warns) */
    PP_VERDICT_CHANGED = 4,     /* beyond the threshold, no samples to test (reported only) */
    PP_VERDICT_MISSING = 5      /* only one of the runs has it (allowed shape change) */
} pp_check_verdict;

const char *pp_check_verdict_name(pp_check_verdict v);

typedef struct pp_check_override {
    char metric[64]; /* a family name or one metric's name */
    double value;
} pp_check_override;

enum { PP_CHECK_MAX_OVERRIDES = 64 };

typedef struct pp_check_options {
    double alpha;                                /* default 0.01 */
    int holm;                                    /* 1 (default): Holm over the tested metrics */
    int bootstrap_reps;                          /* default 2000; 0: no interval */
    uint64_t seed;                               /* bootstrap seed */
    double threshold[PP_CHECK_KIND_COUNT];       /* % (points for bubble) */
    int n_overrides;
    pp_check_override overrides[PP_CHECK_MAX_OVERRIDES];
    int allow_shape_change;
    int per_step;                                /* 1: Mann-Whitney on the per-step samples */
    double power;                                /* of the "runs needed" statement (0.8) */
    int permutations;                            /* history: per split (default 1999) */
    int min_segment;                             /* history: entries per level (default 3) */
} pp_check_options;

void pp_check_options_default(pp_check_options *o);
/* --threshold METRIC=PCT: METRIC a family or metric name, PCT >= 0 with an optional '%'. */
pp_status pp_check_threshold_parse(pp_check_options *o, const char *arg);

typedef struct pp_check_row {
    char name[64];
    pp_check_kind kind;
    char unit[16];        /* the baseline's (or the only side's) */
    int unit_differs;     /* 1: the runs give it in different units (unit_cur): not compared */
    char unit_cur[16];
    int higher_is_better, absolute;
    double base, cur;     /* medians (or summary values); NAN when missing on that side */
    double change;        /* % of base (points for bubble) */
    double threshold;     /* same unit as change */
    size_t n_base, n_cur;
    size_t runs_base, runs_cur; /* runs that have it */
    int tested;           /* 1: a test ran (test says which) */
    const char *test;     /* "welch", "pooled-t", "mann-whitney", "threshold-only" or NULL */
    int exact;
    double u;             /* Mann-Whitney's U; NAN otherwise */
    double t, df;         /* the t-test's statistic and degrees of freedom; NAN otherwise */
    double p, p_adj;      /* NAN when untested */
    double run_sd;        /* between-run standard deviation, in change's unit; NAN unknown */
    int runs_needed;      /* runs per side to detect a change of the threshold; 0 unknown */
    double detectable;    /* the change these runs detect at the power, change's unit; NAN */
    int has_ci;
    double ci_lo, ci_hi;  /* bootstrap interval of the change, same unit as change */
    pp_check_verdict verdict;
} pp_check_row;

typedef struct pp_check_result {
    char base_source[512], cur_source[512];
    char base_kind[16], cur_kind[16];
    char base_shape[160], cur_shape[160];
    size_t base_steps, cur_steps;
    size_t base_runs, cur_runs;
    double alpha, power;
    int holm, bootstrap_reps, per_step;
    int shape_differs;   /* the shapes differ and allow_shape_change let it through */
    size_t n_rows;
    pp_check_row *rows;
    int n_tested, n_regressions, n_improvements, n_noise, n_changed;
    int threshold_only;  /* 1: one run a side: the thresholds alone decided */
    int runs_needed;     /* the most any tested metric needs (0 unknown), for the note */
    char notes[2048];    /* warnings for the reader ('\n'-separated) */
} pp_check_result;

/* Compares cur against base. Different shapes are PP_ERR_INVALID (naming both) unless
 * o->allow_shape_change. */
pp_status pp_check_compare(const pp_check_run *base, const pp_check_run *cur,
                           const pp_check_options *o, pp_check_result **out);
void pp_check_result_free(pp_check_result *r);
/* 1 when any row is a regression (the gate fails). */
int pp_check_failed(const pp_check_result *r);

/* Outputs (docs/cli/pprof-check.md). PP_ERR_IO when writing fails. */
pp_status pp_check_write_table(const pp_check_result *r, FILE *out);
pp_status pp_check_write_json(const pp_check_result *r, FILE *out);
pp_status pp_check_write_junit(const pp_check_result *r, FILE *out);
pp_status pp_check_write_markdown(const pp_check_result *r, FILE *out);
/* One self-contained HTML page (check_html.c): verdict, runs, test, every metric with its change
 * drawn against its threshold, notes; numbers carry data-key = their JSON report's field. */
pp_status pp_check_write_html(const pp_check_result *r, FILE *out);

/* ---- history and change points (check_history.c) ----------------------------------------- */

#define PP_CHECK_PERMUTATIONS_DEFAULT 1999
#define PP_CHECK_MIN_SEGMENT_DEFAULT 3
/* Entries a history may hold (E-Divisive's table is (n+1)^2 doubles, each shuffle O(n^2)). */
#define PP_CHECK_MAX_HISTORY 1000

/* E-Divisive means (Matteson and James 2014, exponent 1) over x[0..n): the split (and cut:
 * a level may end before its segment does) that most separates the distributions, kept when a
 * permutation test (`permutations` shuffles of the segment or more, seeded) gives p below
 * alpha / 2^k for the k-th split (so a series without a change shows a false change point with
 * probability below alpha), then each side split again. Segments hold at least min_segment
 * values. cps[] gets the first index of each new level in increasing order, ps[]
 * (may be NULL) their p-values; at most cap of them, *n_cps their count. */
pp_status pp_check_change_points(const double *x, size_t n, double alpha, int permutations,
                                 int min_segment, uint64_t seed, size_t *cps, double *ps,
                                 size_t cap, size_t *n_cps);

typedef struct pp_check_cp {
    size_t index;           /* the first entry of the new level */
    double before, after;   /* medians of the levels on either side */
    double change;          /* % of before (points when absolute) */
    double p;               /* the permutation test's p of the split */
    pp_check_verdict verdict; /* regression / improvement beyond the threshold, else ok */
} pp_check_cp;

typedef struct pp_check_series {
    char name[64];
    pp_check_kind kind;
    char unit[16];
    int higher_is_better, absolute;
    double threshold;       /* change's unit */
    double *values;         /* one per entry (the entry's value), NAN when it lacks it */
    size_t n_values;        /* the finite ones, which the change points are found over */
    size_t n_cps;
    pp_check_cp *cps;
} pp_check_series;

typedef struct pp_check_history {
    char dir[512];
    size_t n_entries;
    pp_check_run_info *entries; /* in order: source is the file, label and time as recorded */
    size_t n_series;
    pp_check_series *series;
    double alpha;           /* per metric, Bonferroni over the metrics */
    int permutations, min_segment;
    int n_cps, n_regressions, n_improvements;
    char notes[2048];
} pp_check_history;

/* Writes r (one run, or a set of them as one entry) into dir as <time>-<label>.json with that
 * label and time (label NULL: "run"; time NULL: now); *path_out (cap bytes) names the file. */
pp_status pp_check_history_record(const char *dir, pp_check_run *r, const char *label,
                                  const char *time, const char *version, char *path_out,
                                  size_t cap);
/* Reads every *.json of dir (summaries or baselines, one entry each), in order of their time
 * (then label, then file name), and finds each metric's change points. */
pp_status pp_check_history_analyze(const char *dir, const pp_check_options *o,
                                   pp_check_history **out);
void pp_check_history_free(pp_check_history *h);
/* 1 when some change point is a regression. */
int pp_check_history_failed(const pp_check_history *h);
pp_status pp_check_history_write_table(const pp_check_history *h, FILE *out);
pp_status pp_check_history_write_json(const pp_check_history *h, FILE *out);
pp_status pp_check_history_write_junit(const pp_check_history *h, FILE *out);
pp_status pp_check_history_write_markdown(const pp_check_history *h, FILE *out);
/* One self-contained HTML page (check_html.c): the change points, then each metric's history as
 * an inline SVG chart with its change points marked. */
pp_status pp_check_history_write_html(const pp_check_history *h, FILE *out);
/* One gnuplot chart per metric: prefix<metric>.dat and .gp (and .png when gnuplot is on PATH
 * and render is 1), each change point a vertical line with its label. */
pp_status pp_check_history_write_charts(const pp_check_history *h, const char *prefix,
                                        int render);

#ifdef __cplusplus
}
#endif
#endif /* PP_CHECK_H */
