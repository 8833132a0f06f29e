/* analyzer.c: run directory -> pipeline metrics (pp_analyzer.h, formulas in docs/metrics.md): the
 * driver of the analysis. Opens the traces, runs the clock pass when clocks differ
 * (clock_pass.c), streams every file block by block, files taken round-robin so that they
 * advance together, through decode (decode.c) -> steps (steps.c) -> metrics (metrics.c,
 * bubble.c), gathers the results and warnings, and runs the GPU pass when there are GPU
 * records (gpu_pass.c). The text summary is report_text.c's. */
#include "analyzer_internal.h"

#include <stdarg.h>
#include <stdio.h>

void an_warn(pp_analysis *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pp_append_linev(a->warnings, sizeof a->warnings, fmt, ap);
    va_end(ap);
}

/* The tools' --dialect (pp_analysis_dialect_default). */
static const char *g_default_dialect;

void pp_analysis_options_default(pp_analysis_options *o)
{
    memset(o, 0, sizeof *o);
    o->warmup = 1;
    o->dialect_file = g_default_dialect;
}

pp_status pp_analysis_dialect_default(const char *path)
{
    pp_dialect *d = NULL;
    pp_status st = pp_dialect_load(path, &d);
    pp_dialect_destroy(d);
    if (st == PP_OK)
        g_default_dialect = path;
    return st;
}

int an_rank_wanted(const pp_analysis_options *o, int32_t rank)
{
    if (o->rank_filter_n <= 0)
        return 1;
    for (int i = 0; i < o->rank_filter_n; i++)
        if (o->rank_filter[i] == rank)
            return 1;
    return 0;
}

void an_state_init(state *st, const pp_analysis_options *o, pp_analysis *a)
{
    memset(st, 0, sizeof *st);
    st->o = o;
    st->a = a;
    st->last_finalized = INT64_MIN;
    st->prev_step = -1;
    st->buckets.elem = sizeof(bucket);
    st->steps.elem = sizeof(pp_astep);
    st->steps_S.elem = sizeof(int);
    st->stage_acc.elem = sizeof(stage_acc);
    st->links.elem = sizeof(link_acc);
    st->layers.elem = sizeof(layer_acc);
    st->kept_ops.elem = st->kept_layer_ops.elem = st->kept_ar_ops.elem = sizeof(pp_aop);
    st->xfers.elem = sizeof(xfer);
    st->match.elem = sizeof(size_t);
    st->collected.elem = sizeof(pp_aop);
    st->syncs.elem = sizeof(sync_mark);
    st->nccl_members.elem = sizeof(pp_gpu_nccl_member);
    st->dshape_mb = st->dshape_chunk = -1;
    st->dlayers.elem = sizeof(dialect_layer);
}

void an_state_free(state *st)
{
    bucket *b = st->buckets.data;
    for (size_t i = 0; i < st->buckets.n; i++) {
        vec_free(&b[i].ops);
        vec_free(&b[i].layer_ops);
        vec_free(&b[i].ranges);
        vec_free(&b[i].allred);
    }
    vec_free(&st->buckets);
    vec_free(&st->dlayers);
    free(st->stage_max_step);
    free(st->seen);
    free(st->prev_bound);
    pp_astep *sp = st->steps.data;
    for (size_t i = 0; i < st->steps.n; i++)
        free(sp[i].stage);
    vec_free(&st->steps);
    vec_free(&st->steps_S);
    an_series_free(&st->step_series);
    stage_acc *sa = st->stage_acc.data;
    for (size_t i = 0; i < st->stage_acc.n; i++) {
        an_series_free(&sa[i].fwd);
        an_series_free(&sa[i].bwd);
        an_series_free(&sa[i].bwd_in);
        an_series_free(&sa[i].bwd_w);
        an_series_free(&sa[i].opt);
        an_series_free(&sa[i].allred);
        for (int k = 0; k < sa[i].n_chunk * 4; k++)
            an_series_free(&sa[i].chunk_ops[k]);
        free(sa[i].chunk_ops);
        vec_free(&sa[i].culprit_votes);
    }
    vec_free(&st->stage_acc);
    link_acc *l = st->links.data;
    for (size_t i = 0; i < st->links.n; i++) {
        an_series_free(&l[i].lat);
        an_series_free(&l[i].snd);
        an_series_free(&l[i].rcv);
        an_series_free(&l[i].bw);
    }
    vec_free(&st->links);
    layer_acc *la = st->layers.data;
    for (size_t i = 0; i < st->layers.n; i++) {
        an_series_free(&la[i].fwd);
        an_series_free(&la[i].bwd);
        an_series_free(&la[i].bwdw);
    }
    vec_free(&st->layers);
    vec_free(&st->kept_ops);
    vec_free(&st->kept_layer_ops);
    vec_free(&st->kept_ar_ops);
    vec_free(&st->xfers);
    vec_free(&st->match);
    free(st->scratch);
    st->scratch = NULL;
    vec_free(&st->collected);
    vec_free(&st->syncs);
    vec_free(&st->nccl_members);
    pp_gpu_proj_destroy(st->gpu);
    st->gpu = NULL;
    an_gpu_rec_close(st->gpu_rec);
    st->gpu_rec = NULL;
    an_other_free(st);
    an_mem_free(st);
}

