/* test_recompute.c: pptrain's memory accounting per stage and purpose (pp_stage_mem, read with
 * pp_pipe_trainer_memory) against numbers worked out here from the model's shape and the
 * schedule, and activation recomputation (--recompute): bit-identical losses and checkpoints,
 * the activation memory it saves, the forward it adds to the backward (sim backend), and the
 * messages for bad values. */
#include "pp_exec.h"
#include "pp_kops.h"
#include "pp_testkit.h"
#include "pp_testkit_train.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PPTRAIN PP_BUILD_DIR "/tools/pptrain"

static void setup(void) { tk_dir_create("pp_recompute"); }
static void teardown(void) { tk_dir_remove(); }
TestSuite(recompute, .init = setup, .fini = teardown);
TestSuite(memory);

/* The kit's small model (8 layers), by the short names the formulas below use. */
enum { V = TK_V, T = TK_T, C = TK_C, NH = TK_NH, L = TK_L, BATCH = TK_BATCH };

/* ---------------------------------------------------------------------------------------- */
/* The model's shape, worked out here                                                         */
/* ---------------------------------------------------------------------------------------- */

static int64_t layer_params(int li)
{
    if (li == 0)
        return (int64_t)V * C + (int64_t)T * C;       /* wte, wpe */
    if (li == L - 1)
        return 2 * (int64_t)C + (int64_t)V * C;       /* lnf, lm_w */
    return 12 * (int64_t)C * C + 13 * (int64_t)C;    /* ln1, qkv, proj, ln2, fc, fcproj */
}

/* Every buffer of a layer's activation set is rounded up to 16 floats (64-byte alignment). */
static int64_t r16(int64_t n) { return (n + 15) & ~(int64_t)15; }

/* Bytes of one layer's activation set for micro-batches of B sequences: what it keeps for the
 * backward and the gradients between its two halves (runtime/layers.c's list). */
static int64_t layer_act_bytes(int li, int B)
{
    int64_t N = (int64_t)B * T, NC = N * C, floats;
    if (li == 0) {
        floats = 2 * r16(NC); /* out, demb */
    } else if (li == L - 1) {
        /* in, din, lnf, dlnf; lnf mean and rstd, losses; logits, probs, dlogits; the loss */
        floats = 4 * r16(NC) + 3 * r16(N) + 3 * r16(N * V) + r16(1);
    } else {
        int64_t scratch = (int64_t)pp_kops_cpu.attention_scratch_floats(B, T, NH);
        /* 12 of [N,C], 4 of [N] (layernorm statistics), 2 of [N,3C] (qkv, dqkv), 4 of [N,4C]
         * (fc, gelu and their gradients), the attention matrix and the kernel's scratch */
        floats = 12 * r16(NC) + 4 * r16(N) + 2 * r16(3 * NC) + 4 * r16(4 * NC) +
                 r16((int64_t)B * NH * T * T) + r16(scratch);
    }
    return floats * 4;
}

/* What one micro-batch holds on a chunk of layers [lo, hi) between its forward and backward:
 * the activation sets of the layers not recomputed, and for the recomputed ones their input
 * (none for the embedding: the tokens), plus the chunk's output and input gradient when a
 * recomputed layer is at that end (the sends read them). *set: one recompute workspace. */
static int64_t chunk_mb_bytes(int lo, int hi, const uint8_t *rc, int B, int64_t *set)
{
    int64_t io = r16((int64_t)B * T * C) * 4, bytes = 0;
    *set = 0;
    for (int li = lo; li < hi; li++) {
        if (rc && rc[li]) {
            bytes += li > 0 ? io : 0;
            *set += layer_act_bytes(li, B);
        } else {
            bytes += layer_act_bytes(li, B);
        }
    }
    if (rc && rc[hi - 1] && hi - 1 != L - 1)
        bytes += io;
    if (rc && rc[lo] && lo != 0)
        bytes += io;
    return bytes;
}

/* The activation peak of stage s: a forward adds its micro-batch's bytes, the end of its
 * backward (BWD, or BWD_WEIGHT after a split) releases them; a recomputed chunk's workspace
 * counts while a forward runs and from the input half of its backward to the weight half. */
