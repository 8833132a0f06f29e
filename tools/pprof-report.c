/* pprof-report: analyzes a run directory written by pprof-run (or PyTorch profiler traces,
 * converted on the way: docs/kineto.md) and prints the pipeline summary
 * (text table, or the summary JSON with --json), and draws the kept timeline as a Gantt picture
 * (--gantt) and a Chrome trace (--chrome). docs/cli/pprof-report.md. The second step of the
 * user's loop: pprof-report run1 --gantt run1.png.
 * Exit codes: 0 ok, 2 bad option or a run directory that cannot be analyzed, 3 runtime error
 * (gnuplot missing or failing, out of memory). */
#include "pp_analyzer.h"
#include "pp_common.h"
#include "pp_tool.h"
#include "pp_json.h"
#include "pp_report.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* The kept timeline covers at most this many steps (memory: every op of a kept step is held). */
enum { MAX_KEPT_STEPS = 64, MAX_RANKS = 4096 };

static const char *k_usage =
    "usage: pprof-report [options] DIR | TRACE...\n"
    "Analyzes the run directory DIR (written by pprof-run) and prints the pipeline summary:\n"
    "per-stage forward/backward times, busy and idle time, the bubble and its causes, links.\n"
    "DIR may also hold PyTorch profiler traces (*.json, *.json.gz, *.pt.trace.json), or the\n"
    "traces (one per rank) or .pft files are given themselves (docs/kineto.md).\n"
    "\n"
    "  -o, --output FILE   write the summary (table or JSON) to FILE instead of stdout\n"
    "      --json          the summary as JSON (docs/summary-json.md) instead of the table\n"
    "      --gantt FILE    draw the kept timeline to FILE (.png or .svg) with gnuplot; the data\n"
    "                      and script are left next to it as FILE's name with .dat and .gp\n"
    "      --gantt-data F  write the Gantt's data to F instead (the script becomes F with .gp)\n"
    "      --chrome FILE   the kept timeline as a Chrome trace (Perfetto, chrome://tracing)\n"
    "      --html FILE     the whole report as one self-contained HTML page (Gantt inline)\n"
    "      --steps N:M     analyze steps N..M only (N: = from N on); the pictures then show\n"
    "                      these steps (the Gantt at most 8, the Chrome trace at most 64);\n"
    "                      without it they show the last analyzed step\n"
    "      --warmup N      skip the first N steps (default 1; 0 when --steps is given)\n"
    "      --ranks LIST    only the trace files of these ranks (comma-separated, e.g. 0,2,3)\n"
    "      --replica R     with data-parallel replicas (pptrain --dp; PyTorch traces whose\n"
    "                      process groups name the pipeline's): analyze replica R's\n"
    "                      pipeline (default 0)\n"
    "      --dialect FILE  a dialect file naming the job's pipeline ranges (docs/dialects.md)\n"
    "      --import OUTDIR write the PyTorch traces, converted to .pft, into OUTDIR (a run\n"
    "                      directory every tool reads) and analyze them from there\n"
    "  -q, --quiet         no table and no notes (JSON and pictures are still written)\n"
    "  -v, --verbose       say what is read and written\n"
    "  -h, --help          this help\n"
    "      --version       the version and the git commit built from\n"
    "\n"
    "exit codes: 0 ok, 2 bad option or a directory that cannot be analyzed,\n"
    "            3 runtime error (e.g. gnuplot not found)\n";

enum { OPT_JSON = 256, OPT_GANTT, OPT_GANTT_DATA, OPT_CHROME, OPT_HTML, OPT_STEPS, OPT_WARMUP, OPT_RANKS,
       OPT_REPLICA, OPT_DIALECT, OPT_IMPORT };

/* The most inputs on the command line (a trace per rank). */
enum { MAX_INPUTS = 4096 };

static const struct option k_opts[] = {
    {"output", required_argument, 0, 'o'},
    {"json", no_argument, 0, OPT_JSON},
    {"gantt", required_argument, 0, OPT_GANTT},
    {"gantt-data", required_argument, 0, OPT_GANTT_DATA},
    {"chrome", required_argument, 0, OPT_CHROME},
    {"html", required_argument, 0, OPT_HTML},
    {"steps", required_argument, 0, OPT_STEPS},
    {"warmup", required_argument, 0, OPT_WARMUP},
    {"ranks", required_argument, 0, OPT_RANKS},
    {"replica", required_argument, 0, OPT_REPLICA},
    {"dialect", required_argument, 0, OPT_DIALECT},
    {"import", required_argument, 0, OPT_IMPORT},
    PP_TOOL_OPTIONS_COMMON,
};

