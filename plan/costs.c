/* costs.c: the cost file (docs/cost-file.md): per-layer, per-micro-batch times and sizes that
 * the sim backend replays, written by pprof-tune --export-costs. Loading validates every field
 * and names the file, layer and field of the first problem. The end of the file is the one cost
 * rule (what an op and a transfer cost) the sim backend, the simulator and the rebalancer use. */
#include "pp_json.h"
#include "pp_plan.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LAYERS 100000
/* Byte counts travel as JSON numbers, which cJSON holds as doubles: integers up to 2^53 are
 * exact, anything larger would silently round, so it is refused instead. */
#define MAX_EXACT_INT PP_JSON_MAX_EXACT_INT
#define MAX_EXACT_U64 (UINT64_C(1) << 53)

static const char *const k_top_keys[] = {"version",        "layers",       "p2p_GBps",
                                         "p2p_latency_us", "optimizer_us", "microbatch_size",
                                         "optimizer_us_per_MB", "grad_norm_us", "step_fixed_us",
                                         "send_act_us",    "send_grad_us", "dp_allreduce_us",
                                         "dp_allreduce_us_per_MB", "op_gap_us",
                                         "recv_act_us",    "recv_grad_us"};
enum {
    TOP_VERSION,
    TOP_LAYERS,
    TOP_GBPS,
    TOP_LATENCY,
    TOP_OPTIMIZER,
    TOP_MBS,
    TOP_OPT_PER_MB,
    TOP_GRAD_NORM,
    TOP_STEP_FIXED,
    TOP_SEND_ACT,
    TOP_SEND_GRAD,
    TOP_DP_AR,
    TOP_DP_AR_PER_MB,
    TOP_OP_GAP,
    TOP_RECV_ACT,
    TOP_RECV_GRAD,
    N_TOP
};
static const char *const k_layer_keys[] = {"name",          "fwd_us",           "bwd_us",
                                           "bwd_input_us",  "bwd_weight_us",    "activation_bytes",
                                           "param_bytes",   "kept_bytes",       "input_bytes"};
enum { L_NAME, L_FWD, L_BWD, L_BWD_IN, L_BWD_W, L_ACT, L_PARAM, L_KEPT, L_INPUT, N_LAYER };

