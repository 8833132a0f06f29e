/* trainer_internal.h: the trainer's state and the checkpoint image, shared by trainer.c,
 * checkpoint.c and pipeline.c only. */
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

/* A checkpoint's contents, independent of how the run is split into stages (checkpoint.c). */
typedef struct pp_ckpt_image {
    pp_model_config cfg;
    int64_t steps_done;
    size_t n_params;
    const float *params, *m, *v; /* n_params each, layer order */
    uint64_t data_fingerprint;
    pp_data_state data_state;
} pp_ckpt_image;

pp_status pp_checkpoint_write_image(const char *path, const pp_ckpt_image *img);
/* Reads and validates a checkpoint against the run's model config, parameter count and data;
 * on success img points into *owner, which the caller frees with free(). */
pp_status pp_checkpoint_read_image(const char *path, const pp_model_config *cfg,
                                   size_t n_params, pp_data *data, pp_ckpt_image *img,
                                   void **owner);
/* Restores the data position, leaving the data untouched on failure. */
pp_status pp_checkpoint_apply_data_state(const char *path, pp_data *data,
                                         const pp_data_state *ds);

#endif
