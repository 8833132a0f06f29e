/* test_check_history.c: pprof-check --history (analyzer/check_history.c): E-Divisive means with
 * its permutation test finds a 5% step change at the entry where it starts and none in a
 * history without one (several seeds each), over a series and over a directory of 30 entries
 * written out of order (ordered by their time); the tool's --record, table, JSON, JUnit,
 * Markdown and gnuplot charts. All noise is seeded: the same histories every run. */
#define _GNU_SOURCE /* open_memstream */
#include "pp_check.h"

#include <cJSON.h>
#include "pp_testkit.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PPCHECK PP_BUILD_DIR "/tools/pprof-check"

static void setup(void) { tk_dir_create("pp_check_history"); }

TestSuite(check_history, .init = setup, .fini = tk_dir_remove, .timeout = 300);

/* n values around 100 with 0.5% seeded noise, `step` percent higher from index at on. */
static void series(double *x, size_t n, size_t at, double step, uint64_t seed)
{
    pp_rng g;
    pp_rng_seed(&g, seed);
    for (size_t i = 0; i < n; i++)
        x[i] = 100 * (i >= at ? 1 + step / 100 : 1) * (1 + 0.005 * pp_rng_normal(&g));
}

Test(check_history, a_5_percent_step_is_found_where_it_starts_and_none_without_one)
{
    double x[30];
    size_t cps[10];
    double ps[10];
    for (uint64_t seed = 1; seed <= 8; seed++) {
        size_t n = 0;
        series(x, 30, 17, 5, seed);
        cr_assert_eq(pp_check_change_points(x, 30, 0.01, 1999, 3, seed, cps, ps, 10, &n), PP_OK);
        cr_assert_eq(n, 1, "seed %llu: %zu change points", (unsigned long long)seed, n);
        cr_assert_eq(cps[0], 17, "seed %llu: at %zu", (unsigned long long)seed, cps[0]);
        cr_assert_lt(ps[0], 0.01);
        series(x, 30, 30, 0, seed + 100); /* no change */
        cr_assert_eq(pp_check_change_points(x, 30, 0.01, 1999, 3, seed, cps, ps, 10, &n), PP_OK);
        cr_assert_eq(n, 0, "seed %llu: a change point at %zu in a flat history",
                     (unsigned long long)seed, n ? cps[0] : 0);
    }
    /* two steps (up at 10, back down at 20): both */
    pp_rng g;
    pp_rng_seed(&g, 7);
    for (size_t i = 0; i < 30; i++)
        x[i] = 100 * (i >= 10 && i < 20 ? 1.05 : 1) * (1 + 0.005 * pp_rng_normal(&g));
    size_t n = 0;
    cr_assert_eq(pp_check_change_points(x, 30, 0.01, 1999, 3, 7, cps, ps, 10, &n), PP_OK);
    cr_assert_eq(n, 2, "%zu", n);
    cr_assert_eq(cps[0], 10);
    cr_assert_eq(cps[1], 20);
    /* the same inputs, the same answer; refusals */
    size_t again[10], n2 = 0;
    cr_assert_eq(pp_check_change_points(x, 30, 0.01, 1999, 3, 7, again, NULL, 10, &n2), PP_OK);
    cr_assert_eq(n2, n);
    x[3] = NAN;
    cr_assert_eq(pp_check_change_points(x, 30, 0.01, 1999, 3, 7, cps, ps, 10, &n), PP_ERR_INVALID);
}

/* Entry i of a history: a one-run baseline_version 2 file with label c<i> and a time on day i,
 * step_ms and stage0.fwd_ms of 8 steps around their level (step `step`% up from entry at). */
static void write_entry(const char *dir, size_t i, size_t at, double step, uint64_t seed)
{
    pp_rng g;
    pp_rng_seed(&g, seed * 1000 + i);
    double level = 100 * (i >= at ? 1 + step / 100 : 1) * (1 + 0.005 * pp_rng_normal(&g));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fprintf(f, "{\"baseline_version\": 2, \"shape\": {\"stages\": 1, \"microbatches\": 4, "
               "\"virtual_stages\": 1, \"schedule\": \"1f1b\"}, \"steps\": 8, \"runs\": [{"
               "\"source\": \"ci\", \"label\": \"c%02zu\", \"time\": \"2026-11-%02zuT12:00:00Z\", "
               "\"steps\": 8, \"metrics\": [",
            i, i + 1);
    const char *names[] = {"step_ms", "stage0.fwd_ms"}, *fam[] = {"step_ms", "fwd_ms"};
    for (int m = 0; m < 2; m++) {
        fprintf(f, "%s{\"name\": \"%s\", \"family\": \"%s\", \"samples\": [", m ? ", " : "",
                names[m], fam[m]);
        for (int k = 0; k < 8; k++)
            fprintf(f, "%s%.9g", k ? ", " : "",
                    level * (m ? 0.3 : 1) * (1 + 0.001 * pp_rng_normal(&g)));
        fputs("]}", f);
    }
    fputs("]}]}\n", f);
    fclose(f);
    /* file names out of time order: the history sorts by the recorded time */
    char path[512];
    snprintf(path, sizeof path, "%s/entry-%02zu.json", dir, (i * 7) % 30);
    tk_write_text(path, buf);
    free(buf);
}

static const char *history(const char *name, size_t at, double step, uint64_t seed)
{
    const char *dir = tk_path(name);
    cr_assert_eq(mkdir(dir, 0755), 0);
    for (size_t i = 0; i < 30; i++)
        write_entry(dir, i, at, step, seed);
    return dir;
}