static pp_status parse_layer(const cJSON *obj, int i, const char *origin, pp_layer_cost *out)
{
    char ctx[256];
    const cJSON *name = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, "name") : NULL;
    if (cJSON_IsString(name) && strlen(name->valuestring) < sizeof out->name &&
        pp_json_utf8_valid(name->valuestring))
        snprintf(ctx, sizeof ctx, "cost file '%s': layer %d (\"%s\")", origin, i,
                 name->valuestring);
    else
        snprintf(ctx, sizeof ctx, "cost file '%s': layer %d", origin, i);
    if (!cJSON_IsObject(obj))
        return PP_ERR(PP_ERR_INVALID, "%s: must be an object (got %s)", ctx, pp_json_type_name(obj));

    const cJSON *f[N_LAYER];
    pp_status st = pp_json_collect_keys(obj, k_layer_keys, N_LAYER, f, ctx);
    if (st != PP_OK)
        return st;
    if (!f[L_NAME])
        return PP_ERR(PP_ERR_INVALID, "%s: missing \"name\"", ctx);
    if (!cJSON_IsString(f[L_NAME]))
        return PP_ERR(PP_ERR_INVALID, "%s: \"name\" must be a string (got %s)", ctx,
                      pp_json_type_name(f[L_NAME]));
    size_t len = strlen(f[L_NAME]->valuestring);
    if (len == 0 || len >= sizeof out->name)
        return PP_ERR(PP_ERR_INVALID, "%s: \"name\" must have 1 to %zu characters (got %zu)",
                      ctx, sizeof out->name - 1, len);
    if (!pp_json_utf8_valid(f[L_NAME]->valuestring)) /* the writer would not give it back */
        return PP_ERR(PP_ERR_INVALID, "%s: \"name\" is not valid UTF-8", ctx);
    memcpy(out->name, f[L_NAME]->valuestring, len + 1);

    if (!f[L_FWD])
        return PP_ERR(PP_ERR_INVALID, "%s: missing \"fwd_us\"", ctx);
    if (!f[L_BWD])
        return PP_ERR(PP_ERR_INVALID, "%s: missing \"bwd_us\"", ctx);
    if ((st = pp_json_get_real(f[L_FWD], ctx, "fwd_us", 0, HUGE_VAL, &out->fwd_us)) != PP_OK ||
        (st = pp_json_get_real(f[L_BWD], ctx, "bwd_us", 0, HUGE_VAL, &out->bwd_us)) != PP_OK)
        return st;
    if (!f[L_BWD_IN] != !f[L_BWD_W])
        return PP_ERR(PP_ERR_INVALID,
                      "%s: \"%s\" without \"%s\" (give both split-backward times or neither)",
                      ctx, f[L_BWD_IN] ? "bwd_input_us" : "bwd_weight_us",
                      f[L_BWD_IN] ? "bwd_weight_us" : "bwd_input_us");
    if (f[L_BWD_IN]) {
        if ((st = pp_json_get_real(f[L_BWD_IN], ctx, "bwd_input_us", 0, HUGE_VAL, &out->bwd_input_us)) != PP_OK ||
            (st = pp_json_get_real(f[L_BWD_W], ctx, "bwd_weight_us", 0, HUGE_VAL, &out->bwd_weight_us)) != PP_OK)
            return st;
        out->has_split = 1;
    }
    double x = 0;
    if (f[L_ACT]) {
        if ((st = pp_json_get_int(f[L_ACT], ctx, "activation_bytes", 0, MAX_EXACT_INT, &x)) != PP_OK)
            return st;
        out->activation_bytes = (uint64_t)x;
    }
    if (f[L_PARAM]) {
        if ((st = pp_json_get_int(f[L_PARAM], ctx, "param_bytes", 0, MAX_EXACT_INT, &x)) != PP_OK)
            return st;
        out->param_bytes = (uint64_t)x;
    }
    if (!f[L_KEPT] != !f[L_INPUT])
        return PP_ERR(PP_ERR_INVALID,
                      "%s: \"%s\" without \"%s\" (give both memory sizes or neither)", ctx,
                      f[L_KEPT] ? "kept_bytes" : "input_bytes",
                      f[L_KEPT] ? "input_bytes" : "kept_bytes");
    if (f[L_KEPT]) {
        if ((st = pp_json_get_int(f[L_KEPT], ctx, "kept_bytes", 0, MAX_EXACT_INT, &x)) != PP_OK)
            return st;
        out->kept_bytes = (uint64_t)x;
        if ((st = pp_json_get_int(f[L_INPUT], ctx, "input_bytes", 0, MAX_EXACT_INT, &x)) != PP_OK)
            return st;
        out->input_bytes = (uint64_t)x;
        out->has_kept = 1;
    }
    return PP_OK;
}

static pp_costs *costs_alloc(int n_layers)
{
    pp_costs *c = pp_alloc(sizeof *c);
    if (!c)
        return NULL;
    c->layers = pp_alloc((size_t)n_layers * sizeof *c->layers);
    if (!c->layers) {
        pp_free(c);
        return NULL;
    }
    c->n_layers = n_layers;
    return c;
}

