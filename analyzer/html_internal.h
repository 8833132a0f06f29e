/* html_internal.h: what the analyzer's HTML pages share (html.c): escaping, a number cell with its
 * data-key, a table's header row, a list of '\n'-separated lines. report_html.c (pprof-report
 * --html), check_html.c (pprof-check --html) and tune_auto.c (pprof-tune --auto's index). */
#ifndef PP_HTML_INTERNAL_H
#define PP_HTML_INTERNAL_H

#include <stdio.h>

/* s with the five characters HTML cares about escaped; control bytes (but tab and newline)
 * become '?', so that a hostile name cannot break the page. NULL writes nothing. */
void pp_html_esc(FILE *o, const char *s);
/* A right-aligned <td> holding v printed with fmt (a dash when v is not finite), with
 * data-key="key" when key is not NULL. */
void pp_html_num_cell(FILE *o, const char *key, double v, const char *fmt);
/* "<table>" and its header row: a <th> for each '|'-separated column name in cols, written as
 * it is (the names are literals in the code, not escaped; an empty name, an empty cell). */
void pp_html_table_head(FILE *o, const char *cols);
/* text's '\n'-separated lines as <li> items of a <ul class="cls"> (each at most 1023 bytes). */
void pp_html_lines(FILE *o, const char *text, const char *cls);

#endif /* PP_HTML_INTERNAL_H */