/* Names the stages whose process died: a stage no trace holds, or one whose trace (cut off:
 * no footer) ends at an earlier step than the others'. */
static void warn_lost_ranks(state *st, const file_state *fs, size_t n, const pp_analysis_options *o)
{
    int S = an_state_stages(st);
    int64_t last = -1;
    for (int s = 0; s < S && s < st->cap_seen; s++)
        if (st->seen[s].last_step > last)
            last = st->seen[s].last_step;
    if (last < 0)
        return;
    for (int s = 0; s < S; s++) {
        const stage_seen *x = s < st->cap_seen ? &st->seen[s] : NULL;
        if (!x || x->last_step < 0) {
            if (!o->rank_filter_n) /* a filtered-out rank is not missing */
                an_warn(st->a, "stage %d: no trace holds its steps (its rank's process died or "
                               "was not captured?); the other stages reach step %lld",
                        s, (long long)last);
            continue;
        }
        if (x->last_step >= last || x->file < 0 || (size_t)x->file >= n ||
            fs[x->file].info->has_footer)
            continue;
        an_warn(st->a, "stage %d (rank %d): its trace ends at step %lld, the other stages reach "
                       "step %lld: the process died?",
                s, x->rank, (long long)x->last_step, (long long)last);
    }
}

int an_read_round(state *st, file_state *fs, size_t n)
{
    int active = 0;
    for (size_t i = 0; i < n; i++) {
        file_state *f = &fs[i];
        if (f->done)
            continue;
        active = 1;
        if (!an_read_block(st, f))
            f->done = 1;
    }
    return active;
}

int an_pass_open(pass *p, const file_state *fs, size_t n, const pp_analysis_options *o)
{
    p->scratch = calloc(1, sizeof *p->scratch);
    p->fs = calloc(n ? n : 1, sizeof *p->fs);
    an_state_init(&p->st, o, p->scratch);
    if (!p->scratch || !p->fs)
        return 0;
    for (size_t i = 0; i < n; i++) {
        file_state *f = &p->fs[i];
        an_file_state_init(f, (int)i);
        f->info = fs[i].info;
        f->rank = fs[i].rank;
        f->replica = fs[i].replica;
        f->pipe_rank = fs[i].pipe_rank;
        f->clk = fs[i].clk;
        f->dialect = fs[i].dialect;
        f->done = !fs[i].r || !an_rank_wanted(o, fs[i].rank) ||
                  pp_trace_reader_reopen(fs[i].info->path, fs[i].r, &f->r) != PP_OK;
    }
    an_count_stages(p->fs, n);
    return 1;
}

void an_pass_close(pass *p, size_t n)
{
    for (size_t i = 0; p->fs && i < n; i++)
        an_file_state_free(&p->fs[i]);
    free(p->fs);
    an_state_free(&p->st);
    free(p->scratch);
}

/* A header's pipeline group (pp_trace.h), checked: 1 with its place, size and first rank. */
static int header_pipe(const pp_trace_header *h, int32_t out[3])
{
    if (!(h->flags & PP_TRACE_PIPELINE_GROUP) || h->pipe_size < 1 ||
        h->pipe_size > PP_ANALYSIS_MAX_STAGES || h->pipe_rank < 0 || h->pipe_rank >= h->pipe_size ||
        h->pipe_first < 0 || h->pipe_first >= (1 << 20))
        return 0;
    out[0] = h->pipe_first, out[1] = h->pipe_rank, out[2] = h->pipe_size;
    return 1;
}

