/* extract.c: measured run -> cost file, partition and transfer model (pp_extract.h). Per-layer
 * times are medians of the layer ranges over the analyzed steps; activation and parameter sizes
 * come from the job's layer marks, else from the bytes seen on the links; the link model
 * latency + bytes / bandwidth is fitted to the timed transfers. */
#include "pp_extract.h"
#include "pp_dialect.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void note(pp_extract *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(pp_extract *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pp_append_linev(e->notes, sizeof e->notes, fmt, ap);
    va_end(ap);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void pp_extract_free(pp_extract *e)
{
    if (!e)
        return;
    if (e->run_costs != e->costs)
        pp_costs_destroy(e->run_costs);
    pp_costs_destroy(e->costs);
    pp_free(e->recompute);
    pp_partition_free(&e->partition);
    pp_sim_noise_free(&e->noise);
    pp_free(e->busy_share);
    pp_free(e->layer_p95_ratio);
    memset(e, 0, sizeof *e);
}

/* The run's partition, from which stage and chunk each layer's ranges ran on. */
static pp_status infer_partition(const pp_analysis *a, int L, pp_partition *out)
{
    int S = a->S, v = a->v > 0 ? a->v : 1;
    int *piece = malloc(sizeof(int) * (size_t)L);
    if (!piece)
        return PP_ERR(PP_ERR_NOMEM, "out of memory");
    for (int l = 0; l < L; l++)
        piece[l] = -1;
    /* the kept timeline's layer ops carry stage, chunk and (in chunk) the layer; their chunk
     * field is the layer index, so the op's own chunk comes from the matching op */
    for (size_t i = 0; i < a->n_layer_ops; i++) {
        const pp_aop *o = &a->layer_ops[i];
        int l = o->chunk;
        if (l < 0 || l >= L)
            continue;
        int c = 0;
        /* the enclosing compute op of this layer op: same stage and mb, covering its time */
        for (size_t k = 0; k < a->n_ops; k++) {
            const pp_aop *x = &a->ops[k];
            if (x->stage == o->stage && x->mb == o->mb && x->t0 <= o->t0 && o->t1 <= x->t1 &&
                pp_aop_is_compute((pp_aop_kind)x->kind)) {
                c = x->chunk;
                break;
            }
        }
        pp_schedule sc = {.S = S, .placement = a->placement};
        piece[l] = c >= 0 && c < v && o->stage >= 0 && o->stage < S
                       ? pp_schedule_piece(&sc, o->stage, c)
                       : -1;
    }
    pp_status st = PP_OK;
    int P = S * v;
    int *bounds = malloc(sizeof(int) * (size_t)(P + 1));
    if (!bounds) {
        free(piece);
        return PP_ERR(PP_ERR_NOMEM, "out of memory");
    }
    /* a piece without layers: a torch stage module compiled as a whole hides its blocks */
    const char *hidden = a->torch_compiled_modules
                             ? " (its stage module ran compiled as a whole: torch.compile hides "
                               "the blocks inside; compile each block instead, docs/torch.md)"
                             : "";
    for (int l = 0; l < L && st == PP_OK; l++) {
        if (piece[l] < 0)
            st = PP_ERR(PP_ERR_INVALID, "layer %d has no ranges in the analyzed steps: the "
                                        "partition cannot be inferred",
                        l);
        else if (l > 0 && piece[l] > piece[l - 1] + 1)
            st = PP_ERR(PP_ERR_INVALID,
                        "piece %d ran no layer (layer %d runs on piece %d, layer %d on piece "
                        "%d)%s: the partition cannot be inferred",
                        piece[l - 1] + 1, l - 1, piece[l - 1], l, piece[l], hidden);
        else if (l > 0 && piece[l] != piece[l - 1] && piece[l] != piece[l - 1] + 1)
            st = PP_ERR(PP_ERR_INVALID,
                        "layer %d runs on piece %d right after layer %d on piece %d: not a "
                        "contiguous pipeline partition",
                        l, piece[l], l - 1, piece[l - 1]);
    }
    if (st == PP_OK && (piece[0] != 0 || piece[L - 1] != P - 1))
        st = PP_ERR(PP_ERR_INVALID,
                    "the layers cover pieces %d..%d, expected 0..%d: piece %d ran no layer%s",
                    piece[0], piece[L - 1], P - 1, piece[0] != 0 ? 0 : P - 1, hidden);
    if (st == PP_OK) {
        bounds[0] = 0;
        for (int l = 1; l < L; l++)
            if (piece[l] != piece[l - 1])
                bounds[piece[l]] = l;
        bounds[P] = L;
        st = pp_partition_from_bounds(bounds, P + 1, L, S, v, out);
    }
    free(bounds);
    free(piece);
    return st;
}

/* latency + bytes / bandwidth, least squares over the links' timed transfers. */
static void fit_links(const pp_analysis *a, pp_extract *e)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0, n = 0;
    double bw_sum = 0, bw_n = 0;
    double xmin = INFINITY, xmax = 0;
    for (size_t i = 0; i < a->n_links; i++) {
        const pp_alink *l = &a->links[i];
        if (!l->timed || !l->messages)
            continue;
        double x = (double)l->bytes / (double)l->messages; /* bytes per message */
        double y = l->latency_ns.median;                     /* ns per message */
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
        n += 1;
        xmin = x < xmin ? x : xmin;
        xmax = x > xmax ? x : xmax;
        if (l->bandwidth_GBps > 0) {
            bw_sum += l->bandwidth_GBps;
            bw_n += 1;
        }
    }
    e->costs->p2p_GBps = 0;
    e->costs->p2p_latency_us = 0;
    if (n == 0) {
        note(e, "no timed transfers: the transfer model is free (0 latency, no bandwidth term)");
        return;
    }
    if (n >= 2 && xmax > 1.2 * xmin) {
        double den = n * sxx - sx * sx;
        double slope = (n * sxy - sx * sy) / den; /* ns per byte */
        double icpt = (sy - slope * sx) / n;      /* ns */
        if (slope > 0 && icpt >= 0) {
            e->costs->p2p_GBps = 1.0 / slope;
            e->costs->p2p_latency_us = icpt * 1e-3;
            e->latency_fitted = 1;
            note(e, "transfers: latency %.1f us + bytes / %.3f GB/s, fitted over %.0f links",
                 icpt * 1e-3, 1.0 / slope, n);
            return;
        }
    }
    if (xmax == 0 || bw_n == 0) {
        /* Every message was empty (a job that sends only a signal, or reports no sizes): a
         * transfer is pure latency and no bandwidth can be measured, so the model is the mean
         * per-message time with no bandwidth term (p2p_GBps 0), not 0 bytes / 0 s. */
        e->costs->p2p_latency_us = sy / n * 1e-3;
        note(e, "transfers: every timed message carried 0 bytes: latency %.1f us per message "
                "(mean over %.0f links), no bandwidth term (it cannot be measured without "
                "bytes)",
             e->costs->p2p_latency_us, n);
        return;
    }
    /* One message size: latency and bandwidth cannot be told apart; the effective bandwidth
     * (latency included) predicts that size exactly. */
    e->costs->p2p_GBps = bw_sum / bw_n;
    note(e, "transfers: one message size seen, effective bandwidth %.3f GB/s with the latency "
            "folded in",
         e->costs->p2p_GBps);
}

/* Per kind (0 activations, 1 gradients), the links' median per-message times of their sends
 * (recv = 0: pp_alink.send_time_ns) or receives (recv = 1: recv_time_ns), weighted by how many
 * each median is over, in us (0 when none), and those counts. */
static void link_medians(const pp_analysis *a, int recv, double us[2], double n[2])
{
    double sum[2] = {0, 0};
    n[0] = n[1] = 0;
    for (size_t i = 0; i < a->n_links; i++) {
        const pp_alink *l = &a->links[i];
        const pp_astats *x = recv ? &l->recv_time_ns : &l->send_time_ns;
        double med = x->median;
        if (!x->count || !(med >= 0) || !isfinite(med))
            continue;
        int g = l->grad ? 1 : 0;
        sum[g] += med * (double)x->count;
        n[g] += (double)x->count;
    }
    for (int g = 0; g < 2; g++)
        us[g] = n[g] > 0 ? sum[g] / n[g] * 1e-3 : 0;
}

/* The sender's own time per message (send_act_us, send_grad_us): for each kind, the links'
 * median send-range durations over the sends that waited for no receiver (pp_alink.send_time_ns),
 * weighted by their counts. A send that waits for its receiver (a rendezvous, a full mailbox)
 * is waiting, which the schedule's dependencies give, not the send's cost; the median keeps a
 * few sends that waited in other ways (for room in a queue) from setting it. */
static void fit_sends(const pp_analysis *a, pp_extract *e)
{
    double us[2], n[2];
    link_medians(a, 0, us, n);
    e->costs->send_act_us = us[0];
    e->costs->send_grad_us = us[1];
    if (n[0] > 0 || n[1] > 0)
        note(e, "sends: the sender's own time per message %.1f us (activations), %.1f us "
                "(gradients), medians",
             us[0], us[1]);
}

