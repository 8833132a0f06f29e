/* advise.c: micro-batch-size fit of per-layer costs, per-stage memory of a layout, and the
 * partition in Megatron-LM's and DeepSpeed's forms (pp_advise.h). */
#include "pp_advise.h"
#include "pp_tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Least squares y = a + c x over n points with at least two distinct x. */
static pp_advise_line fit_line(const double *x, const double *y, int n)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) {
        sx += x[i];
        sy += y[i];
        sxx += x[i] * x[i];
        sxy += x[i] * y[i];
    }
    pp_advise_line l;
    double den = n * sxx - sx * sx;
    l.c_us = den != 0 ? (n * sxy - sx * sy) / den : 0;
    l.a_us = (sy - l.c_us * sx) / n;
    double ss = 0;
    l.max_rel = 0;
    for (int i = 0; i < n; i++) {
        double r = y[i] - (l.a_us + l.c_us * x[i]);
        ss += r * r;
        if (y[i] > 0 && fabs(r) / y[i] > l.max_rel)
            l.max_rel = fabs(r) / y[i];
    }
    l.rms_us = sqrt(ss / n);
    return l;
}

void pp_advise_fit_free(pp_advise_fit *f)
{
    if (!f)
        return;
    free(f->layers);
    memset(f, 0, sizeof *f);
}

pp_status pp_advise_fit_costs(const pp_costs *const *costs, const int *sizes, int n,
                              pp_advise_fit *out)
{
    memset(out, 0, sizeof *out);
    if (n < 2)
        return PP_ERR(PP_ERR_INVALID, "the micro-batch fit needs runs at two or more micro-batch "
                                      "sizes (got %d run)", n);
    int distinct = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] <= 0)
            return PP_ERR(PP_ERR_INVALID, "run %d does not state its micro-batch size (samples "
                                          "per step in the configuration mark)", i + 1);
        int seen = 0;
        for (int k = 0; k < i; k++)
            seen |= sizes[k] == sizes[i];
        distinct += !seen;
    }
    if (distinct < 2)
        return PP_ERR(PP_ERR_INVALID, "every run used micro-batch size %d: the fit needs two or "
                                      "more different sizes (pptrain --batch B --microbatches M "
                                      "gives B/M)", sizes[0]);
    int L = costs[0]->n_layers;
    for (int i = 1; i < n; i++) {
        if (costs[i]->n_layers != L)
            return PP_ERR(PP_ERR_INVALID, "run %d has %d layers, run 1 has %d: not the same "
                                          "model", i + 1, costs[i]->n_layers, L);
        for (int l = 0; l < L; l++)
            if (strcmp(costs[i]->layers[l].name, costs[0]->layers[l].name) != 0)
                return PP_ERR(PP_ERR_INVALID, "layer %d is '%s' in run %d but '%s' in run 1: "
                                              "not the same model", l, costs[i]->layers[l].name,
                              i + 1, costs[0]->layers[l].name);
    }
    double *x = malloc(sizeof(double) * (size_t)n * 2);
    out->layers = calloc((size_t)L, sizeof *out->layers);
    if (!x || !out->layers) {
        free(x);
        pp_advise_fit_free(out);
        return PP_ERR(PP_ERR_NOMEM, "out of memory");
    }
    double *y = x + n;
    out->L = L;
    out->n_runs = n;
    out->n_sizes = distinct;
    out->worst_layer = -1;
    for (int i = 0; i < n; i++)
        x[i] = sizes[i];
    for (int l = 0; l < L; l++) {
        pp_advise_layer *al = &out->layers[l];
        snprintf(al->name, sizeof al->name, "%s", costs[0]->layers[l].name);
        pp_advise_line *lines[4] = {&al->fwd, &al->bwd, &al->bwd_input, &al->bwd_weight};
        for (int f = 0; f < 4; f++) {
            for (int i = 0; i < n; i++) {
                const pp_layer_cost *c = &costs[i]->layers[l];
                y[i] = f == 0 ? c->fwd_us : f == 1 ? c->bwd_us : f == 2 ? c->bwd_input_us
                                                                        : c->bwd_weight_us;
            }
            *lines[f] = fit_line(x, y, n);
            if (f < 2 && lines[f]->max_rel > out->worst_rel) {
                out->worst_rel = lines[f]->max_rel;
                out->worst_layer = l;
            }
        }
        al->has_split = 1;
        double act = 0;
        for (int i = 0; i < n; i++) {
            al->has_split &= costs[i]->layers[l].has_split;
            act += (double)costs[i]->layers[l].activation_bytes / sizes[i];
        }
        al->activation_bytes_per_sample = act / n;
        al->param_bytes = costs[0]->layers[l].param_bytes;
    }
    for (int i = 0; i < n; i++) {
        out->p2p_GBps += costs[i]->p2p_GBps / n;
        out->p2p_latency_us += costs[i]->p2p_latency_us / n;
        out->optimizer_us += costs[i]->optimizer_us / n;
        out->optimizer_us_per_MB += costs[i]->optimizer_us_per_MB / n;
        out->grad_norm_us += costs[i]->grad_norm_us / n;
        out->step_fixed_us += costs[i]->step_fixed_us / n;
        out->dp_allreduce_us += costs[i]->dp_allreduce_us / n;
        out->dp_allreduce_us_per_MB += costs[i]->dp_allreduce_us_per_MB / n;
        out->send_act_us += costs[i]->send_act_us / n;
        out->send_grad_us += costs[i]->send_grad_us / n;
        out->recv_act_us += costs[i]->recv_act_us / n;
        out->recv_grad_us += costs[i]->recv_grad_us / n;
        out->op_gap_us += costs[i]->op_gap_us / n;
    }
    free(x);
    return PP_OK;
}

