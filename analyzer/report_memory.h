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

#endif /* PP_REPORT_MEMORY_H */
