/* report_html.c: one self-contained HTML page of an analysis (pp_report_html, pp_report.h), to
 * open once, read top to bottom and send to a colleague: the run, step time and bubble, the
 * stages with their bubble decomposition drawn as stacked bars, the Gantt chart of the kept
 * steps as inline SVG (micro-batch labels, hover details in SVG titles), links, layers, the GPU
 * summary, memory per stage and purpose, the ranges outside the pipeline, warnings. No network, no script: CSS and SVG only.
 * Every number a test (tests/html/html_test.sh) compares with the summary JSON carries a
 * data-key attribute named after that JSON field. docs/cli/pprof-report.md "HTML". */
#include "pp_report.h"
#include "report_internal.h"
#include "html_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char k_style[] =
    "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222;"
    "padding:0 1em}h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;"
    "margin-top:2em}table{border-collapse:collapse;margin:.5em 0}td,th{padding:2px 8px;"
    "border-bottom:1px solid #eee;text-align:left}td.n{text-align:right;"
    "font-variant-numeric:tabular-nums}th{background:#f4f4f4}code{background:#f4f4f4;"
    "padding:0 3px}.kv td:first-child{color:#555}.warn{color:#a40}.legend span{display:"
    "inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}"
    "svg text{font:11px system-ui,sans-serif}footer{margin-top:3em;color:#777;font-size:12px}"
    "tr.chunk td{color:#555;font-size:13px}";

/* colours by op kind (the Gantt's and the legend's), and of the bubble's parts */
static const char *kind_colour(int k)
{
    switch (k) {
    case PP_AOP_FWD: return "#4c78a8";
    case PP_AOP_BWD: return "#54a24b";
    case PP_AOP_BWD_INPUT: return "#54a24b";
    case PP_AOP_BWD_WEIGHT: return "#88d27a";
    case PP_AOP_OPT: return "#9d755d";
    case PP_AOP_SEND_ACT: case PP_AOP_SEND_GRAD: return "#f58518";
    case PP_AOP_RECV_ACT: case PP_AOP_RECV_GRAD: return "#e45756";
    default: return "#bab0ac";
    }
}

static const char *kind_letter(int k)
{
    switch (k) {
    case PP_AOP_FWD: return "F";
    case PP_AOP_BWD: return "B";
    case PP_AOP_BWD_INPUT: return "I";
    case PP_AOP_BWD_WEIGHT: return "W";
    case PP_AOP_OPT: return "opt";
    default: return "";
    }
}

static void section_run(FILE *o, const pp_analysis *a, const pp_report_html_opts *opt)
{
    fputs("<h2 id=\"run\">Run</h2>\n<table class=\"kv\">\n", o);
    if (opt && opt->command && opt->command[0]) {
        fputs("<tr><td>command</td><td><code>", o);
        pp_html_esc(o, opt->command);
        fputs("</code></td></tr>\n", o);
    }
    fprintf(o, "<tr><td>trace files</td><td data-key=\"files\">%zu</td></tr>\n", a->n_files);
    fprintf(o, "<tr><td>events</td><td data-key=\"events\">%llu</td></tr>\n",
            (unsigned long long)a->events_total);
    fprintf(o, "<tr><td>dropped</td><td data-key=\"dropped\">%llu</td></tr>\n",
            (unsigned long long)a->dropped_total);
    if (a->S > 0) {
        fputs("<tr><td>pipeline</td><td>", o);
        fprintf(o, "<span data-key=\"stages\">%d</span> stage(s), <span "
                   "data-key=\"microbatches\">%d</span> micro-batch(es), v = %d, schedule ",
                a->S, a->M, a->v);
        pp_html_esc(o, a->schedule[0] ? a->schedule : "unknown");
        if (a->dp > 1)
            fprintf(o, ", %d data-parallel replicas (replica %d analyzed)", a->dp, a->replica);
        fputs("</td></tr>\n", o);
    }
    if (a->dialect[0]) {
        fputs("<tr><td>dialect</td><td>", o);
        pp_html_esc(o, a->dialect);
        fputs("</td></tr>\n", o);
    }
    fprintf(o, "<tr><td>steps analyzed</td><td data-key=\"steps\">%zu</td></tr>\n", a->n_steps);
    fprintf(o, "<tr><td>warm-up skipped</td><td>%lld</td></tr>\n", (long long)a->warmup_skipped);
    fputs("</table>\n", o);
}

