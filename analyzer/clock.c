/* clock.c: offset and drift of each process's clock against a reference process, from the
 * causality of its messages (pp_clock.h; the method and its assumptions: docs/metrics.md,
 * "Clock alignment"). Called by the analyzer before it merges the traces of several hosts.
 *
 * For a process B aligned through an already aligned process A (times of A on the reference
 * clock t), write delta(t) = clock_B - t = offset + drift * (t - mono0_B): a straight line.
 *   message A -> B, sent at t_s, data at B at clock c_r:  delta(t_s) <= c_r - t_s   (upper)
 *   message B -> A, sent at clock c_s, data at A at t_r:  delta(t_r) >= c_s - t_r   (lower)
 * (the message travels for the true latency >= 0, and delta moves by drift * latency, a few ns,
 * during it). The upper points lie above the line, the lower ones below; the estimate is the
 * line that keeps the largest margin s to both, i.e. the middle of the feasible band. For a
 * fixed drift the best offset and margin are closed-form, and the margin is a concave function
 * of the drift (a min of lines minus a max of lines), so a golden-section search finds it. */
#include "pp_clock.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Drifts searched: +-1%. Real oscillators are within 100 ppm; the profiler's hook allows more. */
#define DRIFT_MAX 0.01
#define GOLDEN_ITERS 200

typedef struct cpoint {
    double x; /* reference time - mono0_B, ns */
    double y; /* B's clock - reference time, ns */
} cpoint;

/* The margin and offset of the best line with slope d. */
static double margin_at(const cpoint *up, size_t nu, const cpoint *lo, size_t nl, double d,
                        double *offset)
{
    double min_u = INFINITY, max_l = -INFINITY;
    for (size_t i = 0; i < nu; i++) {
        double v = up[i].y - d * up[i].x;
        min_u = v < min_u ? v : min_u;
    }
    for (size_t i = 0; i < nl; i++) {
        double v = lo[i].y - d * lo[i].x;
        max_l = v > max_l ? v : max_l;
    }
    if (offset)
        *offset = 0.5 * (min_u + max_l);
    return 0.5 * (min_u - max_l);
}

uint64_t pp_clock_to_ref(const pp_clock_fit *f, uint64_t ts)
{
    if (!f || f->status != PP_CLOCK_ESTIMATED)
        return ts;
    /* the inverse of clock = mono0 + (t - mono0) (1 + drift) + offset */
    double rel = (double)(int64_t)(ts - f->mono0_ns) - f->offset_ns;
    double t = rel / (1.0 + f->drift);
    return f->mono0_ns + (uint64_t)(int64_t)llround(t);
}

/* Fits process b through the aligned process a. Returns 0 when out of memory. */
static int fit_through(const pp_clock_pair *pairs, size_t n, int a, int b, const pp_clock_fit *fa,
                       pp_clock_fit *fb, size_t n_up, size_t n_lo)
{
    cpoint *up = malloc(sizeof *up * (n_up ? n_up : 1));
    cpoint *lo = malloc(sizeof *lo * (n_lo ? n_lo : 1));
    if (!up || !lo) {
        free(up);
        free(lo);
        return 0;
    }
    size_t nu = 0, nl = 0;
    for (size_t i = 0; i < n; i++) {
        const pp_clock_pair *p = &pairs[i];
        if (p->src == a && p->dst == b && nu < n_up) {
            uint64_t t = pp_clock_to_ref(fa, p->send_ns);
            up[nu].x = (double)(int64_t)(t - fb->mono0_ns);
            up[nu++].y = (double)(int64_t)(p->recv_ns - t);
        } else if (p->src == b && p->dst == a && nl < n_lo) {
            uint64_t t = pp_clock_to_ref(fa, p->recv_ns);
            lo[nl].x = (double)(int64_t)(t - fb->mono0_ns);
            lo[nl++].y = (double)(int64_t)(p->send_ns - t);
        }
    }
    /* golden-section search for the drift with the largest margin (concave in the drift) */
    const double g = 0.5 * (sqrt(5.0) - 1.0);
    double lo_d = -DRIFT_MAX, hi_d = DRIFT_MAX;
    double d1 = hi_d - g * (hi_d - lo_d), d2 = lo_d + g * (hi_d - lo_d);
    double s1 = margin_at(up, nu, lo, nl, d1, NULL), s2 = margin_at(up, nu, lo, nl, d2, NULL);
    for (int it = 0; it < GOLDEN_ITERS; it++) {
        if (s1 < s2) {
            lo_d = d1;
            d1 = d2;
            s1 = s2;
            d2 = lo_d + g * (hi_d - lo_d);
            s2 = margin_at(up, nu, lo, nl, d2, NULL);
        } else {
            hi_d = d2;
            d2 = d1;
            s2 = s1;
            d1 = hi_d - g * (hi_d - lo_d);
            s1 = margin_at(up, nu, lo, nl, d1, NULL);
        }
    }
    /* The maximum may be a plateau (constraints that bound the offset but barely the drift):
     * take the middle of the drifts within 1 ns of the best margin (a superlevel set of a concave
     * function is an interval), not whichever end the search happened to reach. */
    double d_best = 0.5 * (lo_d + hi_d);
    double s_best = margin_at(up, nu, lo, nl, d_best, NULL) - 1.0;
    double ends[2];
    for (int side = 0; side < 2; side++) {
        double in = d_best, out = side ? DRIFT_MAX : -DRIFT_MAX;
        if (margin_at(up, nu, lo, nl, out, NULL) >= s_best) {
            ends[side] = out;
            continue;
        }
        for (int it = 0; it < GOLDEN_ITERS / 2; it++) {
            double mid = 0.5 * (in + out);
            if (margin_at(up, nu, lo, nl, mid, NULL) >= s_best)
                in = mid;
            else
                out = mid;
        }
        ends[side] = in;
    }
    double d = 0.5 * (ends[0] + ends[1]), off = 0;
    double s = margin_at(up, nu, lo, nl, d, &off);
    fb->status = PP_CLOCK_ESTIMATED;
    fb->drift = d;
    fb->offset_ns = off;
    fb->uncertainty_ns = fabs(s) + fa->uncertainty_ns;
    fb->violation_ns = s < 0 ? -s : 0;
    fb->via = a;
    fb->n_fwd = nu;
    fb->n_bwd = nl;
    free(up);
    free(lo);
    return 1;
}

