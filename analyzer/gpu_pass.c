/* gpu_pass.c: the GPU pass (docs/metrics.md "GPU time"), beside gpu.c (the projection): a second
 * pass over the files, run by the driver only when the host pass saw GPU-capture records, now
 * that the analyzed steps and their host windows are known. It decodes the ranges again (the
 * same step numbering) and hands them, the API calls and the GPU and NCCL records to the
 * projection, which keeps only a window of them (pp_gpu.h). */
#include "analyzer_internal.h"

/* A time kept as a double, back to uint64_t ns: a hostile trace's can lie past 2^64 (or, out of
 * its arithmetic, below 0), where the cast is undefined. */
static uint64_t ns_of(double t)
{
    return !(t > 0) ? 0 : t >= 0x1p64 ? UINT64_MAX : (uint64_t)t;
}

/* The analyzed steps' numbers and host windows, the kept steps' window, and the stage of each
 * file's ranges, into the projection. */
static pp_status projection_create(pp_gpu_proj **out, const file_state *fs, size_t n,
                                   const vec *nccl_members, const pp_analysis *a,
                                   const pp_analysis_options *o)
{
    size_t ns = a->n_steps ? a->n_steps : 1;
    int64_t *steps = malloc(ns * sizeof *steps);
    uint64_t *w0 = malloc(ns * sizeof *w0), *w1 = malloc(ns * sizeof *w1);
    int32_t *stage_of_file = malloc((n ? n : 1) * sizeof *stage_of_file);
    pp_status rc = PP_OK;
    if (!steps || !w0 || !w1 || !stage_of_file) {
        rc = PP_ERR(PP_ERR_NOMEM, "out of memory for the GPU projection");
        goto done;
    }
    for (size_t i = 0; i < a->n_steps; i++) {
        steps[i] = a->steps[i].step;
        w0[i] = ns_of(a->steps[i].t0_ns);
        w1[i] = ns_of(a->steps[i].t0_ns + a->steps[i].window_ns);
    }
    if ((rc = pp_gpu_proj_create(out, steps, w0, w1, a->n_steps, a->S, o->gpu_window)) != PP_OK)
        goto done;
    for (size_t i = 0; i < n; i++)
        stage_of_file[i] = fs[i].proj_stage;
    rc = pp_gpu_proj_nccl_stages(*out, stage_of_file, n, nccl_members->data, nccl_members->n);
    if (rc != PP_OK)
        goto done;
    /* the pictures' window: the kept steps */
    uint64_t k0 = UINT64_MAX, k1 = 0;
    for (size_t i = 0; i < a->n_steps; i++)
        if (a->steps[i].step >= a->kept_lo && a->steps[i].step <= a->kept_hi) {
            k0 = w0[i] < k0 ? w0[i] : k0;
            k1 = w1[i] > k1 ? w1[i] : k1;
        }
    if (k0 < k1)
        pp_gpu_proj_keep(*out, a->kept_lo, a->kept_hi, k0, k1);
done:
    free(steps), free(w0), free(w1), free(stage_of_file);
    return rc;
}

/* A stage whose forward (or backward) ranges got no GPU work at all while another stage's did:
 * on an H200, pptrain's stage 0 read 0.000 ms when its records were dropped, and a PyTorch job's
 * backward did when autograd's thread launched it; a table of zeros must not pass for a stage
 * that does no GPU work. */
static void gpu_missing_warn(pp_analysis *a)
{
    const pp_gpu_result *g = &a->gpu;
    int S = g->S < a->S ? g->S : a->S, any_fwd = 0, any_bwd = 0;
    for (int s = 0; s < S; s++) {
        any_fwd |= g->stages[s].fwd_ranges > 0;
        any_bwd |= g->stages[s].bwd_ranges > 0;
    }
    char list[256] = "";
    size_t len = 0;
    for (int s = 0; s < S && len < sizeof list - 40; s++) {
        int f = any_fwd && !g->stages[s].fwd_ranges && a->stages[s].fwd_ns.count;
        int b = any_bwd && !g->stages[s].bwd_ranges && a->stages[s].bwd_ns.count;
        if (f || b)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%d (%s)", len ? ", " : "", s,
                                    f && b ? "forward and backward" : f ? "forward" : "backward");
    }
    if (len)
        an_warn(a, "GPU time: no GPU work was projected onto the ranges of stage %s, while other "
                   "stages' have some: its work was launched outside its ranges (by a thread "
                   "that could not be matched to them) or its records were lost (dropped "
                   "events); its GPU figures are not zero but unknown",
                list);
}

pp_status an_gpu_pass(const file_state *fs, size_t n, const vec *nccl_members, pp_analysis *a,
                      const pp_analysis_options *o, an_gpu_rec *rec)
{
    pass p;
    pp_status rc = PP_OK;
    int opened = 0;
    pp_gpu_proj *proj = NULL;
    /* what the host pass recorded, replayed (gpu_rec.c) */
    if (an_gpu_rec_usable(rec)) {
        if ((rc = projection_create(&proj, fs, n, nccl_members, a, o)) != PP_OK)
            return rc;
        if (an_gpu_rec_replay(rec, proj)) {
            rc = pp_gpu_proj_finish(proj, &a->gpu);
            pp_gpu_proj_destroy(proj);
            if (rc != PP_OK)
                return rc;
            a->gpu.replayed = 1;
            goto warn;
        }
        pp_gpu_proj_destroy(proj); /* part of it: the traces are read again */
    }
    opened = 1;
    if (!an_pass_open(&p, fs, n, o)) {
        rc = PP_ERR(PP_ERR_NOMEM, "out of memory for the GPU projection");
        goto done;
    }
    p.st.gpu_pass = 1;
    if ((rc = projection_create(&p.st.gpu, fs, n, nccl_members, a, o)) != PP_OK)
        goto done;
    /* round-robin as in the host pass, so the files' windows advance together */
    while (an_read_round(&p.st, p.fs, n))
        ;
    if ((rc = pp_gpu_proj_finish(p.st.gpu, &a->gpu)) != PP_OK)
        goto done;
warn:
    if (a->gpu.present && a->gpu.unattributed)
        an_warn(a, "%llu of %llu GPU records could not be projected onto a pipeline range "
                   "(launched outside the NVTX ranges, or their API record was lost)",
                (unsigned long long)a->gpu.unattributed, (unsigned long long)a->gpu.records);
    gpu_missing_warn(a);
    if (a->gpu.ambiguous)
        an_warn(a, "%llu GPU records were launched by a thread with no pipeline range open while "
                   "ranges of two stages or more were open in its process: not projected",
                (unsigned long long)a->gpu.ambiguous);
    if (a->gpu.late)
        an_warn(a, "%llu GPU records arrived after the range that launched them had left the "
                   "projection's window (%zu ranges per trace file): not projected",
                (unsigned long long)a->gpu.late,
                o->gpu_window ? o->gpu_window : (size_t)PP_GPU_WINDOW_RANGES);
done:
    if (opened)
        an_pass_close(&p, n);
    return rc;
}