/* The receiver's own time per message (recv_act_us, recv_grad_us): for each kind, the links'
 * median receive-range durations over the receives that began after their message had been
 * handed over (pp_alink.recv_time_ns), weighted by their counts. A receive whose receiver came
 * first waits for the message, which the link model times; one that comes later still takes
 * its own time (posting it, taking the message), which neither the link nor the ops hold. */
static void fit_receives(const pp_analysis *a, pp_extract *e)
{
    double us[2], n[2];
    link_medians(a, 1, us, n);
    if (!(n[0] > 0 || n[1] > 0))
        return;
    /* A kind none of whose receives came after its message (every one waited: the receivers
     * of gradients where the later stages are the slow ones) shows no time of its own; another
     * layout may have them come later, and the other kind's time is the estimate for them. */
    for (int g = 0; g < 2; g++)
        if (n[g] == 0)
            us[g] = us[1 - g];
    e->costs->recv_act_us = us[0];
    e->costs->recv_grad_us = us[1];
    note(e, "receives: the receiver's own time per message that was there %.1f us "
            "(activations, %.0f receives%s), %.1f us (gradients, %.0f%s), medians",
         us[0], n[0], n[0] > 0 ? "" : ": the gradients' figure", us[1], n[1],
         n[1] > 0 ? "" : ": the activations' figure");
}

/* Per-layer costs: medians of the layer ranges; sizes from the layer marks, else activations
 * from the bytes seen on the links. Notes the assumptions. */
/* The activation bytes a message carried (the last activation link's mean), 0 when none. */
static uint64_t activation_seen(const pp_analysis *a)
{
    uint64_t seen = 0;
    for (size_t i = 0; i < a->n_links; i++)
        if (!a->links[i].grad && a->links[i].messages)
            seen = a->links[i].bytes / a->links[i].messages;
    return seen;
}

