/* sim_dist.c: the step's distribution (pp_sim.h, docs/sim-dist.md). A measured step is a max
 * over paths of sums of noisy ops, so its median lies above the replay with median ops; this file
 * fits the op durations' variation from a capture (pp_sim_noise_fit) and replays the schedule
 * many times with sampled durations (pp_sim_dist). The replay's order is taken once from
 * pp_schedule_replay and each Monte Carlo replay re-times that order with sim.c's arithmetic
 * (receives wait for their message, sends post it after the transfer, OPT_STEP starts at the
 * barrier of every stage), so a replay allocates nothing. */
#include "pp_sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void pp_sim_noise_free(pp_sim_noise *n)
{
    if (!n)
        return;
    if (n->kind)
        for (int i = 0; i < n->S * PP_SIM_NOISE_KINDS; i++)
            pp_free(n->kind[i].factor);
    pp_free(n->kind);
    pp_free(n->sigma_stage);
    pp_free(n->step_f);
    pp_free(n->busy_median_ns);
    pp_free(n->level);
    pp_free(n->xfer[0].factor);
    pp_free(n->xfer[1].factor);
    for (int k = 0; k < 4; k++)
        pp_free(n->own[k].factor);
    memset(n, 0, sizeof *n);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Quantile q of sorted v[n], interpolated as the analyzer's statistics are (pos = q (n - 1)). */
static double quantile_sorted(const double *v, size_t n, double q)
{
    if (n == 0)
        return 0;
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    double f = pos - (double)i;
    return i + 1 < n ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

static double mean_of(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    return n ? s / (double)n : 0;
}

/* Per (stage, kind): the measured factors' logs into k (shrunk later), their spread. The
 * median is the sample's; durations <= 0 are left out. */
/* Several chunks on a stage (interleaved) put ops of different costs in one sample: each
 * duration is taken relative to the chunk median nearest to it (in log), so chunks of unequal
 * cost do not read as spread; their geometric mean keeps the kind's scale. */
static void unmix_chunks(double *x, uint32_t m, const double *cm, int v)
{
    double logsum = 0;
    int nv = 0;
    for (int c = 0; c < v; c++)
        if (cm[c] > 0 && isfinite(cm[c])) {
            logsum += log(cm[c]);
            nv++;
        }
    if (nv < 2)
        return;
    double g = exp(logsum / nv);
    for (uint32_t i = 0; i < m; i++) {
        double best = INFINITY, mc = g;
        for (int c = 0; c < v; c++) {
            if (!(cm[c] > 0 && isfinite(cm[c])))
                continue;
            double dist = fabs(log(x[i] / cm[c]));
            if (dist < best) {
                best = dist;
                mc = cm[c];
            }
        }
        x[i] *= g / mc;
    }
}

static pp_status fit_kind(const double *d, uint32_t n, const double *chunk_median, int v,
                          pp_sim_noise_kind *k, double *scratch)
{
    if (n > PP_SIM_NOISE_MAX_SAMPLES)
        n = PP_SIM_NOISE_MAX_SAMPLES;
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (d[i] > 0 && isfinite(d[i]))
            scratch[m++] = d[i];
    if (chunk_median && v > 1)
        unmix_chunks(scratch, m, chunk_median, v);
    if (m < 2)
        return PP_OK; /* one op or none: nothing to say about its spread */
    qsort(scratch, m, sizeof *scratch, cmp_double);
    double med = quantile_sorted(scratch, m, 0.5);
    if (!(med > 0))
        return PP_OK;
    k->median_ns = med;
    k->p05 = quantile_sorted(scratch, m, 0.05) / med;
    k->p95 = quantile_sorted(scratch, m, 0.95) / med;
    k->factor = pp_alloc_array(m, sizeof(double));
    if (!k->factor)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the op-duration distribution");
    double s = 0, ss = 0;
    for (uint32_t i = 0; i < m; i++) {
        double l = log(scratch[i] / med);
        k->factor[i] = l;
        s += l;
        ss += l * l;
    }
    k->n = m;
    double var = ss / m - (s / m) * (s / m);
    k->sigma_log = var > 0 ? sqrt(var) : 0;
    /* 1.4826 x the median absolute log factor (the logs' median is 0): the spread of the bulk,
     * which a few extreme ops (the sim backend's catch-up after a late wake-up: one op short,
     * the next long, their sum exact) cannot inflate */
    for (uint32_t i = 0; i < m; i++)
        scratch[i] = fabs(k->factor[i]);
    qsort(scratch, m, sizeof *scratch, cmp_double);
    k->sigma_robust = fmin(k->sigma_log, 1.4826 * quantile_sorted(scratch, m, 0.5));
    return PP_OK;
}

/* Stage s's median busy time over the steps that have one (tmp: n scratch), 0 with fewer than 8. */
static double busy_median(const pp_sim_noise_input *in, int s, double *tmp)
{
    size_t m = 0;
    for (size_t i = 0; i < in->n_steps; i++) {
        double v = in->step_busy[i * (size_t)in->S + (size_t)s];
        if (v > 0 && isfinite(v))
            tmp[m++] = v;
    }
    if (m < 8)
        return 0;
    qsort(tmp, m, sizeof *tmp, cmp_double);
    return quantile_sorted(tmp, m, 0.5);
}

/* The per-step parts, from each stage's busy time per step (the sum of its compute ops: what
 * moves a stage's whole step, and immune to a pair of ops that trade time, as the sim backend's
 * catch-up does). Logs of busy / its median: C's variance is the mean covariance of different
 * stages' series (what moves every stage together); V[s] the variance of stage s's; med_busy[s]
 * the median busy time it is taken against (0: fewer than 8). */
static pp_status fit_steps(const pp_sim_noise_input *in, pp_sim_noise *out, double *V,
                           double *med_busy)
{
    int S = in->S;
    size_t n = in->n_steps;
    if (n < 8 || !in->step_busy)
        return PP_OK;
    size_t cells;
    if (!pp_size_mul(n, (size_t)S, &cells))
        return PP_ERR(PP_ERR_INVALID, "%zu steps x %d stages is too large", n, S);
    double *x = pp_alloc_array(cells, sizeof(double));
    uint8_t *ok = pp_alloc_array(cells, 1);
    double *tmp = pp_alloc_array(n, sizeof(double));
    double *mu = pp_alloc_array((size_t)S, sizeof(double));
    pp_status st = PP_OK;
    if (!x || !ok || !tmp || !mu) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory fitting the per-step variation");
        goto done;
    }
    for (int s = 0; s < S; s++) {
        double med = med_busy[s] = busy_median(in, s, tmp), sum = 0, ss = 0;
        size_t m = 0;
        if (!(med > 0))
            continue;
        for (size_t i = 0; i < n; i++) {
            double v = in->step_busy[i * (size_t)S + (size_t)s];
            if (!(v > 0 && isfinite(v)))
                continue;
            double l = log(v / med);
            x[i * (size_t)S + (size_t)s] = l;
            ok[i * (size_t)S + (size_t)s] = 1;
            m++;
            sum += l;
            ss += l * l;
        }
        mu[s] = sum / (double)m;
        V[s] = fmax(0, ss / (double)m - mu[s] * mu[s]);
    }
    double cov_sum = 0;
    int pairs = 0;
    for (int a = 0; a < S; a++)
        for (int b = a + 1; b < S; b++) {
            double sum = 0;
            size_t k = 0;
            for (size_t i = 0; i < n; i++) {
                size_t r = i * (size_t)S;
                if (ok[r + (size_t)a] && ok[r + (size_t)b]) {
                    sum += (x[r + (size_t)a] - mu[a]) * (x[r + (size_t)b] - mu[b]);
                    k++;
                }
            }
            if (k >= 8) {
                cov_sum += sum / (double)k;
                pairs++;
            }
        }
    /* kept only when it stands out of its own sampling noise: a covariance of two series that
     * do not co-vary is about sqrt(V_a V_b / n) either way, and a positive clamp of that noise
     * would make independent ops look shared */
    double v_sum = 0;
    int v_n = 0;
    for (int s = 0; s < S; s++)
        if (V[s] >= 0) {
            v_sum += V[s];
            v_n++;
        }
    double c = pairs ? cov_sum / pairs : 0, c_noise = v_n ? 2 * v_sum / v_n / sqrt((double)n) : 0;
    out->sigma_step = c > c_noise ? fmin(sqrt(c), PP_SIM_NOISE_MAX_SIGMA) : 0;
    out->n_steps = (int)(n > INT32_MAX ? INT32_MAX : n);
done:
    pp_free(x);
    pp_free(ok);
    pp_free(tmp);
    pp_free(mu);
    return st;
}

/* The run's own per-step parts (pp_sim_noise.step_f): per stage, log(busy / its median: med_busy,
 * fit_steps', 0 where it had too few) of each
 * kept step, scaled by sqrt(var[s] / V[s]) so that its variance is what the fit gives C and D_s
 * (var[s]) rather than all of the busy time's (V[s], which holds the ops' own part too); cells
 * without a busy time, and stages with no per-step part, get 1. Steps beyond
 * PP_SIM_NOISE_MAX_SAMPLES (or PP_SIM_NOISE_MAX_STEP_CELLS / S): evenly spaced ones. */
static pp_status keep_steps(const pp_sim_noise_input *in, pp_sim_noise *out, const double *V,
                            const double *var, const double *med_busy)
{
    int S = in->S;
    size_t n = in->n_steps, cap = PP_SIM_NOISE_MAX_STEP_CELLS / (size_t)S;
    cap = cap < PP_SIM_NOISE_MAX_SAMPLES ? cap : PP_SIM_NOISE_MAX_SAMPLES;
    size_t keep = n < cap ? n : cap;
    if (out->n_steps < 8 || keep < 8 || !in->step_busy)
        return PP_OK;
    out->step_f = pp_alloc_array(keep * (size_t)S, sizeof(double));
    if (!out->step_f)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the per-step variation");
    for (int s = 0; s < S; s++) {
        double med = med_busy[s], k = 0;
        if (V[s] > 0 && var[s] > 0 && med > 0)
            k = sqrt(fmin(1, var[s] / V[s]));
        for (size_t j = 0; j < keep; j++) {
            size_t i = (size_t)((unsigned __int128)j * n / keep);
            double v = in->step_busy[i * (size_t)S + (size_t)s], l = 0;
            if (med > 0 && v > 0 && isfinite(v))
                l = fmin(PP_SIM_NOISE_MAX_LOG, fmax(-PP_SIM_NOISE_MAX_LOG, k * log(v / med)));
            out->step_f[j * (size_t)S + (size_t)s] = exp(l);
        }
    }
    out->n_step_f = (int)keep;
    return PP_OK;
}

/* The busy time's level (docs/sim-dist.md, "The busy time's level"). A replay of the run's own
 * layout gives stage s the busy time f x X: f one of the run's steps (step_f), X the sum of the
 * stage's ops in a step, each its median times its own factor drawn independently. X is taken
 * as normal, of mean sum_k step_ns_k E[e_k] and variance sum_k step_ns2_k Var(e_k) (a step's
 * dozens of ops); the median of f x X is where the mean over the steps of
 * Phi((t / f - mean) / sd) is 1/2 (bisection). The ops' own factors are skewed (a slow tail, a
 * clipped fast one) and shrunk in log by the per-step parts' share, so E[e] is not 1 and the
 * replayed median lands above or below the run's (on a run in two speed regimes the busy
 * time's median lies in one regime, the ops' medians between them): the level is the measured
 * median over the replayed one. At most LEVEL_STEPS steps per stage, evenly
 * spaced; a level outside [1/2, 2] is not a skew (ops the busy time holds and the factors do
 * not) and is left at 1. */
enum { LEVEL_STEPS = 512, LEVEL_ROUNDS = 48 };

void pp_sim_noise_level(pp_sim_noise *n)
{
    if (!n || !n->level || !n->busy_median_ns || !n->kind)
        return;
    for (int s = 0; s < n->S; s++) {
        n->level[s] = 1;
        double target = n->busy_median_ns[s], mu = 0, var = 0;
        if (!(target > 0) || n->n_step_f < 1 || !n->step_f)
            continue;
        for (int k = 0; k < PP_SIM_NOISE_KINDS; k++) {
            const pp_sim_noise_kind *kd = &n->kind[s * PP_SIM_NOISE_KINDS + k];
            if (!kd->n || !kd->factor)
                continue;
            double m = mean_of(kd->factor, kd->n), ss = 0;
            for (uint32_t i = 0; i < kd->n; i++)
                ss += (kd->factor[i] - m) * (kd->factor[i] - m);
            mu += kd->step_ns * m;
            var += kd->step_ns2 * ss / kd->n;
        }
        if (!(mu > 0) || !isfinite(mu) || !isfinite(var))
            continue;
        double sd = fmax(sqrt(var), 1e-9 * mu), f_max = 0;
        int used = n->n_step_f < LEVEL_STEPS ? n->n_step_f : LEVEL_STEPS;
        double f[LEVEL_STEPS];
        for (int j = 0; j < used; j++) {
            size_t i = (size_t)j * (size_t)n->n_step_f / (size_t)used;
            f[j] = n->step_f[i * (size_t)n->S + (size_t)s];
            f_max = fmax(f_max, f[j]);
        }
        double lo = 0, hi = f_max * (mu + 8 * sd);
        for (int it = 0; it < LEVEL_ROUNDS; it++) {
            double t = 0.5 * (lo + hi), below = 0;
            for (int j = 0; j < used; j++)
                below += f[j] > 0 ? 0.5 * erfc(-(t / f[j] - mu) / (sd * 1.4142135623730951)) : 1;
            if (below < 0.5 * used)
                lo = t;
            else
                hi = t;
        }
        double replayed = 0.5 * (lo + hi), level = target / replayed;
        if (replayed > 0 && level >= 0.5 && level <= 2)
            n->level[s] = level;
    }
}

pp_status pp_sim_noise_fit(const pp_sim_noise_input *in, pp_sim_noise *out)
{
    memset(out, 0, sizeof *out);
    int S = in->S;
    if (S < 1 || S > PP_SCHED_MAX_S || !in->sample || !in->n_sample ||
        (in->chunk_median && (in->v < 1 || in->v > PP_SCHED_MAX_V)))
        return PP_ERR(PP_ERR_INVALID, "noise model: %d stages, %d chunks", S, in->v);
    out->S = S;
    out->op_scale = 1;
    out->kind = pp_alloc_array((size_t)S * PP_SIM_NOISE_KINDS, sizeof *out->kind);
    out->sigma_stage = pp_alloc_array((size_t)S, sizeof(double));
    out->busy_median_ns = pp_alloc_array((size_t)S, sizeof(double));
    out->level = pp_alloc_array((size_t)S, sizeof(double));
    double *scratch = pp_alloc_array(PP_SIM_NOISE_MAX_SAMPLES, sizeof(double));
    double *V = pp_alloc_array((size_t)S, sizeof(double));
    double *var = pp_alloc_array((size_t)S, sizeof(double));
    double *med_busy = pp_alloc_array((size_t)S, sizeof(double));
    pp_status st = PP_OK;
    if (!out->kind || !out->sigma_stage || !out->busy_median_ns || !out->level || !scratch ||
        !V || !var || !med_busy) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory for the op-duration distribution");
        goto done;
    }
    for (int i = 0; i < S * PP_SIM_NOISE_KINDS && st == PP_OK; i++)
        if (in->sample[i] && in->n_sample[i])
            st = fit_kind(in->sample[i], in->n_sample[i],
                          in->chunk_median && in->v > 1 ? in->chunk_median + (size_t)i * in->v
                                                        : NULL,
                          in->v, &out->kind[i], scratch);
    for (int s = 0; s < S; s++)
        V[s] = -1;
    if (st == PP_OK)
        st = fit_steps(in, out, V, med_busy);
    if (st != PP_OK)
        goto done;
    for (int s = 0; s < S; s++) {
        out->busy_median_ns[s] = med_busy[s];
        out->level[s] = 1;
    }
    /* Per stage, D_s and e together (docs/sim-dist.md, "Fitted from the capture"). The logs
     * are clipped first: above the median at 4 robust sd or, with per-step data to check them
     * against, at 1.5 x log p95 if wider (a slow tail of 5% of the ops or more stays whole);
     * below it at 4 robust sd (an op far faster than its bulk is a range that lost its time to
     * a neighbour, as after the sim backend's late wake-ups, not an op that ran fast). e_k,
     * the op's own log-variance, is the clipped factors' less the per-step parts (c =
     * sigma_step^2, d); d is what the stage's busy time varies (V) beyond c and beyond what the
     * ops' own factors give a sum of them, E = sum_k n_k m_k^2 e_k / (sum_k n_k m_k)^2 (n_k ops
     * of median m_k per step); solved by iteration. Where E exceeds V - c, the ops' own factors
     * would make busy times vary more than they did (a late wake-up on the sim backend makes one
     * op short and the next long, their sum exact): e is scaled down to that. d and C are kept
     * only above their estimates' sampling noise (2 x V sqrt(2 / n), 2 x V / sqrt(n)). e's
     * factors are the clipped logs scaled to its variance, keeping their shape. */
    double c = out->sigma_step * out->sigma_step, share_sum = 0;
    int share_n = 0;
    double per_step = in->ops_per_step > 0 ? in->ops_per_step : 1;
    for (int s = 0; s < S; s++) {
        double r[PP_SIM_NOISE_KINDS] = {0}, e[PP_SIM_NOISE_KINDS] = {0}, d = 0;
        double nm2[PP_SIM_NOISE_KINDS] = {0}, den = 0;
        for (int k = 0; k < PP_SIM_NOISE_KINDS; k++) {
            pp_sim_noise_kind *kd = &out->kind[s * PP_SIM_NOISE_KINDS + k];
            if (!kd->n)
                continue;
            double lim = 4 * kd->sigma_robust, low = lim;
            if (V[s] >= 0)
                lim = fmax(lim, 1.5 * fabs(log(kd->p95)));
            lim = fmin(lim, PP_SIM_NOISE_MAX_LOG); /* no op 1000 times its median: not noise */
            low = fmin(low, PP_SIM_NOISE_MAX_LOG);
            double sum = 0, ss = 0;
            for (uint32_t i = 0; i < kd->n; i++) {
                double l = fmin(lim, fmax(-low, kd->factor[i]));
                kd->factor[i] = l;
                sum += l;
                ss += l * l;
            }
            double var = ss / kd->n - (sum / kd->n) * (sum / kd->n);
            kd->sigma_kept = var > 0 ? sqrt(var) : 0;
            r[k] = kd->sigma_kept * kd->sigma_kept;
            double nk = k == 4 ? 1 : per_step;
            nm2[k] = nk * kd->median_ns * kd->median_ns;
            den += nk * kd->median_ns;
            /* the busy time's make-up, for its level: with chunks, each chunk's ops at its own
             * median (a stage's chunks may differ in cost), else every op at the kind's */
            const double *cm = in->chunk_median && in->v > 1
                                   ? in->chunk_median + (size_t)(s * PP_SIM_NOISE_KINDS + k) * in->v
                                   : NULL;
            double w1 = 0, w2 = 0;
            for (int c = 0; cm && k != 4 && c < in->v; c++) {
                if (!(cm[c] > 0 && isfinite(cm[c]))) {
                    w1 = 0;
                    break;
                }
                w1 += nk / in->v * cm[c];
                w2 += nk / in->v * cm[c] * cm[c];
            }
            kd->step_ns = w1 > 0 ? w1 : nk * kd->median_ns;
            kd->step_ns2 = w1 > 0 ? w2 : nm2[k];
        }
        double E = 0;
        for (int it = 0; it < 64; it++) {
            E = 0;
            for (int k = 0; k < PP_SIM_NOISE_KINDS; k++) {
                e[k] = V[s] >= 0 ? fmax(0, r[k] - c - d) : r[k];
                E += den > 0 ? nm2[k] * e[k] / (den * den) : 0;
            }
            if (V[s] < 0)
                break;
            d = fmax(0, V[s] - c - E);
            /* as for C: a variance estimated from n steps is off by about V sqrt(2 / n) */
            if (d < 2 * V[s] * sqrt(2.0 / out->n_steps))
                d = 0;
        }
        double room = fmax(0, V[s] - c);
        if (V[s] >= 0 && E > room) {
            for (int k = 0; k < PP_SIM_NOISE_KINDS; k++)
                e[k] *= E > 0 ? room / E : 0;
            d = fmax(0, V[s] - c - room);
        }
        out->sigma_stage[s] = fmin(sqrt(d), PP_SIM_NOISE_MAX_SIGMA);
        var[s] = c + out->sigma_stage[s] * out->sigma_stage[s];
        for (int k = 0; k < PP_SIM_NOISE_KINDS; k++) {
            pp_sim_noise_kind *kd = &out->kind[s * PP_SIM_NOISE_KINDS + k];
            if (!kd->n)
                continue;
            double scale = r[k] > 0 ? sqrt(e[k] / r[k]) : 0;
            if (r[k] > 0) {
                share_sum += fmin(1, (c + d) / (c + d + e[k]));
                share_n++;
            }
            for (uint32_t i = 0; i < kd->n; i++)
                kd->factor[i] = exp(scale * kd->factor[i]);
        }
    }
    out->common_share = share_n ? share_sum / share_n : 0;
    st = keep_steps(in, out, V, var, med_busy);
    if (st == PP_OK)
        pp_sim_noise_level(out);
    /* the transfers' factors (g 0, 1), then the senders' and receivers' own times' (2 .. 5) */
    for (int g = 0; g < 6 && st == PP_OK; g++) {
        const double *src = g < 2 ? in->xfer[g] : in->own[g - 2];
        uint32_t n_src = g < 2 ? in->n_xfer[g] : in->n_own[g - 2];
        uint32_t m = n_src < PP_SIM_NOISE_MAX_SAMPLES ? n_src : PP_SIM_NOISE_MAX_SAMPLES;
        if (!src || m < 8)
            continue;
        pp_sim_noise_kind *x = g < 2 ? &out->xfer[g] : &out->own[g - 2];
        if (!(x->factor = pp_alloc_array(m, sizeof(double)))) {
            st = PP_ERR(PP_ERR_NOMEM, "out of memory for the transfers' variation");
            break;
        }
        for (uint32_t i = 0; i < m; i++) {
            double f = src[i];
            if (f > 0 && isfinite(f))
                x->factor[x->n++] = fmin(exp(PP_SIM_NOISE_MAX_LOG),
                                         fmax(exp(-PP_SIM_NOISE_MAX_LOG), f));
        }
        /* reported: the spread (pprof-tune --formula) */
        memcpy(scratch, x->factor, x->n * sizeof *scratch);
        qsort(scratch, x->n, sizeof *scratch, cmp_double);
        x->p05 = quantile_sorted(scratch, x->n, 0.05);
        x->p95 = quantile_sorted(scratch, x->n, 0.95);
        x->median_ns = quantile_sorted(scratch, x->n, 0.5);
    }
done:
    pp_free(scratch);
    pp_free(V);
    pp_free(var);
    pp_free(med_busy);
    if (st != PP_OK)
        pp_sim_noise_free(out);
    return st;
}