pp_status pp_costs_parse(const char *json, const char *origin, pp_costs **out)
{
    *out = NULL;
    if (!origin)
        origin = "(text)";
    if (!json)
        return PP_ERR(PP_ERR_INVALID, "cost file '%s': no text", origin);
    char ctx[256];
    snprintf(ctx, sizeof ctx, "cost file '%s'", origin);
    pp_status st = PP_OK;
    pp_costs *c = NULL;
    cJSON *root = NULL;
    const cJSON *f[N_TOP];
    if ((st = pp_json_parse_object(json, ctx, k_top_keys, N_TOP, f, &root)) != PP_OK)
        goto done;
    double x = 0;
    if (f[TOP_VERSION]) {
        if ((st = pp_json_get_int(f[TOP_VERSION], ctx, "version", -MAX_EXACT_INT, MAX_EXACT_INT, &x)) !=
            PP_OK)
            goto done;
        if (x != 1) {
            st = PP_ERR(PP_ERR_INVALID,
                        "%s: unsupported version %.17g (this build reads version 1)", ctx, x);
            goto done;
        }
    }
    const cJSON *layers = f[TOP_LAYERS];
    if (!layers) {
        st = PP_ERR(PP_ERR_INVALID, "%s: missing \"layers\"", ctx);
        goto done;
    }
    if (!cJSON_IsArray(layers)) {
        st = PP_ERR(PP_ERR_INVALID, "%s: \"layers\" must be an array (got %s)", ctx,
                    pp_json_type_name(layers));
        goto done;
    }
    int n = cJSON_GetArraySize(layers);
    if (n < 1 || n > MAX_LAYERS) {
        st = PP_ERR(PP_ERR_INVALID, "%s: \"layers\" must hold 1 to %d layers (got %d)", ctx,
                    MAX_LAYERS, n);
        goto done;
    }
    if (!(c = costs_alloc(n))) {
        st = PP_ERR(PP_ERR_NOMEM, "%s: cannot allocate %d layers", ctx, n);
        goto done;
    }
    int i = 0;
    for (const cJSON *it = layers->child; it; it = it->next, i++)
        if ((st = parse_layer(it, i, origin, &c->layers[i])) != PP_OK)
            goto done;
    if ((f[TOP_GBPS] && (st = pp_json_get_real(f[TOP_GBPS], ctx, "p2p_GBps", 0, HUGE_VAL, &c->p2p_GBps)) != PP_OK) ||
        (f[TOP_LATENCY] &&
         (st = pp_json_get_real(f[TOP_LATENCY], ctx, "p2p_latency_us", 0, HUGE_VAL, &c->p2p_latency_us)) != PP_OK) ||
        (f[TOP_OPTIMIZER] &&
         (st = pp_json_get_real(f[TOP_OPTIMIZER], ctx, "optimizer_us", 0, HUGE_VAL, &c->optimizer_us)) != PP_OK) ||
        (f[TOP_OPT_PER_MB] &&
         (st = pp_json_get_real(f[TOP_OPT_PER_MB], ctx, "optimizer_us_per_MB", 0, HUGE_VAL,
                                &c->optimizer_us_per_MB)) != PP_OK) ||
        (f[TOP_GRAD_NORM] &&
         (st = pp_json_get_real(f[TOP_GRAD_NORM], ctx, "grad_norm_us", 0, HUGE_VAL,
                                &c->grad_norm_us)) != PP_OK) ||
        (f[TOP_STEP_FIXED] &&
         (st = pp_json_get_real(f[TOP_STEP_FIXED], ctx, "step_fixed_us", 0, HUGE_VAL,
                                &c->step_fixed_us)) != PP_OK) ||
        (f[TOP_SEND_ACT] &&
         (st = pp_json_get_real(f[TOP_SEND_ACT], ctx, "send_act_us", 0, HUGE_VAL,
                                &c->send_act_us)) != PP_OK) ||
        (f[TOP_SEND_GRAD] &&
         (st = pp_json_get_real(f[TOP_SEND_GRAD], ctx, "send_grad_us", 0, HUGE_VAL,
                                &c->send_grad_us)) != PP_OK) ||
        (f[TOP_DP_AR] &&
         (st = pp_json_get_real(f[TOP_DP_AR], ctx, "dp_allreduce_us", 0, HUGE_VAL,
                                &c->dp_allreduce_us)) != PP_OK) ||
        (f[TOP_DP_AR_PER_MB] &&
         (st = pp_json_get_real(f[TOP_DP_AR_PER_MB], ctx, "dp_allreduce_us_per_MB", 0, HUGE_VAL,
                                &c->dp_allreduce_us_per_MB)) != PP_OK) ||
        (f[TOP_OP_GAP] &&
         (st = pp_json_get_real(f[TOP_OP_GAP], ctx, "op_gap_us", 0, HUGE_VAL, &c->op_gap_us)) !=
             PP_OK) ||
        (f[TOP_RECV_ACT] &&
         (st = pp_json_get_real(f[TOP_RECV_ACT], ctx, "recv_act_us", 0, HUGE_VAL,
                                &c->recv_act_us)) != PP_OK) ||
        (f[TOP_RECV_GRAD] &&
         (st = pp_json_get_real(f[TOP_RECV_GRAD], ctx, "recv_grad_us", 0, HUGE_VAL,
                                &c->recv_grad_us)) != PP_OK))
        goto done;
    if (f[TOP_MBS]) {
        if ((st = pp_json_get_int(f[TOP_MBS], ctx, "microbatch_size", 1, 2147483647.0, &x)) != PP_OK)
            goto done;
        c->microbatch_size = (int)x;
    }
    *out = c;
    c = NULL;
done:
    pp_costs_destroy(c);
    cJSON_Delete(root);
    return st;
}

