/* pp_analyzer.h: turns a run directory of .pft traces into the numbers a pipeline user needs:
 * per-stage forward/backward times, busy and idle time, the bubble and why (fill/drain vs
 * imbalance vs transfers), link bandwidth, the critical path, throughput. Reads pipeline ranges
 * per docs/nvtx-convention.md from any job that follows it. Formulas: docs/metrics.md.
 * Used by pprof-report, pprof-run's summary, pprof-tune and pprof-check.
 *
 * Streaming: traces are read block by block; a step's ranges are kept only until every stage
 * has moved past it, then reduced to per-step numbers. Memory is bounded by the steps in flight
 * (plus the steps kept for drawing), not by the trace's length. Traces with GPU-capture records
 * are read a second time for the GPU projection, which keeps a window of ranges (pp_gpu.h). */
#ifndef PP_ANALYZER_H
#define PP_ANALYZER_H

#include "pp_clock.h"
#include "pp_common.h"
#include "pp_convention.h"
#include "pp_gpu.h"
#include "pp_sim.h"
#include "pp_trace.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bounds on the values a trace states (docs/nvtx-convention.md, "Bounds"). A range whose
 * stage, peer, micro-batch, chunk, layer or step lies outside them, or that ends before it
 * starts, is counted in pp_analysis.ranges_out_of_bounds and otherwise ignored: a trace is
 * outside input, and no value of it sizes memory unchecked. The configuration mark's S, M, v
 * and layers, when stated, replace the caps (and must lie within them themselves). */
enum {
    PP_ANALYSIS_MAX_STAGES = 4096,  /* stage, peer: [0, S) with S announced, else [0, 4096) */
    PP_ANALYSIS_MAX_MB = 1 << 20,   /* micro-batch: [0, M) announced, else [0, 2^20) */
    PP_ANALYSIS_MAX_CHUNKS = 64,    /* chunk: [0, v) announced, else [0, 64) */
    PP_ANALYSIS_MAX_LAYERS = 1 << 16 /* layer index: [0, layers) announced, else [0, 2^16) */
};
#define PP_ANALYSIS_MAX_STEP (INT64_C(1) << 48) /* step number: [0, 2^48] */

/* What a pipeline op is: pp_aop.kind holds the convention's kind (pp_nvtx_kind,
 * common/pp_convention.h), one of the nine below; layer ops hold FWD, BWD or BWD_WEIGHT. The
 * PP_AOP_ names are the analyzer's for them, with the convention's numbers. */
typedef pp_nvtx_kind pp_aop_kind;
enum {
    PP_AOP_FWD = PP_NVTX_FWD,
    PP_AOP_BWD = PP_NVTX_BWD,
    PP_AOP_BWD_INPUT = PP_NVTX_BWD_INPUT,
    PP_AOP_BWD_WEIGHT = PP_NVTX_BWD_WEIGHT,
    PP_AOP_OPT = PP_NVTX_OPT_STEP,
    PP_AOP_SEND_ACT = PP_NVTX_SEND_ACT,
    PP_AOP_RECV_ACT = PP_NVTX_RECV_ACT,
    PP_AOP_SEND_GRAD = PP_NVTX_SEND_GRAD,
    PP_AOP_RECV_GRAD = PP_NVTX_RECV_GRAD,
    PP_AOP_COUNT = PP_NVTX_KIND_COUNT /* bound of the numbers, for tables indexed by kind */
};

/* The op's message word ("fwd", "opt_step", ...); "?" for a kind that is not an op's. */
const char *pp_aop_kind_name(pp_aop_kind k);
/* 1 for the compute ops (FWD, BWD, BWD_INPUT, BWD_WEIGHT, OPT), 0 for transfers. */
int pp_aop_is_compute(pp_aop_kind k);

/* One pipeline range of one stage, times in ns on the run's common clock. */
typedef struct pp_aop {
    uint8_t kind; /* pp_aop_kind: the convention's kind */
    int32_t stage, mb, chunk, peer;
    uint64_t bytes;
    int64_t step;
    uint64_t t0, t1;
    int32_t rank; /* process it came from (file's rank, or file index when unknown) */
    int32_t replica; /* data-parallel replica of that process (0 when none) */
} pp_aop;

