/* report.c: pprof-report's pictures from an analysis (pp_report.h): the kept timeline's window,
 * the send/receive pairs and the Gantt picture through gnuplot (docs/cli/pprof-report.md). The
 * Chrome trace is report_chrome.c, the summary JSON summary.c. Reads only the public
 * pp_analysis struct. */
#define _GNU_SOURCE /* fdopen, pipe2 */
#include "pp_report.h"
#include "report_internal.h"
#include "report_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

pp_status pp_report_json(const pp_analysis *a, FILE *out) { return pp_summary_write(a, out); }

/* ======================================================================================== */
/* Send/receive pairs                                                                         */
/* ======================================================================================== */

typedef struct xfer_key {
    int64_t step;
    int32_t src, dst;
    int grad;
    uint64_t t0, t1;
    long index;
} xfer_key;

static int cmp_xfer(const void *pa, const void *pb)
{
    const xfer_key *x = pa, *y = pb;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst)
        return x->dst < y->dst ? -1 : 1;
    if (x->grad != y->grad)
        return x->grad - y->grad;
    if (x->t0 != y->t0)
        return x->t0 < y->t0 ? -1 : 1;
    if (x->t1 != y->t1)
        return x->t1 < y->t1 ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* Same link and step: the fields the FIFO order is counted within. */
static int same_queue(const xfer_key *x, const xfer_key *y)
{
    return x->step == y->step && x->src == y->src && x->dst == y->dst && x->grad == y->grad;
}

long pp_report_pair_transfers(const pp_analysis *a, long *recv_of)
{
    size_t n = a->n_ops, ns = 0, nr = 0;
    xfer_key *sends = malloc((n ? n : 1) * sizeof *sends);
    xfer_key *recvs = malloc((n ? n : 1) * sizeof *recvs);
    if (!sends || !recvs) {
        free(sends);
        free(recvs);
        PP_ERR(PP_ERR_NOMEM, "out of memory pairing %zu transfers", n);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const pp_aop *o = &a->ops[i];
        recv_of[i] = -1;
        int send = o->kind == PP_AOP_SEND_ACT || o->kind == PP_AOP_SEND_GRAD;
        int recv = o->kind == PP_AOP_RECV_ACT || o->kind == PP_AOP_RECV_GRAD;
        if (!send && !recv)
            continue;
        xfer_key k = {o->step,
                      send ? o->stage : o->peer,
                      send ? o->peer : o->stage,
                      o->kind == PP_AOP_SEND_GRAD || o->kind == PP_AOP_RECV_GRAD,
                      o->t0,
                      o->t1,
                      (long)i};
        if (send)
            sends[ns++] = k;
        else
            recvs[nr++] = k;
    }
    qsort(sends, ns, sizeof *sends, cmp_xfer);
    qsort(recvs, nr, sizeof *recvs, cmp_xfer);
    long pairs = 0;
    size_t i = 0, j = 0;
    while (i < ns && j < nr) {
        if (same_queue(&sends[i], &recvs[j])) {
            recv_of[sends[i].index] = recvs[j].index;
            pairs++;
            i++;
            j++;
            continue;
        }
        /* different queues: advance the side whose queue sorts first (time ignored) */
        xfer_key s = sends[i], r = recvs[j];
        s.t0 = r.t0 = s.t1 = r.t1 = 0;
        s.index = r.index = 0;
        if (cmp_xfer(&s, &r) < 0)
            i++;
        else
            j++;
    }
    free(sends);
    free(recvs);
    return pairs;
}

/* ======================================================================================== */
/* Kept timeline: which steps are drawn and where time starts                                 */
/* ======================================================================================== */

const pp_astep *pp_report_step_of(const pp_analysis *a, int64_t step)
{
    for (size_t i = 0; i < a->n_steps; i++)
        if (a->steps[i].step == step)
            return &a->steps[i];
    return NULL;
}

