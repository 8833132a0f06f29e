/* sim.c: discrete-event replay of pipeline schedules (pp_sim.h). Each stage is a cursor into its
 * instruction list with a clock; stages are advanced round-robin until each is blocked on a
 * receive whose send has not been replayed yet. Sends record when their message becomes
 * available; the optimizer step is a barrier over all stages, as the executor's all-reduce is. */
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

/* Message key: (kind, mb, receiving piece) -> dense index. */
static size_t msg_index(const pp_schedule *sc, int grad, int mb, int piece)
{
    size_t P = (size_t)sc->S * (size_t)sc->v;
    return ((size_t)grad * (size_t)sc->M + (size_t)mb) * P + (size_t)piece;
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

pp_status pp_sim_run(const pp_schedule *sc, const pp_sim_costs *costs, pp_sim_result *res)
{
    memset(res, 0, sizeof *res);
    size_t n_msgs = 0;
    pp_status st = check_lists(sc, &n_msgs);
    if (st != PP_OK)
        return st;
    int S = sc->S;
    res->S = S;
    double *avail = pp_alloc_array(n_msgs, sizeof(double));
    int *cursor = pp_alloc_array((size_t)S, sizeof(int));
    double *clock = pp_alloc_array((size_t)S, sizeof(double));
    int *arrived = pp_alloc_array((size_t)S, sizeof(int));
    res->busy_ns = pp_alloc_array((size_t)S, sizeof(double));
    res->idle_ns = pp_alloc_array((size_t)S, sizeof(double));
    res->end_ns = pp_alloc_array((size_t)S, sizeof(double));
    res->start_ns = pp_alloc_array((size_t)S, sizeof(double *));
    res->finish_ns = pp_alloc_array((size_t)S, sizeof(double *));
    if (!avail || !cursor || !clock || !arrived || !res->busy_ns || !res->idle_ns || !res->end_ns ||
        !res->start_ns || !res->finish_ns) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory simulating %d stages x %d micro-batches", S,
                    sc->M);
        goto done;
    }
    for (size_t i = 0; i < n_msgs; i++)
        avail[i] = -1.0; /* not sent yet */
    for (int s = 0; s < S; s++) {
        res->start_ns[s] = pp_alloc_array((size_t)sc->n_instrs[s] + 1, sizeof(double));
        res->finish_ns[s] = pp_alloc_array((size_t)sc->n_instrs[s] + 1, sizeof(double));
        if (!res->start_ns[s] || !res->finish_ns[s]) {
            st = PP_ERR(PP_ERR_NOMEM, "out of memory for the simulated timeline");
            goto done;
        }
    }
    /* The barrier of OPT_STEP: stages arrive, the last one releases them all. */
    int at_barrier = 0;
    double barrier_time = 0.0;
    int finished = 0;
    while (finished < S) {
        int progressed = 0;
        for (int s = 0; s < S; s++) {
            for (;;) {
                int k = cursor[s];
                if (k >= sc->n_instrs[s])
                    break;
                const pp_instr *in = &sc->instrs[s][k];
                int piece = in->chunk >= 0 ? pp_schedule_piece(sc, s, in->chunk) : -1;
                if (in->op == PP_OP_RECV_ACT || in->op == PP_OP_RECV_GRAD) {
                    double a = avail[msg_index(sc, in->op == PP_OP_RECV_GRAD, in->mb, piece)];
                    if (a < 0.0)
                        break; /* its send has not been replayed yet */
                    res->start_ns[s][k] = clock[s];
                    clock[s] = fmax(clock[s], a);
                    res->finish_ns[s][k] = clock[s];
                } else if (in->op == PP_OP_SEND_ACT || in->op == PP_OP_SEND_GRAD) {
                    int grad = in->op == PP_OP_SEND_GRAD;
                    int to_piece = grad ? piece - 1 : piece + 1;
                    double t = costs->transfer_ns ? costs->transfer_ns(costs->ctx, s, k, in) : 0.0;
                    avail[msg_index(sc, grad, in->mb, to_piece)] = clock[s] + t;
                    res->start_ns[s][k] = clock[s];
                    res->finish_ns[s][k] = clock[s];
                } else if (in->op == PP_OP_OPT_STEP) {
                    /* Arrive once; leave when every stage has arrived. */
                    if (!arrived[s]) {
                        arrived[s] = 1;
                        at_barrier++;
                        barrier_time = fmax(barrier_time, clock[s]);
                        res->start_ns[s][k] = clock[s];
                    }
                    if (at_barrier < S)
                        break;
                    double d = costs->op_ns(costs->ctx, s, k, in);
                    res->start_ns[s][k] = barrier_time;
                    res->finish_ns[s][k] = barrier_time + d;
                    res->busy_ns[s] += d;
                    clock[s] = barrier_time + d;
                } else if (is_compute(in->op)) {
                    double d = costs->op_ns(costs->ctx, s, k, in);
                    res->start_ns[s][k] = clock[s];
                    clock[s] += d;
                    res->finish_ns[s][k] = clock[s];
                    res->busy_ns[s] += d;
                } else {
                    st = PP_ERR(PP_ERR_INVALID, "simulator: unknown op %d at stage %d index %d",
                                in->op, s, k);
                    goto done;
                }
                cursor[s]++;
                progressed = 1;
                if (cursor[s] == sc->n_instrs[s]) {
                    res->end_ns[s] = clock[s];
                    finished++;
                }
            }
        }
        if (!progressed && finished < S) {
            /* A validated schedule cannot get here. */
            st = PP_ERR(PP_ERR_INVALID, "simulator: the schedule deadlocks (validate it first)");
            goto done;
        }
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
    pp_free(avail);
    pp_free(cursor);
    pp_free(clock);
    pp_free(arrived);
    if (st != PP_OK)
        pp_sim_result_free(res);
    return st;
}

