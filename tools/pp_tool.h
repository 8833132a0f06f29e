/* pp_tool.h: what every pipeprof command shares (tools/tool.c): its name in messages, the -v and
 * -q state, usage errors and the mapping of a library status to a message and an exit code
 * (0 ok, 1 check failed, 2 usage or bad input, 3 runtime error). */
#ifndef PP_TOOL_H
#define PP_TOOL_H

#include "pp_common.h"

extern int pp_tool_verbose; /* -v given */
extern int pp_tool_quiet;   /* -q given */

/* Sets the name that prefixes every message ("pprof-run"). */
void pp_tool_init(const char *name);
/* "NAME: <message>" and "Try 'NAME --help'." on stderr; returns PP_EXIT_USAGE. */
int pp_tool_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "NAME: <the last error>" on stderr (and where it was raised, with -v); returns the status's
 * exit code. */
int pp_tool_fail(pp_status st);
/* "NAME: <message>" on stderr unless -q (and, when verbose_only, only with -v). */
void pp_tool_note(int verbose_only, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* PP_TOOL_H */
