/* bench_train_args.c: see bench_train_args.h. */
#include "bench_train_args.h"

#include <stdlib.h>
#include <string.h>

int bench_train_arg(bench_train_args *a, int c, const char *arg)
{
    switch (c) {
    case 'm': a->preset = arg; return 1;
    case 'b': a->batch = atoi(arg); return 1;
    case 'M': a->micro = atoi(arg); return 1;
    case 's': a->steps = atoi(arg); return 1;
    default: return 0;
    }
}

pp_status bench_train_config(const bench_train_args *a, pp_train_config *tc)
{
    memset(tc, 0, sizeof *tc);
    pp_status st = pp_model_config_preset(a->preset, &tc->model);
    pp_adamw_config_default(&tc->opt);
    tc->batch = a->batch;
    tc->microbatches = a->micro;
    tc->steps = a->steps + 1;
    tc->seed = 1;
    return st;
}