static pp_status extract_layers(const pp_analysis *a, int L, pp_extract *e)
{
    int split = 0, have_info = 1;
    uint64_t act_seen = activation_seen(a);
    for (int l = 0; l < L; l++) {
        const pp_alayer *al = NULL;
        for (size_t i = 0; i < a->n_layers; i++)
            if (a->layers[i].layer == l)
                al = &a->layers[i];
        pp_layer_cost *c = &e->costs->layers[l];
        snprintf(c->name, sizeof c->name, "%s", al && al->name[0] ? al->name : "layer");
        if (!al || !al->fwd_ns.count)
            return PP_ERR(PP_ERR_INVALID, "layer %d has no forward ranges in the analyzed steps",
                          l);
        c->fwd_us = al->fwd_ns.median * 1e-3;
        double b = al->bwd_ns.median * 1e-3, w = al->bwd_weight_ns.median * 1e-3;
        if (!al->bwd_ns.count && !al->bwd_weight_ns.count) {
            c->bwd_us = -1; /* no backward ranges: shared out of its stage's (fill_backwards) */
            c->has_split = 1; /* halves assumed, as below */
        } else if (al->bwd_weight_ns.count) {
            split = 1;
            c->bwd_input_us = b;
            c->bwd_weight_us = w;
            c->bwd_us = b + w;
            c->has_split = 1;
        } else {
            c->bwd_us = b;
            c->bwd_input_us = b / 2;
            c->bwd_weight_us = b / 2;
            c->has_split = 1; /* halves assumed: see the note */
        }
        if (al->has_info) {
            c->param_bytes = al->param_bytes;
            c->activation_bytes = al->activation_bytes;
            c->has_kept = al->has_kept; /* marks written before the memory keys: 0 */
            c->kept_bytes = al->kept_bytes;
            c->input_bytes = al->input_bytes;
        } else {
            have_info = 0;
            c->activation_bytes = l == L - 1 ? 0 : act_seen;
        }
    }
    if (!split)
        note(e, "backward not split in this run: input and weight halves assumed equal");
    e->has_param_bytes = have_info;
    if (!have_info)
        note(e, "no layer marks: activation sizes taken from the links (%llu bytes), parameter "
                "sizes unknown (no memory model)",
             (unsigned long long)act_seen);
    return PP_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The median duration (us) of piece (stage s, chunk c)'s compute ops of kind k over every
 * analyzed step, as the layers' medians are: with one chunk per stage the stage's statistics,
 * with several its chunk's (pp_astage.chunk_ns); else (a stage the statistics lack) over the
 * kept timeline. 0 when it has none. (The kept timeline is one step by default: four ops at
 * M = 4, whose median read a torch GPipe stage's backward 5.7% below its all-step median and
 * its run's own layout 8.3% fast, and a torch Interleaved1F1B run's self-check anywhere from
 * -18% to +48% on three captures of one job.) */
static pp_status piece_op_us(const pp_analysis *a, int s, int c, int k, double *us)
{
    size_t n = 0;
    *us = 0;
    if (s >= 0 && s < a->S && k >= PP_AOP_FWD && k <= PP_AOP_BWD_WEIGHT) {
        const pp_astage *g = &a->stages[s];
        const pp_astats *x = pp_astage_chunk(g, c, k);
        if (!x && a->v <= 1 && c == 0)
            x = k == PP_AOP_FWD         ? &g->fwd_ns
                : k == PP_AOP_BWD       ? &g->bwd_ns
                : k == PP_AOP_BWD_INPUT ? &g->bwd_input_ns
                                        : &g->bwd_weight_ns;
        if (x && x->count) {
            *us = x->median * 1e-3;
            return PP_OK;
        }
    }
    for (size_t i = 0; i < a->n_ops; i++)
        n += a->ops[i].kind == k && a->ops[i].stage == s && a->ops[i].chunk == c;
    if (!n)
        return PP_OK;
    uint64_t *d = malloc(n * sizeof *d);
    if (!d)
        return PP_ERR(PP_ERR_NOMEM, "out of memory");
    size_t j = 0;
    for (size_t i = 0; i < a->n_ops; i++) {
        const pp_aop *o = &a->ops[i];
        if (o->kind == k && o->stage == s && o->chunk == c)
            d[j++] = o->t1 > o->t0 ? o->t1 - o->t0 : 0;
    }
    qsort(d, n, sizeof *d, cmp_u64);
    *us = (n % 2 ? (double)d[n / 2] : 0.5 * ((double)d[n / 2 - 1] + (double)d[n / 2])) * 1e-3;
    free(d);
    return PP_OK;
}

/* Layers without backward ranges (bwd_us < 0: a torch trace's module events run only in the
 * forward; autograd calls no module). Per piece whose layers all lack them: the piece's
 * measured backward op (median: piece_op_us; else its stage's mean backward) is
 * shared among its layers in proportion to their forward times, and their forward times are
 * scaled to add up to the piece's forward op, so that what the op holds beyond its modules (the
 * stage's own work: loss, hand-offs) is charged too and the run's own layout replays to its
 * measured step. Where some layers of a piece have backward ranges, the others get the known
 * layers' backward-to-forward ratio. */
static pp_status fill_backwards(const pp_analysis *a, pp_extract *e)
{
    const pp_partition *part = &e->partition;
    pp_costs *c = e->costs;
    int filled = 0, scaled = 0;
    for (int p = 0; p < part->P; p++) {
        int s = p % part->S, chunk = p / part->S, lo = part->bounds[p], hi = part->bounds[p + 1];
        double f_missing = 0, f_known = 0, b_known = 0;
        int missing = 0;
        for (int l = lo; l < hi; l++) {
            if (c->layers[l].bwd_us < 0) {
                f_missing += c->layers[l].fwd_us;
                missing++;
            } else {
                f_known += c->layers[l].fwd_us;
                b_known += c->layers[l].bwd_us;
            }
        }
        if (!missing)
            continue;
        if (f_missing <= 0)
            return PP_ERR(PP_ERR_INVALID, "stage %d chunk %d: its layers have no forward time to "
                                          "share its backward by",
                          s, chunk);
        double per_fwd = 0, fwd_scale = 1; /* backward us per forward us; forward factor */
        if (f_known > 0) {
            per_fwd = b_known / f_known;
        } else {
            double f_op, b_op, bi_op, bw_op;
            pp_status st;
            if ((st = piece_op_us(a, s, chunk, PP_AOP_FWD, &f_op)) != PP_OK ||
                (st = piece_op_us(a, s, chunk, PP_AOP_BWD, &b_op)) != PP_OK ||
                (st = piece_op_us(a, s, chunk, PP_AOP_BWD_INPUT, &bi_op)) != PP_OK ||
                (st = piece_op_us(a, s, chunk, PP_AOP_BWD_WEIGHT, &bw_op)) != PP_OK)
                return st;
            if (b_op <= 0)
                b_op = bi_op + bw_op;
            if (b_op <= 0 && s < a->S) {
                /* no op of this piece kept: the stage's mean over its chunks */
                const pp_astage *g = &a->stages[s];
                double per_chunk_ns = g->bwd_ns.count        ? g->bwd_ns.mean
                                      : g->bwd_input_ns.count ? g->bwd_input_ns.mean +
                                                                    g->bwd_weight_ns.mean
                                                              : 0;
                b_op = per_chunk_ns * 1e-3;
            }
            if (b_op <= 0)
                return PP_ERR(PP_ERR_INVALID, "stage %d chunk %d has neither backward ranges "
                                              "nor layers with backward ranges: no backward cost",
                              s, chunk);
            if (f_op > 0) {
                fwd_scale = f_op / f_missing;
                scaled++;
            }
            per_fwd = b_op / f_missing; /* per unscaled forward us */
        }
        for (int l = lo; l < hi; l++) {
            pp_layer_cost *lc = &c->layers[l];
            if (lc->bwd_us >= 0)
                continue;
            lc->bwd_us = per_fwd * lc->fwd_us;
            lc->bwd_input_us = lc->bwd_us / 2;
            lc->bwd_weight_us = lc->bwd_us / 2;
            lc->fwd_us *= fwd_scale;
        }
        filled += missing;
    }
    if (filled)
        note(e, "%d layer(s) without backward ranges: their piece's backward shared out in "
                "proportion to their forward times%s",
             filled, scaled ? ", and their forward times scaled to add up to the piece's "
                              "forward op" : "");
    return PP_OK;
}

/* A layer's cost of one kind: 0 forward, 1 whole backward, 2 its input part, 3 its weight part. */
static double *layer_part(pp_layer_cost *c, int part)
{
    return part == 0 ? &c->fwd_us : part == 1 ? &c->bwd_us
                                  : part == 2 ? &c->bwd_input_us
                                              : &c->bwd_weight_us;
}

/* The sum of that kind over layers [lo, hi). */
static double layers_sum(const pp_costs *c, int lo, int hi, int part)
{
    double s = 0;
    for (int l = lo; l < hi; l++)
        s += *layer_part(&c->layers[l], part);
    return s;
}

/* Lower and upper limits of a stage op's median against its layers' summed medians: beyond them
 * the layer ranges do not describe the op (ranges nested in each other, layers of another
 * stage) and the layers are left as measured. */
#define OP_SCALE_MIN 0.5
#define OP_SCALE_MAX 2.0

/* Each piece's layers scaled, per kind, so that they add up to the median of the piece's op
 * (docs/cost-file.md, "How pprof-tune --export-costs fills the layers"). The model replays a
 * stage op at the sum of its layers' costs and varies it by factors relative to the op's median
 * (docs/sim-dist.md), so the sum must be that median; a sum of medians is not one: an op's layers
 * vary partly independently and skewed, so the median of their sum lies above (the README's
 * main job: 1.2-2% for the backward on a 2-core AMD VM), and the op holds its own work between
 * its layers' ranges (5-15 us there). With several chunks per stage each piece by its own
 * chunk's ops over every step (pp_astage.chunk_ns), as the layers' medians are. */
static pp_status scale_to_ops(const pp_analysis *a, pp_extract *e)
{
    const pp_partition *part = &e->partition;
    pp_costs *c = e->costs;
    if (part->S != a->S)
        return PP_OK;
    double lo_r[2] = {INFINITY, INFINITY}, hi_r[2] = {-INFINITY, -INFINITY};
    char skipped[160] = "";
    size_t sn = 0;
    for (int p = 0; p < part->P; p++) {
        /* piece p is stage p % S's chunk p / S (the looped placement the tuner models) */
        int s = p % part->S, chunk = p / part->S, lo = part->bounds[p], hi = part->bounds[p + 1];
        double op[4];
        pp_status st;
        if ((st = piece_op_us(a, s, chunk, PP_AOP_FWD, &op[0])) != PP_OK ||
            (st = piece_op_us(a, s, chunk, PP_AOP_BWD, &op[1])) != PP_OK ||
            (st = piece_op_us(a, s, chunk, PP_AOP_BWD_INPUT, &op[2])) != PP_OK ||
            (st = piece_op_us(a, s, chunk, PP_AOP_BWD_WEIGHT, &op[3])) != PP_OK)
            return st;
        /* a whole backward op scales both parts of its layers; split ones (zb-h1) each their own */
        int whole = op[1] > 0;
        double r[4] = {1, 1, 1, 1};
        for (int k = 0; k < 4; k++) {
            if ((k == 1 && !whole) || (k >= 2 && whole))
                continue;
            double sum = layers_sum(c, lo, hi, k);
            if (!(op[k] > 0) || !(sum > 0) || !isfinite(op[k] / sum))
                continue;
            double ratio = op[k] / sum;
            if (ratio < OP_SCALE_MIN || ratio > OP_SCALE_MAX) {
                e->layers_unscaled++;
                if (sn < sizeof skipped)
                    sn += (size_t)snprintf(skipped + sn, sizeof skipped - sn, "%s%s%d %s x%.3g",
                                           sn ? ", " : "", part->v > 1 ? "piece " : "",
                                           part->v > 1 ? p : s, k == 0 ? "fwd" : "bwd", ratio);
                continue;
            }
            r[k] = ratio;
            int j = k ? 1 : 0;
            lo_r[j] = fmin(lo_r[j], ratio);
            hi_r[j] = fmax(hi_r[j], ratio);
        }
        for (int l = lo; l < hi; l++) {
            pp_layer_cost *y = &c->layers[l];
            y->fwd_us *= r[0];
            if (whole) {
                y->bwd_us *= r[1];
                y->bwd_input_us *= r[1];
                y->bwd_weight_us *= r[1];
            } else {
                y->bwd_input_us *= r[2];
                y->bwd_weight_us *= r[3];
                y->bwd_us = y->bwd_input_us + y->bwd_weight_us;
            }
        }
    }
    /* said where a factor is not 1 to the note's precision (a torch trace's layers were made
     * to add up to their ops by fill_backwards already) */
    int moved = 0;
    for (int j = 0; j < 2; j++)
        moved |= lo_r[j] <= hi_r[j] && (fabs(lo_r[j] - 1) >= 5e-5 || fabs(hi_r[j] - 1) >= 5e-5);
    if (moved)
        note(e, "layers scaled to add up to their piece's op (median): forward x%.4f..%.4f, "
                "backward x%.4f..%.4f",
             lo_r[0] <= hi_r[0] ? lo_r[0] : 1, lo_r[0] <= hi_r[0] ? hi_r[0] : 1,
             lo_r[1] <= hi_r[1] ? lo_r[1] : 1, lo_r[1] <= hi_r[1] ? hi_r[1] : 1);
    if (sn)
        note(e, "layers left as measured where their sum is far from their piece's op: %s%s",
             part->v > 1 ? "" : "stage ", skipped);
    return PP_OK;
}

/* The median of v[0..n) (sorted in place); 0 when n = 0. */
static double median_of(double *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A per-stage time against the stage's parameters: y[s] (us, has[s] = 0: not measured) against
 * x[s] (MB = 1e6 bytes). Stages whose parameters differ by 25% or more fit fixed + per_MB x MB
 * by least squares (both kept >= 0); otherwise the fixed part and the slope cannot be told
 * apart and the time is taken as proportional to the parameters (an optimizer's work, an
 * all-reduce's bytes): slope = sum of times / sum of MB. Without parameter sizes (no layer
 * marks: has_bytes = 0), the slowest stage's time for every stage. */
static void fit_per_stage(const double *y, const double *x, const int *has, int S, int has_bytes,
                          double *fixed_us, double *per_mb_us)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0, lo = HUGE_VAL, hi = 0, slowest = 0;
    int n = 0;
    for (int s = 0; s < S; s++) {
        if (!has[s])
            continue;
        slowest = y[s] > slowest ? y[s] : slowest;
        sx += x[s];
        sy += y[s];
        sxx += x[s] * x[s];
        sxy += x[s] * y[s];
        lo = x[s] < lo ? x[s] : lo;
        hi = x[s] > hi ? x[s] : hi;
        n++;
    }
    *fixed_us = slowest;
    *per_mb_us = 0;
    if (!n || !has_bytes || hi <= 0)
        return;
    double den = n * sxx - sx * sx;
    if (n >= 2 && hi >= 1.25 * lo && den > 0) {
        double k = (n * sxy - sx * sy) / den, c0 = (sy - k * sx) / n;
        if (k < 0) { /* the time does not grow with the parameters: a constant */
            k = 0;
            c0 = sy / n;
        } else if (c0 < 0) { /* through the origin */
            c0 = 0;
            k = sxy / sxx;
        }
        *fixed_us = c0;
        *per_mb_us = k;
    } else {
        *fixed_us = 0;
        *per_mb_us = sy / sx;
    }
}

/* A per-stage term fitted against the stages' parameters (fit_per_stage): the median of each
 * stage's `which` statistic (0: its optimizer ops, 1: its data-parallel all-reduce per step),
 * in us. 0 and 0 when no stage measured it, or out of memory. */
static void fit_stage_term(const pp_analysis *a, const pp_extract *e, int which,
                           double *fixed_us, double *per_mb_us)
{
    int S = a->S < e->partition.S ? a->S : e->partition.S;
    *fixed_us = *per_mb_us = 0;
    if (S <= 0)
        return;
    double *y = calloc(2 * (size_t)S, sizeof *y);
    int *has = calloc((size_t)S, sizeof *has);
    if (!y || !has) {
        free(y);
        free(has);
        return;
    }
    double *x = y + S;
    for (int s = 0; s < S; s++) {
        x[s] = (double)pp_costs_stage_param_bytes(e->costs, &e->partition, s) * 1e-6;
        const pp_astats *o = which ? &a->stages[s].allreduce_ns : &a->stages[s].opt_ns;
        has[s] = o->count > 0;
        y[s] = o->median * 1e-3;
    }
    fit_per_stage(y, x, has, S, e->has_param_bytes, fixed_us, per_mb_us);
    free(y);
    free(has);
}

/* The optimizer step's cost, in its named terms (docs/cost-file.md):
 * - optimizer_us + optimizer_us_per_MB x the stage's parameters: fit_stage_term;
 * - dp_allreduce_us + dp_allreduce_us_per_MB x the stage's parameters: the data-parallel
 *   gradient all-reduce each stage waits for before the barrier (pp_astage.allreduce_ns: the
 *   part its compute does not hide), where the run has replicas: fit_stage_term;
 * - grad_norm_us: the gradient norm and the barrier before the optimizer step (pptrain's
 *   all-reduce of the norm), timed on the stage that reaches it last, which waits for no other
 *   there (pp_stage_step.pre_opt_ns): median over steps. With a data-parallel all-reduce in
 *   front of it, each stage's time before its optimizer step less its own all-reduce, the least
 *   over the stages (the one that reached the barrier last waited for no other);
 * - step_fixed_us: the time every step costs outside the pipeline's ops whatever the layout (the
 *   job's loop, data loading, a framework's own bookkeeping, docs/metrics.md), so that the
 *   simulator's steps compare with the measured period. Per step the larger of the gap between
 *   steps (the period minus the steps' window: a job whose stages meet at a barrier before their
 *   optimizer, whose loop runs between the windows) and the time outside its ops of the stage
 *   whose ops ended last (pp_stage_step.outside_ns, less its data-parallel all-reduce where that
 *   lies outside its ops, after the last one, as in a job without optimizer ops: it has its own
 *   term; a job without a barrier, whose steps run into each other, leaves no gap; the pacing
 *   stage waits for no other then); median over steps of each. */
static void extract_optimizer(const pp_analysis *a, pp_extract *e)
{
    fit_stage_term(a, e, 0, &e->costs->optimizer_us, &e->costs->optimizer_us_per_MB);
    int dp_ar = 0;
    for (int s = 0; s < a->S; s++)
        dp_ar |= a->stages[s].allreduce_ns.count > 0;
    if (dp_ar)
        fit_stage_term(a, e, 1, &e->costs->dp_allreduce_us, &e->costs->dp_allreduce_us_per_MB);
    double gap = 0, outside = 0, pre = 0;
    double *g = a->n_steps ? malloc(3 * a->n_steps * sizeof *g) : NULL;
    if (g) {
        double *o = g + a->n_steps, *q = o + a->n_steps;
        size_t no = 0, nq = 0;
        for (size_t i = 0; i < a->n_steps; i++) {
            const pp_astep *sp = &a->steps[i];
            g[i] = sp->window_ns > 0 ? sp->step_ns - sp->window_ns : 0;
            double least = HUGE_VAL;
            for (int s = 0; s < a->S && sp->stage; s++) {
                const pp_stage_step *ss = &sp->stage[s];
                /* without optimizer ops (a job that marks none: a torch schedule stepping an
                 * optimizer other than torch.optim's) the all-reduce after the last op is
                 * outside the ops' span; with them it is inside, before the step */
                if (ss->last_end && ss->outside_ns >= 0)
                    o[no++] = dp_ar && !a->stages[s].opt_ns.count
                                  ? fmax(ss->outside_ns - ss->allreduce_ns, 0)
                                  : ss->outside_ns;
                if (!dp_ar && ss->last_to_opt && ss->pre_opt_ns >= 0)
                    q[nq++] = ss->pre_opt_ns;
                if (dp_ar && ss->pre_opt_ns >= 0)
                    least = fmin(least, fmax(ss->pre_opt_ns - ss->allreduce_ns, 0));
            }
            if (least < HUGE_VAL)
                q[nq++] = least;
        }
        gap = median_of(g, a->n_steps);
        gap = gap > 0 ? gap : 0;
        outside = median_of(o, no);
        /* the last op's own gap (op_gap_us, extract_op_gap) is charged with the op */
        pre = fmax(median_of(q, nq) - e->costs->op_gap_us * 1e3, 0);
        free(g);
    }
    double fixed = outside > gap ? outside : gap;
    size_t apart = 0, together = 0;
    for (size_t i = 0; i < a->n_steps; i++) {
        apart += a->steps[i].opt_barrier == 0;
        together += a->steps[i].opt_barrier == 1;
    }
    e->no_barrier = apart > together;
    e->between_steps_ns = fixed;
    e->costs->grad_norm_us = pre * 1e-3;
    e->costs->step_fixed_us = fixed * 1e-3;
    if (e->costs->optimizer_us_per_MB > 0)
        note(e, "optimizer step per stage: %.3f ms + %.3f ms per MB of its parameters",
             e->costs->optimizer_us * 1e-3, e->costs->optimizer_us_per_MB * 1e-3);
    if (dp_ar)
        note(e, "data-parallel gradient all-reduce per stage before the optimizer's barrier "
                "(%d replicas): %.3f ms + %.3f ms per MB of its parameters%s",
             a->dp, e->costs->dp_allreduce_us * 1e-3, e->costs->dp_allreduce_us_per_MB * 1e-3,
             e->has_param_bytes ? "" : " (no parameter sizes: the slowest stage's for every "
                                       "stage)");
    if (pre > 0)
        note(e, "%.3f ms a step %s", pre * 1e-6,
             e->no_barrier ? "between the last stage's work and its optimizer step (the run's "
                             "stages step their optimizers alone, with no barrier)"
                           : "for the gradient norm and the barrier before the optimizer");
    if (fixed > 0)
        note(e, "%.3f ms a step outside the pipeline's ops (the job's own loop and framework "
                "time, %s) is charged to the optimizer step",
             fixed * 1e-6, outside > gap ? "on the stage that ends last" : "between steps");
}

/* The stage's own time between its compute ops, per op (op_gap_us, docs/cost-file.md): per
 * stage the median over steps of its time in no op (pp_stage_step.gap_ns) per compute op, the
 * mean over the stages; charged when it is at least OP_GAP_MIN of their mean compute op. An
 * interpreted schedule spends it between its calls (torch's Python: 0.13-0.25 ms an op, a third
 * of a small job's ops, on the 2-core VM); a compiled one a few microseconds (pptrain: 2-5 us on
 * ops of 0.3-1 ms), which the ops' medians and the sends' terms hold already. */
#define OP_GAP_MIN 0.05

static void extract_op_gap(const pp_analysis *a, pp_extract *e)
{
    double *g = a->n_steps ? malloc(a->n_steps * sizeof *g) : NULL;
    if (!g)
        return;
    /* without receive ranges a stage's time in no op holds its waits for the other stages too:
     * own time being the same on every stage, the stage that waits least (the slowest) bounds
     * it, and the least over the stages is taken instead of their mean (Paddle's pipeline
     * timeline, whose stamps hold the compute only: the mean read 5.5 ms an op on tests/data/
     * kineto/pdtl, its waits, and the model 36% over the measured step) */
    int waits_apart = a->n_ops == 0; /* no kept timeline: not known, the mean as before */
    for (size_t i = 0; i < a->n_ops && !waits_apart; i++)
        waits_apart = a->ops[i].kind == PP_AOP_RECV_ACT || a->ops[i].kind == PP_AOP_RECV_GRAD;
    double gap = 0, op = 0, least = HUGE_VAL, least_op = 0;
    int n = 0;
    for (int s = 0; s < a->S; s++) {
        size_t k = 0;
        for (size_t i = 0; i < a->n_steps; i++) {
            const pp_stage_step *ss = a->steps[i].stage ? &a->steps[i].stage[s] : NULL;
            if (ss && ss->n_compute > 0)
                g[k++] = ss->gap_ns / ss->n_compute;
        }
        const pp_astats *k4[4] = {&a->stages[s].fwd_ns, &a->stages[s].bwd_ns,
                                  &a->stages[s].bwd_input_ns, &a->stages[s].bwd_weight_ns};
        double sum = 0;
        uint64_t cnt = 0;
        for (int q = 0; q < 4; q++) {
            sum += k4[q]->mean * (double)k4[q]->count;
            cnt += k4[q]->count;
        }
        if (!k || !cnt)
            continue;
        double m = median_of(g, k);
        gap += m;
        op += sum / (double)cnt;
        if (m < least)
            least = m, least_op = sum / (double)cnt;
        n++;
    }
    free(g);
    if (!n)
        return;
    gap /= n;
    op /= n;
    if (!waits_apart && a->S > 1)
        gap = least, op = least_op;
    if (gap > 0 && gap >= OP_GAP_MIN * op) {
        e->costs->op_gap_us = gap * 1e-3;
        note(e, "%.3f ms a compute op between the stage's ops (in none of them: the schedule's "
                "own time, %.0f%% of a %.3f ms op) is charged after each",
             gap * 1e-6, 100 * gap / op, op * 1e-6);
    }
}

/* With several chunks per stage: the median duration of each (stage, kind, chunk)'s ops
 * ([(s * PP_SIM_NOISE_KINDS + kind) * v + chunk], 0 when none), over every analyzed step where
 * the analysis kept the chunks apart (pp_astage.chunk_ns), else over the kept timeline; it tells
 * the stage's sample of a kind apart by chunk (pp_sim_noise_input.chunk_median). */
static pp_status chunk_medians(const pp_analysis *a, int v, double **out)
{
    static const int k_kinds[PP_SIM_NOISE_KINDS] = {PP_AOP_FWD, PP_AOP_BWD, PP_AOP_BWD_INPUT,
                                                    PP_AOP_BWD_WEIGHT, PP_AOP_OPT};
    size_t cells = (size_t)a->S * PP_SIM_NOISE_KINDS * (size_t)v;
    double *med = pp_alloc_array(cells, sizeof *med);
    double *d = pp_alloc_array(a->n_ops + 1, sizeof *d);
    if (!med || !d) {
        pp_free(med);
        pp_free(d);
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the chunks' medians");
    }
    for (int s = 0; s < a->S; s++)
        for (int k = 0; k < PP_SIM_NOISE_KINDS; k++)
            for (int c = 0; c < v; c++) {
                const pp_astats *x = pp_astage_chunk(&a->stages[s], c, k_kinds[k]);
                if (x && x->count) {
                    med[((size_t)s * PP_SIM_NOISE_KINDS + (size_t)k) * (size_t)v + (size_t)c] =
                        x->median;
                    continue;
                }
                size_t n = 0;
                for (size_t i = 0; i < a->n_ops; i++) {
                    const pp_aop *o = &a->ops[i];
                    if (o->stage == s && o->chunk == c && o->kind == k_kinds[k] && o->t1 > o->t0)
                        d[n++] = (double)(o->t1 - o->t0);
                }
                if (!n)
                    continue;
                qsort(d, n, sizeof *d, cmp_double);
                med[((size_t)s * PP_SIM_NOISE_KINDS + (size_t)k) * (size_t)v + (size_t)c] =
                    n % 2 ? d[n / 2] : 0.5 * (d[n / 2 - 1] + d[n / 2]);
            }
    pp_free(d);
    *out = med;
    return PP_OK;
}

/* A link's samples of one kind of time (what 0: its transfers, pp_alink.sample; 1: its sends'
 * own times, send_sample; 2: its receives', recv_sample), their count and their median. */
static const double *link_samples(const pp_alink *l, int what, uint32_t *n, double *median)
{
    const pp_astats *x = what == 0 ? &l->latency_ns : what == 1 ? &l->send_time_ns
                                                                : &l->recv_time_ns;
    *median = x->median;
    *n = what == 0 ? l->n_sample : what == 1 ? l->n_send_sample : l->n_recv_sample;
    return what == 0 ? l->sample : what == 1 ? l->send_sample : l->recv_sample;
}

/* The variation of one kind of link time (what: link_samples) per message kind (0 activations,
 * 1 gradients): each link's samples over the link's median, pooled; beyond
 * PP_SIM_NOISE_MAX_SAMPLES an even stride over them. *out is allocated (NULL when none). */
static pp_status link_factors(const pp_analysis *a, int what, int grad, double **out,
                              uint32_t *n)
{
    *out = NULL;
    *n = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < a->n_links; i++) {
        uint32_t m;
        double med;
        if (a->links[i].grad == grad && link_samples(&a->links[i], what, &m, &med) &&
            med > 0)
            total += m;
    }
    if (total < 8)
        return PP_OK;
    uint64_t keep = total < PP_SIM_NOISE_MAX_SAMPLES ? total : PP_SIM_NOISE_MAX_SAMPLES;
    double *f = pp_alloc_array((size_t)keep, sizeof *f);
    if (!f)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the links' variation");
    uint64_t seen = 0, j = 0;
    for (size_t i = 0; i < a->n_links && j < keep; i++) {
        const pp_alink *l = &a->links[i];
        uint32_t m;
        double med;
        const double *smp = link_samples(l, what, &m, &med);
        if (l->grad != grad || !smp || !(med > 0))
            continue;
        for (uint32_t k = 0; k < m && j < keep; k++, seen++)
            if ((uint64_t)((unsigned __int128)j * total / keep) == seen)
                f[j++] = smp[k] / med;
    }
    *out = f;
    *n = (uint32_t)j;
    return PP_OK;
}

