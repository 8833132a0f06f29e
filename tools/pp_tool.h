/* pp_tool.h: what every pipeprof command shares (tools/tool.c): its name in messages, the -v and
 * -q state, usage errors and the mapping of a library status to a message and an exit code
 * (0 ok, 1 check failed, 2 usage or bad input, 3 runtime error); the option parsing every
 * command repeats (-q, -v, -h, missing and unknown options, numbers, --steps ranges); and the
 * preparation of an output directory that keeps the previous one as DIR.old. */
#ifndef PP_TOOL_H
#define PP_TOOL_H

#include "pp_common.h"

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

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

/* ---- options ---------------------------------------------------------------------------- */

/* What the option helpers return when parsing goes on; anything else is the exit code. */
enum { PP_TOOL_GO_ON = -1 };

/* The entries every command's getopt_long table ends with (and the terminator). */
#define PP_TOOL_OPTIONS_COMMON                                                                     \
    {"quiet", no_argument, 0, 'q'}, {"verbose", no_argument, 0, 'v'},                              \
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, PP_TOOL_OPT_VERSION},           \
        { 0, 0, 0, 0 }
/* --version's getopt value: above every tool's own option numbers */
enum { PP_TOOL_OPT_VERSION = 0x10000 };
/* Prints "NAME (pipeprof) VERSION" and the git commit the tool was built from, when known. */
void pp_tool_print_version(void);

/* Progress of long work on a terminal: after start, a line on stderr, rewritten every half
 * second once the work has taken a second, says what is being done, the trace bytes read so far
 * and their rate, and the time spent ("pprof-report: analysing 3 trace files: 1.8 GB read
 * (610 MB/s), 3.0 s"); stop erases it. Shown only when stderr is a terminal and -q was not given;
 * PPROF_PROGRESS=never turns it off, =always shows it anyway, at once and each 100 ms (tests).
 * phase changes the words on the line. Safe to call when it is off; start/stop do not nest. */
void pp_tool_progress_start(const char *what);
void pp_tool_progress_phase(const char *what);
void pp_tool_progress_stop(void);

/* The getopt_long results every command handles alike: 'q' and 'v' set *quiet and *verbose
 * (PP_TOOL_GO_ON), 'h' prints `usage` on stdout (PP_EXIT_OK), --version the version
 * (PP_EXIT_OK), ':' is "option 'X' needs a
 * value" and anything else "unknown option 'X'" (PP_EXIT_USAGE). For the default case. */
int pp_tool_option_common(int c, char **argv, const char *usage, int *quiet, int *verbose);

/* A value parsed by a library parser: PP_TOOL_GO_ON when st is PP_OK, else the usage error with
 * the parser's message. */
int pp_tool_option_status(pp_status st);
/* pp_parse_i64 / pp_parse_f64 of an option's value, as pp_tool_option_status. */
int pp_tool_option_i64(const char *s, const char *what, int64_t lo, int64_t hi, int64_t *out);
int pp_tool_option_f64(const char *s, const char *what, double lo, double hi, double *out);

/* --steps N:M or N: (first and last step, N >= 1, M >= N, both below 2^40); *hi = 0 for "N:".
 * `purpose` ends the message for a value without a colon ("first and last step to capture").
 * PP_ERR_INVALID with the message otherwise. */
pp_status pp_tool_parse_steps(const char *s, const char *purpose, int64_t *lo, int64_t *hi);

/* 1 when `s` is a well-formed comma-separated list shorter than `cap`: not empty, no empty
 * item (",," or a comma at either end). */
int pp_tool_list_well_formed(const char *s, size_t cap);
/* Passes each item of the comma-separated list `s`, in order, to fn (empty items are skipped:
 * check the form first where they are an error); returns the first status that is not PP_OK. */
typedef pp_status (*pp_tool_item_fn)(void *ctx, const char *item);
pp_status pp_tool_list_each(const char *s, pp_tool_item_fn fn, void *ctx);
/* A list of integers, filled by pp_tool_list_each(s, pp_tool_int_item, &list): each item parsed
 * as `what` ("--ranks rank") in [lo, hi] and appended to items[n]; more than `max` is
 * "<opt>: more than <max> <plural>". */
typedef struct pp_tool_int_list {
    const char *what, *opt, *plural;
    int64_t lo, hi;
    int *items;
    int max, n;
} pp_tool_int_list;
pp_status pp_tool_int_item(void *list, const char *item);

/* ---- output directories ----------------------------------------------------------------- */

/* What is at a path a command is to write its output directory to. */
typedef enum pp_tool_dir_kind {
    PP_TOOL_DIR_MISSING,
    PP_TOOL_DIR_EMPTY,
    PP_TOOL_DIR_OURS,    /* holds an entry only such an output holds: a previous output */
    PP_TOOL_DIR_OTHER,   /* something else (or unreadable) */
    PP_TOOL_DIR_NOT_DIR
} pp_tool_dir_kind;

/* A command's kind of output directory, and how its messages name it. */
typedef struct pp_tool_outdir {
    int (*is_ours)(const char *name); /* an entry only this command's outputs hold */
    const char *lacks;       /* "no manifest or .pft file": "it holds 'x' and <lacks>" */
    const char *noun;        /* "run": "cannot keep the previous run of 'D': ...", "cannot
                                remove the older run 'D.old'", "previous run kept as 'D.old'" */
    const char *old_is_not;  /* "is not a run directory": "'D.old' exists and <old_is_not>" */
    int say_why;             /* append what was found in D.old, in parentheses */
} pp_tool_outdir;

/* Classifies `path`; for OTHER and NOT_DIR `why` says what was found ("it holds 'x' and ...",
 * "it is not a directory", the error). */
pp_tool_dir_kind pp_tool_dir_classify(const char *path, const pp_tool_outdir *k, char *why,
                                      size_t cap);

/* mkdir -p with mode 0777 (the umask decides); `what` names the directory in the message
 * ("cannot create <what> 'a/b': ..."), the failure is `err`. */
pp_status pp_tool_mkdir_p(const char *path, const char *what, pp_status err);

/* Renames `dir` (a previous output) to dir.old, removing an older dir.old first; a dir.old that
 * is not one of ours (nor empty) is refused. */
pp_status pp_tool_dir_keep_old(const char *dir, const pp_tool_outdir *k);

/* Copies `path` into buf without its trailing slashes ("run/" rotates to "run.old", not
 * "run/.old"). 0 when it does not fit. */
int pp_tool_path_trim(const char *path, char *buf, size_t cap);

#endif /* PP_TOOL_H */
