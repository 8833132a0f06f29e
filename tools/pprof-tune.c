/* pprof-tune: the tuning step of the user's loop (docs/cli/pprof-tune.md). From a run directory
 * captured by pprof-run it extracts per-layer costs, checks the model against the run's own
 * measured step, and proposes the partition (and schedule) with the best simulated step, written
 * as a plan file for pptrain --plan and in Megatron-LM's and DeepSpeed's forms. Other modes:
 * --advise (micro-batch size and count from runs at several sizes), --verify (a run of a plan:
 * predicted vs achieved) and --auto (capture, tune, re-run, verify, repeat).
 * Exit codes: 0 ok, 2 bad option or input (a run that cannot be analyzed, a plan that does not
 * match the run, an impossible memory limit), 3 runtime error (the job failed, out of memory). */
#define _GNU_SOURCE /* setenv in the child, nftw */
#include "pp_advise.h"
#include "pp_analyzer.h"
#include "pp_common.h"
#include "pp_tool.h"
#include "pp_extract.h"
#include "pp_plan.h"
#include "pp_report.h"
#include "pp_sim.h"
#include "pp_tune.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
    "  -q, --quiet             only the result lines\n"
    "  -v, --verbose           more detail (every candidate, the extraction notes)\n"
    "  -h, --help              this help\n"
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
    OPT_MB_SIZES
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
    {"microbatch-sizes", required_argument, 0, OPT_MB_SIZES},
    {"quiet", no_argument, 0, 'q'},
    {"verbose", no_argument, 0, 'v'},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

enum { MAX_KINDS = 4, MAX_DIRS = 64 };

typedef struct args {
    int advise, auto_mode;
    const char *verify_plan, *baseline;
    const char *output, *export_costs;
    const char *schedules;     /* NULL = the default */
    uint64_t memory_limit;
    double time_budget_s;
    int64_t global_batch;      /* 0 = the first run's */
    int64_t max_iters;
    int formula, quiet, verbose;
    int n_dirs;
    const char *dirs[MAX_DIRS];
    int n_mb_sizes;            /* --microbatch-sizes, one per run */
    int mb_sizes[MAX_DIRS];
    char **cmd;                /* --auto: the job, NULL-terminated */
} args;


/* ---------------------------------------------------------------------------------------- */
/* Parsing                                                                                   */
/* ---------------------------------------------------------------------------------------- */

/* snprintf into a fixed buffer that reports truncation (and keeps gcc's truncation analysis,
 * which cannot see the lengths checked elsewhere, quiet). */
static int fmt_into(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fmt_into(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return n >= 0 && (size_t)n < cap;
}

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

/* Why a schedule the user listed is not proposed to this run. */
static const char *not_runnable(const pp_extract *e)
{
    return e->runnable_announced
               ? "the job's config mark does not list it among the schedules it can run"
               : "the job does not announce the schedules it can run (config mark "
                 "schedules=, docs/nvtx-convention.md), so only its own is proposed";
}

/* "all" or a comma-separated list of schedule names; duplicates dropped. */
static pp_status parse_schedules(const char *s, pp_schedule_kind *kinds, int *n)
{
    *n = 0;
    if (strcmp(s, "all") == 0) {
        for (int k = 0; k < MAX_KINDS; k++)
            kinds[(*n)++] = (pp_schedule_kind)k;
        return PP_OK;
    }
    char buf[256];
    if (!s[0] || strlen(s) >= sizeof buf || s[0] == ',' || s[strlen(s) - 1] == ',' ||
        strstr(s, ",,"))
        return PP_ERR(PP_ERR_INVALID, "--schedules '%s': expected 'all' or a comma-separated list "
                                      "of gpipe, 1f1b, interleaved, zb-h1", s);
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *p = buf;; p = NULL) {
        char *tok = strtok_r(p, ",", &save);
        if (!tok)
            break;
        pp_schedule_kind k;
        if (pp_schedule_kind_parse(tok, &k) != PP_OK)
            return pp_error_wrap(PP_ERR_INVALID, "--schedules");
        int seen = 0;
        for (int i = 0; i < *n; i++)
            seen |= kinds[i] == k;
        if (!seen)
            kinds[(*n)++] = k;
    }
    return PP_OK;
}

/* --microbatch-sizes 1,2,4: positive integers. */
static pp_status parse_sizes(const char *s, args *a)
{
    char buf[1024];
    if (!s[0] || strlen(s) >= sizeof buf || s[0] == ',' || s[strlen(s) - 1] == ',' ||
        strstr(s, ",,"))
        return PP_ERR(PP_ERR_INVALID, "--microbatch-sizes '%s': expected a comma-separated list "
                                      "of samples per micro-batch, one per run (e.g. 1,2)", s);
    snprintf(buf, sizeof buf, "%s", s);
    a->n_mb_sizes = 0;
    char *save = NULL;
    for (char *p = buf;; p = NULL) {
        char *tok = strtok_r(p, ",", &save);
        if (!tok)
            break;
        int64_t v;
        if (pp_parse_i64(tok, "--microbatch-sizes size", 1, 1 << 24, &v) != PP_OK)
            return PP_ERR_INVALID;
        if (a->n_mb_sizes >= MAX_DIRS)
            return PP_ERR(PP_ERR_INVALID, "--microbatch-sizes: more than %d sizes", MAX_DIRS);
        a->mb_sizes[a->n_mb_sizes++] = (int)v;
    }
    return PP_OK;
}

/* Returns -1 to go on, else an exit code. */
static int parse_args(int argc, char **argv, args *a)
{
    memset(a, 0, sizeof *a);
    a->time_budget_s = 2;
    a->max_iters = 3;
    opterr = 0;
    /* '+': stop at the first non-option, so that "--auto -o D -- CMD" leaves CMD alone and
     * options may still follow the directories (handled by the loop below) */
    int c;
    for (;;) {
        while ((c = getopt_long(argc, argv, "+:o:qvh", k_opts, NULL)) != -1) {
            switch (c) {
            case 'o': a->output = optarg; break;
            case OPT_MEMORY:
                if (parse_bytes(optarg, &a->memory_limit) != PP_OK)
                    return pp_tool_usage_error("%s", pp_error_message());
                break;
            case OPT_SCHEDULES: {
                pp_schedule_kind kinds[MAX_KINDS];
                int n;
                if (parse_schedules(optarg, kinds, &n) != PP_OK)
                    return pp_tool_usage_error("%s", pp_error_message());
                a->schedules = optarg;
                break;
            }
            case OPT_EXPORT: a->export_costs = optarg; break;
            case OPT_FORMULA: a->formula = 1; break;
            case OPT_BUDGET:
                if (pp_parse_f64(optarg, "--time-budget", 0, 86400, &a->time_budget_s) != PP_OK)
                    return pp_tool_usage_error("%s", pp_error_message());
                break;
            case OPT_ADVISE: a->advise = 1; break;
            case OPT_GLOBAL_BATCH:
                if (pp_parse_i64(optarg, "--global-batch", 1, 1 << 24, &a->global_batch) !=
                    PP_OK)
                    return pp_tool_usage_error("%s", pp_error_message());
                break;
            case OPT_VERIFY: a->verify_plan = optarg; break;
            case OPT_BASELINE: a->baseline = optarg; break;
            case OPT_AUTO: a->auto_mode = 1; break;
            case OPT_MAX_ITERS:
                if (pp_parse_i64(optarg, "--max-iters", 1, 100, &a->max_iters) != PP_OK)
                    return pp_tool_usage_error("%s", pp_error_message());
                break;
            case OPT_MB_SIZES:
                if (parse_sizes(optarg, a) != PP_OK)
                    return pp_tool_usage_error("%s", pp_error_message());
                break;
            case 'q': a->quiet = 1; break;
            case 'v': a->verbose = 1; break;
            case 'h': fputs(k_usage, stdout); return PP_EXIT_OK;
            case ':': return pp_tool_usage_error("option '%s' needs a value", argv[optind - 1]);
            default:
                if (optopt)
                    return pp_tool_usage_error("unknown option '-%c'", optopt);
                return pp_tool_usage_error("unknown option '%s'", argv[optind - 1]);
            }
        }
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
    int modes = a->advise + a->auto_mode + (a->verify_plan != NULL);
    if (modes > 1)
        return pp_tool_usage_error("--advise, --verify and --auto are separate modes: give one");
    if (a->cmd && !a->auto_mode)
        return pp_tool_usage_error("a command after '--' is for --auto");
    if (a->baseline && !a->verify_plan)
        return pp_tool_usage_error("--baseline is for --verify");
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
        return -1;
    }
    if (a->verify_plan) {
        if (a->n_dirs != 1)
            return pp_tool_usage_error("--verify PLAN takes one run directory (the run of the plan), got "
                               "%d", a->n_dirs);
        if (a->output || a->export_costs || a->memory_limit || a->schedules)
            return pp_tool_usage_error("--verify checks a plan: -o, --export-costs, --memory-limit and "
                               "--schedules do not apply");
        return -1;
    }
    if (a->advise) {
        if (a->n_dirs < 2)
            return pp_tool_usage_error("--advise needs runs at two or more micro-batch sizes (got %d "
                               "run directory)", a->n_dirs);
        return -1;
    }
    if (a->n_dirs == 0)
        return pp_tool_usage_error("missing the run directory (written by pprof-run)");
    if (a->n_dirs != 1)
        return pp_tool_usage_error("one run directory expected, got %d (several runs are for --advise)",
                           a->n_dirs);
    return -1;
}