pp_status pp_report_window_of(const pp_analysis *a, int64_t max_steps, pp_report_window *w)
{
    if (!a->n_ops)
        return PP_ERR(PP_ERR_INVALID, "no timeline kept in the analysis (steps %lld..%lld): "
                                      "nothing to draw",
                      (long long)a->kept_lo, (long long)a->kept_hi);
    w->lo = a->kept_lo;
    w->hi = a->kept_hi;
    if (max_steps > 0 && w->hi - w->lo + 1 > max_steps)
        w->hi = w->lo + max_steps - 1;
    double first_op = INFINITY;
    w->end = 0;
    for (size_t i = 0; i < a->n_ops; i++) {
        const pp_aop *o = &a->ops[i];
        if (o->step < w->lo || o->step > w->hi)
            continue;
        first_op = (double)o->t0 < first_op ? (double)o->t0 : first_op;
        w->end = (double)o->t1 > w->end ? (double)o->t1 : w->end;
    }
    const pp_astep *s0 = pp_report_step_of(a, w->lo);
    w->origin = s0 && s0->t0_ns <= first_op ? s0->t0_ns : first_op;
    for (int64_t s = w->lo; s <= w->hi; s++) {
        const pp_astep *sp = pp_report_step_of(a, s);
        if (sp && sp->t0_ns + pp_report_step_extent_ns(sp) > w->end)
            w->end = sp->t0_ns + pp_report_step_extent_ns(sp);
    }
    if (!isfinite(w->origin))
        return PP_ERR(PP_ERR_INVALID, "no timeline kept for steps %lld..%lld: nothing to draw",
                      (long long)w->lo, (long long)w->hi);
    return PP_OK;
}

/* ======================================================================================== */
/* Gantt                                                                                      */
/* ======================================================================================== */

static int drawn_kind(uint8_t k) { return k < PP_AOP_COUNT; }

static pp_status gantt_data(const pp_analysis *a, const pp_report_window *win, FILE *out)
{
    fprintf(out, "# pipeprof Gantt data (pprof-report): steps %lld..%lld, times in ms from the "
                 "start of step %lld\n# stage start_ms end_ms kind mb chunk\n",
            (long long)win->lo, (long long)win->hi, (long long)win->lo);
    for (size_t i = 0; i < a->n_ops; i++) {
        const pp_aop *o = &a->ops[i];
        if (o->step < win->lo || o->step > win->hi || !drawn_kind(o->kind))
            continue;
        fprintf(out, "%d %.6f %.6f %s %d %d\n", o->stage, pp_report_ms((double)o->t0 - win->origin),
                pp_report_ms((double)o->t1 - win->origin),
                pp_aop_kind_name((pp_aop_kind)o->kind), o->mb, o->chunk);
    }
    for (size_t i = 0; i < a->n_allreduce_ops; i++) {
        const pp_aop *o = &a->allreduce_ops[i];
        if (o->step < win->lo || o->step > win->hi)
            continue;
        fprintf(out, "%d %.6f %.6f allreduce -1 -1\n", o->stage,
                pp_report_ms((double)o->t0 - win->origin),
                pp_report_ms((double)o->t1 - win->origin));
    }
    /* GPU capture: the stage's GPU work, and NCCL's GPU spans on the sender's row (its
     * communicator rank is its stage in a pipeline communicator) */
    for (size_t i = 0; i < a->gpu.n_spans; i++) {
        const pp_gpu_span *sp = &a->gpu.spans[i];
        int row = sp->nccl ? sp->rank : sp->stage;
        if (row < 0 || row >= a->S || (!sp->nccl && (sp->step < win->lo || sp->step > win->hi)))
            continue;
        fprintf(out, "%d %.6f %.6f %s -1 -1\n", row, pp_report_ms((double)sp->start - win->origin),
                pp_report_ms((double)sp->end - win->origin), sp->nccl ? "nccl" : "gpu");
    }
    if (fflush(out) != 0 || ferror(out))
        return PP_ERR(PP_ERR_IO, "writing the Gantt data: %s", strerror(errno));
    return PP_OK;
}

/* ---- the generic view's Gantt: one row per thread, its top-level ranges ---- */

/* Colours of the names with the most time (a->ranges' order), the rest grey. */
static const unsigned k_generic_colours[] = {0x4c72b0, 0xdd8452, 0x55a868, 0xc44e52,
                                             0x8172b3, 0x937860, 0xda8bc3, 0x8c8c8c};
enum { GENERIC_COLOURED = 7, GENERIC_GREY = 0xb0b0b0 };

/* The coloured names: the first GENERIC_COLOURED named rows of a->ranges (indices in top[]). */
static size_t generic_top(const pp_analysis *a, size_t *top)
{
    size_t n = 0;
    for (size_t i = 0; i < a->n_ranges && n < GENERIC_COLOURED; i++)
        if (!a->ranges[i].other)
            top[n++] = i;
    return n;
}

typedef struct generic_gantt {
    const pp_analysis *a;
    FILE *out;
    size_t top[GENERIC_COLOURED], n_top;
    uint64_t drawn, left_out;
} generic_gantt;