typedef struct args {
    const char *dir;          /* the first input, for messages */
    const char *inputs[MAX_INPUTS];
    int n_inputs;
    const char *import;       /* --import OUTDIR */
    const char *output;     /* -o, NULL = stdout */
    const char *gantt, *gantt_data, *chrome, *html;
    int json, quiet, verbose;
    int64_t step_lo, step_hi; /* 0 = not given / open */
    int64_t warmup;           /* -1 = not given */
    int64_t replica;          /* data-parallel replica to analyze */
    const char *ranks_arg;    /* --ranks as given, for messages */
    int n_ranks;
    int ranks[MAX_RANKS];
} args;


/* --ranks 0,2,5: distinct ranks >= 0. */
static pp_status parse_ranks(const char *s, args *a)
{
    if (!s[0] || strlen(s) >= 8192)
        return PP_ERR(PP_ERR_INVALID, "--ranks '%s': expected a comma-separated list of ranks "
                                      "(e.g. 0,2,3)", s);
    pp_tool_int_list l = {.what = "--ranks rank", .opt = "--ranks", .plural = "ranks", .lo = 0,
                          .hi = INT32_MAX, .items = a->ranks, .max = MAX_RANKS};
    pp_status st = pp_tool_list_each(s, pp_tool_int_item, &l);
    a->n_ranks = l.n;
    if (st != PP_OK)
        return st;
    if (!a->n_ranks || !pp_tool_list_well_formed(s, 8192))
        return PP_ERR(PP_ERR_INVALID, "--ranks '%s': empty entry in the list", s);
    return PP_OK;
}

/* One getopt_long result. Returns PP_TOOL_GO_ON to go on, else an exit code. */
static int parse_option(int c, char **argv, args *a)
{
    switch (c) {
    case 'o': a->output = optarg; break;
    case OPT_JSON: a->json = 1; break;
    case OPT_GANTT: a->gantt = optarg; break;
    case OPT_GANTT_DATA: a->gantt_data = optarg; break;
    case OPT_CHROME: a->chrome = optarg; break;
    case OPT_HTML: a->html = optarg; break;
    case OPT_STEPS:
        return pp_tool_option_status(
            pp_tool_parse_steps(optarg, "first and last step", &a->step_lo, &a->step_hi));
    case OPT_WARMUP: return pp_tool_option_i64(optarg, "--warmup", 0, INT32_MAX, &a->warmup);
    case OPT_RANKS:
        a->ranks_arg = optarg;
        return pp_tool_option_status(parse_ranks(optarg, a));
    case OPT_REPLICA: return pp_tool_option_i64(optarg, "--replica", 0, 1 << 20, &a->replica);
    case OPT_DIALECT: return pp_tool_option_status(pp_analysis_dialect_default(optarg));
    case OPT_IMPORT:
        if (!optarg[0])
            return pp_tool_usage_error("--import: empty directory name");
        a->import = optarg;
        break;
    default: return pp_tool_option_common(c, argv, k_usage, &a->quiet, &a->verbose);
    }
    return PP_TOOL_GO_ON;
}