/* ---- Monte Carlo replays ---------------------------------------------------------------- */

/* One instruction of the recorded order, with what re-timing it needs. */
typedef struct step_op {
    int32_t s, k;
    uint8_t op;
    int64_t msg;                 /* message index of a send or receive, else -1 */
    double base_ns;              /* compute: its noise-free duration; send: its transfer */
    double own_ns;               /* send: the sender's own time in it; receive: the
                                    receiver's (0: none) */
    const pp_sim_noise_kind *nk; /* its factors, NULL = none: a compute op's with a noise
                                    model, a send's and receive's with the transfers' */
    const pp_sim_noise_kind *onk; /* a send's or receive's own time's factors, NULL = none */
} step_op;

typedef struct order_rec {
    step_op *ops;
    size_t n, cap;
    const pp_sim_costs *costs;
    const pp_sim_noise *noise;
    const int *noise_stage; /* pp_sim_dist_opts.noise_stage */
} order_rec;

/* The noise model's stage whose variation stage s takes (pp_sim_dist_opts.noise_stage). */
static int noise_stage_of(const int *map, const pp_sim_noise *n, int s)
{
    if (map && map[s] >= 0 && map[s] < n->S)
        return map[s];
    return s % n->S;
}

static int kind_index(uint8_t op)
{
    switch (op) {
    case PP_OP_FWD: return 0;
    case PP_OP_BWD: return 1;
    case PP_OP_BWD_INPUT: return 2;
    case PP_OP_BWD_WEIGHT: return 3;
    case PP_OP_OPT_STEP: return 4;
    default: return -1;
    }
}

