/* pprof-check: the statistical performance-regression gate for CI. Compares runs (directories,
 * `pprof-report --json` summaries or baselines) against a baseline of one or several runs
 * metric by metric: a change is a regression only when it is beyond its threshold and
 * significant (Welch's t on the runs' medians, Holm-adjusted; --per-step: Mann-Whitney U on the
 * per-step samples). Also saves and grows baselines (--save-baseline RUN... -o BASE.json,
 * --add-run), and keeps a history with its change points (--history DIR).
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
    "usage: pprof-check --baseline BASE [options] CURRENT...\n"
    "       pprof-check --save-baseline RUN [RUN...] [-o BASE.json]\n"
    "       pprof-check --baseline BASE.json --add-run RUN... [-o OUT.json]\n"
    "       pprof-check --history DIR [--record RUN... [--label L] [--time T]] [--chart PREFIX]\n"
    "Compares the CURRENT runs against BASE, each a run directory (pprof-run -o DIR), a summary\n"
    "(pprof-report --json) or a baseline file of one or several runs, and fails on statistically\n"
    "significant regressions of step time, throughput, bubble, per-stage forward/backward time\n"
    "(and reports link bandwidth). A change is a regression when it is beyond its threshold in\n"
    "the bad direction AND significant: runs are the unit (Welch t on the runs' medians,\n"
    "two-sided, Holm-adjusted over the tested metrics, alpha 0.01), and the check says how many\n"
    "runs a change of the threshold's size needs; with one run on each side the thresholds alone\n"
    "decide, with a warning. Beyond it in the good direction a change is an improvement.\n"
    "\n"
    "  -b, --baseline BASE       the reference runs: run, summary or baseline file\n"
    "      --save-baseline RUN...  write the RUNs (directories, summaries) as one baseline file\n"
    "      --add-run             add the RUNs given as arguments to the --baseline file (written\n"
    "                            back in place unless -o)\n"
    "  -o, --output FILE         write the table / JSON / baseline to FILE instead of stdout\n"
    "      --threshold M=PCT     threshold for a family (step_ms, throughput, fwd_ms, bwd_ms,\n"
    "                            bandwidth_GBps, peak_mem_MiB: percent; bubble_ratio:\n"
    "                            percentage points) or one metric (stage2.fwd_ms=5);\n"
    "                            repeatable. Defaults: 2% for step time and throughput, 3% for\n"
    "                            stage forward and backward, 2 points of bubble, 10% for\n"
    "                            bandwidth, 1% for a stage's peak memory\n"
    "      --alpha A             significance level (default 0.01)\n"
    "      --no-holm             do not adjust p-values for the number of metrics\n"
    "      --bootstrap N         bootstrap resamples for the interval (default 2000, 0 = none)\n"
    "      --seed N              bootstrap seed (default fixed: same inputs, same interval)\n"
    "      --per-step            Mann-Whitney U on the per-step samples instead: valid only\n"
    "                            where steps are independent (the sim backend)\n"
    "      --power P             power of the runs-needed statement (default 0.8)\n"
    "      --allow-shape-change  compare runs of different S, M, v, schedule or model anyway\n"
    "      --warmup N            steps skipped at the start of run directories (default 1)\n"
    "      --json                the comparison as JSON (docs/cli/pprof-check.md) on stdout\n"
    "      --junit FILE          also write JUnit XML (one test case per metric)\n"
    "      --markdown FILE       also write a Markdown report (PR comments, CI step summaries)\n"
    "      --html FILE           also write the comparison as a self-contained HTML page\n"
    "      --dialect FILE        a dialect file naming the runs' pipeline ranges (docs/dialects.md)\n"
    "      --history DIR         the history: one summary per commit or CI run in DIR; without\n"
    "                            --record, find each metric's change points (E-Divisive means,\n"
    "                            permutation test at --alpha over the metrics) and report them\n"
    "      --record              with --history: add the RUNs given as one entry and stop\n"
    "      --label L             the entry's commit or CI run (default \"run\")\n"
    "      --time T              the entry's time, ISO 8601 UTC (default now)\n"
    "      --chart PREFIX        with --history: PREFIX<metric>.dat/.gp gnuplot charts (and\n"
    "                            .png when gnuplot is installed)\n"
    "      --permutations N      with --history: shuffles per tested split (default 1999)\n"
    "      --min-segment N       with --history: fewest entries of a level (default 3)\n"
    "  -q, --quiet               no table (files and the exit code only)\n"
    "  -v, --verbose             say what is read and written\n"
    "  -h, --help                this help\n"
    "      --version             the version and the git commit built from\n"
    "\n"
    "exit codes: 0 pass, 1 regression (for --history: a change point that is one), 2 usage or\n"
    "            bad input (missing, garbage or differently shaped runs), 3 runtime error\n";

enum {
    OPT_SAVE = 256, OPT_THRESHOLD, OPT_ALPHA, OPT_NO_HOLM, OPT_BOOTSTRAP, OPT_SEED, OPT_ALLOW,
    OPT_WARMUP, OPT_JSON, OPT_JUNIT, OPT_MARKDOWN, OPT_HTML, OPT_DIALECT, OPT_ADD, OPT_PER_STEP,
    OPT_POWER, OPT_HISTORY, OPT_RECORD, OPT_LABEL, OPT_TIME, OPT_CHART, OPT_PERMUTATIONS,
    OPT_MIN_SEGMENT
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
    {"html", required_argument, 0, OPT_HTML},
    {"dialect", required_argument, 0, OPT_DIALECT},
    {"add-run", no_argument, 0, OPT_ADD},
    {"per-step", no_argument, 0, OPT_PER_STEP},
    {"power", required_argument, 0, OPT_POWER},
    {"history", required_argument, 0, OPT_HISTORY},
    {"record", no_argument, 0, OPT_RECORD},
    {"label", required_argument, 0, OPT_LABEL},
    {"time", required_argument, 0, OPT_TIME},
    {"chart", required_argument, 0, OPT_CHART},
    {"permutations", required_argument, 0, OPT_PERMUTATIONS},
    {"min-segment", required_argument, 0, OPT_MIN_SEGMENT},
    PP_TOOL_OPTIONS_COMMON,
};

typedef struct args {
    const char *baseline, *save, *output, *junit, *markdown, *html;
    const char *history, *label, *time, *chart;
    const char **runs; /* the positional runs (and --save-baseline's), n_runs of them */
    size_t n_runs;
    int add, record;
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
    case OPT_HTML: a->html = optarg; break;
    case OPT_DIALECT: return pp_tool_option_status(pp_analysis_dialect_default(optarg));
    case OPT_ADD: a->add = 1; break;
    case OPT_PER_STEP: a->opt.per_step = 1; break;
    case OPT_POWER: return pp_tool_option_f64(optarg, "--power", 0.05, 0.999, &a->opt.power);
    case OPT_HISTORY: a->history = optarg; break;
    case OPT_RECORD: a->record = 1; break;
    case OPT_LABEL: a->label = optarg; break;
    case OPT_TIME: a->time = optarg; break;
    case OPT_CHART: a->chart = optarg; break;
    case OPT_PERMUTATIONS:
        if ((rc = pp_tool_option_i64(optarg, "--permutations", 19, 1000000, &iv)) ==
            PP_TOOL_GO_ON)
            a->opt.permutations = (int)iv;
        break;
    case OPT_MIN_SEGMENT:
        if ((rc = pp_tool_option_i64(optarg, "--min-segment", 1, 1000, &iv)) == PP_TOOL_GO_ON)
            a->opt.min_segment = (int)iv;
        break;
    default: return pp_tool_option_common(c, argv, k_usage, &a->quiet, &a->verbose);
    }
    return rc;
}