/* ---------------------------------------------------------------------------------------- */
/* Helpers                                                                                   */
/* ---------------------------------------------------------------------------------------- */

static void fmt_bytes(uint64_t b, char *buf, size_t cap)
{
    if (b >= (UINT64_C(1) << 30))
        snprintf(buf, cap, "%.2f GiB", (double)b / 1073741824.0);
    else if (b >= (UINT64_C(1) << 20))
        snprintf(buf, cap, "%.1f MiB", (double)b / 1048576.0);
    else if (b >= 1024)
        snprintf(buf, cap, "%.1f KiB", (double)b / 1024.0);
    else
        snprintf(buf, cap, "%llu B", (unsigned long long)b);
}

/* Analyzes dir and extracts its costs. Errors name the directory. */
static pp_status load_run(const char *dir, pp_analysis **a, pp_extract *e)
{
    pp_analysis_options o;
    pp_analysis_options_default(&o);
    *a = NULL;
    memset(e, 0, sizeof *e);
    pp_status st = pp_analyze_dir(dir, &o, a);
    if (st != PP_OK)
        return pp_error_wrap(st, "run '%s'", dir);
    if ((*a)->n_steps == 0) {
        pp_analysis_free(*a);
        *a = NULL;
        return PP_ERR(PP_ERR_INVALID, "run '%s': no complete step to measure (run more steps: "
                                      "the first is skipped as warm-up)", dir);
    }
    if ((st = pp_extract_from_analysis(*a, e)) != PP_OK) {
        pp_analysis_free(*a);
        *a = NULL;
        return pp_error_wrap(st, "run '%s'", dir);
    }
    pp_tool_note(1, "run '%s': %d layers, %d stages, %s, M = %d, micro-batch size %d; extraction notes:",
         dir, e->costs->n_layers, e->partition.S, pp_schedule_kind_name(e->schedule), e->M,
         e->microbatch_size);
    if (pp_tool_verbose && !pp_tool_quiet)
        fprintf(stderr, "%s", e->notes);
    return PP_OK;
}

static int same_layout(const pp_partition *x, pp_schedule_kind kx, int Mx,
                       const pp_partition *y, pp_schedule_kind ky, int My)
{
    if (x->L != y->L || x->S != y->S || x->v != y->v || kx != ky || Mx != My)
        return 0;
    for (int p = 0; p <= x->P; p++)
        if (x->bounds[p] != y->bounds[p])
            return 0;
    return 1;
}

/* One evaluated layout: the rebalancer's answer for (kind, v, M) at micro-batch size b. */
typedef struct proposal {
    pp_schedule_kind kind;
    int v, M, b;
    int ok;              /* 0: not evaluated, why[] says why */
    char why[512];
    pp_partition part;   /* owned */
    double step_ns, bubble, lower_ns;
    int exact;
    uint64_t *mem;       /* [S] owned */
    double seconds;
} proposal;

static void proposal_free(proposal *p)
{
    pp_partition_free(&p->part);
    free(p->mem);
    p->mem = NULL;
}

/* Rebalances (kind, S, v, M) over costs c. Failures of shape or memory are recorded in p->why
 * (p->ok = 0) with the status returned; the caller decides whether they are fatal. */
static pp_status propose(const pp_costs *c, pp_schedule_kind kind, int S, int v, int M, int b,
                         uint64_t mem_limit, double budget_s, proposal *p)
{
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->v = v;
    p->M = M;
    p->b = b;
    pp_rebalance_opts o = {.kind = kind, .S = S, .v = v, .M = M, .costs = c,
                           .memory_limit_bytes = mem_limit, .time_budget_s = budget_s};
    pp_rebalance_result r;
    pp_status st = pp_rebalance(&o, &r);
    if (st != PP_OK) {
        snprintf(p->why, sizeof p->why, "%s", pp_error_message());
        return st;
    }
    p->part = r.partition;
    r.partition.bounds = NULL;
    p->step_ns = r.step_ns;
    p->lower_ns = r.lower_bound_ns;
    p->exact = r.exact;
    p->seconds = r.seconds;
    p->mem = malloc(sizeof(uint64_t) * (size_t)S);
    if (!p->mem) {
        pp_rebalance_result_free(&r);
        return PP_ERR(PP_ERR_NOMEM, "out of memory");
    }
    memcpy(p->mem, r.stage_memory_bytes, sizeof(uint64_t) * (size_t)S);
    pp_rebalance_result_free(&r);
    pp_sim_result sr;
    if ((st = pp_sim_file(kind, &p->part, M, c, NULL, &sr)) != PP_OK) {
        proposal_free(p);
        return st;
    }
    p->bubble = sr.bubble_ratio;
    pp_sim_result_free(&sr);
    p->ok = 1;
    return PP_OK;
}

/* The chunk counts to try for a schedule: 1, or for interleaved v = 2 (the run's own v when it
 * ran interleaved), or 2..vmax with `sweep`. Returns how many; why[] explains an empty list. */
static int v_choices(pp_schedule_kind kind, int S, int L, int M, int run_v, int sweep, int *vs,
                     char *why, size_t cap)
{
    if (kind != PP_SCHED_INTERLEAVED) {
        vs[0] = 1;
        return 1;
    }
    if (S < 2) {
        snprintf(why, cap, "interleaved needs 2 or more stages");
        return 0;
    }
    if (M % S != 0) {
        snprintf(why, cap, "interleaved needs M a multiple of S (M = %d, S = %d)", M, S);
        return 0;
    }
    int n = 0;
    int lo = run_v > 1 && !sweep ? run_v : 2, hi = sweep ? 4 : lo;
    for (int v = lo; v <= hi; v++)
        if (S * v <= L)
            vs[n++] = v;
    if (!n)
        snprintf(why, cap, "interleaved needs S x v <= L (S = %d, v = %d, L = %d)", S, lo, L);
    return n;
}

static const char *search_word(const proposal *p, char *buf, size_t cap)
{
    if (p->exact)
        snprintf(buf, cap, "optimal");
    else
        snprintf(buf, cap, "gap <= %.2f%%",
                 p->lower_ns > 0 ? 100.0 * (p->step_ns / p->lower_ns - 1) : 100.0);
    return buf;
}

/* Fills a plan for (part, kind, M, b) with its prediction; the caller frees it. */
static pp_status make_plan(const pp_partition *part, pp_schedule_kind kind, int M, int b,
                           uint64_t mem_limit, double step_ns, double bubble,
                           const char *baseline, pp_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    plan->version = 1;
    plan->num_layers = part->L;
    pp_status st = pp_partition_from_bounds(part->bounds, part->P + 1, part->L, part->S,
                                            part->v, &plan->partition);
    if (st != PP_OK)
        return st;
    snprintf(plan->schedule, sizeof plan->schedule, "%s", pp_schedule_kind_name(kind));
    plan->microbatches = M;
    plan->microbatch_size = b > 0 ? b : 0;
    plan->memory_limit_bytes = mem_limit;
    plan->predicted_step_ms = step_ns * 1e-6;
    plan->predicted_bubble = bubble < 0 ? -1 : bubble > 1 ? 1 : bubble;
    /* a baseline path longer than the plan's field is cut (it is informational) */
    size_t n = baseline ? strlen(baseline) : 0;
    if (n >= sizeof plan->baseline)
        n = sizeof plan->baseline - 1;
    memcpy(plan->baseline, baseline ? baseline : "", n);
    plan->baseline[n] = '\0';
    return PP_OK;
}

