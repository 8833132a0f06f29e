/* pprof-run: runs a command with the capture library libpprof.so injected (NVTX_INJECTION64_PATH)
 * into every process of its tree, waits for the whole tree, then writes the run directory's
 * manifest and prints what was captured (docs/cli/pprof-run.md). The first step of the user's
 * loop: pprof-run -o run1 -- <training command>.
 * Exit codes: CMD's own status (128+N when a signal N killed it), 127 CMD cannot be run,
 * 2 usage or bad input, 3 runtime error. */
#define _GNU_SOURCE /* prctl, WCOREDUMP, nftw, /proc helpers: Linux-only tool by design */
#include "pp_common.h"
#include "pp_tool.h"
#include "pp_analyzer.h"
#include "pp_trace.h"

#include <cJSON.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef PP_VERSION
#define PP_VERSION "0.1.0"
#endif

enum { MANIFEST_VERSION = 1, EXIT_CANNOT_RUN = 127 };

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
    "  -q, --quiet         no summary; the library stays quiet too (PPROF_QUIET=1)\n"
    "  -v, --verbose       say what pprof-run does (library, directory, signals, processes)\n"
    "  -h, --help          this help\n"
    "\n"
    "Options after CMD belong to CMD; use -- when CMD itself starts with '-'.\n"
    "Under mpirun/srun (a rank variable is set) each instance writes manifest.<rank>.json and\n"
    "no directory is rotated.\n"
    "\n"
    "exit codes: CMD's status (128+N if signal N killed it), 127 CMD cannot be run,\n"
    "            2 bad option or run directory, 3 runtime error\n";

enum { OPT_STEPS = 256, OPT_BUFFER_KB, OPT_FLUSH_MS, OPT_LIB, OPT_CUDA, OPT_NCCL };