/* The op durations' variation (pp_sim_noise_fit): the stages' samples of every op kind and
 * their per-step means. */
static pp_status extract_noise(const pp_analysis *a, pp_extract *e)
{
    int S = a->S;
    if (S < 1 || !a->stages)
        return PP_OK;
    size_t cells = 0;
    double *chunk_med = NULL, *xf[2] = {NULL, NULL}, *of[4] = {NULL, NULL, NULL, NULL};
    const double **sample = pp_alloc_array((size_t)S * PP_SIM_NOISE_KINDS, sizeof *sample);
    uint32_t *n_sample = pp_alloc_array((size_t)S * PP_SIM_NOISE_KINDS, sizeof *n_sample);
    double *busy = pp_size_mul(a->n_steps, (size_t)S, &cells) && cells
                       ? pp_alloc_array(cells, sizeof *busy)
                       : NULL;
    pp_status st = PP_OK;
    if (!sample || !n_sample || (cells && !busy)) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory for the op-duration distribution");
        goto done;
    }
    for (int s = 0; s < S; s++)
        for (int k = 0; k < PP_SIM_NOISE_KINDS; k++) {
            sample[s * PP_SIM_NOISE_KINDS + k] = a->stages[s].sample[k];
            n_sample[s * PP_SIM_NOISE_KINDS + k] = a->stages[s].n_sample[k];
        }
    for (size_t i = 0; busy && i < a->n_steps; i++)
        for (int s = 0; s < S && a->steps[i].stage; s++)
            busy[i * (size_t)S + (size_t)s] = a->steps[i].stage[s].busy_ns;
    int v = a->v > 0 && a->v <= PP_SCHED_MAX_V ? a->v : 1;
    if (v > 1 && (st = chunk_medians(a, v, &chunk_med)) != PP_OK)
        goto done;
    pp_sim_noise_input in = {.S = S, .sample = sample, .n_sample = n_sample,
                             .n_steps = busy ? a->n_steps : 0, .step_busy = busy,
                             .ops_per_step = a->M > 0 && a->M <= PP_SCHED_MAX_M ? a->M * v : 1,
                             .v = v, .chunk_median = chunk_med};
    for (int g = 0; g < 2; g++)
        if ((st = link_factors(a, 0, g, &xf[g], &in.n_xfer[g])) != PP_OK)
            goto done;
        else
            in.xfer[g] = xf[g];
    /* own[]: PP_SIM_OWN_SEND_ACT, _SEND_GRAD, _RECV_ACT, _RECV_GRAD */
    for (int k = 0; k < 4; k++)
        if ((st = link_factors(a, 1 + k / 2, k % 2, &of[k], &in.n_own[k])) != PP_OK)
            goto done;
        else
            in.own[k] = of[k];
    /* a kind without samples takes the other kind's (the cost file's time does: fit_receives) */
    for (int k = 0; k < 4; k++)
        if (!in.n_own[k] && in.n_own[k ^ 1] && !of[k]) {
            in.own[k] = in.own[k ^ 1];
            in.n_own[k] = in.n_own[k ^ 1];
        }
    int L = e->costs->n_layers;
    e->layer_p95_ratio = pp_alloc_array((size_t)L * 2 + 1, sizeof(double));
    if (!e->layer_p95_ratio) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory for the layers' spread");
        goto done;
    }
    for (size_t i = 0; i < a->n_layers; i++) {
        const pp_alayer *al = &a->layers[i];
        if (al->layer < 0 || al->layer >= L)
            continue;
        if (al->fwd_ns.count && al->fwd_ns.median > 0)
            e->layer_p95_ratio[al->layer * 2] = al->fwd_ns.p95 / al->fwd_ns.median;
        if (al->bwd_ns.count && al->bwd_ns.median > 0)
            e->layer_p95_ratio[al->layer * 2 + 1] = al->bwd_ns.p95 / al->bwd_ns.median;
    }
    if ((st = pp_sim_noise_fit(&in, &e->noise)) == PP_OK) {
        double d_max = 0;
        for (int s = 0; s < e->noise.S; s++)
            d_max = fmax(d_max, e->noise.sigma_stage[s]);
        if (e->noise.n_steps >= 8)
            note(e, "op-duration variation: %.0f%% of it per step (shared by a step's ops: %.2f, "
                    "per stage up to %.2f log-sd) over %d steps, the rest per op",
                 100.0 * e->noise.common_share, e->noise.sigma_step, d_max, e->noise.n_steps);
        else
            note(e, "op-duration variation: all of it per op: %zu analyzed step(s), fewer than 8, "
                    "give no per-step part and nothing bounds the ops' own (a disturbed op counts "
                    "in full); capture 9 steps or more for the median and p95",
                 a->n_steps);
    }