static int64_t expected_act_peak(const pp_schedule *sc, const pp_partition *part, int s,
                                 const uint8_t *rc, int B)
{
    int64_t cur = 0, peak = 0;
    for (int k = 0; k < sc->n_instrs[s]; k++) {
        const pp_instr *in = &sc->instrs[s][k];
        if (in->chunk < 0)
            continue;
        int piece = in->chunk * part->S + s;
        int64_t set, mb = chunk_mb_bytes(part->bounds[piece], part->bounds[piece + 1], rc, B,
                                         &set);
        switch ((pp_op)in->op) {
        case PP_OP_FWD:
            cur += mb;
            peak = cur + set > peak ? cur + set : peak;
            break;
        case PP_OP_BWD:
            peak = cur + set > peak ? cur + set : peak;
            cur -= mb;
            break;
        case PP_OP_BWD_INPUT:
            cur += set;
            peak = cur > peak ? cur : peak;
            break;
        case PP_OP_BWD_WEIGHT: cur -= set + mb; break;
        default: break;
        }
    }
    cr_assert_eq(cur, 0, "every micro-batch released on stage %d", s);
    return peak;
}

/* ---------------------------------------------------------------------------------------- */
/* Runs                                                                                       */
/* ---------------------------------------------------------------------------------------- */

typedef struct run {
    pp_pipe_config pc;
    pp_pipe_trainer *t;
    float loss[3];
    pp_stage_mem mem[8];
} run;

/* A cpu pipeline (bounds NULL: an even split) that trains `steps` steps and records each
 * stage's accounting; with `save` its checkpoint is written there. The caller calls run_free. */
static void run_cpu(run *r, pp_schedule_kind kind, int S, int M, int v, const int *bounds,
                    const char *recompute, int steps, const char *save)
{
    memset(r, 0, sizeof *r);
    r->pc.train = tk_small_config(M, 3);
    r->pc.backend = PP_BACKEND_CPU;
    r->pc.schedule = kind;
    r->pc.v = v;
    r->pc.slow_stage = -1;
    r->pc.recompute = recompute;
    if (bounds)
        cr_assert_eq(pp_partition_from_bounds(bounds, S * v + 1, L, S, v, &r->pc.partition),
                     PP_OK, "%s", pp_error_message());
    else
        cr_assert_eq(pp_partition_even(L, S, v, &r->pc.partition), PP_OK);
    pp_data *d = NULL;
    cr_assert_eq(pp_data_markov_create(V, 4, 5, &d), PP_OK);
    cr_assert_eq(pp_pipe_trainer_create(&r->pc, d, &r->t), PP_OK, "%s S=%d M=%d v=%d rc=%s: %s",
                 pp_schedule_kind_name(kind), S, M, v, recompute ? recompute : "-",
                 pp_error_message());
    for (int i = 0; i < steps; i++) {
        pp_step_stats st;
        cr_assert_eq(pp_pipe_trainer_step(r->t, &st, NULL), PP_OK, "%s", pp_error_message());
        r->loss[i] = st.loss;
    }
    for (int s = 0; s < S; s++)
        cr_assert_eq(pp_pipe_trainer_memory(r->t, s, &r->mem[s]), PP_OK);
    if (save)
        cr_assert_eq(pp_pipe_trainer_save(r->t, save), PP_OK, "%s", pp_error_message());
}

static void run_free(run *r)
{
    pp_pipe_trainer_destroy(r->t);
    pp_partition_free(&r->pc.partition);
}

/* ---------------------------------------------------------------------------------------- */
/* Memory accounting                                                                          */
/* ---------------------------------------------------------------------------------------- */

typedef struct layout {
    pp_schedule_kind kind;
    int S, M, v;
    int bounds[10]; /* bounds[0] < 0: even split */
} layout;

static const layout k_layouts[] = {
    {PP_SCHED_GPIPE, 1, 4, 1, {-1}},
    {PP_SCHED_GPIPE, 2, 4, 1, {-1}},
    {PP_SCHED_GPIPE, 4, 8, 1, {0, 1, 3, 6, 8}},
    {PP_SCHED_1F1B, 2, 2, 1, {0, 5, 8}},
    {PP_SCHED_1F1B, 4, 8, 1, {-1}},
    {PP_SCHED_1F1B, 4, 2, 1, {0, 2, 4, 7, 8}},
    {PP_SCHED_INTERLEAVED, 2, 4, 2, {-1}},
    {PP_SCHED_INTERLEAVED, 2, 2, 2, {0, 1, 4, 6, 8}},
    {PP_SCHED_ZBH1, 2, 4, 1, {-1}},
    {PP_SCHED_ZBH1, 4, 8, 1, {0, 3, 5, 7, 8}},
};

