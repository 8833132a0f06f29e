/* pprof-tune: the tuning step of the user's loop (docs/cli/pprof-tune.md). From a run directory
 * captured by pprof-run it extracts per-layer costs, checks the model against the run's own
 * measured step, and proposes the partition (and schedule) with the best simulated step, written
 * as a plan file for pptrain --plan and in Megatron-LM's and DeepSpeed's forms. Other modes:
 * --advise (micro-batch size and count from runs at several sizes), --verify (a run of a plan:
 * predicted vs achieved) and --auto (capture, tune, re-run, verify, repeat).
 * Exit codes: 0 ok, 2 bad option or input (a run that cannot be analyzed, a plan that does not
 * match the run, an impossible memory limit), 3 runtime error (the job failed, out of memory). */
#define _GNU_SOURCE /* setenv in the child */
#include "pp_analyzer.h"
#include "pp_common.h"
#include "pp_tool.h"
#include "pp_tune.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *k_usage =
    "usage: pprof-tune [options] DIR                       propose a layout for a run\n"
    "       pprof-tune --advise [options] DIR1 DIR2 ...    micro-batch size, count, schedule\n"
    "       pprof-tune --verify PLAN DIR_AFTER [--baseline DIR_BEFORE]\n"
    "       pprof-tune --auto -o OUTDIR [options] -- CMD [ARGS...]   the whole loop\n"
    "\n"
    "Extracts per-layer costs from a run captured by pprof-run, predicts the run's own step with\n"
    "the simulator (the model's self-check), and finds the stage boundaries (and schedule) with\n"
    "the best simulated step; prints them as a plan, a Megatron-LM layout and DeepSpeed parts.\n"
    "\n"
    "  -o, --output PATH       write the plan file (OUTDIR with --auto)\n"
    "      --memory-limit B    per-stage memory limit in bytes (suffixes K, M, G, T = 2^10..;\n"
    "                          KiB, MiB, GiB, TiB too); memory model in docs/rebalancer.md\n"
    "      --recompute WHEN    auto (default): recompute whole stages where the memory limit\n"
    "                          needs it and the job can (config mark recompute=); none: never\n"
    "      --schedules LIST    schedules to consider: comma-separated gpipe, 1f1b, interleaved,\n"
    "                          zb-h1, or all (default: the run's own; --advise: all)\n"
    "      --export-costs FILE write the extracted cost file (docs/cost-file.md)\n"
    "      --formula           show the arithmetic behind every proposed number\n"
    "      --time-budget S     seconds per rebalancer search before it reports its gap\n"
    "                          (default 2; 0 = until optimal)\n"
    "      --advise            fit costs against the micro-batch size over DIR1 DIR2 ... and rank\n"
    "                          every micro-batch count x schedule for the global batch\n"
    "      --global-batch N    samples per step for --advise (default: the first run's)\n"
    "      --microbatch-sizes L  --advise: each run's samples per micro-batch (e.g. 1,2), for\n"
    "                          jobs whose config mark does not state samples per step\n"
    "      --verify PLAN       check that DIR_AFTER ran PLAN; measured vs predicted step\n"
    "      --baseline DIR      with --verify: the run before, for the achieved speedup\n"
    "      --auto              run CMD under pprof-run, tune, re-run with PPROF_PLAN, verify,\n"
    "                          repeat while the measured gain is >= 1%\n"
    "      --max-iters N       --auto: re-runs at most (default 3)\n"
    "      --rerun-disturbed N --auto: run an iteration again, up to N times, when its steps\n"
    "                          fall into two speed regimes (the machine changed speed during\n"
    "                          the run; docs/metrics.md \"Regimes\"); 0: never (default 1)\n"
    "      --dialect FILE      a dialect file naming the job's pipeline ranges (docs/dialects.md)\n"
    "      --jitter SPEC       predict the step's median and p95 with this op-duration noise\n"
    "                          (pptrain --sim-jitter's SPEC) instead of the run's own\n"
    "                          (docs/sim-dist.md)\n"
    "  -q, --quiet             only the result lines\n"
    "  -v, --verbose           more detail (every candidate, the extraction notes)\n"
    "  -h, --help              this help\n"
    "      --version           the version and the git commit built from\n"
    "\n"
    "exit codes: 0 ok, 2 bad option or input (includes a plan that does not match the run and an\n"
    "            impossible memory limit), 3 runtime error (e.g. the job failed)\n";