/* Label and time as a history keeps them: printable, no path separators, bounded. */
static int entry_text_ok(const char *s, size_t cap)
{
    if (!s)
        return 1;
    if (!s[0] || strlen(s) >= cap)
        return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return 0;
    return 1;
}

/* What the modes take: the checks after getopt. Returns PP_TOOL_GO_ON or an exit code. */
static int check_modes(args *a)
{
    int outputs = a->json || a->junit || a->markdown || a->html;
    if ((a->label || a->time) && !a->record)
        return pp_tool_usage_error("--label and --time name a --history --record entry");
    if ((a->chart || a->record) && !a->history)
        return pp_tool_usage_error("--record and --chart go with --history DIR");
    if (!entry_text_ok(a->label, 120) || !entry_text_ok(a->time, 32))
        return pp_tool_usage_error("--label and --time: 1 to 119 (time: 31) printable "
                                   "characters");
    if (a->history) {
        if (a->baseline || a->save || a->add)
            return pp_tool_usage_error("--history DIR is its own mode (no --baseline, "
                                       "--save-baseline or --add-run)");
        if (a->record && (a->n_runs == 0 || outputs || a->chart))
            return pp_tool_usage_error("--history DIR --record takes the RUNs of one entry "
                                       "(and --label, --time), nothing else");
        if (!a->record && a->n_runs > 0)
            return pp_tool_usage_error("--history DIR reports DIR; to add runs to it, "
                                       "--record RUN...");
        return PP_TOOL_GO_ON;
    }
    if (a->save) {
        if (a->baseline || a->add || outputs)
            return pp_tool_usage_error("--save-baseline RUN... takes only -o FILE (and "
                                       "--warmup, --dialect); compare with --baseline BASE "
                                       "CURRENT");
        return PP_TOOL_GO_ON;
    }
    if (!a->baseline)
        return pp_tool_usage_error("--baseline BASE is required (or --save-baseline RUN to make "
                                   "one, or --history DIR)");
    if (a->add) {
        if (a->n_runs == 0 || outputs)
            return pp_tool_usage_error("--add-run: give the RUNs to add to %s (and -o FILE)",
                                       a->baseline);
        return PP_TOOL_GO_ON;
    }
    if (a->n_runs == 0)
        return pp_tool_usage_error("which run to check? give CURRENT (run directories, "
                                   "summaries or baseline files)");
    return PP_TOOL_GO_ON;
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
    /* --save-baseline's RUN first, then the arguments: argv outlives a */
    size_t n = (size_t)(argc - optind) + (a->save ? 1 : 0);
    if (n > PP_CHECK_MAX_RUNS)
        return pp_tool_usage_error("at most %d runs at a time", PP_CHECK_MAX_RUNS);
    a->runs = calloc(n ? n : 1, sizeof *a->runs);
    if (!a->runs)
        return pp_tool_usage_error("out of memory");
    if (a->save)
        a->runs[a->n_runs++] = a->save;
    for (int i = optind; i < argc; i++)
        a->runs[a->n_runs++] = argv[i];
    return check_modes(a);
}