Test(memory, static_purposes_are_the_stages_parameters_gradients_and_moments, .timeout = 120)
{
    for (size_t i = 0; i < sizeof k_layouts / sizeof *k_layouts; i++) {
        const layout *ly = &k_layouts[i];
        run r;
        run_cpu(&r, ly->kind, ly->S, ly->M, ly->v, ly->bounds[0] < 0 ? NULL : ly->bounds, NULL,
                1, NULL);
        const pp_partition *p = &r.pc.partition;
        int B = BATCH / ly->M;
        for (int s = 0; s < ly->S; s++) {
            int64_t params = 0, recv = 0;
            for (int c = 0; c < ly->v; c++) {
                int piece = c * ly->S + s;
                for (int li = p->bounds[piece]; li < p->bounds[piece + 1]; li++)
                    params += layer_params(li);
                /* a receive buffer per slot for what enters the chunk and what comes back */
                recv += (piece > 0) + (piece < p->P - 1);
            }
            const pp_stage_mem *m = &r.mem[s];
            cr_assert_eq(m->cur[PP_STAGE_MEM_PARAMS], 4 * params, "case %zu stage %d", i, s);
            cr_assert_eq(m->cur[PP_STAGE_MEM_GRADS], 4 * params);
            cr_assert_eq(m->cur[PP_STAGE_MEM_OPTIMIZER], 8 * params, "AdamW's m and v");
            cr_assert_eq(m->cur[PP_STAGE_MEM_WORKSPACE], 0, "the cpu backend has none");
            int slots = pp_pipe_trainer_report(r.t)->peak_inflight[s] + 1;
            slots = slots > ly->M ? ly->M : slots;
            cr_assert_eq(m->cur[PP_STAGE_MEM_TRANSPORT],
                         recv * slots * (int64_t)B * T * C * 4, "case %zu stage %d", i, s);
            cr_assert_eq(m->cur[PP_STAGE_MEM_ACTIVATIONS], 0, "all released after the step");
            cr_assert_eq(m->peak[PP_STAGE_MEM_PARAMS], m->cur[PP_STAGE_MEM_PARAMS]);
        }
        run_free(&r);
    }
}

Test(memory, activation_peak_follows_the_schedule_for_every_layout, .timeout = 120)
{
    for (size_t i = 0; i < sizeof k_layouts / sizeof *k_layouts; i++) {
        const layout *ly = &k_layouts[i];
        run r;
        run_cpu(&r, ly->kind, ly->S, ly->M, ly->v, ly->bounds[0] < 0 ? NULL : ly->bounds, NULL,
                2, NULL);
        const pp_partition *p = &r.pc.partition;
        int B = BATCH / ly->M;
        for (int s = 0; s < ly->S; s++) {
            int64_t set, mb = 0;
            for (int c = 0; c < ly->v; c++)
                mb += chunk_mb_bytes(p->bounds[c * ly->S + s], p->bounds[c * ly->S + s + 1],
                                     NULL, B, &set);
            int64_t want = expected_act_peak(pp_pipe_trainer_schedule(r.t), p, s, NULL, B);
            int64_t got = r.mem[s].peak[PP_STAGE_MEM_ACTIVATIONS];
            cr_assert_eq(got, want, "case %zu (%s S=%d M=%d) stage %d: %lld, want %lld", i,
                         pp_schedule_kind_name(ly->kind), ly->S, ly->M, s, (long long)got,
                         (long long)want);
            /* the closed forms: GPipe holds all M, 1F1B min(S - s, M) micro-batches */
            if (ly->kind == PP_SCHED_GPIPE)
                cr_assert_eq(got, ly->M * mb, "gpipe stage %d", s);
            if (ly->kind == PP_SCHED_1F1B) {
                int inflight = ly->S - s < ly->M ? ly->S - s : ly->M;
                cr_assert_eq(got, inflight * mb, "1f1b stage %d", s);
            }
            /* and the total's peak is the static bytes plus the activations' peak */
            const pp_stage_mem *m = &r.mem[s];
            int64_t fixed = pp_stage_mem_total(m) - m->cur[PP_STAGE_MEM_ACTIVATIONS];
            cr_assert_eq(m->peak_total, fixed + got);
        }
        run_free(&r);
    }
}