static pp_status record_op(void *ctx, int s, int k, const pp_instr *in, int64_t msg)
{
    order_rec *r = ctx;
    if (r->n == r->cap)
        return PP_ERR(PP_ERR_INVALID, "the replay ran more instructions than the lists hold");
    step_op *o = &r->ops[r->n++];
    o->s = s;
    o->k = k;
    o->op = in->op;
    o->msg = msg;
    o->nk = NULL;
    o->onk = NULL;
    o->own_ns = 0;
    int ki = kind_index(in->op);
    if (ki >= 0) {
        o->base_ns = r->costs->op_ns(r->costs->ctx, s, k, in);
        if (r->noise && r->noise->S > 0) {
            const pp_sim_noise_kind *nk =
                &r->noise->kind[noise_stage_of(r->noise_stage, r->noise, s) * PP_SIM_NOISE_KINDS +
                                ki];
            o->nk = nk->n ? nk : NULL;
        }
    } else if (in->op == PP_OP_RECV_ACT || in->op == PP_OP_RECV_GRAD) {
        o->base_ns = 0;
        o->own_ns = r->costs->recv_ns ? r->costs->recv_ns(r->costs->ctx, s, k, in) : 0;
        if (r->noise && !r->noise->xfer_fixed) { /* its message's factors, as its send's */
            const pp_sim_noise_kind *xk = &r->noise->xfer[in->op == PP_OP_RECV_GRAD];
            o->nk = xk->n ? xk : NULL;
        }
        if (r->noise && !r->noise->own_fixed && o->own_ns > 0) {
            const pp_sim_noise_kind *ok =
                &r->noise->own[in->op == PP_OP_RECV_GRAD ? PP_SIM_OWN_RECV_GRAD
                                                         : PP_SIM_OWN_RECV_ACT];
            o->onk = ok->n ? ok : NULL;
        }
    } else if (in->op == PP_OP_SEND_ACT || in->op == PP_OP_SEND_GRAD) {
        o->base_ns = r->costs->transfer_ns ? r->costs->transfer_ns(r->costs->ctx, s, k, in) : 0;
        o->own_ns = r->costs->send_ns ? r->costs->send_ns(r->costs->ctx, s, k, in) : 0;
        if (r->noise && !r->noise->xfer_fixed) {
            const pp_sim_noise_kind *xk = &r->noise->xfer[in->op == PP_OP_SEND_GRAD];
            o->nk = xk->n ? xk : NULL;
        }
        if (r->noise && !r->noise->own_fixed && o->own_ns > 0) {
            const pp_sim_noise_kind *ok =
                &r->noise->own[in->op == PP_OP_SEND_GRAD ? PP_SIM_OWN_SEND_GRAD
                                                         : PP_SIM_OWN_SEND_ACT];
            o->onk = ok->n ? ok : NULL;
        }
    } else {
        o->base_ns = 0;
    }
    return PP_OK;
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A uniform index in [0, n): the high half of a 64 x 64-bit product, one multiply per draw in
 * the replays' inner loop where pp_rng_below divides (its bias, at most n / 2^64, is far below
 * the Monte Carlo error). */
