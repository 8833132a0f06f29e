/* pprof-run: runs a command with the capture library libpprof.so injected (NVTX_INJECTION64_PATH)
 * into every process of its tree, waits for the whole tree, then writes the run directory's
 * manifest and prints what was captured (docs/cli/pprof-run.md). The first step of the user's
 * loop: pprof-run -o run1 -- <training command>.
 * Exit codes: CMD's own status (128+N when a signal N killed it), 127 CMD cannot be run,
 * 2 usage or bad input, 3 runtime error. */
#define _GNU_SOURCE /* strsignal, /proc helpers: Linux-only tool by design */
#include "pp_analyzer.h"
#include "pp_common.h"
#include "pp_tool.h"
#include "pp_trace.h"
#include "pprof_run.h"

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Whether a CUDA driver with at least one device is there: libcuda.so.1 loaded (not linked:
 * pprof-run runs everywhere), cuInit and cuDeviceGetCount. why says what is missing. */
static int cuda_device_present(char *why, size_t n)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(why, n, "no CUDA driver (libcuda.so.1 not found)");
        return 0;
    }
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(lib, "cuInit");
    int (*count)(int *) = (int (*)(int *))dlsym(lib, "cuDeviceGetCount");
    int c = 0, rc = init && count ? init(0) : -1;
    if (rc == 0)
        rc = count(&c);
    dlclose(lib);
    if (rc != 0 || c < 1) {
        snprintf(why, n, rc != 0 ? "no CUDA device found (cuInit error %d)" : "no CUDA device found",
                 rc);
        return 0;
    }
    return 1;
}

static const char *k_usage =
    "usage: pprof-run [-o DIR] [options] [--] CMD [ARGS...]\n"
    "Runs CMD with the pipeprof capture library injected into every process it starts, then\n"
    "writes DIR/manifest.json and prints what was captured.\n"
    "\n"
    "  -o, --output DIR    run directory (default pprof.run); an earlier run there is kept as\n"
    "                      DIR.old; a directory that is not a run directory is refused\n"
    "      --steps N:M     capture only steps N..M (N: = from step N on); N >= 1, M >= N\n"
    "      --buffer-kb K   per-thread event buffer in KiB, 64..1048576 (library default 4096)\n"
    "      --flush-ms MS   how often buffers are written out, 1..10000 ms\n"
    "      --lib PATH      the capture library (default: $PPROF_LIB, else next to pprof-run)\n"
    "      --cuda          also capture GPU activity with CUPTI (CUDA_INJECTION64_PATH): kernels,\n"
    "                      copies, memsets and the launching calls, for GPU-time metrics\n"
    "      --nccl          also capture NCCL operations with pipeprof's NCCL profiler plugin\n"
    "                      (NCCL_PROFILER_PLUGIN): bytes, peers and GPU-side timing\n"
    "      --dialect FILE  a dialect file for the summary: how the job names its pipeline ranges (docs/dialects.md)\n"
    "  -q, --quiet         no summary; the library stays quiet too (PPROF_QUIET=1)\n"
    "  -v, --verbose       say what pprof-run does (library, directory, signals, processes)\n"
    "  -h, --help          this help\n"
    "      --version       the version and the git commit built from\n"
    "\n"
    "Options after CMD belong to CMD; use -- when CMD itself starts with '-'.\n"
    "Under mpirun/srun (a rank variable is set) each instance writes manifest.<rank>.json and\n"
    "no directory is rotated.\n"
    "\n"
    "exit codes: CMD's status (128+N if signal N killed it), 127 CMD cannot be run,\n"
    "            2 bad option or run directory, 3 runtime error\n";

enum { OPT_STEPS = 256, OPT_BUFFER_KB, OPT_FLUSH_MS, OPT_LIB, OPT_CUDA, OPT_NCCL, OPT_DIALECT };

