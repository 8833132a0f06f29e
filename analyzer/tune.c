/* tune.c: the tuning driver's core (pp_tune.h): loading a run for tuning, one proposal per
 * (schedule, v, M) through the rebalancer, the search over the candidates a run allows, plans
 * made from a proposal, and the check that a run ran a plan. Called by pprof-tune and the other
 * tune_*.c files; what is printed lives in tune_explain.c. */
#include "tune_internal.h"

#include "pp_sim.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pp_tune_fmt_into(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return n >= 0 && (size_t)n < cap;
}

const char *pp_tune_not_runnable(const pp_extract *e)
{
    return e->runnable_announced
               ? "the job's config mark does not list it among the schedules it can run"
               : "the job does not announce the schedules it can run (config mark "
                 "schedules=, docs/nvtx-convention.md), so only its own is proposed";
}

pp_status pp_tune_load_run(const pp_tune_opts *o, const char *dir, pp_analysis **a, pp_extract *e)
{
    pp_analysis_options ao;
    pp_analysis_options_default(&ao);
    *a = NULL;
    memset(e, 0, sizeof *e);
    pp_status st = pp_analyze_dir(dir, &ao, a);
    if (st != PP_OK)
        return pp_error_wrap(st, "run '%s'", dir);
    if ((*a)->n_steps == 0 && (*a)->S == 0) {
        /* the generic view alone (analyzer/ranges.c): nothing to tune */
        st = PP_ERR(PP_ERR_INVALID, "run '%s': no pipeline ranges in the capture (%llu ranges "
                                    "of %zu names seen): pprof-tune needs pipeline ranges; see "
                                    "docs/dialects.md (--dialect)",
                    dir, (unsigned long long)(*a)->generic_ranges, (*a)->n_ranges);
        pp_analysis_free(*a);
        *a = NULL;
        return st;
    }
    if ((*a)->n_steps == 0) {
        pp_analysis_free(*a);
        *a = NULL;
        return PP_ERR(PP_ERR_INVALID, "run '%s': no complete step to measure (run more steps: "
                                      "the first is skipped as warm-up)", dir);
    }
    if ((st = pp_extract_from_analysis(*a, e)) != PP_OK) {
        pp_analysis_free(*a);
        *a = NULL;
        return pp_error_wrap(st, "run '%s'", dir);
    }
    if (o->note && e->stage_level)
        o->note(0, "run '%s': %s", dir, e->stage_why);
    if (o->note)
        o->note(1, "run '%s': %d layers, %d stages, %s, M = %d, micro-batch size %d; extraction "
                   "notes:",
                dir, e->costs->n_layers, e->partition.S, pp_schedule_kind_name(e->schedule), e->M,
                e->microbatch_size);
    if (o->detail)
        fprintf(o->detail, "%s", e->notes);
    return PP_OK;
}

static double jitter_draw(void *ctx, int stage, int k, const pp_instr *in, uint64_t key)
{
    (void)stage;
    (void)k;
    (void)in;
    return pp_jitter_factor(ctx, key);
}

pp_status pp_tune_predict_dist(const pp_tune_opts *o, const pp_extract *e, const pp_costs *c,
                               pp_schedule_kind kind, const pp_partition *part, int M,
                               pp_sim_dist_result *res)
{
    pp_sim_dist_opts d = {.noise = &e->noise, .seed = PP_TUNE_DIST_SEED};
    if (o && o->jitter) {
        d.noise = NULL;
        d.draw = jitter_draw;
        d.draw_ctx = (void *)o->jitter;
        d.seed ^= o->jitter->seed;
        return pp_sim_dist_file(kind, part, M, c ? c : pp_extract_run_costs(e), &d, res);
    }
    /* each stage's variation from the run's stage that was as busy (docs/sim-dist.md, "Idle
     * stages vary more") */
    return pp_extract_dist_mapped(e, kind, part, M, c, &d, res);
}