pp_status pp_costs_load(const char *path, pp_costs **out)
{
    *out = NULL;
    char *text = NULL;
    pp_status st = pp_json_file_read(path, "cost file", &text);
    if (st == PP_OK)
        st = pp_costs_parse(text, path, out);
    free(text);
    return st;
}

static int ok_time(double x) { return isfinite(x) && x >= 0; }

/* What the loader would refuse is refused here too, so a written file always loads. */
static pp_status check_for_write(const pp_costs *c, const char *path)
{
    if (!c || c->n_layers < 1 || c->n_layers > MAX_LAYERS || !c->layers)
        return PP_ERR(PP_ERR_INVALID, "cost file '%s': need 1 to %d layers to write", path,
                      MAX_LAYERS);
    const double top[13] = {c->p2p_GBps,           c->p2p_latency_us, c->optimizer_us,
                            c->optimizer_us_per_MB, c->grad_norm_us,   c->step_fixed_us,
                            c->send_act_us,         c->send_grad_us,   c->dp_allreduce_us,
                            c->dp_allreduce_us_per_MB, c->op_gap_us, c->recv_act_us,
                            c->recv_grad_us};
    static const char *const top_key[13] = {"p2p_GBps",      "p2p_latency_us", "optimizer_us",
                                            "optimizer_us_per_MB", "grad_norm_us",
                                            "step_fixed_us", "send_act_us",    "send_grad_us",
                                            "dp_allreduce_us", "dp_allreduce_us_per_MB",
                                            "op_gap_us",     "recv_act_us",    "recv_grad_us"};
    for (int k = 0; k < 13; k++)
        if (!ok_time(top[k]))
            return PP_ERR(PP_ERR_INVALID,
                          "cost file '%s': \"%s\" is %g; it must be finite and >= 0 (0 = none)",
                          path, top_key[k], top[k]);
    if (c->microbatch_size < 0)
        return PP_ERR(PP_ERR_INVALID, "cost file '%s': microbatch_size %d is negative", path,
                      c->microbatch_size);
    for (int i = 0; i < c->n_layers; i++) {
        const pp_layer_cost *l = &c->layers[i];
        size_t len = strnlen(l->name, sizeof l->name);
        if (len == 0 || len == sizeof l->name)
            return PP_ERR(PP_ERR_INVALID,
                          "cost file '%s': layer %d: name must have 1 to %zu characters", path, i,
                          sizeof l->name - 1);
        if (!ok_time(l->fwd_us) || !ok_time(l->bwd_us) ||
            (l->has_split && (!ok_time(l->bwd_input_us) || !ok_time(l->bwd_weight_us))))
            return PP_ERR(PP_ERR_INVALID,
                          "cost file '%s': layer %d (\"%s\"): times must be finite and >= 0",
                          path, i, l->name);
        if (l->activation_bytes > MAX_EXACT_U64 || l->param_bytes > MAX_EXACT_U64 ||
            l->kept_bytes > MAX_EXACT_U64 || l->input_bytes > MAX_EXACT_U64)
            return PP_ERR(PP_ERR_INVALID,
                          "cost file '%s': layer %d (\"%s\"): byte counts above 2^53 cannot be "
                          "stored exactly",
                          path, i, l->name);
    }
    return PP_OK;
}

