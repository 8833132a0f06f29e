/* backend_sim.c: the sim stage backend. Instead of computing, every layer's forward and
 * backward takes the time the cost file gives, by the planning library's cost rule
 * (pp_costs_layer_us: a split backward's halves are bwd_us / 2 each where the file has no
 * split, as the simulator and the rebalancer take them): the worker sleeps to an absolute deadline
 * (clock_nanosleep with TIMER_ABSTIME) and its clock advances by exactly the cost, so lateness
 * in waking never accumulates and 16+ stages on a 2-core machine show the schedule's timing,
 * not CPU contention. Transfers are modelled by the executor with transfer_ns. With a jitter
 * spec (pptrain --sim-jitter, common/pp_jitter.h) each compute op's layers take their cost times
 * one factor drawn for (replica, stage, step, chunk, mb, op): a function of the op alone, so the
 * durations are the same whatever the threads' or ranks' order; a step inside one of the
 * spec's regimes takes every compute op times that regime's factor too. After each compute op, outside
 * its range, the executor sleeps the cost file's op_gap_us (sim_op_gap; times --sim-slow, not
 * jittered). */
#include "pp_exec.h"
#include "pp_jitter.h"
#include "pp_nvtx.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct sim_backend {
    pp_stage_backend base;
    const pp_costs *costs;
    int *lo, *hi;       /* [v] layer range of each chunk */
    double opt_us;      /* its optimizer step (pp_costs_opt_us of its chunks' parameters) */
    double mult;
    int split;
    int64_t step;
    int jittered;     /* 0: every factor is 1, nothing drawn */
    pp_jitter jitter; /* a copy */
    int replica;
    uint8_t *rc;        /* [L]: 1 = recomputed (NULL: none) */
    int64_t *mb_bytes;  /* [v]: modelled activation bytes a micro-batch holds between F and B */
    int64_t *set_bytes; /* [v]: and its recomputed layers' activations while an op runs */
} sim_backend;