static void generic_bar(void *ctx, const pp_report_event *e)
{
    generic_gantt *g = ctx;
    if (e->counter || e->mark || e->depth > 0 || e->thread < 0 ||
        g->a->threads[e->thread].file < 0)
        return;
    if (g->drawn >= PP_REPORT_GANTT_MAX_BARS) {
        g->left_out++;
        return;
    }
    unsigned colour = GENERIC_GREY;
    for (size_t k = 0; k < g->n_top; k++) {
        const pp_arange *r = &g->a->ranges[g->top[k]];
        if (strcmp(r->name, e->name) == 0 && strcmp(r->domain, e->domain) == 0) {
            colour = k_generic_colours[k];
            break;
        }
    }
    /* start/end ranges (depth -1) may overlap the pushed ones: a thin bar at the row's top */
    fprintf(g->out, "%d %.6f %.6f %u %d\n", e->thread,
            pp_report_ms((double)e->t0 - g->a->wall_t0_ns),
            pp_report_ms((double)e->t1 - g->a->wall_t0_ns), colour, e->depth < 0);
    g->drawn++;
}

static pp_status generic_data(const pp_analysis *a, FILE *out, generic_gantt *g)
{
    memset(g, 0, sizeof *g);
    g->a = a;
    g->out = out;
    g->n_top = generic_top(a, g->top);
    fprintf(out, "# pipeprof Gantt data (pprof-report, no pipeline ranges): the top-level ranges "
                 "of each thread, at most %d, times in ms from the run's first range\n"
                 "# thread start_ms end_ms rgb startend\n",
            PP_REPORT_GANTT_MAX_BARS);
    pp_status st = pp_report_each_event(a, generic_bar, g);
    if (st != PP_OK)
        return st;
    if (g->left_out)
        fprintf(out, "# %llu more range(s) left out\n", (unsigned long long)g->left_out);
    if (fflush(out) != 0 || ferror(out))
        return PP_ERR(PP_ERR_IO, "writing the Gantt data: %s", strerror(errno));
    return PP_OK;
}

/* Whether the Gantt draws the generic view (no pipeline timeline, but other ranges). */
static int gantt_generic(const pp_analysis *a) { return !a->n_ops && a->n_ranges; }

pp_status pp_report_gantt_data(const pp_analysis *a, FILE *out)
{
    if (gantt_generic(a)) {
        generic_gantt g;
        return generic_data(a, out, &g);
    }
    pp_report_window win;
    pp_status st = pp_report_window_of(a, PP_REPORT_GANTT_MAX_STEPS, &win);
    return st != PP_OK ? st : gantt_data(a, &win, out);
}

/* path with its extension (after the last '.' of the last component) replaced by ext. */
static pp_status swap_ext(const char *path, const char *ext, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(path, '.');
    size_t stem = dot && dot > (slash ? slash : path) && dot[1] != '/' ? (size_t)(dot - path)
                                                                       : strlen(path);
    if ((size_t)snprintf(out, cap, "%.*s%s", (int)stem, path, ext) >= cap)
        return PP_ERR(PP_ERR_INVALID, "path too long: '%s'", path);
    return PP_OK;
}