static pp_status write_plan(const pp_partition *part, pp_schedule_kind kind, int M, int b,
                            uint64_t mem_limit, double step_ns, double bubble,
                            const char *baseline, const char *path)
{
    pp_plan plan;
    pp_status st = make_plan(part, kind, M, b, mem_limit, step_ns, bubble, baseline, &plan);
    if (st == PP_OK)
        st = pp_plan_write(&plan, path);
    pp_plan_free(&plan);
    return st == PP_OK ? st : pp_error_wrap(st, "writing plan '%s'", path);
}

/* The partition as Megatron-LM and DeepSpeed take it. */
static void print_framework_forms(const pp_costs *c, const pp_partition *part, FILE *out)
{
    char buf[4096];
    pp_advise_megatron_layout(c, part, buf, sizeof buf);
    fprintf(out, "Megatron-LM:  --pipeline-model-parallel-layout \"%s\"\n", buf);
    if (part->v == 1) {
        pp_advise_deepspeed_parts(part, buf, sizeof buf);
        fprintf(out, "DeepSpeed:    PipelineModule parts = %s\n"
                     "              (partition_method takes 'uniform', 'parameters' or "
                     "'type:regex'; exact\n"
                     "              boundaries need a custom partition that sets these parts)\n",
                buf);
    } else {
        fprintf(out, "DeepSpeed:    no interleaved schedule (one chunk per stage): not "
                     "applicable with v = %d\n",
                part->v);
    }
}

static void print_memory_row(const char *label, const uint64_t *mem, int S, uint64_t limit,
                             FILE *out)
{
    fprintf(out, "%-16s", label);
    for (int s = 0; s < S; s++) {
        char b[32];
        fmt_bytes(mem[s], b, sizeof b);
        fprintf(out, "%s%s%s", s ? ", " : "", b, limit && mem[s] > limit ? " (over)" : "");
    }
    fputc('\n', out);
}

/* ---------------------------------------------------------------------------------------- */
/* --formula                                                                                 */
/* ---------------------------------------------------------------------------------------- */

/* "a + b + c = s" for the per-layer values of layers [lo, hi); long sums elided. */
static void print_sum(const pp_costs *c, int lo, int hi, int bwd, FILE *out)
{
    double sum = 0;
    int n = hi - lo;
    for (int l = lo; l < hi; l++) {
        double t = (bwd ? c->layers[l].bwd_us : c->layers[l].fwd_us) * 1e-3;
        sum += t;
        if (n <= 8 || l < lo + 3 || l >= hi - 2)
            fprintf(out, "%s%.3f", l > lo ? " + " : "", t);
        else if (l == lo + 3)
            fprintf(out, " + ... (%d more)", n - 5);
    }
    fprintf(out, " = %.3f ms", sum);
}

static void print_stage_sums(const pp_costs *c, const pp_partition *part, int M, FILE *out)
{
    for (int p = 0; p < part->P; p++) {
        int lo = part->bounds[p], hi = part->bounds[p + 1];
        if (part->v > 1)
            fprintf(out, "    piece %d (stage %d, chunk %d), ", p, p % part->S, p / part->S);
        else
            fprintf(out, "    stage %d, ", p);
        if (hi - lo == 1)
            fprintf(out, "layer %d (%s)\n", lo, c->layers[lo].name);
        else
            fprintf(out, "layers %d-%d (%s .. %s)\n", lo, hi - 1, c->layers[lo].name,
                    c->layers[hi - 1].name);
        double f = 0, b = 0;
        for (int l = lo; l < hi; l++) {
            f += c->layers[l].fwd_us * 1e-3;
            b += c->layers[l].bwd_us * 1e-3;
        }
        fputs("      fwd = ", out);
        print_sum(c, lo, hi, 0, out);
        fputs("\n      bwd = ", out);
        print_sum(c, lo, hi, 1, out);
        fprintf(out, "\n      busy per step = M x (fwd + bwd) = %d x %.3f = %.3f ms\n", M, f + b,
                M * (f + b));
    }
}

static void print_sim_terms(const pp_costs *c, const pp_partition *part, pp_schedule_kind kind,
                            int M, FILE *out)
{
    pp_sim_result r;
    if (pp_sim_file(kind, part, M, c, NULL, &r) != PP_OK) {
        fprintf(out, "    (simulation failed: %s)\n", pp_error_message());
        return;
    }
    fprintf(out, "    step = replay of the %s instruction lists (S = %d, M = %d, v = %d) with "
                 "these costs = %.3f ms\n",
            pp_schedule_kind_name(kind), part->S, M, part->v, r.step_ns * 1e-6);
    double idle = 0;
    fputs("    busy per stage (incl. optimizer) =", out);
    for (int s = 0; s < r.S; s++)
        fprintf(out, "%s %.3f", s ? "," : "", r.busy_ns[s] * 1e-6);
    fputs(" ms\n    idle = step - busy =", out);
    for (int s = 0; s < r.S; s++) {
        fprintf(out, "%s %.3f", s ? "," : "", r.idle_ns[s] * 1e-6);
        idle += r.idle_ns[s];
    }
    fprintf(out, " ms\n    bubble = sum idle / (S x step) = %.3f / (%d x %.3f) = %.1f%%\n",
            idle * 1e-6, r.S, r.step_ns * 1e-6, 100.0 * r.bubble_ratio);
    pp_sim_result_free(&r);
}

static void print_memory_terms(const pp_costs *c, const pp_partition *part,
                               pp_schedule_kind kind, int M, uint64_t limit, FILE *out)
{
    int *peak = calloc((size_t)part->S, sizeof *peak);
    uint64_t *mem = calloc((size_t)part->S, sizeof *mem);
    if (!peak || !mem || pp_advise_stage_memory(c, part, kind, M, mem, peak) != PP_OK) {
        fputs("    (memory model unavailable)\n", out);
        free(peak);
        free(mem);
        return;
    }
    fputs("    memory(stage) = 4 x params + peak_inflight x activations (docs/rebalancer.md)\n",
          out);
    for (int s = 0; s < part->S; s++) {
        uint64_t params = 0, act_max = 0;
        for (int ch = 0; ch < part->v; ch++) {
            int p = ch * part->S + s;
            uint64_t act = 0;
            for (int l = part->bounds[p]; l < part->bounds[p + 1]; l++) {
                params += c->layers[l].param_bytes;
                act += c->layers[l].activation_bytes;
            }
            act_max = act > act_max ? act : act_max;
        }
        char pb[32], ab[32], mb[32];
        fmt_bytes(params, pb, sizeof pb);
        fmt_bytes(act_max, ab, sizeof ab);
        fmt_bytes(mem[s], mb, sizeof mb);
        fprintf(out, "    stage %d: 4 x %s + %d x %s%s = %s%s\n", s, pb, peak[s], ab,
                part->v > 1 ? " (heaviest chunk)" : "", mb,
                limit && mem[s] > limit ? "  > limit" : "");
    }
    if (limit) {
        char lb[32];
        fmt_bytes(limit, lb, sizeof lb);
        fprintf(out, "    limit per stage: %s (%llu bytes)\n", lb, (unsigned long long)limit);
    }
    free(peak);
    free(mem);
}

/* ---------------------------------------------------------------------------------------- */
/* Tuning one run                                                                            */
/* ---------------------------------------------------------------------------------------- */

typedef struct tune_result {
    proposal best;          /* owned */
    double current_pred_ns, current_bubble;
    double measured_ns;
} tune_result;

/* A large self-check error means the simulator's assumptions (stages run concurrently, each op
 * takes its layers' measured time) do not hold for this run; say the likely cause. */
static void warn_model_error(double err_pct, int S, FILE *out)
{
    if (fabs(err_pct) <= 10)
        return;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(out, "  warning: the model is off by %+.1f%%: predictions are %s. ", err_pct,
            "less reliable for this run");
    if (cpus > 0 && cpus < S)
        fprintf(out, "%d stages share %ld CPUs here, so stages do not run concurrently\n"
                     "  as the simulator assumes (the measured step includes that contention)\n",
                S, cpus);
    else
        fputs("Something outside the layer ranges (contention, launch gaps, transfers\n"
              "  the link model misses) takes time\n",
              out);
}

