/* tune_advise.c: pprof-tune --advise (pp_tune.h). Per-layer costs fitted against the micro-batch
 * size over runs at several sizes (pp_advise.h), then every micro-batch count M dividing the
 * global batch, at b = batch / M, x every schedule the job can run (and its v), rebalanced and
 * ranked by the simulated step; printed with the fit, the best layout, its formula and forms. */
#include "tune_internal.h"

#include "pp_sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pp_tune_advice_free(pp_tune_advice *adv)
{
    for (int i = 0; i < adv->n_cands; i++)
        pp_tune_proposal_free(&adv->cands[i]);
    free(adv->cands);
    pp_advise_fit_free(&adv->fit);
    for (int i = 0; adv->runs && i < adv->n_runs; i++) {
        pp_extract_free(&adv->runs[i]);
        pp_analysis_free(adv->analyses[i]);
    }
    free(adv->runs);
    free(adv->analyses);
    free(adv->sizes);
    memset(adv, 0, sizeof *adv);
}

/* Loads run i and settles its micro-batch size (--microbatch-sizes wins over the run's own). */
static pp_status load_one(const pp_tune_opts *o, const char *dir, const int *mb_sizes, int i,
                          pp_tune_advice *adv)
{
    pp_extract *e = &adv->runs[i];
    pp_status st = pp_tune_load_run(o, dir, &adv->analyses[i], e);
    if (st != PP_OK)
        return st;
    adv->sizes[i] = e->microbatch_size;
    if (mb_sizes) {
        if (adv->sizes[i] && adv->sizes[i] != mb_sizes[i] && o->note)
            o->note(0, "run '%s' states micro-batch size %d; --microbatch-sizes says %d (used)",
                    dir, adv->sizes[i], mb_sizes[i]);
        adv->sizes[i] = mb_sizes[i];
        e->microbatch_size = adv->sizes[i];
    }
    if (!adv->sizes[i])
        return PP_ERR(PP_ERR_INVALID, "run '%s' does not state its samples per step (config "
                                      "mark): its micro-batch size is unknown; give "
                                      "--microbatch-sizes B1,B2,...",
                      dir);
    return PP_OK;
}

pp_status pp_tune_advise_fit(const pp_tune_opts *o, const char *const *dirs, int n,
                             const int *mb_sizes, int64_t G, pp_tune_advice *adv)
{
    memset(adv, 0, sizeof *adv);
    adv->first_dir = dirs[0];
    adv->sizes = calloc((size_t)n, sizeof *adv->sizes);
    adv->analyses = calloc((size_t)n, sizeof *adv->analyses);
    adv->runs = calloc((size_t)n, sizeof *adv->runs);
    const pp_costs **costs = calloc((size_t)n, sizeof *costs);
    pp_status st = PP_OK;
    if (!adv->sizes || !adv->analyses || !adv->runs || !costs) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory");
        goto out;
    }
    adv->n_runs = n;
    for (int i = 0; i < n; i++) {
        if ((st = load_one(o, dirs[i], mb_sizes, i, adv)) != PP_OK)
            goto out;
        costs[i] = adv->runs[i].costs;
    }
    if ((st = pp_advise_fit_costs(costs, adv->sizes, n, &adv->fit)) != PP_OK)
        goto out;
    const pp_extract *e0 = &adv->runs[0];
    if (!G) {
        G = (int64_t)llround(e0->samples_per_step);
        if (G <= 0)
            G = (int64_t)adv->sizes[0] * e0->M;
        if (G <= 0)
            st = PP_ERR(PP_ERR_INVALID, "run '%s' does not state its samples per step: give "
                                        "--global-batch N",
                        dirs[0]);
    }
    adv->global_batch = G;
out:
    free(costs);
    return st;
}

