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
                                     "predicted",   "baseline",        "pipeprof_version",
                                     "recompute"};
enum {
    K_VERSION, K_LAYERS, K_STAGES, K_VIRTUAL, K_BOUNDS, K_SCHEDULE, K_M, K_MBS, K_MEMORY,
    K_PREDICTED, K_BASELINE, K_WRITER, K_RECOMPUTE, N_KEYS
};

/* The characters of a --recompute SPEC: the words none and full, or items N, N-M, sN, sN-M
 * separated by commas. The plan checks the alphabet only; pptrain's parser (runtime/memory.c)
 * checks the items against the model and the stages, and names what is wrong. */
static int recompute_text_ok(const char *s)
{
    if (strcmp(s, "none") == 0 || strcmp(s, "full") == 0)
        return 1;
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || *s == 's' || *s == '-' || *s == ','))
            return 0;
    return 1;
}

static pp_status parse_recompute(const cJSON *j, const char *ctx, pp_plan *p)
{
    if (!cJSON_IsString(j))
        return PP_ERR(PP_ERR_INVALID, "%s: \"recompute\" must be a string (got %s)", ctx,
                      pp_json_type_name(j));
    size_t len = strlen(j->valuestring);
    if (len >= sizeof p->recompute)
        return PP_ERR(PP_ERR_INVALID, "%s: \"recompute\" is %zu characters (at most %zu)", ctx,
                      len, sizeof p->recompute - 1);
    if (!recompute_text_ok(j->valuestring))
        return PP_ERR(PP_ERR_INVALID,
                      "%s: \"recompute\" \"%.40s\" is not none, full or a list of layers and "
                      "stages (1-4,7 or s0,s2)", ctx, j->valuestring);
    memcpy(p->recompute, j->valuestring, len + 1);
    return PP_OK;
}
static const char *const k_pred_keys[] = {"step_ms", "bubble_ratio", "median_ms", "p95_ms"};

/* Names as the schedule module spells them; compared as text so the plan file does not depend
 * on which schedules this build implements (pp_schedule_check_args says that). */
static const char *const k_schedules[] = {"gpipe", "1f1b", "interleaved", "zb-h1"};

static pp_status parse_predicted(const cJSON *obj, const char *ctx, pp_plan *p)
{
    char pctx[320];
    snprintf(pctx, sizeof pctx, "%s: \"predicted\"", ctx);
    if (!cJSON_IsObject(obj))
        return PP_ERR(PP_ERR_INVALID, "%s must be an object (got %s)", pctx, pp_json_type_name(obj));
    const cJSON *f[4];
    pp_status st = pp_json_collect_keys(obj, k_pred_keys, 4, f, pctx);
    if (st != PP_OK)
        return st;
    if (f[0] && (st = pp_json_get_real(f[0], pctx, "step_ms", 0, HUGE_VAL, &p->predicted_step_ms)) != PP_OK)
        return st;
    if (f[1] && (st = pp_json_get_real(f[1], pctx, "bubble_ratio", 0, 1, &p->predicted_bubble)) != PP_OK)
        return st;
    /* the step's distribution (docs/sim-dist.md), absent from plans before issue 18 */
    if (f[2] && (st = pp_json_get_real(f[2], pctx, "median_ms", 0, HUGE_VAL, &p->predicted_median_ms)) != PP_OK)
        return st;
    if (f[3] && (st = pp_json_get_real(f[3], pctx, "p95_ms", 0, HUGE_VAL, &p->predicted_p95_ms)) != PP_OK)
        return st;
    return PP_OK;
}

