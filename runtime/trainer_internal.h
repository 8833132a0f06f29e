/* trainer_internal.h: the trainer's state, shared by trainer.c and checkpoint.c only. */
#ifndef PP_TRAINER_INTERNAL_H
#define PP_TRAINER_INTERNAL_H

#include "pp_runtime.h"

struct pp_trainer {
    pp_train_config cfg;
    pp_model *model;
    pp_optimizer *opt;
    pp_data *data;
    pp_layer_acts **acts; /* one per layer, sized for one micro-batch */
    int32_t *inputs, *targets;
};

#endif