Test(memory, gpipe_grows_with_M_while_1f1b_stays_bounded, .timeout = 120)
{
    /* same batch, so B = 8 / M shrinks: compare micro-batches held, not bytes */
    static const int Ms[] = {2, 4, 8};
    for (int i = 0; i < 3; i++) {
        int M = Ms[i], B = BATCH / M;
        int64_t set, mb0 = chunk_mb_bytes(0, 4, NULL, B, &set);
        run g, f;
        run_cpu(&g, PP_SCHED_GPIPE, 2, M, 1, NULL, NULL, 1, NULL);
        run_cpu(&f, PP_SCHED_1F1B, 2, M, 1, NULL, NULL, 1, NULL);
        cr_assert_eq(g.mem[0].peak[PP_STAGE_MEM_ACTIVATIONS], M * mb0, "gpipe holds M = %d", M);
        cr_assert_eq(f.mem[0].peak[PP_STAGE_MEM_ACTIVATIONS], 2 * mb0, "1f1b holds S = 2");
        run_free(&g);
        run_free(&f);
    }
}

Test(memory, sim_backend_accounts_the_cost_files_bytes)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(4, 10, 20, 1000, &c), PP_OK);
    for (int i = 0; i < 4; i++)
        c->layers[i].param_bytes = 100 * (uint64_t)(i + 1);
    pp_pipe_config pc;
    memset(&pc, 0, sizeof pc);
    pc.train.microbatches = 4;
    pp_adamw_config_default(&pc.train.opt);
    pc.backend = PP_BACKEND_SIM;
    pc.schedule = PP_SCHED_GPIPE;
    pc.v = 1;
    pc.costs = c;
    pc.slow_stage = -1;
    pc.recompute = "s1";
    cr_assert_eq(pp_partition_even(4, 2, 1, &pc.partition), PP_OK);
    pp_pipe_trainer *t = NULL;
    cr_assert_eq(pp_pipe_trainer_create(&pc, NULL, &t), PP_OK, "%s", pp_error_message());
    cr_assert_eq(pp_pipe_trainer_step(t, NULL, NULL), PP_OK, "%s", pp_error_message());
    pp_stage_mem m0, m1;
    cr_assert_eq(pp_pipe_trainer_memory(t, 0, &m0), PP_OK);
    cr_assert_eq(pp_pipe_trainer_memory(t, 1, &m1), PP_OK);
    cr_assert_eq(m0.cur[PP_STAGE_MEM_PARAMS], 300);
    cr_assert_eq(m1.cur[PP_STAGE_MEM_PARAMS], 700);
    cr_assert_eq(m1.cur[PP_STAGE_MEM_OPTIMIZER], 1400);
    /* gpipe: all 4 micro-batches; stage 0 keeps 2 x 1000 each, recomputed stage 1 the input
     * of each layer (2 x 1000) and the input gradient its send reads at its recomputed first
     * layer (1000), as the cpu backend keeps them (the model's rule, pp_costs_chunk_memory),
     * plus one workspace (2 x 1000) during a backward */
    cr_assert_eq(m0.peak[PP_STAGE_MEM_ACTIVATIONS], 4 * 2000);
    cr_assert_eq(m1.peak[PP_STAGE_MEM_ACTIVATIONS], 4 * 3000 + 2000);
    /* receive buffers as a real stage would hold them: 4 slots of 1000 bytes one way */
    cr_assert_eq(m0.cur[PP_STAGE_MEM_TRANSPORT], 4 * 1000);
    pp_pipe_trainer_destroy(t);
    pp_partition_free(&pc.partition);
    pp_costs_destroy(c);
}

/* ---------------------------------------------------------------------------------------- */
/* Recomputation                                                                              */
/* ---------------------------------------------------------------------------------------- */

