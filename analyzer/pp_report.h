/* pp_report.h: the outputs of pprof-report built from an analysis (pp_analyzer.h): the summary
 * JSON (docs/summary-json.md; the input and baseline of pprof-check), a Gantt picture of the kept
 * timeline drawn with gnuplot, and a Chrome trace-event file for Perfetto / chrome://tracing
 * (docs/cli/pprof-report.md). Everything is computed from the public pp_analysis struct; the
 * analysis is only read. No function here keeps state: all are safe to call from several
 * threads on different outputs. */
#ifndef PP_REPORT_H
#define PP_REPORT_H

#include "pp_analyzer.h"
#include "pp_summary.h"

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The Gantt draws at most this many consecutive steps (the first ones of the kept range): more
 * would make each bar narrower than a pixel at the picture's width. */
#define PP_REPORT_GANTT_MAX_STEPS 8
/* Without pipeline ranges the Gantt draws one row per thread, its top-level ranges (the generic
 * view, docs/cli/pprof-report.md): at most this many bars, the first ones in the traces; the
 * title says how many were left out. */
#define PP_REPORT_GANTT_MAX_BARS 20000

/* Writes the summary JSON of `a` to `out`: pp_summary_write (pp_summary.h, which owns the
 * format) under pprof-report's name. PP_ERR_IO when writing fails. */
pp_status pp_report_json(const pp_analysis *a, FILE *out);

/* Writes the Gantt's data: one line per bar, "stage start_ms end_ms kind mb chunk", times in ms
 * from the start of the first drawn step, for the compute and transfer ops of the drawn steps
 * (at most PP_REPORT_GANTT_MAX_STEPS from kept_lo). Comment lines start with '#'. Without a
 * pipeline timeline but with other ranges: "thread start_ms end_ms rgb startend" per top-level
 * range (thread: index in a->threads; times from a->wall_t0_ns; startend 1 for a start/end
 * range), at most PP_REPORT_GANTT_MAX_BARS, read again from the traces. */
pp_status pp_report_gantt_data(const pp_analysis *a, FILE *out);

/* Draws the kept timeline to out_path (.png or .svg, chosen by the extension; anything else is
 * PP_ERR_INVALID). The data goes to data_path (NULL: out_path with its extension replaced by
 * .dat) and the gnuplot script next to the data, with .gp in place of the data file's extension;
 * both are left in place so the picture can be restyled by hand. gnuplot is run from PATH
 * without a shell; not found: PP_ERR_RUNTIME "gnuplot not found (install gnuplot-nox)". */
pp_status pp_report_gantt(const pp_analysis *a, const char *out_path, const char *data_path);

/* Writes the kept timeline as a Chrome trace-event JSON object: one process per rank, one
 * track per stage, an "X" event per op and per layer op, flow arrows from each send to its
 * receive. Times in microseconds from the start of the first kept step. With ranges outside the
 * pipeline (a->n_ranges, a->n_marks) the traces are read again and every such range ("X", cat
 * "nvtx") and mark ("i") goes on a track of its thread (tid 100000 + its index in a->threads),
 * with args domain, category, payload, os_tid: all of them without a pipeline (times from
 * a->wall_t0_ns, otherData.time_origin_ns), those overlapping the kept steps with one. Memory
 * (a->n_mem_stages, a->n_mem_series) adds a "C" counter track per stage and per series, read
 * again from the traces likewise. */
pp_status pp_report_chrome(const pp_analysis *a, FILE *out);

/* One self-contained HTML page of the analysis (report_html.c): the run, step time and bubble,
 * the stages with their bubble decomposition as stacked bars, the kept steps' Gantt chart as
 * inline SVG (micro-batch labels, details on hover), links, layers, GPU, the ranges outside the
 * pipeline, warnings; no network, no script. Numbers the summary JSON also holds carry a
 * data-key attribute naming its field (e.g. "step_ms.median"). title: the page's (NULL: "run");
 * command: the job's command line when known (NULL: not shown). PP_ERR_IO when writing fails. */
typedef struct pp_report_html_opts {
    const char *title;
    const char *command;
} pp_report_html_opts;
pp_status pp_report_html(const pp_analysis *a, const pp_report_html_opts *opts, FILE *out);
/* The Gantt chart alone, as an inline <svg> element (or a line saying no timeline was kept), for
 * pages that show several runs (pprof-tune --auto's index). */
pp_status pp_report_gantt_svg(const pp_analysis *a, FILE *out);

/* Pairs the kept sends with their receives. Links are FIFO: the k-th send of a step on
 * (src stage, dst stage, act|grad) meets the k-th receive of that step on (dst, src, same kind).
 * recv_of[i] (caller-allocated, a->n_ops entries) becomes the index in a->ops of the receive
 * matching send i, and -1 for a send without a receive and for every other op. Returns the
 * number of pairs, or -1 when memory runs out. */
long pp_report_pair_transfers(const pp_analysis *a, long *recv_of);

#ifdef __cplusplus
}
#endif
#endif /* PP_REPORT_H */
