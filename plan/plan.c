/* plan.c: the plan file (docs/plan-file.md): the stages, boundaries, schedule and micro-batching
 * that pprof-tune proposes and pptrain --plan (or PPROF_PLAN) runs. Loading validates every
 * field and names the file and field of the first problem. */
#include "pp_json.h"
#include "pp_plan.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EXACT_INT PP_JSON_MAX_EXACT_INT
#define MAX_EXACT_U64 (UINT64_C(1) << 53)

static const char *const k_keys[] = {"version",     "num_layers",      "stages",
                                     "virtual_stages", "boundaries",   "schedule",
                                     "microbatches", "microbatch_size", "memory_limit_bytes",
                                     "predicted",   "baseline"};
enum {
    K_VERSION, K_LAYERS, K_STAGES, K_VIRTUAL, K_BOUNDS, K_SCHEDULE, K_M, K_MBS, K_MEMORY,
    K_PREDICTED, K_BASELINE, N_KEYS
};
static const char *const k_pred_keys[] = {"step_ms", "bubble_ratio"};

/* Names as the schedule module spells them; compared as text so the plan file does not depend
 * on which schedules this build implements (pp_schedule_check_args says that). */
static const char *const k_schedules[] = {"gpipe", "1f1b", "interleaved", "zb-h1"};

static pp_status parse_predicted(const cJSON *obj, const char *ctx, pp_plan *p)
{
    char pctx[320];
    snprintf(pctx, sizeof pctx, "%s: \"predicted\"", ctx);
    if (!cJSON_IsObject(obj))
        return PP_ERR(PP_ERR_INVALID, "%s must be an object (got %s)", pctx, pp_json_type_name(obj));
    const cJSON *f[2];
    pp_status st = pp_json_collect_keys(obj, k_pred_keys, 2, f, pctx);
    if (st != PP_OK)
        return st;
    if (f[0] && (st = pp_json_get_real(f[0], pctx, "step_ms", 0, HUGE_VAL, &p->predicted_step_ms)) != PP_OK)
        return st;
    if (f[1] && (st = pp_json_get_real(f[1], pctx, "bubble_ratio", 0, 1, &p->predicted_bubble)) != PP_OK)
        return st;
    return PP_OK;
}