/* "num_layers", "stages", "virtual_stages" and "boundaries": the partition. */
static pp_status parse_partition(const cJSON *const *f, const char *ctx, pp_plan *p)
{
    double x = 0, S = 0, v = 1;
    pp_status st;
    if ((st = pp_json_get_int(f[K_LAYERS], ctx, "num_layers", 1, 2147483647.0, &x)) != PP_OK)
        return st;
    p->num_layers = (int)x;
    if ((st = pp_json_get_int(f[K_STAGES], ctx, "stages", 1, 2147483647.0, &S)) != PP_OK)
        return st;
    if (f[K_VIRTUAL] &&
        (st = pp_json_get_int(f[K_VIRTUAL], ctx, "virtual_stages", 1, 2147483647.0, &v)) != PP_OK)
        return st;
    const cJSON *jb = f[K_BOUNDS];
    if (!cJSON_IsArray(jb))
        return PP_ERR(PP_ERR_INVALID, "%s: \"boundaries\" must be an array of integers (got %s)",
                      ctx, pp_json_type_name(jb));
    int n = cJSON_GetArraySize(jb), i = 0;
    int *bounds = malloc(((size_t)n + 1) * sizeof *bounds);
    if (!bounds)
        return PP_ERR(PP_ERR_NOMEM, "%s: cannot allocate %d boundaries", ctx, n);
    for (const cJSON *it = jb->child; it; it = it->next, i++) {
        char key[48];
        snprintf(key, sizeof key, "boundaries[%d]", i);
        if ((st = pp_json_get_int(it, ctx, key, -2147483648.0, 2147483647.0, &x)) != PP_OK)
            goto done;
        bounds[i] = (int)x;
    }
    st = pp_partition_from_bounds(bounds, n, p->num_layers, (int)S, (int)v, &p->partition);
    if (st != PP_OK)
        st = pp_error_wrap(st, "%s: \"boundaries\"", ctx);
done:
    free(bounds);
    return st;
}

static pp_status parse_schedule(const cJSON *js, const char *ctx, pp_plan *p)
{
    if (!cJSON_IsString(js))
        return PP_ERR(PP_ERR_INVALID, "%s: \"schedule\" must be a string (got %s)", ctx,
                      pp_json_type_name(js));
    size_t k = 0, n_sched = sizeof k_schedules / sizeof k_schedules[0];
    while (k < n_sched && strcmp(js->valuestring, k_schedules[k]) != 0)
        k++;
    if (k == n_sched)
        return PP_ERR(PP_ERR_INVALID,
                      "%s: unknown schedule \"%.64s\" (known: gpipe, 1f1b, interleaved, zb-h1)",
                      ctx, js->valuestring);
    snprintf(p->schedule, sizeof p->schedule, "%s", k_schedules[k]);
    return PP_OK;
}

/* "microbatches" and the optional "microbatch_size", "memory_limit_bytes", "predicted",
 * "baseline". */
static pp_status parse_batching(const cJSON *const *f, const char *ctx, pp_plan *p)
{
    double x = 0;
    pp_status st;
    if ((st = pp_json_get_int(f[K_M], ctx, "microbatches", 1, 2147483647.0, &x)) != PP_OK)
        return st;
    p->microbatches = (int)x;
    if (f[K_MBS]) {
        if ((st = pp_json_get_int(f[K_MBS], ctx, "microbatch_size", 0, 2147483647.0, &x)) != PP_OK)
            return st;
        p->microbatch_size = (int)x;
    }
    if (f[K_MEMORY]) {
        if ((st = pp_json_get_int(f[K_MEMORY], ctx, "memory_limit_bytes", 0, MAX_EXACT_INT, &x)) !=
            PP_OK)
            return st;
        p->memory_limit_bytes = (uint64_t)x;
    }
    if (f[K_PREDICTED] && (st = parse_predicted(f[K_PREDICTED], ctx, p)) != PP_OK)
        return st;
    /* the version that wrote it: informative, any string (the "version" key decides the format) */
    if (f[K_WRITER] && !cJSON_IsString(f[K_WRITER]))
        return PP_ERR(PP_ERR_INVALID, "%s: \"pipeprof_version\" must be a string (got %s)", ctx,
                      pp_json_type_name(f[K_WRITER]));
    const cJSON *jl = f[K_BASELINE];
    if (!jl)
        return PP_OK;
    if (!cJSON_IsString(jl))
        return PP_ERR(PP_ERR_INVALID, "%s: \"baseline\" must be a string (got %s)", ctx,
                      pp_json_type_name(jl));
    size_t len = strlen(jl->valuestring);
    if (len >= sizeof p->baseline)
        return PP_ERR(PP_ERR_INVALID, "%s: \"baseline\" is %zu characters (at most %zu)", ctx,
                      len, sizeof p->baseline - 1);
    if (!pp_json_utf8_valid(jl->valuestring)) /* the writer would not give it back */
        return PP_ERR(PP_ERR_INVALID, "%s: \"baseline\" is not valid UTF-8", ctx);
    memcpy(p->baseline, jl->valuestring, len + 1);
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
    pp_plan p = {.version = 1, .predicted_step_ms = -1, .predicted_bubble = -1,
                 .predicted_median_ms = -1, .predicted_p95_ms = -1};
    pp_status st = PP_OK;
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
    double x = 0;
    if ((st = pp_json_get_int(f[K_VERSION], ctx, "version", -MAX_EXACT_INT, MAX_EXACT_INT, &x)) !=
        PP_OK)
        goto done;
    if (x != 1) {
        st = PP_ERR(PP_ERR_INVALID, "%s: unsupported version %.17g (this build reads version 1)",
                    ctx, x);
        goto done;
    }
    if ((st = parse_partition(f, ctx, &p)) != PP_OK ||
        (st = parse_schedule(f[K_SCHEDULE], ctx, &p)) != PP_OK ||
        (st = parse_batching(f, ctx, &p)) != PP_OK ||
        (f[K_RECOMPUTE] && (st = parse_recompute(f[K_RECOMPUTE], ctx, &p)) != PP_OK))
        goto done;
    *out = p;
    p.partition.bounds = NULL; /* now owned by *out */
done:
    pp_partition_free(&p.partition);
    cJSON_Delete(root);
    return st;
}