pp_status pp_clock_estimate(const pp_clock_pair *pairs, size_t n, size_t n_files, int ref,
                            const uint64_t *mono0_ns, pp_clock_fit *fits)
{
    if (!fits || !mono0_ns || (n && !pairs) || ref < 0 || (size_t)ref >= n_files)
        return PP_ERR(PP_ERR_INVALID, "pp_clock_estimate: bad arguments");
    pp_status rc = PP_OK;
    size_t n_pairs_of_files = 0; /* checked: n_files comes from the directory */
    uint64_t *count = pp_size_mul(n_files, n_files, &n_pairs_of_files)
                          ? calloc(n_pairs_of_files, sizeof *count) /* [src * n_files + dst] */
                          : NULL;
    int *queue = malloc(sizeof *queue * n_files);
    if (!count || !queue) {
        rc = PP_ERR(PP_ERR_NOMEM, "out of memory aligning %zu clocks", n_files);
        goto done;
    }
    for (size_t i = 0; i < n_files; i++) {
        memset(&fits[i], 0, sizeof fits[i]);
        fits[i].status = PP_CLOCK_UNBOUNDED;
        fits[i].mono0_ns = mono0_ns[i];
        fits[i].uncertainty_ns = INFINITY;
        fits[i].via = -1;
    }
    for (size_t i = 0; i < n; i++) {
        const pp_clock_pair *p = &pairs[i];
        if (p->src < 0 || p->dst < 0 || (size_t)p->src >= n_files || (size_t)p->dst >= n_files ||
            p->src == p->dst)
            continue;
        count[(size_t)p->src * n_files + (size_t)p->dst]++;
        /* what an unbounded process did see, for its diagnostic */
        fits[p->dst].n_fwd++;
        fits[p->src].n_bwd++;
    }
    fits[ref].status = PP_CLOCK_REFERENCE;
    fits[ref].uncertainty_ns = 0;
    fits[ref].n_fwd = fits[ref].n_bwd = 0;
    /* breadth first from the reference over pairs of processes with traffic both ways */
    size_t head = 0, tail = 0;
    queue[tail++] = ref;
    while (head < tail) {
        int a = queue[head++];
        for (size_t b = 0; b < n_files; b++) {
            if (fits[b].status != PP_CLOCK_UNBOUNDED)
                continue;
            uint64_t n_up = count[(size_t)a * n_files + b], n_lo = count[b * n_files + (size_t)a];
            if (!n_up || !n_lo)
                continue;
            if (!fit_through(pairs, n, a, (int)b, &fits[a], &fits[b], n_up, n_lo)) {
                rc = PP_ERR(PP_ERR_NOMEM, "out of memory aligning %zu clocks", n_files);
                goto done;
            }
            queue[tail++] = (int)b;
        }
    }
done:
    free(count);
    free(queue);
    return rc;
}
