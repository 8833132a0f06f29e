/* check_html.c: pprof-check's comparison as one self-contained HTML page
 * (pp_check_write_html, pp_check.h; docs/cli/pprof-check.md "HTML"): the verdict, both sides,
 * the test, then every metric with its change drawn against its threshold (inline SVG, no
 * script, nothing fetched), its test, p-values, interval and verdict, and the notes. The numbers
 * carry data-key attributes named after the JSON report's fields ("metrics.3.change"), so that a
 * test can set the page against --json (tests/html/html_test.sh). */
#include "check_internal.h"
#include "pp_check.h"
#include "html_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *verdict_colour(pp_check_verdict v)
{
    switch (v) {
    case PP_VERDICT_REGRESSION: return "#d62728";
    case PP_VERDICT_IMPROVEMENT: return "#2ca02c";
    case PP_VERDICT_NOISE: return "#ff7f0e";
    case PP_VERDICT_CHANGED: return "#9467bd";
    default: return "#7f7f7f";
    }
}

/* The change against its threshold: a bar from 0 to the change, the band +-threshold shaded,
 * on a scale of the largest of the page's |change| and thresholds. */
static void change_bar(FILE *o, const pp_check_row *r, double scale)
{
    const double W = 160, mid = W / 2;
    fprintf(o, "<td><svg class=\"bar\" width=\"%.0f\" height=\"14\" "
               "xmlns=\"http://www.w3.org/2000/svg\">",
            W);
    if (scale > 0 && isfinite(r->threshold)) {
        double t = fmin(r->threshold / scale, 1.0) * mid;
        fprintf(o, "<rect x=\"%.1f\" y=\"0\" width=\"%.1f\" height=\"14\" fill=\"#eee\"/>",
                mid - t, 2 * t);
    }
    if (scale > 0 && isfinite(r->change)) {
        double c = fmax(-1.0, fmin(r->change / scale, 1.0)) * mid;
        fprintf(o, "<rect x=\"%.1f\" y=\"3\" width=\"%.1f\" height=\"8\" fill=\"%s\">"
                   "<title>%+.3g%s (threshold %.3g)</title></rect>",
                c < 0 ? mid + c : mid, fabs(c) < 0.5 ? 0.5 : fabs(c), verdict_colour(r->verdict),
                r->change, r->absolute ? " points" : "%", r->threshold);
    }
    fprintf(o, "<line x1=\"%.0f\" y1=\"0\" x2=\"%.0f\" y2=\"14\" stroke=\"#555\"/></svg></td>",
            mid, mid);
}