static const struct option k_opts[] = {
    {"output", required_argument, 0, 'o'},
    {"steps", required_argument, 0, OPT_STEPS},
    {"buffer-kb", required_argument, 0, OPT_BUFFER_KB},
    {"flush-ms", required_argument, 0, OPT_FLUSH_MS},
    {"lib", required_argument, 0, OPT_LIB},
    {"cuda", no_argument, 0, OPT_CUDA},
    {"nccl", no_argument, 0, OPT_NCCL},
    {"quiet", no_argument, 0, 'q'},
    {"verbose", no_argument, 0, 'v'},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

typedef struct args {
    char dir[PATH_MAX];  /* as given, trailing slashes removed */
    const char *lib;     /* --lib, NULL = not given */
    char steps[48];      /* normalised "N:M" or "N:", "" = not given */
    int64_t buffer_kb;   /* 0 = not given */
    int64_t flush_ms;    /* 0 = not given */
    int quiet, verbose;
    int cuda, nccl;      /* --cuda, --nccl */
    char **cmd;          /* NULL-terminated, from argv */
    int ncmd;
} args;

/* Everything the manifest and the summary report about one trace file. */
typedef struct trace_info {
    char name[NAME_MAX + 1];
    uint64_t bytes;
    int loaded;              /* the header could be read */
    char problem[320];       /* why not, or the first damage found */
    uint32_t pid;
    int32_t rank;
    char host[65];
    int has_footer;
    uint64_t events;         /* footer count, else the events recovered */
    uint64_t dropped, filtered;
    int damaged;
    pp_trace_damage damage;
} trace_info;

/* What happened to CMD and its process tree. */
typedef struct child_result {
    pid_t pid;
    int exec_errno;          /* != 0: CMD could not be executed */
    int signaled;
    int code;                /* exit status, or the signal number when signaled */
    int core_dumped;
    pid_t *reaped;           /* every process pprof-run reaped (CMD and orphans adopted) */
    size_t n_reaped, cap_reaped;
} child_result;


/* ---- options ------------------------------------------------------------------------------ */

/* --steps N:M or N: into "N:M" / "N:"; N >= 1, M >= N. */
static pp_status parse_steps(const char *s, char *out, size_t cap)
{
    const char *colon = strchr(s, ':');
    if (!colon || colon == s)
        return PP_ERR(PP_ERR_INVALID, "--steps '%s': expected N:M or N: (first and last step "
                                      "to capture, e.g. 10:20)", s);
    char first[32];
    size_t n = (size_t)(colon - s);
    if (n >= sizeof first)
        return PP_ERR(PP_ERR_INVALID, "--steps '%s': first step is not an integer", s);
    memcpy(first, s, n);
    first[n] = '\0';
    int64_t a, b;
    const int64_t max = INT64_C(1) << 40;
    pp_status st = pp_parse_i64(first, "--steps first step N", 1, max, &a);
    if (st != PP_OK)
        return st;
    if (colon[1] == '\0') {
        snprintf(out, cap, "%lld:", (long long)a);
        return PP_OK;
    }
    if ((st = pp_parse_i64(colon + 1, "--steps last step M", 1, max, &b)) != PP_OK)
        return st;
    if (b < a)
        return PP_ERR(PP_ERR_INVALID, "--steps '%s': last step %lld is before first step %lld",
                      s, (long long)b, (long long)a);
    snprintf(out, cap, "%lld:%lld", (long long)a, (long long)b);
    return PP_OK;
}

/* Returns -1 to go on, else an exit code. */
static int parse_args(int argc, char **argv, args *a)
{
    memset(a, 0, sizeof *a);
    const char *dir = "pprof.run";
    opterr = 0;
    int c;
    pp_status st;
    /* '+': stop at CMD, so CMD's own options stay CMD's. ':': report missing values. */
    while ((c = getopt_long(argc, argv, "+:o:qvh", k_opts, NULL)) != -1) {
        switch (c) {
        case 'o': dir = optarg; break;
        case OPT_STEPS:
            if ((st = parse_steps(optarg, a->steps, sizeof a->steps)) != PP_OK)
                return pp_tool_usage_error("%s", pp_error_message());
            break;
        case OPT_BUFFER_KB:
            if ((st = pp_parse_i64(optarg, "--buffer-kb", 64, INT64_C(1) << 20, &a->buffer_kb)) !=
                PP_OK)
                return pp_tool_usage_error("%s", pp_error_message());
            break;
        case OPT_FLUSH_MS:
            if ((st = pp_parse_i64(optarg, "--flush-ms", 1, 10000, &a->flush_ms)) != PP_OK)
                return pp_tool_usage_error("%s", pp_error_message());
            break;
        case OPT_LIB: a->lib = optarg; break;
        case OPT_CUDA: a->cuda = 1; break;
        case OPT_NCCL: a->nccl = 1; break;
        case 'q': a->quiet = 1; break;
        case 'v': a->verbose = 1; break;
        case 'h': fputs(k_usage, stdout); return PP_EXIT_OK;
        case ':':
            return pp_tool_usage_error("option '%s' needs a value", argv[optind - 1]);
        default:
            if (optopt)
                return pp_tool_usage_error("unknown option '-%c'", optopt);
            return pp_tool_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return pp_tool_usage_error("no command given (usage: pprof-run [-o DIR] [options] -- CMD ...)");
    if (!dir[0])
        return pp_tool_usage_error("-o: empty directory name");
    if (strlen(dir) + 8 >= sizeof a->dir)
        return pp_tool_usage_error("-o: directory name too long");
    snprintf(a->dir, sizeof a->dir, "%s", dir);
    for (size_t n = strlen(a->dir); n > 1 && a->dir[n - 1] == '/'; n--)
        a->dir[n - 1] = '\0'; /* "run/" rotates to "run.old", not "run/.old" */
    a->cmd = argv + optind;
    a->ncmd = argc - optind;
    return -1;
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

typedef enum dir_kind { DIR_MISSING, DIR_EMPTY, DIR_RUN, DIR_OTHER, DIR_NOT_DIR } dir_kind;

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* manifest.json, manifest.<anything>.json or *.pft: what only a run directory holds. */
static int is_run_file(const char *name)
{
    if (strcmp(name, "manifest.json") == 0 || ends_with(name, ".pft"))
        return 1;
    return strncmp(name, "manifest.", 9) == 0 && strlen(name) > 14 && ends_with(name, ".json");
}

/* Classifies `path`; for DIR_OTHER and DIR_NOT_DIR `why` says what was found. */
static dir_kind classify_dir(const char *path, char *why, size_t cap)
{
    struct stat sb;
    why[0] = '\0';
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT)
            return DIR_MISSING;
        snprintf(why, cap, "%s", strerror(errno));
        return DIR_OTHER;
    }
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(why, cap, "it is not a directory");
        return DIR_NOT_DIR;
    }
    DIR *d = opendir(path);
    if (!d) {
        snprintf(why, cap, "cannot list it: %s", strerror(errno));
        return DIR_OTHER;
    }
    int entries = 0, run = 0;
    char other[NAME_MAX + 1] = "";
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        entries++;
        if (is_run_file(e->d_name))
            run = 1;
        else if (!other[0])
            snprintf(other, sizeof other, "%s", e->d_name);
    }
    closedir(d);
    if (run)
        return DIR_RUN;
    if (entries == 0)
        return DIR_EMPTY;
    snprintf(why, cap, "it holds '%s' and no manifest or .pft file", other);
    return DIR_OTHER;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* mkdir -p with mode 0777 (the umask decides). */
static pp_status make_dirs(const char *path)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char keep = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return PP_ERR(PP_ERR_INVALID, "cannot create run directory '%s': %s", buf,
                              strerror(errno));
            *p = keep;
            if (!keep)
                break;
        }
    }
    return PP_OK;
}