static uint64_t pick(pp_rng *rng, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)pp_rng_u64(rng) * n) >> 64);
}

typedef struct mc {
    const pp_schedule *sc;
    const pp_sim_dist_opts *o;
    const step_op *ops;
    size_t n_ops;
    double *clock;    /* [S] */
    double *stage_f;  /* [S] C x D_s of the replay */
    int *noise_q;     /* [S] the noise model's stage each stage takes its variation from
                         (noise_stage_of, resolved once), NULL without a noise model */
    double (*msg)[2]; /* [n_msgs]: when the message is due by the link model, when it comes */
    double *pre;      /* [S] each stage's time before the barrier (costs->pre_barrier_ns), NULL:
                         none */
} mc;

/* Replay `r`: the recorded order re-timed with this replay's factors. */
static double replay_once(mc *m, uint64_t r)
{
    const pp_sim_dist_opts *o = m->o;
    const pp_sim_noise *nz = o->noise;
    int S = m->sc->S;
    pp_rng rng;
    pp_rng_seed(&rng, mix64(o->seed) ^ mix64(r + 0x51ed2701u));
    if (nz && nz->S > 0 && nz->n_step_f > 0) {
        /* one of the run's steps, for every stage */
        const double *f =
            nz->step_f +
            (size_t)pick(&rng, (uint64_t)nz->n_step_f) *
                (size_t)nz->S;
        for (int s = 0; s < S; s++) {
            int q = m->noise_q[s];
            m->clock[s] = 0;
            m->stage_f[s] = f[q] * (nz->level ? nz->level[q] : 1.0);
        }
    } else {
        double c = nz && nz->sigma_step > 0 ? exp(nz->sigma_step * pp_rng_normal(&rng)) : 1.0;
        for (int s = 0; s < S; s++) {
            m->clock[s] = 0;
            double sd = nz && nz->S > 0 ? nz->sigma_stage[m->noise_q[s]] : 0;
            double d = sd > 0 ? exp(sd * pp_rng_normal(&rng)) : 1.0;
            m->stage_f[s] = c * d;
        }
    }
    int barrier_set = 0;
    double barrier = 0;
    uint64_t key_base = mix64(o->seed ^ mix64(r));
    for (size_t i = 0; i < m->n_ops; i++) {
        const step_op *x = &m->ops[i];
        double *clock = &m->clock[x->s];
        switch (x->op) {
        case PP_OP_RECV_ACT:
        case PP_OP_RECV_GRAD:
            /* A transfer's measured variation is its receiver's: timed only where the
             * receiver waited (metrics.c), a late one is a late wake-up. It delays a receiver
             * that waits for the data here too; one still busy when the data is due finds it
             * queued (without variation the two times are one: the same either way). The
             * receiver's own time counts from its start, as in sim.c. */
            {
                double own = x->onk && !o->draw
                                 ? x->own_ns * x->onk->factor[pick(&rng, x->onk->n)]
                                 : x->own_ns;
                if (x->nk && !o->draw) {
                    const double *t = m->msg[x->msg], c = *clock + own;
                    *clock = fmax(c, c <= t[0] ? t[1] : c); /* a select: a branch mispredicts */
                } else {
                    *clock = fmax(*clock + own, m->msg[x->msg][1]);
                }
            }
            break;
        case PP_OP_SEND_ACT:
        case PP_OP_SEND_GRAD:
            m->msg[x->msg][0] = *clock + x->base_ns;
            m->msg[x->msg][1] =
                *clock + (x->nk && !o->draw ? x->base_ns * x->nk->factor[pick(&rng, x->nk->n)]
                                            : x->base_ns);
            *clock += x->onk && !o->draw ? x->own_ns * x->onk->factor[pick(&rng, x->onk->n)]
                                         : x->own_ns;
            break;
        default: {
            double f;
            if (o->draw)
                f = o->draw(o->draw_ctx, x->s, x->k, &m->sc->instrs[x->s][x->k],
                            mix64(key_base ^ ((uint64_t)(uint32_t)x->s << 32 | (uint32_t)x->k)));
            else if (x->nk)
                f = m->stage_f[x->s] * x->nk->factor[pick(&rng, x->nk->n)];
            else
                f = nz ? m->stage_f[x->s] : 1.0;
            double d = x->base_ns * f;
            if (x->op == PP_OP_OPT_STEP) {
                if (!barrier_set) {
                    for (int q = 0; q < S; q++)
                        barrier = fmax(barrier, m->pre ? m->clock[q] + m->pre[q] : m->clock[q]);
                    barrier_set = 1;
                }
                *clock = barrier + d;
            } else {
                *clock += d;
            }
        }
        }
    }
    double step = 0;
    for (int s = 0; s < S; s++)
        step = fmax(step, m->clock[s]);
    return step;
}

