/* pprof_run.h: what the files of pprof-run share (docs/cli/pprof-run.md): its options, what it
 * learns about each trace file, and what happened to the job's process tree. run_child.c runs
 * the job and the summary's child (signals, reaping), run_traces.c reads the trace files the
 * run left, run_manifest.c writes the manifest; pprof-run.c holds the options, the run
 * directory and main. */
#ifndef PPROF_RUN_H
#define PPROF_RUN_H

#include "pp_common.h"
#include "pp_trace.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

enum { EXIT_CANNOT_RUN = 127 };

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

/* What the manifest and the summary say about the run. */
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

/* ---- run_child.c -------------------------------------------------------------------------- */

/* Called first in main: pprof-run ignores SIGXFSZ (a file-size limit then fails its manifest
 * write with EFBIG, which it reports, instead of killing it and replacing the job's status with
 * 153); the job gets the disposition pprof-run found. */
void prun_signals_init(void);
/* Called once the job has ended: from here on the job's status is the answer, so the signals
 * pprof-run forwards stay pending until it exits with it (or go to the summary's child). */
void prun_signals_hold(void);
/* Forks and execs CMD, forwards signals, and reaps the whole process tree. Returns PP_OK once
 * no descendant is left (also when CMD could not be executed: r->exec_errno says so). */
pp_status prun_command(const args *a, child_result *r);
/* The analyzer's pipeline summary of run directory `dir` on stdout, from a forked child. */
void prun_pipeline_summary(const char *dir);

/* ---- run_traces.c ------------------------------------------------------------------------- */

/* 1 when `s` ends with `suffix`. */
int prun_ends_with(const char *s, const char *suffix);
/* The *.pft files of this run, sorted by name. Under a launcher (rank >= 0) the directory is
 * shared: only files of this instance's rank or of processes it reaped are its own. */
pp_status prun_collect_traces(const char *dir, int rank, const child_result *r,
                              trace_info **out, size_t *n_out);

/* ---- run_manifest.c ----------------------------------------------------------------------- */

/* Writes the run directory's manifest (docs/cli/pprof-run.md): DIR/manifest.<rank>.json under a
 * launcher, else DIR/manifest.json (manifest.<host>.<pid>.json when another pprof-run sharing
 * DIR wrote that name meanwhile). path_out gets the path written. */
pp_status prun_manifest_write(const run_info *ri, char *path_out, size_t cap);

#endif /* PPROF_RUN_H */
