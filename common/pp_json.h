/* pp_json.h: pipeprof's JSON, both ways. Reading (json.c): strict validation helpers over cJSON
 * for the cost, plan, summary and baseline files: every problem is PP_ERR_INVALID with a message
 * that names the context (file, object), the key and what was wrong. Writing (json_write.c): one
 * streaming writer to a FILE* that every JSON output goes through (summary, Chrome trace,
 * pprof-check's JSON and baselines, cost and plan files, pprof-run's manifest), so strings are
 * escaped one way and numbers have fixed formats (golden files and diffs between runs stay
 * byte-stable). */
#ifndef PP_JSON_H
#define PP_JSON_H

#include "pp_common.h"

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Integers up to 2^53 survive cJSON's doubles exactly; larger ones are refused, not rounded. */
#define PP_JSON_MAX_EXACT_INT 9007199254740992.0

/* "a string", "a number", ... for messages. */
const char *pp_json_type_name(const cJSON *it);
/* Sorts the members of obj into found[k] by keys[k]; unknown and repeated keys are errors that
 * list the known keys. */
pp_status pp_json_collect_keys(const cJSON *obj, const char *const *keys, int n_keys,
                               const cJSON **found, const char *ctx);
/* An integer in [lo, hi] (|bounds| <= 2^53). */
pp_status pp_json_get_int(const cJSON *it, const char *ctx, const char *key, double lo, double hi,
                          double *out);
/* A finite number in [lo, hi]; the message says ">= lo" when hi is infinite. */
pp_status pp_json_get_real(const cJSON *it, const char *ctx, const char *key, double lo,
                           double hi, double *out);
/* Parses a whole text as one JSON value (nothing may follow it); a syntax error names the line
 * and column. The caller deletes *root. */
pp_status pp_json_parse(const char *text, const char *ctx, cJSON **root);
/* pp_json_parse, then the value must be an object whose members pp_json_collect_keys sorts. */
pp_status pp_json_parse_object(const char *text, const char *ctx, const char *const *keys,
                               int n_keys, const cJSON **found, cJSON **root);

/* obj's member named key (case-sensitive), NULL when absent. */
const cJSON *pp_json_member(const cJSON *obj, const char *key);
/* it must be an object / an array; a missing one (NULL) is named as missing. */
pp_status pp_json_need_object(const cJSON *it, const char *ctx, const char *key);
pp_status pp_json_need_array(const cJSON *it, const char *ctx, const char *key);
/* Optional members: absent or null gives *out = dflt (a string: ""); anything else must pass
 * pp_json_get_real / pp_json_get_int, or be a string shorter than cap. */
pp_status pp_json_opt_real(const cJSON *obj, const char *ctx, const char *key, double lo,
                           double hi, double dflt, double *out);
pp_status pp_json_opt_int(const cJSON *obj, const char *ctx, const char *key, double lo,
                          double hi, double dflt, double *out);
pp_status pp_json_opt_string(const cJSON *obj, const char *ctx, const char *key, char *buf,
                             size_t cap);
/* Reads a whole JSON file as text for the parsers above; a NUL byte in it is PP_ERR_INVALID,
 * "<what> '<path>': contains a NUL byte at offset N" (cJSON would stop there), and read errors
 * are wrapped with `what`. The caller frees *text. */
pp_status pp_json_file_read(const char *path, const char *what, char **text);

/* ---- writing ------------------------------------------------------------------------------- */

/* How containers are laid out. Inline containers (pp_json_object_inline, pp_json_array_inline)
 * put their members on one line, separated by ", ", in both layouts. */
typedef enum pp_json_layout {
    /* Two spaces a level, "key": value; a block container puts each member on a line of its
     * own, everything inside an inline container is inline too, an empty container is {} or []
     * (the summary, Chrome trace, pprof-check JSON, baseline and cost files). */
    PP_JSON_PRETTY = 0,
    /* The layout cJSON_Print gave the plan file and pprof-run's manifest, kept so that those
     * files stay as they were: a tab a level, "key":<tab>value, an object inside an inline
     * array is still a block, and an empty block object is "{" newline "}". */
    PP_JSON_TABS = 1
} pp_json_layout;

enum { PP_JSON_MAX_DEPTH = 32 };

