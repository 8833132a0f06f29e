/* sim.c: discrete-event replay of pipeline schedules (pp_sim.h). The lists are walked by the
 * planning library's one replay (pp_schedule_replay, with the optimizer step as a barrier over
 * all stages, as the executor's all-reduce is); this file keeps a clock per stage and the time
 * each message becomes available, and takes op costs from a cost file by pp_costs_op_us. */
#include "pp_sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void pp_sim_result_free(pp_sim_result *r)
{
    if (!r)
        return;
    if (r->start_ns)
        for (int s = 0; s < r->S; s++)
            pp_free(r->start_ns[s]);
    if (r->finish_ns)
        for (int s = 0; s < r->S; s++)
            pp_free(r->finish_ns[s]);
    pp_free(r->start_ns);
    pp_free(r->finish_ns);
    pp_free(r->busy_ns);
    pp_free(r->idle_ns);
    pp_free(r->end_ns);
    memset(r, 0, sizeof *r);
}

static int is_compute(uint8_t op)
{
    return op == PP_OP_FWD || op == PP_OP_BWD || op == PP_OP_BWD_INPUT || op == PP_OP_BWD_WEIGHT ||
           op == PP_OP_OPT_STEP;
}

/* Every index the replay will take from the lists lies inside its tables, and the message
 * table is no larger than the lists can use: a validated schedule has a forward per
 * (micro-batch, piece), so 2 M P messages never exceed twice its instructions; lists built
 * from a trace (the analyzer's replay) are held to the same, so no shape a trace states can
 * size the table past what its ranges justify. */
static pp_status check_lists(const pp_schedule *sc, size_t *n_msgs)
{
    int S = sc->S;
    if (S < 1 || sc->M < 1 || sc->v < 1 || !sc->n_instrs || !sc->instrs)
        return PP_ERR(PP_ERR_INVALID, "simulator: empty schedule (S = %d, M = %d, v = %d)", S,
                      sc->M, sc->v);
    size_t P, total = 0;
    if (!pp_size_mul(S, sc->v, &P) || P > INT32_MAX || !pp_size_mul3(2, sc->M, P, n_msgs))
        return PP_ERR(PP_ERR_INVALID, "simulator: S = %d x v = %d x M = %d is too large", S,
                      sc->v, sc->M);
    for (int s = 0; s < S; s++) {
        if (sc->n_instrs[s] < 0 || sc->n_instrs[s] == INT32_MAX)
            return PP_ERR(PP_ERR_INVALID, "simulator: stage %d has %d instructions", s,
                          sc->n_instrs[s]);
        total += (size_t)sc->n_instrs[s];
        for (int k = 0; k < sc->n_instrs[s]; k++) {
            const pp_instr *in = &sc->instrs[s][k];
            if (in->op == PP_OP_OPT_STEP)
                continue;
            int piece = in->chunk >= 0 && in->chunk < sc->v ? pp_schedule_piece(sc, s, in->chunk)
                                                            : -1;
            int to = in->op == PP_OP_SEND_ACT    ? piece + 1
                     : in->op == PP_OP_SEND_GRAD ? piece - 1
                                                 : piece;
            if (in->mb < 0 || in->mb >= sc->M || piece < 0 || to < 0 || (size_t)to >= P)
                return PP_ERR(PP_ERR_INVALID,
                              "simulator: stage %d instruction %d (%s mb %d chunk %d) is outside "
                              "the schedule's M = %d, v = %d, S = %d",
                              s, k, pp_op_name((pp_op)in->op), in->mb, in->chunk, sc->M, sc->v, S);
        }
    }
    if (*n_msgs > 2 * total + 64)
        return PP_ERR(PP_ERR_INVALID,
                      "simulator: M = %d x S = %d x v = %d messages for %zu instructions: more "
                      "micro-batches or pieces than the lists hold",
                      sc->M, S, sc->v, total);
    return PP_OK;
}

/* State of one simulation, the replay's hook context. */
typedef struct sim_state {
    const pp_schedule *sc;
    const pp_sim_costs *costs;
    pp_sim_result *res;
    double *avail;     /* [n_msgs] when a message is at its receiver */
    double *clock;     /* [S] */
    int barrier_set;   /* the optimizer's barrier time is known */
    double barrier_ns; /* when the last stage reached the optimizer step */
} sim_state;

/* Runs instruction k of stage s (pp_schedule_replay's hook): sends make their message
 * available at the sender's clock plus the transfer and take the sender's send time, receives
 * wait for it, compute takes its duration; the optimizer step starts at the barrier, when every
 * stage has reached it. */
