/* pprof-check: the statistical performance-regression gate for CI. Compares a run (directory,
 * `pprof-report --json` summary or baseline) against a baseline metric by metric: a change is a
 * regression only when it is beyond its threshold and significant (Mann-Whitney U on the
 * per-step samples, Holm-adjusted). Also saves baselines (--save-baseline DIR -o BASE.json).
 * docs/cli/pprof-check.md, docs/baseline-format.md. A thin main over analyzer/pp_check.h.
 * Exit codes: 0 pass, 1 regression, 2 usage or bad input (missing, garbage, other shape),
 * 3 runtime error (writing an output failed, out of memory). */
#define _GNU_SOURCE /* open_memstream */
#include "pp_analyzer.h"
#include "pp_check.h"
#include "pp_tool.h"
#include "pp_common.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PP_VERSION
#define PP_VERSION "unknown"
#endif

static const char *k_usage =
    "usage: pprof-check --baseline BASE [options] CURRENT\n"
    "       pprof-check --save-baseline RUN [-o BASE.json]\n"
    "Compares CURRENT against BASE, each a run directory (pprof-run -o DIR), a summary\n"
    "(pprof-report --json) or a baseline file, and fails on statistically significant\n"
    "regressions of step time, throughput, bubble, per-stage forward/backward time (and reports\n"
    "link bandwidth). A change is a regression when it is beyond its threshold in the bad\n"
    "direction AND significant (Mann-Whitney U on the per-step samples, two-sided, Holm-adjusted\n"
    "over the tested metrics, alpha 0.01); beyond it in the good direction it is an improvement.\n"
    "\n"
    "  -b, --baseline BASE       the reference run, summary or baseline file\n"
    "      --save-baseline RUN   write RUN (directory or summary) as a baseline file\n"
    "  -o, --output FILE         write the table / JSON / baseline to FILE instead of stdout\n"
    "      --threshold M=PCT     threshold for a family (step_ms, throughput, fwd_ms, bwd_ms,\n"
    "                            bandwidth_GBps: percent; bubble_ratio: percentage points) or\n"
    "                            one metric (stage2.fwd_ms=5); repeatable. Defaults: 2% for\n"
    "                            step time and throughput, 3% for stage forward and backward,\n"
    "                            2 points of bubble, 10% for bandwidth\n"
    "      --alpha A             significance level (default 0.01)\n"
    "      --no-holm             do not adjust p-values for the number of metrics\n"
    "      --bootstrap N         bootstrap resamples for the interval (default 2000, 0 = none)\n"
    "      --seed N              bootstrap seed (default fixed: same inputs, same interval)\n"
    "      --allow-shape-change  compare runs of different S, M, v, schedule or model anyway\n"
    "      --warmup N            steps skipped at the start of run directories (default 1)\n"
    "      --json                the comparison as JSON (docs/cli/pprof-check.md) on stdout\n"
    "      --junit FILE          also write JUnit XML (one test case per metric)\n"
    "      --markdown FILE       also write a Markdown report (PR comments, CI step summaries)\n"
    "      --dialect FILE        a dialect file naming the runs' pipeline ranges (docs/dialects.md)\n"
    "  -q, --quiet               no table (files and the exit code only)\n"
    "  -v, --verbose             say what is read and written\n"
    "  -h, --help                this help\n"
    "      --version             the version and the git commit built from\n"
    "\n"
    "exit codes: 0 pass, 1 regression, 2 usage or bad input (missing, garbage or differently\n"
    "            shaped runs), 3 runtime error\n";

enum {
    OPT_SAVE = 256, OPT_THRESHOLD, OPT_ALPHA, OPT_NO_HOLM, OPT_BOOTSTRAP, OPT_SEED, OPT_ALLOW,
    OPT_WARMUP, OPT_JSON, OPT_JUNIT, OPT_MARKDOWN, OPT_DIALECT
};