enum {
    OPT_MEMORY = 256,
    OPT_SCHEDULES,
    OPT_EXPORT,
    OPT_FORMULA,
    OPT_BUDGET,
    OPT_ADVISE,
    OPT_GLOBAL_BATCH,
    OPT_VERIFY,
    OPT_BASELINE,
    OPT_AUTO,
    OPT_MAX_ITERS,
    OPT_RERUN,
    OPT_MB_SIZES,
    OPT_DIALECT,
    OPT_JITTER,
    OPT_RECOMPUTE
};

static const struct option k_opts[] = {
    {"output", required_argument, 0, 'o'},
    {"memory-limit", required_argument, 0, OPT_MEMORY},
    {"schedules", required_argument, 0, OPT_SCHEDULES},
    {"export-costs", required_argument, 0, OPT_EXPORT},
    {"formula", no_argument, 0, OPT_FORMULA},
    {"explain", no_argument, 0, OPT_FORMULA},
    {"time-budget", required_argument, 0, OPT_BUDGET},
    {"advise", no_argument, 0, OPT_ADVISE},
    {"global-batch", required_argument, 0, OPT_GLOBAL_BATCH},
    {"verify", required_argument, 0, OPT_VERIFY},
    {"baseline", required_argument, 0, OPT_BASELINE},
    {"auto", no_argument, 0, OPT_AUTO},
    {"max-iters", required_argument, 0, OPT_MAX_ITERS},
    {"rerun-disturbed", required_argument, 0, OPT_RERUN},
    {"microbatch-sizes", required_argument, 0, OPT_MB_SIZES},
    {"dialect", required_argument, 0, OPT_DIALECT},
    {"jitter", required_argument, 0, OPT_JITTER},
    {"recompute", required_argument, 0, OPT_RECOMPUTE},
    PP_TOOL_OPTIONS_COMMON,
};

enum { MAX_DIRS = 64 };

typedef struct args {
    int advise, auto_mode;
    const char *verify_plan, *baseline;
    const char *output, *export_costs;
    const char *schedules;     /* as given, NULL = the default */
    pp_tune_opts tune;         /* the schedules, memory limit, time budget and formula */
    int64_t global_batch;      /* 0 = the first run's */
    int64_t max_iters;
    int64_t rerun_disturbed; /* -1: not given */
    int quiet, verbose;
    int n_dirs;
    const char *dirs[MAX_DIRS];
    int n_mb_sizes;            /* --microbatch-sizes, one per run */
    int mb_sizes[MAX_DIRS];
    char **cmd;                /* --auto: the job, NULL-terminated */
    pp_jitter jitter;          /* --jitter, tune.jitter points here when given */
} args;


/* ---------------------------------------------------------------------------------------- */
/* Parsing                                                                                   */
/* ---------------------------------------------------------------------------------------- */

/* "8G", "512MiB", "1.5G", "3145728": bytes, binary suffixes. */
static pp_status parse_bytes(const char *s, uint64_t *out)
{
    static const struct {
        const char *suffix;
        double mult;
    } k_units[] = {{"", 1},         {"B", 1},       {"K", 1024.0},  {"KiB", 1024.0},
                   {"M", 1048576.0}, {"MiB", 1048576.0}, {"G", 1073741824.0},
                   {"GiB", 1073741824.0}, {"T", 1099511627776.0}, {"TiB", 1099511627776.0}};
    char num[64];
    size_t n = strspn(s, "0123456789.eE+");
    /* an 'E' right before the end is not an exponent of a number like "1E" -> keep strict */
    if (n == 0 || n >= sizeof num)
        return PP_ERR(PP_ERR_INVALID, "--memory-limit '%s': expected bytes, e.g. 8G, 512MiB or "
                                      "8589934592", s);
    memcpy(num, s, n);
    num[n] = '\0';
    const char *suffix = s + n;
    double mult = 0;
    for (size_t k = 0; k < sizeof k_units / sizeof k_units[0]; k++)
        if (strcmp(suffix, k_units[k].suffix) == 0)
            mult = k_units[k].mult;
    if (mult == 0)
        return PP_ERR(PP_ERR_INVALID, "--memory-limit '%s': unknown unit '%s' (K, M, G, T or "
                                      "KiB, MiB, GiB, TiB; powers of 1024)", s, suffix);
    double v;
    if (pp_parse_f64(num, "--memory-limit", 0, 9007199254740992.0, &v) != PP_OK)
        return PP_ERR(PP_ERR_INVALID, "--memory-limit '%s': expected bytes, e.g. 8G, 512MiB or "
                                      "8589934592", s);
    double bytes = floor(v * mult);
    if (bytes < 1 || bytes > 9007199254740992.0)
        return PP_ERR(PP_ERR_INVALID, "--memory-limit '%s' is out of range [1 byte, 2^53 bytes]",
                      s);
    *out = (uint64_t)bytes;
    return PP_OK;
}

