/* fuzz_plan.c: fuzz target for the plan file (plan/plan.c: pp_plan_parse, docs/plan-file.md)
 * and pprof-check's reader of summaries and baseline files (analyzer/check.c,
 * check_baseline.c: pp_check_run_parse, docs/baseline-format.md). Every input is given to both
 * parsers (each refuses the other's files at once, so mutations of either kind's seeds reach
 * their parser). A plan that loads is written with pp_plan_write and must load back as it was;
 * a summary or baseline that loads is written as a baseline (pp_check_baseline_write, as
 * `pprof-check --save-baseline` does) and must load back with the same shape, metrics and
 * samples (up to the %.10g the baseline prints with). Built two ways, as tests/fuzz_dialect.c
 * is:
 *   - by scripts/fuzz.sh with clang -fsanitize=fuzzer,address,undefined: libFuzzer's main;
 *   - with -DPP_FUZZ_STANDALONE (tests/CMakeLists.txt): a driver replaying FILE... or running
 *     the seeds of DIR and a deterministic mutation sweep over them (--selftest N DIR). */
#include "fuzz_common.h"

#include "pp_check.h"
#include "pp_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_failure(pp_status st, int handed_out)
{
    if ((st == PP_OK) != handed_out || (st != PP_OK && !pp_error_message()[0]))
        abort(); /* a failure hands out nothing and says why */
}

/* A prediction <= 0 (median, p95) or < 0 (step, bubble) is absent: compared as such. */
static int same_pred(double a, double b, int zero_is_absent)
{
    int absent_a = zero_is_absent ? !(a > 0) : a < 0, absent_b = zero_is_absent ? !(b > 0) : b < 0;
    return absent_a == absent_b && (absent_a || a == b);
}

static void plan_round_trip(const pp_plan *p)
{
    char path[96];
    snprintf(path, sizeof path, "%s/p.json", fz_dir);
    pp_error_clear();
    if (pp_plan_write(p, path) != PP_OK) {
        fprintf(stderr, "fuzz_plan: a plan that loaded is not written: %s\n", pp_error_message());
        abort();
    }
    pp_plan q;
    if (pp_plan_load(path, &q) != PP_OK) {
        fprintf(stderr, "fuzz_plan: the written plan does not load: %s\n", pp_error_message());
        abort();
    }
    int same = q.version == p->version && q.num_layers == p->num_layers &&
               q.partition.L == p->partition.L && q.partition.S == p->partition.S &&
               q.partition.v == p->partition.v && q.partition.P == p->partition.P &&
               memcmp(q.partition.bounds, p->partition.bounds,
                      ((size_t)p->partition.P + 1) * sizeof(int)) == 0 &&
               strcmp(q.schedule, p->schedule) == 0 && q.microbatches == p->microbatches &&
               q.microbatch_size == p->microbatch_size &&
               q.memory_limit_bytes == p->memory_limit_bytes &&
               same_pred(q.predicted_step_ms, p->predicted_step_ms, 0) &&
               same_pred(q.predicted_bubble, p->predicted_bubble, 0) &&
               same_pred(q.predicted_median_ms, p->predicted_median_ms, 1) &&
               same_pred(q.predicted_p95_ms, p->predicted_p95_ms, 1) &&
               strcmp(q.baseline, p->baseline) == 0;
    pp_plan_free(&q);
    if (!same) {
        fprintf(stderr, "fuzz_plan: the plan's round trip changed a value\n");
        abort();
    }
}

static void fuzz_plan(const char *text)
{
    pp_plan p;
    pp_error_clear();
    pp_status st = pp_plan_parse(text, "fuzz.json", &p);
    check_failure(st, p.partition.bounds != NULL);
    if (st != PP_OK)
        return;
    /* what the tools read of it */
    if (p.partition.P != p.partition.S * p.partition.v || p.partition.L != p.num_layers ||
        p.partition.bounds[0] != 0 || p.partition.bounds[p.partition.P] != p.num_layers)
        abort();
    char buf[256];
    pp_partition_format(&p.partition, buf, sizeof buf);
    pp_schedule_kind kind;
    if (pp_schedule_kind_parse(p.schedule, &kind) != PP_OK)
        abort(); /* the plan names only known schedules */
    plan_round_trip(&p);
    /* its recompute text against its own partition, as pptrain and the tuner resolve it: a
     * choice that parses is written (pp_recompute_format) as a text that parses to the same */
    uint8_t *mask = p.recompute[0] ? malloc((size_t)p.num_layers * 2) : NULL;
    if (mask && pp_recompute_parse(p.recompute, &p.partition, mask) == PP_OK) {
        char text[sizeof p.recompute];
        if (pp_recompute_format(&p.partition, mask, text, sizeof text) == PP_OK &&
            (pp_recompute_parse(text, &p.partition, mask + p.num_layers) != PP_OK ||
             memcmp(mask, mask + p.num_layers, (size_t)p.num_layers) != 0)) {
            fprintf(stderr, "fuzz_plan: recompute \"%s\" written as \"%s\" reads back otherwise\n",
                    p.recompute, text);
            abort();
        }
    }
    free(mask);
    pp_plan_free(&p);
}

/* Equal up to the baseline's %.10g. */
static int near(double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)) + 1e-300;
}