void pp_tune_advise_print_fit(const pp_tune_opts *o, const pp_tune_advice *adv, FILE *out)
{
    const pp_advise_fit *fit = &adv->fit;
    fprintf(out, "micro-batch fit over %d runs at sizes", adv->n_runs);
    for (int i = 0; i < adv->n_runs; i++)
        fprintf(out, "%s %d", i ? "," : "", adv->sizes[i]);
    fprintf(out, " (%d distinct):\n", fit->n_sizes);
    fputs("assumptions: each layer's time is linear in the micro-batch size, t(b) = a + c x b\n"
          "             (a: per-micro-batch overhead, c: per-sample cost); activation and\n"
          "             transfer bytes are proportional to b; parameters do not depend on b;\n"
          "             the link model and optimizer time are the runs' means\n",
          out);
    fprintf(out, "  %-4s %-16s %10s %10s %9s %10s %10s %9s\n", "#", "layer", "fwd a ms",
            "fwd c ms", "fwd res", "bwd a ms", "bwd c ms", "bwd res");
    for (int l = 0; l < fit->L; l++) {
        const pp_advise_layer *al = &fit->layers[l];
        if (!o->verbose && fit->L > 12 && l >= 5 && l < fit->L - 3) {
            if (l == 5)
                fprintf(out, "  ... (%d more layers; -v lists all)\n", fit->L - 8);
            continue;
        }
        fprintf(out, "  %-4d %-16.16s %10.4f %10.4f %8.2f%% %10.4f %10.4f %8.2f%%\n", l,
                al->name, al->fwd.a_us * 1e-3, al->fwd.c_us * 1e-3, 100.0 * al->fwd.max_rel,
                al->bwd.a_us * 1e-3, al->bwd.c_us * 1e-3, 100.0 * al->bwd.max_rel);
    }
    if (fit->n_runs == 2)
        fputs("  residuals (largest |measured - fit| / measured): two points, the line passes "
              "through both (0 by construction)\n",
              out);
    else if (fit->worst_layer >= 0)
        fprintf(out, "  residuals: largest %.2f%% of the measured value (layer %d, %s)\n",
                100.0 * fit->worst_rel, fit->worst_layer, fit->layers[fit->worst_layer].name);
    else
        fputs("  residuals: 0\n", out);
}

/* The schedules advised: those listed (all by default) that the job can run. */
static int advised_kinds(const pp_tune_opts *o, const pp_tune_advice *adv,
                         pp_schedule_kind *kinds)
{
    const pp_extract *e0 = &adv->runs[0];
    int n_kinds = 0, given = o->n_kinds > 0;
    int n = given ? o->n_kinds : PP_TUNE_MAX_KINDS;
    for (int i = 0; i < n; i++) {
        pp_schedule_kind k = given ? o->kinds[i] : (pp_schedule_kind)i;
        if (e0->runnable & (1u << k))
            kinds[n_kinds++] = k;
        else if ((given || e0->runnable_announced) && o->note)
            o->note(0, "%s not considered: %s", pp_schedule_kind_name(k),
                    pp_tune_not_runnable(e0));
    }
    if (!e0->runnable_announced && o->note)
        o->note(0, "run '%s' does not announce the schedules it can run (config mark "
                   "schedules=, docs/nvtx-convention.md): only its own, %s, is considered",
                adv->first_dir, pp_schedule_kind_name(e0->schedule));
    return n_kinds;
}