done:
    pp_free(sample);
    pp_free(n_sample);
    pp_free(busy);
    pp_free(chunk_med);
    pp_free(xf[0]);
    pp_free(xf[1]);
    for (int k = 0; k < 4; k++)
        pp_free(of[k]);
    return st;
}

/* The run's recomputation (config mark recompute=): its layers' backward ranges ran the forward
 * again (pp_costs_layer_rc_us), which comes out of `costs` here and stays in `run_costs`. A text
 * that does not parse against the run's partition is noted and taken as none. */
static pp_status extract_recompute(const pp_analysis *a, pp_extract *e)
{
    e->run_costs = e->costs;
    if (!a->recompute[0])
        return PP_OK;
    e->can_recompute = 1;
    int L = e->costs->n_layers;
    uint8_t *mask = pp_alloc((size_t)L);
    if (!mask)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the recompute choice");
    pp_status st = pp_recompute_parse(a->recompute, &e->partition, mask);
    if (st != PP_OK) {
        note(e, "the config mark's recompute=%.40s does not fit the run (%s): taken as none",
             a->recompute, pp_error_message());
        pp_free(mask);
        return PP_OK;
    }
    int n = 0;
    for (int l = 0; l < L; l++) {
        if (!mask[l])
            continue;
        pp_layer_cost *y = &e->costs->layers[l];
        double f = y->fwd_us;
        y->bwd_us = y->bwd_us > f ? y->bwd_us - f : 0;
        if (y->has_split)
            y->bwd_input_us = y->bwd_input_us > f ? y->bwd_input_us - f : 0;
        n++;
    }
    if (!n) {
        pp_free(mask);
        return PP_OK;
    }
    e->recompute = mask;
    if ((st = pp_costs_with_recompute(e->costs, mask, &e->run_costs)) != PP_OK) {
        e->run_costs = e->costs;
        return st;
    }
    note(e, "%d layers ran recomputed (recompute=%.40s): their forward is taken out of their "
            "backward", n, a->recompute);
    return PP_OK;
}