/* Each layer on one line; times with the digits that read back exactly. */
static pp_status costs_fill(pp_json_writer *w, const void *ctx)
{
    const pp_costs *c = ctx;
    pp_json_object(w, NULL);
    pp_json_put_int(w, "version", 1);
    if (c->microbatch_size > 0)
        pp_json_put_int(w, "microbatch_size", c->microbatch_size);
    pp_json_put_exact(w, "p2p_GBps", c->p2p_GBps);
    pp_json_put_exact(w, "p2p_latency_us", c->p2p_latency_us);
    pp_json_put_exact(w, "optimizer_us", c->optimizer_us);
    if (c->optimizer_us_per_MB > 0)
        pp_json_put_exact(w, "optimizer_us_per_MB", c->optimizer_us_per_MB);
    if (c->grad_norm_us > 0)
        pp_json_put_exact(w, "grad_norm_us", c->grad_norm_us);
    if (c->step_fixed_us > 0)
        pp_json_put_exact(w, "step_fixed_us", c->step_fixed_us);
    if (c->send_act_us > 0)
        pp_json_put_exact(w, "send_act_us", c->send_act_us);
    if (c->send_grad_us > 0)
        pp_json_put_exact(w, "send_grad_us", c->send_grad_us);
    if (c->recv_act_us > 0)
        pp_json_put_exact(w, "recv_act_us", c->recv_act_us);
    if (c->recv_grad_us > 0)
        pp_json_put_exact(w, "recv_grad_us", c->recv_grad_us);
    if (c->dp_allreduce_us > 0)
        pp_json_put_exact(w, "dp_allreduce_us", c->dp_allreduce_us);
    if (c->dp_allreduce_us_per_MB > 0)
        pp_json_put_exact(w, "dp_allreduce_us_per_MB", c->dp_allreduce_us_per_MB);
    if (c->op_gap_us > 0)
        pp_json_put_exact(w, "op_gap_us", c->op_gap_us);
    pp_json_array(w, "layers");
    for (int i = 0; i < c->n_layers; i++) {
        const pp_layer_cost *l = &c->layers[i];
        pp_json_object_inline(w, NULL);
        pp_json_put_str(w, "name", l->name);
        pp_json_put_exact(w, "fwd_us", l->fwd_us);
        pp_json_put_exact(w, "bwd_us", l->bwd_us);
        if (l->has_split) {
            pp_json_put_exact(w, "bwd_input_us", l->bwd_input_us);
            pp_json_put_exact(w, "bwd_weight_us", l->bwd_weight_us);
        }
        pp_json_put_uint(w, "activation_bytes", l->activation_bytes);
        pp_json_put_uint(w, "param_bytes", l->param_bytes);
        if (l->has_kept) {
            pp_json_put_uint(w, "kept_bytes", l->kept_bytes);
            pp_json_put_uint(w, "input_bytes", l->input_bytes);
        }
        pp_json_end(w);
    }
    pp_json_end(w);
    pp_json_end(w);
    return pp_json_writer_status(w);
}

pp_status pp_costs_write(const pp_costs *c, const char *path)
{
    pp_status st = check_for_write(c, path);
    if (st != PP_OK)
        return st;
    return pp_json_file_write(path, "cost file", PP_JSON_PRETTY, costs_fill, c);
}

pp_status pp_costs_uniform(int n_layers, double fwd_us, double bwd_us, uint64_t act_bytes,
                           pp_costs **out)
{
    *out = NULL;
    if (n_layers < 1 || n_layers > MAX_LAYERS)
        return PP_ERR(PP_ERR_INVALID, "uniform costs: need 1 to %d layers (got %d)", MAX_LAYERS,
                      n_layers);
    if (!ok_time(fwd_us) || !ok_time(bwd_us))
        return PP_ERR(PP_ERR_INVALID,
                      "uniform costs: fwd_us and bwd_us must be finite and >= 0 (got %g, %g)",
                      fwd_us, bwd_us);
    if (act_bytes > MAX_EXACT_U64)
        return PP_ERR(PP_ERR_INVALID, "uniform costs: activation_bytes above 2^53");
    pp_costs *c = costs_alloc(n_layers);
    if (!c)
        return PP_ERR(PP_ERR_NOMEM, "uniform costs: cannot allocate %d layers", n_layers);
    for (int i = 0; i < n_layers; i++) {
        pp_layer_cost *l = &c->layers[i];
        snprintf(l->name, sizeof l->name, "layer%d", i);
        l->fwd_us = fwd_us;
        l->bwd_us = bwd_us;
        l->bwd_input_us = bwd_us / 2;
        l->bwd_weight_us = bwd_us / 2;
        l->has_split = 1;
        l->activation_bytes = act_bytes;
    }
    *out = c;
    return PP_OK;
}