static int same_run(const pp_check_run *a, const pp_check_run *b)
{
    const pp_check_shape *x = &a->shape, *y = &b->shape;
    if (x->S != y->S || x->M != y->M || x->v != y->v || strcmp(x->schedule, y->schedule) != 0 ||
        x->n_layers != y->n_layers || strcmp(x->layer_fp, y->layer_fp) != 0 ||
        a->n_steps != b->n_steps || a->n_metrics != b->n_metrics || a->n_runs != b->n_runs) {
        fprintf(stderr, "fuzz_plan: shape %d %d %d %s %d %s, %zu steps, %zu metrics; back "
                "%d %d %d %s %d %s, %zu, %zu\n", x->S, x->M, x->v, x->schedule, x->n_layers,
                x->layer_fp, a->n_steps, a->n_metrics, y->S, y->M, y->v, y->schedule,
                y->n_layers, y->layer_fp, b->n_steps, b->n_metrics);
        return 0;
    }
    for (size_t k = 0; k < a->n_runs; k++)
        if (strcmp(a->runs[k].label, b->runs[k].label) != 0 ||
            strcmp(a->runs[k].time, b->runs[k].time) != 0 ||
            a->runs[k].n_steps != b->runs[k].n_steps) {
            fprintf(stderr, "fuzz_plan: run %zu \"%s\" %s %zu steps back as \"%s\" %s %zu\n", k,
                    a->runs[k].label, a->runs[k].time, a->runs[k].n_steps, b->runs[k].label,
                    b->runs[k].time, b->runs[k].n_steps);
            return 0;
        }
    for (size_t i = 0; i < a->n_metrics; i++) {
        const pp_check_metric *m = &a->metrics[i], *n = &b->metrics[i];
        if (strcmp(m->name, n->name) != 0 || m->kind != n->kind || m->n != n->n ||
            !near(m->value, n->value)) {
            fprintf(stderr, "fuzz_plan: metric %zu \"%s\" (%d, %zu samples, %.17g) back as "
                    "\"%s\" (%d, %zu, %.17g)\n", i, m->name, (int)m->kind, m->n, m->value,
                    n->name, (int)n->kind, n->n, n->value);
            return 0;
        }
        for (size_t k = 0; k < a->n_runs; k++)
            if (m->run_n[k] != n->run_n[k] || !near(m->run_values[k], n->run_values[k])) {
                fprintf(stderr, "fuzz_plan: metric \"%s\" run %zu: %zu samples, %.17g back as "
                        "%zu, %.17g\n", m->name, k, m->run_n[k], m->run_values[k], n->run_n[k],
                        n->run_values[k]);
                return 0;
            }
        for (size_t k = 0; k < m->n; k++)
            if (!near(m->samples[k], n->samples[k])) {
                fprintf(stderr, "fuzz_plan: metric \"%s\" sample %zu %.17g back as %.17g\n",
                        m->name, k, m->samples[k], n->samples[k]);
                return 0;
            }
    }
    return 1;
}

static void fuzz_check_run(const char *text)
{
    pp_check_run *r = NULL;
    pp_error_clear();
    pp_status st = pp_check_run_parse(text, "fuzz.json", &r);
    check_failure(st, r != NULL);
    if (st != PP_OK)
        return;
    char line[256];
    pp_check_shape_format(&r->shape, line, sizeof line);
    char path[96];
    snprintf(path, sizeof path, "%s/b.json", fz_dir);
    FILE *f = fopen(path, "w");
    if (!f)
        abort();
    pp_error_clear();
    st = pp_check_baseline_write(r, "fuzz", f);
    if (fclose(f) != 0 || st != PP_OK) {
        fprintf(stderr, "fuzz_plan: a run that loaded is not written as a baseline: %s\n",
                pp_error_message());
        abort();
    }
    char *back = NULL;
    size_t len = 0;
    if (pp_read_file(path, &back, &len) != PP_OK)
        abort();
    pp_check_run *b = NULL;
    pp_error_clear();
    st = pp_check_run_parse(back, path, &b);
    free(back);
    if (st != PP_OK) {
        fprintf(stderr, "fuzz_plan: the written baseline does not load: %s\n",
                pp_error_message());
        abort();
    }
    int same = same_run(r, b);
    pp_check_run_free(b);
    pp_check_run_free(r);
    if (!same) {
        fprintf(stderr, "fuzz_plan: the baseline's round trip changed the shape or a metric\n");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fz_init("pl") != 0)
        abort();
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0'; /* a NUL inside ends the text, as for a file read as a string */
    fuzz_plan(text);
    fuzz_check_run(text);
    free(text);
    return 0;
}

#ifdef PP_FUZZ_STANDALONE
/* ======================================================================================== */
/* Standalone driver: replay, and a deterministic mutation sweep over a directory's inputs.  */
/* ======================================================================================== */

/* One deterministic mutation: a byte changed to one JSON cares about, a number's digits
 * replaced by a hostile value, or a cut. */
static size_t mutate(pp_rng *g, const fz_input *in, uint8_t *out, size_t cap)
{
    size_t n = in->n < cap ? in->n : cap;
    memcpy(out, in->d, n);
    int steps = 1 + (int)pp_rng_below(g, 3);
    for (int s = 0; s < steps && n > 2; s++) {
        uint64_t what = pp_rng_below(g, 8);
        if (what < 7) {
            fz_mutate_json_text(g, out, n, what >= 4);
        } else {
            n = (size_t)pp_rng_below(g, n) + 1;
        }
    }
    return n;
}

int main(int argc, char **argv)
{
    return fz_dir_main(argc, argv, "fuzz_plan", 20261219, 1 << 18, mutate);
}
#endif
