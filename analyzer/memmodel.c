/* memmodel.c: the per-stage memory model term by term (pp_stage_memory_model, pp_rebalance.h;
 * docs/rebalancer.md "Memory model"), with activation recomputation. It replays the stage's own
 * instruction list in its order, the order the executor runs it, charging what the trainer's
 * backends charge (runtime/backend_cpu.c, runtime/executor.c): parameters, gradients, AdamW's two
 * moments, each micro-batch's kept tensors from its forward to its backward's end, the recompute
 * workspaces while a recomputed chunk's forward runs and from its input-gradient half to its
 * weight half, and the executor's receive buffers. Called by the tuner and the tests. */
#include "pp_rebalance.h"

#include <string.h>

/* One chunk's charges (pp_costs_chunk_memory). */
typedef struct mm_chunk {
    uint64_t mb_bytes;  /* per micro-batch in flight */
    uint64_t set_bytes; /* one recompute workspace (0: nothing recomputed) */
} mm_chunk;

static uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

pp_status pp_stage_memory_model(const pp_costs *c, const pp_partition *p,
                                const pp_schedule *sched, int stage, const uint8_t *recompute,
                                pp_stage_memory *out)
{
    memset(out, 0, sizeof *out);
    if (!c || !p || !sched || p->L != c->n_layers || p->S != sched->S || p->v != sched->v ||
        stage < 0 || stage >= p->S)
        return PP_ERR(PP_ERR_INVALID, "memory model: partition (%d layers, S=%d, v=%d) does not "
                                      "fit the costs or the schedule, or stage %d is out of range",
                      p ? p->L : -1, p ? p->S : -1, p ? p->v : -1, stage);
    if (p->v > 64)
        return PP_ERR(PP_ERR_INVALID, "memory model: v = %d above 64", p->v);
    pp_schedule_report rep;
    pp_status st = pp_schedule_validate(sched, &rep);
    if (st != PP_OK)
        return st;
    int peak = rep.peak_inflight[stage];
    pp_schedule_report_free(&rep);
    /* the pipeline trainer's slots per chunk (runtime/pipeline.c): one more than the peak */
    int slots = peak + 1 < sched->M ? peak + 1 : sched->M;

    mm_chunk ch[64];
    uint64_t params = 0, transport = 0;
    for (int k = 0; k < p->v; k++) {
        int piece = k * p->S + stage, lo = p->bounds[piece], hi = p->bounds[piece + 1];
        params = add_sat(params, pp_costs_param_bytes(c, lo, hi));
        pp_costs_chunk_memory(c, lo, hi, recompute, &ch[k].mb_bytes, &ch[k].set_bytes);
        /* receive buffers: activations in (not on the first piece), gradients in (not on the
         * last), one per slot, each the boundary's tensor */
        uint64_t in = piece > 0 ? c->layers[lo - 1].activation_bytes : 0;
        uint64_t back = piece < p->P - 1 ? c->layers[hi - 1].activation_bytes : 0;
        transport = add_sat(transport, mul_sat(add_sat(in, back), (uint64_t)slots));
    }

    /* the stage's list in order: kept bytes and workspaces held, the peak of their sum */
    uint64_t kept = 0, held = 0, best = 0, best_kept = 0, best_ws = 0;
    int inflight = 0, best_inflight = 0;
#define MM_AT(extra)                                                                             \
    do {                                                                                         \
        uint64_t now_ = add_sat(add_sat(kept, held), (extra));                                   \
        if (now_ > best) {                                                                       \
            best = now_;                                                                         \
            best_kept = kept;                                                                    \
            best_ws = add_sat(held, (extra));                                                    \
            best_inflight = inflight;                                                            \
        }                                                                                        \
    } while (0)
    for (int i = 0; i < sched->n_instrs[stage]; i++) {
        const pp_instr *in = &sched->instrs[stage][i];
        if (in->chunk < 0 || in->chunk >= p->v)
            continue;
        const mm_chunk *k = &ch[in->chunk];
        switch ((pp_op)in->op) {
        case PP_OP_FWD:
            kept = add_sat(kept, k->mb_bytes);
            inflight++;
            MM_AT(k->set_bytes); /* the forward runs in a workspace, given back at its end */
            break;
        case PP_OP_BWD:
            MM_AT(k->set_bytes);
            kept -= k->mb_bytes < kept ? k->mb_bytes : kept;
            inflight--;
            break;
        case PP_OP_BWD_INPUT:
            held = add_sat(held, k->set_bytes); /* until the weight half */
            MM_AT(0);
            break;
        case PP_OP_BWD_WEIGHT:
            held -= k->set_bytes < held ? k->set_bytes : held;
            kept -= k->mb_bytes < kept ? k->mb_bytes : kept;
            inflight--;
            break;
        default: break;
        }
    }
#undef MM_AT
    out->params_bytes = params;
    out->grads_bytes = params;
    out->optimizer_bytes = mul_sat(params, 2);
    out->kept_bytes = best_kept;
    out->workspace_bytes = best_ws;
    out->activations_bytes = best;
    out->transport_bytes = transport;
    out->total_bytes =
        add_sat(add_sat(mul_sat(params, 4), best), transport);
    out->peak_inflight = best_inflight;
    out->schedule_peak_inflight = peak;
    return PP_OK;
}
