/* check_internal.h: what the files of pprof-check's library share (internal to analyzer/):
 * check.c (runs and their inputs), check_stats.c (statistics), check_baseline.c (the baseline
 * file), check_compare.c (verdicts), check_output.c (table, JSON, JUnit, Markdown) and the
 * summary reader in summary.c. The public interface is pp_check.h. */
#ifndef PP_CHECK_INTERNAL_H
#define PP_CHECK_INTERNAL_H

#include "pp_check.h"
#include "pp_json.h"

#include <cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* The bound on numbers read from summaries and baselines (finite, far beyond any figure). */
#define PP_CHECK_BIG 1e300
/* FNV-1a 64-bit offset basis: layer fingerprints and per-metric bootstrap seeds. */
#define PP_CHECK_FNV_OFFSET 14695981039346656037ull

/* ---- families and runs (check.c) ----------------------------------------------------------- */

/* An empty run (one run, no metrics) read from source; NULL when out of memory. */
pp_check_run *pp_check_run_new(const char *source, const char *kind);

/* The family named s ("step_ms", ...), -1 for none. */
int pp_check_kind_by_name(const char *s);
/* The family's default --threshold (% of the baseline, points when absolute). */
double pp_check_kind_default_threshold(pp_check_kind k);
/* The unit its metrics are given in; throughput's depends on what the shape announces. */
const char *pp_check_kind_unit(pp_check_kind k, const pp_check_shape *shape);
/* Appends a metric (samples copied; the value is their median, or `value` without samples),
 * in its family's unit for r's shape (set the shape first). A name already there is
 * PP_ERR_INVALID. */
pp_status pp_check_run_add(pp_check_run *r, const char *name, pp_check_kind kind,
                           const double *samples, size_t n, double value);
/* The metrics a summary and an analysis both give: step time, throughput and bubble from
 * step_ms[] and bubble[] (n steps; NAN bubbles skipped); tmp holds n doubles. */
pp_status pp_check_add_step_metrics(pp_check_run *r, const double *step_ms,
                                    const double *bubble, size_t n, double *tmp);
/* "link<src>-<dst>.act|grad.bandwidth_GBps" */
void pp_check_link_name(char *buf, size_t cap, int src, int dst, int grad);
/* "stageS.peak_mem_MiB": a stage's memory peak, from the analysis and from summaries alike. */
void pp_check_peak_mem_name(char *buf, size_t cap, int stage);
/* "samples/s", "tokens/s" or "steps/s", by what the shape announces; *per_step the count. */
const char *pp_check_throughput_unit(const pp_check_shape *s, double *per_step);
/* The family of a metric name as pprof-check writes it, -1 for any other: step_ms, throughput,
 * bubble_ratio, stageS.fwd_ms|bwd_ms, linkA-B.act|grad.bandwidth_GBps, in exactly that form
 * (no "stage02"). *a and *b get the stage or the link's ends (-1 when none). The one grammar of
 * metric names: baselines are read and --threshold is parsed by it. */
int pp_check_metric_name_kind(const char *s, int *a, int *b);
uint64_t pp_check_fnv1a(uint64_t h, const void *data, size_t n);
/* The pipeline object of a summary or the shape object of a baseline (the same fields). */
pp_status pp_check_shape_read(const cJSON *p, const char *ctx, pp_check_shape *s);
/* Writes those fields into the open object (null for what is unknown): the summary's pipeline
 * and the baseline's shape, which pp_check_shape_read reads back. */
void pp_check_shape_put(pp_json_writer *w, const pp_check_shape *s);
/* Layer names from an array of strings (baseline) or of objects with "name" (summary). */
pp_status pp_check_shape_read_layers(const cJSON *arr, const char *ctx, const char *key,
                                     pp_check_shape *s);

/* A metric's "name", "family", "unit" and "better" members, as the baseline file and the JSON
 * report both begin a metric (check_output.c). */
void pp_check_put_identity(pp_json_writer *w, const char *name, pp_check_kind kind,
                           const char *unit);
/* The "notes" member: notes' '\n'-separated lines as an array of strings (each cut at 1023
 * bytes), with which the JSON report and the history's JSON both end (check_output.c). */
void pp_check_put_notes(pp_json_writer *w, const char *notes);

/* ---- text, XML and Markdown pieces (check_output.c) the history's outputs share too -------- */

/* notes' '\n'-separated lines after a blank line (nothing without notes): "note: <line>" for the
 * table; with markdown a Markdown list, "- <line>" escaped and each cut at 1023 bytes. */
void pp_check_print_notes(FILE *f, const char *notes, int markdown);
/* s as XML text or attribute value: the five special characters escaped, control bytes but tab
 * and newline written as '?' (XML 1.0 does not allow them). */
void pp_check_xml_text(FILE *f, const char *s);
/* Text for a Markdown table cell or inline code: '|' escaped, newlines and backticks as spaces. */
void pp_check_md_text(FILE *f, const char *s);

/* ---- the baseline file (check_baseline.c) -------------------------------------------------- */

/* The median of the finite values of x[0..n) (NAN when none); the value of a set's metric. */
double pp_check_median_finite(const double *x, size_t n);
/* Which shape fields differ, as "M 8 -> 16, schedule 1f1b -> gpipe"; "" when comparable
 * (check_compare.c). */
void pp_check_shape_diff(const pp_check_shape *a, const pp_check_shape *b, char *buf, size_t cap);
/* The samples of run k of metric m: *off is where they start in m->samples. */
size_t pp_check_run_slice(const pp_check_metric *m, size_t k, size_t *off);

/* Reads a parsed baseline file into r (docs/baseline-format.md). */
pp_status pp_check_baseline_read(const cJSON *root, pp_check_run *r);

/* ---- statistics (check_stats.c) ------------------------------------------------------------ */

/* The statistics a baseline writes next to each metric's samples (docs/baseline-format.md). */
enum { PP_SS_MEAN, PP_SS_MEDIAN, PP_SS_P95, PP_SS_MAX, PP_SS_MIN, PP_SS_COUNT };

typedef struct pp_check_sample_stats_t {
    double v[PP_SS_COUNT];
} pp_check_sample_stats_t;

/* Mean, median, p95 (linear interpolation), max and min of x[0..n), n >= 1. */
pp_status pp_check_sample_stats(const double *x, size_t n, pp_check_sample_stats_t *out);

#endif /* PP_CHECK_INTERNAL_H */