/* Makes `a->dir` ready for a new run and writes its absolute path to `abs`. */
static pp_status prepare_dir(const args *a, int launcher, char *abs)
{
    char why[PATH_MAX + 64];
    const char *dir = a->dir;
    dir_kind k = classify_dir(dir, why, sizeof why);
    if (k == DIR_OTHER || k == DIR_NOT_DIR)
        return PP_ERR(PP_ERR_INVALID, "'%s' is not a run directory: %s; choose another -o or "
                                      "remove it", dir, why);
    if (launcher) {
        /* Several instances share the directory: whoever comes first creates it, nobody
         * rotates (a rename here would race with the others' trace files). */
        pp_status st;
        if (k == DIR_MISSING && (st = make_dirs(dir)) != PP_OK)
            return st;
        k = classify_dir(dir, why, sizeof why);
        if (k != DIR_EMPTY && k != DIR_RUN)
            return PP_ERR(PP_ERR_INVALID, "'%s' is not a run directory: %s", dir, why);
    } else if (k == DIR_RUN) {
        char old[PATH_MAX + 8];
        snprintf(old, sizeof old, "%s.old", dir);
        dir_kind ko = classify_dir(old, why, sizeof why);
        if (ko == DIR_OTHER || ko == DIR_NOT_DIR)
            return PP_ERR(PP_ERR_INVALID, "cannot keep the previous run of '%s': '%s' exists and "
                                          "is not a run directory (%s); remove or rename it",
                          dir, old, why);
        if (ko != DIR_MISSING && nftw(old, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
            return PP_ERR(PP_ERR_IO, "cannot remove the older run '%s': %s", old,
                          strerror(errno));
        if (rename(dir, old) != 0)
            return PP_ERR(PP_ERR_IO, "cannot rename '%s' to '%s': %s", dir, old,
                          strerror(errno));
        pp_tool_note(1, "previous run kept as '%s'", old);
        if (mkdir(dir, 0777) != 0)
            return PP_ERR(PP_ERR_IO, "cannot create run directory '%s': %s", dir,
                          strerror(errno));
    } else if (k == DIR_MISSING) {
        pp_status st = make_dirs(dir);
        if (st != PP_OK)
            return st;
    }
    /* DIR_EMPTY outside a launcher: used as it is; there is no run in it to keep. */
    if (!realpath(dir, abs))
        return PP_ERR(PP_ERR_IO, "run directory '%s': %s", dir, strerror(errno));
    return PP_OK;
}

/* ---- running the command ------------------------------------------------------------------ */

static const int k_forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

/* SIGXFSZ as pprof-run found it (CMD gets it back). pprof-run ignores it: a file-size limit
 * (ulimit -f) then fails its manifest write with EFBIG, which it reports, instead of killing it
 * and replacing the job's status with 153. */
static void (*g_xfsz_old)(int) = SIG_DFL;

/* The signal mask before pprof-run blocked the forwarded signals for its post-run work (main):
 * the summary's child runs with it. */
static sigset_t g_mask_before_post;

static void note_reaped(child_result *r, pid_t pid)
{
    if (r->n_reaped == r->cap_reaped) {
        size_t cap = r->cap_reaped ? 2 * r->cap_reaped : 16;
        pid_t *p = realloc(r->reaped, cap * sizeof *p);
        if (!p)
            return; /* only used to attribute trace files under a launcher */
        r->reaped = p;
        r->cap_reaped = cap;
    }
    r->reaped[r->n_reaped++] = pid;
}

/* Sends `sig` to `target` unless it already got it: the terminal's Ctrl-C and Ctrl-\ reach the
 * whole foreground process group, CMD included, and a trainer that checkpoints on the first
 * SIGINT and aborts on the second must not see two. */
static void forward_signal(pid_t target, int sig, const siginfo_t *si)
{
    if ((sig == SIGINT || sig == SIGQUIT) && si->si_code == SI_KERNEL &&
        getpgid(target) == getpgrp())
        return;
    if (kill(target, sig) == 0)
        pp_tool_note(1, "forwarded signal %d (%s) to pid %d", sig, strsignal(sig), (int)target);
}

/* Our current children (CMD's orphans, adopted as subreaper), from /proc; 0 if unknown. */
static size_t list_children(pid_t *out, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = 0;
    int pid;
    while (n < cap && fscanf(f, "%d", &pid) == 1)
        out[n++] = pid;
    fclose(f);
    return n;
}

/* Forks and execs CMD, forwards signals, and reaps the whole process tree. Returns PP_OK once
 * no descendant is left (also when CMD could not be executed: r->exec_errno says so). */
static pp_status run_command(const args *a, child_result *r)
{
    sigset_t wait_set, old_mask;
    sigemptyset(&wait_set);
    for (size_t i = 0; i < sizeof k_forwarded / sizeof k_forwarded[0]; i++) {
        /* A signal ignored on entry (nohup) stays ignored, for us and for CMD. */
        struct sigaction sa;
        if (sigaction(k_forwarded[i], NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
            continue;
        sigaddset(&wait_set, k_forwarded[i]);
    }
    sigaddset(&wait_set, SIGCHLD);
    /* With SIGCHLD ignored (inherited from our parent) the kernel would reap CMD for us and its
     * exit status would be lost: take the default, and give CMD back what it had. */
    struct sigaction chld_dfl, chld_old;
    memset(&chld_dfl, 0, sizeof chld_dfl);
    chld_dfl.sa_handler = SIG_DFL;
    sigemptyset(&chld_dfl.sa_mask);
    sigaction(SIGCHLD, &chld_dfl, &chld_old);
    /* Blocked before the fork: a signal that arrives at any moment is queued, then taken by
     * sigtimedwait below; no work happens in a signal handler. */
    if (sigprocmask(SIG_BLOCK, &wait_set, &old_mask) != 0)
        return PP_ERR(PP_ERR_RUNTIME, "sigprocmask: %s", strerror(errno));
    /* Orphans of CMD's tree (a launcher's daemons, a backgrounded writer) become our children,
     * so we can wait for them: their trace files are complete only once they exit. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
        pp_tool_note(1, "PR_SET_CHILD_SUBREAPER failed (%s): orphaned processes are not waited for",
             strerror(errno));
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) != 0) {
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
        return PP_ERR(PP_ERR_RUNTIME, "pipe: %s", strerror(errno));
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(errpipe[0]);
        close(errpipe[1]);
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
        return PP_ERR(PP_ERR_RUNTIME, "fork: %s", strerror(e));
    }
    if (pid == 0) {
        close(errpipe[0]);
        sigaction(SIGCHLD, &chld_old, NULL);
        signal(SIGXFSZ, g_xfsz_old); /* the job's own, not pprof-run's (main) */
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
        execvp(a->cmd[0], a->cmd);
        int e = errno;
        ssize_t w = write(errpipe[1], &e, sizeof e);
        (void)w;
        _exit(EXIT_CANNOT_RUN);
    }
    r->pid = pid;
    close(errpipe[1]);
    /* The pipe closes on a successful exec (O_CLOEXEC) or carries execvp's errno. */
    int e = 0;
    ssize_t got;
    do
        got = read(errpipe[0], &e, sizeof e);
    while (got < 0 && errno == EINTR);
    close(errpipe[0]);
    if (got == (ssize_t)sizeof e)
        r->exec_errno = e;
    else
        pp_tool_note(1, "started '%s' as pid %d", a->cmd[0], (int)pid);

    int main_done = 0, noticed = 0;
    uint64_t main_done_ns = 0;
    for (;;) {
        int status;
        pid_t w;
        while ((w = waitpid(-1, &status, WNOHANG)) > 0) {
            note_reaped(r, w);
            if (w == pid) {
                main_done = 1;
                main_done_ns = pp_now_ns();
                r->signaled = WIFSIGNALED(status);
                r->code = r->signaled ? WTERMSIG(status) : WEXITSTATUS(status);
                r->core_dumped = r->signaled && WCOREDUMP(status);
                pp_tool_note(1, "'%s' (pid %d) %s %d", a->cmd[0], (int)pid,
                     r->signaled ? "killed by signal" : "exited with status", r->code);
            } else {
                pp_tool_note(1, "reaped descendant pid %d", (int)w);
            }
        }
        if (w < 0 && errno == ECHILD)
            break;
        if (w < 0 && errno != EINTR)
            return PP_ERR(PP_ERR_RUNTIME, "waitpid: %s", strerror(errno));
        if (main_done && !noticed && !a->quiet && pp_now_ns() - main_done_ns > 2000000000ull) {
            pid_t kids[8];
            size_t n = list_children(kids, 8);
            fprintf(stderr, "pprof-run: '%s' exited; waiting for the processes it left "
                            "running", a->cmd[0]);
            for (size_t i = 0; i < n; i++)
                fprintf(stderr, "%s%d", i ? " " : " (pid ", (int)kids[i]);
            fprintf(stderr, "%s so that their traces are complete\n", n ? ")" : "");
            noticed = 1;
        }
        siginfo_t si;
        struct timespec tick = {1, 0}; /* the notice above; SIGCHLD normally wakes us first */
        int sig = sigtimedwait(&wait_set, &si, &tick);
        if (sig <= 0 || sig == SIGCHLD)
            continue;
        if (!main_done) {
            forward_signal(pid, sig, &si);
        } else {
            pid_t kids[256];
            size_t n = list_children(kids, 256);
            for (size_t i = 0; i < n; i++)
                forward_signal(kids[i], sig, &si);
        }
    }
    prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    return PP_OK;
}

/* ---- trace files, manifest, summary ------------------------------------------------------- */

static int pft_filter(const struct dirent *e)
{
    return ends_with(e->d_name, ".pft");
}

/* <host>.<pid>.pft -> pid, 0 when the name has another form. */
static uint32_t pid_from_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    const char *p = dot;
    while (p && p > name && p[-1] >= '0' && p[-1] <= '9')
        p--;
    if (p && p < dot && p > name && p[-1] == '.')
        return (uint32_t)strtoul(p, NULL, 10);
    return 0;
}

/* Under a launcher: is this file of our rank? Decided from the 256-byte header alone, so an
 * instance does not read every other rank's whole trace. */
static int header_rank_is(const char *dir, const char *name, int rank)
{
    char path[PATH_MAX + NAME_MAX + 2];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    pp_trace_header h;
    int fd = -1;
    uint64_t bytes = 0;
    if (pp_file_open_regular(path, &fd, &bytes) != PP_OK) { /* a FIFO is not waited on */
        pp_error_clear();
        return 0;
    }
    ssize_t got = read(fd, &h, sizeof h);
    close(fd);
    pp_trace *t = NULL;
    if (got != (ssize_t)sizeof h || pp_trace_load_mem(&h, sizeof h, &t) != PP_OK) {
        pp_error_clear();
        return 0;
    }
    int same = t->header.rank == rank;
    pp_trace_free(t);
    return same;
}

/* What the manifest says about one trace, read block by block as the analyzer reads it (memory
 * bounded by the largest block, not the trace): header, footer, damage, and the events counted
 * the way pp_trace_load counts them when there is no footer. Unknown record kinds are counted as
 * the loader does. */
static pp_status scan_trace(const char *path, trace_info *ti)
{
    pp_trace_reader *r = NULL;
    pp_status st = pp_trace_reader_open(path, &r);
    if (st != PP_OK)
        return st;
    const pp_trace_header *h = pp_trace_reader_header(r);
    ti->loaded = 1;
    ti->pid = h->pid;
    ti->rank = h->rank;
    memcpy(ti->host, h->host, sizeof h->host);
    ti->host[sizeof ti->host - 1] = '\0';
    pp_rec_footer footer;
    memset(&footer, 0, sizeof footer);
    uint64_t events = 0, unknown = 0;
    int has_footer = 0;
    for (;;) {
        pp_trace_block b;
        bool got = false;
        if ((st = pp_trace_reader_next(r, &b, &got)) != PP_OK || !got)
            break;
        /* the reader has checked every record's size against the block */
        for (uint32_t off = 0; off + sizeof(pp_rec_header) <= b.h.payload_bytes;) {
            pp_rec_header rh;
            memcpy(&rh, b.payload + off, sizeof rh);
            if (rh.size < sizeof rh || off + rh.size > b.h.payload_bytes)
                break;
            switch (rh.type) {
            case PP_REC_PUSH: case PP_REC_POP: case PP_REC_START: case PP_REC_END:
            case PP_REC_MARK:
                events++;
                break;
            case PP_REC_FOOTER:
                if (rh.size >= sizeof footer) {
                    memcpy(&footer, b.payload + off, sizeof footer); /* the last one wins */
                    has_footer = 1;
                }
                break;
            case PP_REC_EXT_PAYLOAD: case PP_REC_STRING: case PP_REC_DOMAIN:
            case PP_REC_CATEGORY: case PP_REC_THREAD_NAME: case PP_REC_SCHEMA: case PP_REC_GPU:
            case PP_REC_API: case PP_REC_NCCL:
                break;
            default:
                unknown++;
                break;
            }
            off += rh.size;
        }
    }
    ti->damage = *pp_trace_reader_damage(r);
    ti->damage.has_footer = has_footer;
    ti->damage.records_unknown = unknown;
    ti->has_footer = has_footer;
    ti->events = has_footer ? footer.events : events;
    ti->dropped = has_footer ? footer.dropped : 0;
    ti->filtered = has_footer ? footer.filtered : 0;
    pp_trace_reader_close(r);
    return st;
}

static void load_trace_info(const char *dir, const char *name, trace_info *ti)
{
    memset(ti, 0, sizeof *ti);
    snprintf(ti->name, sizeof ti->name, "%s", name);
    ti->rank = -1;
    char path[PATH_MAX + NAME_MAX + 2];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat sb;
    if (stat(path, &sb) == 0)
        ti->bytes = (uint64_t)sb.st_size;
    if (scan_trace(path, ti) != PP_OK) {
        snprintf(ti->problem, sizeof ti->problem, "%s: %s", ti->loaded ? "read error" :
                 "unreadable", pp_error_message());
        pp_error_clear();
        if (!ti->loaded)
            ti->pid = pid_from_name(name); /* the name still tells whose file it is */
        return;
    }
    const pp_trace_damage *d = &ti->damage;
    ti->damaged = d->blocks_bad || d->bytes_skipped || d->truncated || d->records_unknown;
    if (ti->damaged) {
        snprintf(ti->problem, sizeof ti->problem,
                 "%llu bad block(s), %llu byte(s) skipped%s%s%s",
                 (unsigned long long)d->blocks_bad, (unsigned long long)d->bytes_skipped,
                 d->truncated ? ", truncated" : "", d->first_problem[0] ? ": " : "",
                 d->first_problem);
    }
}

static int reaped_has(const child_result *r, uint32_t pid)
{
    for (size_t i = 0; i < r->n_reaped; i++)
        if ((uint32_t)r->reaped[i] == pid)
            return 1;
    return 0;
}

/* The *.pft files of this run, sorted by name. Under a launcher the directory is shared: only
 * files of this instance's rank or of processes it reaped are its own. */
static pp_status collect_traces(const char *dir, int rank, const child_result *r,
                                trace_info **out, size_t *n_out)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, pft_filter, alphasort);
    *out = NULL;
    *n_out = 0;
    if (n < 0)
        return PP_ERR(PP_ERR_IO, "cannot list '%s': %s", dir, strerror(errno));
    trace_info *ti = n ? calloc((size_t)n, sizeof *ti) : NULL;
    if (n && !ti) {
        for (int i = 0; i < n; i++)
            free(names[i]);
        free(names);
        return PP_ERR(PP_ERR_NOMEM, "out of memory listing '%s'", dir);
    }
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        if (rank < 0 || reaped_has(r, pid_from_name(name)) || header_rank_is(dir, name, rank))
            load_trace_info(dir, name, &ti[k++]);
        free(names[i]);
    }
    free(names);
    *out = ti;
    *n_out = k;
    return PP_OK;
}

