/* report_memory.c: the memory of an analysis (memory.c; docs/metrics.md "Memory") in the text
 * report (pp_analysis_print's "Memory" tables) and the summary JSON ("memory",
 * docs/summary-json.md). Called by report_text.c and summary.c; nothing is printed or written
 * when the run reported no memory. */
#include "report_internal.h"
#include "report_memory.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_kind[] = {"counter", "heap", "rss"};

static const char *kind_name(int k) { return k >= 0 && k <= PP_AMEM_RSS ? k_kind[k] : "?"; }

/* A series' value in a 14-wide column: an integer (bytes, counts) in full, anything else to 6
 * significant digits (8388608 bytes, not 8.38861e+06). */
static void value_cell(char *buf, size_t cap, double v)
{
    if (v == floor(v) && fabs(v) < 1e14)
        snprintf(buf, cap, "%14.0f", v);
    else
        snprintf(buf, cap, "%14.6g", v);
}

static void process_label(const pp_analysis *a, int32_t file, char *buf, size_t cap)
{
    if (file < 0 || (size_t)file >= a->n_files)
        snprintf(buf, cap, "?");
    else if (a->files[file].rank >= 0)
        snprintf(buf, cap, "rank %d pid %u", a->files[file].rank, a->files[file].pid);
    else
        snprintf(buf, cap, "pid %u", a->files[file].pid);
}

void an_report_memory_text(const pp_analysis *a, FILE *out)
{
    if (a->n_mem_stages) {
        fprintf(out, "\nMemory per stage (peak MiB; the total's peak: step, ms into it, share "
                     "of the step)\n%-6s", "stage");
        for (int p = 0; p < PP_MEM_N_PURPOSES; p++)
            fprintf(out, " %11s", pp_mem_purpose_name(p));
        fprintf(out, " %11s %6s %9s %8s\n", "total", "step", "at ms", "of step");
        for (size_t i = 0; i < a->n_mem_stages; i++) {
            const pp_amem_stage *s = &a->mem_stages[i];
            fprintf(out, "%-6d", s->stage);
            for (int p = 0; p < PP_MEM_N_PURPOSES; p++) {
                if (s->purposes & (1u << p))
                    fprintf(out, " %11.3f", s->peak_bytes[p] / 1048576.0);
                else
                    fprintf(out, " %11s", "-");
            }
            fprintf(out, " %11.3f", s->total_peak_bytes / 1048576.0);
            if (s->peak_step >= 0)
                fprintf(out, " %6lld %9.3f %7.1f%%\n", (long long)s->peak_step,
                        pp_report_ms(s->peak_offset_ns),
                        s->peak_fraction >= 0 ? 100.0 * s->peak_fraction : 0.0);
            else
                fprintf(out, " %6s %9s %8s\n", "-", "-", "-");
        }
    }
    if (a->n_mem_series) {
        fprintf(out, "\nMemory and counter series\n%-22s %-7s %-32s %-8s %9s %14s %14s %14s\n",
                "process", "kind", "name", "unit", "samples", "min", "max", "last");
        for (size_t i = 0; i < a->n_mem_series; i++) {
            const pp_amem_series *s = &a->mem_series[i];
            char proc[48], name[PP_ANALYSIS_NAME_BYTES + 80];
            process_label(a, s->file, proc, sizeof proc);
            if (s->stage >= 0) { /* the process ran one stage: its memory is that stage's */
                size_t len = strlen(proc);
                snprintf(proc + len, sizeof proc - len, " s%d", (int)s->stage);
            }
            if (s->domain[0])
                snprintf(name, sizeof name, "%s: %s", s->domain, s->name);
            else
                snprintf(name, sizeof name, "%s", s->name);
            char lo[32], hi[32], last[32];
            value_cell(lo, sizeof lo, s->min);
            value_cell(hi, sizeof hi, s->max);
            value_cell(last, sizeof last, s->last);
            fprintf(out, "%-22s %-7s %-32s %-8.8s %9llu %s %s %s\n", proc, kind_name(s->kind),
                    name, s->unit, (unsigned long long)s->samples, lo, hi, last);
        }
    }
    if (a->mem_ignored)
        fprintf(out, "(%llu memory samples or calls ignored: see the warnings)\n",
                (unsigned long long)a->mem_ignored);
}

