/* pptrain_args.h: pptrain's command line (tools/pptrain_args.c): the flags as a table, the
 * checks between them, and what they build before the trainer exists (model config,
 * partition, a plan file applied). Used by tools/pptrain.c only. */
#ifndef PPTRAIN_ARGS_H
#define PPTRAIN_ARGS_H

#include "pp_exec.h"
#include "pp_runtime.h"

#include <stdint.h>

typedef struct pptrain_args {
    pp_train_config tc;
    const char *preset, *config, *data, *save, *resume, *log_json;
    int shape[5]; /* vocab, seq, d_model, heads, layers overrides; 0 = not given */
    int model_given;
    int branching;
    int64_t save_every;
    int64_t stop_at; /* 0: run to --steps */
    int quiet;
    /* pipeline */
    int stages;             /* 0 = not given */
    const char *boundaries, *plan, *costs;
    pp_schedule_kind schedule;
    int schedule_given, micro_given, batch_given;
    int v;                  /* 0 = not given */
    pp_backend_kind backend;
    int slow_stage;
    double slow_factor;
    pp_jitter jitter; /* --sim-jitter; its seed is --seed's unless the spec names one */
    int jitter_given;
    int print_schedule;
    const char *recompute; /* --recompute (NULL: none), or the plan's */
    char plan_recompute[256]; /* the plan's recompute choice, which recompute then points to */
    int plan_from_env;
    pp_transport_kind transport;
    int dp;
    int clock_sync; /* ping-pong rounds per rank at start and end (mpi) */
    int precision;  /* cuda: pp_cuda_precision */
    int device;     /* cuda: -1 = default (0, or the node-local rank under mpirun) */
} pptrain_args;

/* Parses argv into a; returns -1 to go on, else an exit code (help printed, or a usage error
 * reported). */
int pptrain_parse_args(int argc, char **argv, pptrain_args *a);
/* The model config: from the checkpoint when resuming without model flags, else preset, then
 * config file, then single-field overrides. */
pp_status pptrain_model_config(const pptrain_args *a, pp_model_config *mc);
/* The partition of L layers: from --plan (which also sets schedule, micro-batches and v), from
 * --boundaries, or even over --stages. */
pp_status pptrain_partition(pptrain_args *a, int L, pp_partition *part);
/* Refuses a --save or --log-json path whose directory cannot be written, before any training
 * time is spent. */
pp_status pptrain_check_writable_dir(const char *path, const char *flag);

#endif /* PPTRAIN_ARGS_H */