/* Returns PP_TOOL_GO_ON to go on, else an exit code. */
static int parse_args(int argc, char **argv, args *a)
{
    memset(a, 0, sizeof *a);
    a->warmup = -1;
    opterr = 0;
    int c, rc;
    while ((c = getopt_long(argc, argv, ":o:qvh", k_opts, NULL)) != -1)
        if ((rc = parse_option(c, argv, a)) != PP_TOOL_GO_ON)
            return rc;
    if (optind >= argc)
        return pp_tool_usage_error("no run directory given (usage: pprof-report [options] DIR)");
    if (argc - optind > MAX_INPUTS)
        return pp_tool_usage_error("more than %d inputs", MAX_INPUTS);
    for (int i = optind; i < argc; i++) {
        if (!argv[i][0])
            return pp_tool_usage_error("empty run directory name");
        a->inputs[a->n_inputs++] = argv[i];
    }
    a->dir = a->inputs[0];
    /* several inputs are trace files (one per rank), not several run directories */
    for (int i = 0; a->n_inputs > 1 && i < a->n_inputs; i++) {
        struct stat sb;
        if (stat(a->inputs[i], &sb) != 0 || !S_ISREG(sb.st_mode))
            return pp_tool_usage_error("one run directory expected, got '%s' and '%s' (several "
                                       "inputs are trace files, one per rank)",
                                       a->inputs[0], a->inputs[1]);
    }
    if (a->gantt_data && !a->gantt)
        return pp_tool_usage_error("--gantt-data needs --gantt");
    static const char *const outs[] = {"-o", "--gantt", "--gantt-data", "--chrome", "--html"};
    const char *paths[] = {a->output, a->gantt, a->gantt_data, a->chrome, a->html};
    for (int i = 0; i < 5; i++) {
        if (paths[i] && !paths[i][0])
            return pp_tool_usage_error("%s: empty file name", outs[i]);
        for (int j = 0; j < i; j++)
            if (paths[i] && paths[j] && strcmp(paths[i], paths[j]) == 0)
                return pp_tool_usage_error("%s and %s name the same file '%s'", outs[j], outs[i],
                                   paths[i]);
    }
    if (a->gantt) {
        const char *dot = strrchr(a->gantt, '.');
        const char *slash = strrchr(a->gantt, '/');
        if (!dot || (slash && dot < slash) ||
            (strcasecmp(dot, ".png") != 0 && strcasecmp(dot, ".svg") != 0))
            return pp_tool_usage_error("--gantt '%s': the picture's extension must be .png or .svg",
                               a->gantt);
    }
    return PP_TOOL_GO_ON;
}

/* Writes the summary (text or JSON) through `fn` to stdout or, with -o, atomically to a file. */
static pp_status write_summary(const args *a, const pp_analysis *an)
{
    if (!a->output) {
        if (a->json)
            return pp_report_json(an, stdout);
        pp_analysis_print(an, stdout);
        if (fflush(stdout) != 0)
            return PP_ERR(PP_ERR_IO, "writing the summary: %s", strerror(errno));
        return PP_OK;
    }
    /* streamed to a temporary file renamed over the output: a summary of every step is not
     * held in memory (it grows with the trace) */
    pp_atomic_stream *as = NULL;
    pp_status st = pp_atomic_stream_open(a->output, &as);
    if (st != PP_OK)
        return st;
    FILE *m = pp_atomic_stream_file(as);
    if (a->json)
        st = pp_report_json(an, m);
    else
        pp_analysis_print(an, m);
    if (st == PP_OK)
        st = pp_atomic_stream_commit(as);
    else
        pp_atomic_stream_abort(as);
    if (st == PP_OK)
        pp_tool_note(1, "summary written to %s", a->output);
    return st;
}

/* The Chrome trace, streamed to a temporary file renamed over `path` once complete: with ranges
 * outside the pipeline it holds every one of them (report_chrome.c), so it is not built in
 * memory. */
static pp_status write_chrome(const char *path, const pp_analysis *an)
{
    pp_atomic_stream *as = NULL;
    pp_status st = pp_atomic_stream_open(path, &as);
    if (st != PP_OK)
        return pp_error_wrap(st, "the Chrome trace");
    if ((st = pp_report_chrome(an, pp_atomic_stream_file(as))) != PP_OK) {
        pp_atomic_stream_abort(as);
        return st;
    }
    st = pp_atomic_stream_commit(as);
    return st == PP_OK ? st : pp_error_wrap(st, "the Chrome trace");
}

/* The job's command line from the run directory's manifest.json (docs/cli/pprof-run.md), joined
 * with spaces into buf; "" when there is none or it cannot be read (the page then omits it). */
static void manifest_command(const char *dir, char *buf, size_t cap)
{
    buf[0] = '\0';
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return;
    char path[4096], *text = NULL;
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (stat(path, &sb) != 0 || pp_json_file_read(path, "the manifest", &text) != PP_OK)
        return;
    cJSON *root = NULL;
    if (pp_json_parse(text, "the manifest", &root) == PP_OK) {
        const cJSON *cmd = pp_json_member(root, "command");
        size_t n = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, cmd) {
            if (!cJSON_IsString(it))
                continue;
            int w = snprintf(buf + n, cap - n, "%s%s", n ? " " : "", it->valuestring);
            if (w < 0 || (size_t)w >= cap - n) {
                buf[n] = '\0';
                break;
            }
            n += (size_t)w;
        }
        cJSON_Delete(root);
    }
    free(text);
}