static int same_file(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    char *x = tk_slurp(a, &na), *y = tk_slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

Test(recompute, losses_and_checkpoints_are_bit_identical, .timeout = 300)
{
    static const layout cases[] = {
        {PP_SCHED_GPIPE, 2, 4, 1, {-1}},
        {PP_SCHED_1F1B, 4, 4, 1, {0, 1, 3, 6, 8}},
        {PP_SCHED_INTERLEAVED, 2, 4, 2, {-1}},
        {PP_SCHED_ZBH1, 2, 4, 1, {0, 3, 8}},
        {PP_SCHED_ZBH1, 4, 8, 1, {-1}},
    };
    static const char *const specs[] = {"full", "s0", "1-3,7", "0,s1", "7"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const layout *ly = &cases[i];
        const int *bounds = ly->bounds[0] < 0 ? NULL : ly->bounds;
        run base;
        const char *base_ckpt = tk_path("none.ckpt");
        run_cpu(&base, ly->kind, ly->S, ly->M, ly->v, bounds, "none", 3, base_ckpt);
        for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
            run r;
            const char *ckpt = tk_path("rc.ckpt");
            run_cpu(&r, ly->kind, ly->S, ly->M, ly->v, bounds, specs[k], 3, ckpt);
            for (int st = 0; st < 3; st++)
                cr_assert(memcmp(&r.loss[st], &base.loss[st], sizeof(float)) == 0,
                          "%s S=%d --recompute %s step %d: loss %.9g vs %.9g",
                          pp_schedule_kind_name(ly->kind), ly->S, specs[k], st + 1, r.loss[st],
                          base.loss[st]);
            cr_assert(same_file(ckpt, base_ckpt), "%s S=%d --recompute %s: checkpoints differ",
                      pp_schedule_kind_name(ly->kind), ly->S, specs[k]);
            run_free(&r);
        }
        run_free(&base);
    }
}