typedef struct pipe_key {
    int32_t first, place, size; /* header_pipe's */
    size_t file;
} pipe_key;

static int pipe_key_cmp(const void *x, const void *y)
{
    const pipe_key *a = x, *b = y;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    return a->place < b->place ? -1 : a->place > b->place;
}

/* Traces that know their stage and not their pipeline (PP_TRACE_STAGE_ONLY: Paddle's pipeline
 * timeline, one file per rank): each stage's files in the order of their global ranks, the k-th
 * of every stage one pipeline (docs/kineto.md "Paddle's pipeline timeline": a rank's coordinates
 * other than its stage order its rank the same way at every stage). Used when every trace read
 * is such a trace with a rank, and every stage 0..S-1 has the same number of them. */
static void assign_stage_only(file_state *fs, size_t n, size_t read, pp_analysis *a)
{
    pipe_key *k = calloc(n ? n : 1, sizeof *k);
    size_t m = 0;
    for (size_t i = 0; k && i < n; i++) {
        if (!fs[i].r || fs[i].done)
            continue;
        const pp_trace_header *h = pp_trace_reader_header(fs[i].r);
        if (!(h->flags & PP_TRACE_STAGE_ONLY) || h->rank < 0 || h->pipe_rank < 0 ||
            h->pipe_rank >= PP_ANALYSIS_MAX_STAGES)
            break;
        k[m++] = (pipe_key){h->pipe_rank, h->rank, 0, i}; /* (stage, rank): sorted so */
    }
    if (!k || m != read || m < 2) {
        free(k);
        return;
    }
    qsort(k, m, sizeof *k, pipe_key_cmp);
    size_t per = 0; /* the first stage's files */
    while (per < m && k[per].first == k[0].first)
        per++;
    int ok = k[0].first == 0 && m % per == 0;
    for (size_t i = 0; ok && i < m; i++)
        ok = k[i].first == (int32_t)(i / per);
    if (!ok) {
        an_warn(a, "the %zu traces of Paddle's pipeline timeline do not hold every stage from 0 "
                   "equally often (stage 0: %zu): each is read as its stage; analyze one "
                   "pipeline's files at a time",
                m, per);
    } else if (per > 1) {
        for (size_t i = 0; i < m; i++) {
            file_state *f = &fs[k[i].file];
            f->info->pipe_rank = f->pipe_rank = k[i].first;
            f->info->pipe_known = 1;
            f->info->replica = f->replica = (int32_t)(i % per);
        }
        a->dp = (int)per;
    }
    free(k);
}

/* The pipelines the traces' process groups name (docs/kineto.md "Process groups"): each file's
 * stage is its place in its group, its replica the rank of its group's lowest rank among the
 * groups'. Groups that disagree (two files in one place of one pipeline, one pipeline of two
 * sizes) or that only some of the files name are not used, with a warning; so are files whose
 * groups other than the world's name no pipeline. */
