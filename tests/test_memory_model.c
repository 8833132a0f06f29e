/* test_memory_model.c: the rebalancer's memory model term by term (pp_stage_memory_model,
 * analyzer/memmodel.c) against pptrain's own accounting (pp_pipe_trainer_memory, runtime/
 * memory.c) on the cpu backend, whose allocations are real: several layouts, all four schedules,
 * with and without recomputation, the costs from the model's shape as the layer marks state it
 * (pp_layer_acts_size, the function the trainer's marks call). And the compatibility of the old
 * model: a cost file without the memory keys gives what it gave before. */
#include "pp_exec.h"
#include "pp_kops.h"
#include "pp_rebalance.h"

#include "pp_testkit.h"
#include "pp_testkit_train.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

TestSuite(memory_model);

/* The kit's small model (8 layers), by the short names the formulas below use. */
enum { V = TK_V, T = TK_T, C = TK_C, L = TK_L, BATCH = TK_BATCH };

/* The cost file's memory keys as pptrain's layer marks give them (runtime/pipeline.c
 * mark_layers): params, the tensor handed on, what the layer keeps, its input when recomputed. */
static pp_costs *shape_costs(const pp_model_config *m, int B)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(L, 10, 20, 0, &c), PP_OK);
    uint64_t io = (uint64_t)B * T * C * 4, io_kept = ((uint64_t)B * T * C + 15) / 16 * 16 * 4;
    for (int i = 0; i < L; i++) {
        pp_layer_cost *l = &c->layers[i];
        l->param_bytes = pp_model_config_layer_params(m, i) * 4;
        l->activation_bytes = i == L - 1 ? 0 : io;
        l->kept_bytes = pp_layer_acts_size(m, i, B, &pp_kops_cpu);
        l->input_bytes = i == 0 ? 0 : io_kept;
        l->has_kept = 1;
    }
    return c;
}

typedef struct mm_case {
    pp_schedule_kind kind;
    int S, M, v;
    int bounds[9]; /* S * v + 1 entries; bounds[1] == 0: the even split */
    const char *recompute;
} mm_case;

static const mm_case k_cases[] = {
    {PP_SCHED_GPIPE, 2, 4, 1, {0}, NULL},
    {PP_SCHED_GPIPE, 2, 4, 1, {0}, "full"},
    {PP_SCHED_GPIPE, 4, 8, 1, {0, 1, 4, 6, 8}, "s1"},
    {PP_SCHED_1F1B, 2, 4, 1, {0}, NULL},
    {PP_SCHED_1F1B, 4, 8, 1, {0, 2, 3, 5, 8}, NULL},
    {PP_SCHED_1F1B, 4, 8, 1, {0, 2, 3, 5, 8}, "s0,s3"},
    {PP_SCHED_1F1B, 2, 4, 1, {0, 3, 8}, "2-5"},
    {PP_SCHED_ZBH1, 2, 4, 1, {0}, NULL},
    {PP_SCHED_ZBH1, 4, 8, 1, {0}, "full"},
    {PP_SCHED_ZBH1, 2, 8, 1, {0, 5, 8}, "s1"},
    {PP_SCHED_INTERLEAVED, 2, 4, 2, {0}, NULL},
    {PP_SCHED_INTERLEAVED, 2, 4, 2, {0}, "full"},
    {PP_SCHED_INTERLEAVED, 2, 4, 2, {0, 1, 3, 6, 8}, "s0"},
};

/* The tolerance of issue 17: the model's per-stage peak within 5% of the measured one. The
 * model charges what the backends allocate, so the numbers agree to the byte; 5% is the bound
 * a user may rely on, the equality is what this model achieves today. */