void an_summary_memory(pp_json_writer *w, const pp_analysis *a)
{
    if (!a->n_mem_stages && !a->n_mem_series && !a->mem_ignored)
        return;
    pp_json_object(w, "memory");
    pp_json_array(w, "stages");
    for (size_t i = 0; i < a->n_mem_stages; i++) {
        const pp_amem_stage *s = &a->mem_stages[i];
        pp_json_object(w, NULL);
        pp_json_put_int(w, "stage", s->stage);
        pp_json_object_inline(w, "peak_bytes");
        for (int p = 0; p < PP_MEM_N_PURPOSES; p++)
            if (s->purposes & (1u << p))
                pp_json_put_real(w, pp_mem_purpose_name(p), s->peak_bytes[p]);
        pp_json_end(w);
        pp_json_put_real(w, "total_peak_bytes", s->total_peak_bytes);
        pp_json_put_real(w, "peak_at_ms", pp_report_ms(s->peak_t_ns - a->wall_t0_ns));
        if (s->peak_step >= 0) {
            pp_json_put_int(w, "peak_step", s->peak_step);
            pp_json_put_real(w, "peak_offset_ms", pp_report_ms(s->peak_offset_ns));
            if (s->peak_fraction >= 0)
                pp_json_put_real(w, "peak_fraction", s->peak_fraction);
            else
                pp_json_put_null(w, "peak_fraction");
        } else {
            pp_json_put_null(w, "peak_step");
            pp_json_put_null(w, "peak_offset_ms");
            pp_json_put_null(w, "peak_fraction");
        }
        pp_json_put_uint(w, "samples", s->samples);
        pp_json_end(w);
    }
    pp_json_end(w);
    pp_json_array(w, "series");
    for (size_t i = 0; i < a->n_mem_series; i++) {
        const pp_amem_series *s = &a->mem_series[i];
        pp_json_object_inline(w, NULL);
        pp_json_put_int(w, "file", s->file);
        if (s->file >= 0 && (size_t)s->file < a->n_files && a->files[s->file].rank >= 0)
            pp_json_put_int(w, "rank", a->files[s->file].rank);
        else
            pp_json_put_null(w, "rank");
        if (s->stage >= 0)
            pp_json_put_int(w, "stage", s->stage);
        else
            pp_json_put_null(w, "stage");
        pp_json_put_str(w, "kind", kind_name(s->kind));
        pp_json_put_str(w, "domain", s->domain);
        pp_json_put_str(w, "name", s->name);
        pp_json_put_str(w, "unit", s->unit);
        pp_json_put_uint(w, "samples", s->samples);
        pp_json_put_real(w, "min", s->min);
        pp_json_put_real(w, "max", s->max);
        pp_json_put_real(w, "last", s->last);
        pp_json_put_real(w, "max_at_ms", pp_report_ms(s->max_t_ns - a->wall_t0_ns));
        pp_json_end(w);
    }
    pp_json_end(w);
    pp_json_put_uint(w, "ignored", a->mem_ignored);
    pp_json_end(w);
}

/* ---- the Gantt's memory rows ---- */

enum { GANTT_MEM_MAX_POINTS = 200000 }; /* all stages together; the rest is left out */

typedef struct mem_point {
    int32_t row; /* index in a->mem_stages */
    double t_ms, mib;
} mem_point;

typedef struct gantt_mem {
    const pp_analysis *a;
    const pp_report_window *win;
    double *cur;      /* [n_mem_stages * PP_MEM_N_PURPOSES] the purposes' latest values */
    unsigned *seen;   /* [n_mem_stages] purposes seen */
    int *started;     /* [n_mem_stages] a point inside the window was written */
    mem_point *pts;
    size_t n, left_out;
} gantt_mem;

static long mem_row(const pp_analysis *a, int32_t stage)
{
    for (size_t i = 0; i < a->n_mem_stages; i++)
        if (a->mem_stages[i].stage == stage)
            return (long)i;
    return -1;
}

static double row_total(const gantt_mem *g, long row)
{
    double sum = 0;
    for (int p = 0; p < PP_MEM_N_PURPOSES; p++)
        if (g->seen[row] & (1u << p))
            sum += g->cur[row * PP_MEM_N_PURPOSES + p];
    return sum / 1048576.0;
}

static void put_point(gantt_mem *g, long row, double t_ms)
{
    if (g->n >= GANTT_MEM_MAX_POINTS) {
        g->left_out++;
        return;
    }
    g->pts[g->n++] = (mem_point){(int32_t)row, t_ms, row_total(g, row)};
}