/* Order statistics of a series; median and p95 are exact up to 4096 samples and estimated from a
 * uniform reservoir of 4096 beyond (docs/metrics.md). */
typedef struct pp_astats {
    uint64_t count;
    double mean, median, p95, max, min, sum;
} pp_astats;

typedef struct pp_stage_step {
    double busy_ns, idle_ns, bubble_ratio;
    double fill_drain_ns, imbalance_ns, transfer_ns; /* with allreduce_ns, sum to idle_ns */
    double allreduce_ns; /* data-parallel gradient all-reduce (0 without replicas) */
    /* this step's mean forward and backward time per micro-batch (the backward counts BWD, or
     * BWD_INPUT + BWD_WEIGHT when split), 0 when the stage ran none */
    double fwd_ns, bwd_ns;
    /* the stage's time in this step outside its pipeline work: its period (its step start to
     * its next step start) minus the span of its ops (first op start to the last end of a
     * compute op or of a send's own part, up to its stage's next op: an asynchronous send's
     * range runs on to its wait); the job's own loop, optimizer and framework time. -1 when
     * not known (the last step, a stage without ops) */
    double outside_ns;
    int last_end; /* 1 on the stage whose ops ended last in the step */
    /* from the end of its last compute op (or send) before its optimizer step to that step's
     * start: the gradient norm and the barrier (pptrain's all-reduce of it), with the wait for
     * the other stages; -1 without an optimizer range */
    double pre_opt_ns;
    int last_to_opt; /* 1 on the stage that reached its optimizer step's wait last */
    /* the stage's time between its ops, in none of them (neither computing, sending nor
     * waiting for a message: a send's own part, a receive's range, but a receive posted early
     * only up to the later of its stage's last compute op inside it and its message's handing
     * over), from its first op to its optimizer step (else its last op): an interpreted
     * schedule's own bookkeeping (torch's Python between its calls), and its
     * compute ops (FWD .. BWD_WEIGHT) in that span but the last op when it is one (the time
     * after that is the wait for the optimizer step, pre_opt_ns); 0 and 0 without ops */
    double gap_ns;
    int n_compute;
} pp_stage_step;

/* One step's numbers. */
typedef struct pp_astep {
    int64_t step;
    double t0_ns;        /* start on the common clock */
    double step_ns;      /* the pipeline's period: mean spacing of a stage's step starts
                            (docs/metrics.md) */
    double window_ns;    /* from the first stage's step start to the last stage's end */
    double bubble_ratio; /* sum of idle / (S x step) */
    int decomposed;      /* 0 when the step's ranges could not be replayed (partial data) */
    int opt_barrier;     /* its optimizer steps: 1 started together (a barrier before them:
                            pptrain, Megatron-LM), 0 each after its stage's own work (torch.optim),
                            -1 none or too few to tell (docs/metrics.md) */
    int culprit;         /* stage with the largest share of the critical path, -1 unknown */
    double critical_share; /* that share */
    pp_stage_step *stage; /* [S] */
} pp_astep;