typedef pp_status (*writer_fn)(const void *obj, FILE *f);

static pp_status w_table(const void *o, FILE *f) { return pp_check_write_table(o, f); }
static pp_status w_json(const void *o, FILE *f) { return pp_check_write_json(o, f); }
static pp_status w_junit(const void *o, FILE *f) { return pp_check_write_junit(o, f); }
static pp_status w_md(const void *o, FILE *f) { return pp_check_write_markdown(o, f); }
static pp_status w_html(const void *o, FILE *f) { return pp_check_write_html(o, f); }
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

static pp_status load_all(const char *role, const char *const *paths, size_t n, int warmup,
                          pp_check_run **out)
{
    for (size_t i = 0; i < n; i++)
        pp_tool_note(1, "reading %s %s", role, paths[i]);
    pp_status st = pp_check_runs_load(paths, n, warmup, out);
    if (st != PP_OK)
        return pp_error_wrap(st, "%s", role);
    return PP_OK;
}

static pp_status hw_table(const void *o, FILE *f) { return pp_check_history_write_table(o, f); }
static pp_status hw_json(const void *o, FILE *f) { return pp_check_history_write_json(o, f); }
static pp_status hw_junit(const void *o, FILE *f) { return pp_check_history_write_junit(o, f); }
static pp_status hw_md(const void *o, FILE *f) { return pp_check_history_write_markdown(o, f); }
static pp_status hw_html(const void *o, FILE *f) { return pp_check_history_write_html(o, f); }

