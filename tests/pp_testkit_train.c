/* pp_testkit_train.c: see pp_testkit_train.h. */
#include "pp_testkit_train.h"

#include <string.h>

pp_train_config tk_small_config(int M, int steps)
{
    pp_train_config c;
    memset(&c, 0, sizeof c);
    c.model = (pp_model_config){.vocab_size = TK_V, .seq_len = TK_T, .d_model = TK_C,
                                .n_heads = TK_NH, .n_layers = TK_BLOCKS};
    pp_adamw_config_default(&c.opt);
    c.opt.warmup_steps = 1;
    c.batch = TK_BATCH;
    c.microbatches = M;
    c.steps = steps;
    c.seed = 7;
    return c;
}
