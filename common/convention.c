/* convention.c: the NVTX convention's tables and message grammar (pp_convention.h,
 * docs/nvtx-convention.md). Called by runtime/nvtx.c when it registers a message, by
 * libpprof.so's registry, and by the analyzer's decode stage once per distinct string. */
#include "pp_convention.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first word of each kind's message, its class, and its colour (ARGB): forward blue,
 * backward green, weight-gradient teal, sends orange, receives light orange, step and optimizer
 * grey, the data-parallel all-reduce purple; layer ranges take a lighter shade of their
 * parent. */
static const struct {
    const char *word;
    pp_nvtx_class cls;
    uint32_t color;
} k_kinds[PP_NVTX_KIND_COUNT] = {
    [PP_NVTX_STEP] = {"step", PP_NVTX_CLASS_PLAIN, 0xFF607D8Bu},             /* blue grey */
    [PP_NVTX_FWD] = {"fwd", PP_NVTX_CLASS_MB, 0xFF1E88E5u},                  /* blue */
    [PP_NVTX_BWD] = {"bwd", PP_NVTX_CLASS_MB, 0xFF43A047u},                  /* green */
    [PP_NVTX_BWD_INPUT] = {"bwd_input", PP_NVTX_CLASS_MB, 0xFF2E7D32u},      /* dark green */
    [PP_NVTX_BWD_WEIGHT] = {"bwd_weight", PP_NVTX_CLASS_MB, 0xFF00897Bu},    /* teal */
    [PP_NVTX_SEND_ACT] = {"send_act", PP_NVTX_CLASS_MB, 0xFFFB8C00u},        /* orange */
    [PP_NVTX_RECV_ACT] = {"recv_act", PP_NVTX_CLASS_MB, 0xFFFFB74Du},        /* light orange */
    [PP_NVTX_SEND_GRAD] = {"send_grad", PP_NVTX_CLASS_MB, 0xFFF4511Eu},      /* deep orange */
    [PP_NVTX_RECV_GRAD] = {"recv_grad", PP_NVTX_CLASS_MB, 0xFFFF8A65u},      /* light deep orange */
    [PP_NVTX_OPT_STEP] = {"opt_step", PP_NVTX_CLASS_PLAIN, 0xFF9E9E9Eu},     /* grey */
    [PP_NVTX_LAYER_FWD] = {"fwd", PP_NVTX_CLASS_LAYER, 0xFF90CAF9u},         /* light blue */
    [PP_NVTX_LAYER_BWD] = {"bwd", PP_NVTX_CLASS_LAYER, 0xFFA5D6A7u},         /* light green */
    [PP_NVTX_LAYER_BWD_WEIGHT] = {"bwd_weight", PP_NVTX_CLASS_LAYER, 0xFF80CBC4u}, /* light teal */
    [PP_NVTX_ALLREDUCE] = {"allreduce", PP_NVTX_CLASS_PLAIN, 0xFF8E24AAu},   /* purple */
};