static void gantt_mem_sample(void *ctx, const pp_report_event *e)
{
    gantt_mem *g = ctx;
    if (!e->counter || e->stage < 0 || e->purpose < 0 || e->purpose >= PP_MEM_N_PURPOSES)
        return;
    long row = mem_row(g->a, e->stage);
    if (row < 0)
        return;
    double t = (double)e->t0;
    if (t > g->win->end)
        return;
    if (t >= g->win->origin && !g->started[row] && g->seen[row]) /* the value held at 0 */
        put_point(g, row, 0);
    g->cur[row * PP_MEM_N_PURPOSES + e->purpose] = e->value;
    g->seen[row] |= 1u << e->purpose;
    if (t >= g->win->origin) {
        g->started[row] = 1;
        put_point(g, row, pp_report_ms(t - g->win->origin));
    }
}

static int cmp_point(const void *x, const void *y)
{
    const mem_point *a = x, *b = y;
    if (a->row != b->row)
        return a->row < b->row ? -1 : 1;
    return a->t_ms < b->t_ms ? -1 : a->t_ms > b->t_ms;
}

pp_status an_gantt_memory_data(const pp_analysis *a, const pp_report_window *win, FILE *out)
{
    size_t R = a->n_mem_stages;
    if (!R)
        return PP_OK;
    gantt_mem g = {a, win, calloc(R * PP_MEM_N_PURPOSES, sizeof(double)),
                   calloc(R, sizeof(unsigned)), calloc(R, sizeof(int)),
                   malloc(GANTT_MEM_MAX_POINTS * sizeof(mem_point)), 0, 0};
    pp_status st = PP_OK;
    if (!g.cur || !g.seen || !g.started || !g.pts)
        st = PP_ERR(PP_ERR_NOMEM, "out of memory for the Gantt's memory rows");
    if (st == PP_OK)
        st = pp_report_each_event(a, gantt_mem_sample, &g);
    if (st == PP_OK) {
        double end_ms = pp_report_ms(win->end - win->origin);
        for (size_t r = 0; r < R; r++) /* each curve runs to the picture's end */
            if (g.seen[r])
                put_point(&g, (long)r, end_ms);
        qsort(g.pts, g.n, sizeof *g.pts, cmp_point);
        /* one data block (gnuplot's index = the row) per memory row; the
         * last column places the total between the row's own least and largest value in the
         * window (0 bottom, 1 top), so what moves within a step shows whatever holds still */
        for (size_t r = 0, i = 0; r < R; r++) {
            size_t j = i;
            double lo = 0, hi = 0;
            for (; j < g.n && g.pts[j].row == (int32_t)r; j++) {
                if (j == i || g.pts[j].mib < lo)
                    lo = g.pts[j].mib;
                if (j == i || g.pts[j].mib > hi)
                    hi = g.pts[j].mib;
            }
            fprintf(out, "%s# memory of stage %d, %.6f..%.6f MiB in the window: stage t_ms t_ms "
                         "mem total_MiB place\n",
                    r ? "\n\n" : "", a->mem_stages[r].stage, lo, hi);
            if (j == i) /* no point: one anyway, an empty block would shift later indices */
                fprintf(out, "%d 0 0 mem 0 0.5\n", a->mem_stages[r].stage);
            for (; i < j; i++)
                fprintf(out, "%d %.6f %.6f mem %.6f %.6f\n", a->mem_stages[r].stage,
                        g.pts[i].t_ms, g.pts[i].t_ms, g.pts[i].mib,
                        hi > lo ? (g.pts[i].mib - lo) / (hi - lo) : 0.5);
        }
        if (g.left_out)
            fprintf(out, "# %llu memory point(s) left out\n", (unsigned long long)g.left_out);
    }
    free(g.cur);
    free(g.seen);
    free(g.started);
    free(g.pts);
    return st;
}

void an_gantt_memory_ytics(const pp_analysis *a, int S, FILE *f)
{
    for (size_t i = 0; i < a->n_mem_stages; i++)
        fprintf(f, ", 'stage %d memory, peak %.4g MiB' %d", a->mem_stages[i].stage,
                a->mem_stages[i].total_peak_bytes / 1048576.0, S + (int)i);
}

void an_gantt_memory_plot(const pp_analysis *a, int S, FILE *f)
{
    for (size_t i = 0; i < a->n_mem_stages; i++) {
        int y = S + (int)i;
        /* the row's bottom edge (y + 0.42) is its least value in the window, its top the
         * largest (the data's last column) */
        fprintf(f, ", \\\n  memdata index %zu using 2:(%d.42 - $6 * 0.84) with steps lw 1.5 "
                   "lc rgb '#8172b2' %s",
                i, y, i == 0 ? "title 'memory (row: min..max in view)'" : "notitle");
    }
}
