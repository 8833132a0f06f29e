/* check_output.c: pprof-check's verdicts for people and machines (docs/cli/pprof-check.md): the
 * table on stdout, the JSON report (through the common JSON writer), JUnit XML for CI systems and
 * Markdown for pull-request comments. Formats only: every figure comes from pp_check_result. */
#include "check_internal.h"
#include "pp_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ======================================================================================== */
/* Outputs                                                                                    */
/* ======================================================================================== */

static void fmt_value(const pp_check_row *w, double v, char *buf, size_t cap)
{
    if (!isfinite(v))
        snprintf(buf, cap, "-");
    else if (w->absolute)
        snprintf(buf, cap, "%.2f%%", v * 100);
    else if (strcmp(w->unit, "ms") == 0)
        snprintf(buf, cap, "%.3f", v);
    else
        snprintf(buf, cap, "%.4g", v);
}

static const char *change_unit(const pp_check_row *w) { return w->absolute ? " pt" : "%"; }

static void fmt_change(const pp_check_row *w, double v, char *buf, size_t cap)
{
    if (!isfinite(v))
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%+.2f%s", v, change_unit(w));
}

static void fmt_threshold(const pp_check_row *w, char *buf, size_t cap)
{
    snprintf(buf, cap, "%.3g%s", w->threshold, change_unit(w));
}

static int threshold_only(const pp_check_row *w)
{
    return w->test && strcmp(w->test, "threshold-only") == 0;
}

static void fmt_ci(const pp_check_row *w, char *buf, size_t cap)
{
    if (!w->has_ci)
        snprintf(buf, cap, "%s", w->tested ? "-" : threshold_only(w) ? "one run a side"
                                                                      : "no test");
    else
        snprintf(buf, cap, "[%+.2f, %+.2f]%s", w->ci_lo, w->ci_hi, change_unit(w));
}

static void fmt_p(const pp_check_row *w, char *buf, size_t cap)
{
    if (!w->tested)
        snprintf(buf, cap, "%s", threshold_only(w) ? "threshold" : "no test");
    else if (w->p_adj < 1e-4)
        snprintf(buf, cap, "%.1e", w->p_adj);
    else
        snprintf(buf, cap, "%.4f", w->p_adj);
}

/* A row's figures as every output prints them. */
typedef struct cells {
    char base[32], cur[32], change[32], threshold[32], ci[64], p[32];
} cells;

static void cells_of(const pp_check_row *w, cells *c)
{
    fmt_value(w, w->base, c->base, sizeof c->base);
    fmt_value(w, w->cur, c->cur, sizeof c->cur);
    fmt_change(w, w->change, c->change, sizeof c->change);
    fmt_threshold(w, c->threshold, sizeof c->threshold);
    fmt_ci(w, c->ci, sizeof c->ci);
    fmt_p(w, c->p, sizeof c->p);
}

static void names_of(const pp_check_result *r, pp_check_verdict v, char *buf, size_t cap)
{
    buf[0] = '\0';
    size_t len = 0;
    for (size_t i = 0; i < r->n_rows && len < cap; i++)
        if (r->rows[i].verdict == v) {
            int w = snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", r->rows[i].name);
            len += w > 0 ? (size_t)w : 0;
        }
}

static void test_line(const pp_check_result *r, char *buf, size_t cap)
{
    if (r->per_step)
        snprintf(buf, cap, "Mann-Whitney U on per-step samples (--per-step), two-sided, alpha "
                           "%g%s; interval: %g%% bootstrap of the change in medians (%d "
                           "resamples)",
                 r->alpha, r->holm ? ", Holm-adjusted over the tested metrics" : "",
                 (1 - r->alpha) * 100, r->bootstrap_reps);
    else if (r->base_runs < 2 && r->cur_runs < 2)
        snprintf(buf, cap, "none: one run on each side, the thresholds decide (a run-level "
                           "test needs two runs on one side)");
    else
        snprintf(buf, cap, "Welch t on the runs' medians (log scale; pooled t with one run a "
                           "side), two-sided, alpha %g%s; interval: %g%% t interval of the "
                           "change; values: geometric means of the runs' medians",
                 r->alpha, r->holm ? ", Holm-adjusted over the tested metrics" : "",
                 (1 - r->alpha) * 100);
}

