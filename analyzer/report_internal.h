/* report_internal.h: what the report files share (report.c: Gantt and transfer pairs,
 * report_chrome.c: Chrome trace, summary.c: summary JSON): the kept timeline's window and a few
 * conversions. Internal to analyzer/. */
#ifndef PP_REPORT_INTERNAL_H
#define PP_REPORT_INTERNAL_H

#include "pp_analyzer.h"

#include <stdint.h>

/* The kept steps that a picture draws and where its time starts. */
typedef struct pp_report_window {
    int64_t lo, hi; /* steps drawn */
    double origin;  /* ns on the common clock: time 0 of the picture */
    double end;     /* ns: end of the last drawn step (or op) */
} pp_report_window;

static inline double pp_report_ms(double ns) { return ns * 1e-6; }

/* Whether a thread id is the PyTorch-trace importer's own (2^31 and above: a tid that was a
 * name, or another tool's process and thread, docs/kineto.md), which the reports leave out of a
 * named thread's label: it says nothing the name does not. */
static inline int pp_report_tid_is_own(uint32_t tid) { return tid >= 0x80000000u; }

/* How far a step's ranges reach from its start: its window (the union of the stages' step
 * ranges), which the pictures draw; the step time is the pipeline's period instead. */
static inline double pp_report_step_extent_ns(const pp_astep *sp)
{
    return sp->window_ns > 0 ? sp->window_ns : sp->step_ns;
}

/* The analyzed step numbered `step`, NULL when it was not analyzed. */
const pp_astep *pp_report_step_of(const pp_analysis *a, int64_t step);
/* The kept steps, at most max_steps of them (0: no cap). PP_ERR_INVALID when nothing was kept. */
pp_status pp_report_window_of(const pp_analysis *a, int64_t max_steps, pp_report_window *w);

/* One range or mark of the generic view, as a second reading of the traces finds it
 * (pp_report_each_event): the strings are valid during the call only. */
typedef struct pp_report_event {
    int32_t file;         /* index into pp_analysis.files */
    uint32_t tid;
    int32_t thread;       /* index into pp_analysis.threads, -1 when not there */
    int mark;             /* 1: a mark (t1 == t0) */
    int depth;            /* push/pop ranges: ranges open below it on its thread; -1 start/end */
    const char *domain, *name, *category; /* "" when none */
    uint64_t t0, t1;      /* ns on the common clock */
    uint32_t payload_type; /* NVTX's: 0 none, 1 uint64, 2 int64, 3 double, 4 uint32, 5 int32,
                              6 float */
    uint64_t payload;
    /* counter: 1 for a memory or counter sample (memory.c; t1 == t0, mark 0): value is the
     * sample (a heap's bytes in use after the call); stage >= 0 with its purpose
     * (pp_mem_purpose) for a stage's memory counter, else -1 and name / domain the series'
     * (mem_kind: pp_amem_kind) */
    int counter;
    double value;
    int32_t stage, purpose;
    int mem_kind;
} pp_report_event;

/* Reads the analyzed traces again and hands every range that is not a pipeline range, every
 * mark of another domain and every counter sample and heap change (e->counter), to fn, file by file in the order the analysis read them
 * (ranges in the order they end). Streams: memory does not follow the traces' length. */
pp_status pp_report_each_event(const pp_analysis *a, void (*fn)(void *ctx,
                                                                const pp_report_event *e),
                               void *ctx);

#endif /* PP_REPORT_INTERNAL_H */