/* --microbatch-sizes 1,2,4: positive integers. */
static pp_status parse_sizes(const char *s, args *a)
{
    if (!pp_tool_list_well_formed(s, 1024))
        return PP_ERR(PP_ERR_INVALID, "--microbatch-sizes '%s': expected a comma-separated list "
                                      "of samples per micro-batch, one per run (e.g. 1,2)", s);
    pp_tool_int_list l = {.what = "--microbatch-sizes size", .opt = "--microbatch-sizes",
                          .plural = "sizes", .lo = 1, .hi = 1 << 24, .items = a->mb_sizes,
                          .max = MAX_DIRS};
    pp_status st = pp_tool_list_each(s, pp_tool_int_item, &l);
    a->n_mb_sizes = l.n;
    return st;
}

static pp_status add_schedule(void *ctx, const char *item)
{
    pp_tune_opts *o = ctx;
    pp_schedule_kind k;
    if (pp_schedule_kind_parse(item, &k) != PP_OK)
        return pp_error_wrap(PP_ERR_INVALID, "--schedules");
    int seen = 0;
    for (int i = 0; i < o->n_kinds; i++)
        seen |= o->kinds[i] == k;
    if (!seen)
        o->kinds[o->n_kinds++] = k;
    return PP_OK;
}

/* --schedules: "all" or a comma-separated list of schedule names into o->kinds, in the order
 * given, duplicates dropped. */
static pp_status parse_schedules(const char *s, pp_tune_opts *o)
{
    o->n_kinds = 0;
    if (strcmp(s, "all") == 0) {
        for (int k = 0; k < PP_TUNE_MAX_KINDS; k++)
            o->kinds[o->n_kinds++] = (pp_schedule_kind)k;
        return PP_OK;
    }
    if (!pp_tool_list_well_formed(s, 256))
        return PP_ERR(PP_ERR_INVALID, "--schedules '%s': expected 'all' or a comma-separated list "
                                      "of gpipe, 1f1b, interleaved, zb-h1", s);
    return pp_tool_list_each(s, add_schedule, o);
}

/* One getopt_long result. Returns PP_TOOL_GO_ON to go on, else an exit code. */
static int parse_option(int c, char **argv, args *a)
{
    pp_tune_opts *t = &a->tune;
    switch (c) {
    case 'o': a->output = optarg; break;
    case OPT_MEMORY: return pp_tool_option_status(parse_bytes(optarg, &t->memory_limit_bytes));
    case OPT_RECOMPUTE:
        if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "none") != 0)
            return pp_tool_option_status(PP_ERR(PP_ERR_INVALID, "--recompute '%s': expected auto "
                                                                "or none", optarg));
        t->no_recompute = strcmp(optarg, "none") == 0;
        break;
    case OPT_SCHEDULES:
        a->schedules = optarg;
        return pp_tool_option_status(parse_schedules(optarg, t));
    case OPT_EXPORT: a->export_costs = optarg; break;
    case OPT_FORMULA: t->formula = 1; break;
    case OPT_BUDGET: return pp_tool_option_f64(optarg, "--time-budget", 0, 86400, &t->time_budget_s);
    case OPT_ADVISE: a->advise = 1; break;
    case OPT_GLOBAL_BATCH:
        return pp_tool_option_i64(optarg, "--global-batch", 1, 1 << 24, &a->global_batch);
    case OPT_VERIFY: a->verify_plan = optarg; break;
    case OPT_BASELINE: a->baseline = optarg; break;
    case OPT_AUTO: a->auto_mode = 1; break;
    case OPT_MAX_ITERS: return pp_tool_option_i64(optarg, "--max-iters", 1, 100, &a->max_iters);
    case OPT_RERUN:
        return pp_tool_option_i64(optarg, "--rerun-disturbed", 0, 10, &a->rerun_disturbed);
    case OPT_MB_SIZES: return pp_tool_option_status(parse_sizes(optarg, a));
    case OPT_DIALECT: return pp_tool_option_status(pp_analysis_dialect_default(optarg));
    case OPT_JITTER: {
        pp_status st = pp_jitter_parse(optarg, &a->jitter);
        if (st == PP_OK && !a->jitter.seed_given)
            a->jitter.seed = 1; /* pptrain's default --seed */
        t->jitter = st == PP_OK ? &a->jitter : NULL;
        return pp_tool_option_status(st);
    }
    default: return pp_tool_option_common(c, argv, k_usage, &a->quiet, &a->verbose);
    }
    return PP_TOOL_GO_ON;
}