pp_status pp_check_write_html(const pp_check_result *r, FILE *o)
{
    int fail = r->n_regressions > 0;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<title>pipeprof: pprof-check</title>\n<style>body{font:14px/1.45 system-ui,"
          "sans-serif;margin:2em auto;max-width:1300px;padding:0 1em;color:#222}td,th{padding:"
          "2px 8px;border-bottom:1px solid #eee;text-align:left}td.n{text-align:right;"
          "font-variant-numeric:tabular-nums}td,th{white-space:nowrap}th{background:#f4f4f4}"
          "h2{border-bottom:1px solid "
          "#ccc}.verdict{font-size:1.3em;font-weight:bold}.kv td:first-child{color:#555}"
          "</style>\n</head>\n<body>\n<h1>pprof-check</h1>\n",
          o);
    fprintf(o, "<p id=\"result\" class=\"verdict\" data-key=\"result\" style=\"color:%s\">%s</p>\n",
            fail ? "#d62728" : "#2ca02c", fail ? "fail" : "pass");
    fprintf(o, "<p>%d regression(s), %d improvement(s), %d change(s) within noise, %d untested "
               "change(s), %d metric(s) tested.</p>\n",
            r->n_regressions, r->n_improvements, r->n_noise, r->n_changed, r->n_tested);
    fputs("<h2 id=\"sides\">Runs</h2>\n<table class=\"kv\">\n", o);
    const char *const side[2] = {"baseline", "current"};
    const char *const src[2] = {r->base_source, r->cur_source};
    const char *const kind[2] = {r->base_kind, r->cur_kind};
    const char *const shape[2] = {r->base_shape, r->cur_shape};
    const size_t runs[2] = {r->base_runs, r->cur_runs}, steps[2] = {r->base_steps, r->cur_steps};
    for (int i = 0; i < 2; i++) {
        fprintf(o, "<tr><td>%s</td><td>", side[i]);
        pp_html_esc(o, src[i]);
        fputs(" (", o);
        pp_html_esc(o, kind[i]);
        fprintf(o, "): <span data-key=\"%s.runs\">%zu</span> run(s), %zu steps, ", side[i],
                runs[i], steps[i]);
        pp_html_esc(o, shape[i]);
        fputs("</td></tr>\n", o);
    }
    fprintf(o, "<tr><td>test</td><td>%s, two-sided, alpha %g%s, power %g</td></tr>\n</table>\n",
            r->per_step ? "Mann-Whitney U on the per-step samples"
            : r->threshold_only ? "none: one run a side, the thresholds alone decide"
                                : "Welch's t on the runs' medians",
            r->alpha, r->holm ? ", Holm-adjusted" : "", r->power);
    double scale = 0;
    for (size_t i = 0; i < r->n_rows; i++) {
        if (isfinite(r->rows[i].change))
            scale = fmax(scale, fabs(r->rows[i].change));
        if (isfinite(r->rows[i].threshold))
            scale = fmax(scale, r->rows[i].threshold);
    }
    fputs("<h2 id=\"metrics\">Metrics</h2>\n<table>\n<tr><th>metric</th><th>baseline</th>"
          "<th>current</th><th>unit</th><th>change</th><th>against the threshold</th>"
          "<th>threshold</th><th>test</th><th>p</th><th>p adjusted</th><th>interval</th>"
          "<th>runs needed</th><th>verdict</th></tr>\n",
          o);
    for (size_t i = 0; i < r->n_rows; i++) {
        const pp_check_row *w = &r->rows[i];
        char key[64];
        fputs("<tr><td>", o);
        pp_html_esc(o, w->name);
        fputs("</td>", o);
        snprintf(key, sizeof key, "metrics.%zu.baseline", i);
        pp_html_num_cell(o, key, w->base, "%.6g");
        snprintf(key, sizeof key, "metrics.%zu.current", i);
        pp_html_num_cell(o, key, w->cur, "%.6g");
        fputs("<td>", o);
        pp_html_esc(o, w->unit);
        fputs("</td>", o);
        snprintf(key, sizeof key, "metrics.%zu.change", i);
        pp_html_num_cell(o, key, w->change, w->absolute ? "%+.4g pt" : "%+.4g%%");
        change_bar(o, w, scale);
        pp_html_num_cell(o, NULL, w->threshold, w->absolute ? "%.4g pt" : "%.4g%%");
        fputs("<td>", o);
        pp_html_esc(o, w->test ? w->test : "");
        fputs("</td>", o);
        snprintf(key, sizeof key, "metrics.%zu.p", i);
        pp_html_num_cell(o, key, w->p, "%.3g");
        snprintf(key, sizeof key, "metrics.%zu.p_adjusted", i);
        pp_html_num_cell(o, key, w->p_adj, "%.3g");
        if (w->has_ci)
            fprintf(o, "<td class=\"n\">[%+.3g, %+.3g]</td>", w->ci_lo, w->ci_hi);
        else
            fputs("<td>&ndash;</td>", o);
        if (w->runs_needed > 0)
            fprintf(o, "<td class=\"n\">%d</td>", w->runs_needed);
        else
            fputs("<td>&ndash;</td>", o);
        snprintf(key, sizeof key, "metrics.%zu.verdict", i);
        fprintf(o, "<td data-key=\"%s\" style=\"color:%s\">%s</td></tr>\n", key,
                verdict_colour(w->verdict), pp_check_verdict_name(w->verdict));
    }
    fputs("</table>\n<h2 id=\"notes\">Notes</h2>\n", o);
    if (!r->notes[0])
        fputs("<p>None.</p>\n", o);
    else {
        pp_html_lines(o, r->notes, "notes");
    }
    fprintf(o, "<footer>Written by pipeprof %s (pprof-check --html).</footer>\n</body>\n</html>\n",
            PP_VERSION);
    if (fflush(o) != 0 || ferror(o))
        return PP_ERR(PP_ERR_IO, "writing the HTML report failed");
    return PP_OK;
}

