/* pp_check.h: the comparison library behind pprof-check, the statistical performance-regression
 * gate. It turns a run (a run directory's analysis, a `pprof-report --json` summary, or a saved
 * baseline) into per-metric per-step samples, writes and reads the versioned baseline format
 * (docs/baseline-format.md), compares two runs metric by metric with a threshold and a
 * Mann-Whitney U test (Holm-adjusted) plus a bootstrap interval of the change, and writes the
 * verdicts as a table, JSON, JUnit XML or Markdown (docs/cli/pprof-check.md).
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
#define PP_BASELINE_VERSION 1
/* "check_version" of pprof-check's JSON output. */
#define PP_CHECK_JSON_VERSION 1

#define PP_CHECK_ALPHA_DEFAULT 0.01
#define PP_CHECK_BOOTSTRAP_DEFAULT 2000
/* Exact Mann-Whitney null distribution up to this many samples per side (and no ties); the
 * normal approximation with tie and continuity corrections beyond. */
#define PP_CHECK_EXACT_MAX 50

/* Metric families; a threshold applies to a family or to one named metric. */
typedef enum pp_check_kind {
    PP_CHECK_STEP = 0,       /* step_ms */
    PP_CHECK_THROUGHPUT = 1, /* throughput: samples/s, tokens/s or steps/s per step */
    PP_CHECK_BUBBLE = 2,     /* bubble_ratio; threshold and change in percentage points */
    PP_CHECK_FWD = 3,        /* stageS.fwd_ms: a step's mean forward per micro-batch */
    PP_CHECK_BWD = 4,        /* stageS.bwd_ms */
    PP_CHECK_BANDWIDTH = 5,  /* linkA-B.act|grad.bandwidth_GBps: no per-step samples, untested */
    PP_CHECK_KIND_COUNT = 6
} pp_check_kind;

/* The family's name as written in --threshold and in baselines ("step_ms", "throughput",
 * "bubble_ratio", "fwd_ms", "bwd_ms", "bandwidth_GBps"). */
const char *pp_check_kind_name(pp_check_kind k);
/* Higher values are better for throughput and bandwidth, worse for the others. */
int pp_check_kind_higher_is_better(pp_check_kind k);
/* Change and threshold in percentage points of the value (bubble) instead of percent. */
int pp_check_kind_is_absolute(pp_check_kind k);

typedef struct pp_check_metric {
    char name[64]; /* "step_ms", "stage2.fwd_ms", "link0-1.act.bandwidth_GBps", ... */
    pp_check_kind kind;
    char unit[16]; /* "ms", "samples/s", "ratio", "GB/s", ... */
    size_t n;      /* per-step samples; 0 when only a summary value is known (untestable) */
    double *samples;
    double value;  /* median of the samples, else the summary value */
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

typedef struct pp_check_run {
    char source[512];     /* the path it was read from */
    char source_kind[16]; /* "run", "summary" or "baseline" */
    /* provenance: for a baseline file, what it recorded; else empty */
    char origin[512];     /* the run or summary the baseline was made from */
    char created[32], host[64], version[32];
    pp_check_shape shape;
    size_t n_steps;       /* per-step samples per metric (the analyzed steps) */
    size_t n_metrics;
    pp_check_metric *metrics;
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
/* Writes r as a baseline file (docs/baseline-format.md); created/host/version are recorded as
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

/* ---- comparison --------------------------------------------------------------------------- */

typedef enum pp_check_verdict {
    PP_VERDICT_OK = 0,          /* within its threshold */
    PP_VERDICT_REGRESSION = 1,  /* worse beyond the threshold and significant: fails the gate */
    PP_VERDICT_IMPROVEMENT = 2, /* better beyond the threshold and significant */
    PP_VERDICT_NOISE = 3,       /* beyond the threshold but not significant */
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
    int tested;           /* 1: Mann-Whitney ran on per-step samples */
    int exact;
    double u, p, p_adj;   /* NAN when untested */
    int has_ci;
    double ci_lo, ci_hi;  /* bootstrap interval of the change, same unit as change */
    pp_check_verdict verdict;
} pp_check_row;

typedef struct pp_check_result {
    char base_source[512], cur_source[512];
    char base_kind[16], cur_kind[16];
    char base_shape[160], cur_shape[160];
    size_t base_steps, cur_steps;
    double alpha;
    int holm, bootstrap_reps;
    int shape_differs;   /* the shapes differ and allow_shape_change let it through */
    size_t n_rows;
    pp_check_row *rows;
    int n_tested, n_regressions, n_improvements, n_noise, n_changed;
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

#ifdef __cplusplus
}
#endif
#endif /* PP_CHECK_H */