/* The options against the mode. Returns PP_TOOL_GO_ON to go on, else an exit code. */
static int check_mode(const args *a)
{
    int modes = a->advise + a->auto_mode + (a->verify_plan != NULL);
    if (modes > 1)
        return pp_tool_usage_error("--advise, --verify and --auto are separate modes: give one");
    if (a->cmd && !a->auto_mode)
        return pp_tool_usage_error("a command after '--' is for --auto");
    if (a->baseline && !a->verify_plan)
        return pp_tool_usage_error("--baseline is for --verify");
    if (a->rerun_disturbed >= 0 && !a->auto_mode)
        return pp_tool_usage_error("--rerun-disturbed is for --auto");
    if (a->global_batch && !a->advise)
        return pp_tool_usage_error("--global-batch is for --advise");
    if (a->n_mb_sizes && !a->advise)
        return pp_tool_usage_error("--microbatch-sizes is for --advise");
    if (a->n_mb_sizes && a->n_mb_sizes != a->n_dirs)
        return pp_tool_usage_error("--microbatch-sizes gives %d size(s) for %d run directories: one per "
                           "run, in order", a->n_mb_sizes, a->n_dirs);
    if (a->auto_mode) {
        if (!a->cmd || !a->cmd[0])
            return pp_tool_usage_error("--auto needs the training command after '--'");
        if (!a->output)
            return pp_tool_usage_error("--auto needs -o OUTDIR (iterations, plans and pictures go there)");
        if (a->export_costs)
            return pp_tool_usage_error("--export-costs takes one run: use it without --auto (the "
                               "iterations' runs are kept in OUTDIR)");
        return PP_TOOL_GO_ON;
    }
    if (a->verify_plan) {
        if (a->n_dirs != 1)
            return pp_tool_usage_error("--verify PLAN takes one run directory (the run of the plan), got "
                               "%d", a->n_dirs);
        if (a->output || a->export_costs || a->tune.memory_limit_bytes || a->schedules)
            return pp_tool_usage_error("--verify checks a plan: -o, --export-costs, --memory-limit and "
                               "--schedules do not apply");
        return PP_TOOL_GO_ON;
    }
    if (a->advise) {
        if (a->n_dirs < 2)
            return pp_tool_usage_error("--advise needs runs at two or more micro-batch sizes (got %d "
                               "run directory)", a->n_dirs);
        return PP_TOOL_GO_ON;
    }
    if (a->n_dirs == 0)
        return pp_tool_usage_error("missing the run directory (written by pprof-run)");
    if (a->n_dirs != 1)
        return pp_tool_usage_error("one run directory expected, got %d (several runs are for --advise)",
                           a->n_dirs);
    return PP_TOOL_GO_ON;
}

/* Returns PP_TOOL_GO_ON to go on, else an exit code. */
static int parse_args(int argc, char **argv, args *a)
{
    memset(a, 0, sizeof *a);
    a->tune.time_budget_s = 2;
    a->max_iters = 3;
    a->rerun_disturbed = -1;
    opterr = 0;
    /* '+': stop at the first non-option, so that "--auto -o D -- CMD" leaves CMD alone and
     * options may still follow the directories (handled by the loop below) */
    int c, rc;
    for (;;) {
        while ((c = getopt_long(argc, argv, "+:o:qvh", k_opts, NULL)) != -1)
            if ((rc = parse_option(c, argv, a)) != PP_TOOL_GO_ON)
                return rc;
        if (optind >= argc)
            break;
        if (strcmp(argv[optind - 1], "--") == 0 && optind > 1) {
            /* everything after "--" is the job */
            a->cmd = argv + optind;
            break;
        }
        if (a->auto_mode)
            return pp_tool_usage_error("--auto runs a command: put it after '--' (pprof-tune --auto -o "
                               "OUTDIR -- CMD ...); got '%s'", argv[optind]);
        if (a->n_dirs >= MAX_DIRS)
            return pp_tool_usage_error("more than %d run directories", MAX_DIRS);
        a->dirs[a->n_dirs++] = argv[optind++];
    }
    return check_mode(a);
}