/* One metric's history as an inline SVG line chart: its values by entry, each level's median as
 * a segment, each change point a vertical line labelled with its entry and change. */
static void history_chart(FILE *o, const pp_check_history *h, const pp_check_series *s, size_t k)
{
    const double W = 900, H = 180, left = 60, top = 10, plot_h = H - 40;
    double lo = INFINITY, hi = -INFINITY;
    size_t n = h->n_entries < s->n_values ? s->n_values : h->n_entries;
    if (n > h->n_entries)
        n = h->n_entries;
    for (size_t i = 0; i < n; i++)
        if (isfinite(s->values[i])) {
            lo = fmin(lo, s->values[i]);
            hi = fmax(hi, s->values[i]);
        }
    if (!(hi >= lo)) {
        fputs("<p>No values.</p>\n", o);
        return;
    }
    if (hi == lo) {
        hi += fabs(hi) * 0.01 + 1e-9;
        lo -= fabs(lo) * 0.01 + 1e-9;
    }
    double pad = 0.08 * (hi - lo);
    lo -= pad;
    hi += pad;
#define X(i) (left + (n > 1 ? (double)(i) / (double)(n - 1) : 0.5) * (W - left - 10))
#define Y(v) (top + (hi - (v)) / (hi - lo) * plot_h)
    fprintf(o, "<svg id=\"chart-%zu\" class=\"history\" width=\"%.0f\" height=\"%.0f\" "
               "xmlns=\"http://www.w3.org/2000/svg\">\n",
            k, W, H);
    fprintf(o, "<text x=\"4\" y=\"%.1f\">%.4g</text><text x=\"4\" y=\"%.1f\">%.4g</text>\n",
            top + 10, hi - pad, top + plot_h, lo + pad);
    fputs("<polyline fill=\"none\" stroke=\"#4c78a8\" stroke-width=\"1.5\" points=\"", o);
    for (size_t i = 0; i < n; i++)
        if (isfinite(s->values[i]))
            fprintf(o, "%.1f,%.1f ", X(i), Y(s->values[i]));
    fputs("\"/>\n", o);
    for (size_t i = 0; i < n; i++)
        if (isfinite(s->values[i])) {
            fprintf(o, "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"#4c78a8\">"
                       "<title>",
                    X(i), Y(s->values[i]));
            pp_html_esc(o, h->entries[i].label[0] ? h->entries[i].label : h->entries[i].source);
            fputs(" ", o);
            pp_html_esc(o, h->entries[i].time);
            fprintf(o, ": %.6g</title></circle>\n", s->values[i]);
        }
    for (size_t c = 0; c < s->n_cps; c++) {
        const pp_check_cp *cp = &s->cps[c];
        if (cp->index >= n)
            continue;
        double x = (X(cp->index) + X(cp->index ? cp->index - 1 : 0)) / 2;
        fprintf(o, "<line class=\"cp\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"%s\" stroke-dasharray=\"4 3\"/><text x=\"%.1f\" y=\"%.1f\" "
                   "fill=\"%s\">",
                x, top, x, top + plot_h, verdict_colour(cp->verdict), x + 3, top + plot_h + 14,
                verdict_colour(cp->verdict));
        pp_html_esc(o, h->entries[cp->index].label[0] ? h->entries[cp->index].label
                                              : h->entries[cp->index].time);
        fprintf(o, " %+.3g%s</text>\n", cp->change, s->absolute ? " pt" : "%");
    }
    fputs("</svg>\n", o);
#undef X
#undef Y
}