Test(recompute, activation_memory_falls_by_the_expected_amount, .timeout = 300)
{
    static const layout cases[] = {
        {PP_SCHED_GPIPE, 2, 4, 1, {-1}},
        {PP_SCHED_1F1B, 4, 8, 1, {-1}},
        {PP_SCHED_INTERLEAVED, 2, 4, 2, {-1}},
        {PP_SCHED_ZBH1, 4, 8, 1, {-1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const layout *ly = &cases[i];
        int B = BATCH / ly->M;
        run none, rc;
        run_cpu(&none, ly->kind, ly->S, ly->M, ly->v, NULL, "none", 1, NULL);
        run_cpu(&rc, ly->kind, ly->S, ly->M, ly->v, NULL, "s0", 1, NULL);
        const pp_partition *p = &rc.pc.partition;
        const uint8_t *mask = pp_pipe_trainer_recompute(rc.t);
        const pp_schedule *sc = pp_pipe_trainer_schedule(rc.t);
        for (int s = 0; s < ly->S; s++)
            for (int c = 0; c < ly->v; c++)
                for (int li = p->bounds[c * ly->S + s]; li < p->bounds[c * ly->S + s + 1]; li++)
                    cr_assert_eq(mask[li], s == 0, "s0 recomputes exactly stage 0's layers");
        /* stage 0: every in-flight micro-batch holds its inputs only, one workspace more */
        int64_t set, full = 0, kept = 0;
        for (int c = 0; c < ly->v; c++) {
            int lo = p->bounds[c * ly->S], hi = p->bounds[c * ly->S + 1];
            full += chunk_mb_bytes(lo, hi, NULL, B, &set);
            kept += chunk_mb_bytes(lo, hi, mask, B, &set);
        }
        int64_t was = none.mem[0].peak[PP_STAGE_MEM_ACTIVATIONS];
        int64_t now = rc.mem[0].peak[PP_STAGE_MEM_ACTIVATIONS];
        cr_assert_eq(now, expected_act_peak(sc, p, 0, mask, B), "%s: %lld",
                     pp_schedule_kind_name(ly->kind), (long long)now);
        cr_assert_lt(kept, full / 4, "a micro-batch keeps under a quarter of its activations");
        cr_log_info("%s S=%d M=%d stage 0: activation peak %lld -> %lld bytes (%.0f%%)",
                    pp_schedule_kind_name(ly->kind), ly->S, ly->M, (long long)was,
                    (long long)now, 100.0 * (double)now / (double)was);
        if (ly->kind == PP_SCHED_GPIPE || ly->kind == PP_SCHED_1F1B) {
            /* n in flight: n x full before; n x kept + one micro-batch's workspace after */
            int n = ly->kind == PP_SCHED_GPIPE ? ly->M : (ly->S < ly->M ? ly->S : ly->M);
            int64_t ws;
            chunk_mb_bytes(p->bounds[0], p->bounds[1], mask, B, &ws);
            cr_assert_eq(was, n * full);
            cr_assert_eq(now, n * kept + ws);
            cr_assert_eq(was - now, n * (full - kept) - ws, "the saving");
        }
        cr_assert_lt(now, was, "%s: recomputation saves memory with several micro-batches "
                               "in flight", pp_schedule_kind_name(ly->kind));
        /* the other stages are untouched */
        for (int s = 1; s < ly->S; s++)
            cr_assert_eq(rc.mem[s].peak[PP_STAGE_MEM_ACTIVATIONS],
                         none.mem[s].peak[PP_STAGE_MEM_ACTIVATIONS]);
        run_free(&none);
        run_free(&rc);
    }
}

/* One sim stage of 4 layers (fwd 1 ms, bwd 2 ms each): the backward's modelled and measured
 * time, with layers 1 and 2 recomputed or not; the fastest of `tries` (a late wake-up only
 * lengthens a sleep). */
static void sim_backward(const uint8_t *mask, int split, int tries, uint64_t *model_ns,
                         uint64_t *wall_ns)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(4, 1000, 2000, 4096, &c), PP_OK);
    pp_partition part;
    cr_assert_eq(pp_partition_even(4, 1, 1, &part), PP_OK);
    pp_recompute rc = {.layers = mask, .n_sets = 1};
    pp_stage_backend *b = NULL;
    cr_assert_eq(pp_backend_sim_create_rc(c, &part, 0, 1.0, split, 1, NULL, 0, &rc, &b), PP_OK,
                 "%s", pp_error_message());
    *wall_ns = UINT64_MAX;
    for (int i = 0; i < tries; i++) {
        const void *out, *din;
        uint64_t t = pp_now_ns();
        cr_assert_eq(b->ops->forward(b, 0, 0, 0, NULL, &out, &t), PP_OK);
        t = pp_now_ns();
        uint64_t t0 = t;
        cr_assert_eq(b->ops->backward_input(b, 0, 0, 0, NULL, &din, &t), PP_OK);
        uint64_t wall = pp_now_ns() - t0;
        *model_ns = t - t0;
        *wall_ns = wall < *wall_ns ? wall : *wall_ns;
        cr_assert_eq(b->ops->backward_weight(b, 0, 0, 0, &t), PP_OK);
    }
    cr_assert_eq(b->memory.cur[PP_STAGE_MEM_ACTIVATIONS], 0);
    b->ops->destroy(b);
    pp_partition_free(&part);
    pp_costs_destroy(c);
}

Test(recompute, sim_backward_lasts_one_forward_longer, .timeout = 60)
{
    static const uint8_t none[4] = {0}, two[4] = {0, 1, 1, 0};
    for (int split = 0; split <= 1; split++) {
        uint64_t m0, w0, m1, w1;
        sim_backward(none, split, 5, &m0, &w0);
        sim_backward(two, split, 5, &m1, &w1);
        /* modelled: unsplit 4 x 2 ms, split 4 x 1 ms; plus the two layers' forwards */
        uint64_t base = split ? 4000000u : 8000000u;
        cr_assert_eq(m0, base, "split %d: %llu", split, (unsigned long long)m0);
        cr_assert_eq(m1, base + 2000000u, "split %d: %llu", split, (unsigned long long)m1);
        double extra_ms = ((double)w1 - (double)w0) * 1e-6;
        cr_log_info("split %d: backward %.3f ms -> %.3f ms measured (+%.3f, the forwards of two "
                    "layers: 2 ms)", split, (double)w0 * 1e-6, (double)w1 * 1e-6, extra_ms);
        cr_assert_geq(w1, m1, "a sleep never ends early");
        cr_assert_leq(fabs(extra_ms - 2.0), 0.5, "the backward lasts the forwards longer: %+.3f",
                      extra_ms);
    }
}