/* Proposals for M micro-batches of b = G / M over every advised schedule and v. */
static pp_status advise_at(const pp_tune_opts *o, pp_tune_advice *adv, int *cap,
                           const pp_schedule_kind *kinds, int n_kinds, int M)
{
    const pp_partition *p0 = &adv->runs[0].partition;
    int b = (int)(adv->global_batch / M), clamped = 0;
    pp_costs *cb = NULL;
    pp_status st = pp_advise_costs_at(&adv->fit, b, &cb, &clamped);
    if (st != PP_OK)
        return st;
    adv->clamped += clamped;
    for (int k = 0; k < n_kinds; k++) {
        int vs[4];
        char why[256];
        int nv = pp_tune_v_choices(kinds[k], p0->S, p0->L, M, 1, 1, vs, why, sizeof why);
        for (int i = 0; i < nv; i++) {
            if (adv->n_cands == *cap) {
                pp_tune_proposal *g = realloc(adv->cands, sizeof *g * (size_t)*cap * 2);
                if (!g) {
                    pp_costs_destroy(cb);
                    return PP_ERR(PP_ERR_NOMEM, "out of memory");
                }
                adv->cands = g;
                *cap *= 2;
            }
            pp_tune_proposal *p = &adv->cands[adv->n_cands++];
            pp_status ps = pp_tune_propose(cb, kinds[k], p0->S, vs[i], M, b,
                                           o->memory_limit_bytes,
                                           !o->no_recompute && adv->runs[0].can_recompute,
                                           o->time_budget_s, p);
            if (ps == PP_ERR_NOMEM) {
                pp_costs_destroy(cb);
                return ps;
            }
            if (ps != PP_OK && !adv->n_failed++)
                snprintf(adv->fail_msg, sizeof adv->fail_msg, "%s", p->why);
            if (o->note)
                o->note(1, "M = %d, %s v = %d: %s", M, pp_schedule_kind_name(kinds[k]), vs[i],
                        ps == PP_OK ? "done" : p->why);
        }
    }
    pp_costs_destroy(cb);
    return PP_OK;
}

static int cmp_proposal(const void *x, const void *y)
{
    const pp_tune_proposal *p = x, *q = y;
    if (p->ok != q->ok)
        return q->ok - p->ok;
    if (!p->ok)
        return 0;
    return (p->step_ns > q->step_ns) - (p->step_ns < q->step_ns);
}

pp_status pp_tune_advise_search(const pp_tune_opts *o, pp_tune_advice *adv)
{
    pp_schedule_kind kinds[PP_TUNE_MAX_KINDS];
    int n_kinds = advised_kinds(o, adv, kinds);
    int cap = 64;
    adv->cands = calloc((size_t)cap, sizeof *adv->cands);
    if (!adv->cands)
        return PP_ERR(PP_ERR_NOMEM, "out of memory");
    int64_t G = adv->global_batch;
    for (int64_t M = 1; M <= G; M++) {
        if (G % M)
            continue;
        pp_status st = advise_at(o, adv, &cap, kinds, n_kinds, (int)M);
        if (st != PP_OK)
            return st;
    }
    qsort(adv->cands, (size_t)adv->n_cands, sizeof *adv->cands, cmp_proposal);
    if (!adv->n_cands || !adv->cands[0].ok)
        return PP_ERR(PP_ERR_INVALID, "no micro-batch count and schedule fits: %s",
                      adv->fail_msg[0] ? adv->fail_msg : "no valid schedule shape");
    /* the first run's own choice, predicted by the fit, for the speedup column */
    const pp_extract *e0 = &adv->runs[0];
    pp_costs *cb = NULL;
    int b0 = (int)(G / e0->M);
    if (G % e0->M == 0 && pp_advise_costs_at(&adv->fit, b0, &cb, NULL) == PP_OK) {
        pp_sim_result r;
        if (pp_sim_file(e0->schedule, &e0->partition, e0->M, cb, NULL, &r) == PP_OK) {
            adv->ref_ns = r.step_ns;
            pp_sim_result_free(&r);
        }
    }
    pp_costs_destroy(cb);
    return PP_OK;
}