void pp_costs_destroy(pp_costs *c)
{
    if (!c)
        return;
    pp_free(c->layers);
    pp_free(c);
}

double pp_costs_transfer_us(const pp_costs *c, uint64_t bytes)
{
    /* bytes / (GBps * 1e9 B/s) seconds = bytes / (GBps * 1e3) microseconds. */
    double bw = c->p2p_GBps > 0 ? (double)bytes / (c->p2p_GBps * 1e3) : 0.0;
    return c->p2p_latency_us + bw;
}

double pp_costs_send_us(const pp_costs *c, int grad)
{
    return grad ? c->send_grad_us : c->send_act_us;
}

double pp_costs_recv_us(const pp_costs *c, int grad)
{
    return grad ? c->recv_grad_us : c->recv_act_us;
}

/* The halving rule: a layer without split costs gives each backward half bwd_us / 2, so every
 * schedule runs on every cost file and B + W costs what the whole backward does. */
double pp_costs_layer_us(const pp_layer_cost *l, pp_op op)
{
    switch (op) {
    case PP_OP_FWD: return l->fwd_us;
    case PP_OP_BWD: return l->bwd_us;
    case PP_OP_BWD_INPUT: return l->has_split ? l->bwd_input_us : l->bwd_us / 2;
    case PP_OP_BWD_WEIGHT: return l->has_split ? l->bwd_weight_us : l->bwd_us / 2;
    default: return 0.0;
    }
}

double pp_costs_layer_rc_us(const pp_layer_cost *l, pp_op op, int recomputed)
{
    double us = pp_costs_layer_us(l, op);
    if (recomputed && (op == PP_OP_BWD || op == PP_OP_BWD_INPUT))
        us += l->fwd_us; /* the forward again, from the kept input, before the backward */
    return us;
}

/* A copy of c (its own layer array), or NULL out of memory. */
static pp_costs *costs_copy(const pp_costs *c)
{
    pp_costs *d = costs_alloc(c->n_layers);
    if (!d)
        return NULL;
    pp_layer_cost *layers = d->layers;
    *d = *c;
    d->layers = layers;
    memcpy(d->layers, c->layers, sizeof *c->layers * (size_t)c->n_layers);
    return d;
}

pp_status pp_costs_with_recompute(const pp_costs *c, const uint8_t *recompute, pp_costs **out)
{
    *out = NULL;
    pp_costs *d = costs_copy(c);
    if (!d)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for a cost copy of %d layers", c->n_layers);
    for (int i = 0; recompute && i < c->n_layers; i++) {
        if (!recompute[i])
            continue;
        pp_layer_cost *l = &d->layers[i];
        const pp_layer_cost *o = &c->layers[i];
        l->bwd_input_us = pp_costs_layer_rc_us(o, PP_OP_BWD_INPUT, 1);
        l->bwd_weight_us = pp_costs_layer_rc_us(o, PP_OP_BWD_WEIGHT, 1);
        l->bwd_us = pp_costs_layer_rc_us(o, PP_OP_BWD, 1);
        l->has_split = 1;
    }
    *out = d;
    return PP_OK;
}

pp_status pp_costs_scale_layers(const pp_costs *c, double k, pp_costs **out)
{
    *out = NULL;
    if (!(k > 0) || !isfinite(k))
        return PP_ERR(PP_ERR_INVALID, "cost scale %g: a positive finite factor is needed", k);
    pp_costs *d = costs_copy(c);
    if (!d)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for a cost copy of %d layers", c->n_layers);
    for (int i = 0; i < c->n_layers; i++) {
        pp_layer_cost *l = &d->layers[i];
        l->fwd_us *= k;
        l->bwd_us *= k;
        l->bwd_input_us *= k;
        l->bwd_weight_us *= k;
    }
    *out = d;
    return PP_OK;
}