/* The run names a schedule the tuner models (checked before anything else is extracted). */
static pp_status schedule_modeled(const pp_analysis *a)
{
    pp_schedule_kind k;
    if (!a->schedule[0])
        return PP_ERR(PP_ERR_INVALID, "the run does not name its schedule: emit the "
                                      "configuration mark of docs/nvtx-convention.md");
    if (strcmp(a->schedule, PP_SCHED_MEGATRON_INTERLEAVED) == 0)
        return PP_ERR(PP_ERR_INVALID,
                      "the run is Megatron-LM's interleaved schedule, and its torch trace does "
                      "not say which model chunk its forward_step and backward_step calls ran "
                      "(only the chunks' module events do, which torch records with_stack=True "
                      "and this trace lacks): its "
                      "pieces cannot be told apart, so pprof-tune cannot propose for it "
                      "(docs/dialects.md)");
    if (pp_schedule_kind_parse(a->schedule, &k) != PP_OK || a->placement != PP_PLACE_LOOPED) {
        char known[64];
        pp_schedule_kind_list(known, sizeof known);
        return PP_ERR(PP_ERR_INVALID,
                      "the run's schedule, %s%s, is not one the tuner models (%s): "
                      "pprof-report analyzes it, pprof-tune cannot propose for it",
                      a->schedule,
                      a->placement == PP_PLACE_V ? " (chunks placed in a V, torch's ZBV or "
                                                   "DualPipeV)"
                                                 : "",
                      known);
    }
    return PP_OK;
}

/* The run's schedule and those its config mark says it can run. */
static pp_status extract_schedules(const pp_analysis *a, pp_extract *e)
{
    pp_status st = schedule_modeled(a);
    if (st != PP_OK || (st = pp_schedule_kind_parse(a->schedule, &e->schedule)) != PP_OK)
        return st;
    e->runnable = 1u << e->schedule;
    if (a->schedules[0]) {
        /* names the tuner does not know (a framework's own schedules) are not proposable */
        char buf[sizeof a->schedules], *save = NULL;
        snprintf(buf, sizeof buf, "%s", a->schedules);
        for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
            pp_schedule_kind k;
            if (pp_schedule_kind_parse(p, &k) == PP_OK)
                e->runnable |= 1u << k;
        }
        e->runnable_announced = 1;
    } else {
        note(e, "the run does not announce the schedules it can run (config mark schedules=): "
                "only its own, %s, is proposed",
             pp_schedule_kind_name(e->schedule));
    }
    return PP_OK;
}

/* The 95% confidence interval of the median of the run's analyzed steps; 0 when it has fewer
 * than 8 steps or no memory for their copy. */
static int median_ci(const pp_analysis *a, double *lo, double *hi)
{
    size_t n = a->n_steps;
    if (n < 8 || !a->steps)
        return 0;
    double *v = pp_alloc_array(n, sizeof *v);
    if (!v)
        return 0;
    for (size_t i = 0; i < n; i++)
        v[i] = a->steps[i].step_ns;
    qsort(v, n, sizeof *v, cmp_double);
    pp_sim_quantile_ci(v, n, 0.5, lo, hi);
    pp_free(v);
    return 1;
}