static pp_status sim_op(void *ctx, int s, int k, const pp_instr *in, int64_t msg)
{
    sim_state *x = ctx;
    pp_sim_result *res = x->res;
    const pp_sim_costs *costs = x->costs;
    double *clock = &x->clock[s];
    res->start_ns[s][k] = *clock;
    if (in->op == PP_OP_RECV_ACT || in->op == PP_OP_RECV_GRAD) {
        double own = costs->recv_ns ? costs->recv_ns(costs->ctx, s, k, in) : 0.0;
        *clock = fmax(*clock + own, x->avail[msg]);
    } else if (in->op == PP_OP_SEND_ACT || in->op == PP_OP_SEND_GRAD) {
        double t = costs->transfer_ns ? costs->transfer_ns(costs->ctx, s, k, in) : 0.0;
        x->avail[msg] = *clock + t;
        if (costs->send_ns)
            *clock += costs->send_ns(costs->ctx, s, k, in);
    } else if (in->op == PP_OP_OPT_STEP && !costs->no_barrier) {
        if (!x->barrier_set) {
            /* every stage waits here now: their clocks are their arrival times */
            for (int q = 0; q < x->sc->S; q++)
                x->barrier_ns = fmax(x->barrier_ns,
                                     costs->pre_barrier_ns
                                         ? x->clock[q] + costs->pre_barrier_ns(costs->ctx, q)
                                         : x->clock[q]);
            x->barrier_set = 1;
        }
        double d = costs->op_ns(costs->ctx, s, k, in);
        res->start_ns[s][k] = x->barrier_ns;
        res->busy_ns[s] += d;
        *clock = x->barrier_ns + d;
    } else if (is_compute(in->op)) {
        double d = costs->op_ns(costs->ctx, s, k, in);
        *clock += d;
        res->busy_ns[s] += d;
    } else {
        return PP_ERR(PP_ERR_INVALID, "unknown op %d at stage %d index %d", in->op, s, k);
    }
    res->finish_ns[s][k] = *clock;
    if (k == x->sc->n_instrs[s] - 1)
        res->end_ns[s] = *clock;
    return PP_OK;
}

static pp_status alloc_result(const pp_schedule *sc, pp_sim_result *res)
{
    int S = sc->S;
    res->S = S;
    res->busy_ns = pp_alloc_array((size_t)S, sizeof(double));
    res->idle_ns = pp_alloc_array((size_t)S, sizeof(double));
    res->end_ns = pp_alloc_array((size_t)S, sizeof(double));
    res->start_ns = pp_alloc_array((size_t)S, sizeof(double *));
    res->finish_ns = pp_alloc_array((size_t)S, sizeof(double *));
    if (!res->busy_ns || !res->idle_ns || !res->end_ns || !res->start_ns || !res->finish_ns)
        return PP_ERR(PP_ERR_NOMEM, "out of memory simulating %d stages x %d micro-batches", S,
                      sc->M);
    for (int s = 0; s < S; s++) {
        res->start_ns[s] = pp_alloc_array((size_t)sc->n_instrs[s] + 1, sizeof(double));
        res->finish_ns[s] = pp_alloc_array((size_t)sc->n_instrs[s] + 1, sizeof(double));
        if (!res->start_ns[s] || !res->finish_ns[s])
            return PP_ERR(PP_ERR_NOMEM, "out of memory for the simulated timeline");
    }
    return PP_OK;
}

pp_status pp_sim_run(const pp_schedule *sc, const pp_sim_costs *costs, pp_sim_result *res)
{
    memset(res, 0, sizeof *res);
    size_t n_msgs = 0;
    pp_status st = check_lists(sc, &n_msgs);
    if (st != PP_OK)
        return st;
    int S = sc->S;
    sim_state x = {.sc = sc, .costs = costs, .res = res};
    x.avail = pp_alloc_array(n_msgs, sizeof(double));
    x.clock = pp_alloc_array((size_t)S, sizeof(double));
    int *pc = pp_alloc_array((size_t)S, sizeof(int));
    if (!x.avail || !x.clock || !pc) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory simulating %d stages x %d micro-batches", S,
                    sc->M);
        goto done;
    }
    if ((st = alloc_result(sc, res)) != PP_OK)
        goto done;
    pp_replay_hooks h = {.run = sim_op, .ctx = &x, .barrier = !costs->no_barrier};
    if ((st = pp_schedule_replay(sc, &h, pc, NULL)) != PP_OK) {
        st = pp_error_wrap(st, "simulator");
        goto done;
    }
    double step = 0.0, idle = 0.0;
    for (int s = 0; s < S; s++)
        step = fmax(step, res->end_ns[s]);
    res->step_ns = step;
    for (int s = 0; s < S; s++) {
        res->idle_ns[s] = step - res->busy_ns[s];
        idle += res->idle_ns[s];
    }
    res->bubble_ratio = step > 0 ? idle / (S * step) : 0.0;
