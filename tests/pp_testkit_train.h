/* pp_testkit_train.h: the small model that the trainer's memory tests (test_recompute,
 * test_memory_model) train and work their expected numbers out from: its shape and a training
 * config of it. Part of the test kit, in a library of its own (pp_testkit_train) because it
 * links the trainer, which the analyzer's tests must not. */
#ifndef PP_TESTKIT_TRAIN_H
#define PP_TESTKIT_TRAIN_H

#include "pp_runtime.h"

/* 6 blocks: 8 layers (embedding, block0..5, head); vocabulary, sequence length, width and heads
 * small enough to run fast. */
enum {
    TK_V = 64,
    TK_T = 16,
    TK_C = 32,
    TK_NH = 4,
    TK_BLOCKS = 6,
    TK_L = TK_BLOCKS + 2,
    TK_BATCH = 8
};

/* That model trained on TK_BATCH samples in M micro-batches for `steps` steps: AdamW's defaults
 * with one warm-up step, seed 7, everything else zero. */
pp_train_config tk_small_config(int M, int steps);

#endif /* PP_TESTKIT_TRAIN_H */