static void section_summary(FILE *o, const pp_analysis *a)
{
    fputs("<h2 id=\"summary\">Step time and bubble</h2>\n", o);
    pp_html_table_head(o, "|mean|median|p95|min|max");
    fputs("<tr><td>step ms</td>", o);
    const pp_astats *s = &a->step_ns;
    pp_html_num_cell(o, "step_ms.mean", s->mean * 1e-6, "%.3f");
    pp_html_num_cell(o, "step_ms.median", s->median * 1e-6, "%.3f");
    pp_html_num_cell(o, "step_ms.p95", s->p95 * 1e-6, "%.3f");
    pp_html_num_cell(o, "step_ms.min", s->min * 1e-6, "%.3f");
    pp_html_num_cell(o, "step_ms.max", s->max * 1e-6, "%.3f");
    fputs("</tr>\n</table>\n<table class=\"kv\">\n<tr><td>bubble (idle share of stage time)</td>",
          o);
    pp_html_num_cell(o, "bubble_ratio.mean", a->bubble_ratio * 100.0, "%.1f%%");
    fputs("</tr>\n<tr><td>imbalance (max / mean stage busy)</td>", o);
    pp_html_num_cell(o, "imbalance.mean", a->imbalance, "%.3f");
    fputs("</tr>\n", o);
    if (a->samples_per_s > 0) {
        fputs("<tr><td>samples/s</td>", o);
        pp_html_num_cell(o, "samples_per_s", a->samples_per_s, "%.1f");
        fputs("</tr>\n", o);
    }
    if (a->tokens_per_s > 0) {
        fputs("<tr><td>tokens/s</td>", o);
        pp_html_num_cell(o, "tokens_per_s", a->tokens_per_s, "%.0f");
        fputs("</tr>\n", o);
    }
    fputs("</table>\n", o);
}