/* The HTML page, written to a temporary file renamed over `path` once complete. */
static pp_status write_html(const args *a, const pp_analysis *an)
{
    char command[4096];
    manifest_command(a->dir, command, sizeof command);
    pp_atomic_stream *as = NULL;
    pp_status st = pp_atomic_stream_open(a->html, &as);
    if (st != PP_OK)
        return pp_error_wrap(st, "the HTML report");
    const char *slash = strrchr(a->dir, '/');
    pp_report_html_opts ho = {.title = slash && slash[1] ? slash + 1 : a->dir,
                              .command = command};
    if ((st = pp_report_html(an, &ho, pp_atomic_stream_file(as))) != PP_OK)
        pp_atomic_stream_abort(as);
    else if ((st = pp_atomic_stream_commit(as)) != PP_OK)
        st = pp_error_wrap(st, "the HTML report");
    if (st != PP_OK)
        return st;
    pp_tool_note(0, "HTML report written to %s", a->html);
    return st;
}

/* The analysis' warnings on stderr, when the output itself does not show them (--json, -o). */
static void echo_warnings(const pp_analysis *an)
{
    const char *p = an->warnings;
    while (*p) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        if (len)
            pp_tool_note(0, "warning: %.*s", len, p);
        p += len + (nl ? 1 : 0);
    }
}

/* The analysis of the steps and ranks asked for; the kept timeline is what the pictures show. */
static void analysis_options(const args *a, pp_analysis_options *o)
{
    pp_analysis_options_default(o);
    o->step_lo = a->step_lo;
    o->step_hi = a->step_hi;
    /* Steps asked for by number are analyzed as asked: no warm-up unless --warmup says so. */
    o->warmup = a->warmup >= 0 ? (int)a->warmup : a->step_lo ? 0 : 1;
    if (a->step_lo) {
        o->keep_lo = a->step_lo;
        o->keep_hi = a->step_lo + MAX_KEPT_STEPS - 1;
        if (a->step_hi && a->step_hi < o->keep_hi)
            o->keep_hi = a->step_hi;
    }
    o->rank_filter_n = a->n_ranks;
    o->rank_filter = a->n_ranks ? a->ranks : NULL;
    o->replica = (int)a->replica;
}

/* --gantt, and which steps it shows. */
static pp_status write_gantt(const args *a, const pp_analysis *an)
{
    pp_status st = pp_report_gantt(an, a->gantt, a->gantt_data);
    if (st != PP_OK)
        return st;
    if (!an->n_ops && an->n_ranges) { /* no pipeline: the generic view's threads */
        pp_tool_note(0, "Gantt of the threads' top-level ranges written to %s", a->gantt);
        return PP_OK;
    }
    int64_t hi = an->kept_hi;
    if (hi - an->kept_lo + 1 > PP_REPORT_GANTT_MAX_STEPS) {
        hi = an->kept_lo + PP_REPORT_GANTT_MAX_STEPS - 1;
        pp_tool_note(0, "the Gantt shows steps %lld..%lld only (at most %d steps; the Chrome "
                        "trace can hold more)",
                     (long long)an->kept_lo, (long long)hi, PP_REPORT_GANTT_MAX_STEPS);
    }
    if (an->kept_lo == hi)
        pp_tool_note(0, "Gantt of step %lld written to %s", (long long)hi, a->gantt);
    else
        pp_tool_note(0, "Gantt of steps %lld..%lld written to %s", (long long)an->kept_lo,
                     (long long)hi, a->gantt);
    return PP_OK;
}

/* What --import leaves in its directory: converted traces. */
static int import_is_ours(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && strcmp(name + n - 4, ".pft") == 0;
}

static const pp_tool_outdir k_import_dir = {
    .is_ours = import_is_ours,
    .lacks = "no .pft file",
    .noun = "import",
    .old_is_not = "is not an imported run directory",
    .say_why = 1,
};

/* --import: the inputs converted into a->import (kept; a previous import there becomes
 * OUTDIR.old), then the analysis of that directory. */
