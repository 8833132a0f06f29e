/* tool.c: what the pipeprof commands share (pp_tool.h): messages and exit codes, the option
 * cases and value parsers every command repeats, the --steps range, and output directories that
 * keep the previous one as DIR.old (pprof-run's run directory, pprof-tune --auto's OUTDIR). */
#define _GNU_SOURCE /* nftw */
#include "pp_tool.h"
#include "pp_trace.h"
#include "pp_version.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int pp_tool_verbose, pp_tool_quiet;
static const char *g_name = "pipeprof";

void pp_tool_init(const char *name) { g_name = name; }

int pp_tool_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", g_name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry '%s --help'.\n", g_name);
    va_end(ap);
    return PP_EXIT_USAGE;
}

int pp_tool_fail(pp_status st)
{
    fprintf(stderr, "%s: %s\n", g_name, pp_error_message());
    if (pp_tool_verbose && pp_error_origin()[0])
        fprintf(stderr, "%s: (raised at %s)\n", g_name, pp_error_origin());
    return pp_status_exit_code(st);
}

void pp_tool_note(int verbose_only, const char *fmt, ...)
{
    if (pp_tool_quiet || (verbose_only && !pp_tool_verbose))
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", g_name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- progress on a terminal --------------------------------------------------------------- */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    int running, stop, always, shown;
    char what[128];
} g_prog = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *progress_thread(void *arg)
{
    (void)arg;
    double t0 = now_s(), delay = g_prog.always ? 0.0 : 1.0, every = g_prog.always ? 0.1 : 0.5;
    uint64_t b0 = pp_trace_bytes_read();
    pthread_mutex_lock(&g_prog.mu);
    /* with =always the line is shown at least once, however soon the work ends (tests) */
    for (int first = g_prog.always; first || !g_prog.stop; first = 0) {
        double t = now_s() - t0;
        if (t >= delay) {
            double mb = (double)(pp_trace_bytes_read() - b0) / 1e6;
            if (mb > 0)
                fprintf(stderr, "\r%s: %s: %.1f MB read (%.0f MB/s), %.1f s\033[K", g_name,
                        g_prog.what, mb, t > 0 ? mb / t : 0.0, t);
            else
                fprintf(stderr, "\r%s: %s: %.1f s\033[K", g_name, g_prog.what, t);
            fflush(stderr);
            g_prog.shown = 1;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        double wait = t < delay ? delay - t : every;
        until.tv_sec += (time_t)wait;
        until.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g_prog.cv, &g_prog.mu, &until);
    }
    pthread_mutex_unlock(&g_prog.mu);
    return NULL;
}

void pp_tool_progress_start(const char *what)
{
    const char *env = getenv("PPROF_PROGRESS");
    int always = env && strcmp(env, "always") == 0;
    if (g_prog.running || (env && strcmp(env, "never") == 0) ||
        (!always && (pp_tool_quiet || !isatty(STDERR_FILENO))))
        return;
    g_prog.always = always;
    g_prog.stop = 0;
    g_prog.shown = 0;
    snprintf(g_prog.what, sizeof g_prog.what, "%s", what ? what : "working");
    /* a thread that cannot be had means no progress line, never a failure */
    g_prog.running = pthread_create(&g_prog.th, NULL, progress_thread, NULL) == 0;
}

void pp_tool_progress_phase(const char *what)
{
    if (!g_prog.running)
        return;
    pthread_mutex_lock(&g_prog.mu);
    snprintf(g_prog.what, sizeof g_prog.what, "%s", what ? what : "working");
    pthread_mutex_unlock(&g_prog.mu);
}

