/* memory.c: a stage's memory accounting per purpose (pp_stage_mem, pp_backend.h) with its NVTX
 * counters (docs/nvtx-convention.md "Memory counters"), and the number of recompute workspaces a
 * schedule needs (the --recompute parser is the planning library's, plan/recompute.c). The
 * backends and the executor update the accounting from the stage's worker thread. */
#include "pp_backend.h"
#include "pp_nvtx.h"

#include <stdio.h>
#include <string.h>

static const char *const k_purpose_names[PP_STAGE_MEM_N_PURPOSES] = {
    "params", "grads", "optimizer", "activations", "transport", "workspace"};

/* Static counter ids: unique per (stage, purpose) in the domain, above NVTX's static start. */
#define PP_MEM_COUNTER_ID_BASE (1ull << 24)

const char *pp_stage_mem_purpose_name(pp_stage_mem_purpose p)
{
    return (int)p >= 0 && p < PP_STAGE_MEM_N_PURPOSES ? k_purpose_names[p] : "unknown";
}

int64_t pp_stage_mem_total(const pp_stage_mem *m)
{
    int64_t sum = 0;
    for (int p = 0; p < PP_STAGE_MEM_N_PURPOSES; p++)
        sum += m->cur[p];
    return sum;
}

void pp_stage_mem_set(pp_stage_mem *m, pp_stage_mem_purpose p, int64_t bytes)
{
    if ((int)p < 0 || p >= PP_STAGE_MEM_N_PURPOSES)
        return;
    int changed = m->cur[p] != bytes;
    m->cur[p] = bytes;
    if (bytes > m->peak[p])
        m->peak[p] = bytes;
    int64_t total = pp_stage_mem_total(m);
    if (total > m->peak_total)
        m->peak_total = total;
    if (changed)
        pp_nvtx_counter_sample(m->counter[p], bytes);
}

void pp_stage_mem_add(pp_stage_mem *m, pp_stage_mem_purpose p, int64_t delta)
{
    if ((int)p >= 0 && p < PP_STAGE_MEM_N_PURPOSES)
        pp_stage_mem_set(m, p, m->cur[p] + delta);
}

void pp_stage_mem_announce(pp_stage_mem *m)
{
    for (int p = 0; p < PP_STAGE_MEM_N_PURPOSES; p++) {
        char name[64];
        snprintf(name, sizeof name, "pp.mem.stage%d.%s", m->stage, k_purpose_names[p]);
        uint64_t id = PP_MEM_COUNTER_ID_BASE + (uint64_t)m->stage * PP_STAGE_MEM_N_PURPOSES +
                      (uint64_t)p;
        m->counter[p] = pp_nvtx_counter_register(name, id);
        pp_nvtx_counter_sample(m->counter[p], m->cur[p]);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* recompute workspaces                                                                       */
/* ---------------------------------------------------------------------------------------- */

int pp_recompute_sets(const pp_schedule *sched, int s)
{
    int most = 1;
    for (int c = 0; c < sched->v; c++) {
        int pending = 0; /* input half done, weight half not yet */
        for (int k = 0; k < sched->n_instrs[s]; k++) {
            const pp_instr *in = &sched->instrs[s][k];
            if (in->chunk != c)
                continue;
            int need = 0;
            switch ((pp_op)in->op) {
            case PP_OP_FWD:
            case PP_OP_BWD: need = pending + 1; break;
            case PP_OP_BWD_INPUT: need = ++pending; break;
            case PP_OP_BWD_WEIGHT: pending = pending > 0 ? pending - 1 : 0; break;
            default: break;
            }
            most = need > most ? need : most;
        }
    }
    return most;
}