/* Evaluates the candidates for run e and picks the best predicted. Prints the comparison unless
 * `brief`. With `plan_path`, writes the plan. */
static pp_status tune_run(const args *a, const char *dir, const pp_extract *e, int brief,
                          const char *plan_path, tune_result *out)
{
    memset(out, 0, sizeof *out);
    const pp_costs *c = e->costs;
    const pp_partition *cur = &e->partition;
    int S = cur->S, L = cur->L;
    pp_status st = pp_extract_predict(e, e->schedule, cur, e->M, &out->current_pred_ns,
                                      &out->current_bubble);
    if (st != PP_OK)
        return pp_error_wrap(st, "predicting the run's own layout");
    out->measured_ns = e->measured_step_ns;
    if (a->memory_limit && !e->has_param_bytes)
        pp_tool_note(0, "run '%s' has no layer marks with parameter sizes: the memory limit counts "
                "activations only", dir);

    pp_schedule_kind kinds[MAX_KINDS];
    int n_kinds = 1;
    kinds[0] = e->schedule;
    char skipped[MAX_KINDS][256];
    int n_skipped = 0;
    if (a->schedules) {
        pp_schedule_kind listed[MAX_KINDS];
        int n;
        parse_schedules(a->schedules, listed, &n);
        /* the run's own schedule first: it is always a candidate (no change of schedule); the
         * others only when the job says it can run them */
        for (int i = 0; i < n; i++) {
            if (listed[i] == e->schedule)
                continue;
            if (e->runnable & (1u << listed[i]))
                kinds[n_kinds++] = listed[i];
            else
                fmt_into(skipped[n_skipped++], sizeof skipped[0], "%s: %s",
                         pp_schedule_kind_name(listed[i]), not_runnable(e));
        }
    }
    proposal cands[MAX_KINDS * 4];
    int n_cands = 0;
    pp_status first_fail = PP_OK;
    char first_msg[512] = "";
    for (int k = 0; k < n_kinds; k++) {
        int vs[4];
        char why[256] = "";
        int nv = v_choices(kinds[k], S, L, e->M, cur->v, 0, vs, why, sizeof why);
        if (!nv) {
            fmt_into(skipped[n_skipped++], sizeof skipped[0], "%s: %s",
                     pp_schedule_kind_name(kinds[k]), why);
            continue;
        }
        for (int i = 0; i < nv; i++) {
            proposal *p = &cands[n_cands++];
            st = propose(c, kinds[k], S, vs[i], e->M, e->microbatch_size, a->memory_limit,
                         a->time_budget_s, p);
            if (st == PP_ERR_NOMEM)
                goto fail;
            if (st != PP_OK && first_fail == PP_OK) {
                first_fail = st;
                snprintf(first_msg, sizeof first_msg, "%s", p->why);
            }
        }
    }
    int best = -1;
    for (int i = 0; i < n_cands; i++)
        if (cands[i].ok && (best < 0 || cands[i].step_ns < cands[best].step_ns))
            best = i;
    if (best < 0) {
        st = first_fail != PP_OK ? first_fail : PP_ERR_INVALID;
        if (first_fail != PP_OK)
            PP_ERR(first_fail, "%s", first_msg);
        else
            PP_ERR(PP_ERR_INVALID, "no schedule in --schedules fits this run (%s)",
                   n_skipped ? skipped[0] : "none given");
        goto fail;
    }
    const proposal *b = &cands[best];

    if (!brief) {
        FILE *o = stdout;
        char cb[2048], pbnd[2048], w[64];
        pp_partition_format(cur, cb, sizeof cb);
        pp_partition_format(&b->part, pbnd, sizeof pbnd);
        double err = 100.0 * (out->measured_ns - out->current_pred_ns) / out->current_pred_ns;
        fprintf(o, "run %s: %d layers, %d stages, %s, M = %d", dir, L, S,
                pp_schedule_kind_name(e->schedule), e->M);
        if (e->microbatch_size)
            fprintf(o, ", micro-batch size %d", e->microbatch_size);
        fputc('\n', o);
        fprintf(o, "self-check: the run's own layout measured %.3f ms, the model predicts %.3f ms "
                   "(error %+.2f%%)\n",
                out->measured_ns * 1e-6, out->current_pred_ns * 1e-6, err);
        warn_model_error(err, S, o);
        fputc('\n', o);
        fprintf(o, "%-16s%-28s%s\n", "", "current", "proposed");
        fprintf(o, "%-16s%-28s%s\n", "schedule", pp_schedule_kind_name(e->schedule),
                pp_schedule_kind_name(b->kind));
        fprintf(o, "%-16s%-28d%d\n", "virtual stages", cur->v, b->v);
        fprintf(o, "%-16s%-28d%d\n", "micro-batches", e->M, b->M);
        fprintf(o, "%-16s%-28s%s\n", "boundaries", cb, pbnd);
        char cs[64];
        snprintf(cs, sizeof cs, "%.3f (measured %.3f)", out->current_pred_ns * 1e-6,
                 out->measured_ns * 1e-6);
        fprintf(o, "%-16s%-28s%.3f\n", "step ms", cs, b->step_ns * 1e-6);
        snprintf(cs, sizeof cs, "%.1f%% (measured %.1f%%)", 100.0 * out->current_bubble,
                 100.0 * e->measured_bubble);
        fprintf(o, "%-16s%-28s%.1f%%\n", "bubble", cs, 100.0 * b->bubble);
        snprintf(cs, sizeof cs, "%.3fx", 1.0);
        fprintf(o, "%-16s%-28s%.3fx predicted (%.3fx vs measured)\n", "speedup", cs,
                out->current_pred_ns / b->step_ns, out->measured_ns / b->step_ns);
        fprintf(o, "%-16s%-28s%s (lower bound %.3f ms)\n", "search", "-",
                search_word(b, w, sizeof w), b->lower_ns * 1e-6);
        if (e->has_param_bytes) {
            uint64_t *mem = calloc((size_t)S, sizeof *mem);
            if (mem && pp_advise_stage_memory(c, cur, e->schedule, e->M, mem, NULL) == PP_OK) {
                print_memory_row("memory current", mem, S, a->memory_limit, o);
                print_memory_row("memory proposed", b->mem, S, a->memory_limit, o);
            }
            free(mem);
        } else {
            fprintf(o, "%-16s%s\n", "memory", "unknown (the run has no parameter sizes)");
        }
        if (n_cands > 1 || n_skipped || pp_tool_verbose) {
            fprintf(o, "\ncandidates (%s):\n", a->memory_limit ? "within the memory limit"
                                                               : "no memory limit");
            fprintf(o, "  %-12s %2s %12s %8s %9s  %s\n", "schedule", "v", "step ms", "bubble",
                    "speedup", "search / why not");
            for (int i = 0; i < n_cands; i++) {
                const proposal *p = &cands[i];
                if (p->ok)
                    fprintf(o, "  %-12s %2d %12.3f %7.1f%% %8.3fx  %s, %.2f s%s\n",
                            pp_schedule_kind_name(p->kind), p->v, p->step_ns * 1e-6,
                            100.0 * p->bubble, out->current_pred_ns / p->step_ns,
                            search_word(p, w, sizeof w), p->seconds, i == best ? "  <- best" : "");
                else
                    fprintf(o, "  %-12s %2d %12s %8s %9s  %s\n", pp_schedule_kind_name(p->kind),
                            p->v, "-", "-", "-", p->why);
            }
            for (int i = 0; i < n_skipped; i++)
                fprintf(o, "  skipped %s\n", skipped[i]);
        }
        fputc('\n', o);
        if (a->formula) {
            fputs("formula (times in ms per micro-batch unless said otherwise):\n", o);
            fputs("  current layout:\n", o);
            print_stage_sums(c, cur, e->M, o);
            print_sim_terms(c, cur, e->schedule, e->M, o);
            fputs("  proposed layout:\n", o);
            print_stage_sums(c, &b->part, b->M, o);
            print_sim_terms(c, &b->part, b->kind, b->M, o);
            fprintf(o, "    lower bound = %.3f ms (proven: no partition%s simulates faster); gap "
                       "= step / bound - 1 = %.4f%%%s\n",
                    b->lower_ns * 1e-6, a->memory_limit ? " within the limit" : "",
                    100.0 * (b->step_ns / b->lower_ns - 1),
                    b->exact ? " (search finished: optimal up to 1e-9 ties)" : "");
            fprintf(o, "    speedup = current predicted / proposed = %.3f / %.3f = %.3fx\n",
                    out->current_pred_ns * 1e-6, b->step_ns * 1e-6,
                    out->current_pred_ns / b->step_ns);
            if (c->p2p_GBps > 0)
                fprintf(o, "  transfers: latency %.1f us + bytes / %.3f GB/s per message\n",
                        c->p2p_latency_us, c->p2p_GBps);
            else
                fprintf(o, "  transfers: latency %.1f us per message, no bandwidth term\n",
                        c->p2p_latency_us);
            if (e->has_param_bytes) {
                fputs("  memory, current:\n", o);
                print_memory_terms(c, cur, e->schedule, e->M, a->memory_limit, o);
                fputs("  memory, proposed:\n", o);
                print_memory_terms(c, &b->part, b->kind, b->M, a->memory_limit, o);
            }
            fputc('\n', o);
        }
        print_framework_forms(c, &b->part, o);
    }
    if (plan_path) {
        st = write_plan(&b->part, b->kind, b->M, e->microbatch_size, a->memory_limit, b->step_ns,
                        b->bubble, dir, plan_path);
        if (st != PP_OK)
            goto fail;
        if (!brief)
            fprintf(stdout, "plan:         %s (pptrain --plan %s, or PPROF_PLAN=%s)\n", plan_path,
                    plan_path, plan_path);
    }
    out->best = cands[best];
    cands[best].part.bounds = NULL;
    cands[best].mem = NULL;
    st = PP_OK;
fail:
    for (int i = 0; i < n_cands; i++)
        proposal_free(&cands[i]);
    return st;
}