/* One output in progress. Fields are private to json_write.c. */
typedef struct pp_json_writer {
    FILE *f;
    const char *what;  /* "the summary JSON": named in error messages */
    pp_json_layout layout;
    pp_status status;  /* the first error; every call after it does nothing */
    int depth;
    int done;          /* the top-level value is complete */
    int wrap;          /* the next member of an inline container starts a continuation line */
    struct pp_json_level {
        char close;    /* '}' or ']' */
        int n;         /* members written */
        int inl;       /* one line */
    } level[PP_JSON_MAX_DEPTH];
} pp_json_writer;

/* Starts writing one JSON value (usually an object) to f; `what` names the output in errors and
 * must outlive the writer. */
void pp_json_writer_init(pp_json_writer *w, FILE *f, const char *what, pp_json_layout layout);
/* Ends the output: the top-level value must be complete. Writes the final newline, flushes f
 * and returns the first error met: PP_ERR_IO "writing <what>: <reason>" when f failed,
 * PP_ERR_INVALID for a misuse (a key inside an array, a value without one inside an object,
 * more than PP_JSON_MAX_DEPTH levels, a container left open or closed twice). */
pp_status pp_json_writer_finish(pp_json_writer *w);
/* The first error so far (PP_OK while none): lets a long loop stop early. */
pp_status pp_json_writer_status(const pp_json_writer *w);

/* Containers. `key` is the member's name inside an object and NULL elsewhere (the top level,
 * array elements); pp_json_end closes the innermost open container. */
void pp_json_object(pp_json_writer *w, const char *key);
void pp_json_object_inline(pp_json_writer *w, const char *key);
void pp_json_array(pp_json_writer *w, const char *key);
void pp_json_array_inline(pp_json_writer *w, const char *key);
void pp_json_end(pp_json_writer *w);
/* Inside an inline container: the next member starts a new line, indented one space past the
 * line the (outermost) inline container starts on: a long record on two or three lines. */
void pp_json_wrap(pp_json_writer *w);

/* Values. Strings are escaped as RFC 8259 asks (\" \\ \b \f \n \r \t, other control bytes
 * as \u00XX); bytes that are not valid UTF-8 become U+FFFD, so paths and host names from any
 * filesystem still give valid JSON. A NULL string is null. Every number that is not finite is
 * null, and -0 is written 0. */
void pp_json_put_str(pp_json_writer *w, const char *key, const char *s);
/* The bytes of the valid UTF-8 sequence s starts with (1 to 4), 0 when it starts with none (or
 * at the NUL): the writer's rule. pp_json_utf8_valid: 1 when all of s is valid UTF-8, so that a
 * reader can refuse a string the writer would not give back as it was. */
size_t pp_json_utf8_seq(const char *s);
int pp_json_utf8_valid(const char *s);
void pp_json_put_int(pp_json_writer *w, const char *key, long long v);
void pp_json_put_uint(pp_json_writer *w, const char *key, uint64_t v);
void pp_json_put_bool(pp_json_writer *w, const char *key, int v);
void pp_json_put_null(pp_json_writer *w, const char *key);
/* %.10g: the measured figures (ten digits outlast any clock's precision). */
void pp_json_put_real(pp_json_writer *w, const char *key, double v);
/* pp_json_put_real when v > 0, else null: figures that are unknown when not positive
 * (throughput, samples per step, bandwidths). */
void pp_json_put_real_pos(pp_json_writer *w, const char *key, double v);
/* %.<digits>g (pprof-check's test parameters use 6, printf's %g). */
void pp_json_put_real_digits(pp_json_writer *w, const char *key, int digits, double v);
/* %.<decimals>f (the Chrome trace's microseconds with nanosecond digits: 3). */
void pp_json_put_fixed(pp_json_writer *w, const char *key, int decimals, double v);
/* The shortest of 15 to 17 significant digits that reads back as exactly v: inputs of other
 * tools (cost and plan files) that must survive a write and a read unchanged. */
void pp_json_put_exact(pp_json_writer *w, const char *key, double v);

/* Writes a whole file atomically (pp_write_file_atomic) from what fill() writes through a
 * writer opened on it: nothing is left at path when fill or the write fails. fill's status,
 * else the writer's, is returned. */
pp_status pp_json_file_write(const char *path, const char *what, pp_json_layout layout,
                             pp_status (*fill)(pp_json_writer *w, const void *ctx),
                             const void *ctx);

#ifdef __cplusplus
}
#endif
#endif /* PP_JSON_H */