typedef struct pp_alink {
    int src, dst;
    int grad; /* 0: activations (forward direction of the pipe), 1: gradients */
    uint64_t messages;
    uint64_t bytes;
    uint64_t timed;           /* messages whose arrival was observed (the receiver waited) */
    double transfer_ns;       /* sum over timed messages: send start -> data at the receiver */
    double bandwidth_GBps;    /* median over timed messages of bytes / transfer time */
    pp_astats latency_ns;     /* per-message transfer time (timed messages) */
    double wait_ns;           /* receivers' time blocked in recv ranges (a receive posted
                                 early: from its stage's last compute op inside it to its
                                 message's handing over, docs/metrics.md) */
    double send_ns;           /* senders' time in send ranges */
    pp_astats send_time_ns;   /* per-message time in the send range up to the sender's next
                                 op, of the messages whose send waited for no receiver: it
                                 began once the receive had begun, or ended before the receive
                                 began (docs/metrics.md) */
    pp_astats recv_time_ns;   /* per-message time in the receive range of the receives that
                                 began after their send's own part had ended (the message was
                                 handed over) and no compute op of their stage overlaps, and of
                                 the receives posted early (a compute op of their stage began
                                 inside them) the part up to their stage's next op, posting
                                 them: the receiver's own time (docs/metrics.md) */
    /* The samples behind latency_ns: every timed message's transfer time (ns) up to 4096, a
     * uniform reservoir beyond, in no order; owned (freed by pp_analysis_free), NULL when none.
     * The transfers' variation the Monte Carlo predictor replays (docs/sim-dist.md). */
    double *sample;
    uint32_t n_sample;
    /* The samples behind send_time_ns and recv_time_ns likewise (ns, up to 4096 each, a
     * uniform reservoir beyond; owned, NULL when none): the senders' and receivers' own times'
     * variation (docs/sim-dist.md "Senders' and receivers' own time"). */
    double *send_sample, *recv_sample;
    uint32_t n_send_sample, n_recv_sample;
} pp_alink;

typedef struct pp_alayer {
    int32_t layer;
    char name[48];
    pp_astats fwd_ns, bwd_ns, bwd_weight_ns;
    /* from the job's layer mark (docs/nvtx-convention.md), when it emits one */
    int has_info;
    uint64_t param_bytes, activation_bytes;
    int has_kept;                      /* the mark gave kept_bytes and input_bytes */
    uint64_t kept_bytes, input_bytes;  /* kept for the backward; kept when recomputed */
} pp_alayer;

typedef struct pp_astage {
    int stage;
    pp_astats fwd_ns, bwd_ns, bwd_input_ns, bwd_weight_ns, opt_ns; /* per micro-batch op */
    double busy_ns, idle_ns, bubble_ratio;                          /* means over steps */
    double fill_drain_ns, imbalance_ns, transfer_ns;                /* means over steps */
    double allreduce_mean_ns;   /* data-parallel all-reduce, mean over steps (part of idle) */
    pp_astats allreduce_ns;     /* per step (count 0 without replicas) */
    double allreduce_bytes;     /* gradient bytes reduced per step */
    double allreduce_busbw_GBps; /* bus bandwidth of the median all-reduce */
    int imbalance_culprit; /* stage most often on the critical path, -1 unknown */
    /* The samples behind fwd_ns .. opt_ns (index PP_ASTAGE_FWD .. PP_ASTAGE_OPT): every op's
     * duration (ns) up to 4096, a uniform reservoir of them beyond, in no order; owned (freed by
     * pp_analysis_free), NULL when none. The op-duration distribution the Monte Carlo predictor
     * replays (analyzer/pp_extract.h, pp_sim.h's pp_sim_dist). */
    double *sample[5];
    uint32_t n_sample[5];
    /* Runs with several chunks per stage: each chunk's compute op times over every analyzed step,
     * chunk c's forward, backward, input- and weight-gradient halves at [4 c .. 4 c + 3] (count 0
     * where it ran none); owned, NULL and n_chunk 0 for one chunk per stage. Their medians
     * are a piece's own op costs (pprof-tune's extraction, docs/cost-file.md). */
    pp_astats *chunk_ns;
    int n_chunk;
} pp_astage;

/* Stage g's statistics of its chunk c's compute ops of kind k (PP_AOP_FWD .. PP_AOP_BWD_WEIGHT:
 * pp_astage.chunk_ns), NULL where it keeps none (one chunk per stage, c beyond n_chunk). */
static inline const pp_astats *pp_astage_chunk(const pp_astage *g, int c, int k)
{
    if (c < 0 || c >= g->n_chunk || k < PP_AOP_FWD || k > PP_AOP_BWD_WEIGHT)
        return NULL;
    return &g->chunk_ns[c * 4 + (k - PP_AOP_FWD)];
}