static void iso_utc(const struct timespec *ts, char *out, size_t cap)
{
    struct tm tm;
    time_t s = ts->tv_sec;
    gmtime_r(&s, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, cap, "%s.%03ldZ", base, ts->tv_nsec / 1000000);
}

static uint64_t ts_ns(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

/* Integers above 2^53 as exact JSON numbers (cJSON stores doubles). */
static void add_u64(cJSON *obj, const char *key, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    cJSON_AddItemToObject(obj, key, cJSON_CreateRaw(buf));
}

static void add_time(cJSON *obj, const char *key, const struct timespec *ts)
{
    char iso[48];
    iso_utc(ts, iso, sizeof iso);
    cJSON *t = cJSON_AddObjectToObject(obj, key);
    cJSON_AddStringToObject(t, "utc", iso);
    add_u64(t, "realtime_ns", ts_ns(ts));
}

/* The variables that describe how the job ran: the library contract and the launcher's ranks. */
static int env_recorded(const char *name, size_t len)
{
    static const char *const exact[] = {
        "CUDA_VISIBLE_DEVICES", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_RANK",
        "PALS_RANKID", "FLUX_TASK_RANK", "JSM_NAMESPACE_RANK", "SLURM_PROCID",
        "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_NODEID", "SLURM_JOB_ID", "SLURM_STEP_ID",
        "RANK", "LOCAL_RANK", "WORLD_SIZE"};
    if ((len > 5 && strncmp(name, "NVTX_", 5) == 0) || (len > 6 && strncmp(name, "PPROF_", 6) == 0))
        return 1;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strlen(exact[i]) == len && strncmp(name, exact[i], len) == 0)
            return 1;
    return 0;
}