/* " (3 runs, 120 steps)" or " (20 steps)" for one run. */
static void side_counts(const char *kind, size_t runs, size_t steps, char *buf, size_t cap)
{
    if (runs > 1)
        snprintf(buf, cap, "%s, %zu runs, %zu steps", kind, runs, steps);
    else
        snprintf(buf, cap, "%s, %zu steps", kind, steps);
}

void pp_check_print_notes(FILE *f, const char *notes, int markdown)
{
    if (!notes[0])
        return;
    fputc('\n', f);
    for (const char *s = notes; *s;) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        if (markdown) {
            char note[1024];
            snprintf(note, sizeof note, "%.*s", (int)(len < 1023 ? len : 1023), s);
            fputs("- ", f);
            pp_check_md_text(f, note);
            fputc('\n', f);
        } else {
            fprintf(f, "note: %.*s\n", (int)len, s);
        }
        s += len + (nl ? 1 : 0);
    }
}

pp_status pp_check_write_table(const pp_check_result *r, FILE *f)
{
    char line[512], sb[96], sc[96];
    side_counts(r->base_kind, r->base_runs, r->base_steps, sb, sizeof sb);
    side_counts(r->cur_kind, r->cur_runs, r->cur_steps, sc, sizeof sc);
    fprintf(f, "baseline: %s (%s)\ncurrent:  %s (%s)\n", r->base_source, sb, r->cur_source, sc);
    if (r->shape_differs)
        fprintf(f, "shape:    baseline %s, current %s\n", r->base_shape, r->cur_shape);
    else
        fprintf(f, "shape:    %s\n", r->base_shape);
    test_line(r, line, sizeof line);
    fprintf(f, "test:     %s\n\n", line);
    char ci_head[32];
    snprintf(ci_head, sizeof ci_head, "%g%% interval", (1 - r->alpha) * 100);
    fprintf(f, "%-28s %-9s %11s %11s %9s %9s  %-22s %9s  %s\n", "metric", "unit", "baseline",
            "current", "change", "threshold", ci_head, r->holm ? "p (Holm)" : "p", "verdict");
    for (size_t i = 0; i < r->n_rows; i++) {
        const pp_check_row *w = &r->rows[i];
        cells x;
        cells_of(w, &x);
        const char *verdict = pp_check_verdict_name(w->verdict);
        fprintf(f, "%-28s %-9s %11s %11s %9s %9s  %-22s %9s  %s\n", w->name,
                w->absolute ? "%" : w->unit, x.base, x.cur, x.change, x.threshold, x.ci, x.p,
                w->verdict == PP_VERDICT_REGRESSION ? "REGRESSION" : verdict);
    }
    pp_check_print_notes(f, r->notes, 0);
    char names[1024];
    fputc('\n', f);
    if (r->n_regressions) {
        names_of(r, PP_VERDICT_REGRESSION, names, sizeof names);
        fprintf(f, "result: FAIL, %d regression%s: %s\n", r->n_regressions,
                r->n_regressions == 1 ? "" : "s", names);
    } else {
        fprintf(f, "result: PASS, no regression\n");
    }
    if (r->n_improvements) {
        names_of(r, PP_VERDICT_IMPROVEMENT, names, sizeof names);
        fprintf(f, "improvements (%d): %s\n", r->n_improvements, names);
    }
    if (ferror(f))
        return PP_ERR(PP_ERR_IO, "writing the table failed");
    return PP_OK;
}

static void json_side(pp_json_writer *w, const char *key, const char *src, const char *kind,
                      size_t runs, size_t steps, const char *shape)
{
    pp_json_object_inline(w, key);
    pp_json_put_str(w, "source", src);
    pp_json_put_str(w, "kind", kind);
    pp_json_put_uint(w, "runs", runs);
    pp_json_put_uint(w, "steps", steps);
    pp_json_put_str(w, "shape", shape);
    pp_json_end(w);
}

