/* run_manifest.c: pprof-run's manifest.json (docs/cli/pprof-run.md): how the job ran (command,
 * host, rank, environment, times, exit) and what each trace file holds, written through the
 * common JSON writer in the layout it always had (cJSON's tabs). Called once by pprof-run.c when
 * the job's process tree is gone. */
#define _GNU_SOURCE /* environ, strsignal, gmtime_r */
#include "pp_json.h"
#include "pprof_run.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { MANIFEST_VERSION = 1 };

extern char **environ;

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

static void put_time(pp_json_writer *w, const char *key, const struct timespec *ts)
{
    char iso[48];
    iso_utc(ts, iso, sizeof iso);
    pp_json_object(w, key);
    pp_json_put_str(w, "utc", iso);
    pp_json_put_uint(w, "realtime_ns", ts_ns(ts));
    pp_json_end(w);
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

static void put_int_or_null(pp_json_writer *w, const char *key, int have, long long v)
{
    if (have)
        pp_json_put_int(w, key, v);
    else
        pp_json_put_null(w, key);
}

/* The command, where and as whom it ran, and its environment. */
static void put_job(pp_json_writer *w, const run_info *ri)
{
    pp_json_array_inline(w, "command");
    for (int i = 0; i < ri->a->ncmd; i++)
        pp_json_put_str(w, NULL, ri->a->cmd[i]);
    pp_json_end(w);
    char cwd[PATH_MAX];
    pp_json_put_str(w, "cwd", getcwd(cwd, sizeof cwd) ? cwd : NULL);
    pp_json_put_str(w, "host", ri->host);
    pp_json_put_int(w, "pprof_run_pid", getpid());
    put_int_or_null(w, "rank", ri->rank >= 0, ri->rank);
    pp_json_put_str(w, "rank_variable", ri->rank >= 0 ? ri->rank_var : NULL);
    pp_json_put_str(w, "run_dir", ri->dir);
    pp_json_put_str(w, "library", ri->lib);
    pp_json_object(w, "environment");
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || !env_recorded(*e, (size_t)(eq - *e)))
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
        pp_json_put_str(w, name, eq + 1);
    }
    pp_json_end(w);
}

static void put_exit(pp_json_writer *w, const run_info *ri)
{
    const child_result *r = ri->r;
    pp_json_object(w, "exit");
    if (r->exec_errno) {
        pp_json_put_str(w, "how", "not_started");
        pp_json_put_str(w, "error", strerror(r->exec_errno));
        pp_json_put_null(w, "status");
        pp_json_put_null(w, "signal");
    } else if (r->signaled) {
        pp_json_put_str(w, "how", "signaled");
        pp_json_put_null(w, "status");
        pp_json_put_int(w, "signal", r->code);
        pp_json_put_str(w, "signal_name", strsignal(r->code));
        pp_json_put_bool(w, "core_dumped", r->core_dumped);
    } else {
        pp_json_put_str(w, "how", "exited");
        pp_json_put_int(w, "status", r->code);
        pp_json_put_null(w, "signal");
    }
    pp_json_put_int(w, "pprof_run_exit_code", ri->exit_code);
    pp_json_end(w);
}

static void put_file(pp_json_writer *w, const trace_info *t)
{
    pp_json_object(w, NULL);
    pp_json_put_str(w, "name", t->name);
    pp_json_put_uint(w, "bytes", t->bytes);
    pp_json_put_bool(w, "readable", t->loaded);
    put_int_or_null(w, "pid", t->pid != 0, t->pid);
    if (t->loaded) {
        put_int_or_null(w, "rank", t->rank >= 0, t->rank);
        pp_json_put_str(w, "host", t->host);
        pp_json_put_bool(w, "has_footer", t->has_footer);
        pp_json_put_uint(w, "events", t->events);
        pp_json_put_uint(w, "dropped", t->dropped);
        pp_json_put_uint(w, "filtered", t->filtered);
    }
    pp_json_put_str(w, "problem", t->problem[0] ? t->problem : NULL);
    pp_json_end(w);
}

/* The trace files, the processes that died (a readable trace without a footer: its process
 * never closed it) and the totals. */
static void put_files(pp_json_writer *w, const run_info *ri)
{
    uint64_t events = 0, dropped = 0;
    pp_json_array_inline(w, "files");
    for (size_t i = 0; i < ri->n_traces; i++) {
        const trace_info *t = &ri->traces[i];
        put_file(w, t);
        events += t->loaded ? t->events : 0;
        dropped += t->loaded ? t->dropped : 0;
    }
    pp_json_end(w);
    pp_json_array_inline(w, "lost");
    for (size_t i = 0; i < ri->n_traces; i++) {
        const trace_info *t = &ri->traces[i];
        if (!t->loaded || t->has_footer)
            continue;
        pp_json_object(w, NULL);
        pp_json_put_str(w, "name", t->name);
        pp_json_put_int(w, "pid", t->pid);
        put_int_or_null(w, "rank", t->rank >= 0, t->rank);
        pp_json_end(w);
    }
    pp_json_end(w);
    pp_json_object(w, "totals");
    pp_json_put_uint(w, "files", ri->n_traces);
    pp_json_put_uint(w, "events", events);
    pp_json_put_uint(w, "dropped", dropped);
    pp_json_end(w);
}

static pp_status manifest_fill(pp_json_writer *w, const void *ctx)
{
    const run_info *ri = ctx;
    pp_json_object(w, NULL);
    pp_json_put_int(w, "manifest_version", MANIFEST_VERSION);
    pp_json_object(w, "version");
    pp_json_put_str(w, "pipeprof", PP_VERSION);
    pp_json_put_int(w, "trace_format", PP_TRACE_VERSION);
    pp_json_end(w);
    put_job(w, ri);
    put_time(w, "start", &ri->start);
    put_time(w, "end", &ri->end);
    /* 15 digits, as cJSON wrote it: nanoseconds, and no 17-digit tails of the conversion */
    pp_json_put_real_digits(w, "duration_s", 15,
                            (double)(ri->end_mono_ns - ri->start_mono_ns) * 1e-9);
    put_exit(w, ri);
    put_files(w, ri);
    pp_json_end(w);
    return pp_json_writer_status(w);
}

/* DIR/manifest.json, never over another instance's: outside a launcher pprof-run made DIR fresh,
 * so a manifest.json there was written meanwhile by another pprof-run sharing DIR (several
 * instances started by a launcher whose rank variable pprof-run does not know). The file is
 * written whole under a private name, then linked into place only if the name is free (link(2)
 * fails rather than replace); else it keeps the name manifest.<host>.<pid>.json. */
static pp_status write_new_manifest(const run_info *ri, char *path_out, size_t cap)
{
    char tmp[PATH_MAX + 96];
    snprintf(tmp, sizeof tmp, "%s/.manifest.%d.new", ri->dir, (int)getpid());
    pp_status st = pp_json_file_write(tmp, "the manifest", PP_JSON_TABS, manifest_fill, ri);
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

pp_status prun_manifest_write(const run_info *ri, char *path_out, size_t cap)
{
    if (ri->rank < 0)
        return write_new_manifest(ri, path_out, cap);
    snprintf(path_out, cap, "%s/manifest.%d.json", ri->dir, ri->rank);
    return pp_json_file_write(path_out, "the manifest", PP_JSON_TABS, manifest_fill, ri);
}
