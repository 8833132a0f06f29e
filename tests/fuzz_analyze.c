/* fuzz_analyze.c: the analysis and every report of it, for the fuzz targets (fuzz_common.h). */
#include "fuzz_common.h"

#include "pp_analyzer.h"
#include "pp_extract.h"
#include "pp_report.h"

#include <stdlib.h>
#include <string.h>

/* Reads every number the analysis hands out, so the sanitizers see any that is off. */
static void touch(const pp_analysis *a)
{
    volatile double sink = 0;
    for (size_t i = 0; i < a->n_steps; i++)
        for (int s = 0; s < a->S; s++)
            sink += a->steps[i].stage[s].idle_ns + a->steps[i].stage[s].fwd_ns;
    for (int s = 0; s < a->S; s++)
        sink += a->stages[s].busy_ns + a->stages[s].imbalance_culprit;
    for (size_t i = 0; i < a->n_links; i++)
        sink += a->links[i].bandwidth_GBps;
    for (size_t i = 0; i < a->n_layers; i++)
        sink += a->layers[i].fwd_ns.median;
    /* the generic view (ranges.c): its tables and the indices between them */
    for (size_t i = 0; i < a->n_ranges; i++)
        sink += a->ranges[i].ns.median + a->ranges[i].stddev_ns + a->ranges[i].wall_share +
                (double)strlen(a->ranges[i].name) + (double)strlen(a->ranges[i].domain);
    for (size_t i = 0; i < a->n_range_threads; i++) {
        const pp_arange_thread *c = &a->range_threads[i];
        if (c->range >= a->n_ranges || c->thread >= a->n_threads)
            abort();
        sink += c->sum_ns + (double)strlen(a->threads[c->thread].name);
    }
    for (size_t i = 0; i < a->n_marks; i++)
        sink += (double)a->marks[i].count + (double)strlen(a->marks[i].name);
    (void)sink;
}

void fz_analyze(const char *const *paths, size_t n, const struct pp_analysis_options *o)
{
    pp_analysis *a = NULL;
    pp_error_clear();
    if (pp_analyze_files(paths, n, o, &a) != PP_OK) {
        if (a || !pp_error_message()[0])
            abort(); /* a failure hands out nothing and says why */
        return;
    }
    touch(a);
    pp_analysis_print(a, fz_null);
    pp_report_html_opts ho = {.title = "fuzz <run>", .command = "job \"--x\" & <y>"};
    if (pp_report_json(a, fz_null) != PP_OK || pp_report_chrome(a, fz_null) != PP_OK ||
        pp_report_gantt_data(a, fz_null) != PP_OK || pp_report_html(a, &ho, fz_null) != PP_OK) {
        if (!pp_error_message()[0])
            abort();
    }
    pp_extract e;
    if (pp_extract_from_analysis(a, &e) == PP_OK) {
        /* the model of the run's own layout, as pprof-tune's self-check replays it (bounded
         * shapes only: a trace can state M up to 2^20, and the replay's time grows with it) */
        double ns = 0;
        if (e.M <= 64 && e.partition.P <= 64 &&
            pp_extract_predict(&e, e.schedule, &e.partition, e.M, &ns, NULL) == PP_OK &&
            !(ns >= 0))
            abort(); /* a step that is no time */
        pp_extract_free(&e);
    }
    pp_analysis_free(a);
}