static int run_tune(const args *a)
{
    pp_analysis *an = NULL;
    pp_extract e;
    pp_status st = load_run(a->dirs[0], &an, &e);
    if (st != PP_OK)
        return pp_tool_fail(st);
    int code = PP_EXIT_OK;
    if (a->export_costs) {
        if ((st = pp_costs_write(e.costs, a->export_costs)) != PP_OK) {
            code = pp_tool_fail(pp_error_wrap(st, "--export-costs"));
            goto done;
        }
        pp_tool_note(0, "costs written to %s", a->export_costs);
    }
    tune_result tr;
    if ((st = tune_run(a, a->dirs[0], &e, 0, a->output, &tr)) != PP_OK) {
        code = pp_tool_fail(st);
        goto done;
    }
    proposal_free(&tr.best);
done:
    pp_extract_free(&e);
    pp_analysis_free(an);
    return code;
}

/* ---------------------------------------------------------------------------------------- */
/* --advise                                                                                  */
/* ---------------------------------------------------------------------------------------- */

static int cmp_proposal(const void *x, const void *y)
{
    const proposal *p = x, *q = y;
    if (p->ok != q->ok)
        return q->ok - p->ok;
    if (!p->ok)
        return 0;
    return (p->step_ns > q->step_ns) - (p->step_ns < q->step_ns);
}