pp_status pp_check_history_write_html(const pp_check_history *h, FILE *o)
{
    int fail = h->n_regressions > 0;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<title>pipeprof: pprof-check --history</title>\n<style>body{font:14px/1.45 "
          "system-ui,sans-serif;margin:2em auto;max-width:1000px;padding:0 1em;color:#222}"
          "td,th{padding:2px 8px;border-bottom:1px solid #eee;text-align:left;white-space:"
          "nowrap}td.n{text-align:right}th{background:#f4f4f4}h2{border-bottom:1px solid #ccc}"
          ".verdict{font-size:1.3em;font-weight:bold}svg text{font:11px system-ui,sans-serif}"
          "</style>\n</head>\n<body>\n<h1>pprof-check --history ",
          o);
    pp_html_esc(o, h->dir);
    fprintf(o, "</h1>\n<p id=\"result\" class=\"verdict\" data-key=\"result\" style=\"color:%s\">"
               "%s</p>\n<p>%zu entries, %zu metrics, %d change point(s): %d regression(s), %d "
               "improvement(s); permutation test at alpha %g per metric.</p>\n",
            fail ? "#d62728" : "#2ca02c", fail ? "fail" : "pass", h->n_entries, h->n_series,
            h->n_cps, h->n_regressions, h->n_improvements, h->alpha);
    fputs("<h2 id=\"change-points\">Change points</h2>\n", o);
    if (!h->n_cps)
        fputs("<p>None.</p>\n", o);
    else {
        fputs("<table>\n<tr><th>metric</th><th>first entry</th><th>time</th><th>before</th>"
              "<th>after</th><th>change</th><th>p</th><th>verdict</th></tr>\n",
              o);
        for (size_t k = 0; k < h->n_series; k++)
            for (size_t c = 0; c < h->series[k].n_cps; c++) {
                const pp_check_series *s = &h->series[k];
                const pp_check_cp *cp = &s->cps[c];
                const pp_check_run_info *e = cp->index < h->n_entries ? &h->entries[cp->index]
                                                                      : NULL;
                fputs("<tr class=\"cp-row\"><td>", o);
                pp_html_esc(o, s->name);
                fputs("</td><td>", o);
                pp_html_esc(o, e ? (e->label[0] ? e->label : e->source) : "?");
                fputs("</td><td>", o);
                pp_html_esc(o, e ? e->time : "");
                fputs("</td>", o);
                pp_html_num_cell(o, NULL, cp->before, "%.6g");
                pp_html_num_cell(o, NULL, cp->after, "%.6g");
                pp_html_num_cell(o, NULL, cp->change, s->absolute ? "%+.4g pt" : "%+.4g%%");
                pp_html_num_cell(o, NULL, cp->p, "%.3g");
                fprintf(o, "<td style=\"color:%s\">%s</td></tr>\n", verdict_colour(cp->verdict),
                        pp_check_verdict_name(cp->verdict));
            }
        fputs("</table>\n", o);
    }
    fputs("<h2 id=\"charts\">Metrics over the history</h2>\n", o);
    for (size_t k = 0; k < h->n_series; k++) {
        const pp_check_series *s = &h->series[k];
        fputs("<h3>", o);
        pp_html_esc(o, s->name);
        fputs(" (", o);
        pp_html_esc(o, s->unit);
        fputs(")</h3>\n", o);
        history_chart(o, h, s, k);
    }
    if (h->notes[0]) {
        fputs("<h2 id=\"notes\">Notes</h2>\n", o);
        pp_html_lines(o, h->notes, "notes");
    }
    fprintf(o, "<footer>Written by pipeprof %s (pprof-check --history --html).</footer>\n"
               "</body>\n</html>\n",
            PP_VERSION);
    if (fflush(o) != 0 || ferror(o))
        return PP_ERR(PP_ERR_IO, "writing the HTML history failed");
    return PP_OK;
}