void pp_tool_progress_stop(void)
{
    if (!g_prog.running)
        return;
    pthread_mutex_lock(&g_prog.mu);
    g_prog.stop = 1;
    pthread_cond_signal(&g_prog.cv);
    pthread_mutex_unlock(&g_prog.mu);
    pthread_join(g_prog.th, NULL);
    g_prog.running = 0;
    if (g_prog.shown) { /* erase the line on a terminal; end it elsewhere (always) */
        fputs(isatty(STDERR_FILENO) ? "\r\033[K" : "\n", stderr);
        fflush(stderr);
    }
}

/* ---- options ---------------------------------------------------------------------------- */

void pp_tool_print_version(void)
{
    if (PP_GIT_COMMIT[0])
        printf("%s (pipeprof) %s, git %s\n", g_name, PP_VERSION_FULL, PP_GIT_COMMIT);
    else
        printf("%s (pipeprof) %s\n", g_name, PP_VERSION_FULL);
}

int pp_tool_option_common(int c, char **argv, const char *usage, int *quiet, int *verbose)
{
    switch (c) {
    case 'q': *quiet = 1; return PP_TOOL_GO_ON;
    case 'v': *verbose = 1; return PP_TOOL_GO_ON;
    case 'h': fputs(usage, stdout); return PP_EXIT_OK;
    case PP_TOOL_OPT_VERSION: pp_tool_print_version(); return PP_EXIT_OK;
    case ':': return pp_tool_usage_error("option '%s' needs a value", argv[optind - 1]);
    default:
        /* optopt names the letter of an unknown short option (also inside "-qx"); 0 for an
         * unknown long option, which is the whole argument */
        if (optopt)
            return pp_tool_usage_error("unknown option '-%c'", optopt);
        return pp_tool_usage_error("unknown option '%s'", argv[optind - 1]);
    }
}

int pp_tool_option_status(pp_status st)
{
    return st == PP_OK ? PP_TOOL_GO_ON : pp_tool_usage_error("%s", pp_error_message());
}

int pp_tool_option_i64(const char *s, const char *what, int64_t lo, int64_t hi, int64_t *out)
{
    return pp_tool_option_status(pp_parse_i64(s, what, lo, hi, out));
}

int pp_tool_option_f64(const char *s, const char *what, double lo, double hi, double *out)
{
    return pp_tool_option_status(pp_parse_f64(s, what, lo, hi, out));
}

pp_status pp_tool_parse_steps(const char *s, const char *purpose, int64_t *lo, int64_t *hi)
{
    const char *colon = strchr(s, ':');
    if (!colon || colon == s)
        return PP_ERR(PP_ERR_INVALID, "--steps '%s': expected N:M or N: (%s, e.g. 10:20)", s,
                      purpose);
    char first[32];
    size_t n = (size_t)(colon - s);
    if (n >= sizeof first)
        return PP_ERR(PP_ERR_INVALID, "--steps '%s': first step is not an integer", s);
    memcpy(first, s, n);
    first[n] = '\0';
    const int64_t max = INT64_C(1) << 40;
    pp_status st = pp_parse_i64(first, "--steps first step N", 1, max, lo);
    if (st != PP_OK)
        return st;
    *hi = 0;
    if (colon[1] == '\0')
        return PP_OK;
    if ((st = pp_parse_i64(colon + 1, "--steps last step M", 1, max, hi)) != PP_OK)
        return st;
    if (*hi < *lo)
        return PP_ERR(PP_ERR_INVALID, "--steps '%s': last step %lld is before first step %lld", s,
                      (long long)*hi, (long long)*lo);
    return PP_OK;
}

int pp_tool_list_well_formed(const char *s, size_t cap)
{
    size_t n = strlen(s);
    return n > 0 && n < cap && s[0] != ',' && s[n - 1] != ',' && !strstr(s, ",,");
}

pp_status pp_tool_list_each(const char *s, pp_tool_item_fn fn, void *ctx)
{
    char *buf = strdup(s);
    if (!buf)
        return PP_ERR(PP_ERR_NOMEM, "out of memory");
    pp_status st = PP_OK;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok && st == PP_OK;
         tok = strtok_r(NULL, ",", &save))
        st = fn(ctx, tok);
    free(buf);
    return st;
}