static int run_advise(const args *a)
{
    int n = a->n_dirs, code = PP_EXIT_OK;
    pp_analysis *an[MAX_DIRS] = {0};
    pp_extract ex[MAX_DIRS];
    const pp_costs *costs[MAX_DIRS];
    int sizes[MAX_DIRS];
    pp_advise_fit fit;
    memset(&fit, 0, sizeof fit);
    memset(ex, 0, sizeof ex);
    proposal *cands = NULL;
    int n_cands = 0;
    pp_status st = PP_OK;
    int loaded = 0;
    for (; loaded < n; loaded++) {
        if ((st = load_run(a->dirs[loaded], &an[loaded], &ex[loaded])) != PP_OK)
            goto out;
        costs[loaded] = ex[loaded].costs;
        sizes[loaded] = ex[loaded].microbatch_size;
        if (a->n_mb_sizes) {
            if (sizes[loaded] && sizes[loaded] != a->mb_sizes[loaded])
                pp_tool_note(0, "run '%s' states micro-batch size %d; --microbatch-sizes says %d (used)",
                     a->dirs[loaded], sizes[loaded], a->mb_sizes[loaded]);
            sizes[loaded] = a->mb_sizes[loaded];
            ex[loaded].microbatch_size = sizes[loaded];
        }
        if (!sizes[loaded]) {
            st = PP_ERR(PP_ERR_INVALID, "run '%s' does not state its samples per step (config "
                                        "mark): its micro-batch size is unknown; give "
                                        "--microbatch-sizes B1,B2,...",
                        a->dirs[loaded]);
            loaded++;
            goto out;
        }
    }
    if ((st = pp_advise_fit_costs(costs, sizes, n, &fit)) != PP_OK)
        goto out;
    const pp_extract *e0 = &ex[0];
    int S = e0->partition.S, L = e0->partition.L;
    int64_t G = a->global_batch;
    if (!G) {
        G = (int64_t)llround(e0->samples_per_step);
        if (G <= 0)
            G = (int64_t)sizes[0] * e0->M;
        if (G <= 0) {
            st = PP_ERR(PP_ERR_INVALID, "run '%s' does not state its samples per step: give "
                                        "--global-batch N",
                        a->dirs[0]);
            goto out;
        }
    }
    FILE *o = stdout;
    fprintf(o, "micro-batch fit over %d runs at sizes", n);
    for (int i = 0; i < n; i++)
        fprintf(o, "%s %d", i ? "," : "", sizes[i]);
    fprintf(o, " (%d distinct):\n", fit.n_sizes);
    fputs("assumptions: each layer's time is linear in the micro-batch size, t(b) = a + c x b\n"
          "             (a: per-micro-batch overhead, c: per-sample cost); activation and\n"
          "             transfer bytes are proportional to b; parameters do not depend on b;\n"
          "             the link model and optimizer time are the runs' means\n",
          o);
    fprintf(o, "  %-4s %-16s %10s %10s %9s %10s %10s %9s\n", "#", "layer", "fwd a ms",
            "fwd c ms", "fwd res", "bwd a ms", "bwd c ms", "bwd res");
    for (int l = 0; l < fit.L; l++) {
        const pp_advise_layer *al = &fit.layers[l];
        if (!pp_tool_verbose && fit.L > 12 && l >= 5 && l < fit.L - 3) {
            if (l == 5)
                fprintf(o, "  ... (%d more layers; -v lists all)\n", fit.L - 8);
            continue;
        }
        fprintf(o, "  %-4d %-16.16s %10.4f %10.4f %8.2f%% %10.4f %10.4f %8.2f%%\n", l, al->name,
                al->fwd.a_us * 1e-3, al->fwd.c_us * 1e-3, 100.0 * al->fwd.max_rel,
                al->bwd.a_us * 1e-3, al->bwd.c_us * 1e-3, 100.0 * al->bwd.max_rel);
    }
    if (fit.n_runs == 2)
        fputs("  residuals (largest |measured - fit| / measured): two points, the line passes "
              "through both (0 by construction)\n",
              o);
    else if (fit.worst_layer >= 0)
        fprintf(o, "  residuals: largest %.2f%% of the measured value (layer %d, %s)\n",
                100.0 * fit.worst_rel, fit.worst_layer, fit.layers[fit.worst_layer].name);
    else
        fputs("  residuals: 0\n", o);

    pp_schedule_kind kinds[MAX_KINDS];
    int n_kinds = 0;
    {
        pp_schedule_kind listed[MAX_KINDS];
        int n;
        parse_schedules(a->schedules ? a->schedules : "all", listed, &n);
        /* only what the job can run (its config mark's schedules=, else its own schedule) */
        for (int i = 0; i < n; i++) {
            if (e0->runnable & (1u << listed[i]))
                kinds[n_kinds++] = listed[i];
            else if (a->schedules || e0->runnable_announced)
                pp_tool_note(0, "%s not considered: %s", pp_schedule_kind_name(listed[i]),
                             not_runnable(e0));
        }
        if (!e0->runnable_announced)
            pp_tool_note(0, "run '%s' does not announce the schedules it can run (config mark "
                            "schedules=, docs/nvtx-convention.md): only its own, %s, is "
                            "considered",
                         a->dirs[0], pp_schedule_kind_name(e0->schedule));
    }
    int cap = 64;
    cands = calloc((size_t)cap, sizeof *cands);
    if (!cands) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory");
        goto out;
    }
    int clamped_total = 0, n_fit_fail = 0;
    char fit_fail_msg[512] = "";
    for (int64_t M = 1; M <= G; M++) {
        if (G % M)
            continue;
        int b = (int)(G / M);
        pp_costs *cb = NULL;
        int clamped = 0;
        if ((st = pp_advise_costs_at(&fit, b, &cb, &clamped)) != PP_OK)
            goto out;
        clamped_total += clamped;
        for (int k = 0; k < n_kinds; k++) {
            int vs[4];
            char why[256];
            int nv = v_choices(kinds[k], S, L, (int)M, 1, 1, vs, why, sizeof why);
            for (int i = 0; i < nv; i++) {
                if (n_cands == cap) {
                    proposal *g = realloc(cands, sizeof *cands * (size_t)cap * 2);
                    if (!g) {
                        pp_costs_destroy(cb);
                        st = PP_ERR(PP_ERR_NOMEM, "out of memory");
                        goto out;
                    }
                    cands = g;
                    cap *= 2;
                }
                proposal *p = &cands[n_cands++];
                pp_status ps = propose(cb, kinds[k], S, vs[i], (int)M, b, a->memory_limit,
                                       a->time_budget_s, p);
                if (ps == PP_ERR_NOMEM) {
                    pp_costs_destroy(cb);
                    st = ps;
                    goto out;
                }
                if (ps != PP_OK && !n_fit_fail++)
                    snprintf(fit_fail_msg, sizeof fit_fail_msg, "%s", p->why);
                pp_tool_note(1, "M = %lld, %s v = %d: %s", (long long)M, pp_schedule_kind_name(kinds[k]),
                     vs[i], ps == PP_OK ? "done" : p->why);
            }
        }
        pp_costs_destroy(cb);
    }
    qsort(cands, (size_t)n_cands, sizeof *cands, cmp_proposal);
    if (!n_cands || !cands[0].ok) {
        st = PP_ERR(PP_ERR_INVALID, "no micro-batch count and schedule fits: %s",
                    fit_fail_msg[0] ? fit_fail_msg : "no valid schedule shape");
        goto out;
    }
    /* the first run's own choice, predicted by the fit, for the speedup column */
    double ref_ns = 0;
    {
        pp_costs *cb = NULL;
        int b0 = (int)(G / e0->M);
        if (G % e0->M == 0 && pp_advise_costs_at(&fit, b0, &cb, NULL) == PP_OK) {
            pp_sim_result r;
            if (pp_sim_file(e0->schedule, &e0->partition, e0->M, cb, NULL, &r) == PP_OK) {
                ref_ns = r.step_ns;
                pp_sim_result_free(&r);
            }
        }
        pp_costs_destroy(cb);
    }
    fprintf(o, "\nglobal batch %lld samples, %d stages%s; every micro-batch count M dividing it "
               "(micro-batch size b = batch / M):\n",
            (long long)G, S, a->memory_limit ? ", within the memory limit" : "");
    if (ref_ns > 0)
        fprintf(o, "reference: run 1's layout (%s, M = %d) predicted at %.3f ms by the fit\n",
                pp_schedule_kind_name(e0->schedule), e0->M, ref_ns * 1e-6);
    fprintf(o, "  %-4s %5s %5s %-12s %2s %12s %8s %12s %9s  %-18s %s\n", "rank", "M", "b",
            "schedule", "v", "step ms", "bubble", "samples/s", "speedup", "search",
            "boundaries");
    int shown = 0;
    for (int i = 0; i < n_cands; i++) {
        const proposal *p = &cands[i];
        if (!p->ok)
            continue;
        if (!pp_tool_verbose && shown >= 20) {
            fprintf(o, "  ... (-v lists all %d)\n", n_cands);
            break;
        }
        char w[64], bnd[2048], sp[32] = "-";
        pp_partition_format(&p->part, bnd, sizeof bnd);
        if (ref_ns > 0)
            snprintf(sp, sizeof sp, "%.3fx", ref_ns / p->step_ns);
        fprintf(o, "  %-4d %5d %5d %-12s %2d %12.3f %7.1f%% %12.1f %9s  %-18s %s\n", ++shown,
                p->M, p->b, pp_schedule_kind_name(p->kind), p->v, p->step_ns * 1e-6,
                100.0 * p->bubble, (double)G / (p->step_ns * 1e-9), sp,
                search_word(p, w, sizeof w), bnd);
    }
    int n_out = 0;
    for (int i = 0; i < n_cands; i++)
        n_out += !cands[i].ok;
    if (n_out)
        fprintf(o, "  %d combination(s) ruled out (e.g. %s)\n", n_out, fit_fail_msg);
    if (clamped_total)
        fprintf(o, "  note: %d fitted time(s) below 0 clamped to 0 (extrapolating far from the "
                   "measured sizes)\n",
                clamped_total);
    const proposal *b = &cands[0];
    fprintf(o, "\nbest: M = %d micro-batches of %d, %s", b->M, b->b, pp_schedule_kind_name(b->kind));
    if (b->v > 1)
        fprintf(o, " v = %d", b->v);
    char bnd[2048];
    pp_partition_format(&b->part, bnd, sizeof bnd);
    fprintf(o, ", boundaries %s: %.3f ms predicted", bnd, b->step_ns * 1e-6);
    if (ref_ns > 0)
        fprintf(o, " (%.3fx vs run 1's layout)", ref_ns / b->step_ns);
    fputc('\n', o);
    {
        pp_costs *cb = NULL;
        if (pp_advise_costs_at(&fit, b->b, &cb, NULL) == PP_OK) {
            if (a->formula) {
                fprintf(o, "\nformula (costs at b = %d: t = a + c x %d per layer):\n", b->b,
                        b->b);
                print_stage_sums(cb, &b->part, b->M, o);
                print_sim_terms(cb, &b->part, b->kind, b->M, o);
                if (e0->has_param_bytes)
                    print_memory_terms(cb, &b->part, b->kind, b->M, a->memory_limit, o);
                fputc('\n', o);
            }
            print_framework_forms(cb, &b->part, o);
        }
        pp_costs_destroy(cb);
    }
    if (a->output) {
        if ((st = write_plan(&b->part, b->kind, b->M, b->b, a->memory_limit, b->step_ns,
                             b->bubble, a->dirs[0], a->output)) != PP_OK)
            goto out;
        fprintf(o, "plan:         %s (pptrain --plan %s sets --batch to M x b = %lld)\n",
                a->output, a->output, (long long)G);
    }
out:
    if (st != PP_OK)
        code = pp_tool_fail(st);
    for (int i = 0; i < n_cands; i++)
        proposal_free(&cands[i]);
    free(cands);
    pp_advise_fit_free(&fit);
    for (int i = 0; i < loaded && i < n; i++) {
        pp_extract_free(&ex[i]);
        pp_analysis_free(an[i]);
    }
    return code;
}

/* ---------------------------------------------------------------------------------------- */
/* --verify                                                                                  */
/* ---------------------------------------------------------------------------------------- */

/* PP_ERR_INVALID naming the first difference between what run `dir` ran and the plan. */
static pp_status check_ran_plan(const char *dir, const pp_extract *e, const pp_plan *plan,
                                const char *plan_path)
{
    char ran[2048], says[2048];
    if (e->partition.L != plan->num_layers)
        return PP_ERR(PP_ERR_INVALID, "%s has a model of %d layers, the plan '%s' was made for "
                                      "%d: a plan for another model",
                      dir, e->partition.L, plan_path, plan->num_layers);
    if (e->partition.S != plan->partition.S || e->partition.v != plan->partition.v)
        return PP_ERR(PP_ERR_INVALID, "%s ran %d stages x %d virtual, the plan '%s' says %d x %d",
                      dir, e->partition.S, e->partition.v, plan_path, plan->partition.S,
                      plan->partition.v);
    pp_partition_format(&e->partition, ran, sizeof ran);
    pp_partition_format(&plan->partition, says, sizeof says);
    if (strcmp(ran, says) != 0)
        return PP_ERR(PP_ERR_INVALID, "%s ran boundaries %s, the plan says %s", dir, ran, says);
    if (strcmp(pp_schedule_kind_name(e->schedule), plan->schedule) != 0)
        return PP_ERR(PP_ERR_INVALID, "%s ran schedule %s, the plan says %s", dir,
                      pp_schedule_kind_name(e->schedule), plan->schedule);
    if (e->M != plan->microbatches)
        return PP_ERR(PP_ERR_INVALID, "%s ran %d micro-batches, the plan says %d", dir, e->M,
                      plan->microbatches);
    if (plan->microbatch_size > 0 && e->microbatch_size > 0 &&
        plan->microbatch_size != e->microbatch_size)
        return PP_ERR(PP_ERR_INVALID, "%s ran micro-batches of %d samples, the plan says %d", dir,
                      e->microbatch_size, plan->microbatch_size);
    return PP_OK;
}