typedef struct run_info {
    const args *a;
    const char *lib;
    const char *dir;       /* absolute */
    char host[256];
    int rank;              /* -1 = none */
    const char *rank_var;
    struct timespec start, end;
    uint64_t start_mono_ns, end_mono_ns;
    const child_result *r;
    int exit_code;         /* pprof-run's own */
    const trace_info *traces;
    size_t n_traces;
} run_info;

/* DIR/manifest.json, never over another instance's: outside a launcher pprof-run made DIR fresh,
 * so a manifest.json there was written meanwhile by another pprof-run sharing DIR (several
 * instances started by a launcher whose rank variable pprof-run does not know). The file is
 * written whole under a private name, then linked into place only if the name is free (link(2)
 * fails rather than replace); else it keeps the name manifest.<host>.<pid>.json. */
static pp_status write_new_manifest(const run_info *ri, const char *text, size_t len,
                                    char *path_out, size_t cap)
{
    char tmp[PATH_MAX + 96];
    snprintf(tmp, sizeof tmp, "%s/.manifest.%d.new", ri->dir, (int)getpid());
    pp_status st = pp_write_file_atomic(tmp, text, len);
    if (st != PP_OK)
        return st;
    snprintf(path_out, cap, "%s/manifest.json", ri->dir);
    if (link(tmp, path_out) == 0) {
        unlink(tmp);
        return PP_OK;
    }
    int e = errno;
    if (e == EEXIST) {
        snprintf(path_out, cap, "%s/manifest.%s.%d.json", ri->dir, ri->host, (int)getpid());
        if (rename(tmp, path_out) == 0) {
            fprintf(stderr, "pprof-run: %s/manifest.json was written by another pprof-run "
                            "meanwhile; this one is %s\n",
                    ri->dir, path_out);
            return PP_OK;
        }
        e = errno;
    }
    unlink(tmp);
    return PP_ERR(PP_ERR_IO, "cannot write '%s': %s", path_out, strerror(e));
}

