/* test_torch.c: pipeprof on PyTorch pipeline jobs (issue 16). For now the extraction of a torch
 * job's layer costs: module events time only the forward, so the stage's backward is shared
 * out (analyzer/extract.c). The tests that run real torch.distributed.pipelining jobs follow. */
#define _GNU_SOURCE
#include "pp_extract.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- costs of layers that have forward times only (no Python needed) ------------------- */

/* A torch trace's module events time only the forward: pp_extract shares each piece's measured
 * backward op among its layers in proportion to their forward times, and scales their forward
 * times to add up to the piece's forward op (what the op holds beyond its modules is charged
 * too); without ops of a piece in the kept timeline, its stage's mean backward is shared. */
Test(torch_extract, backward_shared_by_forward_times)
{
    enum { S = 2, L = 4 };
    pp_alayer layers[L];
    pp_aop layer_ops[L], ops[2 * S];
    pp_astage stages[S];
    memset(layers, 0, sizeof layers);
    memset(stages, 0, sizeof stages);
    const double fwd_us[L] = {1, 2, 3, 5};
    for (int l = 0; l < L; l++) {
        layers[l].layer = l;
        snprintf(layers[l].name, sizeof layers[l].name, "layers.%d", l);
        layers[l].fwd_ns = (pp_astats){.count = 1, .mean = fwd_us[l] * 1e3,
                                       .median = fwd_us[l] * 1e3};
        int s = l / 2;
        layer_ops[l] = (pp_aop){.kind = PP_AOP_FWD, .stage = s, .mb = 0, .chunk = l,
                                .t0 = 100 + (uint64_t)l, .t1 = 101 + (uint64_t)l};
    }
    /* stage 0: forward op 4 us (its layers' 3 us + 1 us of its own), backward op 30 us;
     * stage 1: forward op 8 us (= its layers'), backward op 16 us */
    const uint64_t f_ns[S] = {4000, 8000}, b_ns[S] = {30000, 16000};
    for (int s = 0; s < S; s++) {
        ops[2 * s] = (pp_aop){.kind = PP_AOP_FWD, .stage = s, .mb = 0, .chunk = 0, .t0 = 0,
                              .t1 = f_ns[s]};
        ops[2 * s + 1] = (pp_aop){.kind = PP_AOP_BWD, .stage = s, .mb = 0, .chunk = 0,
                                  .t0 = 50000, .t1 = 50000 + b_ns[s]};
        stages[s].stage = s;
        stages[s].imbalance_culprit = -1;
        stages[s].bwd_ns = (pp_astats){.count = 4, .mean = 99e3, .median = 99e3}; /* not used */
    }
    pp_analysis a;
    memset(&a, 0, sizeof a);
    a.S = S;
    a.M = 4;
    a.v = 1;
    snprintf(a.schedule, sizeof a.schedule, "gpipe");
    a.stages = stages;
    a.layers = layers;
    a.n_layers = L;
    a.layer_ops = layer_ops;
    a.n_layer_ops = L;
    a.ops = ops;
    a.n_ops = 2 * S;
    pp_extract e;
    cr_assert_eq(pp_extract_from_analysis(&a, &e), PP_OK, "%s", pp_error_message());
    cr_assert_eq(e.partition.P, 2);
    cr_expect_eq(e.partition.bounds[1], 2);
    const double want_f[L] = {4.0 / 3, 8.0 / 3, 3, 5}, want_b[L] = {10, 20, 6, 10};
    for (int l = 0; l < L; l++) {
        cr_expect_float_eq(e.costs->layers[l].fwd_us, want_f[l], 1e-9, "layer %d", l);
        cr_expect_float_eq(e.costs->layers[l].bwd_us, want_b[l], 1e-9, "layer %d", l);
        cr_expect_float_eq(e.costs->layers[l].bwd_input_us + e.costs->layers[l].bwd_weight_us,
                           want_b[l], 1e-9);
    }
    cr_expect(strstr(e.notes, "without backward ranges") != NULL, "notes: %s", e.notes);
    pp_extract_free(&e);

    /* no backward op kept: the stage's mean backward (99 us) is shared */
    a.n_ops = 1; /* stage 0's forward op only */
    cr_assert_eq(pp_extract_from_analysis(&a, &e), PP_OK, "%s", pp_error_message());
    cr_expect_float_eq(e.costs->layers[0].bwd_us, 33, 1e-9);
    cr_expect_float_eq(e.costs->layers[3].bwd_us, 99 * 5.0 / 8, 1e-9);
    cr_expect_float_eq(e.costs->layers[3].fwd_us, 5, 1e-9, "no forward op: not scaled");
    pp_extract_free(&e);

    /* no backward anywhere on a stage: refused, naming the stage */
    stages[1].bwd_ns = (pp_astats){0};
    cr_expect_eq(pp_extract_from_analysis(&a, &e), PP_ERR_INVALID);
    cr_expect(strstr(pp_error_message(), "stage 1") != NULL, "%s", pp_error_message());
}