Test(memory_model, predicts_pptrains_measured_peak_per_stage)
{
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const mm_case *k = &k_cases[i];
        pp_pipe_config pc;
        memset(&pc, 0, sizeof pc);
        pc.train = tk_small_config(k->M, 1);
        pc.backend = PP_BACKEND_CPU;
        pc.schedule = k->kind;
        pc.v = k->v;
        pc.slow_stage = -1;
        pc.recompute = k->recompute;
        int P = k->S * k->v;
        if (k->bounds[1])
            cr_assert_eq(pp_partition_from_bounds(k->bounds, P + 1, L, k->S, k->v, &pc.partition),
                         PP_OK, "%s", pp_error_message());
        else
            cr_assert_eq(pp_partition_even(L, k->S, k->v, &pc.partition), PP_OK);
        pp_data *d = NULL;
        cr_assert_eq(pp_data_markov_create(V, 4, 5, &d), PP_OK);
        pp_pipe_trainer *t = NULL;
        cr_assert_eq(pp_pipe_trainer_create(&pc, d, &t), PP_OK, "case %zu: %s", i,
                     pp_error_message());
        cr_assert_eq(pp_pipe_trainer_step(t, NULL, NULL), PP_OK, "%s", pp_error_message());
        pp_schedule *sc = NULL;
        cr_assert_eq(pp_schedule_create(k->kind, k->S, k->M, k->v, &sc), PP_OK);
        pp_costs *c = shape_costs(&pc.train.model, BATCH / k->M);
        const uint8_t *rc = pp_pipe_trainer_recompute(t);
        for (int s = 0; s < k->S; s++) {
            pp_stage_mem m;
            cr_assert_eq(pp_pipe_trainer_memory(t, s, &m), PP_OK);
            pp_stage_memory e;
            cr_assert_eq(pp_stage_memory_model(c, &pc.partition, sc, s, rc, &e), PP_OK, "%s",
                         pp_error_message());
            double measured = (double)m.peak_total, predicted = (double)e.total_bytes;
            cr_assert(predicted >= 0.95 * measured && predicted <= 1.05 * measured,
                      "case %zu (%s S=%d M=%d v=%d rc=%s) stage %d: predicted %.0f, measured "
                      "%.0f", i, pp_schedule_kind_name(k->kind), k->S, k->M, k->v,
                      k->recompute ? k->recompute : "none", s, predicted, measured);
            /* term by term, each purpose as the trainer accounts it */
            cr_assert_eq(e.params_bytes, (uint64_t)m.peak[PP_STAGE_MEM_PARAMS]);
            cr_assert_eq(e.grads_bytes, (uint64_t)m.peak[PP_STAGE_MEM_GRADS]);
            cr_assert_eq(e.optimizer_bytes, (uint64_t)m.peak[PP_STAGE_MEM_OPTIMIZER]);
            cr_assert_eq(e.transport_bytes, (uint64_t)m.peak[PP_STAGE_MEM_TRANSPORT],
                         "case %zu stage %d", i, s);
            cr_assert_eq(e.activations_bytes, (uint64_t)m.peak[PP_STAGE_MEM_ACTIVATIONS],
                         "case %zu stage %d: predicted %llu, measured %lld", i, s,
                         (unsigned long long)e.activations_bytes,
                         (long long)m.peak[PP_STAGE_MEM_ACTIVATIONS]);
            cr_assert_eq(e.total_bytes, (uint64_t)m.peak_total, "case %zu stage %d", i, s);
        }
        pp_costs_destroy(c);
        pp_schedule_destroy(sc);
        pp_pipe_trainer_destroy(t);
        pp_partition_free(&pc.partition);
    }
}

/* Recomputation's saving, as the model states it: a recomputed block keeps only its input, so
 * under GPipe (M in flight) stage 1 falls from M x kept to M x input plus one workspace. */