static pp_status write_manifest(const run_info *ri, char *path_out, size_t cap)
{
    pp_status st = PP_OK;
    char *text = NULL;
    cJSON *m = cJSON_CreateObject();
    if (!m)
        return PP_ERR(PP_ERR_NOMEM, "out of memory building the manifest");
    cJSON_AddNumberToObject(m, "manifest_version", MANIFEST_VERSION);
    cJSON *ver = cJSON_AddObjectToObject(m, "version");
    cJSON_AddStringToObject(ver, "pipeprof", PP_VERSION);
    cJSON_AddNumberToObject(ver, "trace_format", PP_TRACE_VERSION);
    cJSON *cmd = cJSON_AddArrayToObject(m, "command");
    for (int i = 0; i < ri->a->ncmd; i++)
        cJSON_AddItemToArray(cmd, cJSON_CreateString(ri->a->cmd[i]));
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd))
        cJSON_AddStringToObject(m, "cwd", cwd);
    else
        cJSON_AddNullToObject(m, "cwd");
    cJSON_AddStringToObject(m, "host", ri->host);
    cJSON_AddNumberToObject(m, "pprof_run_pid", (double)getpid());
    if (ri->rank >= 0) {
        cJSON_AddNumberToObject(m, "rank", ri->rank);
        cJSON_AddStringToObject(m, "rank_variable", ri->rank_var);
    } else {
        cJSON_AddNullToObject(m, "rank");
        cJSON_AddNullToObject(m, "rank_variable");
    }
    cJSON_AddStringToObject(m, "run_dir", ri->dir);
    cJSON_AddStringToObject(m, "library", ri->lib);
    cJSON *env = cJSON_AddObjectToObject(m, "environment");
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || !env_recorded(*e, (size_t)(eq - *e)))
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
        cJSON_AddStringToObject(env, name, eq + 1);
    }
    add_time(m, "start", &ri->start);
    add_time(m, "end", &ri->end);
    cJSON_AddNumberToObject(m, "duration_s", (double)(ri->end_mono_ns - ri->start_mono_ns) * 1e-9);
    cJSON *ex = cJSON_AddObjectToObject(m, "exit");
    const child_result *r = ri->r;
    if (r->exec_errno) {
        cJSON_AddStringToObject(ex, "how", "not_started");
        cJSON_AddStringToObject(ex, "error", strerror(r->exec_errno));
        cJSON_AddNullToObject(ex, "status");
        cJSON_AddNullToObject(ex, "signal");
    } else if (r->signaled) {
        cJSON_AddStringToObject(ex, "how", "signaled");
        cJSON_AddNullToObject(ex, "status");
        cJSON_AddNumberToObject(ex, "signal", r->code);
        cJSON_AddStringToObject(ex, "signal_name", strsignal(r->code));
        cJSON_AddBoolToObject(ex, "core_dumped", r->core_dumped);
    } else {
        cJSON_AddStringToObject(ex, "how", "exited");
        cJSON_AddNumberToObject(ex, "status", r->code);
        cJSON_AddNullToObject(ex, "signal");
    }
    cJSON_AddNumberToObject(ex, "pprof_run_exit_code", ri->exit_code);
    cJSON *files = cJSON_AddArrayToObject(m, "files");
    uint64_t events = 0, dropped = 0;
    for (size_t i = 0; i < ri->n_traces; i++) {
        const trace_info *t = &ri->traces[i];
        cJSON *f = cJSON_CreateObject();
        cJSON_AddItemToArray(files, f);
        cJSON_AddStringToObject(f, "name", t->name);
        add_u64(f, "bytes", t->bytes);
        cJSON_AddBoolToObject(f, "readable", t->loaded);
        if (t->pid)
            cJSON_AddNumberToObject(f, "pid", t->pid);
        else
            cJSON_AddNullToObject(f, "pid");
        if (t->loaded) {
            if (t->rank >= 0)
                cJSON_AddNumberToObject(f, "rank", t->rank);
            else
                cJSON_AddNullToObject(f, "rank");
            cJSON_AddStringToObject(f, "host", t->host);
            cJSON_AddBoolToObject(f, "has_footer", t->has_footer);
            add_u64(f, "events", t->events);
            add_u64(f, "dropped", t->dropped);
            add_u64(f, "filtered", t->filtered);
            events += t->events;
            dropped += t->dropped;
        }
        if (t->problem[0])
            cJSON_AddStringToObject(f, "problem", t->problem);
        else
            cJSON_AddNullToObject(f, "problem");
    }
    /* Processes that died: a readable trace without a footer (its process never closed it). */
    cJSON *lost = cJSON_AddArrayToObject(m, "lost");
    for (size_t i = 0; i < ri->n_traces; i++) {
        const trace_info *t = &ri->traces[i];
        if (!t->loaded || t->has_footer)
            continue;
        cJSON *x = cJSON_CreateObject();
        cJSON_AddItemToArray(lost, x);
        cJSON_AddStringToObject(x, "name", t->name);
        cJSON_AddNumberToObject(x, "pid", t->pid);
        if (t->rank >= 0)
            cJSON_AddNumberToObject(x, "rank", t->rank);
        else
            cJSON_AddNullToObject(x, "rank");
    }
    cJSON *tot = cJSON_AddObjectToObject(m, "totals");
    cJSON_AddNumberToObject(tot, "files", (double)ri->n_traces);
    add_u64(tot, "events", events);
    add_u64(tot, "dropped", dropped);

    text = cJSON_Print(m);
    if (!text) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory writing the manifest");
        goto out;
    }
    size_t len = strlen(text);
    text[len] = '\n'; /* overwrites the NUL: the file ends with a newline */
    if (ri->rank >= 0) {
        snprintf(path_out, cap, "%s/manifest.%d.json", ri->dir, ri->rank);
        st = pp_write_file_atomic(path_out, text, len + 1);
    } else {
        st = write_new_manifest(ri, text, len + 1, path_out, cap);
    }
