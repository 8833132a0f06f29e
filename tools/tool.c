/* tool.c: messages and exit codes shared by the pipeprof commands (pp_tool.h). */
#include "pp_tool.h"

#include <stdarg.h>
#include <stdio.h>

int pp_tool_verbose, pp_tool_quiet;
static const char *g_name = "pipeprof";

void pp_tool_init(const char *name) { g_name = name; }

int pp_tool_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", g_name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry '%s --help'.\n", g_name);
    va_end(ap);
    return PP_EXIT_USAGE;
}

int pp_tool_fail(pp_status st)
{
    fprintf(stderr, "%s: %s\n", g_name, pp_error_message());
    if (pp_tool_verbose && pp_error_origin()[0])
        fprintf(stderr, "%s: (raised at %s)\n", g_name, pp_error_origin());
    return pp_status_exit_code(st);
}

void pp_tool_note(int verbose_only, const char *fmt, ...)
{
    if (pp_tool_quiet || (verbose_only && !pp_tool_verbose))
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", g_name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