pp_status pp_plan_parse(const char *json, const char *origin, pp_plan *out)
{
    memset(out, 0, sizeof *out);
    if (!origin)
        origin = "(text)";
    char ctx[256];
    snprintf(ctx, sizeof ctx, "plan '%s'", origin);
    if (!json)
        return PP_ERR(PP_ERR_INVALID, "%s: no text", ctx);
    pp_plan p = {.version = 1, .predicted_step_ms = -1, .predicted_bubble = -1};
    pp_status st = PP_OK;
    int *bounds = NULL;
    cJSON *root = NULL;
    const cJSON *f[N_KEYS];
    if ((st = pp_json_parse_object(json, ctx, k_keys, N_KEYS, f, &root)) != PP_OK)
        goto done;
    static const int required[] = {K_VERSION, K_LAYERS, K_STAGES, K_BOUNDS, K_SCHEDULE, K_M};
    for (size_t r = 0; r < sizeof required / sizeof required[0]; r++) {
        if (!f[required[r]]) {
            st = PP_ERR(PP_ERR_INVALID, "%s: missing \"%s\"", ctx, k_keys[required[r]]);
            goto done;
        }
    }
    double x = 0, S = 0, v = 1;
    if ((st = pp_json_get_int(f[K_VERSION], ctx, "version", -MAX_EXACT_INT, MAX_EXACT_INT, &x)) != PP_OK)
        goto done;
    if (x != 1) {
        st = PP_ERR(PP_ERR_INVALID, "%s: unsupported version %.17g (this build reads version 1)",
                    ctx, x);
        goto done;
    }
    if ((st = pp_json_get_int(f[K_LAYERS], ctx, "num_layers", 1, 2147483647.0, &x)) != PP_OK)
        goto done;
    p.num_layers = (int)x;
    if ((st = pp_json_get_int(f[K_STAGES], ctx, "stages", 1, 2147483647.0, &S)) != PP_OK)
        goto done;
    if (f[K_VIRTUAL] &&
        (st = pp_json_get_int(f[K_VIRTUAL], ctx, "virtual_stages", 1, 2147483647.0, &v)) != PP_OK)
        goto done;

    const cJSON *jb = f[K_BOUNDS];
    if (!cJSON_IsArray(jb)) {
        st = PP_ERR(PP_ERR_INVALID, "%s: \"boundaries\" must be an array of integers (got %s)",
                    ctx, pp_json_type_name(jb));
        goto done;
    }
    int n = cJSON_GetArraySize(jb);
    if (!(bounds = malloc(((size_t)n + 1) * sizeof *bounds))) {
        st = PP_ERR(PP_ERR_NOMEM, "%s: cannot allocate %d boundaries", ctx, n);
        goto done;
    }
    int i = 0;
    for (const cJSON *it = jb->child; it; it = it->next, i++) {
        char key[48];
        snprintf(key, sizeof key, "boundaries[%d]", i);
        if ((st = pp_json_get_int(it, ctx, key, -2147483648.0, 2147483647.0, &x)) != PP_OK)
            goto done;
        bounds[i] = (int)x;
    }
    st = pp_partition_from_bounds(bounds, n, p.num_layers, (int)S, (int)v, &p.partition);
    if (st != PP_OK) {
        st = pp_error_wrap(st, "%s: \"boundaries\"", ctx);
        goto done;
    }

    const cJSON *js = f[K_SCHEDULE];
    if (!cJSON_IsString(js)) {
        st = PP_ERR(PP_ERR_INVALID, "%s: \"schedule\" must be a string (got %s)", ctx,
                    pp_json_type_name(js));
        goto done;
    }
    size_t k = 0, n_sched = sizeof k_schedules / sizeof k_schedules[0];
    while (k < n_sched && strcmp(js->valuestring, k_schedules[k]) != 0)
        k++;
    if (k == n_sched) {
        st = PP_ERR(PP_ERR_INVALID,
                    "%s: unknown schedule \"%.64s\" (known: gpipe, 1f1b, interleaved, zb-h1)", ctx,
                    js->valuestring);
        goto done;
    }
    snprintf(p.schedule, sizeof p.schedule, "%s", k_schedules[k]);

    if ((st = pp_json_get_int(f[K_M], ctx, "microbatches", 1, 2147483647.0, &x)) != PP_OK)
        goto done;
    p.microbatches = (int)x;
    if (f[K_MBS]) {
        if ((st = pp_json_get_int(f[K_MBS], ctx, "microbatch_size", 0, 2147483647.0, &x)) != PP_OK)
            goto done;
        p.microbatch_size = (int)x;
    }
    if (f[K_MEMORY]) {
        if ((st = pp_json_get_int(f[K_MEMORY], ctx, "memory_limit_bytes", 0, MAX_EXACT_INT, &x)) != PP_OK)
            goto done;
        p.memory_limit_bytes = (uint64_t)x;
    }
    if (f[K_PREDICTED] && (st = parse_predicted(f[K_PREDICTED], ctx, &p)) != PP_OK)
        goto done;
    if (f[K_BASELINE]) {
        const cJSON *jl = f[K_BASELINE];
        if (!cJSON_IsString(jl)) {
            st = PP_ERR(PP_ERR_INVALID, "%s: \"baseline\" must be a string (got %s)", ctx,
                        pp_json_type_name(jl));
            goto done;
        }
        size_t len = strlen(jl->valuestring);
        if (len >= sizeof p.baseline) {
            st = PP_ERR(PP_ERR_INVALID, "%s: \"baseline\" is %zu characters (at most %zu)", ctx,
                        len, sizeof p.baseline - 1);
            goto done;
        }
        memcpy(p.baseline, jl->valuestring, len + 1);
    }
    *out = p;
    p.partition.bounds = NULL; /* now owned by *out */
done:
    pp_partition_free(&p.partition);
    free(bounds);
    cJSON_Delete(root);
    return st;
}

pp_status pp_plan_load(const char *path, pp_plan *out)
{
    memset(out, 0, sizeof *out);
    char *text = NULL;
    size_t len = 0;
    pp_status st = pp_read_file(path, &text, &len);
    if (st != PP_OK)
        return pp_error_wrap(st, "plan");
    if (strlen(text) != len)
        st = PP_ERR(PP_ERR_INVALID, "plan '%s': contains a NUL byte at offset %zu", path,
                    strlen(text));
    else
        st = pp_plan_parse(text, path, out);
    free(text);
    return st;
}

/* A JSON number that reads back as exactly x: the shortest of 15 to 17 significant digits.
 * cJSON's own printer is not used for numbers so integers above 2^31 stay plain integers. */
static cJSON *raw_double(double x)
{
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    return cJSON_CreateRaw(buf);
}

static cJSON *raw_u64(uint64_t x)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)x);
    return cJSON_CreateRaw(buf);
}