/* The ranking: the first 20 valid combinations (all with -v), then what was ruled out. */
static void print_ranking(const pp_tune_opts *o, const pp_tune_advice *adv, FILE *out)
{
    const pp_extract *e0 = &adv->runs[0];
    int64_t G = adv->global_batch;
    fprintf(out, "\nglobal batch %lld samples, %d stages%s; every micro-batch count M dividing it "
                 "(micro-batch size b = batch / M):\n",
            (long long)G, e0->partition.S, o->memory_limit_bytes ? ", within the memory limit" : "");
    if (adv->ref_ns > 0)
        fprintf(out, "reference: run 1's layout (%s, M = %d) predicted at %.3f ms by the fit\n",
                pp_schedule_kind_name(e0->schedule), e0->M, adv->ref_ns * 1e-6);
    fprintf(out, "  %-4s %5s %5s %-12s %2s %12s %8s %12s %9s  %-18s %s\n", "rank", "M", "b",
            "schedule", "v", "step ms", "bubble", "samples/s", "speedup", "search",
            "boundaries");
    int shown = 0, n_out = 0;
    for (int i = 0; i < adv->n_cands; i++) {
        const pp_tune_proposal *p = &adv->cands[i];
        if (!p->ok)
            continue;
        if (!o->verbose && shown >= 20) {
            fprintf(out, "  ... (-v lists all %d)\n", adv->n_cands);
            break;
        }
        char w[64], bnd[2048], sp[32] = "-";
        pp_partition_format(&p->part, bnd, sizeof bnd);
        if (adv->ref_ns > 0)
            snprintf(sp, sizeof sp, "%.3fx", adv->ref_ns / p->step_ns);
        fprintf(out, "  %-4d %5d %5d %-12s %2d %12.3f %7.1f%% %12.1f %9s  %-18s %s\n", ++shown,
                p->M, p->b, pp_schedule_kind_name(p->kind), p->v, p->step_ns * 1e-6,
                100.0 * p->bubble, (double)G / (p->step_ns * 1e-9), sp,
                pp_tune_search_word(p, w, sizeof w), bnd);
    }
    for (int i = 0; i < adv->n_cands; i++)
        n_out += !adv->cands[i].ok;
    if (n_out)
        fprintf(out, "  %d combination(s) ruled out (e.g. %s)\n", n_out, adv->fail_msg);
    if (adv->clamped)
        fprintf(out, "  note: %d fitted time(s) below 0 clamped to 0 (extrapolating far from the "
                     "measured sizes)\n",
                adv->clamped);
}

void pp_tune_advise_print(const pp_tune_opts *o, const pp_tune_advice *adv, FILE *out)
{
    print_ranking(o, adv, out);
    const pp_tune_proposal *b = &adv->cands[0];
    fprintf(out, "\nbest: M = %d micro-batches of %d, %s", b->M, b->b,
            pp_schedule_kind_name(b->kind));
    if (b->v > 1)
        fprintf(out, " v = %d", b->v);
    char bnd[2048];
    pp_partition_format(&b->part, bnd, sizeof bnd);
    fprintf(out, ", boundaries %s: %.3f ms predicted", bnd, b->step_ns * 1e-6);
    if (adv->ref_ns > 0)
        fprintf(out, " (%.3fx vs run 1's layout)", adv->ref_ns / b->step_ns);
    fputc('\n', out);
    pp_costs *cb = NULL;
    if (pp_advise_costs_at(&adv->fit, b->b, &cb, NULL) == PP_OK) {
        if (o->formula) {
            fprintf(out, "\nformula (costs at b = %d: t = a + c x %d per layer):\n", b->b, b->b);
            pp_tune_print_stage_sums(cb, &b->part, b->M, out);
            pp_tune_print_sim_terms(cb, &b->part, b->kind, b->M, adv->runs[0].no_barrier, out);
            if (adv->runs[0].has_param_bytes)
                pp_tune_print_memory_terms(cb, &b->part, b->kind, b->M, b->recompute,
                                           o->memory_limit_bytes, out);
            fputc('\n', out);
        }
        if (!adv->runs[0].stage_level) /* its "layers" are stages: no split point to give */
            pp_tune_print_framework_forms(cb, &b->part, out);
    }
    pp_costs_destroy(cb);
}