static int run_verify(const args *a)
{
    pp_plan plan;
    pp_status st = pp_plan_load(a->verify_plan, &plan);
    if (st != PP_OK)
        return pp_tool_fail(st);
    const char *dir = a->dirs[0];
    pp_analysis *an = NULL, *bn = NULL;
    pp_extract e, be;
    memset(&be, 0, sizeof be);
    int code = PP_EXIT_OK;
    if ((st = load_run(dir, &an, &e)) != PP_OK) {
        pp_plan_free(&plan);
        return pp_tool_fail(st);
    }
    if ((st = check_ran_plan(dir, &e, &plan, a->verify_plan)) != PP_OK)
        goto out;
    double self_ns = 0;
    pp_extract_predict(&e, e.schedule, &e.partition, e.M, &self_ns, NULL);
    double pred_ns = plan.predicted_step_ms >= 0 ? plan.predicted_step_ms * 1e6 : self_ns;
    double meas_ns = e.measured_step_ns;
    FILE *o = stdout;
    char bnd[2048];
    pp_partition_format(&e.partition, bnd, sizeof bnd);
    fprintf(o, "%s ran the plan %s: %d stages, boundaries %s, %s, M = %d\n", dir, a->verify_plan,
            e.partition.S, bnd, plan.schedule, e.M);
    fprintf(o, "step: measured %.3f ms, predicted %.3f ms%s: error %+.2f%%\n", meas_ns * 1e-6,
            pred_ns * 1e-6, plan.predicted_step_ms >= 0 ? " (the plan's)" : " (no prediction in "
                                                                            "the plan: the "
                                                                            "run's own costs)",
            100.0 * (meas_ns - pred_ns) / pred_ns);
    fprintf(o, "model re-check: this run's own costs predict %.3f ms (error %+.2f%%)\n",
            self_ns * 1e-6, 100.0 * (meas_ns - self_ns) / self_ns);
    if (plan.predicted_bubble >= 0)
        fprintf(o, "bubble: measured %.1f%%, predicted %.1f%%\n", 100.0 * e.measured_bubble,
                100.0 * plan.predicted_bubble);
    if (a->baseline) {
        if ((st = load_run(a->baseline, &bn, &be)) != PP_OK)
            goto out;
        if (be.partition.L != e.partition.L) {
            st = PP_ERR(PP_ERR_INVALID, "baseline %s has %d layers, %s has %d: not the same "
                                        "model",
                        a->baseline, be.partition.L, dir, e.partition.L);
            goto out;
        }
        double base_ns = be.measured_step_ns;
        double achieved = base_ns / meas_ns, predicted = base_ns / pred_ns;
        char bb[2048];
        pp_partition_format(&be.partition, bb, sizeof bb);
        fprintf(o, "baseline %s (boundaries %s, %s, M = %d): measured %.3f ms\n", a->baseline, bb,
                pp_schedule_kind_name(be.schedule), be.M, base_ns * 1e-6);
        fprintf(o, "speedup: achieved %.3fx, predicted %.3fx (baseline measured / plan "
                   "predicted)\n",
                achieved, predicted);
    }
out:
    if (st != PP_OK)
        code = pp_tool_fail(st);
    pp_extract_free(&e);
    pp_analysis_free(an);
    pp_extract_free(&be);
    pp_analysis_free(bn);
    pp_plan_free(&plan);
    return code;
}

/* ---------------------------------------------------------------------------------------- */
/* --auto                                                                                    */
/* ---------------------------------------------------------------------------------------- */

static pp_status mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    if (strlen(path) >= sizeof buf)
        return PP_ERR(PP_ERR_INVALID, "path too long: '%s'", path);
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return PP_ERR(PP_ERR_IO, "cannot create directory '%s': %s", buf,
                              strerror(errno));
            *p = c;
            if (!c)
                break;
        }
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return PP_ERR(PP_ERR_IO, "'%s' is not a directory", path);
    return PP_OK;
}

/* What is at an --auto output path. */
typedef enum out_kind { OUT_MISSING, OUT_EMPTY, OUT_OURS, OUT_OTHER } out_kind;

static int has_entry(const char *dir, const char *name)
{
    char path[PATH_MAX];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &sb) == 0;
}

/* OUT_OURS: an earlier --auto output (iter0/, best-plan.json) or a pprof-run directory
 * (manifest.json), which may be rotated to .old without losing anything of the user's. */