static void assign_pipelines(file_state *fs, size_t n, pp_analysis *a)
{
    size_t named = 0, other = 0, read = 0;
    pipe_key *k = calloc(n ? n : 1, sizeof *k);
    for (size_t i = 0; i < n; i++) {
        if (!fs[i].r || fs[i].done)
            continue;
        read++;
        const pp_trace_header *h = pp_trace_reader_header(fs[i].r);
        int32_t g[3];
        if (header_pipe(h, g) && k)
            k[named++] = (pipe_key){g[0], g[1], g[2], i};
        else if (h->flags & PP_TRACE_OTHER_GROUPS)
            other++;
    }
    if (!named) {
        assign_stage_only(fs, n, read, a);
        if (other)
            an_warn(a, "%zu trace(s) come from processes in process groups smaller than the job, "
                       "none described as the pipeline's (DeviceMesh dimension \"pp\", "
                       "Megatron-LM's PIPELINE_MODEL_PARALLEL_GROUP): each rank is read as a "
                       "stage; if the job is also data- or tensor-parallel, name its groups "
                       "(docs/kineto.md \"Process groups\")",
                    other);
        free(k);
        return;
    }
    qsort(k, named, sizeof *k, pipe_key_cmp);
    const char *why = named < read ? "some traces name no pipeline group" : NULL;
    for (size_t i = 1; !why && i < named; i++)
        if (k[i].first == k[i - 1].first)
            why = k[i].place == k[i - 1].place ? "two traces hold the same place in one pipeline"
                  : k[i].size != k[i - 1].size ? "one pipeline has two sizes"
                                               : NULL;
    if (why) {
        an_warn(a, "the traces' pipeline process groups are not used (%s): each rank is read as a "
                   "stage",
                why);
        free(k);
        return;
    }
    int replica = -1;
    for (size_t i = 0; i < named; i++) {
        if (i == 0 || k[i].first != k[i - 1].first)
            replica++;
        file_state *f = &fs[k[i].file];
        f->info->pipe_rank = f->pipe_rank = k[i].place;
        f->info->pipe_known = 1;
        f->info->replica = f->replica = replica;
    }
    if (replica > 0)
        a->dp = replica + 1;
    free(k);
}

/* Opens the n traces into fs[] and a->files (a file that cannot be opened is warned about and
 * skipped, one of a rank not wanted is left out); returns how many are to be read. */
static size_t open_files(file_state *fs, const char *const *paths, size_t n,
                         const pp_analysis_options *opt, pp_analysis *a)
{
    size_t readable = 0;
    for (size_t i = 0; i < n; i++) {
        file_state *f = &fs[i];
        an_file_state_init(f, (int)i);
        pp_afile *info = &a->files[a->n_files++];
        f->info = info;
        snprintf(info->path, sizeof info->path, "%s", paths[i]);
        if (pp_trace_reader_open(paths[i], &f->r) != PP_OK) {
            an_warn(a, "%s: %s (skipped)", paths[i], pp_error_message());
            f->done = 1;
            continue;
        }
        const pp_trace_header *h = pp_trace_reader_header(f->r);
        f->rank = h->rank;
        info->pid = h->pid;
        info->rank = h->rank;
        info->aligned = 1;
        snprintf(info->host, sizeof info->host, "%.*s", (int)sizeof h->host, h->host);
        if (!an_rank_wanted(opt, h->rank)) {
            f->done = 1;
            continue;
        }
        readable++;
    }
    assign_pipelines(fs, n, a);
    an_count_stages(fs, n);
    return readable;
}

/* Each file's counts and damage into a, with a warning for what makes its numbers partial. */
static void file_results(file_state *fs, size_t n, pp_analysis *a)
{
    for (size_t i = 0; i < n; i++) {
        file_state *f = &fs[i];
        pp_afile *info = f->info;
        if (f->r)
            info->damage = *pp_trace_reader_damage(f->r);
        if (!info->has_footer)
            info->events = f->events;
        a->events_total += info->events;
        a->dropped_total += info->dropped;
        if (f->r && !info->has_footer && info->rank >= 0)
            an_warn(a, "%s: no footer: rank %d died (its process was killed?); analyzed what it "
                       "holds",
                    info->path, info->rank);
        else if (f->r && !info->has_footer)
            an_warn(a, "%s: no footer (the process was killed?); analyzed what it holds",
                    info->path);
        if (info->dropped)
            an_warn(a, "%s: %llu events dropped (by the capture library, its buffers full; in a "
                       "converted trace, by a cap of the importer, named in its note); numbers "
                       "may be incomplete",
                    info->path, (unsigned long long)info->dropped);
        if (info->damage.blocks_bad || info->damage.truncated)
            an_warn(a, "%s: damaged trace (%llu bad blocks%s): %s", info->path,
                    (unsigned long long)info->damage.blocks_bad,
                    info->damage.truncated ? ", truncated" : "", info->damage.first_problem);
    }
}

/* The error of an analysis that found no step. Heavy drops (a tenth of the events or more)
 * explain missing steps better than the convention does: the step ranges were likely among
 * the events lost. */