static const struct option k_opts[] = {
    {"output", required_argument, 0, 'o'},
    {"steps", required_argument, 0, OPT_STEPS},
    {"buffer-kb", required_argument, 0, OPT_BUFFER_KB},
    {"flush-ms", required_argument, 0, OPT_FLUSH_MS},
    {"lib", required_argument, 0, OPT_LIB},
    {"cuda", no_argument, 0, OPT_CUDA},
    {"nccl", no_argument, 0, OPT_NCCL},
    {"dialect", required_argument, 0, OPT_DIALECT},
    PP_TOOL_OPTIONS_COMMON,
};



/* ---- options ------------------------------------------------------------------------------ */

/* --steps N:M or N: into "N:M" / "N:" (the form PPROF_STEPS takes); N >= 1, M >= N. */
static pp_status parse_steps(const char *s, char *out, size_t cap)
{
    int64_t lo, hi;
    pp_status st = pp_tool_parse_steps(s, "first and last step to capture", &lo, &hi);
    if (st != PP_OK)
        return st;
    if (hi)
        snprintf(out, cap, "%lld:%lld", (long long)lo, (long long)hi);
    else
        snprintf(out, cap, "%lld:", (long long)lo);
    return PP_OK;
}

/* One getopt_long result. Returns PP_TOOL_GO_ON to go on, else an exit code. */
static int parse_option(int c, char **argv, args *a, const char **dir)
{
    switch (c) {
    case 'o': *dir = optarg; break;
    case OPT_STEPS: return pp_tool_option_status(parse_steps(optarg, a->steps, sizeof a->steps));
    case OPT_BUFFER_KB:
        return pp_tool_option_i64(optarg, "--buffer-kb", 64, INT64_C(1) << 20, &a->buffer_kb);
    case OPT_FLUSH_MS: return pp_tool_option_i64(optarg, "--flush-ms", 1, 10000, &a->flush_ms);
    case OPT_LIB: a->lib = optarg; break;
    case OPT_CUDA: a->cuda = 1; break;
    case OPT_NCCL: a->nccl = 1; break;
    case OPT_DIALECT: return pp_tool_option_status(pp_analysis_dialect_default(optarg));
    default: return pp_tool_option_common(c, argv, k_usage, &a->quiet, &a->verbose);
    }
    return PP_TOOL_GO_ON;
}

/* Returns PP_TOOL_GO_ON to go on, else an exit code. */
static int parse_args(int argc, char **argv, args *a)
{
    memset(a, 0, sizeof *a);
    const char *dir = "pprof.run";
    opterr = 0;
    int c, rc;
    /* '+': stop at CMD, so CMD's own options stay CMD's. ':': report missing values. */
    while ((c = getopt_long(argc, argv, "+:o:qvh", k_opts, NULL)) != -1)
        if ((rc = parse_option(c, argv, a, &dir)) != PP_TOOL_GO_ON)
            return rc;
    if (optind >= argc)
        return pp_tool_usage_error("no command given (usage: pprof-run [-o DIR] [options] -- CMD ...)");
    if (!dir[0])
        return pp_tool_usage_error("-o: empty directory name");
    if (strlen(dir) + 8 >= sizeof a->dir)
        return pp_tool_usage_error("-o: directory name too long");
    pp_tool_path_trim(dir, a->dir, sizeof a->dir);
    a->cmd = argv + optind;
    a->ncmd = argc - optind;
    return PP_TOOL_GO_ON;
}

/* ---- launcher, library, command ------------------------------------------------------------ */

/* The rank of this pprof-run instance when a launcher (mpirun, srun, torchrun) started several
 * of them, else -1. SLURM_PROCID counts only inside an srun step: sbatch sets it for the batch
 * script too, where pprof-run is a single instance. */
static int detect_rank(const char **var)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                       "MV2_COMM_WORLD_RANK", "PALS_RANKID", "FLUX_TASK_RANK",
                                       "JSM_NAMESPACE_RANK", "SLURM_PROCID", "RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (!v || !*v)
            continue;
        if (strcmp(vars[i], "SLURM_PROCID") == 0 && !getenv("SLURM_STEP_ID") &&
            !getenv("SLURM_STEPID"))
            continue;
        int64_t r;
        if (pp_parse_i64(v, vars[i], 0, INT32_MAX, &r) != PP_OK) {
            pp_error_clear();
            continue;
        }
        *var = vars[i];
        return (int)r;
    }
    return -1;
}