pp_status pp_tune_speed_compare(const pp_tune_opts *o, const pp_extract *base,
                                const pp_extract *run, pp_tune_speed *out)
{
    memset(out, 0, sizeof *out);
    if (base->costs->n_layers != run->costs->n_layers)
        return PP_ERR(PP_ERR_INVALID, "the runs are of other models (%d and %d layers)",
                      base->costs->n_layers, run->costs->n_layers);
    if (base->microbatch_size && run->microbatch_size &&
        base->microbatch_size != run->microbatch_size)
        return PP_ERR(PP_ERR_INVALID, "the runs have other micro-batch sizes (%d and %d)",
                      base->microbatch_size, run->microbatch_size);
    /* layers left as measured do not add up to their ops: their sum is no measure of the
     * run's compute (a sim-backend capture under a host stealing the CPU in 10 ms bursts read
     * its layers' compute 49% and 77% below its baseline's, its ops 8% above) */
    for (int i = 0; i < 2; i++)
        if ((i ? run : base)->layers_unscaled)
            return PP_ERR(PP_ERR_INVALID,
                          "the %s's layer ranges do not add up to its ops (%d op(s) left as "
                          "measured, pprof-tune -v): its layers' compute is no measure of its "
                          "speed",
                          i ? "run" : "baseline", (i ? run : base)->layers_unscaled);
    /* `costs`, not run_costs: a recomputed layer's second forward is taken out of both */
    out->base_us = pp_costs_layers_us(base->costs);
    out->run_us = pp_costs_layers_us(run->costs);
    if (!(out->base_us > 0) || !(out->run_us > 0) || !isfinite(out->base_us) ||
        !isfinite(out->run_us))
        return PP_ERR(PP_ERR_INVALID, "no compute measured to compare (%g and %g us per "
                                      "micro-batch)", out->base_us, out->run_us);
    out->ratio = out->run_us / out->base_us;
    pp_costs *scaled = NULL, *rc = NULL;
    pp_status st = pp_costs_scale_layers(base->costs, out->ratio, &scaled);
    if (st == PP_OK && run->recompute)
        st = pp_costs_with_recompute(scaled, run->recompute, &rc);
    if (st == PP_OK)
        st = pp_tune_predict_dist(o, base, rc ? rc : scaled, run->schedule, &run->partition,
                                  run->M, &out->adjusted);
    pp_costs_destroy(rc);
    pp_costs_destroy(scaled);
    return st;
}

void pp_tune_proposal_free(pp_tune_proposal *p)
{
    pp_partition_free(&p->part);
    free(p->mem);
    p->mem = NULL;
    pp_free(p->recompute);
    p->recompute = NULL;
    pp_costs_destroy(p->rc_costs);
    p->rc_costs = NULL;
}

pp_status pp_tune_propose(const pp_costs *c, pp_schedule_kind kind, int S, int v, int M, int b,
                          uint64_t mem_limit, int recompute, double budget_s,
                          pp_tune_proposal *p)
{
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->v = v;
    p->M = M;
    p->b = b;
    snprintf(p->recompute_text, sizeof p->recompute_text, "none");
    pp_rebalance_opts o = {.kind = kind, .S = S, .v = v, .M = M, .costs = c,
                           .memory_limit_bytes = mem_limit, .recompute = recompute,
                           .time_budget_s = budget_s};
    pp_rebalance_result r;
    pp_status st = pp_rebalance(&o, &r);
    if (st != PP_OK) {
        snprintf(p->why, sizeof p->why, "%s", pp_error_message());
        return st;
    }
    p->part = r.partition;
    r.partition.bounds = NULL;
    p->step_ns = r.step_ns;
    p->lower_ns = r.lower_bound_ns;
    p->exact = r.exact;
    p->seconds = r.seconds;
    p->mem = malloc(sizeof(uint64_t) * (size_t)S);
    if (!p->mem) {
        pp_rebalance_result_free(&r);
        return PP_ERR(PP_ERR_NOMEM, "out of memory");
    }
    memcpy(p->mem, r.stage_memory_bytes, sizeof(uint64_t) * (size_t)S);
    if (r.recomputed_stages) {
        p->recomputed_stages = r.recomputed_stages;
        p->recompute = r.recompute;
        r.recompute = NULL;
        if ((st = pp_costs_with_recompute(c, p->recompute, &p->rc_costs)) != PP_OK ||
            (st = pp_recompute_format(&p->part, p->recompute, p->recompute_text,
                                      sizeof p->recompute_text)) != PP_OK) {
            pp_rebalance_result_free(&r);
            pp_tune_proposal_free(p);
            return st;
        }
    }
    pp_rebalance_result_free(&r);
    pp_sim_result sr;
    if ((st = pp_sim_file(kind, &p->part, M, p->rc_costs ? p->rc_costs : c, NULL, &sr)) != PP_OK) {
        pp_tune_proposal_free(p);
        return st;
    }
    p->bubble = sr.bubble_ratio;
    pp_sim_result_free(&sr);
    p->ok = 1;
    return PP_OK;
}