pp_status pp_plan_write(const pp_plan *p, const char *path)
{
    /* Refuse what the loader would refuse, so a written plan always loads. */
    if (!p)
        return PP_ERR(PP_ERR_INVALID, "plan '%s': no plan to write", path);
    pp_partition check = {0};
    pp_status st = pp_partition_from_bounds(p->partition.bounds, p->partition.P + 1, p->num_layers,
                                            p->partition.S, p->partition.v, &check);
    pp_partition_free(&check);
    if (st != PP_OK)
        return pp_error_wrap(st, "plan '%s': cannot write", path);
    size_t k = 0, n_sched = sizeof k_schedules / sizeof k_schedules[0];
    while (k < n_sched && strncmp(p->schedule, k_schedules[k], sizeof p->schedule) != 0)
        k++;
    if (k == n_sched)
        return PP_ERR(PP_ERR_INVALID, "plan '%s': cannot write unknown schedule \"%.32s\"", path,
                      p->schedule);
    if (p->microbatches < 1 || p->microbatch_size < 0 ||
        p->memory_limit_bytes > MAX_EXACT_U64)
        return PP_ERR(PP_ERR_INVALID,
                      "plan '%s': cannot write microbatches %d, microbatch_size %d, "
                      "memory_limit_bytes %llu (need >= 1, >= 0, <= 2^53)",
                      path, p->microbatches, p->microbatch_size,
                      (unsigned long long)p->memory_limit_bytes);
    if (!isfinite(p->predicted_step_ms) || !isfinite(p->predicted_bubble) ||
        p->predicted_bubble > 1)
        return PP_ERR(PP_ERR_INVALID,
                      "plan '%s': cannot write predicted step %g ms, bubble %g (need finite, "
                      "bubble <= 1; negative = absent)",
                      path, p->predicted_step_ms, p->predicted_bubble);
    if (strnlen(p->baseline, sizeof p->baseline) == sizeof p->baseline)
        return PP_ERR(PP_ERR_INVALID, "plan '%s': baseline is not terminated", path);

    char *text = NULL;
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = NULL, *pred = NULL;
    int ok = root != NULL;
    ok = ok && cJSON_AddItemToObject(root, "version", raw_u64(1));
    ok = ok && cJSON_AddItemToObject(root, "num_layers", raw_u64((uint64_t)p->num_layers));
    ok = ok && cJSON_AddItemToObject(root, "stages", raw_u64((uint64_t)p->partition.S));
    ok = ok && cJSON_AddItemToObject(root, "virtual_stages", raw_u64((uint64_t)p->partition.v));
    ok = ok && (arr = cJSON_AddArrayToObject(root, "boundaries")) != NULL;
    for (int i = 0; ok && i <= p->partition.P; i++)
        ok = cJSON_AddItemToArray(arr, raw_u64((uint64_t)p->partition.bounds[i]));
    ok = ok && cJSON_AddStringToObject(root, "schedule", k_schedules[k]) != NULL;
    ok = ok && cJSON_AddItemToObject(root, "microbatches", raw_u64((uint64_t)p->microbatches));
    if (p->microbatch_size > 0)
        ok = ok &&
             cJSON_AddItemToObject(root, "microbatch_size", raw_u64((uint64_t)p->microbatch_size));
    ok = ok && cJSON_AddItemToObject(root, "memory_limit_bytes", raw_u64(p->memory_limit_bytes));
    if (p->predicted_step_ms >= 0 || p->predicted_bubble >= 0) {
        ok = ok && (pred = cJSON_AddObjectToObject(root, "predicted")) != NULL;
        if (p->predicted_step_ms >= 0)
            ok = ok && cJSON_AddItemToObject(pred, "step_ms", raw_double(p->predicted_step_ms));
        if (p->predicted_bubble >= 0)
            ok = ok && cJSON_AddItemToObject(pred, "bubble_ratio", raw_double(p->predicted_bubble));
    }
    if (p->baseline[0])
        ok = ok && cJSON_AddStringToObject(root, "baseline", p->baseline) != NULL;
    ok = ok && (text = cJSON_Print(root)) != NULL;
    if (!ok) {
        st = PP_ERR(PP_ERR_NOMEM, "plan '%s': cannot build the text", path);
        goto done;
    }
    /* A copy with a trailing newline, as text files end. */
    size_t len = strlen(text);
    char *file = malloc(len + 1);
    if (!file) {
        st = PP_ERR(PP_ERR_NOMEM, "plan '%s': cannot build the text", path);
        goto done;
    }
    memcpy(file, text, len);
    file[len] = '\n';
    st = pp_write_file_atomic(path, file, len + 1);
    free(file);
done:
    cJSON_free(text);
    cJSON_Delete(root);
    return st;
}

void pp_plan_free(pp_plan *p)
{
    if (!p)
        return;
    pp_partition_free(&p->partition);
}