static int is_regular_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Finds libpprof.so and makes its path absolute: --lib, $PPROF_LIB (both must exist when
 * given: silently taking another library would mislead), else the build tree and install
 * layouts relative to this executable. */
static pp_status find_library(const char *opt_lib, char *out)
{
    const char *given = opt_lib ? opt_lib : getenv("PPROF_LIB");
    const char *what = opt_lib ? "--lib" : "PPROF_LIB";
    if (given && *given) {
        if (!is_regular_file(given))
            return PP_ERR(PP_ERR_INVALID, "%s '%s': %s", what, given,
                          access(given, F_OK) == 0 ? "not a regular file" : strerror(errno));
        if (!realpath(given, out))
            return PP_ERR(PP_ERR_INVALID, "%s '%s': %s", what, given, strerror(errno));
        return PP_OK;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return PP_ERR(PP_ERR_INVALID, "cannot find libpprof.so: /proc/self/exe unreadable (%s); "
                                      "pass --lib PATH", strerror(errno));
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    static const char *const rel[] = {"../profiler/libpprof.so", "../lib/pipeprof/libpprof.so"};
    char tried[2][PATH_MAX + 32];
    for (int i = 0; i < 2; i++) {
        snprintf(tried[i], sizeof tried[i], "%s/%s", exe, rel[i]);
        if (is_regular_file(tried[i]) && realpath(tried[i], out))
            return PP_OK;
    }
    return PP_ERR(PP_ERR_INVALID, "cannot find libpprof.so (tried %s, %s); build the 'pprof' "
                                  "target, or pass --lib PATH or set PPROF_LIB",
                  tried[0], tried[1]);
}

/* What execvp would find for `cmd`: 0, or the errno it would most likely fail with. Checked
 * before the run directory is touched, so a typo does not rotate away the previous run. */
static int command_errno(const char *cmd)
{
    if (!*cmd)
        return ENOENT;
    struct stat sb;
    if (strchr(cmd, '/')) {
        if (stat(cmd, &sb) != 0)
            return errno;
        if (S_ISDIR(sb.st_mode))
            return EISDIR;
        return access(cmd, X_OK) == 0 ? 0 : errno;
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/bin:/usr/bin"; /* execvp's default */
    int err = ENOENT;
    size_t clen = strlen(cmd);
    for (const char *p = path;; ) {
        const char *end = strchr(p, ':');
        size_t dlen = end ? (size_t)(end - p) : strlen(p);
        char full[PATH_MAX];
        if (dlen + clen + 2 <= sizeof full) {
            if (dlen == 0)
                snprintf(full, sizeof full, "%s", cmd); /* empty entry: current directory */
            else
                snprintf(full, sizeof full, "%.*s/%s", (int)dlen, p, cmd);
            if (stat(full, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
                if (access(full, X_OK) == 0)
                    return 0;
                err = EACCES;
            }
        }
        if (!end)
            break;
        p = end + 1;
    }
    return err;
}

/* ---- run directory ------------------------------------------------------------------------ */

/* manifest.json, manifest.<anything>.json or *.pft: what only a run directory holds. */
static int is_run_file(const char *name)
{
    if (strcmp(name, "manifest.json") == 0 || prun_ends_with(name, ".pft"))
        return 1;
    return strncmp(name, "manifest.", 9) == 0 && strlen(name) > 14 &&
           prun_ends_with(name, ".json");
}

static const pp_tool_outdir k_run_dir = {
    .is_ours = is_run_file,
    .lacks = "no manifest or .pft file",
    .noun = "run",
    .old_is_not = "is not a run directory",
    .say_why = 1,
};

/* Makes `a->dir` ready for a new run and writes its absolute path to `abs`. */
static pp_status prepare_dir(const args *a, int launcher, char *abs)
{
    char why[PATH_MAX + 64];
    const char *dir = a->dir;
    pp_tool_dir_kind k = pp_tool_dir_classify(dir, &k_run_dir, why, sizeof why);
    if (k == PP_TOOL_DIR_OTHER || k == PP_TOOL_DIR_NOT_DIR)
        return PP_ERR(PP_ERR_INVALID, "'%s' is not a run directory: %s; choose another -o or "
                                      "remove it", dir, why);
    pp_status st;
    if (launcher) {
        /* Several instances share the directory: whoever comes first creates it, nobody
         * rotates (a rename here would race with the others' trace files). */
        if (k == PP_TOOL_DIR_MISSING &&
            (st = pp_tool_mkdir_p(dir, "run directory", PP_ERR_INVALID)) != PP_OK)
            return st;
        k = pp_tool_dir_classify(dir, &k_run_dir, why, sizeof why);
        if (k != PP_TOOL_DIR_EMPTY && k != PP_TOOL_DIR_OURS)
            return PP_ERR(PP_ERR_INVALID, "'%s' is not a run directory: %s", dir, why);
    } else if (k == PP_TOOL_DIR_OURS) {
        if ((st = pp_tool_dir_keep_old(dir, &k_run_dir)) != PP_OK)
            return st;
        if (mkdir(dir, 0777) != 0)
            return PP_ERR(PP_ERR_IO, "cannot create run directory '%s': %s", dir,
                          strerror(errno));
    } else if (k == PP_TOOL_DIR_MISSING) {
        if ((st = pp_tool_mkdir_p(dir, "run directory", PP_ERR_INVALID)) != PP_OK)
            return st;
    }
    /* empty outside a launcher: used as it is; there is no run in it to keep. */
    if (!realpath(dir, abs))
        return PP_ERR(PP_ERR_IO, "run directory '%s': %s", dir, strerror(errno));
    return PP_OK;
}

/* ---- summary ------------------------------------------------------------------------------ */

static void print_summary(const run_info *ri, const char *manifest)
{
    const child_result *r = ri->r;
    double secs = (double)(ri->end_mono_ns - ri->start_mono_ns) * 1e-9;
    if (r->signaled)
        printf("pprof-run: '%s' killed by signal %d (%s) after %.2f s\n", ri->a->cmd[0], r->code,
               strsignal(r->code), secs);
    else
        printf("pprof-run: '%s' exited with status %d after %.2f s\n", ri->a->cmd[0], r->code,
               secs);
    printf("pprof-run: run directory %s, %s\n", ri->dir, manifest);
    if (ri->n_traces == 0) {
        printf("pprof-run: no trace files: no process of the job made an NVTX call, or the "
               "library was not loaded (is the job built with NVTX v3?)\n");
        return;
    }
    printf("  %-28s %-16s %8s %5s %12s %10s  notes\n", "file", "host", "pid", "rank", "events",
           "dropped");
    uint64_t events = 0, dropped = 0;
    for (size_t i = 0; i < ri->n_traces; i++) {
        const trace_info *t = &ri->traces[i];
        char rank[16] = "-";
        if (t->rank >= 0)
            snprintf(rank, sizeof rank, "%d", t->rank);
        if (!t->loaded) {
            printf("  %-28s %-16s %8u %5s %12s %10s  %s\n", t->name, "?", t->pid, "?", "?", "?",
                   t->problem);
            continue;
        }
        char note[400];
        snprintf(note, sizeof note, "%s%s%s", t->has_footer ? "" : "no footer (process killed?)",
                 !t->has_footer && t->problem[0] ? "; " : "", t->problem);
        char drops[24] = "?"; /* unknown without a footer */
        if (t->has_footer)
            snprintf(drops, sizeof drops, "%llu", (unsigned long long)t->dropped);
        printf("  %-28s %-16s %8u %5s %12llu %10s%s%s\n", t->name, t->host, t->pid, rank,
               (unsigned long long)t->events, drops, note[0] ? "  " : "", note);
        events += t->events;
        dropped += t->dropped;
    }
    printf("  total: %zu file%s, %llu events, %llu dropped", ri->n_traces,
           ri->n_traces == 1 ? "" : "s", (unsigned long long)events,
           (unsigned long long)dropped);
    if (dropped)
        printf(" (%.2f%% of events)", 100.0 * (double)dropped / (double)(events + dropped));
    printf("\n");
    /* The pipeline summary (pprof-report's table). Under a launcher each rank's pprof-run sees
     * only part of the run: pprof-report DIR gives the whole picture once all ranks are done. */
    if (ri->rank >= 0) {
        printf("pprof-run: for the pipeline summary of all ranks: pprof-report %s\n", ri->dir);
        return;
    }
    prun_pipeline_summary(ri->dir);
}

/* ---- main --------------------------------------------------------------------------------- */

/* The contract with libpprof (docs/cli/pprof-run.md): set here, inherited by every process of
 * the tree. Unset options leave a variable the user exported as it is. 0 when setenv failed. */
static int set_capture_env(const args *a, const char *lib, const char *dir)
{
    char num[32];
    int envok = setenv("NVTX_INJECTION64_PATH", lib, 1) == 0 && setenv("PPROF_DIR", dir, 1) == 0;
    if (a->buffer_kb) {
        snprintf(num, sizeof num, "%lld", (long long)a->buffer_kb);
        envok = envok && setenv("PPROF_BUFFER_KB", num, 1) == 0;
    }
    if (a->flush_ms) {
        snprintf(num, sizeof num, "%lld", (long long)a->flush_ms);
        envok = envok && setenv("PPROF_FLUSH_MS", num, 1) == 0;
    }
    if (a->steps[0])
        envok = envok && setenv("PPROF_STEPS", a->steps, 1) == 0;
    if (a->quiet)
        envok = envok && setenv("PPROF_QUIET", "1", 1) == 0;
    if (a->cuda || a->nccl) {
        /* Both go through the same library: CUPTI's entry point InitializeInjection and NCCL's
         * profiler symbol ncclProfiler_v5 are exported by libpprof.so next to NVTX's. Without a
         * device the job still runs, with NVTX capture only. */
        char why[256];
        if (!cuda_device_present(why, sizeof why) && !a->quiet)
            fprintf(stderr, "pprof-run: %s%s: %s; the job runs with NVTX capture only\n",
                    a->cuda ? "--cuda" : "", a->cuda && a->nccl ? " --nccl" : a->nccl ? "--nccl" : "",
                    why);
        if (a->cuda)
            envok = envok && setenv("CUDA_INJECTION64_PATH", lib, 1) == 0;
        if (a->nccl)
            envok = envok && setenv("NCCL_PROFILER_PLUGIN", lib, 1) == 0;
    }
    return envok;
}

/* Lost events skew every metric: said even with -q. Files without a footer: their processes
 * died, their drop counts are unknown. */
static void warn_losses(const args *a, const trace_info *traces, size_t n_traces)
{
    uint64_t dropped = 0;
    size_t nf = 0, nodrop = 0;
    for (size_t i = 0; i < n_traces; i++) {
        dropped += traces[i].dropped;
        nf += traces[i].dropped > 0;
        nodrop += traces[i].loaded && !traces[i].has_footer;
    }
    if (dropped)
        fprintf(stderr, "pprof-run: warning: %llu events dropped in %zu file(s) (buffers "
                        "full): raise --buffer-kb or lower --flush-ms\n",
                (unsigned long long)dropped, nf);
    if (!nodrop || a->quiet)
        return;
    fprintf(stderr, "pprof-run: warning: %zu trace file(s) without a footer: those "
                    "processes did not exit normally (died:", nodrop);
    for (size_t i = 0; i < n_traces; i++) {
        if (!traces[i].loaded || traces[i].has_footer)
            continue;
        if (traces[i].rank >= 0)
            fprintf(stderr, " rank %d (pid %u)", traces[i].rank, traces[i].pid);
        else
            fprintf(stderr, " pid %u", traces[i].pid);
    }
    fprintf(stderr, "); their drop counts are unknown\n");
}

/* The manifest and the summary of a finished run; the exit status stays the job's. */
static void finish_run(const args *a, run_info *ri, const child_result *r)
{
    trace_info *traces = NULL;
    size_t n_traces = 0;
    char manifest[PATH_MAX + 32] = "";
    pp_status st = prun_collect_traces(ri->dir, ri->rank, r, &traces, &n_traces);
    ri->traces = traces;
    ri->n_traces = n_traces;
    if (st == PP_OK)
        st = prun_manifest_write(ri, manifest, sizeof manifest);
    if (st != PP_OK) {
        /* pprof-run never changes the job's outcome: its status stands, ours is said. */
        fprintf(stderr, "pprof-run: no manifest: %s; the exit status is the job's (%d), its "
                        "trace files are in %s\n",
                pp_error_message(), ri->exit_code, ri->dir);
    } else {
        pp_tool_note(1, "wrote %s", manifest);
        const char *slash = strrchr(manifest, '/');
        if (!a->quiet && !r->exec_errno)
            print_summary(ri, slash ? slash + 1 : manifest);
        warn_losses(a, traces, n_traces);
    }
    free(traces);
}

int main(int argc, char **argv)
{
    pp_tool_init("pprof-run");
    prun_signals_init();
    args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != PP_TOOL_GO_ON)
        return rc;
    pp_tool_verbose = a.verbose;
    pp_status st;
    char lib[PATH_MAX], dir[PATH_MAX];
    if ((st = find_library(a.lib, lib)) != PP_OK)
        return pp_tool_fail(st);
    int cerr = command_errno(a.cmd[0]);
    if (cerr) {
        fprintf(stderr, "pprof-run: cannot run '%s': %s\n", a.cmd[0], strerror(cerr));
        return EXIT_CANNOT_RUN;
    }
    const char *rank_var = NULL;
    int rank = detect_rank(&rank_var);
    if (rank >= 0)
        pp_tool_note(1, "launched as rank %d (%s): no rotation, writing manifest.%d.json", rank, rank_var,
             rank);
    if ((st = prepare_dir(&a, rank >= 0, dir)) != PP_OK)
        return pp_tool_fail(st);
    pp_tool_note(1, "library %s", lib);
    pp_tool_note(1, "run directory %s", dir);
    if (!set_capture_env(&a, lib, dir)) {
        fprintf(stderr, "pprof-run: cannot set the environment: %s\n", strerror(errno));
        return PP_EXIT_RUNTIME;
    }

    run_info ri = {.a = &a, .lib = lib, .dir = dir, .rank = rank, .rank_var = rank_var};
    if (gethostname(ri.host, sizeof ri.host - 1) != 0)
        snprintf(ri.host, sizeof ri.host, "unknown");
    child_result r = {0};
    clock_gettime(CLOCK_REALTIME, &ri.start);
    ri.start_mono_ns = pp_now_ns();
    st = prun_command(&a, &r);
    clock_gettime(CLOCK_REALTIME, &ri.end);
    ri.end_mono_ns = pp_now_ns();
    if (st != PP_OK) {
        free(r.reaped);
        return pp_tool_fail(st);
    }
    /* From here on the job's status is the answer: a forwarded signal arriving now (a batch
     * system's SIGTERM once the job is done) stays pending until pprof-run exits with it, or
     * goes to the summary's child (prun_pipeline_summary). */
    prun_signals_hold();
    if (r.exec_errno) {
        fprintf(stderr, "pprof-run: cannot run '%s': %s\n", a.cmd[0], strerror(r.exec_errno));
        ri.exit_code = EXIT_CANNOT_RUN;
    } else {
        ri.exit_code = r.signaled ? 128 + r.code : r.code;
    }
    ri.r = &r;
    finish_run(&a, &ri, &r);
    free(r.reaped);
    return ri.exit_code;
}