void pp_sim_quantile_ci(const double *v, size_t n, double q, double *lo, double *hi)
{
    double sd = sqrt((double)n * q * (1 - q));
    double a = floor((double)n * q - 1.96 * sd), b = ceil((double)n * q + 1.96 * sd);
    size_t ia = a < 0 ? 0 : (size_t)a, ib = b > (double)(n - 1) ? n - 1 : (size_t)b;
    *lo = v[ia];
    *hi = v[ib];
}

pp_status pp_sim_dist(const pp_schedule *sc, const pp_sim_costs *costs, const pp_sim_dist_opts *o,
                      pp_sim_dist_result *res)
{
    memset(res, 0, sizeof *res);
    pp_sim_result base;
    pp_status st = pp_sim_run(sc, costs, &base); /* validates the lists, as every replay needs */
    if (st != PP_OK)
        return st;
    res->noise_free_ns = base.step_ns;
    pp_sim_result_free(&base);
    int n_min = o->n_min > 0 ? o->n_min : 1000;
    int n_max = o->n_max > 0 ? o->n_max : 65536;
    n_max = n_max < PP_SIM_DIST_MAX_REPLAYS ? n_max : PP_SIM_DIST_MAX_REPLAYS;
    n_min = n_min < n_max ? n_min : n_max;
    double target = o->target > 0 ? o->target : 0.003;
    int S = sc->S;
    size_t total = 0;
    for (int s = 0; s < S; s++)
        total += (size_t)sc->n_instrs[s];
    order_rec rec = {.cap = total, .costs = costs, .noise = o->noise,
                     .noise_stage = o->noise_stage};
    mc m = {.sc = sc, .o = o};
    rec.ops = pp_alloc_array(total ? total : 1, sizeof(step_op));
    m.clock = pp_alloc_array((size_t)S, sizeof(double));
    m.stage_f = pp_alloc_array((size_t)S, sizeof(double));
    if (o->noise && o->noise->S > 0) {
        m.noise_q = pp_alloc_array((size_t)S, sizeof(int));
        for (int s = 0; m.noise_q && s < S; s++)
            m.noise_q[s] = noise_stage_of(o->noise_stage, o->noise, s);
    }
    m.msg = pp_alloc_array(pp_schedule_n_msgs(sc) + 1, sizeof *m.msg);
    if (costs->pre_barrier_ns) {
        /* fixed: an all-reduce's time is the link's, not the compute's noise */
        m.pre = pp_alloc_array((size_t)S, sizeof(double));
        for (int s = 0; m.pre && s < S; s++)
            m.pre[s] = costs->pre_barrier_ns(costs->ctx, s);
    }
    int *pc = pp_alloc_array((size_t)S, sizeof(int));
    double *steps = pp_alloc_array((size_t)n_max, sizeof(double));
    double *sorted = pp_alloc_array((size_t)n_max, sizeof(double));
    if (!rec.ops || !m.clock || !m.stage_f || !m.msg || !pc || !steps || !sorted ||
        (costs->pre_barrier_ns && !m.pre) || (o->noise && o->noise->S > 0 && !m.noise_q)) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory for %d Monte Carlo replays", n_max);
        goto done;
    }
    pp_replay_hooks h = {.run = record_op, .ctx = &rec, .barrier = 1};
    if ((st = pp_schedule_replay(sc, &h, pc, NULL)) != PP_OK) {
        st = pp_error_wrap(st, "Monte Carlo replay");
        goto done;
    }
    m.ops = rec.ops;
    m.n_ops = rec.n;
    int n = 0, goal = n_min;
    for (;;) {
        for (; n < goal; n++)
            steps[n] = replay_once(&m, (uint64_t)n);
        memcpy(sorted, steps, (size_t)n * sizeof *sorted);
        qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
        res->median_ns = quantile_sorted(sorted, (size_t)n, 0.5);
        res->p95_ns = quantile_sorted(sorted, (size_t)n, 0.95);
        pp_sim_quantile_ci(sorted, (size_t)n, 0.5, &res->median_lo_ns, &res->median_hi_ns);
        pp_sim_quantile_ci(sorted, (size_t)n, 0.95, &res->p95_lo_ns, &res->p95_hi_ns);
        res->median_err = res->median_ns > 0
                              ? 0.5 * (res->median_hi_ns - res->median_lo_ns) / res->median_ns
                              : 0;
        res->p95_err =
            res->p95_ns > 0 ? 0.5 * (res->p95_hi_ns - res->p95_lo_ns) / res->p95_ns : 0;
        if ((res->median_err <= target && res->p95_err <= 3 * target) || n >= n_max)
            break;
        goal = n > n_max / 2 ? n_max : 2 * n;
    }
    res->n = n;
    res->mean_ns = mean_of(steps, (size_t)n);
    if (o->samples)
        memcpy(o->samples, steps, (size_t)n * sizeof *steps);
done:
    pp_free(rec.ops);
    pp_free(m.clock);
    pp_free(m.stage_f);
    pp_free(m.noise_q);
    pp_free(m.msg);
    pp_free(m.pre);
    pp_free(pc);
    pp_free(steps);
    pp_free(sorted);
    return st;
}

pp_status pp_sim_dist_file(pp_schedule_kind kind, const pp_partition *part, int M,
                           const pp_costs *costs, const pp_sim_dist_opts *o,
                           pp_sim_dist_result *res)
{
    pp_schedule *sc = NULL;
    pp_status st = pp_schedule_create(kind, part->S, M, part->v, &sc);
    if (st != PP_OK)
        return st;
    if ((st = pp_schedule_validate(sc, NULL)) == PP_OK) {
        pp_sim_file_costs fc = {costs, part, NULL};
        pp_sim_costs c;
        pp_sim_costs_from_file(&fc, &c);
        st = pp_sim_dist(sc, &c, o, res);
    }
    pp_schedule_destroy(sc);
    return st;
}
