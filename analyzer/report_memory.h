/* report_memory.h: the memory parts of the text report and the summary JSON (report_memory.c),
 * called by report_text.c (pp_analysis_print) and summary.c (pp_summary_write). Internal to
 * analyzer/. */
#ifndef PP_REPORT_MEMORY_H
#define PP_REPORT_MEMORY_H

#include "pp_analyzer.h"
#include "pp_json.h"

#include <stdio.h>

/* The "Memory per stage" and "Memory and counter series" tables; nothing without memory. */
void an_report_memory_text(const pp_analysis *a, FILE *out);
/* The summary's "memory" object (docs/summary-json.md); nothing without memory. */
void an_summary_memory(pp_json_writer *w, const pp_analysis *a);

/* The Gantt's memory rows (report.c): one row per stage of a->mem_stages below the S pipeline
 * rows, its total memory over the drawn window as a step curve (the stage's least and largest
 * value in the window bound its row). The data, a file of its own
 * (FILE.mem.dat beside the bars'): one gnuplot data block per row ("stage t_ms t_ms mem
 * total_MiB place"), read again from the traces; nothing without memory. */
struct pp_report_window;
pp_status an_gantt_memory_data(const pp_analysis *a, const struct pp_report_window *win,
                               FILE *out);
/* The rows' ytics entries (after the stages') and plot elements (after the ops'; they read
 * the script's `memdata`). */
void an_gantt_memory_ytics(const pp_analysis *a, int S, FILE *f);
void an_gantt_memory_plot(const pp_analysis *a, int S, FILE *f);

#endif /* PP_REPORT_MEMORY_H */