/* pp_astage.sample's index by op kind. */
enum { PP_ASTAGE_FWD, PP_ASTAGE_BWD, PP_ASTAGE_BWD_INPUT, PP_ASTAGE_BWD_WEIGHT, PP_ASTAGE_OPT,
       PP_ASTAGE_N_SAMPLES };

/* A process of the run. */
typedef struct pp_afile {
    char path[512];
    char host[64];
    uint32_t pid;
    int32_t rank;
    uint64_t events, dropped, filtered;
    int has_footer;
    pp_trace_damage damage;
    /* Clock alignment (docs/metrics.md): estimated only when the run spans hosts or a trace
     * carries the profiler's clock test hook; else every file shares CLOCK_MONOTONIC. */
    int clock_status;            /* pp_clock_status: shared, reference, estimated, unbounded */
    int32_t clock_ref;           /* rank (else file index) of the reference process */
    double clock_offset_ns;      /* its clock minus the reference's at its header's mono_ns */
    double clock_drift;          /* its clock's rate error against the reference (1e-6 = 1 ppm) */
    double clock_uncertainty_ns; /* half the feasible band's narrowest width (INFINITY: unbounded) */
    int aligned;                 /* 1: its times are on the run's common clock */
    int analyzed;                /* 1: read by the analysis (readable, and its rank wanted) */
    /* the .pft file read when `path` names its source instead (a converted PyTorch trace,
     * docs/kineto.md; readable while the pp_inputs of pp_analyze_inputs_held lives), "" when
     * `path` is the trace read */
    char trace_path[512];
    /* Where a converted PyTorch trace's process groups name the pipeline's (docs/kineto.md
     * "Process groups"; pipe_known 1, else 0 and its rank is its stage): its place in that
     * group, the stage every rank-numbered range of it takes, and its pipeline among the
     * run's, numbered by their lowest ranks (the data-parallel replica; 0 otherwise). */
    int pipe_known;
    int32_t pipe_rank;
    int32_t replica;
} pp_afile;

/* The generic view (docs/metrics.md "Ranges and marks"): every NVTX range that is not a
 * pipeline range and every mark of another domain, summed per (domain, name) over the run, and
 * per thread. Bounded: at most PP_ANALYSIS_MAX_NAMES names of ranges (and as many of marks),
 * PP_ANALYSIS_MAX_THREADS threads; beyond, the rest is summed in a row named "(other names)"
 * (other = 1) or a thread "(other threads)", with a warning. */
enum {
    PP_ANALYSIS_MAX_NAMES = 4096,
    PP_ANALYSIS_MAX_THREADS = 256,
    PP_ANALYSIS_NAME_BYTES = 128 /* names kept, NUL included; longer ones are cut */
};

typedef struct pp_arange {
    char domain[64];   /* "" for NVTX's default domain */
    char name[PP_ANALYSIS_NAME_BYTES]; /* the range's message, "" when it has none */
    int other;         /* 1: the "(other names)" row (names past PP_ANALYSIS_MAX_NAMES) */
    pp_astats ns;      /* its durations: count, sum (total), mean, median, p95, min, max */
    double stddev_ns;  /* population standard deviation of the durations */
    double wall_share; /* ns.sum / pp_analysis.wall_ns (can exceed 1: nested, threads) */
} pp_arange;

/* A thread that ran generic ranges or marks: file (index into files), OS thread id, its name. */
typedef struct pp_athread {
    int32_t file;      /* -1: the "(other threads)" row */
    uint32_t tid;
    char name[64];     /* from the trace's thread-name records (nvtxNameOsThread), "" none */
} pp_athread;

/* One (range name, thread) pair: its count and durations. */
typedef struct pp_arange_thread {
    uint32_t range;    /* index into pp_analysis.ranges */
    uint32_t thread;   /* index into pp_analysis.threads */
    uint64_t count;
    double sum_ns, min_ns, max_ns;
} pp_arange_thread;

typedef struct pp_amark {
    char domain[64];
    char name[PP_ANALYSIS_NAME_BYTES];
    int other;         /* 1: the "(other names)" row */
    uint64_t count;
} pp_amark;