int pp_tune_v_choices(pp_schedule_kind kind, int S, int L, int M, int run_v, int sweep, int *vs,
                      char *why, size_t cap)
{
    if (!pp_schedule_allows_v(kind, S, M, pp_schedule_default_v(kind), why, cap))
        return 0;
    if (pp_schedule_default_v(kind) == 1) {
        vs[0] = 1;
        return 1;
    }
    int n = 0;
    int lo = run_v > 1 && !sweep ? run_v : 2, hi = sweep ? 4 : lo;
    for (int v = lo; v <= hi; v++)
        if (S * v <= L)
            vs[n++] = v;
    if (!n)
        snprintf(why, cap, "interleaved needs S x v <= L (S = %d, v = %d, L = %d)", S, lo, L);
    return n;
}

/* The schedules to try for run e: its own first (no change of schedule is always a candidate),
 * then those of o->kinds the job says it can run; the others go to s->skipped. */
static int candidate_kinds(const pp_tune_opts *o, const pp_extract *e, pp_tune_search *s,
                           pp_schedule_kind *kinds)
{
    int n_kinds = 1;
    kinds[0] = e->schedule;
    for (int i = 0; i < o->n_kinds; i++) {
        if (o->kinds[i] == e->schedule)
            continue;
        if (e->runnable & (1u << o->kinds[i]))
            kinds[n_kinds++] = o->kinds[i];
        else
            pp_tune_fmt_into(s->skipped[s->n_skipped++], sizeof s->skipped[0], "%s: %s",
                             pp_schedule_kind_name(o->kinds[i]), pp_tune_not_runnable(e));
    }
    return n_kinds;
}

