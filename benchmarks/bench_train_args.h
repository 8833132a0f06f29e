/* bench_train_args.h: what the trainer benchmarks (bench_train, bench_recompute) share: the
 * options that choose the model and the batch, and the training config made of them. */
#ifndef BENCH_TRAIN_ARGS_H
#define BENCH_TRAIN_ARGS_H

#include "pp_runtime.h"

#include <getopt.h>

typedef struct bench_train_args {
    const char *preset; /* --model */
    int batch;          /* --batch */
    int micro;          /* --microbatches */
    int steps;          /* --steps: the timed ones */
} bench_train_args;

/* Those options as entries of a getopt_long table (letters m, b, M, s). A benchmark lists its
 * own first: getopt_long names an ambiguous abbreviation's candidates in table order. */
#define BENCH_TRAIN_OPTIONS                                                                   \
    {"model", required_argument, 0, 'm'}, {"batch", required_argument, 0, 'b'},               \
        {"microbatches", required_argument, 0, 'M'}, {"steps", required_argument, 0, 's'}

/* Takes getopt_long's answer c with its argument when c is one of those options: 1; else 0. */
int bench_train_arg(bench_train_args *a, int c, const char *arg);

/* a's config: the preset model (its error returned, the rest filled all the same), AdamW's
 * defaults, a->batch samples in a->micro micro-batches, seed 1, and a->steps + 1 steps: the
 * first is not timed (page faults of the fresh buffers, OpenBLAS thread start-up). */
pp_status bench_train_config(const bench_train_args *a, pp_train_config *tc);

#endif /* BENCH_TRAIN_ARGS_H */