Test(memory_model, recompute_keeps_inputs_and_one_workspace)
{
    pp_train_config tc = tk_small_config(4, 1);
    pp_costs *c = shape_costs(&tc.model, 2);
    pp_partition p;
    cr_assert_eq(pp_partition_from_bounds((int[]){0, 1, 7, 8}, 4, L, 3, 1, &p), PP_OK);
    pp_schedule *sc = NULL;
    cr_assert_eq(pp_schedule_create(PP_SCHED_GPIPE, 3, 4, 1, &sc), PP_OK);
    uint8_t rc[L] = {0, 1, 1, 1, 1, 1, 1, 0};
    pp_stage_memory none, full;
    cr_assert_eq(pp_stage_memory_model(c, &p, sc, 1, NULL, &none), PP_OK);
    cr_assert_eq(pp_stage_memory_model(c, &p, sc, 1, rc, &full), PP_OK);
    uint64_t kept = 6 * c->layers[1].kept_bytes, in = c->layers[1].input_bytes;
    cr_assert_eq(none.activations_bytes, 4 * kept);
    /* 6 inputs, the chunk's output and its input gradient per micro-batch; one workspace */
    cr_assert_eq(full.kept_bytes, 4 * (8 * in));
    cr_assert_eq(full.workspace_bytes, kept);
    cr_assert_eq(full.activations_bytes, 4 * 8 * in + kept);
    cr_assert_eq(none.peak_inflight, 4);
    pp_schedule_destroy(sc);
    pp_partition_free(&p);
    pp_costs_destroy(c);
}

/* Without the memory keys the search's model is the one before them: 4 x params + peak x the
 * activation_bytes of the stage's layers; with them, kept_bytes replaces activation_bytes. */
Test(memory_model, old_cost_files_keep_the_old_model)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(4, 10, 20, 1000, &c), PP_OK);
    for (int i = 0; i < 4; i++)
        c->layers[i].param_bytes = 100;
    pp_partition p;
    cr_assert_eq(pp_partition_even(4, 2, 1, &p), PP_OK);
    cr_assert_eq(pp_stage_memory_bytes(c, &p, 0, 3), 4 * 200 + 3 * 2000);
    c->layers[0].has_kept = c->layers[1].has_kept = 1;
    c->layers[0].kept_bytes = c->layers[1].kept_bytes = 30000;
    cr_assert_eq(pp_stage_memory_bytes(c, &p, 0, 3), 4 * 200 + 3 * 60000);
    pp_partition_free(&p);
    pp_costs_destroy(c);
}

/* From a real capture: pprof-run records pptrain (cpu backend, GPipe and 1F1B, with and without
 * --recompute), pprof-tune --export-costs takes kept_bytes and input_bytes from the layer marks,
 * and the model on those costs lands within 5% of the peak per stage pptrain printed (MiB with
 * two decimals: the print's rounding is far inside 5%). */
#define PPRUN PP_BUILD_DIR "/tools/pprof-run"
#define PPTUNE PP_BUILD_DIR "/tools/pprof-tune"
#define PPTRAIN PP_BUILD_DIR "/tools/pptrain"