static pp_status import_and_analyze(const args *a, const pp_analysis_options *o,
                                    pp_analysis **an)
{
    char dir[4096], why[512];
    if (!pp_tool_path_trim(a->import, dir, sizeof dir))
        return PP_ERR(PP_ERR_INVALID, "--import '%s': path too long", a->import);
    pp_tool_dir_kind k = pp_tool_dir_classify(dir, &k_import_dir, why, sizeof why);
    if (k == PP_TOOL_DIR_OTHER || k == PP_TOOL_DIR_NOT_DIR)
        return PP_ERR(PP_ERR_INVALID, "--import '%s': %s; choose another directory or remove it",
                      dir, why);
    pp_status st = PP_OK;
    if (k == PP_TOOL_DIR_OURS && (st = pp_tool_dir_keep_old(dir, &k_import_dir)) != PP_OK)
        return st;
    if ((st = pp_tool_mkdir_p(dir, "directory", PP_ERR_IO)) != PP_OK)
        return st;
    pp_inputs *in = NULL;
    if ((st = pp_inputs_open(a->inputs, (size_t)a->n_inputs, dir, &in)) != PP_OK)
        return st;
    size_t converted = pp_inputs_converted(in);
    const char *notes = pp_inputs_notes(in);
    if (notes[0])
        pp_tool_note(0, "%.*s", (int)strlen(notes) - 1, notes);
    pp_inputs_close(in);
    if (!converted)
        return PP_ERR(PP_ERR_INVALID, "--import: no PyTorch profiler trace among the inputs "
                                      "(nothing to convert)");
    pp_tool_note(0, "%zu PyTorch trace(s) converted into %s", converted, dir);
    return pp_analyze_dir(dir, o, an);
}

int main(int argc, char **argv)
{
    pp_tool_init("pprof-report");
    args *a = calloc(1, sizeof *a);
    if (!a) {
        fputs("pprof-report: out of memory\n", stderr);
        return PP_EXIT_RUNTIME;
    }
    int rc = parse_args(argc, argv, a);
    if (rc != PP_TOOL_GO_ON) {
        free(a);
        return rc;
    }
    pp_tool_verbose = a->verbose;
    pp_tool_quiet = a->quiet && !a->verbose;
    pp_log_set_level(a->verbose ? 2 : a->quiet ? 0 : 1);

    pp_analysis_options o;
    analysis_options(a, &o);
    pp_tool_note(1, "analyzing %s (warm-up %d step(s)%s)", a->dir, o.warmup,
         a->n_ranks ? ", selected ranks" : "");

    pp_analysis *an = NULL;
    pp_inputs *held = NULL; /* converted PyTorch traces, read again by the Chrome export */
    char what[64];
    snprintf(what, sizeof what, "analysing %s", a->n_inputs > 1 ? "the trace files" : a->dir);
    pp_tool_progress_start(what);
    pp_status st = a->import ? import_and_analyze(a, &o, &an)
                             : pp_analyze_inputs_held(a->inputs, (size_t)a->n_inputs, &o, &an,
                                                      &held);
    pp_tool_progress_stop();
    if (st != PP_OK) {
        if (a->n_ranks)
            pp_error_wrap(st, "with --ranks %s", a->ranks_arg);
        rc = pp_tool_fail(st);
        free(a);
        return rc;
    }
    pp_tool_note(1, "%zu step(s) analyzed, %zu trace file(s), timeline of steps %lld..%lld kept",
         an->n_steps, an->n_files, (long long)an->kept_lo, (long long)an->kept_hi);
    if ((a->gantt || a->chrome) && o.keep_hi && an->n_steps &&
        an->steps[an->n_steps - 1].step > o.keep_hi)
        pp_tool_note(0, "the pictures hold steps %lld..%lld only (at most %d steps are kept)",
             (long long)an->kept_lo, (long long)an->kept_hi, MAX_KEPT_STEPS);
    if (a->json || a->output)
        echo_warnings(an);
    if (!a->quiet || a->json || a->output)
        st = write_summary(a, an);
    if (st == PP_OK && a->gantt)
        st = write_gantt(a, an);
    if (st == PP_OK && a->chrome) {
        st = write_chrome(a->chrome, an);
        if (st == PP_OK && !an->n_ops)
            pp_tool_note(0, "Chrome trace of every range written to %s (open it in "
                            "https://ui.perfetto.dev or chrome://tracing)",
                         a->chrome);
        else if (st == PP_OK)
            pp_tool_note(0, "Chrome trace of step(s) %lld..%lld written to %s (open it in "
                    "https://ui.perfetto.dev or chrome://tracing)",
                 (long long)an->kept_lo, (long long)an->kept_hi, a->chrome);
    }
    if (st == PP_OK && a->html)
        st = write_html(a, an);
    rc = st == PP_OK ? PP_EXIT_OK : pp_tool_fail(st);
    pp_analysis_free(an);
    pp_inputs_close(held);
    free(a);
    return rc;
}