Test(recompute, sim_step_model_time_grows_by_the_forwards, .timeout = 60)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(4, 500, 1000, 4096, &c), PP_OK);
    double model[2];
    const char *specs[2] = {"none", "full"};
    for (int k = 0; k < 2; k++) {
        pp_pipe_config pc;
        memset(&pc, 0, sizeof pc);
        pc.train.microbatches = 2;
        pp_adamw_config_default(&pc.train.opt);
        pc.backend = PP_BACKEND_SIM;
        pc.schedule = PP_SCHED_1F1B;
        pc.v = 1;
        pc.costs = c;
        pc.slow_stage = -1;
        pc.recompute = specs[k];
        cr_assert_eq(pp_partition_even(4, 1, 1, &pc.partition), PP_OK);
        pp_pipe_trainer *t = NULL;
        cr_assert_eq(pp_pipe_trainer_create(&pc, NULL, &t), PP_OK, "%s", pp_error_message());
        pp_exec_result res;
        cr_assert_eq(pp_pipe_trainer_step(t, NULL, &res), PP_OK, "%s", pp_error_message());
        model[k] = res.model_ms;
        pp_pipe_trainer_destroy(t);
        pp_partition_free(&pc.partition);
    }
    /* one stage, M = 2: 2 x 4 layers x (0.5 + 1) ms, and with recomputation 2 x 4 x 0.5 more */
    cr_assert_leq(fabs(model[0] - 12.0), 1e-3, "%.6f", model[0]);
    cr_assert_leq(fabs(model[1] - 16.0), 1e-3, "%.6f", model[1]);
    pp_costs_destroy(c);
}

Test(recompute, parser_resolves_layers_and_stages)
{
    int bounds[] = {0, 3, 5, 8};
    pp_partition p;
    cr_assert_eq(pp_partition_from_bounds(bounds, 4, L, 3, 1, &p), PP_OK);
    uint8_t mask[L];
    struct {
        const char *spec;
        const char *want;
    } ok[] = {{"none", "00000000"}, {"full", "11111111"}, {"1-4,7", "01111001"},
              {"s1", "00011000"},   {"s0-1,7", "11111001"}, {"s2,0", "10000111"},
              {"2,2,1-2", "01100000"}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        cr_assert_eq(pp_recompute_parse(ok[i].spec, &p, mask), PP_OK, "%s: %s", ok[i].spec,
                     pp_error_message());
        char got[L + 1];
        for (int l = 0; l < L; l++)
            got[l] = (char)('0' + mask[l]);
        got[L] = '\0';
        cr_assert_str_eq(got, ok[i].want, "%s", ok[i].spec);
    }
    const char *bad[] = {"", "x", "1,", ",1", "1,,2", "3-1", "s", "s-1", "1-", "-1", "s3", "8",
                         "1-9", "s0-7", "12345678", "fulll", "s1s"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert_eq(pp_recompute_parse(bad[i], &p, mask), PP_ERR_INVALID, "'%s' refused",
                     bad[i]);
        cr_assert_not_null(strstr(pp_error_message(), "--recompute"), "%s",
                           pp_error_message());
    }
    pp_partition_free(&p);
}

Test(recompute, pptrain_refuses_bad_values_with_exit_2)
{
    static const struct {
        const char *value, *says;
    } cases[] = {
        {"", "needs none, full or a list"},
        {"blocks", "is not a layer index"},
        {"4-2", "ends before it starts"},
        {"1,,2", "an empty item"},
        {"s4", "stage 4 does not exist (4 stages"},
        {"6-9", "layer 9 does not exist (the model has 6 layers"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *args[] = {"--stages", "4", "--microbatches", "4", "--steps", "1",
                              "--recompute", cases[i].value, NULL};
        tk_result r = tk_run(PPTRAIN, args, NULL);
        cr_assert_eq(r.code, 2, "--recompute '%s': exit %d, %s", cases[i].value, r.code, r.err);
        cr_assert(strncmp(r.err, "pptrain: ", 9) == 0, "%s", r.err);
        cr_assert_not_null(strstr(r.err, cases[i].says), "--recompute '%s': %s", cases[i].value,
                           r.err);
        tk_result_free(&r);
    }
    /* and a good one runs, saying so */
    const char *args[] = {"--stages", "2", "--microbatches", "2", "--steps", "1", "--batch", "4",
                          "--recompute", "s0,5", NULL};
    tk_result r = tk_run(PPTRAIN, args, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, ", recompute s0,5"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "memory: peak MiB per stage"), "%s", r.out);
    tk_result_free(&r);
}