/* ---------------------------------------------------------------------------------------- */
/* The modes                                                                                 */
/* ---------------------------------------------------------------------------------------- */

static int run_tune(const args *a)
{
    pp_analysis *an = NULL;
    pp_extract e;
    pp_tool_progress_start("analysing the run");
    pp_status st = pp_tune_load_run(&a->tune, a->dirs[0], &an, &e);
    if (st != PP_OK) {
        pp_tool_progress_stop();
        return pp_tool_fail(st);
    }
    pp_tune_search s;
    memset(&s, 0, sizeof s);
    if (a->export_costs) {
        if ((st = pp_costs_write(e.costs, a->export_costs)) != PP_OK) {
            pp_error_wrap(st, "--export-costs");
            goto done;
        }
        pp_tool_note(0, "costs written to %s", a->export_costs);
    }
    pp_tool_progress_phase("searching layouts");
    st = pp_tune_search_run(&a->tune, a->dirs[0], &e, &s);
    pp_tool_progress_stop();
    if (st != PP_OK)
        goto done;
    pp_tune_search_print(&a->tune, a->dirs[0], &e, &s, stdout);
    if (a->output) {
        const pp_tune_proposal *b = &s.cands[s.best];
        st = pp_tune_plan_write(&b->part, b->kind, b->M, e.microbatch_size,
                                a->tune.memory_limit_bytes, b->step_ns, b->bubble,
                                b->dist.median_ns, b->dist.p95_ns, a->dirs[0],
                                pp_tune_plan_recompute(&e, b), a->output);
        if (st == PP_OK)
            printf("plan:         %s (pptrain --plan %s, or PPROF_PLAN=%s)\n", a->output,
                   a->output, a->output);
    }
done:
    pp_tool_progress_stop();
    pp_tune_search_free(&s);
    pp_extract_free(&e);
    pp_analysis_free(an);
    return st == PP_OK ? PP_EXIT_OK : pp_tool_fail(st);
}

static int run_advise(const args *a)
{
    pp_tune_advice adv;
    pp_status st = pp_tune_advise_fit(&a->tune, a->dirs, a->n_dirs,
                                      a->n_mb_sizes ? a->mb_sizes : NULL, a->global_batch, &adv);
    if (st == PP_OK) {
        pp_tune_advise_print_fit(&a->tune, &adv, stdout);
        st = pp_tune_advise_search(&a->tune, &adv);
    }
    if (st == PP_OK) {
        pp_tune_advise_print(&a->tune, &adv, stdout);
        const pp_tune_proposal *b = &adv.cands[0];
        if (a->output && (st = pp_tune_plan_write(&b->part, b->kind, b->M, b->b,
                                                  a->tune.memory_limit_bytes, b->step_ns,
                                                  b->bubble, b->dist.median_ns, b->dist.p95_ns,
                                                  a->dirs[0],
                                                  pp_tune_plan_recompute(&adv.runs[0], b),
                                                  a->output)) == PP_OK)
            printf("plan:         %s (pptrain --plan %s sets --batch to M x b = %lld)\n",
                   a->output, a->output, (long long)adv.global_batch);
    }
    pp_tune_advice_free(&adv);
    return st == PP_OK ? PP_EXIT_OK : pp_tool_fail(st);
}

static int run_verify(const args *a)
{
    pp_plan plan;
    pp_status st = pp_plan_load(a->verify_plan, &plan);
    if (st != PP_OK)
        return pp_tool_fail(st);
    st = pp_tune_verify(&a->tune, &plan, a->verify_plan, a->dirs[0], a->baseline, stdout);
    pp_plan_free(&plan);
    return st == PP_OK ? PP_EXIT_OK : pp_tool_fail(st);
}