/* Two speed regimes in the step times (regime.c, docs/metrics.md "Regimes"): found = 1 when the
 * steps split into a fast and a slow group, well apart (separation: Ashman's D on the log step
 * times, >= 3) and in stretches of consecutive steps (switches: regime changes between steps). */
typedef struct pp_aregimes {
    int found;
    size_t n_fast, n_slow;
    double fast_median_ns, slow_median_ns;
    double slow_share; /* n_slow / the steps */
    double separation;
    size_t switches;
} pp_aregimes;

/* The regime test on n step times in step order; out is zeroed, then filled (found = 0 when there
 * are fewer than 10 steps or no two regimes). PP_ERR_NOMEM only. */
pp_status pp_step_regimes(const double *step_ns, size_t n, pp_aregimes *out);

/* Memory (memory.c; docs/metrics.md "Memory"). Per stage, from the counters pptrain names
 * pp.mem.stage<S>.<purpose> in the pipeprof domain (issue 17's contract, docs/nvtx-convention.md
 * "Memory counters"); every other counter, every heap of NVTX's memory extension and each
 * process's resident memory as a named series. Bounded: PP_ANALYSIS_MAX_COUNTERS counters per
 * trace, PP_ANALYSIS_MAX_SERIES series per run, PP_ANALYSIS_MAX_HEAPS heaps and
 * PP_ANALYSIS_MAX_REGIONS live regions per trace; beyond, the rest is ignored with a warning. */
enum {
    PP_ANALYSIS_MAX_COUNTERS = 1024,
    PP_ANALYSIS_MAX_SERIES = 1024,
    PP_ANALYSIS_MAX_HEAPS = 256,
    PP_ANALYSIS_MAX_REGIONS = 1 << 16
};
typedef enum pp_mem_purpose {
    PP_MEM_PARAMS, PP_MEM_GRADS, PP_MEM_OPTIMIZER, PP_MEM_ACTIVATIONS, PP_MEM_TRANSPORT,
    PP_MEM_WORKSPACE, PP_MEM_N_PURPOSES
} pp_mem_purpose;
/* The purpose's word in the counter name ("params" ... "workspace"); NULL out of range. */
const char *pp_mem_purpose_name(int p);

typedef struct pp_amem_stage {
    int stage;
    unsigned purposes;        /* bit p: the stage reported purpose p */
    double peak_bytes[PP_MEM_N_PURPOSES]; /* each purpose's largest sample */
    double total_peak_bytes;  /* the largest sum of the purposes' current values */
    double peak_t_ns;         /* when that sum was first reached (common clock) */
    /* the first time the total peak was reached inside an analyzed step: that step, the time
     * from its start and that over its period; -1 (all three) when never inside one */
    int64_t peak_step;
    double peak_offset_ns, peak_fraction;
    uint64_t samples;
} pp_amem_stage;

typedef enum pp_amem_kind { PP_AMEM_COUNTER, PP_AMEM_HEAP, PP_AMEM_RSS } pp_amem_kind;

typedef struct pp_amem_series {
    int kind;                 /* pp_amem_kind */
    int32_t file;             /* index into pp_analysis.files */
    char domain[64];          /* "" for NVTX's default domain */
    char name[PP_ANALYSIS_NAME_BYTES]; /* counter name; a heap's message ("" none); "pprof.rss" */
    char unit[32];            /* "bytes" for heaps and RSS; a counter's unit, "" when none */
    uint64_t samples;
    double min, max, last;    /* of the values (heaps: bytes in use after each call) */
    double max_t_ns;          /* when max was first reached (common clock) */
    int32_t stage;            /* the stage the process ran when it ran one (its memory is that
                                 stage's: a CUDA device's allocations projected onto it), else
                                 -1 */
} pp_amem_series;