Test(memory_model, costs_from_a_capture_predict_the_measured_peak)
{
    static const struct {
        const char *schedule, *recompute;
        pp_schedule_kind kind;
    } runs[] = {{"1f1b", "none", PP_SCHED_1F1B},
                {"gpipe", "s1", PP_SCHED_GPIPE},
                {"zb-h1", "full", PP_SCHED_ZBH1}};
    tk_dir_create("pp_memmodel");
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        const char *args[] = {"-o", "run", "-q", "--", PPTRAIN, "--stages", "2", "--schedule",
                              runs[i].schedule, "--microbatches", "4", "--batch", "8", "--steps",
                              "3", "--layers", "4", "--recompute", runs[i].recompute, NULL};
        tk_result r = tk_run(PPRUN, args, NULL);
        cr_assert_eq(r.code, 0, "%s", r.err);
        const char *line = strstr(r.out, "memory: peak MiB per stage (total/activations)");
        cr_assert_not_null(line, "%s", r.out);
        double measured[2], act[2];
        cr_assert_eq(sscanf(line, "memory: peak MiB per stage (total/activations) s0 %lf/%lf, "
                                  "s1 %lf/%lf", &measured[0], &act[0], &measured[1], &act[1]),
                     4, "%s", line);
        tk_result_free(&r);
        const char *targs[] = {"run", "--export-costs", "c.json", NULL};
        r = tk_run(PPTUNE, targs, NULL);
        cr_assert_eq(r.code, 0, "%s", r.err);
        tk_result_free(&r);
        pp_costs *c = NULL;
        cr_assert_eq(pp_costs_load(tk_path("c.json"), &c), PP_OK, "%s", pp_error_message());
        for (int l = 0; l < c->n_layers; l++)
            cr_assert(c->layers[l].has_kept, "layer %d: the marks' kept_bytes reached the costs", l);
        pp_partition p;
        cr_assert_eq(pp_partition_even(c->n_layers, 2, 1, &p), PP_OK);
        uint8_t rc[16] = {0};
        cr_assert(c->n_layers <= 16);
        for (int l = 0; l < c->n_layers; l++)
            rc[l] = strcmp(runs[i].recompute, "full") == 0 ||
                    (strcmp(runs[i].recompute, "s1") == 0 && l >= p.bounds[1]);
        pp_schedule *sc = NULL;
        cr_assert_eq(pp_schedule_create(runs[i].kind, 2, 4, 1, &sc), PP_OK);
        for (int s = 0; s < 2; s++) {
            pp_stage_memory m;
            cr_assert_eq(pp_stage_memory_model(c, &p, sc, s, rc, &m), PP_OK);
            double mib = (double)m.total_bytes / 1048576.0;
            cr_assert(fabs(mib - measured[s]) <= 0.05 * measured[s],
                      "%s rc=%s stage %d: predicted %.3f MiB, measured %.2f MiB", runs[i].schedule,
                      runs[i].recompute, s, mib, measured[s]);
        }
        pp_schedule_destroy(sc);
        pp_partition_free(&p);
        pp_costs_destroy(c);
    }
    tk_dir_remove();
}

/* Recomputation's time, the one rule (pp_costs_layer_rc_us): a recomputed layer's BWD and
 * BWD_INPUT cost its forward more, its weight half nothing more; pp_costs_with_recompute's copy
 * gives exactly those times through the plain rule, for layers with and without split times, so
 * the simulator and the rebalancer predict a recomputed layout unchanged. */
Test(memory_model, recompute_costs_its_forward_inside_the_backward)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(3, 10, 30, 1000, &c), PP_OK);
    c->layers[1].has_split = 0; /* halves by the rule: 15 each */
    c->layers[1].bwd_input_us = c->layers[1].bwd_weight_us = 0;
    c->layers[2].bwd_input_us = 20;
    c->layers[2].bwd_weight_us = 10;
    uint8_t rc[3] = {0, 1, 1};
    pp_costs *d = NULL;
    cr_assert_eq(pp_costs_with_recompute(c, rc, &d), PP_OK);
    static const pp_op ops[] = {PP_OP_FWD, PP_OP_BWD, PP_OP_BWD_INPUT, PP_OP_BWD_WEIGHT};
    for (int l = 0; l < 3; l++)
        for (int k = 0; k < 4; k++)
            cr_assert_eq(pp_costs_layer_us(&d->layers[l], ops[k]),
                         pp_costs_layer_rc_us(&c->layers[l], ops[k], rc[l]), "layer %d op %d", l,
                         k);
    cr_assert_eq(pp_costs_layer_us(&d->layers[1], PP_OP_BWD), 40);
    cr_assert_eq(pp_costs_layer_us(&d->layers[1], PP_OP_BWD_INPUT), 25);
    cr_assert_eq(pp_costs_layer_us(&d->layers[1], PP_OP_BWD_WEIGHT), 15);
    cr_assert_eq(pp_costs_layer_us(&d->layers[2], PP_OP_BWD_INPUT), 30);
    cr_assert_eq(pp_costs_layer_us(&d->layers[0], PP_OP_BWD), 30); /* not recomputed */
    pp_costs_destroy(d);
    pp_costs_destroy(c);
}