double pp_costs_layers_us(const pp_costs *c)
{
    double us = 0.0;
    for (int i = 0; i < c->n_layers; i++)
        us += pp_costs_layer_us(&c->layers[i], PP_OP_FWD) +
              pp_costs_layer_us(&c->layers[i], PP_OP_BWD);
    return us;
}

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* What layer l keeps for its backward, and what it keeps when recomputed (its input). Without
 * the memory keys, the model before them: it keeps what it hands on, and recomputed, what it
 * received. */
static uint64_t layer_kept(const pp_costs *c, int l)
{
    return c->layers[l].has_kept ? c->layers[l].kept_bytes : c->layers[l].activation_bytes;
}

static uint64_t layer_input(const pp_costs *c, int l)
{
    if (c->layers[l].has_kept)
        return c->layers[l].input_bytes;
    return l > 0 ? c->layers[l - 1].activation_bytes : 0;
}

void pp_costs_chunk_memory(const pp_costs *c, int lo, int hi, const uint8_t *recompute,
                           uint64_t *mb_bytes, uint64_t *set_bytes)
{
    int L = c->n_layers;
    uint64_t mb = 0, set = 0;
    for (int l = lo; l < hi; l++) {
        if (recompute && recompute[l]) {
            mb = sat_add(mb, layer_input(c, l));
            set = sat_add(set, layer_kept(c, l));
        } else {
            mb = sat_add(mb, layer_kept(c, l));
        }
    }
    /* a recomputed chunk end keeps the tensor the send reads: the output (not after the head)
     * and the input gradient (not before the embedding), each the size of the boundary's input */
    if (recompute && hi > lo && recompute[hi - 1] && hi < L)
        mb = sat_add(mb, layer_input(c, hi));
    if (recompute && hi > lo && recompute[lo] && lo > 0)
        mb = sat_add(mb, layer_input(c, lo));
    *mb_bytes = mb;
    *set_bytes = set;
}

uint64_t pp_costs_param_bytes(const pp_costs *c, int lo, int hi)
{
    uint64_t b = 0;
    for (int l = lo < 0 ? 0 : lo; l < hi && l < c->n_layers; l++) /* saturating: 1e5 x 2^53 */
        b = c->layers[l].param_bytes > UINT64_MAX - b ? UINT64_MAX : b + c->layers[l].param_bytes;
    return b;
}

uint64_t pp_costs_stage_param_bytes(const pp_costs *c, const pp_partition *part, int stage)
{
    uint64_t b = 0;
    for (int ch = 0; ch < part->v; ch++) {
        int lo, hi;
        pp_partition_piece_layers(part, stage, ch, &lo, &hi);
        b += pp_costs_param_bytes(c, lo, hi);
    }
    return b;
}

double pp_costs_opt_us(const pp_costs *c, uint64_t param_bytes)
{
    return c->optimizer_us + c->optimizer_us_per_MB * ((double)param_bytes * 1e-6) +
           c->grad_norm_us + c->step_fixed_us;
}

double pp_costs_dp_allreduce_us(const pp_costs *c, uint64_t param_bytes)
{
    return c->dp_allreduce_us + c->dp_allreduce_us_per_MB * ((double)param_bytes * 1e-6);
}

int pp_costs_has_dp_allreduce(const pp_costs *c)
{
    return c->dp_allreduce_us > 0 || c->dp_allreduce_us_per_MB > 0;
}

double pp_costs_op_us(const pp_costs *c, pp_op op, int lo, int hi)
{
    if (op == PP_OP_OPT_STEP)
        return pp_costs_opt_us(c, pp_costs_param_bytes(c, lo, hi));
    double us = 0.0;
    for (int l = lo; l < hi; l++)
        us += pp_costs_layer_us(&c->layers[l], op);
    int compute = op == PP_OP_FWD || op == PP_OP_BWD || op == PP_OP_BWD_INPUT ||
                  op == PP_OP_BWD_WEIGHT;
    return compute ? us + c->op_gap_us : us;
}

uint64_t pp_costs_boundary_bytes(const pp_costs *c, int b)
{
    return b > 0 && b < c->n_layers ? c->layers[b - 1].activation_bytes : 0;
}