typedef struct pp_analysis_options {
    int warmup;          /* steps skipped at the start (default 1) */
    int64_t step_lo, step_hi; /* only these steps (0 = no bound) */
    int64_t keep_lo, keep_hi; /* steps whose ranges are kept for timelines (0,0 = the last
                                 analyzed step) */
    int rank_filter_n;   /* ranks to include (0 = all) */
    const int *rank_filter;
    int replica;         /* data-parallel replica whose pipeline is analyzed (default 0) */
    size_t gpu_window;   /* GPU projection: ranges kept per trace file (0 = PP_GPU_WINDOW_RANGES;
                            pp_gpu.h) */
    const char *dialect_file; /* a user dialect file (docs/dialects.md), NULL for none */
    int gpu_reread;      /* GPU pass: read the traces a second time instead of replaying what
                            the host pass recorded (0; the same analysis either way: tests) */
} pp_analysis_options;

void pp_analysis_options_default(pp_analysis_options *o);
/* For the tools' --dialect FILE: checks the dialect file (PP_ERR_INVALID / PP_ERR_IO naming the
 * file, rule and problem) and makes it the dialect_file of every pp_analysis_options_default
 * after (path must outlive them). Not thread-safe: call it before any analysis starts. */
pp_status pp_analysis_dialect_default(const char *path);

typedef struct pp_analysis {
    /* run */
    size_t n_files;
    pp_afile *files;
    uint64_t events_total, dropped_total;
    char warnings[2048]; /* one line per problem, '\n'-separated */
    /* pipeline ranges ignored because a value broke the bounds above (or the range ended
     * before it started); the first of them is described in warnings */
    uint64_t ranges_out_of_bounds;
    /* pipeline shape (from the config mark, else inferred) */
    int S, M, v;
    int dp;                  /* data-parallel replicas (config mark), 0 when unknown */
    size_t clock_sync_pairs; /* ping-pong messages used by the clock alignment */
    int replica;             /* the one analyzed */
    char schedule[32];       /* "" when unknown */
    /* steps and stages, but no forward or backward op in any analyzed step: the ranges that
     * name the compute were not recognised (a warning says what to do); no schedule then */
    int no_compute_ops;
    /* torch module events where layers would be (directly inside a stage module) that compiled
     * code ran: torch.compile around a whole stage hides its blocks (decode.c) */
    uint64_t torch_compiled_modules;
    int placement;           /* pp_placement of the chunks on the stages: PP_PLACE_V for torch's
                                V schedules (ZBV, DualPipeV), else looped */
    char schedules[64];      /* the schedules the job says it can run (config mark `schedules=`,
                                comma-separated), "" when it did not say */
    char recompute[256];     /* its activation recomputation (config mark `recompute=`, the
                                --recompute text of docs/pptrain.md: the job can recompute);
                                "" when it did not say */
    char dialect[48];        /* how the pipeline ranges were named (docs/dialects.md): "pipeprof"
                                (the convention), "torch.distributed.pipelining", a dialect
                                file's name; "" when no range was a pipeline range */
    double samples_per_step; /* 0 when unknown */
    double tokens_per_step;  /* 0 when unknown */
    /* steps */
    size_t n_steps;          /* analyzed (after warm-up and filters) */
    pp_astep *steps;
    int64_t warmup_skipped;
    /* aggregates over analyzed steps */
    pp_astats step_ns;
    double bubble_ratio;     /* mean */
    double imbalance;        /* max stage busy / mean stage busy, means over steps */
    double samples_per_s, tokens_per_s;
    pp_astage *stages;       /* [S] */
    size_t n_links;
    pp_alink *links;
    size_t n_layers;
    pp_alayer *layers;       /* by layer index */
    /* kept timelines */
    size_t n_ops;
    pp_aop *ops;             /* ranges of the kept steps, by stage then time */
    size_t n_layer_ops;
    pp_aop *layer_ops;       /* layer ranges of the kept steps (kind = FWD/BWD/BWD_WEIGHT,
                                chunk = layer index) */
    size_t n_allreduce_ops;
    pp_aop *allreduce_ops;   /* data-parallel all-reduce ranges of the kept steps (bytes set;
                                kind is not meaningful) */
    int64_t kept_lo, kept_hi;
    /* GPU time (pprof-run --cuda / --nccl), gpu.present = 0 without GPU records */
    pp_gpu_result gpu;
    void *impl;
    /* the generic view (pp_arange above; ranges.c): sorted by domain, then total time down,
     * "(other names)" last; range_threads by range, then thread; threads by file, then tid */
    size_t n_ranges;
    pp_arange *ranges;
    size_t n_threads;
    pp_athread *threads;
    size_t n_range_threads;
    pp_arange_thread *range_threads;
    size_t n_marks;
    pp_amark *marks;
    uint64_t generic_ranges;  /* ranges the generic view counted (all rows) */
    double wall_t0_ns, wall_ns; /* the run's span (docs/metrics.md): start, length */
    pp_aregimes regimes;        /* of the analyzed steps' times */
    /* memory (pp_amem_stage above; memory.c): stages that reported, by stage; the series by
     * file, then kind (counters, heaps, RSS), then name */
    size_t n_mem_stages;
    pp_amem_stage *mem_stages;
    size_t n_mem_series;
    pp_amem_series *mem_series;
    uint64_t mem_ignored;       /* samples and calls past the bounds above, or malformed */
} pp_analysis;

