/* report_memory.c: the memory of an analysis (memory.c; docs/metrics.md "Memory") in the text
 * report (pp_analysis_print's "Memory" tables) and the summary JSON ("memory",
 * docs/summary-json.md). Called by report_text.c and summary.c; nothing is printed or written
 * when the run reported no memory. */
#include "report_internal.h"
#include "report_memory.h"

#include <stdio.h>
#include <string.h>

static const char *const k_kind[] = {"counter", "heap", "rss"};

static const char *kind_name(int k) { return k >= 0 && k <= PP_AMEM_RSS ? k_kind[k] : "?"; }

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
            if (s->domain[0])
                snprintf(name, sizeof name, "%s: %s", s->domain, s->name);
            else
                snprintf(name, sizeof name, "%s", s->name);
            fprintf(out, "%-22s %-7s %-32.32s %-8.8s %9llu %14.6g %14.6g %14.6g\n", proc,
                    kind_name(s->kind), name, s->unit, (unsigned long long)s->samples, s->min,
                    s->max, s->last);
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