static out_kind classify_out(const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return errno == ENOENT ? OUT_MISSING : OUT_OTHER;
    if (!S_ISDIR(sb.st_mode))
        return OUT_OTHER;
    if (has_entry(dir, "iter0") || has_entry(dir, "best-plan.json") ||
        has_entry(dir, "manifest.json"))
        return OUT_OURS;
    DIR *d = opendir(dir);
    if (!d)
        return OUT_OTHER;
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n ? OUT_OTHER : OUT_EMPTY;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Makes OUTDIR ready: an earlier output is kept as OUTDIR.old (the one before that removed),
 * like pprof-run does with run directories; anything else in the way is refused. */
static pp_status prepare_outdir(const char *dir)
{
    out_kind k = classify_out(dir);
    if (k == OUT_OTHER)
        return PP_ERR(PP_ERR_INVALID, "'%s' exists and is not a pprof-tune --auto output or a "
                                      "run directory; choose another -o or remove it", dir);
    if (k == OUT_OURS) {
        char old[PATH_MAX + 8];
        snprintf(old, sizeof old, "%s.old", dir);
        out_kind ko = classify_out(old);
        if (ko == OUT_OTHER)
            return PP_ERR(PP_ERR_INVALID, "cannot keep the previous output of '%s': '%s' exists "
                                          "and is not one; remove or rename it", dir, old);
        if (ko != OUT_MISSING && nftw(old, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
            return PP_ERR(PP_ERR_IO, "cannot remove the older output '%s': %s", old,
                          strerror(errno));
        if (rename(dir, old) != 0)
            return PP_ERR(PP_ERR_IO, "cannot rename '%s' to '%s': %s", dir, old,
                          strerror(errno));
        pp_tool_note(1, "previous output kept as '%s'", old);
    }
    return mkdir_p(dir);
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

typedef struct iteration {
    int iter;
    char bounds[512];
    pp_schedule_kind kind;
    int M, v;
    double predicted_ns, measured_ns;
    pp_partition part;
    char plan[PATH_MAX]; /* "" for iter 0 */
} iteration;

static int run_auto(const args *a)
{
    const char *outdir = a->output;
    char self[PATH_MAX], pprof_run[PATH_MAX + 16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "pprof-tune: cannot read /proc/self/exe: %s\n", strerror(errno));
        return PP_EXIT_RUNTIME;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    snprintf(pprof_run, sizeof pprof_run, "%s/pprof-run", self);
    if (access(pprof_run, X_OK) != 0) {
        fprintf(stderr, "pprof-tune: pprof-run not found next to pprof-tune (%s): %s\n",
                pprof_run, strerror(errno));
        return PP_EXIT_RUNTIME;
    }
    char outdir_buf[PATH_MAX];
    snprintf(outdir_buf, sizeof outdir_buf, "%s", a->output);
    size_t olen = strlen(outdir_buf);
    while (olen > 1 && outdir_buf[olen - 1] == '/')
        outdir_buf[--olen] = '\0'; /* "tune/" rotates to "tune.old", not "tune/.old" */
    outdir = outdir_buf;
    pp_status st = prepare_outdir(outdir);
    if (st != PP_OK)
        return pp_tool_fail(st);
    int gnuplot = have_gnuplot();
    if (!gnuplot)
        pp_tool_note(0, "gnuplot not found (install gnuplot-nox): no Gantt pictures");

    int max_it = (int)a->max_iters;
    iteration *its = calloc((size_t)max_it + 1, sizeof *its);
    if (!its)
        return pp_tool_fail(PP_ERR(PP_ERR_NOMEM, "out of memory"));
    int n_its = 0, best = 0, code = PP_EXIT_OK;
    pp_analysis *an = NULL;
    pp_extract e;
    memset(&e, 0, sizeof e);
    const char *stop_reason = "reached --max-iters";
    for (int it = 0; it <= max_it; it++) {
        char dir[PATH_MAX], log[PATH_MAX + 16], plan[PATH_MAX + 16] = "";
        if (!fmt_into(dir, sizeof dir, "%s/iter%d", outdir, it) ||
            !fmt_into(log, sizeof log, "%s/iter%d.log", outdir, it)) {
            st = PP_ERR(PP_ERR_INVALID, "output directory '%s': path too long", outdir);
            goto fail;
        }
        iteration *cur = &its[it];
        cur->iter = it;
        if (it > 0) {
            /* tune from the previous iteration's run */
            char prev[PATH_MAX];
            if (!fmt_into(plan, sizeof plan, "%s/plan%d.json", outdir, it) ||
                !fmt_into(prev, sizeof prev, "%s/iter%d", outdir, it - 1)) {
                st = PP_ERR(PP_ERR_INVALID, "output directory '%s': path too long", outdir);
                goto fail;
            }
            tune_result tr;
            if ((st = tune_run(a, prev, &e, 1, NULL, &tr)) != PP_OK)
                goto fail;
            int seen = -1;
            for (int k = 0; k < it; k++)
                if (same_layout(&tr.best.part, tr.best.kind, tr.best.M, &its[k].part,
                                its[k].kind, its[k].M))
                    seen = k;
            if (seen >= 0) {
                pp_tool_note(0, "iter %d: the best predicted layout is iteration %d's: converged", it,
                     seen);
                proposal_free(&tr.best);
                stop_reason = "converged (the proposal was already measured)";
                break;
            }
            st = write_plan(&tr.best.part, tr.best.kind, tr.best.M, e.microbatch_size,
                            a->memory_limit, tr.best.step_ns, tr.best.bubble, prev, plan);
            cur->predicted_ns = tr.best.step_ns;
            proposal_free(&tr.best);
            if (st != PP_OK)
                goto fail;
            fmt_into(cur->plan, sizeof cur->plan, "%s", plan);
            pp_extract_free(&e);
            pp_analysis_free(an);
            an = NULL;
        }
        pp_tool_note(0, "iter %d: running the job%s%s (log %s)", it, it ? " with PPROF_PLAN=" : "",
             it ? plan : "", log);
        int status = 0;
        if ((st = run_job(pprof_run, a->cmd, dir, it ? plan : NULL, log, &status)) != PP_OK)
            goto fail;
        if (status != 0) {
            fprintf(stderr, "pprof-tune: iter %d: the job failed (%s %d); the end of %s:\n", it,
                    status < 0 ? "signal" : "exit", status < 0 ? -status : status, log);
            print_log_tail(log, 15);
            code = PP_EXIT_RUNTIME;
            if (it == 0)
                goto done;
            /* the iterations measured so far still stand: report them and keep the best */
            static char why[PATH_MAX + 64];
            snprintf(why, sizeof why, "the job failed with %s (exit 3)", plan);
            stop_reason = why;
            break;
        }
        if ((st = load_run(dir, &an, &e)) != PP_OK)
            goto fail;
        if (it > 0) {
            pp_plan pl;
            if ((st = pp_plan_load(plan, &pl)) != PP_OK)
                goto fail;
            st = check_ran_plan(dir, &e, &pl, plan);
            pp_plan_free(&pl);
            if (st != PP_OK) {
                pp_error_wrap(st, "the job did not run the plan (does it read PPROF_PLAN, or "
                                  "take --plan?)");
                goto fail;
            }
        } else {
            pp_extract_predict(&e, e.schedule, &e.partition, e.M, &cur->predicted_ns, NULL);
        }
        cur->kind = e.schedule;
        cur->M = e.M;
        cur->v = e.partition.v;
        cur->measured_ns = e.measured_step_ns;
        pp_partition_format(&e.partition, cur->bounds, sizeof cur->bounds);
        if ((st = pp_partition_from_bounds(e.partition.bounds, e.partition.P + 1, e.partition.L,
                                           e.partition.S, e.partition.v, &cur->part)) != PP_OK)
            goto fail;
        n_its = it + 1;
        if (gnuplot) {
            char png[PATH_MAX + 16];
            snprintf(png, sizeof png, "%s/gantt.png", dir);
            if (pp_report_gantt(an, png, NULL) != PP_OK) {
                pp_tool_note(0, "iter %d: no Gantt picture: %s", it, pp_error_message());
                pp_error_clear();
            }
        }
        pp_tool_note(0, "iter %d: boundaries %s, %s, M = %d: measured %.3f ms, predicted %.3f ms", it,
             cur->bounds, pp_schedule_kind_name(cur->kind), cur->M, cur->measured_ns * 1e-6,
             cur->predicted_ns * 1e-6);
        if (it > 0) {
            double gain = its[best].measured_ns / cur->measured_ns - 1;
            int prev_best = best;
            if (cur->measured_ns < its[best].measured_ns)
                best = it;
            if (gain < 0.01) {
                static char why[128];
                snprintf(why, sizeof why, "measured gain %+.2f%% over iteration %d is below 1%%",
                         100.0 * gain, prev_best);
                stop_reason = why;
                break;
            }
        }
    }
    {
        FILE *o = stdout;
        fprintf(o, "pprof-tune --auto: %d run(s) in %s; stopped: %s\n\n", n_its, outdir,
                stop_reason);
        fprintf(o, "%-5s %-12s %4s %2s  %-22s %12s %12s %8s %9s\n", "iter", "schedule", "M", "v",
                "boundaries", "predicted ms", "measured ms", "error", "speedup");
        for (int i = 0; i < n_its; i++) {
            const iteration *r = &its[i];
            fprintf(o, "%-5d %-12s %4d %2d  %-22s %12.3f %12.3f %+7.2f%% %8.3fx%s\n", r->iter,
                    pp_schedule_kind_name(r->kind), r->M, r->v, r->bounds, r->predicted_ns * 1e-6,
                    r->measured_ns * 1e-6,
                    100.0 * (r->measured_ns - r->predicted_ns) / r->predicted_ns,
                    its[0].measured_ns / r->measured_ns, i == best ? "  <- best" : "");
        }
        char best_plan[PATH_MAX + 32];
        snprintf(best_plan, sizeof best_plan, "%s/best-plan.json", outdir);
        pp_plan pl;
        if (best > 0) {
            st = pp_plan_load(its[best].plan, &pl);
        } else {
            /* the original layout stays best: the plan says so */
            char base[PATH_MAX + 16];
            snprintf(base, sizeof base, "%s/iter0", outdir);
            st = make_plan(&its[0].part, its[0].kind, its[0].M, 0, a->memory_limit,
                           its[0].predicted_ns, -1, base, &pl);
        }
        if (st == PP_OK) {
            st = pp_plan_write(&pl, best_plan);
            pp_plan_free(&pl);
        }
        if (st != PP_OK)
            goto fail;
        warn_model_error(100.0 * (its[0].measured_ns - its[0].predicted_ns) /
                             its[0].predicted_ns,
                         its[0].part.S, o);
        fprintf(o, "\nbest: iteration %d, %.3f ms measured (%.3fx vs iter0): %s\n", best,
                its[best].measured_ns * 1e-6, its[0].measured_ns / its[best].measured_ns,
                best_plan);
        if (e.costs)
            print_framework_forms(e.costs, &its[best].part, o);
        if (gnuplot && n_its > 1)
            fprintf(o, "Gantt charts: %s/iter0/gantt.png .. %s/iter%d/gantt.png\n", outdir,
                    outdir, n_its - 1);
        else if (gnuplot)
            fprintf(o, "Gantt chart:  %s/iter0/gantt.png\n", outdir);
    }
    goto done;
fail:
    code = pp_tool_fail(st);
done:
    pp_extract_free(&e);
    pp_analysis_free(an);
    for (int i = 0; i <= max_it; i++)
        pp_partition_free(&its[i].part);
    free(its);
    return code;
}

int main(int argc, char **argv)
{
    pp_tool_init("pprof-tune");
    args a;
    int code = parse_args(argc, argv, &a);
    if (code >= 0)
        return code;
    pp_tool_quiet = a.quiet;
    pp_tool_verbose = a.verbose;
    if (a.auto_mode)
        return run_auto(&a);
    if (a.verify_plan)
        return run_verify(&a);
    if (a.advise)
        return run_advise(&a);
    return run_tune(&a);
}