Test(check_history, thirty_summaries_with_a_step_name_its_first_commit)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        char name[32];
        snprintf(name, sizeof name, "step%llu", (unsigned long long)seed);
        const char *dir = history(name, 15, 5, seed);
        pp_check_options o;
        pp_check_options_default(&o);
        pp_check_history *h = NULL;
        cr_assert_eq(pp_check_history_analyze(dir, &o, &h), PP_OK, "%s", pp_error_message());
        cr_assert_eq(h->n_entries, 30);
        cr_assert_str_eq(h->entries[0].label, "c00");
        cr_assert_str_eq(h->entries[29].label, "c29");
        cr_assert_eq(h->n_series, 2);
        for (size_t s = 0; s < 2; s++) {
            const pp_check_series *z = &h->series[s];
            cr_assert_eq(z->n_cps, 1, "%s: %zu change points", z->name, z->n_cps);
            cr_assert_eq(z->cps[0].index, 15, "%s at %zu", z->name, z->cps[0].index);
            cr_assert_str_eq(h->entries[z->cps[0].index].label, "c15");
            cr_assert_float_eq(z->cps[0].change, 5, 1.0, "%s: %+g%%", z->name, z->cps[0].change);
            cr_assert_eq(z->cps[0].verdict, PP_VERDICT_REGRESSION);
        }
        cr_assert(pp_check_history_failed(h));
        pp_check_history_free(h);
        snprintf(name, sizeof name, "flat%llu", (unsigned long long)seed);
        dir = history(name, 30, 0, seed + 50);
        cr_assert_eq(pp_check_history_analyze(dir, &o, &h), PP_OK, "%s", pp_error_message());
        cr_assert_eq(h->n_cps, 0, "a change point in a flat history (seed %llu)",
                     (unsigned long long)seed);
        cr_assert_not(pp_check_history_failed(h));
        pp_check_history_free(h);
    }
}

Test(check_history, the_tool_records_reports_and_charts)
{
    const char *dir = history("h", 15, 5, 9);
    /* --record adds an entry with its label and time */
    const char *rec[] = {"--history", dir, "--record", tk_path("h/entry-23.json"), "--label",
                         "c30", "--time", "2026-12-31T00:00:00Z", NULL};
    tk_result r = tk_run(PPCHECK, rec, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    tk_result_free(&r);
    cr_assert(tk_exists(tk_path("h/2026-12-31T00_00_00Z-c30.json")));
    const char *rep[] = {"--history", dir, "--junit", "h.xml", "--markdown", "h.md", "--chart",
                         "chart-", NULL};
    r = tk_run(PPCHECK, rep, NULL);
    cr_assert_eq(r.code, 1, "a 5%% step is a regression (%d): %s%s", r.code, r.out, r.err);
    cr_assert_not_null(strstr(r.out, "history: "), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "at c15"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "31 entries"), "%s", r.out);
    tk_result_free(&r);
    char *xml = tk_slurp(tk_path("h.xml"), NULL), *md = tk_slurp(tk_path("h.md"), NULL);
    cr_assert(xml && md);
    cr_assert_not_null(strstr(xml, "<failure type=\"regression\""), "%s", xml);
    cr_assert_not_null(strstr(xml, "name=\"step_ms\""), "%s", xml);
    cr_assert_not_null(strstr(md, "### pprof-check history: FAIL"), "%s", md);
    cr_assert_not_null(strstr(md, "| c15 |"), "%s", md);
    free(xml);
    free(md);
    char *gp = tk_slurp(tk_path("chart-step_ms.gp"), NULL);
    char *dat = tk_slurp(tk_path("chart-step_ms.dat"), NULL);
    cr_assert(gp && dat);
    cr_assert_not_null(strstr(gp, "set arrow from 15.5"), "%s", gp);
    cr_assert_not_null(strstr(gp, "c15 +"), "%s", gp);
    cr_assert_not_null(strstr(dat, " c15 "), "%s", dat);
    free(gp);
    free(dat);
    /* JSON */
    const char *js[] = {"--history", dir, "--json", NULL};
    r = tk_run(PPCHECK, js, NULL);
    cr_assert_eq(r.code, 1);
    cJSON *j = cJSON_Parse(r.out);
    cr_assert_not_null(j, "%s", r.out);
    cr_assert_eq(cJSON_GetObjectItem(j, "history_version")->valueint, 1);
    const cJSON *m0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "metrics"), 0);
    const cJSON *cp = cJSON_GetArrayItem(cJSON_GetObjectItem(m0, "change_points"), 0);
    cr_assert_not_null(cp, "%s", r.out);
    cr_assert_str_eq(cJSON_GetObjectItem(cp, "label")->valuestring, "c15");
    cr_assert_eq(cJSON_GetObjectItem(cp, "entry")->valueint, 15);
    cJSON_Delete(j);
    tk_result_free(&r);
    /* an empty or missing history, and mixed modes, are exit 2 */
    cr_assert_eq(mkdir(tk_path("empty"), 0755), 0);
    static const char *const bad[][6] = {
        {"--history", "empty", NULL},
        {"--history", "nosuch", NULL},
        {"--history", "empty", "--baseline", "x.json", NULL},
        {"--history", "empty", "--record", NULL},
        {"--label", "x", "--baseline", "a", "b", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = tk_run(PPCHECK, bad[i], NULL);
        cr_assert_eq(r.code, 2, "case %zu: %d %s", i, r.code, r.err);
        tk_result_free(&r);
    }
}