static void json_names(pp_json_writer *w, const char *key, const pp_check_result *r,
                       pp_check_verdict v)
{
    pp_json_array_inline(w, key);
    for (size_t i = 0; i < r->n_rows; i++)
        if (r->rows[i].verdict == v)
            pp_json_put_str(w, NULL, r->rows[i].name);
    pp_json_end(w);
}

void pp_check_put_identity(pp_json_writer *w, const char *name, pp_check_kind kind,
                           const char *unit)
{
    pp_json_put_str(w, "name", name);
    pp_json_put_str(w, "family", pp_check_kind_name(kind));
    pp_json_put_str(w, "unit", unit);
    pp_json_put_str(w, "better", pp_check_kind_higher_is_better(kind) ? "higher" : "lower");
}

void pp_check_put_notes(pp_json_writer *w, const char *notes)
{
    pp_json_array_inline(w, "notes");
    for (const char *s = notes; *s;) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(len < 1023 ? len : 1023), s);
        pp_json_put_str(w, NULL, line);
        s += len + (nl ? 1 : 0);
    }
    pp_json_end(w);
}

/* One row on two lines: the metric and its change, then the test. */
static void json_row(pp_json_writer *w, const pp_check_row *r)
{
    pp_json_object_inline(w, NULL);
    pp_check_put_identity(w, r->name, r->kind, r->unit);
    pp_json_put_real(w, "baseline", r->base);
    pp_json_put_real(w, "current", r->cur);
    pp_json_put_real(w, "change", r->change);
    pp_json_put_str(w, "change_unit", r->absolute ? "points" : "%");
    pp_json_put_real(w, "threshold", r->threshold);
    pp_json_wrap(w);
    pp_json_put_uint(w, "n_baseline", r->n_base);
    pp_json_put_uint(w, "n_current", r->n_cur);
    pp_json_put_uint(w, "runs_baseline", r->runs_base);
    pp_json_put_uint(w, "runs_current", r->runs_cur);
    pp_json_wrap(w);
    pp_json_put_bool(w, "tested", r->tested);
    pp_json_put_str(w, "test", r->test);
    pp_json_put_bool(w, "exact", r->exact);
    pp_json_put_real(w, "u", r->u);
    pp_json_put_real(w, "t", r->t);
    pp_json_put_real(w, "df", r->df);
    pp_json_put_real(w, "p", r->p);
    pp_json_put_real(w, "p_adjusted", r->p_adj);
    pp_json_put_real(w, "run_sd", r->run_sd);
    if (r->runs_needed > 0)
        pp_json_put_int(w, "runs_needed", r->runs_needed);
    else
        pp_json_put_null(w, "runs_needed");
    pp_json_put_real(w, "detectable", r->detectable);
    if (r->has_ci) {
        pp_json_array(w, "interval");
        pp_json_put_real(w, NULL, r->ci_lo);
        pp_json_put_real(w, NULL, r->ci_hi);
        pp_json_end(w);
    } else {
        pp_json_put_null(w, "interval");
    }
    pp_json_put_str(w, "verdict", pp_check_verdict_name(r->verdict));
    pp_json_end(w);
}

