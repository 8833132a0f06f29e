/* clock_pass.c: the clock-alignment pass (docs/metrics.md "Clock alignment"), run by the driver
 * before the analysis when the wanted files come from more than one host, or one carries the
 * profiler's clock test hook. It reads every file once (decode.c and steps.c in their
 * collecting mode), pairs each send with its receive as metrics.c does for a step, adds the
 * clock ping-pong's marks, and has clock.c estimate each file's clock against the reference
 * (the file holding stage 0, else the lowest rank); fs[i].clk then maps its timestamps in the
 * analysis pass. Files on one host without the hook share CLOCK_MONOTONIC: nothing is done.
 * The pass keeps the run's transfers in memory (64 bytes each). */
#include "analyzer_internal.h"

#include <stdio.h>

/* Lexicographic order of two keys of n 64-bit fields. */
static int cmp_keys(const uint64_t *x, const uint64_t *y, int n)
{
    for (int i = 0; i < n; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* A signed field as an unsigned key that orders the same way. */
static uint64_t skey(int64_t v) { return (uint64_t)v ^ (UINT64_C(1) << 63); }

/* Marks by message (src, dst, phase, seq), a send before its receive. */
static void sync_key(const sync_mark *m, uint64_t k[5])
{
    k[0] = skey(m->src), k[1] = skey(m->dst), k[2] = skey(m->phase), k[3] = skey(m->seq);
    k[4] = skey(m->recv);
}

static int cmp_sync(const void *a, const void *b)
{
    uint64_t x[5], y[5];
    sync_key(a, x), sync_key(b, y);
    return cmp_keys(x, y, 5);
}

/* Transfers by step and replica (the groups paired together), then by process and time. */
static void collected_key(const pp_aop *o, uint64_t k[5])
{
    k[0] = skey(o->step), k[1] = skey(o->replica), k[2] = skey(o->rank), k[3] = o->t0;
    k[4] = o->t1;
}

static int cmp_collected(const void *a, const void *b)
{
    uint64_t x[5], y[5];
    collected_key(a, x), collected_key(b, y);
    return cmp_keys(x, y, 5);
}

/* Whether the wanted files' clocks need aligning: two or more of them, on several hosts or one
 * with the clock test hook. */
static int clocks_needed(const file_state *fs, size_t n)
{
    size_t wanted = 0, first = SIZE_MAX;
    int needed = 0;
    for (size_t i = 0; i < n; i++) {
        if (fs[i].done)
            continue;
        const pp_trace_header *h = pp_trace_reader_header(fs[i].r);
        if (h->clock_offset_ns != 0 || h->clock_drift != 0.0)
            needed = 1;
        if (first == SIZE_MAX)
            first = i;
        else if (strncmp(fs[first].info->host, fs[i].info->host, sizeof fs[i].info->host) != 0)
            needed = 1;
        wanted++;
    }
    return wanted >= 2 && needed;
}

/* The reference: the file with stage 0, else the lowest rank. */
static int clock_reference(const file_state *fs, const file_state *cs, size_t n)
{
    int ref = -1;
    for (size_t i = 0; i < n; i++) {
        if (fs[i].done)
            continue;
        int better = ref < 0;
        if (!better && (cs[i].min_stage == 0) != (cs[ref].min_stage == 0))
            better = cs[i].min_stage == 0;
        else if (!better)
            better = fs[i].rank < fs[ref].rank;
        if (better)
            ref = (int)i;
    }
    return ref;
}

/* The collected sends and receives, with implied peers now that every stage is known, paired
 * per step and replica into pairs (one per matched send); 0 when out of memory. */
static int pair_transfers(state *st, pp_clock_pair *pairs, size_t *npairs)
{
    int S = an_state_stages(st);
    pp_aop *ops = st->collected.data;
    size_t nops = st->collected.n;
    for (size_t i = 0; i < nops; i++)
        if (ops[i].peer < 0 && S > 0)
            ops[i].peer = an_implied_peer(st, ops[i].kind, ops[i].stage, ops[i].chunk, S);
    if (nops)
        qsort(ops, nops, sizeof *ops, cmp_collected);
    for (size_t g = 0; g < nops;) {
        size_t e = g;
        while (e < nops && ops[e].step == ops[g].step && ops[e].replica == ops[g].replica)
            e++;
        if (!an_match_transfers(st, ops + g, e - g))
            return 0;
        const size_t *match = st->match.data;
        for (size_t k = 0; k < e - g; k++) {
            const pp_aop *snd = &ops[g + k];
            if ((snd->kind != PP_AOP_SEND_ACT && snd->kind != PP_AOP_SEND_GRAD) ||
                match[k] == SIZE_MAX)
                continue;
            const pp_aop *rcv = &ops[g + match[k]];
            pairs[(*npairs)++] = (pp_clock_pair){.src = snd->rank, .dst = rcv->rank,
                                                 .send_ns = snd->t0, .recv_ns = rcv->t1};
        }
        g = e;
    }
    return 1;
}

/* The ping-pong's marks: a send mark and the receive mark of the same message, into pairs;
 * returns how many. */
static size_t pair_syncs(state *st, pp_clock_pair *pairs, size_t *npairs)
{
    sync_mark *sm = st->syncs.data;
    if (st->syncs.n)
        qsort(sm, st->syncs.n, sizeof *sm, cmp_sync);
    size_t n_sync = 0;
    for (size_t i = 0; i + 1 < st->syncs.n; i++) {
        const sync_mark *x = &sm[i], *y = &sm[i + 1];
        if (x->recv || !y->recv || x->src != y->src || x->dst != y->dst ||
            x->phase != y->phase || x->seq != y->seq || x->file == y->file)
            continue;
        pairs[(*npairs)++] = (pp_clock_pair){.src = x->file, .dst = y->file, .send_ns = x->ts,
                                             .recv_ns = y->ts};
        n_sync++;
        i++;
    }
    return n_sync;
}

/* Each file's fitted clock into fs[i].clk and its pp_afile, with a warning for the ones that
 * stay unaligned or fit badly. */
static void apply_fits(file_state *fs, size_t n, int ref, const pp_clock_fit *fits,
                       pp_analysis *a)
{
    for (size_t i = 0; i < n; i++) {
        if (fs[i].done)
            continue;
        pp_afile *info = fs[i].info;
        fs[i].clk = fits[i];
        info->clock_status = fits[i].status;
        info->clock_ref = fs[ref].rank >= 0 ? fs[ref].rank : ref;
        info->clock_offset_ns = fits[i].offset_ns;
        info->clock_drift = fits[i].drift;
        info->clock_uncertainty_ns = fits[i].uncertainty_ns;
        info->aligned = fits[i].status != PP_CLOCK_UNBOUNDED;
        if (fits[i].status == PP_CLOCK_UNBOUNDED)
            an_warn(a, "%s: clock offset unbounded (%llu message(s) to it, %llu from it from "
                       "aligned processes need both directions); its times stay on its own "
                       "clock",
                    info->path, (unsigned long long)fits[i].n_fwd,
                    (unsigned long long)fits[i].n_bwd);
        else if (fits[i].violation_ns > 0)
            an_warn(a, "%s: no clock line satisfies every message (best misses by %.1f us): "
                       "mismatched pairs or a clock that is not linear",
                    info->path, fits[i].violation_ns * 1e-3);
    }
}

pp_status an_clock_align(file_state *fs, size_t n, pp_analysis *a, const pp_analysis_options *o)
{
    if (!clocks_needed(fs, n))
        return PP_OK;
    pp_status rc = PP_OK;
    pass p;
    pp_clock_pair *pairs = NULL;
    pp_clock_fit *fits = calloc(n, sizeof *fits);
    uint64_t *mono0 = calloc(n, sizeof *mono0);
    if (!an_pass_open(&p, fs, n, o) || !fits || !mono0) {
        rc = PP_ERR(PP_ERR_NOMEM, "out of memory aligning clocks");
        goto done;
    }
    /* every wanted file read through, its transfers and marks collected */
    p.st.collect = 1;
    for (size_t i = 0; i < n; i++) {
        mono0[i] = fs[i].r ? pp_trace_reader_header(fs[i].r)->mono_ns : 0;
        while (!p.fs[i].done && an_read_block(&p.st, &p.fs[i]))
            ;
    }
    int ref = clock_reference(fs, p.fs, n);
    size_t npairs = 0;
    pairs = malloc(sizeof *pairs * (p.st.collected.n + p.st.syncs.n + 1));
    if (!pairs || !pair_transfers(&p.st, pairs, &npairs)) {
        rc = PP_ERR(PP_ERR_NOMEM, "out of memory aligning clocks");
        goto done;
    }
    a->clock_sync_pairs = pair_syncs(&p.st, pairs, &npairs);
    rc = pp_clock_estimate(pairs, npairs, n, ref, mono0, fits);
    if (rc == PP_OK)
        apply_fits(fs, n, ref, fits, a);
done:
    an_pass_close(&p, n);
    free(pairs);
    free(fits);
    free(mono0);
    return rc;
}