/* Per stage: the table, then the mean step split into busy and the idle's causes, as bars. */
static void section_stages(FILE *o, const pp_analysis *a)
{
    fputs("<h2 id=\"stages\">Stages</h2>\n<p>Per micro-batch op: medians; per step: means over "
          "the analyzed steps. With several chunks per stage (interleaved), each chunk's own op "
          "medians follow its stage's row, which mixes them.</p>\n",
          o);
    pp_html_table_head(o, "stage|fwd ms|bwd ms|busy ms|idle ms|bubble|fill/drain ms|imbalance ms|"
                          "transfer ms|imbalance caused by");
    for (int s = 0; s < a->S; s++) {
        const pp_astage *g = &a->stages[s];
        char key[64];
        fprintf(o, "<tr><td>%d</td>", s);
        snprintf(key, sizeof key, "stages.%d.fwd_ms.median", s);
        pp_html_num_cell(o, key, g->fwd_ns.count ? g->fwd_ns.median * 1e-6 : NAN, "%.3f");
        snprintf(key, sizeof key, "stages.%d.bwd_ms.median", s);
        pp_html_num_cell(o, key, g->bwd_ns.count ? g->bwd_ns.median * 1e-6 : NAN, "%.3f");
        snprintf(key, sizeof key, "stages.%d.busy_ms", s);
        pp_html_num_cell(o, key, g->busy_ns * 1e-6, "%.3f");
        snprintf(key, sizeof key, "stages.%d.idle_ms", s);
        pp_html_num_cell(o, key, g->idle_ns * 1e-6, "%.3f");
        pp_html_num_cell(o, NULL, g->bubble_ratio * 100.0, "%.1f%%");
        pp_html_num_cell(o, NULL, g->fill_drain_ns * 1e-6, "%.3f");
        pp_html_num_cell(o, NULL, g->imbalance_ns * 1e-6, "%.3f");
        pp_html_num_cell(o, NULL, g->transfer_ns * 1e-6, "%.3f");
        if (g->imbalance_culprit >= 0)
            fprintf(o, "<td>stage %d</td></tr>\n", g->imbalance_culprit);
        else
            fputs("<td>&ndash;</td></tr>\n", o);
        /* several chunks: each one's own medians under its stage's, which mix them (the
         * summary JSON's stages[].chunks) */
        for (int c = 0; g->n_chunk > 1 && c < g->n_chunk; c++) {
            const pp_astats *f = pp_astage_chunk(g, c, PP_AOP_FWD),
                            *b = pp_astage_chunk(g, c, PP_AOP_BWD),
                            *bi = pp_astage_chunk(g, c, PP_AOP_BWD_INPUT),
                            *bw = pp_astage_chunk(g, c, PP_AOP_BWD_WEIGHT);
            if (!f->count && !b->count && !bi->count && !bw->count)
                continue;
            fprintf(o, "<tr class=\"chunk\"><td>&nbsp;&nbsp;chunk %d</td>", c);
            snprintf(key, sizeof key, "stages.%d.chunks.%d.fwd_ms.median", s, c);
            pp_html_num_cell(o, key, f->count ? f->median * 1e-6 : NAN, "%.3f");
            if (b->count) {
                snprintf(key, sizeof key, "stages.%d.chunks.%d.bwd_ms.median", s, c);
                pp_html_num_cell(o, key, b->median * 1e-6, "%.3f");
            } else {
                /* split: its halves' medians summed, as the text table gives it */
                pp_html_num_cell(o, NULL, bi->count || bw->count
                                              ? (bi->median + bw->median) * 1e-6 : NAN,
                                 "%.3f");
            }
            fputs("<td colspan=\"8\"></td></tr>\n", o);
        }
    }
    fputs("</table>\n", o);
    /* the bars: one per stage, busy then each idle cause, scaled to the longest total */
    double widest = 0;
    for (int s = 0; s < a->S; s++) {
        const pp_astage *g = &a->stages[s];
        double t = g->busy_ns + fmax(0, g->fill_drain_ns) + fmax(0, g->imbalance_ns) +
                   fmax(0, g->transfer_ns) + fmax(0, g->allreduce_mean_ns);
        widest = fmax(widest, t);
    }
    if (!(widest > 0))
        return;
    static const char *const part_name[] = {"busy", "fill/drain", "imbalance", "transfer",
                                            "all-reduce"};
    static const char *const part_colour[] = {"#4c78a8", "#b279a2", "#e45756", "#f58518",
                                              "#72b7b2"};
    const int W = 900, left = 70, rowh = 22;
    int H = a->S * rowh + 30;
    fprintf(o, "<p class=\"legend\">Mean step per stage:");
    for (int p = 0; p < 5; p++)
        fprintf(o, "<span style=\"background:%s\"></span>%s", part_colour[p], part_name[p]);
    fprintf(o, "</p>\n<svg id=\"bubble-bars\" width=\"%d\" height=\"%d\" "
               "xmlns=\"http://www.w3.org/2000/svg\">\n",
            left + W + 20, H);
    for (int s = 0; s < a->S; s++) {
        const pp_astage *g = &a->stages[s];
        double part[5] = {g->busy_ns, fmax(0, g->fill_drain_ns), fmax(0, g->imbalance_ns),
                          fmax(0, g->transfer_ns), fmax(0, g->allreduce_mean_ns)};
        double x = left;
        int y = 5 + s * rowh;
        fprintf(o, "<text x=\"4\" y=\"%d\">stage %d</text>\n", y + 14, s);
        for (int p = 0; p < 5; p++) {
            double w = part[p] / widest * W;
            if (!(w > 0))
                continue;
            fprintf(o, "<rect class=\"part\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                       "fill=\"%s\"><title>stage %d %s: %.3f ms</title></rect>\n",
                    x, y, w, rowh - 6, part_colour[p], s, part_name[p], part[p] * 1e-6);
            x += w;
        }
    }
    fprintf(o, "<text x=\"%d\" y=\"%d\">0</text><text x=\"%d\" y=\"%d\" "
               "text-anchor=\"end\">%.3f ms</text>\n</svg>\n",
            left, H - 6, left + W, H - 6, widest * 1e-6);
}