/* The test's parameters: %g, as --alpha was given. */
static void json_test(pp_json_writer *w, const pp_check_result *r)
{
    int none = !r->per_step && r->base_runs < 2 && r->cur_runs < 2;
    pp_json_object_inline(w, "test");
    pp_json_put_str(w, "name", r->per_step ? "mann-whitney-u" : none ? "threshold-only"
                                                                       : "welch-t-run-medians");
    pp_json_put_str(w, "unit", r->per_step ? "step" : "run");
    pp_json_put_int(w, "sides", 2);
    pp_json_put_real_digits(w, "alpha", 6, r->alpha);
    pp_json_put_str(w, "correction", r->holm ? "holm" : "none");
    pp_json_put_int(w, "tested_metrics", r->n_tested);
    pp_json_put_real_digits(w, "power", 6, r->power);
    if (r->runs_needed > 0)
        pp_json_put_int(w, "runs_needed", r->runs_needed);
    else
        pp_json_put_null(w, "runs_needed");
    pp_json_end(w);
    pp_json_object_inline(w, "interval");
    if (r->per_step) {
        pp_json_put_str(w, "method", "bootstrap-percentile");
        pp_json_put_str(w, "of", "change of medians");
    } else {
        pp_json_put_str(w, "method", none ? "none" : "t");
        pp_json_put_str(w, "of", "change of the runs' (geometric) mean medians");
    }
    pp_json_put_real_digits(w, "level", 6, 1 - r->alpha);
    pp_json_put_int(w, "resamples", r->bootstrap_reps);
    pp_json_end(w);
}

pp_status pp_check_write_json(const pp_check_result *r, FILE *f)
{
    pp_json_writer w;
    pp_json_writer_init(&w, f, "the JSON report", PP_JSON_PRETTY);
    pp_json_object(&w, NULL);
    pp_json_put_int(&w, "check_version", PP_CHECK_JSON_VERSION);
    pp_json_put_str(&w, "result", r->n_regressions ? "fail" : "pass");
    json_test(&w, r);
    json_side(&w, "baseline", r->base_source, r->base_kind, r->base_runs, r->base_steps,
              r->base_shape);
    json_side(&w, "current", r->cur_source, r->cur_kind, r->cur_runs, r->cur_steps,
              r->cur_shape);
    pp_json_put_bool(&w, "shape_differs", r->shape_differs);
    pp_json_array(&w, "metrics");
    for (size_t i = 0; i < r->n_rows; i++)
        json_row(&w, &r->rows[i]);
    pp_json_end(&w);
    json_names(&w, "regressions", r, PP_VERDICT_REGRESSION);
    json_names(&w, "improvements", r, PP_VERDICT_IMPROVEMENT);
    pp_check_put_notes(&w, r->notes);
    pp_json_end(&w);
    return pp_json_writer_finish(&w);
}

void pp_check_xml_text(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            if (*p < 0x20 && *p != '\n' && *p != '\t')
                fputc('?', f); /* not allowed in XML 1.0 */
            else
                fputc(*p, f);
        }
    }
}

/* "change +5.1% (threshold 3%), 99% interval [...], p (Holm) 1e-8, n 24 vs 24" */
static void row_summary(const pp_check_row *w, double alpha, char *buf, size_t cap)
{
    cells x;
    cells_of(w, &x);
    snprintf(buf, cap, "%s: %s -> %s %s, change %s (threshold %s), %g%% interval %s, p %s, "
                       "%zu vs %zu runs, %zu vs %zu steps",
             pp_check_verdict_name(w->verdict), x.base, x.cur, w->absolute ? "%" : w->unit,
             x.change, x.threshold, (1 - alpha) * 100, x.ci, x.p, w->runs_base, w->runs_cur,
             w->n_base, w->n_cur);
}