/* ---- costs from a cost file ---- */

static void piece_range(const pp_partition *part, int stage, int chunk, int *lo, int *hi)
{
    int p = chunk * part->S + stage;
    *lo = part->bounds[p];
    *hi = part->bounds[p + 1];
}

static double file_op_ns(void *ctx, int stage, int index, const pp_instr *in)
{
    (void)index;
    const pp_sim_file_costs *fc = ctx;
    double m = fc->mult ? fc->mult[stage] : 1.0;
    if (in->op == PP_OP_OPT_STEP)
        return fc->costs->optimizer_us * 1e3 * m;
    int lo, hi;
    piece_range(fc->part, stage, in->chunk, &lo, &hi);
    double us = 0.0;
    for (int l = lo; l < hi; l++) {
        const pp_layer_cost *c = &fc->costs->layers[l];
        switch (in->op) {
        case PP_OP_FWD: us += c->fwd_us; break;
        case PP_OP_BWD: us += c->bwd_us; break;
        case PP_OP_BWD_INPUT: us += c->has_split ? c->bwd_input_us : c->bwd_us / 2; break;
        case PP_OP_BWD_WEIGHT: us += c->has_split ? c->bwd_weight_us : c->bwd_us / 2; break;
        default: break;
        }
    }
    return us * 1e3 * m;
}

static double file_transfer_ns(void *ctx, int stage, int index, const pp_instr *in)
{
    (void)index;
    const pp_sim_file_costs *fc = ctx;
    int lo, hi;
    piece_range(fc->part, stage, in->chunk, &lo, &hi);
    /* activations leave through the piece's last layer; gradients through the layer before */
    uint64_t bytes = in->op == PP_OP_SEND_ACT ? fc->costs->layers[hi - 1].activation_bytes
                                              : fc->costs->layers[lo - 1].activation_bytes;
    return pp_costs_transfer_us(fc->costs, bytes) * 1e3;
}

void pp_sim_costs_from_file(pp_sim_file_costs *fc, pp_sim_costs *out)
{
    out->op_ns = file_op_ns;
    out->transfer_ns = file_transfer_ns;
    out->ctx = fc;
}

pp_status pp_sim_file(pp_schedule_kind kind, const pp_partition *part, int M,
                      const pp_costs *costs, const double *mult, pp_sim_result *res)
{
    pp_schedule *sc = NULL;
    pp_status st = pp_schedule_create(kind, part->S, M, part->v, &sc);
    if (st != PP_OK)
        return st;
    if ((st = pp_schedule_validate(sc, NULL)) == PP_OK) {
        pp_sim_file_costs fc = {costs, part, mult, kind == PP_SCHED_ZBH1};
        pp_sim_costs c;
        pp_sim_costs_from_file(&fc, &c);
        st = pp_sim_run(sc, &c, res);
    }
    pp_schedule_destroy(sc);
    return st;
}