pp_status pp_tool_int_item(void *list, const char *item)
{
    pp_tool_int_list *l = list;
    int64_t v;
    pp_status st = pp_parse_i64(item, l->what, l->lo, l->hi, &v);
    if (st != PP_OK)
        return st;
    if (l->n >= l->max)
        return PP_ERR(PP_ERR_INVALID, "%s: more than %d %s", l->opt, l->max, l->plural);
    l->items[l->n++] = (int)v;
    return PP_OK;
}

/* ---- output directories ----------------------------------------------------------------- */

pp_tool_dir_kind pp_tool_dir_classify(const char *path, const pp_tool_outdir *k, char *why,
                                      size_t cap)
{
    struct stat sb;
    why[0] = '\0';
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT)
            return PP_TOOL_DIR_MISSING;
        snprintf(why, cap, "%s", strerror(errno));
        return PP_TOOL_DIR_OTHER;
    }
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(why, cap, "it is not a directory");
        return PP_TOOL_DIR_NOT_DIR;
    }
    DIR *d = opendir(path);
    if (!d) {
        snprintf(why, cap, "cannot list it: %s", strerror(errno));
        return PP_TOOL_DIR_OTHER;
    }
    int entries = 0, ours = 0;
    char other[NAME_MAX + 1] = "";
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        entries++;
        if (k->is_ours(e->d_name))
            ours = 1;
        else if (!other[0])
            snprintf(other, sizeof other, "%s", e->d_name);
    }
    closedir(d);
    if (ours)
        return PP_TOOL_DIR_OURS;
    if (entries == 0)
        return PP_TOOL_DIR_EMPTY;
    snprintf(why, cap, "it holds '%s' and %s", other, k->lacks);
    return PP_TOOL_DIR_OTHER;
}

pp_status pp_tool_mkdir_p(const char *path, const char *what, pp_status err)
{
    char buf[PATH_MAX];
    if (strlen(path) >= sizeof buf)
        return PP_ERR(PP_ERR_INVALID, "path too long: '%s'", path);
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char keep = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return PP_ERR(err, "cannot create %s '%s': %s", what, buf, strerror(errno));
            *p = keep;
            if (!keep)
                break;
        }
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return PP_ERR(err, "'%s' is not a directory", path);
    return PP_OK;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

pp_status pp_tool_dir_keep_old(const char *dir, const pp_tool_outdir *k)
{
    char old[PATH_MAX + 8], why[PATH_MAX + 64];
    snprintf(old, sizeof old, "%s.old", dir);
    pp_tool_dir_kind ko = pp_tool_dir_classify(old, k, why, sizeof why);
    if (ko == PP_TOOL_DIR_OTHER || ko == PP_TOOL_DIR_NOT_DIR) {
        char detail[PATH_MAX + 80] = "";
        if (k->say_why)
            snprintf(detail, sizeof detail, " (%s)", why);
        return PP_ERR(PP_ERR_INVALID, "cannot keep the previous %s of '%s': '%s' exists and %s%s; "
                                      "remove or rename it",
                      k->noun, dir, old, k->old_is_not, detail);
    }
    if (ko != PP_TOOL_DIR_MISSING && nftw(old, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return PP_ERR(PP_ERR_IO, "cannot remove the older %s '%s': %s", k->noun, old,
                      strerror(errno));
    if (rename(dir, old) != 0)
        return PP_ERR(PP_ERR_IO, "cannot rename '%s' to '%s': %s", dir, old, strerror(errno));
    pp_tool_note(1, "previous %s kept as '%s'", k->noun, old);
    return PP_OK;
}

int pp_tool_path_trim(const char *path, char *buf, size_t cap)
{
    size_t n = strlen(path);
    if (n >= cap)
        return 0;
    memcpy(buf, path, n + 1);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = '\0';
    return 1;
}