out:
    free(text);
    cJSON_Delete(m);
    return st;
}

/* The analyzer's pipeline summary, in a forked child: whatever the analysis of the traces does
 * (a crash on a hostile trace, running out of memory), pprof-run itself carries on and exits
 * with the job's status; what went wrong is said on stderr. Signals pprof-run forwards (blocked
 * since the job ended, main) are passed on to the child while it runs, so that they cannot
 * replace the job's status either. PPROF_TEST_SUMMARY_CRASH=1 (a test hook, docs/cli/pprof-run.md)
 * makes the child crash before it analyzes. */
static void pipeline_summary(const char *dir)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof k_forwarded / sizeof k_forwarded[0]; i++)
        sigaddset(&set, k_forwarded[i]);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL); /* SIGCHLD too, for sigtimedwait below */
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "pprof-run: no pipeline summary: fork: %s (pprof-report %s gives it)\n",
                strerror(errno), dir);
        return;
    }
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &g_mask_before_post, NULL);
        const char *hook = getenv("PPROF_TEST_SUMMARY_CRASH");
        if (hook && strcmp(hook, "1") == 0)
            raise(SIGSEGV);
        pp_analysis *an = NULL;
        pp_analysis_options o;
        pp_analysis_options_default(&o);
        if (pp_analyze_dir(dir, &o, &an) == PP_OK) {
            printf("\n");
            pp_analysis_print(an, stdout);
            pp_analysis_free(an);
        } else {
            printf("pprof-run: no pipeline summary: %s\n", pp_error_message());
        }
        _exit(fflush(stdout) == 0 ? 0 : PP_EXIT_RUNTIME);
    }
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            fprintf(stderr, "pprof-run: lost the pipeline summary's process: %s\n",
                    strerror(errno));
            return;
        }
        siginfo_t si;
        struct timespec tick = {1, 0};
        int sig = sigtimedwait(&set, &si, &tick);
        if (sig > 0 && sig != SIGCHLD)
            kill(pid, sig);
    }
    if (WIFSIGNALED(status))
        fprintf(stderr, "pprof-run: the pipeline summary died (signal %d, %s); the job's status "
                        "and the run directory are kept: pprof-report %s analyzes it\n",
                WTERMSIG(status), strsignal(WTERMSIG(status)), dir);
    else if (WEXITSTATUS(status) != 0)
        fprintf(stderr, "pprof-run: the pipeline summary failed (status %d); the job's status "
                        "and the run directory are kept: pprof-report %s analyzes it\n",
                WEXITSTATUS(status), dir);
}

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
    pipeline_summary(ri->dir);
}