pp_status pp_report_gantt_svg(const pp_analysis *a, FILE *o)
{
    pp_report_window w;
    if (!a || a->S < 1 || !a->n_ops ||
        pp_report_window_of(a, PP_REPORT_GANTT_MAX_STEPS, &w) != PP_OK || !(w.end > w.origin)) {
        fputs("<p>No pipeline timeline was kept.</p>\n", o);
        return ferror(o) ? PP_ERR(PP_ERR_IO, "writing the Gantt SVG failed") : PP_OK;
    }
    const int W = 1100, left = 70, rowh = 26, top = 8;
    int H = top + a->S * rowh + 28;
    double span = w.end - w.origin;
    fprintf(o, "<svg id=\"gantt-svg\" width=\"%d\" height=\"%d\" "
               "xmlns=\"http://www.w3.org/2000/svg\">\n",
            left + W + 10, H);
    for (int s = 0; s < a->S; s++)
        fprintf(o, "<text x=\"4\" y=\"%d\">stage %d</text>\n", top + s * rowh + 16, s);
    size_t drawn = 0;
    for (size_t i = 0; i < a->n_ops; i++) {
        const pp_aop *op = &a->ops[i];
        if (op->step < w.lo || op->step > w.hi || op->stage < 0 || op->stage >= a->S ||
            op->t1 < op->t0)
            continue;
        double x0 = ((double)op->t0 - w.origin) / span * W, x1 = ((double)op->t1 - w.origin) / span * W;
        if (x1 < 0 || x0 > W)
            continue;
        x0 = fmax(0, x0);
        x1 = fmin(W, x1);
        int comm = op->kind >= PP_AOP_SEND_ACT;
        int y = top + op->stage * rowh + (comm ? 16 : 0);
        int h = comm ? 6 : 16;
        const char *kn = pp_aop_kind_name((pp_aop_kind)op->kind);
        fprintf(o, "<rect class=\"op\" data-kind=\"%s\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" "
                   "height=\"%d\" fill=\"%s\"><title>stage %d %s",
                kn, left + x0, y, fmax(x1 - x0, 0.5), h, kind_colour(op->kind), op->stage, kn);
        if (op->mb >= 0)
            fprintf(o, " micro-batch %d", op->mb);
        if (a->v > 1)
            fprintf(o, " chunk %d", op->chunk);
        fprintf(o, ", step %lld: %.3f ms at %.3f ms", (long long)op->step,
                (double)(op->t1 - op->t0) * 1e-6, ((double)op->t0 - w.origin) * 1e-6);
        if (op->bytes)
            fprintf(o, ", %llu bytes", (unsigned long long)op->bytes);
        fputs("</title></rect>\n", o);
        /* the micro-batch's number where it fits */
        if (!comm && op->mb >= 0 && x1 - x0 >= 14)
            fprintf(o, "<text x=\"%.2f\" y=\"%d\" fill=\"#fff\" text-anchor=\"middle\" "
                       "pointer-events=\"none\">%s%d</text>\n",
                    left + (x0 + x1) / 2, y + 12, kind_letter(op->kind), op->mb);
        drawn++;
    }
    /* the time axis: about eight ticks at round values */
    double step_ms = span * 1e-6 / 8, mag = pow(10, floor(log10(step_ms)));
    double tick = step_ms / mag < 2 ? 2 * mag : step_ms / mag < 5 ? 5 * mag : 10 * mag;
    int y_axis = top + a->S * rowh + 4;
    for (double t = 0; t <= span * 1e-6 + 1e-9; t += tick) {
        double x = left + t / (span * 1e-6) * W;
        fprintf(o, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"#999\"/>"
                   "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%g ms</text>\n",
                x, y_axis, x, y_axis + 4, x, y_axis + 16, t);
    }
    fprintf(o, "</svg>\n<p class=\"legend\">%zu ops of steps %lld..%lld:", drawn, (long long)w.lo,
            (long long)w.hi);
    static const int kinds[] = {PP_AOP_FWD, PP_AOP_BWD, PP_AOP_BWD_WEIGHT, PP_AOP_OPT,
                                PP_AOP_SEND_ACT, PP_AOP_RECV_ACT};
    static const char *const names[] = {"forward", "backward", "weight gradient", "optimizer",
                                        "send", "receive"};
    for (int k = 0; k < 6; k++)
        fprintf(o, "<span style=\"background:%s\"></span>%s", kind_colour(kinds[k]), names[k]);
    fputs(" (hover a bar for its details)</p>\n", o);
    return ferror(o) ? PP_ERR(PP_ERR_IO, "writing the Gantt SVG failed") : PP_OK;
}