#define FIELD(f, signed_, desc)                                                                 \
    {#f, desc, offsetof(pp_nvtx_event, f), sizeof(((pp_nvtx_event *)0)->f), signed_}
const pp_nvtx_field pp_nvtx_fields[PP_NVTX_FIELD_COUNT] = {
    FIELD(kind, 0, "pp_nvtx_kind (docs/nvtx-convention.md)"),
    FIELD(stage, 1, "pipeline stage, -1 if none"),
    FIELD(mb, 1, "micro-batch, -1 if none"),
    FIELD(chunk, 1, "virtual stage (model chunk), -1 if none"),
    FIELD(layer, 1, "layer index in the model, -1 if none"),
    FIELD(peer, 1, "other stage of a send/recv, -1 if none"),
    FIELD(bytes, 0, "bytes sent or received, 0 if none"),
    FIELD(step, 1, "1-based optimizer step, -1 if none"),
};
#undef FIELD

static int kind_known(pp_nvtx_kind kind) { return (unsigned)kind < PP_NVTX_KIND_COUNT; }

const char *pp_nvtx_kind_word(pp_nvtx_kind kind)
{
    return kind_known(kind) ? k_kinds[kind].word : "unknown";
}

pp_nvtx_class pp_nvtx_kind_class(pp_nvtx_kind kind)
{
    return kind_known(kind) ? k_kinds[kind].cls : PP_NVTX_CLASS_PLAIN;
}

uint32_t pp_nvtx_kind_color(pp_nvtx_kind kind)
{
    return kind_known(kind) ? k_kinds[kind].color : 0xFF9E9E9Eu;
}

int pp_nvtx_message_format(char *buf, size_t size, pp_nvtx_kind kind, int32_t mb, int32_t chunk,
                           int32_t layer, const char *layer_name)
{
    const char *word = pp_nvtx_kind_word(kind);
    switch (pp_nvtx_kind_class(kind)) {
    case PP_NVTX_CLASS_MB:
        if (mb < 0)
            return snprintf(buf, size, "%s", word);
        if (chunk >= 0)
            return snprintf(buf, size, "%s mb%d c%d", word, mb, chunk);
        return snprintf(buf, size, "%s mb%d", word, mb);
    case PP_NVTX_CLASS_LAYER:
        if (layer < 0)
            return snprintf(buf, size, "layer %s", word);
        if (layer_name && layer_name[0])
            return snprintf(buf, size, "%s %s", layer_name, word);
        return snprintf(buf, size, "layer%d %s", layer, word);
    case PP_NVTX_CLASS_PLAIN: break;
    }
    return snprintf(buf, size, "%s", word);
}

/* "<prefix><digits>": the number, saturated at INT64_MAX (strtoll's overflow value). */
static int parse_int_after(const char *tok, const char *prefix, int64_t *out)
{
    size_t n = strlen(prefix);
    if (strncmp(tok, prefix, n) != 0 || !isdigit((unsigned char)tok[n]))
        return 0;
    char *end;
    long long v = strtoll(tok + n, &end, 10);
    if (*end && *end != ' ')
        return 0;
    *out = v;
    return 1;
}

/* The words a message may start with: plain and micro-batch kinds (layer kinds read their
 * word second). */
static int leading_kind(const char *tok)
{
    for (int k = 0; k < PP_NVTX_KIND_COUNT; k++)
        if (k_kinds[k].cls != PP_NVTX_CLASS_LAYER && strcmp(tok, k_kinds[k].word) == 0)
            return k;
    return PP_NVTX_KIND_NONE;
}

static int layer_kind(const char *tok)
{
    for (int k = 0; k < PP_NVTX_KIND_COUNT; k++)
        if (k_kinds[k].cls == PP_NVTX_CLASS_LAYER && strcmp(tok, k_kinds[k].word) == 0)
            return k;
    return PP_NVTX_KIND_NONE;
}

void pp_nvtx_message_parse(const char *msg, pp_nvtx_message *m)
{
    m->kind = PP_NVTX_KIND_NONE;
    m->mb = m->chunk = m->layer = m->peer = -1;
    char buf[160];
    snprintf(buf, sizeof buf, "%s", msg);
    char *tok[8], *save = NULL;
    int nt = 0;
    for (char *p = strtok_r(buf, " ", &save); p && nt < 8; p = strtok_r(NULL, " ", &save))
        tok[nt++] = p;
    if (!nt)
        return;
    m->kind = leading_kind(tok[0]);
    if (m->kind == PP_NVTX_KIND_NONE && nt >= 2) {
        /* "<layer> fwd" */
        m->kind = layer_kind(tok[1]);
        int64_t li;
        if (m->kind != PP_NVTX_KIND_NONE && parse_int_after(tok[0], "layer", &li))
            m->layer = li;
        return;
    }
    for (int i = 1; i < nt; i++) {
        int64_t x;
        if (parse_int_after(tok[i], "mb", &x))
            m->mb = x;
        else if (parse_int_after(tok[i], "c", &x))
            m->chunk = x;
        else if (parse_int_after(tok[i], "peer", &x))
            m->peer = x;
    }
}

void pp_nvtx_message_layer_name(const char *msg, char *name, size_t cap)
{
    if (!cap)
        return;
    const char *sp = strchr(msg, ' ');
    size_t len = sp ? (size_t)(sp - msg) : strlen(msg);
    if (len >= cap)
        len = cap - 1;
    memcpy(name, msg, len);
    name[len] = '\0';
}

pp_nvtx_mark pp_nvtx_mark_kind(const char *msg)
{
    if (strncmp(msg, "clocksync ", 10) == 0)
        return PP_NVTX_MARK_CLOCKSYNC;
    if (strncmp(msg, "layer ", 6) == 0)
        return PP_NVTX_MARK_LAYER;
    if (strncmp(msg, "config", 6) == 0)
        return PP_NVTX_MARK_CONFIG;
    return PP_NVTX_MARK_NONE;
}

void pp_nvtx_mark_each(const char *msg, pp_nvtx_kv_fn fn, void *ctx)
{
    /* after the mark's first word: "config" may be followed by a pair at once */
    size_t skip = 0;
    switch (pp_nvtx_mark_kind(msg)) {
    case PP_NVTX_MARK_CONFIG: skip = 6; break;
    case PP_NVTX_MARK_LAYER: skip = 5; break;
    case PP_NVTX_MARK_CLOCKSYNC: skip = 9; break;
    case PP_NVTX_MARK_NONE: skip = strcspn(msg, " "); break;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s", msg + skip);
    char *save = NULL;
    for (char *p = strtok_r(buf, " ", &save); p; p = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(p, '=');
        if (!eq)
            continue;
        *eq = '\0';
        fn(ctx, p, eq + 1);
    }
}

static void layer_kv(void *ctx, const char *k, const char *v)
{
    pp_nvtx_layer_info *li = ctx;
    if (strcmp(k, "index") == 0)
        li->index = strtoll(v, NULL, 10);
    else if (strcmp(k, "name") == 0)
        snprintf(li->name, sizeof li->name, "%s", v);
    else if (strcmp(k, "param_bytes") == 0)
        li->param_bytes = strtoull(v, NULL, 10);
    else if (strcmp(k, "activation_bytes") == 0)
        li->activation_bytes = strtoull(v, NULL, 10);
    else if (strcmp(k, "kept_bytes") == 0) {
        li->kept_bytes = strtoull(v, NULL, 10);
        li->has_kept = 1;
    } else if (strcmp(k, "input_bytes") == 0) {
        li->input_bytes = strtoull(v, NULL, 10);
        li->has_input = 1;
    }
}

int pp_nvtx_layer_mark_parse(const char *msg, pp_nvtx_layer_info *out)
{
    memset(out, 0, sizeof *out);
    out->index = -1;
    if (pp_nvtx_mark_kind(msg) != PP_NVTX_MARK_LAYER)
        return 0;
    pp_nvtx_mark_each(msg, layer_kv, out);
    return 1;
}

int pp_nvtx_layer_mark_format(char *buf, size_t size, int index, const char *name,
                              unsigned long long param_bytes, unsigned long long activation_bytes,
                              int with_memory, unsigned long long kept_bytes,
                              unsigned long long input_bytes)
{
    if (!with_memory)
        return snprintf(buf, size, "layer index=%d name=%s param_bytes=%llu activation_bytes=%llu",
                        index, name, param_bytes, activation_bytes);
    return snprintf(buf, size,
                    "layer index=%d name=%s param_bytes=%llu activation_bytes=%llu kept_bytes=%llu "
                    "input_bytes=%llu",
                    index, name, param_bytes, activation_bytes, kept_bytes, input_bytes);
}

int pp_nvtx_config_mark_format(char *buf, size_t size, const pp_nvtx_config_info *c)
{
    return snprintf(buf, size,
                    "config schedule=%s S=%d M=%d v=%d layers=%d samples_per_step=%.0f "
                    "tokens_per_step=%.0f backend=%s dp=%d replica=%d schedules=%s%s%s",
                    c->schedule, c->S, c->M, c->v, c->layers, c->samples_per_step,
                    c->tokens_per_step, c->backend, c->dp, c->replica, c->schedules,
                    c->recompute ? " recompute=" : "", c->recompute ? c->recompute : "");
}

int pp_nvtx_clocksync_format(char *buf, size_t size, const pp_nvtx_clocksync *c)
{
    return snprintf(buf, size, "clocksync %s peer=%d phase=%d seq=%d", c->recv ? "recv" : "send",
                    c->peer, c->phase, c->seq);
}

int pp_nvtx_clocksync_parse(const char *msg, pp_nvtx_clocksync *out)
{
    char dir[8];
    int peer, phase, seq;
    if (sscanf(msg, "clocksync %7s peer=%d phase=%d seq=%d", dir, &peer, &phase, &seq) != 4)
        return 0;
    int recv = strcmp(dir, "recv") == 0;
    if (!recv && strcmp(dir, "send") != 0)
        return 0;
    *out = (pp_nvtx_clocksync){.recv = recv, .peer = peer, .phase = phase, .seq = seq};
    return 1;
}
