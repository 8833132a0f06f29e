/* json.c: strict JSON validation helpers shared by the cost, plan, summary and baseline file
 * readers (pp_json.h); the writer is json_write.c. */
#include "pp_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *pp_json_type_name(const cJSON *it)
{
    if (cJSON_IsString(it)) return "a string";
    if (cJSON_IsNumber(it)) return "a number";
    if (cJSON_IsArray(it)) return "an array";
    if (cJSON_IsObject(it)) return "an object";
    if (cJSON_IsBool(it)) return "a boolean";
    if (cJSON_IsNull(it)) return "null";
    return "an invalid value";
}

pp_status pp_json_collect_keys(const cJSON *obj, const char *const *keys, int n_keys,
                               const cJSON **found, const char *ctx)
{
    for (int k = 0; k < n_keys; k++)
        found[k] = NULL;
    for (const cJSON *it = obj->child; it; it = it->next) {
        int k = 0;
        while (k < n_keys && strcmp(it->string, keys[k]) != 0)
            k++;
        if (k == n_keys) {
            char known[512] = "";
            for (int j = 0; j < n_keys; j++) {
                strncat(known, j ? ", " : "", sizeof known - strlen(known) - 1);
                strncat(known, keys[j], sizeof known - strlen(known) - 1);
            }
            return PP_ERR(PP_ERR_INVALID, "%s: unknown key \"%s\" (known: %s)", ctx, it->string,
                          known);
        }
        if (found[k])
            return PP_ERR(PP_ERR_INVALID, "%s: duplicate key \"%s\"", ctx, it->string);
        found[k] = it;
    }
    return PP_OK;
}

pp_status pp_json_get_int(const cJSON *it, const char *ctx, const char *key, double lo, double hi,
                          double *out)
{
    if (!cJSON_IsNumber(it))
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" must be an integer (got %s)", ctx, key,
                      pp_json_type_name(it));
    double x = it->valuedouble;
    if (!isfinite(x) || x != floor(x))
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" must be an integer (got %.17g)", ctx, key, x);
    if (x < lo || x > hi)
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" %.17g is out of range [%.17g, %.17g]", ctx,
                      key, x, lo, hi);
    *out = x;
    return PP_OK;
}

pp_status pp_json_get_real(const cJSON *it, const char *ctx, const char *key, double lo,
                           double hi, double *out)
{
    if (!cJSON_IsNumber(it))
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" must be a number %s%g (got %s)", ctx, key,
                      isinf(hi) ? ">= " : "in range from ", lo, pp_json_type_name(it));
    double x = it->valuedouble;
    if (!isfinite(x))
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" must be a finite number", ctx, key);
    if (x < lo || x > hi) {
        if (isinf(hi))
            return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" must be a number >= %g (got %g)", ctx, key,
                          lo, x);
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" %.17g is out of range [%g, %g]", ctx, key, x,
                      lo, hi);
    }
    *out = x;
    return PP_OK;
}

pp_status pp_json_parse(const char *text, const char *ctx, cJSON **root)
{
    const char *err_at = NULL;
    *root = cJSON_ParseWithOpts(text, &err_at, 1);
    if (*root)
        return PP_OK;
    int line = 1, col = 1;
    for (const char *c = text; err_at && c < err_at && *c; c++) {
        if (*c == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    return PP_ERR(PP_ERR_INVALID, "%s: invalid JSON at line %d, column %d", ctx, line, col);
}

pp_status pp_json_parse_object(const char *text, const char *ctx, const char *const *keys,
                               int n_keys, const cJSON **found, cJSON **root)
{
    pp_status st = pp_json_parse(text, ctx, root);
    if (st != PP_OK)
        return st;
    if (!cJSON_IsObject(*root))
        return PP_ERR(PP_ERR_INVALID, "%s: must be a JSON object (got %s)", ctx,
                      pp_json_type_name(*root));
    return pp_json_collect_keys(*root, keys, n_keys, found, ctx);
}

pp_status pp_json_file_read(const char *path, const char *what, char **text)
{
    *text = NULL;
    size_t len = 0;
    pp_status st = pp_read_file(path, text, &len);
    if (st != PP_OK)
        return pp_error_wrap(st, "%s", what);
    size_t nul = strlen(*text);
    if (nul != len) {
        free(*text);
        *text = NULL;
        return PP_ERR(PP_ERR_INVALID, "%s '%s': contains a NUL byte at offset %zu", what, path,
                      nul);
    }
    return PP_OK;
}

const cJSON *pp_json_member(const cJSON *obj, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

pp_status pp_json_need_object(const cJSON *it, const char *ctx, const char *key)
{
    if (!cJSON_IsObject(it))
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" must be an object (got %s)", ctx, key,
                      it ? pp_json_type_name(it) : "nothing: it is missing");
    return PP_OK;
}

pp_status pp_json_need_array(const cJSON *it, const char *ctx, const char *key)
{
    if (!cJSON_IsArray(it))
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" must be an array (got %s)", ctx, key,
                      it ? pp_json_type_name(it) : "nothing: it is missing");
    return PP_OK;
}

/* obj's member key unless it is absent or null. */
static const cJSON *given(const cJSON *obj, const char *key)
{
    const cJSON *it = pp_json_member(obj, key);
    return it && !cJSON_IsNull(it) ? it : NULL;
}

pp_status pp_json_opt_real(const cJSON *obj, const char *ctx, const char *key, double lo,
                           double hi, double dflt, double *out)
{
    const cJSON *it = given(obj, key);
    *out = dflt;
    return it ? pp_json_get_real(it, ctx, key, lo, hi, out) : PP_OK;
}

pp_status pp_json_opt_int(const cJSON *obj, const char *ctx, const char *key, double lo,
                          double hi, double dflt, double *out)
{
    const cJSON *it = given(obj, key);
    *out = dflt;
    return it ? pp_json_get_int(it, ctx, key, lo, hi, out) : PP_OK;
}

pp_status pp_json_opt_string(const cJSON *obj, const char *ctx, const char *key, char *buf,
                             size_t cap)
{
    const cJSON *it = given(obj, key);
    buf[0] = '\0';
    if (!it)
        return PP_OK;
    if (!cJSON_IsString(it))
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" must be a string (got %s)", ctx, key,
                      pp_json_type_name(it));
    if (strlen(it->valuestring) >= cap)
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" is longer than %zu characters", ctx, key,
                      cap - 1);
    snprintf(buf, cap, "%s", it->valuestring);
    return PP_OK;
}