/* --history DIR: --record an entry, or report the change points. */
static int history_main(const args *a)
{
    pp_status st;
    if (a->record) {
        pp_check_run *r = NULL;
        char path[1024];
        if ((st = load_all("run", a->runs, a->n_runs, a->warmup, &r)) == PP_OK)
            st = pp_check_history_record(a->history, r, a->label, a->time, PP_VERSION, path,
                                         sizeof path);
        if (st == PP_OK && !a->quiet)
            fprintf(stderr, "pprof-check: recorded %zu run(s) as %s\n", r->n_runs, path);
        pp_check_run_free(r);
        return st == PP_OK ? PP_EXIT_OK : pp_tool_fail(st);
    }
    pp_check_history *h = NULL;
    if ((st = pp_check_history_analyze(a->history, &a->opt, &h)) != PP_OK)
        return pp_tool_fail(st);
    if (a->json)
        st = emit(a->output, "JSON report", hw_json, h);
    else if (!a->quiet)
        st = emit(a->output, "table", hw_table, h);
    if (st == PP_OK && a->junit)
        st = emit(a->junit, "JUnit report", hw_junit, h);
    if (st == PP_OK && a->markdown)
        st = emit(a->markdown, "Markdown report", hw_md, h);
    if (st == PP_OK && a->html)
        st = emit(a->html, "HTML report", hw_html, h);
    if (st == PP_OK && a->chart)
        st = pp_check_history_write_charts(h, a->chart, 1);
    int rc = st != PP_OK ? pp_tool_fail(st)
             : pp_check_history_failed(h) ? PP_EXIT_CHECK_FAILED : PP_EXIT_OK;
    pp_check_history_free(h);
    return rc;
}

int main(int argc, char **argv)
{
    pp_tool_init("pprof-check");
    args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != PP_TOOL_GO_ON) {
        free(a.runs);
        return rc;
    }
    pp_tool_verbose = a.verbose;
    pp_tool_quiet = a.quiet;
    pp_log_set_level(a.verbose ? 2 : a.quiet ? 0 : 1);
    pp_check_run *base = NULL, *cur = NULL;
    pp_check_result *res = NULL;
    pp_status st;
    if (a.history) {
        rc = history_main(&a);
        goto done;
    }
    if (a.add) {
        if ((st = load("baseline", a.baseline, a.warmup, &base)) != PP_OK ||
            (st = load_all("run", a.runs, a.n_runs, a.warmup, &cur)) != PP_OK ||
            (st = pp_check_run_append(base, cur)) != PP_OK) {
            rc = pp_tool_fail(st);
            goto done;
        }
        const char *out = a.output ? a.output : a.baseline;
        if (!a.output && strcmp(base->source_kind, "baseline") != 0) {
            rc = pp_tool_usage_error("--add-run writes %s back in place, but it is a %s, not a "
                                     "baseline file: give -o FILE", a.baseline,
                                     base->source_kind);
            goto done;
        }
        if ((st = emit(out, "baseline", w_base, base)) != PP_OK) {
            rc = pp_tool_fail(st);
            goto done;
        }
        if (!a.quiet && strcmp(out, "-") != 0)
            fprintf(stderr, "pprof-check: baseline of %zu runs (%zu steps, %zu metrics) written "
                    "to %s\n", base->n_runs, base->n_steps, base->n_metrics, out);
        rc = PP_EXIT_OK;
        goto done;
    }
    if (a.save) {
        if ((st = load_all("run", a.runs, a.n_runs, a.warmup, &base)) != PP_OK) {
            rc = pp_tool_fail(st);
            goto done;
        }
        if ((st = emit(a.output, "baseline", w_base, base)) != PP_OK) {
            rc = pp_tool_fail(st);
            goto done;
        }
        if (!a.quiet && a.output)
            fprintf(stderr, "pprof-check: baseline of %s (%zu run%s, %zu steps, %zu metrics) "
                    "written to %s\n", a.save, base->n_runs, base->n_runs == 1 ? "" : "s",
                    base->n_steps, base->n_metrics, a.output);
        rc = PP_EXIT_OK;
        goto done;
    }
    if ((st = load("baseline", a.baseline, a.warmup, &base)) != PP_OK ||
        (st = load_all("current", a.runs, a.n_runs, a.warmup, &cur)) != PP_OK ||
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
    if (st == PP_OK && a.html)
        st = emit(a.html, "HTML report", w_html, res);
    if (st != PP_OK) {
        rc = pp_tool_fail(st);
        goto done;
    }
    rc = pp_check_failed(res) ? PP_EXIT_CHECK_FAILED : PP_EXIT_OK;
done:
    pp_check_result_free(res);
    pp_check_run_free(base);
    pp_check_run_free(cur);
    free(a.runs);
    return rc;
}