/* ---------------------------------------------------------------------------------------- */
/* --auto: the job's processes                                                               */
/* ---------------------------------------------------------------------------------------- */

/* An earlier --auto output (iter0/, best-plan.json) or a pprof-run directory (manifest.json),
 * which may be rotated to .old without losing anything of the user's. */
static int is_auto_output(const char *name)
{
    return strcmp(name, "iter0") == 0 || strcmp(name, "best-plan.json") == 0 ||
           strcmp(name, "manifest.json") == 0;
}

static const pp_tool_outdir k_outdir = {
    .is_ours = is_auto_output,
    .lacks = "no iter0, best-plan.json or manifest.json",
    .noun = "output",
    .old_is_not = "is not one",
};

/* Makes OUTDIR ready: an earlier output is kept as OUTDIR.old (the one before that removed),
 * like pprof-run does with run directories; anything else in the way is refused. */
static pp_status prepare_outdir(const char *dir)
{
    char why[PATH_MAX + 64];
    pp_tool_dir_kind k = pp_tool_dir_classify(dir, &k_outdir, why, sizeof why);
    if (k == PP_TOOL_DIR_OTHER || k == PP_TOOL_DIR_NOT_DIR)
        return PP_ERR(PP_ERR_INVALID, "'%s' exists and is not a pprof-tune --auto output or a "
                                      "run directory; choose another -o or remove it", dir);
    pp_status st;
    if (k == PP_TOOL_DIR_OURS && (st = pp_tool_dir_keep_old(dir, &k_outdir)) != PP_OK)
        return st;
    return pp_tool_mkdir_p(dir, "directory", PP_ERR_IO);
}

static int have_gnuplot(void)
{
    const char *path = getenv("PATH");
    if (!path)
        return 0;
    char buf[8192];
    snprintf(buf, sizeof buf, "%s", path);
    char *save = NULL;
    for (char *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char exe[PATH_MAX];
        snprintf(exe, sizeof exe, "%s/gnuplot", d);
        if (access(exe, X_OK) == 0)
            return 1;
    }
    return 0;
}

/* The pptrain flags a plan replaces; pptrain refuses them together with a plan. */
static int is_plan_flag(const char *arg, int *takes_value)
{
    static const char *k_flags[] = {"--stages", "--boundaries", "--schedule", "--microbatches",
                                    "--virtual-stages", "--plan"};
    for (size_t k = 0; k < sizeof k_flags / sizeof k_flags[0]; k++) {
        size_t n = strlen(k_flags[k]);
        if (strncmp(arg, k_flags[k], n) == 0 && (arg[n] == '\0' || arg[n] == '=')) {
            *takes_value = arg[n] == '\0';
            return 1;
        }
    }
    return 0;
}

/* Runs pprof-run -q -o dir -- cmd, with PPROF_PLAN=plan when plan is not NULL, the job's output
 * to log. When the command is pptrain and a plan is given, the flags the plan sets are dropped
 * (pptrain refuses --stages etc. together with a plan). Returns the exit status (-signal). */
static pp_status run_job(const char *pprof_run, char **cmd, const char *dir, const char *plan,
                         const char *log, int *status_out)
{
    int n = 0;
    while (cmd[n])
        n++;
    char **argv = calloc((size_t)n + 8, sizeof *argv);
    if (!argv)
        return PP_ERR(PP_ERR_NOMEM, "out of memory");
    int k = 0;
    argv[k++] = (char *)pprof_run;
    argv[k++] = "-q";
    argv[k++] = "-o";
    argv[k++] = (char *)dir;
    argv[k++] = "--";
    const char *base = strrchr(cmd[0], '/');
    base = base ? base + 1 : cmd[0];
    int strip = plan && strcmp(base, "pptrain") == 0;
    for (int i = 0; i < n; i++) {
        int takes = 0;
        if (strip && i > 0 && is_plan_flag(cmd[i], &takes)) {
            i += takes;
            continue;
        }
        argv[k++] = cmd[i];
    }
    argv[k] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        free(argv);
        return PP_ERR(PP_ERR_RUNTIME, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
            _exit(126);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        if (plan)
            setenv("PPROF_PLAN", plan, 1);
        else
            unsetenv("PPROF_PLAN");
        execv(pprof_run, argv);
        fprintf(stderr, "pprof-tune: cannot run %s: %s\n", pprof_run, strerror(errno));
        _exit(127);
    }
    free(argv);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return PP_ERR(PP_ERR_RUNTIME, "waitpid: %s", strerror(errno));
    *status_out = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return PP_OK;
}

