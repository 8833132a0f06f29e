/* tune_explain.c: what the tuning driver prints about one run (pp_tune.h): the self-check and the
 * current/proposed comparison, the candidates, the --formula view (the arithmetic behind every
 * proposed number: stage sums, the simulator's terms, the memory model), the framework forms, and
 * the --verify report. Called by pprof-tune and tune_advise.c / tune_auto.c. */
#include "tune_internal.h"

#include "pp_sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void pp_tune_fmt_bytes(uint64_t b, char *buf, size_t cap)
{
    if (b >= (UINT64_C(1) << 30))
        snprintf(buf, cap, "%.2f GiB", (double)b / 1073741824.0);
    else if (b >= (UINT64_C(1) << 20))
        snprintf(buf, cap, "%.1f MiB", (double)b / 1048576.0);
    else if (b >= 1024)
        snprintf(buf, cap, "%.1f KiB", (double)b / 1024.0);
    else
        snprintf(buf, cap, "%llu B", (unsigned long long)b);
}

const char *pp_tune_search_word(const pp_tune_proposal *p, char *buf, size_t cap)
{
    if (p->exact)
        snprintf(buf, cap, "optimal");
    else
        snprintf(buf, cap, "gap <= %.2f%%",
                 p->lower_ns > 0 ? 100.0 * (p->step_ns / p->lower_ns - 1) : 100.0);
    return buf;
}

/* Whether a layer name reads as a module FQN with an index ("layers.4", "model.layers.12"):
 * identifiers joined by dots, the last part digits. Only such names are printed as they are
 * (they come from a trace: nothing else is trusted into a Python literal). */