pp_status pp_tune_search_run(const pp_tune_opts *o, const char *dir, const pp_extract *e,
                             pp_tune_search *s)
{
    memset(s, 0, sizeof *s);
    s->best = -1;
    const pp_partition *cur = &e->partition;
    pp_status st = pp_extract_predict(e, e->schedule, cur, e->M, &s->current_pred_ns,
                                      &s->current_bubble);
    if (st != PP_OK)
        return pp_error_wrap(st, "predicting the run's own layout");
    s->measured_ns = e->measured_step_ns;
    s->measured_p95_ns = e->measured_p95_ns;
    if ((st = pp_tune_predict_dist(o, e, NULL, e->schedule, cur, e->M, &s->current_dist)) != PP_OK)
        return pp_error_wrap(st, "the step distribution of the run's own layout");
    if (o->memory_limit_bytes && !e->has_param_bytes && o->note)
        o->note(0, "run '%s' has no layer marks with parameter sizes: the memory limit counts "
                   "activations only", dir);
    pp_schedule_kind kinds[PP_TUNE_MAX_KINDS];
    int n_kinds = candidate_kinds(o, e, s, kinds);
    int rc = !o->no_recompute && e->can_recompute;
    if (o->memory_limit_bytes && !o->no_recompute && !e->can_recompute && o->note)
        o->note(1, "run '%s' does not state that it can recompute (config mark recompute=): no "
                   "recomputation is proposed", dir);
    pp_status first_fail = PP_OK;
    char first_msg[512] = "";
    for (int k = 0; k < n_kinds; k++) {
        int vs[4];
        char why[256] = "";
        int nv = pp_tune_v_choices(kinds[k], cur->S, cur->L, e->M, cur->v, 0, vs, why, sizeof why);
        if (!nv) {
            pp_tune_fmt_into(s->skipped[s->n_skipped++], sizeof s->skipped[0], "%s: %s",
                             pp_schedule_kind_name(kinds[k]), why);
            continue;
        }
        for (int i = 0; i < nv; i++) {
            pp_tune_proposal *p = &s->cands[s->n_cands++];
            st = pp_tune_propose(e->costs, kinds[k], cur->S, vs[i], e->M, e->microbatch_size,
                                 o->memory_limit_bytes, rc, o->time_budget_s, p);
            if (st == PP_ERR_NOMEM)
                return st;
            if (st != PP_OK && first_fail == PP_OK) {
                first_fail = st;
                snprintf(first_msg, sizeof first_msg, "%s", p->why);
            }
        }
    }
    for (int i = 0; i < s->n_cands; i++) {
        pp_tune_proposal *p = &s->cands[i];
        if (p->ok && (st = pp_tune_predict_dist(o, e, p->rc_costs ? p->rc_costs : e->costs,
                                                p->kind, &p->part, p->M, &p->dist)) != PP_OK)
            return pp_error_wrap(st, "the step distribution of the %s proposal",
                                 pp_schedule_kind_name(p->kind));
    }
    /* The best by predicted median (what the run will measure), where the medians differ by
     * more than their Monte Carlo errors; within them, by the noise-free step */
    for (int i = 0; i < s->n_cands; i++) {
        const pp_tune_proposal *p = &s->cands[i];
        if (!p->ok)
            continue;
        if (s->best < 0) {
            s->best = i;
            continue;
        }
        const pp_tune_proposal *q = &s->cands[s->best];
        double tol = (p->dist.median_err + q->dist.median_err) * q->dist.median_ns;
        if (p->dist.median_ns < q->dist.median_ns - tol ||
            (p->dist.median_ns <= q->dist.median_ns + tol && p->step_ns < q->step_ns))
            s->best = i;
    }
    if (s->best >= 0)
        return PP_OK;
    if (first_fail != PP_OK)
        return PP_ERR(first_fail, "%s", first_msg);
    return PP_ERR(PP_ERR_INVALID, "no schedule in --schedules fits this run (%s)",
                  s->n_skipped ? s->skipped[0] : "none given");
}

void pp_tune_search_free(pp_tune_search *s)
{
    for (int i = 0; i < s->n_cands; i++)
        pp_tune_proposal_free(&s->cands[i]);
    s->n_cands = 0;
}

const char *pp_tune_plan_recompute(const pp_extract *e, const pp_tune_proposal *p)
{
    return e->can_recompute ? p->recompute_text : NULL;
}

pp_status pp_tune_plan_make(const pp_partition *part, pp_schedule_kind kind, int M, int b,
                            uint64_t mem_limit, double step_ns, double bubble, double median_ns,
                            double p95_ns, const char *baseline, const char *recompute,
                            pp_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    plan->version = 1;
    plan->num_layers = part->L;
    pp_status st = pp_partition_from_bounds(part->bounds, part->P + 1, part->L, part->S,
                                            part->v, &plan->partition);
    if (st != PP_OK)
        return st;
    snprintf(plan->schedule, sizeof plan->schedule, "%s", pp_schedule_kind_name(kind));
    plan->microbatches = M;
    plan->microbatch_size = b > 0 ? b : 0;
    plan->memory_limit_bytes = mem_limit;
    plan->predicted_step_ms = step_ns * 1e-6;
    plan->predicted_bubble = bubble < 0 ? -1 : bubble > 1 ? 1 : bubble;
    plan->predicted_median_ms = median_ns > 0 ? median_ns * 1e-6 : -1;
    plan->predicted_p95_ms = p95_ns > 0 ? p95_ns * 1e-6 : -1;
    /* a baseline path longer than the plan's field is cut (it is informational) */
    size_t n = baseline ? strlen(baseline) : 0;
    if (n >= sizeof plan->baseline)
        n = sizeof plan->baseline - 1;
    memcpy(plan->baseline, baseline ? baseline : "", n);
    plan->baseline[n] = '\0';
    if (recompute && strlen(recompute) < sizeof plan->recompute)
        snprintf(plan->recompute, sizeof plan->recompute, "%s", recompute);
    return PP_OK;
}