static pp_status no_steps_error(const pp_analysis *a)
{
    int S = a->S;
    uint64_t all = a->events_total + a->dropped_total;
    if (a->dropped_total > 0 && a->dropped_total >= all / 10)
        return PP_ERR(PP_ERR_INVALID,
                      "no pipeline steps found in the traces (%d stage(s) seen): the capture "
                      "dropped %llu of %llu events (%.0f%%; its buffers were full), so the "
                      "steps' ranges were likely lost; capture again with a larger "
                      "PPROF_BUFFER_KB or PPROF_FLUSH_MS smaller (docs/profiler.md)",
                      S, (unsigned long long)a->dropped_total, (unsigned long long)all,
                      100.0 * (double)a->dropped_total / (double)all);
    if (S == 0 && !a->n_ranges && !a->n_marks)
        return PP_ERR(PP_ERR_INVALID,
                      "the traces hold no NVTX range or mark (%llu event(s) read): was the "
                      "job's NVTX use captured (pprof-run, docs/profiler.md)?",
                      (unsigned long long)a->events_total);
    return PP_ERR(PP_ERR_INVALID,
                  "no pipeline steps found in the traces (%d stage(s) seen, %lld warm-up "
                  "step(s) skipped): does the job emit the NVTX convention of "
                  "docs/nvtx-convention.md?",
                  S, (long long)a->warmup_skipped);
}

/* Steps without a single forward or backward op: only steps, transfers or optimizer ranges
 * were recognised, so the stages' time reads as all bubble and transfer, and a schedule would be
 * a guess (GPipe, the default shape). Said loudly, the schedule left unknown. */
static void warn_no_compute(pp_analysis *a)
{
    if (!a->n_steps || a->S <= 0 || !a->stages)
        return;
    for (int s = 0; s < a->S; s++) {
        const pp_astage *g = &a->stages[s];
        if (g->fwd_ns.count || g->bwd_ns.count || g->bwd_input_ns.count || g->bwd_weight_ns.count)
            return;
    }
    a->no_compute_ops = 1;
    /* the dialect's shape inferred it from no op at all (Megatron-LM's interleaved schedule,
     * whose ops could not be told their chunks, is named by its own function) */
    if (a->dialect[0] && strcmp(a->dialect, "pipeprof") != 0 &&
        strcmp(a->schedule, PP_SCHED_MEGATRON_INTERLEAVED) != 0)
        a->schedule[0] = '\0';
    an_warn(a, "no forward or backward op in the %zu analyzed step(s): the ranges that time the "
               "compute were not recognised, so the stages' busy time, bubble and transfers of "
               "this analysis describe steps without their compute. A torch trace needs the "
               "schedule's names (PP: actions, GPipe's Forward/Backward) or, for Schedule1F1B, "
               "DeepSpeed's pipeline engine and Megatron-LM's schedules, with_stack=True; other "
               "frameworks a --dialect "
               "(docs/dialects.md); an NVTX job the ranges of docs/nvtx-convention.md",
            a->n_steps);
}

/* The analysis of the files fs[] opened into a: the clock pass, the host pass, the results,
 * the GPU pass. */
static pp_status analyze(state *st, file_state *fs, size_t n, const pp_analysis_options *opt,
                         pp_analysis *a)
{
    pp_status rc = an_clock_align(fs, n, a, opt);
    if (rc != PP_OK)
        return rc;
    /* what the GPU pass will need, recorded as the host pass reads (gpu_rec.c) */
    if (!opt->gpu_reread)
        st->gpu_rec_on = (st->gpu_rec = an_gpu_rec_open()) != NULL;
    /* Round-robin over the files, one block at a time. */
    for (;;) {
        int active = an_read_round(st, fs, n);
        an_finalize_ready(st, 0);
        if (!active)
            break;
    }
    an_finalize_ready(st, 1);
    file_results(fs, n, a);
    warn_lost_ranks(st, fs, n, opt);
    if (a->ranges_out_of_bounds)
        an_warn(a, "%llu pipeline range(s) ignored: a value outside the bounds of "
                   "docs/nvtx-convention.md (first: %s)",
                (unsigned long long)a->ranges_out_of_bounds, st->oob_first);
    an_dialect_layers(st);
    an_results(st);
    an_regimes(a, st->dialect_ranges ? st->dialect_used : NULL);
    an_other_results(st, fs, n);
    an_mem_results(st, fs, n);
    rc = st->gpu_records ? an_gpu_pass(fs, n, &st->nccl_members, a, opt, st->gpu_rec) : PP_OK;
    an_gpu_rec_close(st->gpu_rec);
    st->gpu_rec = NULL;
    st->gpu_rec_on = 0;
    if (rc != PP_OK)
        return rc;
    if (opt->replica > 0 && opt->replica >= (a->dp > 1 ? a->dp : 1))
        return PP_ERR(PP_ERR_INVALID, "replica %d: the run has %d data-parallel replica(s), "
                                      "numbered from 0",
                      opt->replica, a->dp > 1 ? a->dp : 1);
    /* without a pipeline at all, the generic view is the analysis (ranges.c) */
    if (!a->n_steps && a->S == 0 && (a->n_ranges || a->n_marks || a->n_mem_stages ||
                                     a->n_mem_series))
        return PP_OK;
    return a->n_steps ? PP_OK : no_steps_error(a);
}