static const struct option k_opts[] = {
    {"baseline", required_argument, 0, 'b'},
    {"save-baseline", required_argument, 0, OPT_SAVE},
    {"output", required_argument, 0, 'o'},
    {"threshold", required_argument, 0, OPT_THRESHOLD},
    {"alpha", required_argument, 0, OPT_ALPHA},
    {"no-holm", no_argument, 0, OPT_NO_HOLM},
    {"bootstrap", required_argument, 0, OPT_BOOTSTRAP},
    {"seed", required_argument, 0, OPT_SEED},
    {"allow-shape-change", no_argument, 0, OPT_ALLOW},
    {"warmup", required_argument, 0, OPT_WARMUP},
    {"json", no_argument, 0, OPT_JSON},
    {"junit", required_argument, 0, OPT_JUNIT},
    {"markdown", required_argument, 0, OPT_MARKDOWN},
    {"dialect", required_argument, 0, OPT_DIALECT},
    PP_TOOL_OPTIONS_COMMON,
};

typedef struct args {
    const char *baseline, *save, *current, *output, *junit, *markdown;
    int json, quiet, verbose;
    int warmup; /* -1: the analyzer's default */
    pp_check_options opt;
} args;


/* One getopt_long result. Returns PP_TOOL_GO_ON to go on, else an exit code. */
static int parse_option(int c, char **argv, args *a)
{
    int64_t iv;
    int rc = PP_TOOL_GO_ON;
    switch (c) {
    case 'b': a->baseline = optarg; break;
    case OPT_SAVE: a->save = optarg; break;
    case 'o': a->output = optarg; break;
    case OPT_THRESHOLD: return pp_tool_option_status(pp_check_threshold_parse(&a->opt, optarg));
    case OPT_ALPHA: return pp_tool_option_f64(optarg, "--alpha", 1e-12, 0.5, &a->opt.alpha);
    case OPT_NO_HOLM: a->opt.holm = 0; break;
    case OPT_BOOTSTRAP:
        if ((rc = pp_tool_option_i64(optarg, "--bootstrap", 0, 1000000, &iv)) == PP_TOOL_GO_ON)
            a->opt.bootstrap_reps = (int)iv;
        break;
    case OPT_SEED:
        if ((rc = pp_tool_option_i64(optarg, "--seed", 0, INT64_MAX, &iv)) == PP_TOOL_GO_ON)
            a->opt.seed = (uint64_t)iv;
        break;
    case OPT_ALLOW: a->opt.allow_shape_change = 1; break;
    case OPT_WARMUP:
        if ((rc = pp_tool_option_i64(optarg, "--warmup", 0, 1 << 30, &iv)) == PP_TOOL_GO_ON)
            a->warmup = (int)iv;
        break;
    case OPT_JSON: a->json = 1; break;
    case OPT_JUNIT: a->junit = optarg; break;
    case OPT_MARKDOWN: a->markdown = optarg; break;
    case OPT_DIALECT: return pp_tool_option_status(pp_analysis_dialect_default(optarg));
    default: return pp_tool_option_common(c, argv, k_usage, &a->quiet, &a->verbose);
    }
    return rc;
}

/* Returns PP_TOOL_GO_ON to go on, else an exit code. */
static int parse_args(int argc, char **argv, args *a)
{
    memset(a, 0, sizeof *a);
    a->warmup = -1;
    pp_check_options_default(&a->opt);
    opterr = 0;
    int c, rc;
    while ((c = getopt_long(argc, argv, ":b:o:qvh", k_opts, NULL)) != -1)
        if ((rc = parse_option(c, argv, a)) != PP_TOOL_GO_ON)
            return rc;
    if (a->save) {
        if (a->baseline || optind < argc || a->json || a->junit || a->markdown)
            return pp_tool_usage_error("--save-baseline RUN takes only -o FILE (and --warmup, "
                                       "--dialect); compare with --baseline BASE CURRENT");
        return PP_TOOL_GO_ON;
    }
    if (!a->baseline)
        return pp_tool_usage_error("--baseline BASE is required (or --save-baseline RUN to make one)");
    if (optind >= argc)
        return pp_tool_usage_error("which run to check? give CURRENT (a run directory, summary or "
                           "baseline file)");
    if (optind + 1 < argc)
        return pp_tool_usage_error("one CURRENT run at a time (got '%s' and '%s')", argv[optind],
                           argv[optind + 1]);
    a->current = argv[optind];
    return PP_TOOL_GO_ON;
}