/* The last lines of a log, to stderr. */
static void print_log_tail(const char *log, int lines)
{
    char *text = NULL;
    size_t len = 0;
    if (pp_read_file(log, &text, &len) != PP_OK) {
        pp_error_clear();
        return;
    }
    size_t start = len;
    int seen = 0;
    while (start > 0) {
        if (text[start - 1] == '\n' && start != len && ++seen > lines)
            break;
        start--;
    }
    fprintf(stderr, "%s", text + start);
    if (len && text[len - 1] != '\n')
        fputc('\n', stderr);
    free(text);
}

/* What --auto's job callback needs. */
typedef struct job_ctx {
    const char *pprof_run;
    char **cmd;
} job_ctx;

/* pp_tune_job's run: pprof-run around the job; a failure is said with the end of its log. */
static pp_status job_run(void *ctx, int iter, const char *dir, const char *plan, const char *log,
                         int *failed)
{
    const job_ctx *j = ctx;
    int status = 0;
    pp_status st = run_job(j->pprof_run, j->cmd, dir, plan, log, &status);
    if (st != PP_OK)
        return st;
    *failed = status != 0;
    if (status != 0) {
        fprintf(stderr, "pprof-tune: iter %d: the job failed (%s %d); the end of %s:\n", iter,
                status < 0 ? "signal" : "exit", status < 0 ? -status : status, log);
        print_log_tail(log, 15);
    }
    return PP_OK;
}

/* pprof-run next to this executable, into buf. Prints why not and returns 0 when it is not. */
static int find_pprof_run(char *buf, size_t cap)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "pprof-tune: cannot read /proc/self/exe: %s\n", strerror(errno));
        return 0;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    snprintf(buf, cap, "%s/pprof-run", self);
    if (access(buf, X_OK) != 0) {
        fprintf(stderr, "pprof-tune: pprof-run not found next to pprof-tune (%s): %s\n", buf,
                strerror(errno));
        return 0;
    }
    return 1;
}

static int run_auto(const args *a)
{
    char pprof_run[PATH_MAX + 16], outdir[PATH_MAX];
    if (!find_pprof_run(pprof_run, sizeof pprof_run))
        return PP_EXIT_RUNTIME;
    if (!pp_tool_path_trim(a->output, outdir, sizeof outdir))
        return pp_tool_fail(PP_ERR(PP_ERR_INVALID, "output directory '%s': path too long",
                                   a->output));
    pp_status st = prepare_outdir(outdir);
    if (st != PP_OK)
        return pp_tool_fail(st);
    job_ctx job = {.pprof_run = pprof_run, .cmd = a->cmd};
    pp_tune_auto_opts ao = {.tune = a->tune, .outdir = outdir, .max_iters = (int)a->max_iters,
                            .rerun_disturbed = a->rerun_disturbed < 0 ? 1 : (int)a->rerun_disturbed,
                            .gantt = have_gnuplot(), .job = {.run = job_run, .ctx = &job}};
    if (!ao.gantt)
        pp_tool_note(0, "gnuplot not found (install gnuplot-nox): no Gantt pictures");
    int job_failed = 0;
    if ((st = pp_tune_auto(&ao, stdout, &job_failed)) != PP_OK)
        return pp_tool_fail(st);
    return job_failed ? PP_EXIT_RUNTIME : PP_EXIT_OK;
}

int main(int argc, char **argv)
{
    pp_tool_init("pprof-tune");
    args a;
    int code = parse_args(argc, argv, &a);
    if (code != PP_TOOL_GO_ON)
        return code;
    pp_tool_quiet = a.quiet;
    pp_tool_verbose = a.verbose;
    a.tune.verbose = a.verbose;
    a.tune.note = pp_tool_note;
    a.tune.detail = a.verbose && !a.quiet ? stderr : NULL;
    if (a.auto_mode)
        return run_auto(&a);
    if (a.verify_plan)
        return run_verify(&a);
    if (a.advise)
        return run_advise(&a);
    return run_tune(&a);
}