/* gnuplot's single-quoted strings take everything literally but '' for a quote. */
static void gp_quote(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

/* "name='value'" for gnuplot -e, value quoted as above; 0 when it does not fit. */
static int gp_assign(char *out, size_t cap, const char *name, const char *value)
{
    size_t n = (size_t)snprintf(out, cap, "%s='", name);
    for (; n < cap && *value; value++) {
        if (*value == '\'' && n + 1 < cap)
            out[n++] = '\'';
        out[n++] = *value;
    }
    if (n + 2 > cap)
        return 0;
    out[n++] = '\'';
    out[n] = '\0';
    return 1;
}

typedef struct gantt_kind {
    const char *kinds[2]; /* data-file kinds drawn by this plot element */
    const char *title;
    const char *colour;
    int transfer;         /* 1: a thin bar at the bottom of the row; 2: a thin bar at its top */
} gantt_kind;

static const gantt_kind k_gantt_kinds[] = {
    {{"fwd", NULL}, "forward", "#4c72b0", 0},
    {{"bwd", NULL}, "backward", "#dd8452", 0},
    {{"bwd_input", NULL}, "backward (input)", "#c44e52", 0},
    {{"bwd_weight", NULL}, "backward (weight)", "#8172b3", 0},
    {{"opt_step", NULL}, "optimizer", "#55a868", 0},
    {{"send_act", "send_grad"}, "send", "#3a3a3a", 1},
    {{"recv_act", "recv_grad"}, "recv (waiting)", "#b5a36a", 1},
    {{"allreduce", NULL}, "gradient all-reduce (dp)", "#937860", 0},
    {{"gpu", NULL}, "GPU work (--cuda)", "#2ca02c", 2},
    {{"nccl", NULL}, "NCCL on the GPU (--nccl)", "#17becf", 1},
};

static int kind_present(const pp_analysis *a, const pp_report_window *win, const gantt_kind *g)
{
    if (strcmp(g->kinds[0], "allreduce") == 0)
        return a->n_allreduce_ops > 0;
    for (size_t i = 0; i < a->gpu.n_spans; i++)
        if (strcmp(g->kinds[0], a->gpu.spans[i].nccl ? "nccl" : "gpu") == 0)
            return 1;
    for (size_t i = 0; i < a->n_ops; i++) {
        const pp_aop *o = &a->ops[i];
        if (o->step < win->lo || o->step > win->hi)
            continue;
        const char *name = pp_aop_kind_name((pp_aop_kind)o->kind);
        for (int k = 0; k < 2 && g->kinds[k]; k++)
            if (strcmp(name, g->kinds[k]) == 0)
                return 1;
    }
    return 0;
}

/* The title (the run's shape and headline figures) and the x axis label (the steps shown). */
static void gantt_titles(const pp_analysis *a, const pp_report_window *win, FILE *f)
{
    char title[256];
    int n = snprintf(title, sizeof title, "S=%d", a->S);
    if (a->M > 0)
        n += snprintf(title + n, sizeof title - (size_t)n, ", M=%d", a->M);
    if (a->v > 1 && n < (int)sizeof title)
        n += snprintf(title + n, sizeof title - (size_t)n, ", v=%d", a->v);
    if (a->schedule[0] && n < (int)sizeof title)
        n += snprintf(title + n, sizeof title - (size_t)n, ", %s", a->schedule);
    if (n < (int)sizeof title)
        snprintf(title + n, sizeof title - (size_t)n, ": step %.1f ms, bubble %.1f%%",
                 pp_report_ms(a->step_ns.mean), 100 * a->bubble_ratio);
    fputs("set title ", f);
    gp_quote(f, title);
    fputs(" font ',11'\n", f);
    if (win->hi > win->lo)
        fprintf(f, "set xlabel 'time (ms) from the start of step %lld (steps %lld..%lld shown; "
                   "title: means over %zu analyzed steps)'\n",
                (long long)win->lo, (long long)win->lo, (long long)win->hi, a->n_steps);
    else
        fprintf(f, "set xlabel 'time (ms) from the start of step %lld (step %lld shown; title: "
                   "means over %zu analyzed steps)'\n",
                (long long)win->lo, (long long)win->lo, a->n_steps);
}

/* The plot command: one element per kind present in the drawn steps, then the micro-batch ids
 * where they fit. */
static pp_status gantt_plot(const pp_analysis *a, const pp_report_window *win, FILE *f,
                            double ms_per_px)
{
    fprintf(f, "V = %d\nCW = %.6f\nPAD = %.6f\n", a->v, 6.5 * ms_per_px, 5.0 * ms_per_px);
    fputs("lab(mb, ch) = V > 1 ? sprintf('%d.%d', mb, ch) : sprintf('%d', mb)\n"
          "fits(l, w) = w >= strlen(l) * CW + PAD\n"
          "iscomp(k) = k eq 'fwd' || k eq 'bwd' || k eq 'bwd_input' || k eq 'bwd_weight'\n",
          f);
    fputs("plot \\\n", f);
    int first = 1;
    for (size_t g = 0; g < sizeof k_gantt_kinds / sizeof k_gantt_kinds[0]; g++) {
        const gantt_kind *k = &k_gantt_kinds[g];
        if (!kind_present(a, win, k))
            continue;
        char cond[96];
        if (k->kinds[1])
            snprintf(cond, sizeof cond, "(strcol(4) eq '%s' || strcol(4) eq '%s')", k->kinds[0],
                     k->kinds[1]);
        else
            snprintf(cond, sizeof cond, "(strcol(4) eq '%s')", k->kinds[0]);
        double y0 = k->transfer == 1 ? 0.20 : k->transfer == 2 ? -0.50 : -0.42;
        double y1 = k->transfer == 1 ? 0.42 : k->transfer == 2 ? -0.43 : 0.16;
        fprintf(f, "%s  data using (%s ? ($2+$3)/2 : NaN):1:2:3:($1%+.2f):($1%+.2f) with "
                   "boxxyerror fc rgb '%s' title '%s'",
                first ? "" : ", \\\n", cond, y0, y1, k->colour, k->title);
        first = 0;
    }
    if (first)
        return PP_ERR(PP_ERR_INVALID, "no ops to draw in steps %lld..%lld", (long long)win->lo,
                      (long long)win->hi);
    fputs(", \\\n  keyentry with boxes fc rgb '#ececec' title 'idle'", f);
    an_gantt_memory_plot(a, a->S > 0 ? a->S : 1, f);
    /* micro-batch ids where they fit */
    fputs(", \\\n  data using (iscomp(strcol(4)) && fits(lab($5,$6), $3-$2) ? ($2+$3)/2 : NaN)"
          ":($1-0.13):(lab($5,$6)) with labels tc rgb 'white' font ',8' notitle\n",
          f);
    fputs("set output\n", f);
    return PP_OK;
}

static pp_status gantt_script(const pp_analysis *a, const pp_report_window *win, FILE *f, int svg,
                              const char *out_path, const char *data_path)
{
    int S = a->S > 0 ? a->S : 1;
    int rows = S + (int)a->n_mem_stages; /* the memory rows below the stages' */
    int width = 1200;
    int height = 150 + 46 * rows;
    height = height < 300 ? 300 : height > 2000 ? 2000 : height;
    double span_ms = pp_report_ms(win->end - win->origin);
    if (span_ms <= 0)
        span_ms = 1;
    double xmax = span_ms * 1.01;
    /* about 940 px of plot width (the key takes the rest); ~6.5 px a digit at 9 pt */
    double ms_per_px = xmax / 940.0;
    fprintf(f, "# pipeprof Gantt (pprof-report): steps %lld..%lld. Data columns: stage "
               "start_ms end_ms kind mb chunk\n",
            (long long)win->lo, (long long)win->hi);
    if (svg)
        fprintf(f, "set terminal svg size %d,%d dynamic noenhanced font 'sans,10' background "
                   "'white'\n",
                width, height);
    else
        fprintf(f, "set terminal pngcairo size %d,%d noenhanced font 'sans,9'\n", width, height);
    /* pprof-report hands gnuplot a temporary name (-e outfile=...); run by hand, the script
     * draws out_path itself. */
    fputs("if (!exists('outfile')) outfile = ", f);
    gp_quote(f, out_path);
    fputs("\nset output outfile\ndata = ", f);
    gp_quote(f, data_path);
    fputc('\n', f);
    char mdat[4096];
    if (a->n_mem_stages && swap_ext(data_path, ".mem.dat", mdat, sizeof mdat) == PP_OK) {
        fputs("memdata = ", f); /* the memory rows' (pp_report_gantt writes it beside) */
        gp_quote(f, mdat);
        fputc('\n', f);
    }
    gantt_titles(a, win, f);
    fprintf(f, "set xrange [0:%.6f]\nset yrange [%d.5:-0.5]\n", xmax, rows - 1);
    fputs("set ytics (", f);
    int every = S > 32 ? (S + 31) / 32 : 1; /* at most ~32 tick labels */
    for (int s = 0, first = 1; s < S; s += every, first = 0)
        fprintf(f, "%s'stage %d' %d", first ? "" : ", ", s, s);
    an_gantt_memory_ytics(a, S, f);
    fputs(") scale 0\nset xtics out nomirror\nset mxtics\nset border 3\n", f);
    fputs("set key outside right top vertical Left reverse samplen 2 spacing 1.2\n", f);
    fputs("set style fill solid 1.0 border rgb 'white'\n", f);
    /* idle: the light background a row shows where no bar covers it */
    for (int s = 0; s < S; s++)
        fprintf(f, "set object %d rect from 0,%.2f to %.6f,%.2f fc rgb '#ececec' fs solid 1.0 "
                   "noborder behind\n",
                s + 1, s - 0.42, span_ms, s + 0.42);
    /* step boundaries */
    for (int64_t st = win->lo; st <= win->hi; st++) {
        const pp_astep *sp = pp_report_step_of(a, st);
        if (!sp)
            continue;
        double x0 = pp_report_ms(sp->t0_ns - win->origin),
               x1 = pp_report_ms(sp->t0_ns + pp_report_step_extent_ns(sp) - win->origin);
        fprintf(f, "set arrow from %.6f, graph 0 to %.6f, graph 1 nohead dt 2 lw 1.2 lc rgb "
                   "'#202020' front\n",
                x0, x0);
        if (st == win->hi)
            fprintf(f, "set arrow from %.6f, graph 0 to %.6f, graph 1 nohead dt 2 lw 1.2 lc "
                       "rgb '#202020' front\n",
                    x1, x1);
        fprintf(f, "set label 'step %lld' at %.6f, graph 1 offset 0,0.6 font ',8' front\n",
                (long long)st, x0);
    }
    pp_status st = gantt_plot(a, win, f, ms_per_px);
    if (st != PP_OK)
        return st;
    if (fflush(f) != 0 || ferror(f))
        return PP_ERR(PP_ERR_IO, "writing the gnuplot script: %s", strerror(errno));
    return PP_OK;
}

/* Runs `gnuplot script` (PATH search, no shell) and waits. The child reports a failed exec
 * through a close-on-exec pipe, so "not installed" is told apart from "gnuplot failed". */
static pp_status run_gnuplot(const char *script, const char *output)
{
    char assign[8300];
    if (!gp_assign(assign, sizeof assign, "outfile", output))
        return PP_ERR(PP_ERR_INVALID, "path too long: '%s'", output);
    int errp[2], outp[2];
    if (pipe2(errp, O_CLOEXEC) != 0)
        return PP_ERR(PP_ERR_RUNTIME, "pipe: %s", strerror(errno));
    if (pipe2(outp, O_CLOEXEC) != 0) {
        close(errp[0]);
        close(errp[1]);
        return PP_ERR(PP_ERR_RUNTIME, "pipe: %s", strerror(errno));
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(errp[0]);
        close(errp[1]);
        close(outp[0]);
        close(outp[1]);
        return PP_ERR(PP_ERR_RUNTIME, "fork: %s", strerror(e));
    }
    if (pid == 0) {
        /* gnuplot's messages go to the pipe (the parent keeps the first lines for the error) */
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
        }
        dup2(outp[1], 2);
        char *argv[] = {(char *)"gnuplot", (char *)"-e", assign, (char *)script, NULL};
        execvp(argv[0], argv);
        int e = errno;
        ssize_t w = write(errp[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(errp[1]);
    close(outp[1]);
    int exec_errno = 0;
    ssize_t got;
    do
        got = read(errp[0], &exec_errno, sizeof exec_errno);
    while (got < 0 && errno == EINTR);
    close(errp[0]);
    char msg[1024];
    size_t len = 0;
    for (;;) {
        char buf[4096];
        ssize_t r = read(outp[0], buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        size_t take = (size_t)r < sizeof msg - 1 - len ? (size_t)r : sizeof msg - 1 - len;
        memcpy(msg + len, buf, take);
        len += take;
    }
    msg[len] = '\0';
    close(outp[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return PP_ERR(PP_ERR_RUNTIME, "waiting for gnuplot: %s", strerror(errno));
    }
    if (got == (ssize_t)sizeof exec_errno) {
        if (exec_errno == ENOENT)
            return PP_ERR(PP_ERR_RUNTIME, "gnuplot not found (install gnuplot-nox)");
        return PP_ERR(PP_ERR_RUNTIME, "cannot run gnuplot: %s", strerror(exec_errno));
    }
    /* Keep gnuplot's own words, without blank lines, as the error's detail. */
    for (char *p = msg; *p; p++)
        if (*p == '\n')
            *p = ' ';
    if (WIFSIGNALED(status))
        return PP_ERR(PP_ERR_RUNTIME, "gnuplot killed by signal %d: %s", WTERMSIG(status), msg);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return PP_ERR(PP_ERR_RUNTIME, "gnuplot failed (exit status %d): %s",
                      WIFEXITED(status) ? WEXITSTATUS(status) : -1, msg);
    return PP_OK;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

typedef pp_status (*gantt_file_fn)(const pp_analysis *, const pp_report_window *, FILE *, int,
                                  const char *, const char *);

static pp_status write_with(const char *path, const char *what, gantt_file_fn fn,
                            const pp_analysis *a, const pp_report_window *win, int svg,
                            const char *p1, const char *p2)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return PP_ERR(PP_ERR_IO, "cannot write the %s '%s': %s", what, path, strerror(errno));
    pp_status st = fn(a, win, f, svg, p1, p2);
    if (fclose(f) != 0 && st == PP_OK)
        st = PP_ERR(PP_ERR_IO, "writing the %s '%s': %s", what, path, strerror(errno));
    return st;
}

/* The memory rows' data (report_memory.c), a file of its own beside the bars' (.mem.dat). */
static pp_status mem_data_fn(const pp_analysis *a, const pp_report_window *win, FILE *f, int svg,
                             const char *p1, const char *p2)
{
    (void)svg, (void)p1, (void)p2;
    return an_gantt_memory_data(a, win, f);
}

static pp_status data_fn(const pp_analysis *a, const pp_report_window *win, FILE *f, int svg,
                         const char *p1, const char *p2)
{
    (void)svg;
    (void)p1;
    (void)p2;
    return gantt_data(a, win, f);
}

/* The generic view's gnuplot script: a row per thread, the drawn bars coloured by name. */
static pp_status generic_script(const pp_analysis *a, const generic_gantt *g, FILE *f, int svg,
                                const char *out_path, const char *data_path)
{
    int T = a->n_threads > 0 ? (int)a->n_threads : 1;
    int height = 150 + 30 * T;
    height = height < 300 ? 300 : height > 2400 ? 2400 : height;
    double xmax = pp_report_ms(a->wall_ns) * 1.01;
    if (xmax <= 0)
        xmax = 1;
    fputs("# pipeprof Gantt (pprof-report, no pipeline ranges). Data columns: thread start_ms "
          "end_ms rgb startend\n",
          f);
    if (svg)
        fprintf(f, "set terminal svg size 1200,%d dynamic noenhanced font 'sans,10' background "
                   "'white'\n",
                height);
    else
        fprintf(f, "set terminal pngcairo size 1200,%d noenhanced font 'sans,9'\n", height);
    fputs("if (!exists('outfile')) outfile = ", f);
    gp_quote(f, out_path);
    fputs("\nset output outfile\ndata = ", f);
    gp_quote(f, data_path);
    fputc('\n', f);
    char title[200];
    if (g->left_out)
        snprintf(title, sizeof title, "%zu thread(s), %llu range(s) of %zu name(s): the first "
                                      "%llu top-level ranges drawn, %llu left out",
                 a->n_threads, (unsigned long long)a->generic_ranges, a->n_ranges,
                 (unsigned long long)g->drawn, (unsigned long long)g->left_out);
    else
        snprintf(title, sizeof title, "%zu thread(s), %llu range(s) of %zu name(s): top-level "
                                      "ranges",
                 a->n_threads, (unsigned long long)a->generic_ranges, a->n_ranges);
    fputs("set title ", f);
    gp_quote(f, title);
    fputs(" font ',11'\nset xlabel 'time (ms) from the run''s first range'\n", f);
    fprintf(f, "set xrange [0:%.6f]\nset yrange [%d.5:-0.5]\n", xmax, T - 1);
    fputs("set ytics (", f);
    int every = T > 40 ? (T + 39) / 40 : 1;
    for (int i = 0, first = 1; i < T && (size_t)i < a->n_threads; i += every, first = 0) {
        const pp_athread *t = &a->threads[i];
        char label[128];
        if (t->file < 0)
            snprintf(label, sizeof label, "%s", t->name);
        else if (t->name[0] && pp_report_tid_is_own(t->tid))
            snprintf(label, sizeof label, "%.40s", t->name);
        else if (t->name[0])
            snprintf(label, sizeof label, "%u %.40s", t->tid, t->name);
        else
            snprintf(label, sizeof label, "tid %u", t->tid);
        fputs(first ? "" : ", ", f);
        gp_quote(f, label);
        fprintf(f, " %d", i);
    }
    fputs(") scale 0\nset xtics out nomirror\nset border 3\n", f);
    fputs("set key outside right top vertical Left reverse samplen 2 spacing 1.2\n", f);
    fputs("set style fill solid 1.0 border rgb 'white'\nplot \\\n", f);
    fputs("  data using (($2+$3)/2):1:2:3:($1-($5 > 0 ? 0.42 : 0.30)):($1+($5 > 0 ? -0.32 : 0.30)):4 "
          "with boxxyerror fc rgb variable notitle",
          f);
    for (size_t k = 0; k < g->n_top; k++) {
        const pp_arange *r = &a->ranges[g->top[k]];
        char name[PP_ANALYSIS_NAME_BYTES + 72];
        snprintf(name, sizeof name, "%s%s%.60s", r->domain, r->domain[0] ? ": " : "",
                 r->name[0] ? r->name : "(no name)");
        fprintf(f, ", \\\n  keyentry with boxes fc rgb '#%06x' title ", k_generic_colours[k]);
        gp_quote(f, name);
    }
    fprintf(f, ", \\\n  keyentry with boxes fc rgb '#%06x' title 'other names'\n",
            (unsigned)GENERIC_GREY);
    fputs("set output\n", f);
    if (fflush(f) != 0 || ferror(f))
        return PP_ERR(PP_ERR_IO, "writing the gnuplot script: %s", strerror(errno));
    return PP_OK;
}

/* Writes the generic view's data and script. */
static pp_status generic_files(const pp_analysis *a, int svg, const char *out_path,
                               const char *dat, const char *gp)
{
    generic_gantt g;
    FILE *f = fopen(dat, "w");
    if (!f)
        return PP_ERR(PP_ERR_IO, "cannot write the Gantt data '%s': %s", dat, strerror(errno));
    pp_status st = generic_data(a, f, &g);
    if (fclose(f) != 0 && st == PP_OK)
        st = PP_ERR(PP_ERR_IO, "writing the Gantt data '%s': %s", dat, strerror(errno));
    if (st != PP_OK)
        return st;
    if (!g.drawn)
        return PP_ERR(PP_ERR_INVALID, "Gantt: no range to draw");
    f = fopen(gp, "w");
    if (!f)
        return PP_ERR(PP_ERR_IO, "cannot write the gnuplot script '%s': %s", gp, strerror(errno));
    st = generic_script(a, &g, f, svg, out_path, dat);
    if (fclose(f) != 0 && st == PP_OK)
        st = PP_ERR(PP_ERR_IO, "writing the gnuplot script '%s': %s", gp, strerror(errno));
    return st;
}

pp_status pp_report_gantt(const pp_analysis *a, const char *out_path, const char *data_path)
{
    if (!a || !out_path || !out_path[0])
        return PP_ERR(PP_ERR_INVALID, "Gantt: no analysis or no output path");
    int svg = ends_with(out_path, ".svg");
    if (!svg && !ends_with(out_path, ".png")) {
        const char *slash = strrchr(out_path, '/');
        const char *dot = strrchr(out_path, '.');
        if (dot && (!slash || dot > slash))
            return PP_ERR(PP_ERR_INVALID, "Gantt '%s': unsupported extension '%s' (use .png or "
                                          ".svg)",
                          out_path, dot);
        return PP_ERR(PP_ERR_INVALID, "Gantt '%s': no extension (use .png or .svg)", out_path);
    }
    for (const char *p = out_path; *p; p++)
        if (*p == '\n' || *p == '\r')
            return PP_ERR(PP_ERR_INVALID, "Gantt: a line break in the output path");
    char dat[4096], gp[4096], tmp[4096];
    pp_status st = PP_OK;
    if (data_path) {
        if ((size_t)snprintf(dat, sizeof dat, "%s", data_path) >= sizeof dat)
            return PP_ERR(PP_ERR_INVALID, "path too long: '%s'", data_path);
    } else if ((st = swap_ext(out_path, ".dat", dat, sizeof dat)) != PP_OK) {
        return st;
    }
    for (const char *p = dat; *p; p++)
        if (*p == '\n' || *p == '\r')
            return PP_ERR(PP_ERR_INVALID, "Gantt: a line break in the data path");
    if ((st = swap_ext(dat, ".gp", gp, sizeof gp)) != PP_OK)
        return st;
    if (strcmp(gp, dat) == 0 || strcmp(gp, out_path) == 0) {
        if (strlen(dat) + 4 > sizeof gp)
            return PP_ERR(PP_ERR_INVALID, "path too long: '%s'", dat);
        snprintf(gp, sizeof gp, "%.4090s.gp", dat);
    }
    if (strcmp(dat, out_path) == 0)
        return PP_ERR(PP_ERR_INVALID, "Gantt: the data file would overwrite the picture '%s'",
                      out_path);
    /* gnuplot draws into a temporary file renamed over out_path once complete, so a failed
     * run never leaves a half picture (or an old one that looks new). */
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp-%ld", out_path, (long)getpid()) >= sizeof tmp)
        return PP_ERR(PP_ERR_INVALID, "path too long: '%s'", out_path);
    pp_report_window win;
    if (gantt_generic(a)) {
        if ((st = generic_files(a, svg, out_path, dat, gp)) != PP_OK)
            return st;
    } else {
        if ((st = pp_report_window_of(a, PP_REPORT_GANTT_MAX_STEPS, &win)) != PP_OK)
            return st;
        if ((st = write_with(dat, "Gantt data", data_fn, a, &win, svg, NULL, NULL)) != PP_OK)
            return st;
        char mdat[4096];
        if (a->n_mem_stages &&
            ((st = swap_ext(dat, ".mem.dat", mdat, sizeof mdat)) != PP_OK ||
             (st = write_with(mdat, "Gantt memory data", mem_data_fn, a, &win, svg, NULL,
                              NULL)) != PP_OK))
            return st;
        if ((st = write_with(gp, "gnuplot script", gantt_script, a, &win, svg, out_path, dat)) !=
            PP_OK)
            return st;
    }
    unlink(tmp);
    if ((st = run_gnuplot(gp, tmp)) != PP_OK) {
        unlink(tmp);
        return pp_error_wrap(st, "Gantt '%s'", out_path);
    }
    struct stat sb;
    if (stat(tmp, &sb) != 0 || sb.st_size == 0) {
        unlink(tmp);
        return PP_ERR(PP_ERR_RUNTIME, "Gantt '%s': gnuplot exited without writing the picture "
                                      "(script %s)",
                      out_path, gp);
    }
    if (rename(tmp, out_path) != 0) {
        int e = errno;
        unlink(tmp);
        return PP_ERR(PP_ERR_IO, "cannot write the Gantt '%s': %s", out_path, strerror(e));
    }
    return PP_OK;
}
