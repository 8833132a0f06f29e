/* memory.c: a stage's memory accounting per purpose (pp_stage_mem, pp_backend.h) with its NVTX
 * counters (docs/nvtx-convention.md "Memory counters"), and the --recompute choice: its parser
 * and the number of recompute workspaces a schedule needs. The backends and the executor update
 * the accounting from the stage's worker thread; the pipeline trainer resolves --recompute. */
#include "pp_backend.h"
#include "pp_nvtx.h"

#include <ctype.h>
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
/* --recompute                                                                                */
/* ---------------------------------------------------------------------------------------- */

/* A decimal index of at most 7 digits at *p; advances p. -1 when there is none. */
static long parse_index(const char **p)
{
    const char *s = *p;
    if (!isdigit((unsigned char)*s))
        return -1;
    long v = 0;
    int n = 0;
    while (isdigit((unsigned char)*s)) {
        if (++n > 7)
            return -2;
        v = v * 10 + (*s - '0');
        s++;
    }
    *p = s;
    return v;
}

/* One item, "N", "N-M", "sN" or "sN-M", of length len at item. */
static pp_status parse_item(const char *spec, const char *item, size_t len,
                            const pp_partition *part, uint8_t *mask)
{
    char buf[32];
    if (len == 0)
        return PP_ERR(PP_ERR_INVALID, "--recompute '%s': an empty item (two commas, or a comma "
                                      "at an end)", spec);
    if (len >= sizeof buf)
        return PP_ERR(PP_ERR_INVALID, "--recompute '%s': item '%.*s...' is too long", spec, 20,
                      item);
    memcpy(buf, item, len);
    buf[len] = '\0';
    const char *p = buf;
    int stages = *p == 's';
    if (stages)
        p++;
    long lo = parse_index(&p), hi = lo;
    if (lo >= 0 && *p == '-') {
        p++;
        hi = parse_index(&p);
    }
    if (lo < 0 || hi < 0 || *p != '\0')
        return PP_ERR(PP_ERR_INVALID,
                      "--recompute '%s': item '%s' is not a layer index, a layer range (1-4) or "
                      "a stage (s0, s1-2); the value is none, full or a comma-separated list of "
                      "those", spec, buf);
    if (hi < lo)
        return PP_ERR(PP_ERR_INVALID, "--recompute '%s': range '%s' ends before it starts", spec,
                      buf);
    if (!part)
        return PP_OK;
    if (stages) {
        if (hi >= part->S)
            return PP_ERR(PP_ERR_INVALID, "--recompute '%s': stage %ld does not exist (%d "
                                          "stages, s0-%d)", spec, hi, part->S, part->S - 1);
        for (int piece = 0; piece < part->P; piece++)
            if (piece % part->S >= lo && piece % part->S <= hi)
                for (int l = part->bounds[piece]; l < part->bounds[piece + 1]; l++)
                    mask[l] = 1;
        return PP_OK;
    }
    if (hi >= part->L)
        return PP_ERR(PP_ERR_INVALID, "--recompute '%s': layer %ld does not exist (the model has "
                                      "%d layers, 0-%d: embedding, blocks, head)",
                      spec, hi, part->L, part->L - 1);
    for (long l = lo; l <= hi; l++)
        mask[l] = 1;
    return PP_OK;
}

pp_status pp_recompute_parse(const char *spec, const pp_partition *part, uint8_t *mask)
{
    if (part && mask)
        memset(mask, 0, (size_t)part->L);
    if (!spec || strcmp(spec, "none") == 0)
        return PP_OK;
    if (strcmp(spec, "full") == 0) {
        if (part && mask)
            memset(mask, 1, (size_t)part->L);
        return PP_OK;
    }
    if (!*spec)
        return PP_ERR(PP_ERR_INVALID, "--recompute needs none, full or a list (e.g. 1-4,7 or "
                                      "s0,s2)");
    const char *item = spec;
    for (;;) {
        const char *comma = strchr(item, ',');
        size_t len = comma ? (size_t)(comma - item) : strlen(item);
        pp_status st = parse_item(spec, item, len, mask ? part : NULL, mask);
        if (st != PP_OK)
            return st;
        if (!comma)
            return PP_OK;
        item = comma + 1;
    }
}

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