done:
    pp_free(x.avail);
    pp_free(x.clock);
    pp_free(pc);
    if (st != PP_OK)
        pp_sim_result_free(res);
    return st;
}

/* ---- costs from a cost file ---- */

/* The stage's data-parallel all-reduce before the barrier (a transfer: no --sim-slow
 * multiplier, as no transfer takes one). */
static double file_pre_barrier_ns(void *ctx, int stage)
{
    const pp_sim_file_costs *fc = ctx;
    return pp_costs_dp_allreduce_us(fc->costs, pp_costs_stage_param_bytes(fc->costs, fc->part, stage)) * 1e3;
}

static double file_op_ns(void *ctx, int stage, int index, const pp_instr *in)
{
    (void)index;
    const pp_sim_file_costs *fc = ctx;
    double m = fc->mult ? fc->mult[stage] : 1.0;
    int lo = 0, hi = 0;
    if (in->op == PP_OP_OPT_STEP) {
        /* the stage's optimizer step: of all its chunks' parameters */
        return pp_costs_opt_us(fc->costs, pp_costs_stage_param_bytes(fc->costs, fc->part, stage)) * 1e3 * m;
    }
    pp_partition_piece_layers(fc->part, stage, in->chunk, &lo, &hi);
    return pp_costs_op_us(fc->costs, (pp_op)in->op, lo, hi) * 1e3 * m;
}

static double file_transfer_ns(void *ctx, int stage, int index, const pp_instr *in)
{
    (void)index;
    const pp_sim_file_costs *fc = ctx;
    int lo, hi;
    pp_partition_piece_layers(fc->part, stage, in->chunk, &lo, &hi);
    /* activations leave through the piece's last layer; gradients through the layer before */
    uint64_t bytes = pp_costs_boundary_bytes(fc->costs, in->op == PP_OP_SEND_ACT ? hi : lo);
    return pp_costs_transfer_us(fc->costs, bytes) * 1e3;
}

static double file_send_ns(void *ctx, int stage, int index, const pp_instr *in)
{
    (void)stage;
    (void)index;
    const pp_sim_file_costs *fc = ctx;
    return pp_costs_send_us(fc->costs, in->op == PP_OP_SEND_GRAD) * 1e3;
}

static double file_recv_ns(void *ctx, int stage, int index, const pp_instr *in)
{
    (void)stage;
    (void)index;
    const pp_sim_file_costs *fc = ctx;
    return pp_costs_recv_us(fc->costs, in->op == PP_OP_RECV_GRAD) * 1e3;
}

void pp_sim_costs_from_file(pp_sim_file_costs *fc, pp_sim_costs *out)
{
    out->op_ns = file_op_ns;
    out->transfer_ns = file_transfer_ns;
    out->ctx = fc;
    out->send_ns = fc->costs->send_act_us > 0 || fc->costs->send_grad_us > 0 ? file_send_ns : NULL;
    out->pre_barrier_ns = pp_costs_has_dp_allreduce(fc->costs) ? file_pre_barrier_ns : NULL;
    out->no_barrier = 0; /* a cost file's job has the barrier (docs/cost-file.md) */
    out->recv_ns = fc->costs->recv_act_us > 0 || fc->costs->recv_grad_us > 0 ? file_recv_ns : NULL;
}

pp_status pp_sim_file(pp_schedule_kind kind, const pp_partition *part, int M,
                      const pp_costs *costs, const double *mult, pp_sim_result *res)
{
    pp_schedule *sc = NULL;
    pp_status st = pp_schedule_create(kind, part->S, M, part->v, &sc);
    if (st != PP_OK)
        return st;
    if ((st = pp_schedule_validate(sc, NULL)) == PP_OK) {
        pp_sim_file_costs fc = {costs, part, mult};
        pp_sim_costs c;
        pp_sim_costs_from_file(&fc, &c);
        st = pp_sim_run(sc, &c, res);
    }
    pp_schedule_destroy(sc);
    return st;
}
