/* html.c: the helpers of the analyzer's HTML pages (html_internal.h). */
#include "html_internal.h"

#include <math.h>
#include <string.h>

void pp_html_esc(FILE *o, const char *s)
{
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&': fputs("&amp;", o); break;
        case '<': fputs("&lt;", o); break;
        case '>': fputs("&gt;", o); break;
        case '"': fputs("&quot;", o); break;
        case '\'': fputs("&#39;", o); break;
        default: fputc(c < 0x20 && c != '\t' && c != '\n' ? '?' : c, o);
        }
    }
}

void pp_html_num_cell(FILE *o, const char *key, double v, const char *fmt)
{
    fputs("<td class=\"n\"", o);
    if (key)
        fprintf(o, " data-key=\"%s\"", key);
    fputc('>', o);
    if (isfinite(v))
        fprintf(o, fmt, v);
    else
        fputs("&ndash;", o);
    fputs("</td>", o);
}

void pp_html_table_head(FILE *o, const char *cols)
{
    fputs("<table>\n<tr>", o);
    for (const char *p = cols;;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        fprintf(o, "<th>%.*s</th>", (int)n, p);
        if (!bar)
            break;
        p = bar + 1;
    }
    fputs("</tr>\n", o);
}

void pp_html_lines(FILE *o, const char *text, const char *cls)
{
    fprintf(o, "<ul class=\"%s\">\n", cls ? cls : "");
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), p);
        fputs("<li>", o);
        pp_html_esc(o, line);
        fputs("</li>\n", o);
        p += n + (nl ? 1 : 0);
    }
    fputs("</ul>\n", o);
}