static void section_links(FILE *o, const pp_analysis *a)
{
    if (!a->n_links)
        return;
    fputs("<h2 id=\"links\">Links</h2>\n", o);
    pp_html_table_head(o, "link|kind|messages|MB|GB/s|latency us|wait ms|send ms");
    for (size_t i = 0; i < a->n_links; i++) {
        const pp_alink *l = &a->links[i];
        fprintf(o, "<tr><td>%d &rarr; %d</td><td>%s</td><td class=\"n\">%llu</td>", l->src,
                l->dst, l->grad ? "grad" : "act", (unsigned long long)l->messages);
        pp_html_num_cell(o, NULL, (double)l->bytes / 1e6, "%.3f");
        pp_html_num_cell(o, NULL, l->timed ? l->bandwidth_GBps : NAN, "%.3f");
        pp_html_num_cell(o, NULL, l->timed ? l->latency_ns.median * 1e-3 : NAN, "%.1f");
        pp_html_num_cell(o, NULL, l->wait_ns * 1e-6, "%.3f");
        pp_html_num_cell(o, NULL, l->send_ns * 1e-6, "%.3f");
        fputs("</tr>\n", o);
    }
    fputs("</table>\n", o);
}

static void section_layers(FILE *o, const pp_analysis *a)
{
    if (!a->n_layers)
        return;
    fputs("<h2 id=\"layers\">Layers</h2>\n", o);
    pp_html_table_head(o, "layer|name|fwd ms (median)|bwd ms (median)|parameters|activation bytes");
    for (size_t i = 0; i < a->n_layers; i++) {
        const pp_alayer *l = &a->layers[i];
        fprintf(o, "<tr><td>%d</td><td>", l->layer);
        pp_html_esc(o, l->name);
        fputs("</td>", o);
        pp_html_num_cell(o, NULL, l->fwd_ns.count ? l->fwd_ns.median * 1e-6 : NAN, "%.3f");
        pp_html_num_cell(o, NULL, l->bwd_ns.count ? l->bwd_ns.median * 1e-6 : NAN, "%.3f");
        pp_html_num_cell(o, NULL, l->has_info ? (double)l->param_bytes : NAN, "%.0f");
        pp_html_num_cell(o, NULL, l->has_info ? (double)l->activation_bytes : NAN, "%.0f");
        fputs("</tr>\n", o);
    }
    fputs("</table>\n", o);
}

static void section_gpu(FILE *o, const pp_analysis *a)
{
    const pp_gpu_result *g = &a->gpu;
    if (!g->present)
        return;
    fputs("<h2 id=\"gpu\">GPU</h2>\n<table class=\"kv\">\n", o);
    fprintf(o, "<tr><td>records</td><td>%llu</td></tr>\n", (unsigned long long)g->records);
    fprintf(o, "<tr><td>projected onto pipeline ops</td><td>%llu</td></tr>\n",
            (unsigned long long)g->projected);
    fprintf(o, "<tr><td>GPU span per step</td><td>%.3f ms</td></tr>\n", g->step_ns * 1e-6);
    fprintf(o, "<tr><td>devices' busy time per step</td><td>%.3f ms</td></tr>\n",
            g->device_busy_ns * 1e-6);
    fputs("</table>\n", o);
}

/* Memory (memory.c): per stage the peak of each purpose and of their sum, and when in the step
 * the sum peaked, with the peaks drawn as stacked bars; then every other series (counters, NVTX
 * heaps, each process's resident memory). */