static void sleep_until(uint64_t t_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(t_ns / 1000000000ull),
                          .tv_nsec = (long)(t_ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

/* The deadlines are integer nanoseconds of CLOCK_MONOTONIC. pp_backend_sim_create refuses costs
 * above this (2^62 ns, 146 years, per stage and micro-batch), so conversions and the clock's
 * sums stay far inside 64 bits; converting a larger double would be undefined behaviour. */
#define SIM_MAX_NS 4611686018427387904.0

static uint64_t us_to_ns(double us)
{
    double ns = us * 1e3 + 0.5;
    if (!(ns > 0)) /* also NaN */
        return 0;
    return ns < SIM_MAX_NS ? (uint64_t)ns : (uint64_t)SIM_MAX_NS;
}

/* t + d, saturating: a clock that cannot overflow even if the checks above were bypassed. */
static uint64_t clock_add(uint64_t t, uint64_t d) { return d > UINT64_MAX - t ? UINT64_MAX : t + d; }

static size_t sim_act_bytes(pp_stage_backend *b, int chunk)
{
    sim_backend *sb = (sim_backend *)b;
    return (size_t)pp_costs_boundary_bytes(sb->costs, sb->hi[chunk]);
}

static size_t sim_grad_bytes(pp_stage_backend *b, int chunk)
{
    sim_backend *sb = (sim_backend *)b;
    return (size_t)pp_costs_boundary_bytes(sb->costs, sb->lo[chunk]);
}

static pp_status sim_begin_step(pp_stage_backend *b, int64_t step, const pp_step_data *d)
{
    (void)d;
    ((sim_backend *)b)->step = step;
    return PP_OK;
}

/* Sleeps through the layers [lo, hi) (or reversed) of one op, one NVTX layer range each. */
static void run_layers(sim_backend *sb, int chunk, int mb, pp_nvtx_kind kind, int reverse,
                       uint64_t *t_ns)
{
    int lo = sb->lo[chunk], hi = sb->hi[chunk];
    pp_nvtx_kind op_kind = kind == PP_NVTX_LAYER_FWD ? PP_NVTX_FWD
                           : kind == PP_NVTX_LAYER_BWD_WEIGHT ? PP_NVTX_BWD_WEIGHT
                           : sb->split ? PP_NVTX_BWD_INPUT
                                       : PP_NVTX_BWD;
    /* One factor for the whole op, as a predictor replaying ops (not layers) draws it. */
    double mult = sb->mult;
    if (sb->jittered)
        mult *= pp_jitter_factor(&sb->jitter, pp_jitter_key(&sb->jitter, sb->replica,
                                                            sb->base.stage, sb->step, chunk, mb,
                                                            op_kind)) *
                pp_jitter_step_factor(&sb->jitter, sb->step);
    for (int k = 0; k < hi - lo; k++) {
        int li = reverse ? hi - 1 - k : lo + k;
        const pp_layer_cost *lc = &sb->costs->layers[li];
        pp_op op = kind == PP_NVTX_LAYER_FWD ? PP_OP_FWD
                   : kind == PP_NVTX_LAYER_BWD_WEIGHT ? PP_OP_BWD_WEIGHT
                   : sb->split ? PP_OP_BWD_INPUT
                               : PP_OP_BWD;
        /* recomputed: the forward again, inside the backward (the one rule, plan/costs.c) */
        double us = pp_costs_layer_rc_us(lc, op, sb->rc && sb->rc[li]);
        pp_nvtx_info info = pp_nvtx_info_none();
        info.step = sb->step;
        info.stage = sb->base.stage;
        info.mb = mb;
        info.chunk = chunk;
        info.layer = li;
        pp_nvtx_push(kind, &info);
        *t_ns = clock_add(*t_ns, us_to_ns(us * mult));
        sleep_until(*t_ns);
        pp_nvtx_pop();
    }
}

static pp_status sim_forward(pp_stage_backend *b, int chunk, int mb, int slot, const void *in,
                             const void **out, uint64_t *t_ns)
{
    (void)slot;
    (void)in;
    sim_backend *sb = (sim_backend *)b;
    pp_stage_mem_add(&b->memory, PP_STAGE_MEM_ACTIVATIONS, sb->mb_bytes[chunk]);
    pp_stage_mem_add(&b->memory, PP_STAGE_MEM_ACTIVATIONS, sb->set_bytes[chunk]);
    run_layers(sb, chunk, mb, PP_NVTX_LAYER_FWD, 0, t_ns);
    pp_stage_mem_add(&b->memory, PP_STAGE_MEM_ACTIVATIONS, -sb->set_bytes[chunk]);
    *out = NULL;
    return PP_OK;
}

static pp_status sim_backward_input(pp_stage_backend *b, int chunk, int mb, int slot,
                                    const void *dout, const void **din, uint64_t *t_ns)
{
    (void)slot;
    (void)dout;
    sim_backend *sb = (sim_backend *)b;
    pp_stage_mem_add(&b->memory, PP_STAGE_MEM_ACTIVATIONS, sb->set_bytes[chunk]);
    run_layers(sb, chunk, mb, PP_NVTX_LAYER_BWD, 1, t_ns);
    *din = NULL;
    return PP_OK;
}

static pp_status sim_backward_weight(pp_stage_backend *b, int chunk, int mb, int slot,
                                     uint64_t *t_ns)
{
    (void)slot;
    sim_backend *sb = (sim_backend *)b;
    /* Unsplit, the whole backward was charged to the input half. */
    if (sb->split)
        run_layers(sb, chunk, mb, PP_NVTX_LAYER_BWD_WEIGHT, 1, t_ns);
    pp_stage_mem_add(&b->memory, PP_STAGE_MEM_ACTIVATIONS,
                     -(sb->set_bytes[chunk] + sb->mb_bytes[chunk]));
    return PP_OK;
}

static pp_status sim_grad_stats(pp_stage_backend *b, double *sumsq, double *loss_sum)
{
    (void)b;
    *sumsq = 0.0;
    *loss_sum = 0.0;
    return PP_OK;
}

static pp_status sim_optimizer_step(pp_stage_backend *b, float lr, float grad_scale,
                                    uint64_t *t_ns)
{
    (void)lr;
    (void)grad_scale;
    sim_backend *sb = (sim_backend *)b;
    double mult = sb->mult;
    if (sb->jittered)
        mult *= pp_jitter_factor(&sb->jitter, pp_jitter_key(&sb->jitter, sb->replica,
                                                            sb->base.stage, sb->step, 0, 0,
                                                            PP_NVTX_OPT_STEP)) *
                pp_jitter_step_factor(&sb->jitter, sb->step);
    *t_ns = clock_add(*t_ns, us_to_ns(sb->opt_us * mult));
    sleep_until(*t_ns);
    return PP_OK;
}

static void sim_grads(pp_stage_backend *b, int chunk, float **g, size_t *n, uint64_t *bytes)
{
    sim_backend *sb = (sim_backend *)b;
    uint64_t sum = 0;
    for (int li = sb->lo[chunk]; li < sb->hi[chunk]; li++)
        sum += sb->costs->layers[li].param_bytes;
    *g = NULL;
    *n = 0;
    *bytes = sum;
}

static uint64_t sim_transfer_ns(pp_stage_backend *b, size_t bytes)
{
    sim_backend *sb = (sim_backend *)b;
    return us_to_ns(pp_costs_transfer_us(sb->costs, bytes));
}

/* The data-parallel all-reduce of the stage's gradients: the cost file's terms (one rule with
 * the simulator, pp_costs_dp_allreduce_us), else a ring all-reduce over the link model. */
static uint64_t sim_dp_allreduce_ns(pp_stage_backend *b, uint64_t bytes, int dp)
{
    sim_backend *sb = (sim_backend *)b;
    if (pp_costs_has_dp_allreduce(sb->costs))
        return us_to_ns(pp_costs_dp_allreduce_us(sb->costs, bytes));
    return 2ull * (uint64_t)(dp - 1) * sim_transfer_ns(b, (size_t)(bytes / (uint64_t)dp));
}

/* A sender's or receiver's own time of `us` microseconds: the clock moves on by it and the
 * stage sleeps to that deadline, inside the range of the send or receive. */
static void sleep_own_time(double us, uint64_t *t_ns)
{
    uint64_t d = us_to_ns(us);
    if (!d)
        return;
    *t_ns = clock_add(*t_ns, d);
    sleep_until(*t_ns);
}

/* The sender's own time in a send (the cost file's send_act_us / send_grad_us): inside the
 * send's range, so that a capture times it as the send's. */
static void sim_send_time(pp_stage_backend *b, int grad, uint64_t *t_ns)
{
    sleep_own_time(pp_costs_send_us(((sim_backend *)b)->costs, grad), t_ns);
}

/* The receiver's own time in a receive (the cost file's recv_act_us / recv_grad_us): inside the
 * receive's range, before its wait for the message, so that a receive whose message is there
 * takes it and one that waits ends at the message's arrival, as the simulator has it. */
static void sim_recv_time(pp_stage_backend *b, int grad, uint64_t *t_ns)
{
    sleep_own_time(pp_costs_recv_us(((sim_backend *)b)->costs, grad), t_ns);
}

/* The schedule's own time after a compute op (the cost file's op_gap_us), between ops. */
static void sim_op_gap(pp_stage_backend *b, uint64_t *t_ns)
{
    const sim_backend *sb = (const sim_backend *)b;
    if (sb->costs->op_gap_us > 0)
        *t_ns = clock_add(*t_ns, us_to_ns(sb->costs->op_gap_us * sb->mult));
}

static void sim_destroy(pp_stage_backend *b)
{
    sim_backend *sb = (sim_backend *)b;
    if (!sb)
        return;
    pp_free(sb->lo);
    pp_free(sb->hi);
    pp_free(sb->rc);
    pp_free(sb->mb_bytes);
    pp_free(sb->set_bytes);
    pp_free(sb);
}

static const pp_backend_ops k_sim_ops = {
    .name = "sim",
    .act_bytes = sim_act_bytes,
    .grad_bytes = sim_grad_bytes,
    .begin_step = sim_begin_step,
    .forward = sim_forward,
    .backward_input = sim_backward_input,
    .backward_weight = sim_backward_weight,
    .grad_stats = sim_grad_stats,
    .optimizer_step = sim_optimizer_step,
    .grads = sim_grads,
    .transfer_ns = sim_transfer_ns,
    .dp_allreduce_ns = sim_dp_allreduce_ns,
    .send_time = sim_send_time,
    .recv_time = sim_recv_time,
    .op_gap = sim_op_gap,
    .destroy = sim_destroy,
};

/* One cost in nanoseconds must stay below SIM_MAX_NS; `what` names it for the message, `times`
 * what multiplied it ("" when nothing did). */
static pp_status check_ns(double us, double mult, const char *times, const char *what)
{
    double ns = us * mult * 1e3;
    if (!(ns < SIM_MAX_NS)) /* also NaN */
        return PP_ERR(PP_ERR_INVALID,
                      "%s is %g us%s: %.3g ns does not fit the sim's 64-bit nanosecond clock "
                      "(at most %.3g ns, about 146 years)",
                      what, us, times, ns, SIM_MAX_NS);
    return PP_OK;
}

/* Every cost the stage will sleep for, one by one and summed over one micro-batch (its
 * layers' forward and backward, the optimizer, its sends and receives). */
static pp_status check_stage_ns(const pp_costs *c, const pp_partition *part, int stage,
                                double mult, const char *times, int split)
{
    char what[160];
    uint64_t param_bytes = pp_costs_stage_param_bytes(c, part, stage);
    double opt_us = pp_costs_opt_us(c, param_bytes);
    double sum_us = opt_us * mult;
    pp_status st = check_ns(opt_us, mult, times,
                            "the optimizer step (the cost file's optimizer_us, "
                            "optimizer_us_per_MB and step_fixed_us)");
    if (st == PP_OK && c->op_gap_us > 0) { /* after each of its ops: forward and backward */
        st = check_ns(c->op_gap_us, mult, times, "op_gap_us");
        sum_us += 2 * c->op_gap_us * mult;
    }
    if (st == PP_OK && pp_costs_has_dp_allreduce(c)) /* a transfer: no multiplier */
        st = check_ns(pp_costs_dp_allreduce_us(c, param_bytes), 1.0, "",
                      "the data-parallel all-reduce (the cost file's dp_allreduce_us and "
                      "dp_allreduce_us_per_MB)");
    param_bytes = 0;
    for (int ch = 0; ch < part->v && st == PP_OK; ch++) {
        int piece = ch * part->S + stage, lo = part->bounds[piece], hi = part->bounds[piece + 1];
        for (int li = lo; li < hi && st == PP_OK; li++) {
            const pp_layer_cost *l = &c->layers[li];
            const double t[3] = {pp_costs_layer_us(l, PP_OP_FWD),
                                 pp_costs_layer_us(l, split ? PP_OP_BWD_INPUT : PP_OP_BWD),
                                 split ? pp_costs_layer_us(l, PP_OP_BWD_WEIGHT) : 0};
            const char *half = l->has_split ? NULL : "half of bwd_us";
            const char *key[3] = {"fwd_us", split ? (half ? half : "bwd_input_us") : "bwd_us",
                                  half ? half : "bwd_weight_us"};
            for (int k = 0; k < 3 && st == PP_OK; k++) {
                snprintf(what, sizeof what, "layer %d (\"%s\"): %s", li, l->name, key[k]);
                st = check_ns(t[k], mult, times, what);
                sum_us += t[k] * mult;
            }
            param_bytes += l->param_bytes;
        }
        /* what the chunk sends forward and receives back, as sim_act_bytes/grad_bytes say */
        uint64_t msgs[2] = {pp_costs_boundary_bytes(c, hi), pp_costs_boundary_bytes(c, lo)};
        for (int k = 0; k < 2 && st == PP_OK; k++) {
            double us = pp_costs_transfer_us(c, msgs[k]);
            snprintf(what, sizeof what, "a transfer of %llu bytes (p2p_latency_us + bytes / "
                     "p2p_GBps)", (unsigned long long)msgs[k]);
            st = check_ns(us, 1.0, "", what);
            sum_us += us;
            if (st == PP_OK) {
                us = pp_costs_send_us(c, k);
                st = check_ns(us, 1.0, "", k ? "send_grad_us" : "send_act_us");
                sum_us += us;
            }
            if (st == PP_OK) {
                us = pp_costs_recv_us(c, k);
                st = check_ns(us, 1.0, "", k ? "recv_grad_us" : "recv_act_us");
                sum_us += us;
            }
        }
    }
    if (st == PP_OK) {
        double us = pp_costs_transfer_us(c, param_bytes); /* the data-parallel all-reduce */
        snprintf(what, sizeof what, "the all-reduce of stage %d's %llu parameter bytes", stage,
                 (unsigned long long)param_bytes);
        st = check_ns(us, 1.0, "", what);
        sum_us += us;
    }
    if (st == PP_OK) {
        snprintf(what, sizeof what, "stage %d's work for one micro-batch (its layers, optimizer "
                 "and transfers)", stage);
        st = check_ns(sum_us, 1.0, "", what);
    }
    return st;
}

pp_status pp_backend_sim_create(const pp_costs *costs, const pp_partition *part, int stage,
                                double multiplier, int split_backward, int n_slots,
                                const pp_jitter *jitter, int replica, pp_stage_backend **out)
{
    return pp_backend_sim_create_rc(costs, part, stage, multiplier, split_backward, n_slots,
                                    jitter, replica, NULL, out);
}

pp_status pp_backend_sim_create_rc(const pp_costs *costs, const pp_partition *part, int stage,
                                   double multiplier, int split_backward, int n_slots,
                                   const pp_jitter *jitter, int replica, const pp_recompute *rc,
                                   pp_stage_backend **out)
{
    if (part->L != costs->n_layers)
        return PP_ERR(PP_ERR_INVALID, "partition of %d layers does not fit the cost file's %d",
                      part->L, costs->n_layers);
    if (!(multiplier > 0.0))
        return PP_ERR(PP_ERR_INVALID, "sim cost multiplier %g must be > 0", multiplier);
    int jittered = jitter && !pp_jitter_is_none(jitter);
    /* Checked at the largest factor a draw can give, so no draw can overflow the clock. */
    double check_mult =
        multiplier *
        (jittered ? pp_jitter_factor_max(jitter) * pp_jitter_step_factor_max(jitter) : 1.0);
    const char *times = jittered ? (multiplier != 1.0 ? " times the stage's multiplier and the "
                                                        "jitter's largest factor"
                                                      : " times the jitter's largest factor")
                        : multiplier != 1.0 ? " times the stage's multiplier"
                                            : "";
    pp_status st = check_stage_ns(costs, part, stage, check_mult, times, split_backward);
    if (st != PP_OK)
        return st;
    sim_backend *sb = pp_alloc(sizeof *sb);
    if (!sb)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for stage %d", stage);
    sb->base.ops = &k_sim_ops;
    sb->base.stage = stage;
    sb->base.n_chunks = part->v;
    sb->base.n_slots = n_slots < 1 ? 1 : n_slots;
    sb->base.carries_data = 0;
    sb->costs = costs;
    sb->mult = multiplier;
    sb->split = split_backward;
    sb->jittered = jittered;
    if (jittered)
        sb->jitter = *jitter;
    sb->replica = replica;
    sb->base.memory.stage = stage;
    sb->lo = pp_alloc(sizeof(int) * (size_t)part->v);
    sb->hi = pp_alloc(sizeof(int) * (size_t)part->v);
    sb->mb_bytes = pp_alloc(sizeof(int64_t) * (size_t)part->v);
    sb->set_bytes = pp_alloc(sizeof(int64_t) * (size_t)part->v);
    if (rc && rc->layers && (sb->rc = pp_alloc((size_t)part->L)) != NULL)
        memcpy(sb->rc, rc->layers, (size_t)part->L);
    if (!sb->lo || !sb->hi || !sb->mb_bytes || !sb->set_bytes || (rc && rc->layers && !sb->rc)) {
        sim_destroy(&sb->base);
        return PP_ERR(PP_ERR_NOMEM, "out of memory for stage %d", stage);
    }
    uint64_t param_bytes = 0;
    for (int c = 0; c < part->v; c++) {
        int piece = c * part->S + stage;
        sb->lo[c] = part->bounds[piece];
        sb->hi[c] = part->bounds[piece + 1];
        param_bytes += pp_costs_param_bytes(costs, sb->lo[c], sb->hi[c]);
        /* what a micro-batch keeps and a recompute workspace: the memory model's rule */
        uint64_t mb = 0, set = 0;
        pp_costs_chunk_memory(costs, sb->lo[c], sb->hi[c], sb->rc, &mb, &set);
        sb->mb_bytes[c] = mb > INT64_MAX ? INT64_MAX : (int64_t)mb;
        sb->set_bytes[c] = set > INT64_MAX ? INT64_MAX : (int64_t)set;
    }
    sb->opt_us = pp_costs_opt_us(costs, param_bytes);
    pp_stage_mem_set(&sb->base.memory, PP_STAGE_MEM_PARAMS, (int64_t)param_bytes);
    pp_stage_mem_set(&sb->base.memory, PP_STAGE_MEM_GRADS, (int64_t)param_bytes);
    pp_stage_mem_set(&sb->base.memory, PP_STAGE_MEM_OPTIMIZER, 2 * (int64_t)param_bytes);
    *out = &sb->base;
    return PP_OK;
}