pp_status pp_plan_load(const char *path, pp_plan *out)
{
    memset(out, 0, sizeof *out);
    char *text = NULL;
    pp_status st = pp_json_file_read(path, "plan", &text);
    if (st == PP_OK)
        st = pp_plan_parse(text, path, out);
    free(text);
    return st;
}

/* The plan file keeps the layout cJSON_Print gave it (tabs; the boundaries on one line). */
static pp_status plan_fill(pp_json_writer *w, const void *ctx)
{
    const pp_plan *p = ctx;
    pp_json_object(w, NULL);
    pp_json_put_int(w, "version", 1);
    pp_json_put_int(w, "num_layers", p->num_layers);
    pp_json_put_int(w, "stages", p->partition.S);
    pp_json_put_int(w, "virtual_stages", p->partition.v);
    pp_json_array_inline(w, "boundaries");
    for (int i = 0; i <= p->partition.P; i++)
        pp_json_put_int(w, NULL, p->partition.bounds[i]);
    pp_json_end(w);
    pp_json_put_str(w, "schedule", p->schedule);
    pp_json_put_int(w, "microbatches", p->microbatches);
    if (p->microbatch_size > 0)
        pp_json_put_int(w, "microbatch_size", p->microbatch_size);
    pp_json_put_uint(w, "memory_limit_bytes", p->memory_limit_bytes);
    if (p->predicted_step_ms >= 0 || p->predicted_bubble >= 0 || p->predicted_median_ms > 0 ||
        p->predicted_p95_ms > 0) {
        pp_json_object(w, "predicted");
        if (p->predicted_step_ms >= 0)
            pp_json_put_exact(w, "step_ms", p->predicted_step_ms);
        if (p->predicted_bubble >= 0)
            pp_json_put_exact(w, "bubble_ratio", p->predicted_bubble);
        if (p->predicted_median_ms > 0)
            pp_json_put_exact(w, "median_ms", p->predicted_median_ms);
        if (p->predicted_p95_ms > 0)
            pp_json_put_exact(w, "p95_ms", p->predicted_p95_ms);
        pp_json_end(w);
    }
    if (p->baseline[0])
        pp_json_put_str(w, "baseline", p->baseline);
    if (p->recompute[0])
        pp_json_put_str(w, "recompute", p->recompute);
    pp_json_put_str(w, "pipeprof_version", PP_VERSION);
    pp_json_end(w);
    return pp_json_writer_status(w);
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
        p->predicted_bubble > 1 || !isfinite(p->predicted_median_ms) ||
        !isfinite(p->predicted_p95_ms))
        return PP_ERR(PP_ERR_INVALID,
                      "plan '%s': cannot write predicted step %g ms, bubble %g (need finite, "
                      "bubble <= 1; negative = absent)",
                      path, p->predicted_step_ms, p->predicted_bubble);
    if (strnlen(p->baseline, sizeof p->baseline) == sizeof p->baseline)
        return PP_ERR(PP_ERR_INVALID, "plan '%s': baseline is not terminated", path);
    if (strnlen(p->recompute, sizeof p->recompute) == sizeof p->recompute ||
        (p->recompute[0] && !recompute_text_ok(p->recompute)))
        return PP_ERR(PP_ERR_INVALID, "plan '%s': cannot write recompute \"%.40s\"", path,
                      p->recompute);

    pp_plan named = *p; /* the schedule written as the schedule module spells it */
    snprintf(named.schedule, sizeof named.schedule, "%s", k_schedules[k]);
    return pp_json_file_write(path, "plan", PP_JSON_TABS, plan_fill, &named);
}

void pp_plan_free(pp_plan *p)
{
    if (!p)
        return;
    pp_partition_free(&p->partition);
}
