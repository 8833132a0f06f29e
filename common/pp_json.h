/* pp_json.h: strict validation helpers over cJSON for pipeprof's JSON files (cost, plan, and
 * later summary and baseline files): every problem is PP_ERR_INVALID with a message that names
 * the context (file, object), the key and what was wrong. */
#ifndef PP_JSON_H
#define PP_JSON_H

#include "pp_common.h"

#include <cJSON.h>

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

#ifdef __cplusplus
}
#endif
#endif /* PP_JSON_H */