/* The median of sorted v[n] (n >= 1). */
static double median_sorted(const double *v, size_t n)
{
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The steps' spread that check_op_variation compares: the mean absolute deviation from the
 * median of the closest 80% of v[n] to it (n >= 1; reorders v, tmp[n] scratch). Robust to the
 * few far steps a run has (a stall, a regime change) and, unlike the median absolute deviation,
 * efficient enough on the 9 steps a short capture gives to tell a spread from half of it. */
static double spread_of(double *v, size_t n, double *tmp)
{
    qsort(v, n, sizeof *v, cmp_double);
    double med = median_sorted(v, n);
    for (size_t i = 0; i < n; i++)
        tmp[i] = fabs(v[i] - med);
    qsort(tmp, n, sizeof *tmp, cmp_double);
    size_t m = (size_t)ceil(0.8 * (double)n), i = 0;
    double sum = 0;
    for (; i < m && i < n; i++)
        sum += tmp[i];
    return i ? sum / (double)i : 0;
}

/* The ops' own variation against the run's steps (check_op_variation): replays of the run's
 * layout per scale tried, samples of them drawn, their most steps, bisection's rounds. */
enum { OPS_REPLAYS = 1000, OPS_GROUPS = 400, OPS_MAX_GROUP = 256, OPS_BISECT = 10 };

typedef struct ops_check {
    pp_extract *e;
    double *logs;      /* every kind's fitted factors' logs, kind after kind */
    double *replay;    /* [OPS_REPLAYS] */
    double *group;     /* [OPS_REPLAYS] */
    double *tmp;       /* [OPS_REPLAYS] */
    double spreads[OPS_GROUPS];
    size_t k;          /* steps per drawn sample: the run's analyzed steps, at most OPS_MAX_GROUP */
    double spread;     /* the replays' spread (spread_of) */
    double low;        /* 2.5% quantile of the spread of k replayed steps */
} ops_check;

/* Sets the ops' factors to their fitted logs times `scale`. */
static void ops_scale(ops_check *c, double scale)
{
    pp_sim_noise *n = &c->e->noise;
    size_t at = 0;
    for (int i = 0; i < n->S * PP_SIM_NOISE_KINDS; i++)
        for (uint32_t j = 0; j < n->kind[i].n; j++)
            n->kind[i].factor[j] = exp(scale * c->logs[at++]);
    pp_sim_noise_level(n); /* the busy time's median as measured, whatever the scale */
}

/* The run's own layout replayed (OPS_REPLAYS, seed 1) with the ops' factors at `scale`: the
 * replays' spread, and the 2.5% quantile of the spread of samples of k of them (OPS_GROUPS, the
 * same draws at every scale); 0 on an error. */
static int ops_eval(ops_check *c, double scale)
{
    ops_scale(c, scale);
    pp_sim_dist_opts o = {.noise = &c->e->noise, .seed = 1, .n_min = OPS_REPLAYS,
                          .n_max = OPS_REPLAYS, .samples = c->replay};
    pp_sim_dist_result r;
    if (pp_sim_dist_file(c->e->schedule, &c->e->partition, c->e->M,
                         pp_extract_run_costs(c->e), &o, &r) != PP_OK || r.n < 1) {
        pp_error_clear();
        return 0;
    }
    pp_rng rng;
    pp_rng_seed(&rng, 7);
    for (int g = 0; g < OPS_GROUPS; g++) {
        for (size_t i = 0; i < c->k; i++)
            c->group[i] = c->replay[pp_rng_below(&rng, (uint64_t)r.n)];
        c->spreads[g] = spread_of(c->group, c->k, c->tmp);
    }
    qsort(c->spreads, OPS_GROUPS, sizeof *c->spreads, cmp_double);
    c->low = c->spreads[(size_t)(0.025 * OPS_GROUPS)];
    memcpy(c->group, c->replay, (size_t)r.n * sizeof *c->group);
    c->spread = spread_of(c->group, (size_t)r.n, c->tmp);
    return 1;
}

/* Whether the ops' own variation (pp_sim_noise: e) moves the run's steps as independent ops'
 * would. The run's own layout is replayed with it; where the run's analyzed steps (8 or more)
 * spread less (spread_of) than 97.5% of samples of as many replayed steps do, the run rejects
 * it: its ops trade time with their neighbours (a late wake-up made up by the next op, as on
 * pptrain's sim backend, which sleeps to deadlines) and their spread is not the step's. The
 * factors' logs are then scaled (bisection) to where the replays spread as the steps did, 0 at
 * least (only the per-step parts vary). Transfers are fixed meanwhile (their choice comes after,
 * with the ops as kept). docs/sim-dist.md, "Variation that does not move the step". */
static void check_op_variation(const pp_analysis *a, pp_extract *e)
{
    pp_sim_noise *n = &e->noise;
    if (!n->S || !n->kind || a->n_steps < 8 || !a->steps)
        return;
    size_t total = 0, ns = 0;
    for (int i = 0; i < n->S * PP_SIM_NOISE_KINDS; i++)
        total += n->kind[i].n;
    if (!total)
        return;
    ops_check c = {.e = e};
    double *meas = pp_alloc_array(a->n_steps, sizeof *meas);
    double *mtmp = pp_alloc_array(a->n_steps, sizeof *mtmp);
    c.logs = pp_alloc_array(total, sizeof *c.logs);
    c.replay = pp_alloc_array(OPS_REPLAYS, sizeof *c.replay);
    c.group = pp_alloc_array(OPS_REPLAYS, sizeof *c.group);
    c.tmp = pp_alloc_array(OPS_REPLAYS, sizeof *c.tmp);
    if (!meas || !mtmp || !c.logs || !c.replay || !c.group || !c.tmp)
        goto done;
    for (size_t i = 0; i < a->n_steps; i++)
        if (a->steps[i].step_ns > 0 && isfinite(a->steps[i].step_ns))
            meas[ns++] = a->steps[i].step_ns;
    if (ns < 8)
        goto done;
    double m = spread_of(meas, ns, mtmp);
    size_t at = 0;
    for (int i = 0; i < n->S * PP_SIM_NOISE_KINDS; i++)
        for (uint32_t j = 0; j < n->kind[i].n; j++)
            c.logs[at++] = log(n->kind[i].factor[j]);
    c.k = ns < OPS_MAX_GROUP ? ns : OPS_MAX_GROUP;
    int fixed = n->xfer_fixed, own_fixed = n->own_fixed;
    n->xfer_fixed = n->own_fixed = 1;
    double keep = 1;
    if (ops_eval(&c, 1) && c.low > m) {
        double spread1 = c.spread, low1 = c.low, lo = 0, hi = 1;
        if (ops_eval(&c, 0) && c.spread < m)
            for (int it = 0; it < OPS_BISECT; it++) {
                double mid = 0.5 * (lo + hi);
                if (!ops_eval(&c, mid))
                    break;
                if (c.spread <= m)
                    lo = mid;
                else
                    hi = mid;
            }
        keep = lo;
        note(e, "ops' own variation scaled to %.0f%% of its log-sd: the run's %zu steps spread "
                "%.3f ms (mean absolute deviation from their median, the farthest 20%% left out), "
                "its own layout's replays with the ops' measured variation %.3f ms, and 97.5%% of "
                "their samples of %zu steps more than %.3f ms: its ops trade time with their "
                "neighbours (a late wake-up made up by the next op, as on the sim backend) rather "
                "than vary as independent ones",
             100 * keep, ns, m * 1e-6, spread1 * 1e-6, c.k, low1 * 1e-6);
    }
    ops_scale(&c, keep);
    n->xfer_fixed = fixed;
    n->own_fixed = own_fixed;
    n->op_scale = keep;
done:
    pp_free(meas);
    pp_free(mtmp);
    pp_free(c.logs);
    pp_free(c.replay);
    pp_free(c.group);
    pp_free(c.tmp);
}

/* Whether the transfers' measured variation (pp_sim_noise.xfer) stays in the model. A receiver
 * that woke late (descheduled when its data arrived) delays what follows on a real machine, and
 * a replay with the measured transfers shows that; on pptrain's sim backend the next op sleeps
 * to an absolute deadline and makes the delay up, so the measured transfers vary there without
 * moving the step. Which of the two the run is, its own steps tell: its own layout is replayed
 * with the variation and without it (1000 replays each, one seed). Fixed transfers stay while
 * their median lies inside the measured median's 95% interval (the run does not reject the
 * simpler model: a variation kept on a thin margin of the run's own layout, where the waiting
 * stage has slack, can cost a balanced layout 10% and more); otherwise the variation is kept
 * when its median is nearer the measured median by more than 0.5% of it, a margin above the two
 * estimates' Monte Carlo error (docs/sim-dist.md, "Why transfers vary"). Without a measured
 * median, a replayable schedule or timed messages, transfers stay fixed. */
/* which 0: the transfers (xfer_fixed), 1: the senders' and receivers' own times (own_fixed). */
static void choose_fixed(const pp_analysis *a, pp_extract *e, int which)
{
    pp_sim_noise *n = &e->noise;
    int *fixed = which ? &n->own_fixed : &n->xfer_fixed;
    const char *what = which ? "senders' and receivers' own times" : "transfers";
    const char *model = which ? "the cost file's medians" : "their links' model";
    *fixed = 0;
    pp_sim_dist_opts o = {.noise = n, .seed = 1, .n_min = 1000, .n_max = 1000};
    pp_sim_dist_result with = {0}, without = {0};
    pp_status st = pp_sim_dist_file(e->schedule, &e->partition, e->M, pp_extract_run_costs(e),
                                    &o, &with);
    *fixed = 1;
    if (st == PP_OK)
        st = pp_sim_dist_file(e->schedule, &e->partition, e->M, pp_extract_run_costs(e), &o,
                              &without);
    double m = e->measured_step_ns, lo = 0, hi = 0;
    if (st != PP_OK || !(m > 0) || !isfinite(m)) {
        pp_error_clear();
        return; /* fixed */
    }
    double ew = (with.median_ns - m) / m, eo = (without.median_ns - m) / m;
    int ci = median_ci(a, &lo, &hi);
    if (ci && without.median_ns >= lo && without.median_ns <= hi) {
        if (fabs(ew - eo) > 0.005)
            note(e, "%s fixed at %s: the run's own layout replays to a median %+.2f%% from its "
                    "measured one without their measured variation, inside the measured "
                    "median's 95%% interval (%+.2f%% .. %+.2f%%); %+.2f%% with it",
                 what, model, 100 * eo, 100 * (lo - m) / m, 100 * (hi - m) / m, 100 * ew);
    } else if (fabs(ew) < fabs(eo) - 0.005) {
        *fixed = 0;
        note(e, "%s vary as measured: the run's own layout replays to a median %+.2f%% from its "
                "measured one with their variation, %+.2f%% without",
             what, 100 * ew, 100 * eo);
    } else if (fabs(ew - eo) > 0.005) {
        note(e, "%s fixed at %s: the run's own layout replays to a median %+.2f%% from its "
                "measured one without their measured variation, %+.2f%% with it (delays made up "
                "by the next op, as on the sim backend)",
             what, model, 100 * eo, 100 * ew);
    }
}

static void choose_xfer(const pp_analysis *a, pp_extract *e)
{
    pp_sim_noise *n = &e->noise;
    if (!n->xfer[0].n && !n->xfer[1].n)
        return;
    int own_fixed = n->own_fixed;
    n->own_fixed = 1; /* chosen after, with the transfers as kept */
    choose_fixed(a, e, 0);
    n->own_fixed = own_fixed;
}

/* Whether the senders' and receivers' own times vary (pp_sim_noise.own): chosen as the
 * transfers are (above), after them. A send's or a receive's own time has the tail of its
 * process's wake-ups and of the framework's locks (torch with gloo: medians of 0.5-0.9 ms, one
 * in twenty 3-14 ms on the 2-core VM), which a step's 16-32 of them meet; on pptrain's sim
 * backend the next op's deadline makes such a delay up (docs/sim-dist.md "Senders' and
 * receivers' own time"). */
static void choose_own(const pp_analysis *a, pp_extract *e)
{
    pp_sim_noise *n = &e->noise;
    if (!n->own[0].n && !n->own[1].n && !n->own[2].n && !n->own[3].n)
        return;
    choose_fixed(a, e, 1);
}

/* A run without layer ranges: one layer per piece (stage, chunk), its costs its ops' medians
 * (fill_backwards and scale_to_ops, from a placeholder forward and no backward), the partition
 * the run's own. What the model can then change is the schedule, the micro-batching and (over
 * runs at several sizes, --advise) the micro-batch size; never a boundary. */
static pp_status stage_level(const pp_analysis *a, pp_extract *e)
{
    int S = a->S, v = a->v > 0 ? a->v : 1;
    if (S < 1 || (int64_t)S * v > 4096)
        return PP_ERR(PP_ERR_INVALID, "the run has no layer ranges and no stages to cost");
    int P = S * v;
    pp_status st = pp_costs_uniform(P, 0, 0, 0, &e->costs);
    if (st != PP_OK)
        return st;
    uint64_t act_seen = activation_seen(a);
    int *bounds = malloc(sizeof(int) * (size_t)(P + 1));
    if (!bounds)
        return PP_ERR(PP_ERR_NOMEM, "out of memory");
    for (int p = 0; p < P; p++) {
        pp_layer_cost *c = &e->costs->layers[p];
        if (v > 1)
            snprintf(c->name, sizeof c->name, "stage%d.chunk%d", p % S, p / S);
        else
            snprintf(c->name, sizeof c->name, "stage%d", p);
        c->fwd_us = 1;   /* scaled to the piece's forward op */
        c->bwd_us = -1;  /* the piece's backward op (fill_backwards) */
        c->has_split = 1;
        c->activation_bytes = p == P - 1 ? 0 : act_seen;
        bounds[p] = p;
    }
    bounds[P] = P;
    st = pp_partition_from_bounds(bounds, P + 1, P, S, v, &e->partition);
    free(bounds);
    if (st != PP_OK)
        return st;
    int torch = pp_dialect_is_torch_profiler(a->dialect);
    snprintf(e->stage_why, sizeof e->stage_why,
             "no layer ranges: one layer per %s, costed by its ops; the stage boundaries cannot "
             "move (%s)",
             v > 1 ? "stage chunk" : "stage",
             !torch ? "for split points, emit '<layer> fwd' ranges per docs/nvtx-convention.md"
             : a->torch_compiled_modules
                 ? "its stage modules ran compiled as a whole (torch.compile): the blocks inside "
                   "are not visible; compile each block instead, as torchtitan does, "
                   "docs/torch.md"
                 : "for split points, profile with with_modules=True and with_stack=True: "
                   "module events are the layers, docs/torch.md");
    note(e, "%s", e->stage_why);
    e->stage_level = 1;
    return PP_OK;
}

pp_status pp_extract_from_analysis(const pp_analysis *a, pp_extract *e)
{
    memset(e, 0, sizeof *e);
    /* a run whose named schedule the tuner cannot model says so first, whatever else it lacks */
    pp_status st0 = a->schedule[0] ? schedule_modeled(a) : PP_OK;
    if (st0 != PP_OK)
        return st0;
    if (a->no_compute_ops)
        return PP_ERR(PP_ERR_INVALID, "the run has no forward or backward op: nothing to "
                                      "extract costs from (pprof-report's warning says which "
                                      "ranges it needs)");
    pp_status st;
    if (a->n_layers == 0) {
        if ((st = stage_level(a, e)) != PP_OK)
            return st;
    } else {
        /* the layer list is 0 .. max index */
        int L = 0;
        for (size_t i = 0; i < a->n_layers; i++)
            if (a->layers[i].layer + 1 > L)
                L = a->layers[i].layer + 1;
        if ((st = pp_costs_uniform(L, 0, 0, 0, &e->costs)) != PP_OK)
            return st;
        if ((st = extract_layers(a, L, e)) != PP_OK ||
            (st = infer_partition(a, L, &e->partition)) != PP_OK)
            goto fail;
    }
    fit_links(a, e);
    fit_sends(a, e);
    fit_receives(a, e);
    if ((st = fill_backwards(a, e)) != PP_OK || (st = scale_to_ops(a, e)) != PP_OK ||
        (st = extract_schedules(a, e)) != PP_OK)
        goto fail;
    extract_op_gap(a, e);
    extract_optimizer(a, e);
    e->M = a->M;
    if (e->M <= 0) {
        st = PP_ERR(PP_ERR_INVALID, "the run does not state its micro-batch count (config mark)");
        goto fail;
    }
    e->samples_per_step = a->samples_per_step;
    e->tokens_per_step = a->tokens_per_step;
    /* a data-parallel run states the global batch: each replica trains 1/dp of it */
    int dp = a->dp > 1 ? a->dp : 1;
    e->microbatch_size = a->samples_per_step > 0 ? (int)(a->samples_per_step / dp / e->M) : 0;
    e->costs->microbatch_size = e->microbatch_size;
    e->measured_step_ns = a->step_ns.median;
    e->measured_bubble = a->bubble_ratio;
    e->measured_p95_ns = a->step_ns.p95;
    e->regimes = a->regimes;
    e->torch_trace = pp_dialect_is_torch_profiler(a->dialect);
    if ((st = extract_noise(a, e)) != PP_OK || (st = extract_recompute(a, e)) != PP_OK)
        goto fail;
    if (a->stages && a->S == e->partition.S && a->step_ns.mean > 0) {
        if (!(e->busy_share = pp_alloc_array((size_t)a->S, sizeof(double)))) {
            st = PP_ERR(PP_ERR_NOMEM, "out of memory for the stages' busy shares");
            goto fail;
        }
        for (int s = 0; s < a->S; s++) {
            double b = a->stages[s].busy_ns / a->step_ns.mean;
            e->busy_share[s] = b > 0 && isfinite(b) ? fmin(b, 1.0) : 0;
        }
    }
    check_op_variation(a, e);
    choose_xfer(a, e);
    choose_own(a, e);
    return PP_OK;
fail:
    pp_extract_free(e);
    return st;
}

const pp_costs *pp_extract_run_costs(const pp_extract *e)
{
    return e->run_costs ? e->run_costs : e->costs;
}

pp_status pp_extract_predict(const pp_extract *e, pp_schedule_kind kind, const pp_partition *part,
                             int M, double *step_ns, double *bubble)
{
    pp_sim_result r;
    pp_status st = pp_sim_file(kind, part, M, pp_extract_run_costs(e), NULL, &r);
    if (st != PP_OK)
        return st;
    if (step_ns)
        *step_ns = r.step_ns;
    if (bubble)
        *bubble = r.bubble_ratio;
    pp_sim_result_free(&r);
    return PP_OK;
}

pp_status pp_extract_noise_stages(const pp_extract *e, pp_schedule_kind kind,
                                  const pp_partition *part, int M, const pp_costs *costs,
                                  int *map)
{
    int S = part->S, R = e->noise.S;
    for (int s = 0; s < S; s++)
        map[s] = -1;
    if (!e->busy_share || R < 1 || R != e->partition.S)
        return PP_OK;
    /* the run's own layout: its stages are the run's */
    if (kind == e->schedule && M == e->M && part->P == e->partition.P &&
        part->S == e->partition.S && part->bounds && e->partition.bounds &&
        memcmp(part->bounds, e->partition.bounds, sizeof(int) * (size_t)(part->P + 1)) == 0)
        return PP_OK;
    for (int r = 0; r < R; r++)
        if (!(e->busy_share[r] > 0))
            return PP_OK;
    pp_sim_result sim;
    pp_status st = pp_sim_file(kind, part, M, costs ? costs : pp_extract_run_costs(e), NULL, &sim);
    if (st != PP_OK)
        return st;
    for (int s = 0; s < S && sim.step_ns > 0; s++) {
        double share = sim.busy_ns[s] / sim.step_ns, best = INFINITY;
        int at = -1;
        for (int r = 0; r < R; r++) {
            double d = fabs(e->busy_share[r] - share);
            if (d < best) {
                best = d;
                at = r;
            }
        }
        if (s < R && fabs(e->busy_share[s] - share) <= best + PP_EXTRACT_SHARE_TOL)
            at = s;
        map[s] = at;
    }
    pp_sim_result_free(&sim);
    return PP_OK;
}

pp_status pp_extract_dist_mapped(const pp_extract *e, pp_schedule_kind kind,
                                 const pp_partition *part, int M, const pp_costs *costs,
                                 pp_sim_dist_opts *o, pp_sim_dist_result *res)
{
    int *map = pp_alloc_array((size_t)(part->S > 0 ? part->S : 1), sizeof(int));
    if (!map)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for %d stages", part->S);
    pp_status st = pp_extract_noise_stages(e, kind, part, M, costs, map);
    o->noise_stage = map;
    if (st == PP_OK)
        st = pp_sim_dist_file(kind, part, M, costs ? costs : pp_extract_run_costs(e), o, res);
    o->noise_stage = NULL;
    pp_free(map);
    return st;
}

pp_status pp_extract_predict_dist(const pp_extract *e, pp_schedule_kind kind,
                                  const pp_partition *part, int M, uint64_t seed,
                                  pp_sim_dist_result *res)
{
    pp_sim_dist_opts o = {.noise = &e->noise, .seed = seed};
    return pp_extract_dist_mapped(e, kind, part, M, NULL, &o, res);
}