/* ---- main --------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    pp_tool_init("pprof-run");
    g_xfsz_old = signal(SIGXFSZ, SIG_IGN);
    if (g_xfsz_old == SIG_ERR)
        g_xfsz_old = SIG_DFL;
    args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
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

    /* The contract with libpprof (docs/cli/pprof-run.md): set here, inherited by every
     * process of the tree. Unset options leave a variable the user exported as it is. */
    char num[32];
    int envok = setenv("NVTX_INJECTION64_PATH", lib, 1) == 0 && setenv("PPROF_DIR", dir, 1) == 0;
    if (a.buffer_kb) {
        snprintf(num, sizeof num, "%lld", (long long)a.buffer_kb);
        envok = envok && setenv("PPROF_BUFFER_KB", num, 1) == 0;
    }
    if (a.flush_ms) {
        snprintf(num, sizeof num, "%lld", (long long)a.flush_ms);
        envok = envok && setenv("PPROF_FLUSH_MS", num, 1) == 0;
    }
    if (a.steps[0])
        envok = envok && setenv("PPROF_STEPS", a.steps, 1) == 0;
    if (a.quiet)
        envok = envok && setenv("PPROF_QUIET", "1", 1) == 0;
    if (a.cuda || a.nccl) {
        /* Both go through the same library: CUPTI's entry point InitializeInjection and NCCL's
         * profiler symbol ncclProfiler_v5 are exported by libpprof.so next to NVTX's. Without a
         * device the job still runs, with NVTX capture only. */
        char why[256];
        if (!cuda_device_present(why, sizeof why) && !a.quiet)
            fprintf(stderr, "pprof-run: %s%s: %s; the job runs with NVTX capture only\n",
                    a.cuda ? "--cuda" : "", a.cuda && a.nccl ? " --nccl" : a.nccl ? "--nccl" : "",
                    why);
        if (a.cuda)
            envok = envok && setenv("CUDA_INJECTION64_PATH", lib, 1) == 0;
        if (a.nccl)
            envok = envok && setenv("NCCL_PROFILER_PLUGIN", lib, 1) == 0;
    }
    if (!envok) {
        fprintf(stderr, "pprof-run: cannot set the environment: %s\n", strerror(errno));
        return PP_EXIT_RUNTIME;
    }

    run_info ri = {.a = &a, .lib = lib, .dir = dir, .rank = rank, .rank_var = rank_var};
    if (gethostname(ri.host, sizeof ri.host - 1) != 0)
        snprintf(ri.host, sizeof ri.host, "unknown");
    child_result r = {0};
    clock_gettime(CLOCK_REALTIME, &ri.start);
    ri.start_mono_ns = pp_now_ns();
    st = run_command(&a, &r);
    clock_gettime(CLOCK_REALTIME, &ri.end);
    ri.end_mono_ns = pp_now_ns();
    if (st != PP_OK) {
        free(r.reaped);
        return pp_tool_fail(st);
    }
    /* From here on the job's status is the answer: a forwarded signal arriving now (a batch
     * system's SIGTERM once the job is done) stays pending until pprof-run exits with it, or
     * goes to the summary's child (pipeline_summary). */
    sigset_t post;
    sigemptyset(&post);
    for (size_t i = 0; i < sizeof k_forwarded / sizeof k_forwarded[0]; i++)
        sigaddset(&post, k_forwarded[i]);
    sigprocmask(SIG_BLOCK, &post, &g_mask_before_post);
    if (r.exec_errno) {
        fprintf(stderr, "pprof-run: cannot run '%s': %s\n", a.cmd[0], strerror(r.exec_errno));
        ri.exit_code = EXIT_CANNOT_RUN;
    } else {
        ri.exit_code = r.signaled ? 128 + r.code : r.code;
    }
    ri.r = &r;

    trace_info *traces = NULL;
    size_t n_traces = 0;
    char manifest[PATH_MAX + 32] = "";
    st = collect_traces(dir, rank, &r, &traces, &n_traces);
    ri.traces = traces;
    ri.n_traces = n_traces;
    if (st == PP_OK)
        st = write_manifest(&ri, manifest, sizeof manifest);
    if (st != PP_OK) {
        /* pprof-run never changes the job's outcome: its status stands, ours is said. */
        fprintf(stderr, "pprof-run: no manifest: %s; the exit status is the job's (%d), its "
                        "trace files are in %s\n",
                pp_error_message(), ri.exit_code, dir);
    } else {
        pp_tool_note(1, "wrote %s", manifest);
        const char *slash = strrchr(manifest, '/');
        if (!a.quiet && !r.exec_errno)
            print_summary(&ri, slash ? slash + 1 : manifest);
        uint64_t dropped = 0;
        size_t nf = 0, nodrop = 0;
        for (size_t i = 0; i < n_traces; i++) {
            dropped += traces[i].dropped;
            nf += traces[i].dropped > 0;
            nodrop += traces[i].loaded && !traces[i].has_footer;
        }
        /* Lost events skew every metric: say so even with -q. */
        if (dropped)
            fprintf(stderr, "pprof-run: warning: %llu events dropped in %zu file(s) (buffers "
                            "full): raise --buffer-kb or lower --flush-ms\n",
                    (unsigned long long)dropped, nf);
        if (nodrop && !a.quiet) {
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
    }
    free(traces);
    free(r.reaped);
    return ri.exit_code;
}