static double at(const pp_advise_line *l, int b, int *clamped)
{
    double t = l->a_us + l->c_us * b;
    if (t < 0) {
        (*clamped)++;
        return 0;
    }
    return t;
}

pp_status pp_advise_costs_at(const pp_advise_fit *f, int b, pp_costs **out, int *clamped)
{
    *out = NULL;
    if (b < 1)
        return PP_ERR(PP_ERR_INVALID, "micro-batch size %d: must be at least 1", b);
    pp_costs *c;
    pp_status st = pp_costs_uniform(f->L, 0, 0, 0, &c);
    if (st != PP_OK)
        return st;
    int n_clamped = 0;
    for (int l = 0; l < f->L; l++) {
        const pp_advise_layer *al = &f->layers[l];
        pp_layer_cost *lc = &c->layers[l];
        snprintf(lc->name, sizeof lc->name, "%s", al->name);
        lc->fwd_us = at(&al->fwd, b, &n_clamped);
        lc->bwd_us = at(&al->bwd, b, &n_clamped);
        lc->bwd_input_us = at(&al->bwd_input, b, &n_clamped);
        lc->bwd_weight_us = at(&al->bwd_weight, b, &n_clamped);
        lc->has_split = al->has_split;
        if (!lc->has_split)
            lc->bwd_input_us = lc->bwd_weight_us = 0;
        lc->activation_bytes = (uint64_t)llround(al->activation_bytes_per_sample * b);
        lc->param_bytes = al->param_bytes;
    }
    c->p2p_GBps = f->p2p_GBps;
    c->p2p_latency_us = f->p2p_latency_us;
    c->optimizer_us = f->optimizer_us;
    c->optimizer_us_per_MB = f->optimizer_us_per_MB;
    c->grad_norm_us = f->grad_norm_us;
    c->step_fixed_us = f->step_fixed_us;
    c->dp_allreduce_us = f->dp_allreduce_us;
    c->dp_allreduce_us_per_MB = f->dp_allreduce_us_per_MB;
    c->send_act_us = f->send_act_us;
    c->send_grad_us = f->send_grad_us;
    c->recv_act_us = f->recv_act_us;
    c->recv_grad_us = f->recv_grad_us;
    c->op_gap_us = f->op_gap_us;
    c->microbatch_size = b;
    if (clamped)
        *clamped = n_clamped;
    *out = c;
    return PP_OK;
}

pp_status pp_advise_stage_memory(const pp_costs *c, const pp_partition *part,
                                 pp_schedule_kind kind, int M, const uint8_t *recompute,
                                 uint64_t *mem, int *peak_inflight)
{
    pp_schedule *s = NULL;
    pp_schedule_report rep;
    memset(&rep, 0, sizeof rep);
    pp_status st = pp_schedule_create(kind, part->S, M, part->v, &s);
    if (st == PP_OK)
        st = pp_schedule_validate(s, &rep);
    if (st == PP_OK)
        for (int k = 0; k < part->S; k++) {
            pp_stage_memory m;
            if (mem && (st = pp_stage_memory_model(c, part, s, k, recompute, &m)) != PP_OK)
                break;
            if (mem)
                mem[k] = m.total_bytes;
            if (peak_inflight)
                peak_inflight[k] = rep.peak_inflight[k];
        }
    pp_schedule_report_free(&rep);
    pp_schedule_destroy(s);
    return st;
}

/* Appends text to buf[cap] as far as it fits. */
static void append(char *buf, size_t cap, size_t *len, const char *text)
{
    size_t n = strlen(text);
    if (*len + n >= cap)
        n = *len + 1 < cap ? cap - *len - 1 : 0;
    memcpy(buf + *len, text, n);
    *len += n;
    buf[*len] = '\0';
}

static void flush_t(char *buf, size_t cap, size_t *len, int *run)
{
    char tmp[32];
    if (*run >= 3)
        snprintf(tmp, sizeof tmp, "t*%d", *run);
    else
        snprintf(tmp, sizeof tmp, "%.*s", *run, "tt");
    append(buf, cap, len, tmp);
    *run = 0;
}

void pp_advise_megatron_layout(const pp_costs *c, const pp_partition *part, char *buf,
                               size_t cap)
{
    size_t len = 0;
    if (!cap)
        return;
    buf[0] = '\0';
    for (int p = 0; p < part->P; p++) {
        if (p)
            append(buf, cap, &len, "|");
        int run = 0;
        for (int l = part->bounds[p]; l < part->bounds[p + 1]; l++) {
            const char *name = l < c->n_layers ? c->layers[l].name : "";
            if (strcmp(name, "embedding") == 0 || strcmp(name, "head") == 0) {
                flush_t(buf, cap, &len, &run);
                append(buf, cap, &len, name[0] == 'e' ? "E" : "L");
            } else {
                run++;
            }
        }
        flush_t(buf, cap, &len, &run);
    }
}

void pp_advise_deepspeed_parts(const pp_partition *part, char *buf, size_t cap)
{
    size_t len = 0;
    if (!cap)
        return;
    buf[0] = '\0';
    append(buf, cap, &len, "[");
    for (int p = 0; p <= part->P; p++) {
        char tmp[24];
        snprintf(tmp, sizeof tmp, "%s%d", p ? ", " : "", part->bounds[p]);
        append(buf, cap, &len, tmp);
    }
    append(buf, cap, &len, "]");
}