static void section_memory(FILE *o, const pp_analysis *a)
{
    if (!a->n_mem_stages && !a->n_mem_series)
        return;
    fputs("<h2 id=\"memory\">Memory</h2>\n", o);
    if (a->n_mem_stages) {
        fputs("<table>\n<tr><th>stage</th>", o);
        for (int p = 0; p < PP_MEM_N_PURPOSES; p++)
            fprintf(o, "<th>%s MiB</th>", pp_mem_purpose_name(p));
        fputs("<th>total peak MiB</th><th>total peak bytes</th><th>peak in step</th>"
              "<th>at ms</th><th>of the step</th></tr>\n",
              o);
        for (size_t i = 0; i < a->n_mem_stages; i++) {
            const pp_amem_stage *m = &a->mem_stages[i];
            char key[64];
            fprintf(o, "<tr><td>%d</td>", m->stage);
            for (int p = 0; p < PP_MEM_N_PURPOSES; p++)
                pp_html_num_cell(o, NULL, m->purposes & (1u << p) ? m->peak_bytes[p] / 1048576.0 : NAN,
                         "%.2f");
            pp_html_num_cell(o, NULL, m->total_peak_bytes / 1048576.0, "%.2f");
            snprintf(key, sizeof key, "memory.stages.%zu.total_peak_bytes", i);
            pp_html_num_cell(o, key, m->total_peak_bytes, "%.0f");
            if (m->peak_step >= 0)
                fprintf(o, "<td class=\"n\">%lld</td><td class=\"n\">%.3f</td>"
                           "<td class=\"n\">%.0f%%</td>",
                        (long long)m->peak_step, m->peak_offset_ns * 1e-6,
                        m->peak_fraction * 100.0);
            else
                fputs("<td>&ndash;</td><td>&ndash;</td><td>&ndash;</td>", o);
            fputs("</tr>\n", o);
        }
        fputs("</table>\n", o);
        /* the peaks as stacked bars by purpose, scaled to the largest stage */
        double widest = 0;
        for (size_t i = 0; i < a->n_mem_stages; i++) {
            double t = 0;
            for (int p = 0; p < PP_MEM_N_PURPOSES; p++)
                t += a->mem_stages[i].peak_bytes[p];
            widest = fmax(widest, t);
        }
        static const char *const colour[PP_MEM_N_PURPOSES] = {"#4c78a8", "#f58518", "#e45756",
                                                               "#72b7b2", "#54a24b", "#b279a2"};
        if (widest > 0) {
            const int W = 900, left = 70, rowh = 22;
            int H = (int)a->n_mem_stages * rowh + 30;
            fputs("<p class=\"legend\">Peak per purpose (each purpose's own peak):", o);
            for (int p = 0; p < PP_MEM_N_PURPOSES; p++)
                fprintf(o, "<span style=\"background:%s\"></span>%s", colour[p],
                        pp_mem_purpose_name(p));
            fprintf(o, "</p>\n<svg id=\"memory-bars\" width=\"%d\" height=\"%d\" "
                       "xmlns=\"http://www.w3.org/2000/svg\">\n",
                    left + W + 20, H);
            for (size_t i = 0; i < a->n_mem_stages; i++) {
                const pp_amem_stage *m = &a->mem_stages[i];
                double x = left;
                int y = 5 + (int)i * rowh;
                fprintf(o, "<text x=\"4\" y=\"%d\">stage %d</text>\n", y + 14, m->stage);
                for (int p = 0; p < PP_MEM_N_PURPOSES; p++) {
                    double w = m->peak_bytes[p] / widest * W;
                    if (!(w > 0))
                        continue;
                    fprintf(o, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                               "fill=\"%s\"><title>stage %d %s: %.2f MiB</title></rect>\n",
                            x, y, w, rowh - 6, colour[p], m->stage, pp_mem_purpose_name(p),
                            m->peak_bytes[p] / 1048576.0);
                    x += w;
                }
            }
            fprintf(o, "<text x=\"%d\" y=\"%d\">0</text><text x=\"%d\" y=\"%d\" "
                       "text-anchor=\"end\">%.2f MiB</text>\n</svg>\n",
                    left, H - 6, left + W, H - 6, widest / 1048576.0);
        }
    }
    if (a->n_mem_series) {
        pp_html_table_head(o, "series|kind|file|unit|samples|min|max|last");
        for (size_t i = 0; i < a->n_mem_series; i++) {
            const pp_amem_series *s = &a->mem_series[i];
            fputs("<tr><td>", o);
            pp_html_esc(o, s->domain);
            if (s->domain[0])
                fputs(": ", o);
            pp_html_esc(o, s->name);
            fprintf(o, "</td><td>%s</td><td class=\"n\">%d</td><td>",
                    s->kind == PP_AMEM_HEAP ? "heap" : s->kind == PP_AMEM_RSS ? "RSS" : "counter",
                    s->file);
            pp_html_esc(o, s->unit);
            fprintf(o, "</td><td class=\"n\">%llu</td>", (unsigned long long)s->samples);
            pp_html_num_cell(o, NULL, s->min, "%.6g");
            pp_html_num_cell(o, NULL, s->max, "%.6g");
            pp_html_num_cell(o, NULL, s->last, "%.6g");
            fputs("</tr>\n", o);
        }
        fputs("</table>\n", o);
    }
}