pp_status pp_tune_plan_write(const pp_partition *part, pp_schedule_kind kind, int M, int b,
                             uint64_t mem_limit, double step_ns, double bubble, double median_ns,
                             double p95_ns, const char *baseline, const char *recompute,
                             const char *path)
{
    pp_plan plan;
    pp_status st = pp_tune_plan_make(part, kind, M, b, mem_limit, step_ns, bubble, median_ns,
                                     p95_ns, baseline, recompute, &plan);
    if (st == PP_OK)
        st = pp_plan_write(&plan, path);
    pp_plan_free(&plan);
    return st == PP_OK ? st : pp_error_wrap(st, "writing plan '%s'", path);
}

pp_status pp_tune_check_ran_plan(const char *dir, const pp_extract *e, const pp_plan *plan,
                                 const char *plan_path)
{
    char ran[2048], says[2048];
    if (e->partition.L != plan->num_layers)
        return PP_ERR(PP_ERR_INVALID, "%s has a model of %d layers, the plan '%s' was made for "
                                      "%d: a plan for another model",
                      dir, e->partition.L, plan_path, plan->num_layers);
    if (e->partition.S != plan->partition.S || e->partition.v != plan->partition.v)
        return PP_ERR(PP_ERR_INVALID, "%s ran %d stages x %d virtual, the plan '%s' says %d x %d",
                      dir, e->partition.S, e->partition.v, plan_path, plan->partition.S,
                      plan->partition.v);
    pp_partition_format(&e->partition, ran, sizeof ran);
    pp_partition_format(&plan->partition, says, sizeof says);
    if (strcmp(ran, says) != 0)
        return PP_ERR(PP_ERR_INVALID, "%s ran boundaries %s, the plan says %s", dir, ran, says);
    if (strcmp(pp_schedule_kind_name(e->schedule), plan->schedule) != 0)
        return PP_ERR(PP_ERR_INVALID, "%s ran schedule %s, the plan says %s", dir,
                      pp_schedule_kind_name(e->schedule), plan->schedule);
    if (e->M != plan->microbatches)
        return PP_ERR(PP_ERR_INVALID, "%s ran %d micro-batches, the plan says %d", dir, e->M,
                      plan->microbatches);
    if (plan->microbatch_size > 0 && e->microbatch_size > 0 &&
        plan->microbatch_size != e->microbatch_size)
        return PP_ERR(PP_ERR_INVALID, "%s ran micro-batches of %d samples, the plan says %d", dir,
                      e->microbatch_size, plan->microbatch_size);
    if (plan->recompute[0] && e->can_recompute) {
        /* the same layers recomputed: the plan's text resolved against its own partition */
        int L = e->partition.L;
        uint8_t *want = pp_alloc((size_t)L);
        if (!want)
            return PP_ERR(PP_ERR_NOMEM, "out of memory");
        pp_status st = pp_recompute_parse(plan->recompute, &plan->partition, want);
        int same = st == PP_OK;
        for (int l = 0; same && l < L; l++)
            same = (want[l] != 0) == (e->recompute && e->recompute[l]);
        pp_free(want);
        if (st != PP_OK)
            return pp_error_wrap(st, "plan '%s'", plan_path);
        if (!same) {
            char r[256] = "none";
            if (e->recompute)
                pp_recompute_format(&e->partition, e->recompute, r, sizeof r);
            return PP_ERR(PP_ERR_INVALID, "%s ran recompute %s, the plan says %s", dir, r,
                          plan->recompute);
        }
    }
    return PP_OK;
}