pp_status pp_analyze_files(const char *const *paths, size_t n, const pp_analysis_options *opt,
                           pp_analysis **out)
{
    pp_status rc = PP_OK;
    pp_analysis_options defaults;
    if (!opt) {
        pp_analysis_options_default(&defaults);
        opt = &defaults;
    }
    pp_analysis *a = calloc(1, sizeof *a);
    file_state *fs = calloc(n ? n : 1, sizeof *fs);
    state st;
    an_state_init(&st, opt, a);
    if (!a || !fs) {
        free(a);
        free(fs);
        return PP_ERR(PP_ERR_NOMEM, "out of memory analyzing %zu traces", n);
    }
    a->files = calloc(n ? n : 1, sizeof(pp_afile));
    pp_dialect *dialect = NULL;
    if (!a->files)
        rc = PP_ERR(PP_ERR_NOMEM, "out of memory analyzing %zu traces", n);
    else if (opt->dialect_file && (rc = pp_dialect_load(opt->dialect_file, &dialect)) != PP_OK)
        ; /* the message names the file, the rule and the problem */
    else if (!open_files(fs, paths, n, opt, a))
        rc = PP_ERR(PP_ERR_INVALID, "no readable trace to analyze%s%s",
                    a->warnings[0] ? ": " : "", a->warnings);
    else {
        for (size_t i = 0; i < n; i++)
            fs[i].dialect = dialect;
        rc = analyze(&st, fs, n, opt, a);
        /* which naming the pipeline ranges had: a dialect's when it named any */
        const char *used = st.dialect_ranges ? st.dialect_used : a->n_steps ? "pipeprof" : "";
        snprintf(a->dialect, sizeof a->dialect, "%s", used ? used : "");
        an_dialect_shape(&st, a);
        if (rc == PP_OK)
            warn_no_compute(a);
    }
    for (size_t i = 0; i < n; i++)
        an_file_state_free(&fs[i]);
    pp_dialect_destroy(dialect);
    free(fs);
    an_state_free(&st);
    if (rc != PP_OK) {
        pp_analysis_free(a);
        return rc;
    }
    *out = a;
    return PP_OK;
}

pp_status pp_analyze_dir(const char *dir, const pp_analysis_options *o, pp_analysis **out)
{
    return pp_analyze_inputs(&dir, 1, o, out);
}

void pp_analysis_free(pp_analysis *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n_steps; i++)
        free(a->steps[i].stage);
    free(a->steps);
    free(a->files);
    for (int s = 0; a->stages && s < a->S; s++) {
        for (int k = 0; k < PP_ASTAGE_N_SAMPLES; k++)
            free(a->stages[s].sample[k]);
        free(a->stages[s].chunk_ns);
    }
    free(a->stages);
    for (size_t i = 0; a->links && i < a->n_links; i++) {
        free(a->links[i].sample);
        free(a->links[i].send_sample);
        free(a->links[i].recv_sample);
    }
    free(a->links);
    free(a->layers);
    free(a->ops);
    free(a->layer_ops);
    free(a->allreduce_ops);
    free(a->ranges);
    free(a->threads);
    free(a->range_threads);
    free(a->marks);
    free(a->mem_stages);
    free(a->mem_series);
    pp_gpu_result_free(&a->gpu);
    free(a);
}