typedef pp_status (*writer_fn)(const void *obj, FILE *f);

static pp_status w_table(const void *o, FILE *f) { return pp_check_write_table(o, f); }
static pp_status w_json(const void *o, FILE *f) { return pp_check_write_json(o, f); }
static pp_status w_junit(const void *o, FILE *f) { return pp_check_write_junit(o, f); }
static pp_status w_md(const void *o, FILE *f) { return pp_check_write_markdown(o, f); }
static pp_status w_base(const void *o, FILE *f)
{
    return pp_check_baseline_write(o, PP_VERSION, f);
}

/* Writes through fn to path atomically, or to stdout when path is NULL or "-". A failure is a
 * runtime error (exit 3), not bad input. */
static pp_status emit(const char *path, const char *what, writer_fn fn, const void *obj)
{
    if (!path || strcmp(path, "-") == 0) {
        pp_status st = fn(obj, stdout);
        if (fflush(stdout) != 0 || st != PP_OK)
            return PP_ERR(PP_ERR_RUNTIME, "writing the %s to stdout failed", what);
        return PP_OK;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return PP_ERR(PP_ERR_NOMEM, "out of memory writing the %s", what);
    pp_status st = fn(obj, f);
    if (fclose(f) != 0 && st == PP_OK)
        st = PP_ERR(PP_ERR_NOMEM, "out of memory writing the %s", what);
    if (st == PP_OK && (st = pp_write_file_atomic(path, buf, len)) != PP_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", pp_error_message());
        st = PP_ERR(PP_ERR_RUNTIME, "cannot write the %s: %s", what, why);
    }
    free(buf);
    if (st == PP_OK)
        pp_tool_note(1, "wrote the %s to %s", what, path);
    return st;
}

static pp_status load(const char *role, const char *path, int warmup, pp_check_run **out)
{
    pp_tool_note(1, "reading %s %s", role, path);
    pp_status st = pp_check_run_load(path, warmup, out);
    if (st != PP_OK)
        return pp_error_wrap(st, "%s", role);
    return PP_OK;
}

int main(int argc, char **argv)
{
    pp_tool_init("pprof-check");
    args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != PP_TOOL_GO_ON)
        return rc;
    pp_tool_verbose = a.verbose;
    pp_tool_quiet = a.quiet;
    pp_log_set_level(a.verbose ? 2 : a.quiet ? 0 : 1);
    pp_check_run *base = NULL, *cur = NULL;
    pp_check_result *res = NULL;
    pp_status st;
    if (a.save) {
        if ((st = load("run", a.save, a.warmup, &base)) != PP_OK) {
            rc = pp_tool_fail(st);
            goto done;
        }
        if ((st = emit(a.output, "baseline", w_base, base)) != PP_OK) {
            rc = pp_tool_fail(st);
            goto done;
        }
        if (!a.quiet && a.output)
            fprintf(stderr, "pprof-check: baseline of %s (%zu steps, %zu metrics) written to %s\n",
                    a.save, base->n_steps, base->n_metrics, a.output);
        rc = PP_EXIT_OK;
        goto done;
    }
    if ((st = load("baseline", a.baseline, a.warmup, &base)) != PP_OK ||
        (st = load("current", a.current, a.warmup, &cur)) != PP_OK ||
        (st = pp_check_compare(base, cur, &a.opt, &res)) != PP_OK) {
        rc = pp_tool_fail(st);
        goto done;
    }
    if (a.json)
        st = emit(a.output, "JSON report", w_json, res);
    else if (!a.quiet)
        st = emit(a.output, "table", w_table, res);
    if (st == PP_OK && a.junit)
        st = emit(a.junit, "JUnit report", w_junit, res);
    if (st == PP_OK && a.markdown)
        st = emit(a.markdown, "Markdown report", w_md, res);
    if (st != PP_OK) {
        rc = pp_tool_fail(st);
        goto done;
    }
    rc = pp_check_failed(res) ? PP_EXIT_CHECK_FAILED : PP_EXIT_OK;
done:
    pp_check_result_free(res);
    pp_check_run_free(base);
    pp_check_run_free(cur);
    return rc;
}