/* Analyzes every .pft file of `dir`; `dir` may also be a directory of PyTorch profiler traces
 * or one such trace, or one .pft file (pp_analyze_inputs). Fails (PP_ERR_IO / PP_ERR_INVALID)
 * when the directory cannot be read, has no readable trace, or its traces hold neither pipeline
 * steps nor any other range or mark; traces with ranges but no pipeline give the generic view
 * alone (S = 0, n_steps = 0). Damaged or partial traces give a partial analysis with warnings. */
pp_status pp_analyze_dir(const char *dir, const pp_analysis_options *o, pp_analysis **out);

/* ---- Inputs (inputs.c): what a tool's paths name, as .pft files ----
 * Each path is a pprof-run directory (its *.pft), a .pft file, a directory of PyTorch profiler
 * (Kineto) traces (*.json, *.json.gz, *.pt.trace.json: used when it holds no .pft) or such a
 * trace (docs/kineto.md). Kineto traces are converted (pp_kineto.h), in name order, the i-th
 * numbered rank i when it states no rank: into `import_dir` when given (it must exist; its
 * files stay), else into a private directory under $TMPDIR that pp_inputs_close removes. */
typedef struct pp_inputs pp_inputs;
pp_status pp_inputs_open(const char *const *paths, size_t n, const char *import_dir,
                         pp_inputs **out);
size_t pp_inputs_count(const pp_inputs *in);
const char *const *pp_inputs_paths(const pp_inputs *in); /* the .pft files, valid until close */
const char *pp_inputs_source(const pp_inputs *in, size_t i); /* what the i-th came from */
size_t pp_inputs_converted(const pp_inputs *in);         /* Kineto traces converted */
const char *pp_inputs_notes(const pp_inputs *in);        /* conversion problems, lines */
void pp_inputs_close(pp_inputs *in);
/* pp_analyze_files over pp_inputs_open(paths): the analysis names each converted trace by its
 * source (files[].path, warnings) and carries the conversion's notes in its warnings. */
pp_status pp_analyze_inputs(const char *const *paths, size_t n, const pp_analysis_options *o,
                            pp_analysis **out);
/* The same, the converted traces kept until the caller's pp_inputs_close(*held) (NULL when
 * the call fails): for reports that read the traces again (the generic view's Chrome tracks). */
pp_status pp_analyze_inputs_held(const char *const *paths, size_t n,
                                 const pp_analysis_options *o, pp_analysis **out,
                                 pp_inputs **held);
/* The same over explicit files (tests, benchmarks). */
pp_status pp_analyze_files(const char *const *paths, size_t n, const pp_analysis_options *o,
                           pp_analysis **out);
void pp_analysis_free(pp_analysis *a);

/* The readable summary table pprof-report prints and pprof-run prints at the end. */
void pp_analysis_print(const pp_analysis *a, FILE *out);

#ifdef __cplusplus
}
#endif
#endif /* PP_ANALYZER_H */