pp_status pp_check_write_junit(const pp_check_result *r, FILE *f)
{
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    fprintf(f, "<testsuites name=\"pprof-check\" tests=\"%zu\" failures=\"%d\" errors=\"0\">\n",
            r->n_rows, r->n_regressions);
    fprintf(f, "  <testsuite name=\"pprof-check\" tests=\"%zu\" failures=\"%d\" errors=\"0\" "
               "skipped=\"0\" time=\"0\">\n",
            r->n_rows, r->n_regressions);
    char line[512];
    test_line(r, line, sizeof line);
    fputs("    <properties>\n      <property name=\"baseline\" value=\"", f);
    pp_check_xml_text(f, r->base_source);
    fputs("\"/>\n      <property name=\"current\" value=\"", f);
    pp_check_xml_text(f, r->cur_source);
    fputs("\"/>\n      <property name=\"shape\" value=\"", f);
    pp_check_xml_text(f, r->cur_shape);
    fputs("\"/>\n      <property name=\"test\" value=\"", f);
    pp_check_xml_text(f, line);
    fputs("\"/>\n    </properties>\n", f);
    for (size_t i = 0; i < r->n_rows; i++) {
        const pp_check_row *w = &r->rows[i];
        char s[512];
        row_summary(w, r->alpha, s, sizeof s);
        fputs("    <testcase classname=\"pprof-check.", f);
        pp_check_xml_text(f, pp_check_kind_name(w->kind));
        fputs("\" name=\"", f);
        pp_check_xml_text(f, w->name);
        fputs("\" time=\"0\">", f);
        if (w->verdict == PP_VERDICT_REGRESSION) {
            fputs("\n      <failure type=\"regression\" message=\"", f);
            pp_check_xml_text(f, s);
            fputs("\">", f);
            pp_check_xml_text(f, s);
            fputs("</failure>\n    ", f);
        } else {
            fputs("\n      <system-out>", f);
            pp_check_xml_text(f, s);
            fputs("</system-out>\n    ", f);
        }
        fputs("</testcase>\n", f);
    }
    fputs("  </testsuite>\n</testsuites>\n", f);
    if (ferror(f))
        return PP_ERR(PP_ERR_IO, "writing the JUnit report failed");
    return PP_OK;
}

void pp_check_md_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else if (*s == '\n' || *s == '`')
            fputc(' ', f);
        else
            fputc(*s, f);
    }
}

pp_status pp_check_write_markdown(const pp_check_result *r, FILE *f)
{
    char names[1024], line[512];
    if (r->n_regressions) {
        names_of(r, PP_VERDICT_REGRESSION, names, sizeof names);
        fprintf(f, "### pprof-check: FAIL, %d regression%s\n\n", r->n_regressions,
                r->n_regressions == 1 ? "" : "s");
        fputs("Regressed: ", f);
        pp_check_md_text(f, names);
        fputs("\n\n", f);
    } else {
        fprintf(f, "### pprof-check: PASS\n\n");
    }
    if (r->n_improvements) {
        names_of(r, PP_VERDICT_IMPROVEMENT, names, sizeof names);
        fputs("Improved: ", f);
        pp_check_md_text(f, names);
        fputs("\n\n", f);
    }
    fputs("Baseline `", f);
    pp_check_md_text(f, r->base_source);
    char sb[96], sc[96];
    side_counts(r->base_kind, r->base_runs, r->base_steps, sb, sizeof sb);
    side_counts(r->cur_kind, r->cur_runs, r->cur_steps, sc, sizeof sc);
    fprintf(f, "` (%s) vs current `", sb);
    pp_check_md_text(f, r->cur_source);
    fprintf(f, "` (%s); ", sc);
    pp_check_md_text(f, r->cur_shape);
    test_line(r, line, sizeof line);
    fputs(".\n", f);
    pp_check_md_text(f, line);
    fputs(".\n\n", f);
    fprintf(f, "| metric | baseline | current | change | threshold | %g%% interval | p%s | "
               "verdict |\n|---|---:|---:|---:|---:|---|---:|---|\n",
            (1 - r->alpha) * 100, r->holm ? " (Holm)" : "");
    for (size_t i = 0; i < r->n_rows; i++) {
        const pp_check_row *w = &r->rows[i];
        cells x;
        cells_of(w, &x);
        const char *unit = w->absolute ? "" : w->unit;
        fputs("| ", f);
        pp_check_md_text(f, w->name);
        const char *bold = w->verdict == PP_VERDICT_REGRESSION ? "**" : "";
        fprintf(f, " | %s %s | %s %s | %s | %s | %s | %s | %s%s%s |\n", x.base, unit, x.cur,
                unit, x.change, x.threshold, x.ci, x.p, bold, pp_check_verdict_name(w->verdict),
                bold);
    }
    pp_check_print_notes(f, r->notes, 1);
    if (ferror(f))
        return PP_ERR(PP_ERR_IO, "writing the Markdown report failed");
    return PP_OK;
}
