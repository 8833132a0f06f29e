/* pp_kineto.h: PyTorch profiler (Kineto) traces in: a streaming converter from Kineto's Chrome
 * trace JSON (torch.profiler's export_chrome_trace, tensorboard_trace_handler's *.pt.trace.json,
 * gzip-compressed or not) to a .pft trace (docs/trace-format.md) that the analyzer reads like a
 * capture. Mapping and limits: docs/kineto.md. Called by input resolution (inputs.c: every
 * tool that takes a run directory), pprof-report --import, the tests and the fuzz target.
 *
 * Streaming: the JSON is tokenized in chunks, never held whole; what the converter keeps is
 * bounded by fixed caps (a reorder window of events, threads, nesting, open async ranges, the
 * name table), not by the trace's length. Every value read from the file is checked before it
 * sizes or indexes anything. Not thread-safe per call; independent calls may run in parallel. */
#ifndef PP_KINETO_H
#define PP_KINETO_H

#include "pp_common.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Caps (docs/kineto.md "Limits"). */
enum {
    PP_KINETO_REORDER_WINDOW = 65536, /* events held to put slightly late ones in order */
    PP_KINETO_MAX_RUNS = 64,          /* sorted runs merged (events further back: a new run) */
    PP_KINETO_MAX_THREADS = 1024,     /* threads (tids) per file */
    PP_KINETO_MAX_DEPTH = 1024,       /* nested ranges per thread */
    PP_KINETO_MAX_OPEN_ASYNC = 65536, /* overlapping (START/END) ranges open per thread */
    PP_KINETO_MAX_BEGINS = 65536,     /* "B" (and async "b", "S") events waiting for their end */
    PP_KINETO_MAX_NAMES = 1 << 20,    /* distinct names and categories per file */
    PP_KINETO_MAX_DOMAINS = 256,      /* distinct categories (one domain each) */
    PP_KINETO_MAX_COUNTERS = 1024     /* another tool's counters ("C" events' series) */
};

typedef struct pp_kineto_options {
    int32_t default_rank;  /* the rank when the file states none (distributedInfo), -1 unknown */
    size_t reorder_window; /* 0 = PP_KINETO_REORDER_WINDOW (tests use small ones) */
} pp_kineto_options;

/* What a conversion met. */
typedef struct pp_kineto_stats {
    uint64_t bytes_in;       /* JSON bytes read (after gzip) */
    uint64_t events_in;      /* elements of traceEvents */
    uint64_t ranges;         /* CPU ranges written (PUSH/POP or START/END) */
    uint64_t async_ranges;   /* of them, overlapping without nesting: START/END */
    uint64_t marks;          /* instant events written as marks */
    uint64_t gpu, api;       /* GPU activity records, CUDA runtime/driver API records */
    uint64_t thread_names;
    uint64_t memory_samples; /* allocator totals of "[memory]" events written as counter samples */
    uint64_t skipped_memory; /* "[memory]" events without "Total Allocated" (not read) */
    uint64_t counter_samples; /* another tool's counter ("C") values written as samples */
    uint64_t skipped_other;  /* metadata, flows, counters, categories not read */
    uint64_t malformed;      /* events missing ts/dur/ph, wrong types, NaN, negative or huge */
    uint64_t dropped_late;   /* events out of order in more than PP_KINETO_MAX_RUNS runs */
    uint32_t runs;           /* sorted runs merged (0: the window never filled) */
    uint64_t dropped_caps;   /* lost to a cap: threads, nesting, open async ranges, begins */
    uint64_t unpaired;       /* begins never ended, ends with nothing open ("B"/"E", async) */
    uint64_t names_capped;   /* names beyond PP_KINETO_MAX_NAMES, written as one shared name */
    uint64_t strings_truncated; /* strings cut at 4096 bytes */
    int truncated;           /* the JSON ended early or broke off: a partial conversion */
    int32_t rank;            /* as written in the header */
    /* the pipeline's process group, as written in the header (pp_trace.h): flags
     * PP_TRACE_PIPELINE_GROUP (then the process's index in it, its size, its lowest rank) or
     * PP_TRACE_OTHER_GROUPS */
    uint32_t pipe_flags;
    int32_t pipe_rank, pipe_size, pipe_first;
    char host[64];
    char problem[256];       /* the first problem in words, "" when none */
    uint64_t foreign;        /* complete, instant, begin/end, async and counter events of
                                categories neither torch's nor Paddle's profiler writes */
    int any_category;        /* 1: no event of theirs, so read as another tool's Chrome trace
                                (docs/kineto.md "Chrome traces of other tools") */
    uint32_t readings;       /* readings of the input, the result's included (1 to 3: "Which
                                reading", docs/kineto.md) */
    uint64_t bytes_read;     /* JSON bytes all of them read (bytes_in: the result's) */
} pp_kineto_stats;

void pp_kineto_options_default(pp_kineto_options *o);

/* Converts the Kineto trace `in` into a new .pft file `out` (created, never overwritten; a
 * scratch file out.part beside it while it runs). A trace that breaks off after some events
 * gives a partial .pft and PP_OK with stats->truncated set; input that holds no event at all
 * is PP_ERR_CORRUPT (not JSON) or PP_ERR_INVALID (JSON, but no traceEvents). o and stats may
 * be NULL. */
pp_status pp_kineto_convert(const char *in, const char *out, const pp_kineto_options *o,
                            pp_kineto_stats *stats);
/* The same over a buffer (uncompressed JSON). */
pp_status pp_kineto_convert_mem(const void *data, size_t len, const char *out,
                                const pp_kineto_options *o, pp_kineto_stats *stats);

/* Whether a file name is a Kineto trace's: *.json, *.json.gz (tensorboard_trace_handler's
 * *.pt.trace.json among them), other than pprof-run's own manifest.json and summary.json; or
 * PaddlePaddle's pipeline timeline, profile_record_tmp_file_for_rank_<N>. */
int pp_kineto_name_matches(const char *name);
/* Whether the file at `path` starts like a Kineto trace: gzip, or JSON whose first object key
 * or array element is that of a trace, or whose first object is an event (a "ph" string: JSON
 * lines of events, Paddle's pipeline timeline); its first 64 KB read. */
int pp_kineto_sniff(const char *path);

#ifdef __cplusplus
}
#endif
#endif /* PP_KINETO_H */