/* The row's start that ranges and marks share: "<tr>", their domain, their name (or "(other
 * names)" for the bucket of the names past the cap) and their count. */
static void name_cells(FILE *o, const char *domain, int other, const char *name,
                       unsigned long long count)
{
    fputs("<tr><td>", o);
    pp_html_esc(o, domain);
    fputs("</td><td>", o);
    pp_html_esc(o, other ? "(other names)" : name);
    fprintf(o, "</td><td class=\"n\">%llu</td>", count);
}

static void section_ranges(FILE *o, const pp_analysis *a)
{
    if (!a->n_ranges && !a->n_marks)
        return;
    fputs("<h2 id=\"ranges\">Ranges outside the pipeline</h2>\n", o);
    pp_html_table_head(o, "domain|name|count|total ms|mean ms|median ms|min ms|max ms|std dev ms|"
                          "share of wall");
    for (size_t i = 0; i < a->n_ranges; i++) {
        const pp_arange *r = &a->ranges[i];
        name_cells(o, r->domain, r->other, r->name, r->ns.count);
        pp_html_num_cell(o, NULL, r->ns.sum * 1e-6, "%.3f");
        pp_html_num_cell(o, NULL, r->ns.mean * 1e-6, "%.3f");
        pp_html_num_cell(o, NULL, r->ns.median * 1e-6, "%.3f");
        pp_html_num_cell(o, NULL, r->ns.min * 1e-6, "%.3f");
        pp_html_num_cell(o, NULL, r->ns.max * 1e-6, "%.3f");
        pp_html_num_cell(o, NULL, r->stddev_ns * 1e-6, "%.3f");
        pp_html_num_cell(o, NULL, r->wall_share * 100.0, "%.1f%%");
        fputs("</tr>\n", o);
    }
    fputs("</table>\n", o);
    if (a->n_marks) {
        pp_html_table_head(o, "domain|mark|count");
        for (size_t i = 0; i < a->n_marks; i++) {
            name_cells(o, a->marks[i].domain, a->marks[i].other, a->marks[i].name,
                       a->marks[i].count);
            fputs("</tr>\n", o);
        }
        fputs("</table>\n", o);
    }
}

static void section_warnings(FILE *o, const pp_analysis *a)
{
    fputs("<h2 id=\"warnings\">Warnings</h2>\n", o);
    if (!a->warnings[0]) {
        fputs("<p>None.</p>\n", o);
        return;
    }
    pp_html_lines(o, a->warnings, "warn");
}

pp_status pp_report_html(const pp_analysis *a, const pp_report_html_opts *opt, FILE *o)
{
    if (!a || !o)
        return PP_ERR(PP_ERR_INVALID, "pp_report_html: no analysis or no output");
    const char *title = opt && opt->title && opt->title[0] ? opt->title : "run";
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>"
          "pipeprof: ",
          o);
    pp_html_esc(o, title);
    fprintf(o, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>pipeprof report: ", k_style);
    pp_html_esc(o, title);
    fputs("</h1>\n", o);
    section_run(o, a, opt);
    if (a->S > 0 && a->n_steps) {
        section_summary(o, a);
        section_stages(o, a);
        fputs("<h2 id=\"gantt\">Gantt chart</h2>\n", o);
        pp_status st = pp_report_gantt_svg(a, o);
        if (st != PP_OK)
            return st;
        section_links(o, a);
        section_layers(o, a);
        section_gpu(o, a);
    } else {
        fputs("<p id=\"no-pipeline\">No pipeline steps were found in this run: the ranges below "
              "are what it recorded.</p>\n",
              o);
    }
    section_memory(o, a);
    section_ranges(o, a);
    section_warnings(o, a);
    fprintf(o, "<footer>Written by pipeprof %s (pprof-report --html).</footer>\n</body>\n"
               "</html>\n",
            PP_VERSION);
    if (fflush(o) != 0 || ferror(o))
        return PP_ERR(PP_ERR_IO, "writing the HTML report failed");
    return PP_OK;
}