static int is_module_fqn(const char *n)
{
    size_t len = strlen(n);
    if (len == 0 || len > 60)
        return 0;
    const char *dot = strrchr(n, '.');
    if (!dot || !dot[1])
        return 0;
    for (const char *p = dot + 1; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    int start = 1; /* at the start of a dotted part */
    for (const char *p = n; p < dot; p++) {
        int alpha = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_';
        int digit = *p >= '0' && *p <= '9';
        if (*p == '.') {
            if (start)
                return 0;
            start = 1;
        } else if (alpha || (digit && !start)) {
            start = 0;
        } else if (!digit) {
            return 0;
        } else {
            start = 0; /* "layers.3.attn": an index part inside the path */
        }
    }
    return !start;
}

/* The FQN of layer l: its name when that is one, else layers.<l> (docs/torch.md). */
static void layer_fqn(const pp_costs *c, int l, char *buf, size_t cap)
{
    if (is_module_fqn(c->layers[l].name))
        snprintf(buf, cap, "%s", c->layers[l].name);
    else
        snprintf(buf, cap, "layers.%d", l);
}

/* The length of the class part of a torch module event's name ("TransformerBlock" of
 * "TransformerBlock_3": the profiler numbers a class's instances per process), 0 when the name
 * has no "_<digits>" suffix. */
static size_t torch_class_len(const char *n)
{
    const char *u = strrchr(n, '_');
    if (!u || u == n || !u[1])
        return 0;
    for (const char *p = u + 1; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return (size_t)(u - n);
}

/* Whether layers a and b are of one torch class. */
static int same_class(const pp_costs *c, int a, int b)
{
    size_t la = torch_class_len(c->layers[a].name), lb = torch_class_len(c->layers[b].name);
    return la && la == lb && strncmp(c->layers[a].name, c->layers[b].name, la) == 0;
}

/* The repeated block of a torch job whose layers are module events ("Block_0", ...): the layer
 * of the class most layers have, -1 when every layer is of that class (layer i is then block i)
 * or no class repeats. Others (an embedding before the blocks, a norm and a head after them,
 * as the modules directly inside torchtitan's stage modules) are no entries of the 'layers'
 * list that split points index. */
static int torch_block_class(const pp_costs *c, int L)
{
    int best = -1, best_n = 1;
    for (int l = 0; l < L; l++) {
        if (!torch_class_len(c->layers[l].name) || (best >= 0 && same_class(c, best, l)))
            continue; /* no class, or the one counted */
        int n = 0;
        for (int k = 0; k < L; k++)
            n += same_class(c, l, k);
        if (n > best_n)
            best = l, best_n = n;
    }
    return best_n < L ? best : -1;
}

/* torchtitan's pipeline_parallel_split_points and torch.distributed.pipelining's split_spec:
 * the first module of every piece but the first, in piece order (docs/torch.md). Names that are
 * no module paths are written layers.<i>, i counting the model's repeated blocks (all layers when
 * every one is a block); a piece that starts at another layer cannot be written so. */
static void print_torch_forms(const pp_costs *c, const pp_partition *part, FILE *out)
{
    int named = 1;
    for (int l = 0; l < part->L; l++)
        named &= is_module_fqn(c->layers[l].name);
    int block = named ? -1 : torch_block_class(c, part->L);
    char fqn[80];
    int odd = -1; /* the first piece that starts at a layer other than a block */
    for (int form = 0; form < 2; form++) {
        fputs(form ? "torch:        pipeline(model, mb_args, split_spec={"
                   : "torchtitan:   pipeline_parallel_split_points = [",
              out);
        for (int p = 1; p < part->P; p++) {
            int b = part->bounds[p];
            if (block >= 0) {
                int i = 0;
                for (int l = 0; l < b; l++)
                    i += same_class(c, block, l);
                snprintf(fqn, sizeof fqn, "layers.%d", i);
                if (!same_class(c, block, b) && odd < 0)
                    odd = p;
            } else {
                layer_fqn(c, b, fqn, sizeof fqn);
            }
            fprintf(out, form ? "%s\"%s\": SplitPoint.BEGINNING" : "%s\"%s\"", p > 1 ? ", " : "",
                    fqn);
        }
        fputs(form ? "})\n" : "]\n", out);
    }
    /* torchtitan's module_fqns_per_model_part, which places the modules around the blocks
     * too: printed for its own models' shape (one module before the blocks, two after them:
     * tok_embeddings, norm, output), under those names */
    int first = -1, last = -1, n_blocks = 0;
    for (int l = 0; block >= 0 && l < part->L; l++)
        if (same_class(c, block, l)) {
            first = first < 0 ? l : first;
            last = l;
            n_blocks++;
        }
    int titan = block >= 0 && first == 1 && last == part->L - 3 && n_blocks == last - first + 1;
    if (titan) {
        fputs("torchtitan:   module_fqns_per_model_part = [", out);
        int i = 0;
        for (int p = 0; p < part->P; p++) {
            fputs(p ? "], [" : "[", out);
            for (int l = part->bounds[p]; l < part->bounds[p + 1]; l++) {
                const char *sep = l > part->bounds[p] ? ", " : "";
                if (same_class(c, block, l))
                    fprintf(out, "%s\"layers.%d\"", sep, i++);
                else
                    fprintf(out, "%s\"%s\"", sep,
                            l == 0 ? "tok_embeddings" : l == part->L - 1 ? "output" : "norm");
            }
        }
        fputs("]]\n", out);
    }
    if (block >= 0) {
        size_t k = torch_class_len(c->layers[block].name);
        fprintf(out,
                "              (the layers' names are no module paths: layers.i is the i-th "
                "%.*s, the\n"
                "              model's blocks in one list 'layers' in order; the other layers "
                "are not\n"
                "              counted; docs/torch.md)\n",
                (int)k, c->layers[block].name);
        if (titan)
            fputs("              (module_fqns_per_model_part names the modules around the "
                  "blocks as torchtitan's\n"
                  "              models do: tok_embeddings, norm, output; use your model's "
                  "names if they differ)\n",
                  out);
        if (odd >= 0)
            fprintf(out,
                    "              (piece %d starts at layer %d, %s, which is not a %.*s: "
                    "split points\n"
                    "              cannot start a piece there, so they do not give this plan%s)\n",
                    odd, part->bounds[odd], c->layers[part->bounds[odd]].name, (int)k,
                    c->layers[block].name, titan ? "; module_fqns_per_model_part does" : "");
    } else if (!named) {
        fputs("              (the layers' names are no module paths: layer i is written "
              "layers.i, the\n"
              "              model's blocks in one list 'layers' in order; docs/torch.md)\n",
              out);
    }
}

void pp_tune_print_framework_forms(const pp_costs *c, const pp_partition *part, FILE *out)
{
    char buf[4096];
    pp_advise_megatron_layout(c, part, buf, sizeof buf);
    fprintf(out, "Megatron-LM:  --pipeline-model-parallel-layout \"%s\"\n", buf);
    if (part->v == 1) {
        pp_advise_deepspeed_parts(part, buf, sizeof buf);
        fprintf(out, "DeepSpeed:    PipelineModule parts = %s\n"
                     "              (partition_method takes 'uniform', 'parameters' or "
                     "'type:regex'; exact\n"
                     "              boundaries need a custom partition that sets these parts)\n",
                buf);
    } else {
        fprintf(out, "DeepSpeed:    no interleaved schedule (one chunk per stage): not "
                     "applicable with v = %d\n",
                part->v);
    }
    print_torch_forms(c, part, out);
}

static void print_memory_row(const char *label, const uint64_t *mem, int S, uint64_t limit,
                             FILE *out)
{
    fprintf(out, "%-16s", label);
    for (int s = 0; s < S; s++) {
        char b[32];
        pp_tune_fmt_bytes(mem[s], b, sizeof b);
        fprintf(out, "%s%s%s", s ? ", " : "", b, limit && mem[s] > limit ? " (over)" : "");
    }
    fputc('\n', out);
}

/* ---- --formula ------------------------------------------------------------------------- */

/* "a + b + c = s" for the per-layer values of layers [lo, hi); long sums elided. */
static void print_sum(const pp_costs *c, int lo, int hi, int bwd, FILE *out)
{
    double sum = 0;
    int n = hi - lo;
    for (int l = lo; l < hi; l++) {
        double t = (bwd ? c->layers[l].bwd_us : c->layers[l].fwd_us) * 1e-3;
        sum += t;
        if (n <= 8 || l < lo + 3 || l >= hi - 2)
            fprintf(out, "%s%.3f", l > lo ? " + " : "", t);
        else if (l == lo + 3)
            fprintf(out, " + ... (%d more)", n - 5);
    }
    fprintf(out, " = %.3f ms", sum);
}

void pp_tune_print_stage_sums(const pp_costs *c, const pp_partition *part, int M, FILE *out)
{
    for (int p = 0; p < part->P; p++) {
        int lo = part->bounds[p], hi = part->bounds[p + 1];
        if (part->v > 1)
            fprintf(out, "    piece %d (stage %d, chunk %d), ", p, p % part->S, p / part->S);
        else
            fprintf(out, "    stage %d, ", p);
        if (hi - lo == 1)
            fprintf(out, "layer %d (%s)\n", lo, c->layers[lo].name);
        else
            fprintf(out, "layers %d-%d (%s .. %s)\n", lo, hi - 1, c->layers[lo].name,
                    c->layers[hi - 1].name);
        double f = 0, b = 0;
        for (int l = lo; l < hi; l++) {
            f += c->layers[l].fwd_us * 1e-3;
            b += c->layers[l].bwd_us * 1e-3;
        }
        /* each op then the stage's own time before its next (op_gap_us) */
        double g = c->op_gap_us * 1e-3;
        fputs("      fwd = ", out);
        print_sum(c, lo, hi, 0, out);
        if (g > 0)
            fprintf(out, ", + %.3f between ops = %.3f ms", g, f + g);
        fputs("\n      bwd = ", out);
        print_sum(c, lo, hi, 1, out);
        if (g > 0)
            fprintf(out, ", + %.3f between ops = %.3f ms", g, b + g);
        f += g;
        b += g;
        fprintf(out, "\n      busy per step = M x (fwd + bwd) = %d x %.3f = %.3f ms\n", M, f + b,
                M * (f + b));
    }
}

void pp_tune_print_sim_terms(const pp_costs *c, const pp_partition *part, pp_schedule_kind kind,
                             int M, int no_barrier, FILE *out)
{
    pp_sim_result r;
    if (pp_sim_file(kind, part, M, c, NULL, &r) != PP_OK) {
        fprintf(out, "    (simulation failed: %s)\n", pp_error_message());
        return;
    }
    /* the optimizer step's named terms (docs/cost-file.md), per stage */
    for (int s = 0; s < part->S; s++) {
        uint64_t bytes = pp_costs_stage_param_bytes(c, part, s);
        fprintf(out, "    stage %d optimizer step = optimizer %.3f + %.3f per MB x %.3f MB + "
                     "%s %.3f + per-step fixed %.3f = %.3f ms\n",
                s, c->optimizer_us * 1e-3, c->optimizer_us_per_MB * 1e-3, (double)bytes * 1e-6,
                no_barrier ? "time before it" : "gradient norm and barrier",
                c->grad_norm_us * 1e-3, c->step_fixed_us * 1e-3,
                pp_costs_opt_us(c, bytes) * 1e-3);
        if (pp_costs_has_dp_allreduce(c))
            fprintf(out, "    stage %d data-parallel all-reduce before the barrier = %.3f + %.3f "
                         "per MB x %.3f MB = %.3f ms\n",
                    s, c->dp_allreduce_us * 1e-3, c->dp_allreduce_us_per_MB * 1e-3,
                    (double)bytes * 1e-6, pp_costs_dp_allreduce_us(c, bytes) * 1e-3);
    }
    if (c->send_act_us > 0 || c->send_grad_us > 0)
        fprintf(out, "    each send on its sender = %.3f ms (activations), %.3f ms (gradients), "
                     "the transfer counted from its start\n",
                c->send_act_us * 1e-3, c->send_grad_us * 1e-3);
    if (c->recv_act_us > 0 || c->recv_grad_us > 0)
        fprintf(out, "    each receive on its receiver = %.3f ms (activations), %.3f ms "
                     "(gradients) from its start, or until its message arrives if later\n",
                c->recv_act_us * 1e-3, c->recv_grad_us * 1e-3);
    fprintf(out, "    step = replay of the %s instruction lists (S = %d, M = %d, v = %d) with "
                 "these costs = %.3f ms\n",
            pp_schedule_kind_name(kind), part->S, M, part->v, r.step_ns * 1e-6);
    double idle = 0;
    fputs("    busy per stage (incl. optimizer) =", out);
    for (int s = 0; s < r.S; s++)
        fprintf(out, "%s %.3f", s ? "," : "", r.busy_ns[s] * 1e-6);
    fputs(" ms\n    idle = step - busy =", out);
    for (int s = 0; s < r.S; s++) {
        fprintf(out, "%s %.3f", s ? "," : "", r.idle_ns[s] * 1e-6);
        idle += r.idle_ns[s];
    }
    fprintf(out, " ms\n    bubble = sum idle / (S x step) = %.3f / (%d x %.3f) = %.1f%%\n",
            idle * 1e-6, r.S, r.step_ns * 1e-6, 100.0 * r.bubble_ratio);
    pp_sim_result_free(&r);
}

/* The memory model term by term (pp_stage_memory_model, what the limit judges and what
 * pptrain's accounting measures; docs/rebalancer.md "Memory model"), with the layers of `rc`
 * recomputed (NULL: none). */
void pp_tune_print_memory_terms(const pp_costs *c, const pp_partition *part,
                                pp_schedule_kind kind, int M, const uint8_t *rc, uint64_t limit,
                                FILE *out)
{
    pp_schedule *sc = NULL;
    if (pp_schedule_create(kind, part->S, M, part->v, &sc) != PP_OK) {
        fputs("    (memory model unavailable)\n", out);
        return;
    }
    fputs("    memory(stage) = params + grads + optimizer (2 moments) + activations at the peak "
          "(kept x in flight + recompute workspaces) + transport (docs/rebalancer.md)\n", out);
    for (int s = 0; s < part->S; s++) {
        pp_stage_memory m;
        if (pp_stage_memory_model(c, part, sc, s, rc, &m) != PP_OK)
            break;
        int recomputed = 0;
        for (int j = s; rc && j < part->P && !recomputed; j += part->S)
            recomputed = rc[part->bounds[j]] != 0;
        char pb[32], kb[32], wb[32], tb[32], tot[32];
        pp_tune_fmt_bytes(m.params_bytes, pb, sizeof pb);
        pp_tune_fmt_bytes(m.kept_bytes, kb, sizeof kb);
        pp_tune_fmt_bytes(m.workspace_bytes, wb, sizeof wb);
        pp_tune_fmt_bytes(m.transport_bytes, tb, sizeof tb);
        pp_tune_fmt_bytes(m.total_bytes, tot, sizeof tot);
        fprintf(out, "    stage %d: %s + %s + 2 x %s + (%s kept, %d in flight", s, pb, pb, pb, kb,
                m.peak_inflight);
        if (m.workspace_bytes)
            fprintf(out, ", + %s workspace", wb);
        fprintf(out, ") + %s = %s%s%s\n", tb, tot, recomputed ? "  recomputed" : "",
                limit && m.total_bytes > limit ? "  > limit" : "");
    }
    if (limit) {
        char lb[32];
        pp_tune_fmt_bytes(limit, lb, sizeof lb);
        fprintf(out, "    limit per stage: %s (%llu bytes)\n", lb, (unsigned long long)limit);
    }
    pp_schedule_destroy(sc);
}

/* ---- one run's comparison -------------------------------------------------------------- */

void pp_tune_warn_model_error(double err_pct, int S, FILE *out)
{
    if (fabs(err_pct) <= 10)
        return;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(out, "  warning: the model is off by %+.1f%%: predictions are %s. ", err_pct,
            "less reliable for this run");
    if (cpus > 0 && cpus < S)
        fprintf(out, "%d stages share %ld CPUs here, so stages do not run concurrently\n"
                     "  as the simulator assumes (the measured step includes that contention)\n",
                S, cpus);
    else
        fputs("Something outside the layer ranges (contention, launch gaps, transfers\n"
              "  the link model misses) takes time\n",
              out);
}

/* The run, the model's self-check, and the current layout against the proposal. */
static void print_comparison(const pp_tune_opts *o, const char *dir, const pp_extract *e,
                             const pp_tune_search *s, FILE *out)
{
    const pp_partition *cur = &e->partition;
    const pp_tune_proposal *b = &s->cands[s->best];
    char cb[2048], pbnd[2048], w[64], cs[64];
    pp_partition_format(cur, cb, sizeof cb);
    pp_partition_format(&b->part, pbnd, sizeof pbnd);
    const pp_sim_dist_result *cd = &s->current_dist, *bd = &b->dist;
    double err = 100.0 * (s->measured_ns - cd->median_ns) / cd->median_ns;
    double err95 = 100.0 * (s->measured_p95_ns - cd->p95_ns) / cd->p95_ns;
    fprintf(out, "run %s: %d layers, %d stages, %s, M = %d", dir, cur->L, cur->S,
            pp_schedule_kind_name(e->schedule), e->M);
    if (e->microbatch_size)
        fprintf(out, ", micro-batch size %d", e->microbatch_size);
    fputc('\n', out);
    fprintf(out, "self-check: the run's own layout measured %.3f ms median, the model predicts "
                 "%.3f ms (error %+.2f%%)\n"
                 "            p95 measured %.3f ms, predicted %.3f ms (error %+.2f%%)\n",
            s->measured_ns * 1e-6, cd->median_ns * 1e-6, err, s->measured_p95_ns * 1e-6,
            cd->p95_ns * 1e-6, err95);
    if (e->regimes.found) {
        /* the median is the mixture's (docs/metrics.md "Regimes"): the prediction against each */
        const pp_aregimes *g = &e->regimes;
        fprintf(out, "            two speed regimes (%s):\n"
                     "            %zu at %.3f ms (%+.2f%% from the model), %zu at %.3f ms "
                     "(%+.2f%%)\n",
                e->torch_trace ? "the machine, or the torch profiler's own cost, changed"
                               : "the machine changed speed",
                g->n_fast, g->fast_median_ns * 1e-6,
                100.0 * (g->fast_median_ns - cd->median_ns) / cd->median_ns, g->n_slow,
                g->slow_median_ns * 1e-6,
                100.0 * (g->slow_median_ns - cd->median_ns) / cd->median_ns);
    }
    pp_tune_warn_model_error(err, cur->S, out);
    if (e->layers_unscaled)
        fprintf(out, "  warning: %d op(s) of this run are not the sum of their layer ranges (left "
                     "as measured, -v):\n  those layers' costs, and a layout that moves them, are "
                     "less reliable (nested ranges, or\n  ranges that caught up after the host "
                     "stole the CPU)\n",
                e->layers_unscaled);
    fputc('\n', out);
    fprintf(out, "%-16s%-28s%s\n", "", "current", "proposed");
    fprintf(out, "%-16s%-28s%s\n", "schedule", pp_schedule_kind_name(e->schedule),
            pp_schedule_kind_name(b->kind));
    fprintf(out, "%-16s%-28d%d\n", "virtual stages", cur->v, b->v);
    fprintf(out, "%-16s%-28d%d\n", "micro-batches", e->M, b->M);
    fprintf(out, "%-16s%-28s%s\n", "boundaries", cb, pbnd);
    if (e->recompute || b->recomputed_stages) {
        char rc[256] = "none";
        if (e->recompute)
            pp_recompute_format(cur, e->recompute, rc, sizeof rc);
        fprintf(out, "%-16s%-28s%s\n", "recompute", rc, b->recompute_text);
    }
    snprintf(cs, sizeof cs, "%.3f", s->current_pred_ns * 1e-6);
    fprintf(out, "%-16s%-28s%.3f\n", "noise-free ms", cs, b->step_ns * 1e-6);
    snprintf(cs, sizeof cs, "%.3f (measured %.3f)", cd->median_ns * 1e-6, s->measured_ns * 1e-6);
    fprintf(out, "%-16s%-28s%.3f\n", "step median ms", cs, bd->median_ns * 1e-6);
    snprintf(cs, sizeof cs, "%.3f (measured %.3f)", cd->p95_ns * 1e-6, s->measured_p95_ns * 1e-6);
    fprintf(out, "%-16s%-28s%.3f\n", "step p95 ms", cs, bd->p95_ns * 1e-6);
    char rb[64];
    snprintf(cs, sizeof cs, "%d (+-%.2f%%, +-%.2f%%)", cd->n, 100 * cd->median_err,
             100 * cd->p95_err);
    snprintf(rb, sizeof rb, "%d (+-%.2f%%, +-%.2f%%)", bd->n, 100 * bd->median_err,
             100 * bd->p95_err);
    fprintf(out, "%-16s%-28s%s\n", "replays", cs, rb);
    snprintf(cs, sizeof cs, "%.1f%% (measured %.1f%%)", 100.0 * s->current_bubble,
             100.0 * e->measured_bubble);
    fprintf(out, "%-16s%-28s%.1f%%\n", "bubble", cs, 100.0 * b->bubble);
    snprintf(cs, sizeof cs, "%.3fx", 1.0);
    fprintf(out, "%-16s%-28s%.3fx predicted (%.3fx vs measured)\n", "speedup", cs,
            cd->median_ns / bd->median_ns, s->measured_ns / bd->median_ns);
    fprintf(out, "%-16s%-28s%s (lower bound %.3f ms)\n", "search", "-",
            pp_tune_search_word(b, w, sizeof w), b->lower_ns * 1e-6);
    if (e->has_param_bytes) {
        uint64_t *mem = calloc((size_t)cur->S, sizeof *mem);
        if (mem && pp_advise_stage_memory(e->costs, cur, e->schedule, e->M, e->recompute, mem,
                                          NULL) == PP_OK) {
            print_memory_row("memory current", mem, cur->S, o->memory_limit_bytes, out);
            print_memory_row("memory proposed", b->mem, cur->S, o->memory_limit_bytes, out);
        }
        free(mem);
    } else {
        fprintf(out, "%-16s%s\n", "memory", "unknown (the run has no parameter sizes)");
    }
}

/* Every candidate evaluated and every schedule skipped (when there is more than one, or -v). */
static void print_candidates(const pp_tune_opts *o, const pp_tune_search *s, FILE *out)
{
    char w[64];
    if (!(s->n_cands > 1 || s->n_skipped || o->verbose))
        return;
    fprintf(out, "\ncandidates (%s):\n", o->memory_limit_bytes ? "within the memory limit"
                                                             : "no memory limit");
    fprintf(out, "  %-12s %2s %12s %12s %8s %9s  %s\n", "schedule", "v", "noise-free ms",
            "median ms", "bubble", "speedup", "search / why not");
    for (int i = 0; i < s->n_cands; i++) {
        const pp_tune_proposal *p = &s->cands[i];
        if (p->ok)
            fprintf(out, "  %-12s %2d %12.3f %12.3f %7.1f%% %8.3fx  %s, %.2f s%s\n",
                    pp_schedule_kind_name(p->kind), p->v, p->step_ns * 1e-6,
                    p->dist.median_ns * 1e-6, 100.0 * p->bubble,
                    s->current_dist.median_ns / p->dist.median_ns,
                    pp_tune_search_word(p, w, sizeof w), p->seconds,
                    i == s->best ? "  <- best" : "");
        else
            fprintf(out, "  %-12s %2d %12s %12s %8s %9s  %s\n", pp_schedule_kind_name(p->kind),
                    p->v, "-", "-", "-", "-", p->why);
    }
    for (int i = 0; i < s->n_skipped; i++)
        fprintf(out, "  skipped %s\n", s->skipped[i]);
}

/* --formula: the Monte Carlo replays behind a median and p95. */
static void print_dist_terms(const pp_sim_dist_result *d, FILE *out)
{
    fprintf(out, "    distribution = %d replays, each compute op's cost x a sampled factor "
                 "(docs/sim-dist.md):\n"
                 "      median %.3f ms (95%% CI %.3f .. %.3f), p95 %.3f ms (%.3f .. %.3f), mean "
                 "%.3f ms; noise-free %.3f ms\n",
            d->n, d->median_ns * 1e-6, d->median_lo_ns * 1e-6, d->median_hi_ns * 1e-6,
            d->p95_ns * 1e-6, d->p95_lo_ns * 1e-6, d->p95_hi_ns * 1e-6, d->mean_ns * 1e-6,
            d->noise_free_ns * 1e-6);
}

/* --formula: where the factors come from. */
static void print_variation(const pp_tune_opts *o, const pp_extract *e, FILE *out)
{
    if (o->jitter) {
        char spec[PP_JITTER_MAX_SPEC + 32];
        pp_jitter_format(o->jitter, spec, sizeof spec);
        fprintf(out, "  variation: --jitter %s, independent per op (pp_jitter_factor)\n", spec);
        return;
    }
    const pp_sim_noise *n = &e->noise;
    if (e->layer_p95_ratio) {
        int L = e->costs->n_layers;
        fputs("  layers' p95 / median (fwd, bwd; reported, the replays use the stages'):", out);
        for (int l = 0; l < L; l++) {
            if (L > 12 && l == 6)
                fprintf(out, " ... (%d more)", L - 9);
            if (L > 12 && l >= 6 && l < L - 3)
                continue;
            fprintf(out, " %d %.3f, %.3f;", l, e->layer_p95_ratio[l * 2],
                    e->layer_p95_ratio[l * 2 + 1]);
        }
        fputc('\n', out);
    }
    fprintf(out, "  variation (the run's own): op = cost x C x D_s x e; C per step, log-sd %.4f; "
                 "D_s per stage and step, log-sd",
            n->sigma_step);
    for (int s = 0; s < n->S; s++)
        fprintf(out, "%s %.4f", s ? "," : "", n->sigma_stage[s]);
    fprintf(out, " (from %d steps; %.0f%% of the variance per step)\n", n->n_steps,
            100 * n->common_share);
    if (n->n_step_f > 0)
        fprintf(out, "    C x D_s of a replay: one of %d measured steps for every stage, each "
                     "stage's busy time / its median with its log scaled to those log-sds\n",
                n->n_step_f);
    else if (n->sigma_step > 0 || n->n_steps > 0)
        fputs("    C x D_s of a replay: lognormal with those log-sds\n", out);
    if (n->n_step_f > 0 && n->level && n->busy_median_ns) {
        fputs("    level of C x D_s per stage (its busy time replayed to its measured median, ms):",
              out);
        for (int s = 0; s < n->S; s++)
            fprintf(out, "%s x%.4f (%.3f)", s ? "," : "", n->level[s],
                    n->busy_median_ns[s] * 1e-6);
        fputc('\n', out);
    }
    static const char *const names[PP_SIM_NOISE_KINDS] = {"fwd", "bwd", "bwd_input",
                                                          "bwd_weight", "opt"};
    for (int s = 0; s < n->S; s++) {
        fprintf(out, "    stage %d: factors / median p05 .. p95, log-sd (robust), kept:", s);
        for (int k = 0; k < PP_SIM_NOISE_KINDS; k++) {
            const pp_sim_noise_kind *kd = &n->kind[s * PP_SIM_NOISE_KINDS + k];
            if (kd->n)
                fprintf(out, " %s %.3f .. %.3f, %.4f (%.4f), %u;", names[k], kd->p05, kd->p95,
                        kd->sigma_log, kd->sigma_robust, kd->n);
        }
        fputc('\n', out);
    }
    if (n->op_scale < 1)
        fprintf(out, "    e: the kept factors' logs x %.3f: "
                     "the run's steps spread less than replays with the measured factors "
                     "(extraction notes)\n",
                n->op_scale);
    if ((n->xfer[0].n || n->xfer[1].n) && !n->xfer_fixed) {
        fputs("    transfers: each timed message / its link's median, p05 .. p95, messages:", out);
        for (int g = 0; g < 2; g++)
            if (n->xfer[g].n)
                fprintf(out, " %s %.3f .. %.3f, %u;", g ? "grad" : "act", n->xfer[g].p05,
                        n->xfer[g].p95, n->xfer[g].n);
        fputc('\n', out);
    }
    if ((n->own[0].n || n->own[1].n || n->own[2].n || n->own[3].n) && !n->own_fixed) {
        static const char *const name[4] = {"send act", "send grad", "receive act",
                                            "receive grad"};
        fputs("    own times: each send's and receive's / its link's median, p05 .. p95, "
              "samples:", out);
        for (int k = 0; k < 4; k++)
            if (n->own[k].n)
                fprintf(out, " %s %.3f .. %.3f, %u;", name[k], n->own[k].p05, n->own[k].p95,
                        n->own[k].n);
        fputc('\n', out);
    }
}

/* --formula: the arithmetic of the current and the proposed layout. */
static void print_formula(const pp_tune_opts *o, const pp_extract *e, const pp_tune_search *s,
                          FILE *out)
{
    const pp_costs *c = e->costs;
    const pp_partition *cur = &e->partition;
    const pp_tune_proposal *b = &s->cands[s->best];
    uint64_t limit = o->memory_limit_bytes;
    fputs("formula (times in ms per micro-batch unless said otherwise):\n", out);
    const pp_costs *rcur = pp_extract_run_costs(e);
    fputs("  current layout:\n", out);
    pp_tune_print_stage_sums(rcur, cur, e->M, out);
    pp_tune_print_sim_terms(rcur, cur, e->schedule, e->M, e->no_barrier, out);
    print_dist_terms(&s->current_dist, out);
    const pp_costs *bc = b->rc_costs ? b->rc_costs : c;
    fprintf(out, "  proposed layout%s%s:\n", b->recomputed_stages ? ", recompute " : "",
            b->recomputed_stages ? b->recompute_text : "");
    pp_tune_print_stage_sums(bc, &b->part, b->M, out);
    pp_tune_print_sim_terms(bc, &b->part, b->kind, b->M, e->no_barrier, out);
    print_dist_terms(&b->dist, out);
    fprintf(out, "    lower bound = %.3f ms (proven: no partition%s simulates faster); gap "
                 "= step / bound - 1 = %.4f%%%s\n",
            b->lower_ns * 1e-6, limit ? " within the limit" : "",
            100.0 * (b->step_ns / b->lower_ns - 1),
            b->exact ? " (search finished: optimal up to 1e-9 ties)" : "");
    fprintf(out, "    speedup = current predicted median / proposed = %.3f / %.3f = %.3fx\n",
            s->current_dist.median_ns * 1e-6, b->dist.median_ns * 1e-6,
            s->current_dist.median_ns / b->dist.median_ns);
    print_variation(o, e, out);
    if (c->p2p_GBps > 0)
        fprintf(out, "  transfers: latency %.1f us + bytes / %.3f GB/s per message\n",
                c->p2p_latency_us, c->p2p_GBps);
    else
        fprintf(out, "  transfers: latency %.1f us per message, no bandwidth term\n",
                c->p2p_latency_us);
    if (e->has_param_bytes) {
        fputs("  memory, current:\n", out);
        pp_tune_print_memory_terms(c, cur, e->schedule, e->M, e->recompute, limit, out);
        fputs("  memory, proposed:\n", out);
        pp_tune_print_memory_terms(c, &b->part, b->kind, b->M, b->recompute, limit, out);
    }
    fputc('\n', out);
}

void pp_tune_search_print(const pp_tune_opts *o, const char *dir, const pp_extract *e,
                          const pp_tune_search *s, FILE *out)
{
    print_comparison(o, dir, e, s, out);
    print_candidates(o, s, out);
    fputc('\n', out);
    if (o->formula)
        print_formula(o, e, s, out);
    if (!e->stage_level) /* its "layers" are stages: no split point to give */
        pp_tune_print_framework_forms(e->costs, &s->cands[s->best].part, out);
}

/* ---- --verify -------------------------------------------------------------------------- */

void pp_tune_print_speed(const pp_tune_speed *sp, double meas_ns, double meas95_ns,
                         const char *label, const char *base_name, FILE *out)
{
    int indent = (int)strlen(label) + 1;
    fprintf(out, "%s the layers' compute per micro-batch took %.3f ms, %.3f ms in %s (%+.2f%%: "
                 "the machine's speed, or the layers' own in their new places)\n",
            label, sp->run_us * 1e-3, sp->base_us * 1e-3, base_name, 100.0 * (sp->ratio - 1));
    fprintf(out, "%*sat this speed %s's costs predict this layout's median %.3f ms (error "
                 "%+.2f%%), p95 %.3f ms (error %+.2f%%)\n",
            indent, "", base_name, sp->adjusted.median_ns * 1e-6,
            100.0 * (meas_ns - sp->adjusted.median_ns) / sp->adjusted.median_ns,
            sp->adjusted.p95_ns * 1e-6,
            100.0 * (meas95_ns - sp->adjusted.p95_ns) / sp->adjusted.p95_ns);
}

/* The baseline run's line and the achieved against the predicted speedup. */
static pp_status print_baseline(const pp_tune_opts *o, const char *baseline_dir,
                                const char *dir, const pp_extract *e, double meas_ns,
                                double pred_ns, FILE *out)
{
    pp_analysis *bn = NULL;
    pp_extract be;
    pp_status st = pp_tune_load_run(o, baseline_dir, &bn, &be);
    if (st != PP_OK)
        return st;
    if (be.partition.L != e->partition.L) {
        st = PP_ERR(PP_ERR_INVALID, "baseline %s has %d layers, %s has %d: not the same model",
                    baseline_dir, be.partition.L, dir, e->partition.L);
    } else {
        double base_ns = be.measured_step_ns;
        char bb[2048];
        pp_partition_format(&be.partition, bb, sizeof bb);
        fprintf(out, "baseline %s (boundaries %s, %s, M = %d): measured %.3f ms\n", baseline_dir,
                bb, pp_schedule_kind_name(be.schedule), be.M, base_ns * 1e-6);
        fprintf(out, "speedup: achieved %.3fx, predicted %.3fx (baseline measured / plan "
                     "predicted)\n",
                base_ns / meas_ns, base_ns / pred_ns);
        pp_tune_speed sp;
        if (pp_tune_speed_compare(o, &be, e, &sp) == PP_OK) {
            pp_tune_print_speed(&sp, meas_ns, e->measured_p95_ns, "speed:", "the baseline", out);
        } else {
            fprintf(out, "speed: not compared with the baseline: %s\n", pp_error_message());
            pp_error_clear();
        }
    }
    pp_extract_free(&be);
    pp_analysis_free(bn);
    return st;
}

/* Each stage's peak memory as the run's accounting measured it (memory counters) against the
 * model's (pp_stage_memory_model with the layer sizes of the run's marks and its recompute
 * choice), and against the plan's limit. Silent for a run without memory counters. */
static void print_verify_memory(const pp_analysis *an, const pp_extract *e, const pp_plan *plan,
                                FILE *out)
{
    int keyed = 0;
    for (int l = 0; l < e->costs->n_layers; l++)
        keyed |= e->costs->layers[l].has_kept;
    pp_schedule *sc = NULL;
    if (!an->n_mem_stages || !keyed || !e->has_param_bytes ||
        pp_schedule_create(e->schedule, e->partition.S, e->M, e->partition.v, &sc) != PP_OK)
        return;
    uint64_t limit = plan->memory_limit_bytes;
    fputs("peak memory per stage (measured by the job's counters, predicted by the model):\n",
          out);
    if (limit) {
        char lb[32];
        pp_tune_fmt_bytes(limit, lb, sizeof lb);
        fprintf(out, "  the plan's limit: %s per stage\n", lb);
    }
    for (size_t i = 0; i < an->n_mem_stages; i++) {
        const pp_amem_stage *ms = &an->mem_stages[i];
        pp_stage_memory m;
        if (ms->stage < 0 || ms->stage >= e->partition.S ||
            pp_stage_memory_model(e->costs, &e->partition, sc, ms->stage, e->recompute, &m) !=
                PP_OK)
            continue;
        char mb[32], pb[32];
        pp_tune_fmt_bytes((uint64_t)ms->total_peak_bytes, mb, sizeof mb);
        pp_tune_fmt_bytes(m.total_bytes, pb, sizeof pb);
        fprintf(out, "  stage %d: measured %s, predicted %s: error %+.2f%%%s\n", ms->stage, mb, pb,
                m.total_bytes ? 100.0 * (ms->total_peak_bytes - (double)m.total_bytes) /
                                    (double)m.total_bytes
                              : 0.0,
                limit && ms->total_peak_bytes > (double)limit ? "  OVER THE LIMIT" : "");
    }
    pp_schedule_destroy(sc);
}

pp_status pp_tune_verify(const pp_tune_opts *o, const pp_plan *plan, const char *plan_path,
                         const char *dir, const char *baseline_dir, FILE *out)
{
    pp_analysis *an = NULL;
    pp_extract e;
    pp_status st = pp_tune_load_run(o, dir, &an, &e);
    if (st != PP_OK)
        return st;
    if ((st = pp_tune_check_ran_plan(dir, &e, plan, plan_path)) != PP_OK)
        goto out;
    pp_sim_dist_result self;
    if ((st = pp_tune_predict_dist(o, &e, NULL, e.schedule, &e.partition, e.M, &self)) != PP_OK)
        goto out;
    /* like with like: the measured median against a predicted median, p95 against p95; a plan
     * from before issue 18 has only the noise-free step, compared as it was */
    int has_med = plan->predicted_median_ms > 0, has_p95 = plan->predicted_p95_ms > 0;
    double pred_ns = has_med                          ? plan->predicted_median_ms * 1e6
                     : plan->predicted_step_ms >= 0 ? plan->predicted_step_ms * 1e6
                                                      : self.median_ns;
    double pred95_ns = has_p95 ? plan->predicted_p95_ms * 1e6 : self.p95_ns;
    double meas_ns = e.measured_step_ns, meas95_ns = e.measured_p95_ns;
    char bnd[2048];
    pp_partition_format(&e.partition, bnd, sizeof bnd);
    fprintf(out, "%s ran the plan %s: %d stages, boundaries %s, %s, M = %d\n", dir, plan_path,
            e.partition.S, bnd, plan->schedule, e.M);
    fprintf(out, "step median: measured %.3f ms, predicted %.3f ms%s: error %+.2f%%\n",
            meas_ns * 1e-6, pred_ns * 1e-6,
            has_med ? " (the plan's)"
            : plan->predicted_step_ms >= 0
                ? " (the plan's noise-free step: the plan has no median, made before issue 18)"
                : " (no prediction in the plan: the run's own costs)",
            100.0 * (meas_ns - pred_ns) / pred_ns);
    fprintf(out, "step p95:    measured %.3f ms, predicted %.3f ms%s: error %+.2f%%\n",
            meas95_ns * 1e-6, pred95_ns * 1e-6,
            has_p95 ? " (the plan's)" : " (none in the plan: the run's own costs)",
            100.0 * (meas95_ns - pred95_ns) / pred95_ns);
    if (plan->predicted_step_ms >= 0 && has_med)
        fprintf(out, "noise-free:  predicted %.3f ms (the plan's)\n", plan->predicted_step_ms);
    fprintf(out, "model re-check: this run's own costs predict median %.3f ms (error %+.2f%%), "
                 "p95 %.3f ms (error %+.2f%%), noise-free %.3f ms\n",
            self.median_ns * 1e-6, 100.0 * (meas_ns - self.median_ns) / self.median_ns,
            self.p95_ns * 1e-6, 100.0 * (meas95_ns - self.p95_ns) / self.p95_ns,
            self.noise_free_ns * 1e-6);
    if (plan->predicted_bubble >= 0)
        fprintf(out, "bubble: measured %.1f%%, predicted %.1f%%\n", 100.0 * e.measured_bubble,
                100.0 * plan->predicted_bubble);
    print_verify_memory(an, &e, plan, out);
    if (baseline_dir)
        st = print_baseline(o, baseline_dir, dir, &e, meas_ns, pred_ns, out);
out:
    pp_extract_free(&e);
    pp_analysis_free(an);
    return st;
}
