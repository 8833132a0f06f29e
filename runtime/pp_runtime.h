/* pp_runtime.h: the training runtime of pptrain: model configuration, the GPT-style model as an
 * ordered list of layers with per-layer forward/backward, the AdamW optimizer, training data
 * (synthetic Markov corpus and token files), checkpoints and the single-stage trainer.
 * Called by tools/pptrain.c, the tests and the benchmarks; the pipeline runtime cuts the layer
 * list into stages.
 *
 * Ownership: every _create has a _destroy that accepts NULL. Thread-safety: objects are not
 * shared between threads; distinct objects may be used from distinct threads. */
#ifndef PP_RUNTIME_H
#define PP_RUNTIME_H

#include "pp_common.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================================== */
/* Model configuration                                                                        */
/* ======================================================================================== */

typedef struct pp_model_config {
    int vocab_size; /* V: tokens are 0 .. V-1 */
    int seq_len;    /* T: tokens per sequence */
    int d_model;    /* C: channels */
    int n_heads;    /* NH: attention heads, C % NH == 0 */
    int n_layers;   /* transformer blocks */
} pp_model_config;

/* Limits every field is validated against (see docs/model.md). */
enum {
    PP_MAX_VOCAB = 1 << 20,
    PP_MAX_SEQ = 8192,
    PP_MAX_DMODEL = 16384,
    PP_MAX_HEADS = 256,
    PP_MAX_LAYERS = 1024
};

/* Fills cfg with a built-in preset ("tiny", "small"); PP_ERR_INVALID naming the known presets
 * otherwise. */
pp_status pp_model_config_preset(const char *name, pp_model_config *cfg);
/* Names of the presets, NULL-terminated. */
const char *const *pp_model_config_preset_names(void);
/* Reads a JSON config file over cfg: {"preset": "tiny", "vocab_size": 256, "seq_len": 64,
 * "d_model": 64, "n_heads": 4, "n_layers": 4}; every key optional, "preset" applied first,
 * unknown keys and wrong types rejected by name. Validates the result. */
pp_status pp_model_config_load_json(const char *path, pp_model_config *cfg);
/* Checks every field and their relations; the message names the first bad field. */
pp_status pp_model_config_validate(const pp_model_config *cfg);
/* Number of layers in the model's layer list: embedding + n_layers blocks + head. */
int pp_model_config_num_layers(const pp_model_config *cfg);
/* Parameter count of the whole model. */
size_t pp_model_config_num_params(const pp_model_config *cfg);
/* Parameters of layer `layer` of the layer list (0 embedding, 1..n_layers blocks, then head). */
size_t pp_model_config_layer_params(const pp_model_config *cfg, int layer);
/* Model FLOPs of one training token (forward + backward), docs/metrics.md "Model FLOPs":
 * 6 x (weights of the matrix products) + 12 x layers x T x C; the basis of MFU. */
double pp_model_config_train_flops_per_token(const pp_model_config *cfg);

/* ======================================================================================== */
/* Layers                                                                                     */
/* ======================================================================================== */

typedef enum pp_layer_kind {
    PP_LAYER_EMBED = 0, /* token + position embedding: tokens -> x [B,T,C] */
    PP_LAYER_BLOCK = 1, /* pre-LN block: x + attn(ln1(x)), then + mlp(ln2(.)) */
    PP_LAYER_HEAD = 2   /* final layernorm, LM head, softmax cross-entropy -> loss */
} pp_layer_kind;

/* One named parameter tensor inside a layer's parameter array. */
typedef struct pp_tensor_desc {
    const char *name;
    size_t offset; /* in floats from the layer's params */
    size_t size;   /* in floats */
    int decay;     /* 1 when AdamW weight decay applies (matrices and embeddings) */
} pp_tensor_desc;

enum { PP_LAYER_MAX_TENSORS = 12 };

typedef struct pp_layer {
    pp_layer_kind kind;
    int index; /* position in the model's layer list, 0 .. num_layers-1 */
    char name[24];
    pp_model_config cfg;
    size_t n_params;
    float *params; /* owned by the pp_model that holds the layer */
    float *grads;  /* same layout as params; accumulated by backward */
    int n_tensors;
    pp_tensor_desc tensors[PP_LAYER_MAX_TENSORS];
} pp_layer;

/* One micro-batch: B sequences of T tokens, inputs and next-token targets, [B,T] each. */
typedef struct pp_microbatch {
    int B;
    const int32_t *tokens;
    const int32_t *targets;
} pp_microbatch;

/* Saved activations (and internal gradients) of one layer for one micro-batch in flight.
 * Sized for at most max_B sequences. */
typedef struct pp_layer_acts pp_layer_acts;

pp_status pp_layer_acts_create(const pp_layer *L, int max_B, pp_layer_acts **out);
/* The same with the kernels of `k` (kernels/pp_kops.h): buffers in k's memory space, every pass
 * of the layer through k (a device table enqueues on its stream). L's params and grads must be in
 * that space too. */
struct pp_kops;
pp_status pp_layer_acts_create_k(const pp_layer *L, int max_B, const struct pp_kops *k,
                                 pp_layer_acts **out);
/* The head's mean loss after forward, in the kernels' memory space ([1] float). */
const float *pp_layer_acts_loss_mean(const pp_layer_acts *a);
void pp_layer_acts_destroy(pp_layer_acts *a);
/* Bytes held by one acts object (for memory accounting). */
size_t pp_layer_acts_bytes(const pp_layer_acts *a);
/* The bytes pp_layer_acts_create_k would allocate for layer `layer` of a model of this
 * configuration (the same layout, nothing allocated): what a micro-batch keeps for the layer's
 * backward (the layer marks' kept_bytes). */
size_t pp_layer_acts_size(const pp_model_config *cfg, int layer, int max_B,
                          const struct pp_kops *k);

/* Forward of one micro-batch. `in` is the [B,T,C] output of the previous layer (NULL for the
 * embedding, which reads mb->tokens); it is copied, so the caller may reuse it afterwards. The
 * output [B,T,C] is pp_layer_acts_output() (for the head: NULL; the loss is
 * pp_layer_acts_loss()). */
void pp_layer_forward(const pp_layer *L, pp_layer_acts *a, const pp_microbatch *mb,
                      const float *in);
const float *pp_layer_acts_output(const pp_layer_acts *a);
/* Mean cross-entropy of the micro-batch (head layer only, after forward). */
float pp_layer_acts_loss(const pp_layer_acts *a);

/* Input-gradient pass: from dout [B,T,C] (NULL for the head, which starts from its loss scaled
 * by loss_scale) to the gradient w.r.t. the layer's input, pp_layer_acts_dinput() (NULL for the
 * embedding). Keeps what the weight pass needs in `a`. */
void pp_layer_backward_input(const pp_layer *L, pp_layer_acts *a, const pp_microbatch *mb,
                             const float *dout, float loss_scale);
const float *pp_layer_acts_dinput(const pp_layer_acts *a);
/* Weight-gradient pass: accumulates this micro-batch's parameter gradients into L->grads.
 * Must follow pp_layer_backward_input on the same acts. */
void pp_layer_backward_weight(pp_layer *L, pp_layer_acts *a, const pp_microbatch *mb);
/* Both passes. */
void pp_layer_backward(pp_layer *L, pp_layer_acts *a, const pp_microbatch *mb, const float *dout,
                       float loss_scale);

/* ======================================================================================== */
/* Model: the layers [first, last) of the layer list, with their own parameters               */
/* ======================================================================================== */

typedef struct pp_model {
    pp_model_config cfg;
    int first_layer, last_layer; /* layer indices held, [first, last) */
    int n_layers;                /* last - first */
    pp_layer *layers;            /* n_layers entries */
    size_t n_params;
    float *params; /* all layers' parameters, contiguous in layer order */
    float *grads;
} pp_model;

/* Creates the layers [first, last) of the model (0, num_layers for the whole model). Parameters
 * are zero until pp_model_init_params. */
pp_status pp_model_create(const pp_model_config *cfg, int first, int last, pp_model **out);
void pp_model_destroy(pp_model *m);
/* GPT-2 initialisation: weights N(0, 0.02), residual projections N(0, 0.02/sqrt(2 n_layers)),
 * biases 0, layernorm gains 1. Each layer draws from its own stream seeded by (seed, layer
 * index), so a stage holding layers [a, b) gets exactly the values the whole model has. */
void pp_model_init_params(pp_model *m, uint64_t seed);
void pp_model_zero_grads(pp_model *m);
double pp_model_grad_sumsq(const pp_model *m);

/* ======================================================================================== */
/* Optimizer                                                                                  */
/* ======================================================================================== */

typedef struct pp_adamw_config {
    float lr;           /* peak learning rate */
    float beta1, beta2; /* 0.9, 0.95 */
    float eps;          /* 1e-8 */
    float weight_decay; /* 0.1, applied to tensors with decay = 1 */
    float grad_clip;    /* global gradient-norm limit; 0 disables clipping */
    int warmup_steps;   /* linear warm-up from 0 */
    int cosine;         /* 1: cosine decay to lr_min_ratio * lr at total_steps */
    float lr_min_ratio; /* 0.1 */
} pp_adamw_config;

void pp_adamw_config_default(pp_adamw_config *c);
pp_status pp_adamw_config_validate(const pp_adamw_config *c);
/* Learning rate at 1-based step t of total_steps. */
float pp_adamw_lr_at(const pp_adamw_config *c, int64_t t, int64_t total_steps);

typedef struct pp_optimizer {
    pp_adamw_config cfg;
    int64_t t; /* optimizer steps taken */
    size_t n;
    float *m, *v; /* moments, same layout as the model's params */
} pp_optimizer;

pp_status pp_optimizer_create(const pp_adamw_config *cfg, const pp_model *model,
                              pp_optimizer **out);
void pp_optimizer_destroy(pp_optimizer *o);
/* One AdamW step over every tensor of the model with the given learning rate, gradients first
 * multiplied by grad_scale (clipping). */
void pp_optimizer_step(pp_optimizer *o, pp_model *model, float lr, float grad_scale);
/* The same update over parameter, gradient and moment arrays laid out as model's, with the
 * kernels of k (k's memory space: a device backend keeps them on its GPU). */
void pp_optimizer_step_k(pp_optimizer *o, const pp_model *model, float *params,
                         const float *grads, float *m, float *v, const struct pp_kops *k,
                         float lr, float grad_scale);
/* The clipping factor for a global gradient norm: min(1, clip / norm), 1 when clip is 0. */
float pp_grad_clip_scale(float grad_clip, double grad_norm);

/* ======================================================================================== */
/* Training data                                                                              */
/* ======================================================================================== */

/* A source of training sequences: the built-in synthetic Markov corpus or a user's token file.
 * Batches are read sequentially: each sequence continues where the previous one ended. */
typedef struct pp_data pp_data;

enum { PP_MARKOV_DEFAULT_BRANCHING = 4 };

/* Synthetic corpus: a random sparse first-order Markov chain over `vocab` tokens, each token
 * followed by one of `branching` successors with random probabilities; the chain is irreducible
 * and aperiodic by construction. Deterministic in (vocab, branching, seed). */
pp_status pp_data_markov_create(int vocab, int branching, uint64_t seed, pp_data **out);
/* Token file (docs/token-file.md). The whole file is validated at open: a missing, short,
 * corrupt or out-of-vocabulary file (any token >= vocab) is rejected with a message naming the
 * problem (PP_ERR_IO for missing/unreadable, PP_ERR_CORRUPT for bad contents, PP_ERR_INVALID for
 * tokens out of vocabulary or a file too short for one sequence of seq_len + 1 tokens). */
pp_status pp_data_tokens_open(const char *path, int vocab, int seq_len, pp_data **out);
void pp_data_destroy(pp_data *d);

/* Next B sequences of T tokens: inputs[b,t] and targets[b,t] = the token after inputs[b,t]. */
void pp_data_next_batch(pp_data *d, int B, int T, int32_t *inputs, int32_t *targets);

/* Entropy rate of the source in nats per token: the lowest expected cross-entropy any model can
 * reach on it. Exact for the Markov corpus (stationary distribution solved to 1e-12); NAN for
 * token files. */
double pp_data_entropy_rate(const pp_data *d);
/* One-line human description, e.g. "markov chain (V=256, 4 successors, seed 1)". */
const char *pp_data_describe(const pp_data *d);
/* Identity of the data source (kind, parameters, file contents hash) used by checkpoints to
 * refuse resuming on different data. */
uint64_t pp_data_fingerprint(const pp_data *d);

/* Reading position, saved in checkpoints so a resumed run reads the same tokens. */
typedef struct pp_data_state {
    uint64_t rng[4];  /* Markov: generator state */
    uint64_t pos;     /* token file: next token index; Markov: tokens generated */
    int64_t current;  /* Markov: current chain state (last token emitted) */
} pp_data_state;

void pp_data_get_state(const pp_data *d, pp_data_state *st);
/* PP_ERR_CORRUPT when the state cannot belong to this source (position out of range...). */
pp_status pp_data_set_state(pp_data *d, const pp_data_state *st);

/* Writes count tokens (each < 2^(8*width)) to a token file with the given width in bytes (1, 2 or
 * 4), atomically. */
pp_status pp_tokfile_write(const char *path, const int32_t *tokens, uint64_t count, int width);
/* Generates `count` consecutive tokens of the Markov chain (advancing it). */
void pp_data_markov_generate(pp_data *d, int32_t *tokens, uint64_t count);
/* Markov corpus: copies token's successors and their probabilities into succ and prob (each
 * NULL or room for `branching` entries) and returns their number; 0 for a token file or a token
 * outside the vocabulary. Lets tests and tools score a stream against the true chain. */
int pp_data_markov_successors(const pp_data *d, int token, int32_t *succ, double *prob);

/* ======================================================================================== */
/* Trainer (single stage, micro-batches run one after another)                               */
/* ======================================================================================== */

typedef struct pp_train_config {
    pp_model_config model;
    pp_adamw_config opt;
    int batch;        /* sequences per optimizer step */
    int microbatches; /* M: batch is split into M micro-batches, gradients accumulated */
    int64_t steps;    /* total optimizer steps to reach (a resumed run continues to this) */
    uint64_t seed;    /* parameter init and data */
} pp_train_config;

typedef struct pp_trainer pp_trainer;

typedef struct pp_step_stats {
    int64_t step; /* 1-based step just completed */
    float loss;   /* mean cross-entropy over the batch */
    float lr;
    double grad_norm; /* before clipping */
    double step_ms;
    double tokens_per_s;
} pp_step_stats;

pp_status pp_train_config_validate(const pp_train_config *c);
/* Creates the model (initialised from seed), optimizer and activations; takes ownership of
 * data. */
pp_status pp_trainer_create(const pp_train_config *c, pp_data *data, pp_trainer **out);
void pp_trainer_destroy(pp_trainer *t);
pp_status pp_trainer_step(pp_trainer *t, pp_step_stats *st);
int64_t pp_trainer_steps_done(const pp_trainer *t);
pp_model *pp_trainer_model(pp_trainer *t);
pp_data *pp_trainer_data(pp_trainer *t);

/* Checkpoint (docs/checkpoint.md): model config, parameters, AdamW moments and step count, data
 * position and identity, checksummed; written atomically. Load verifies the checksum, that the
 * model config matches and that the data source is the same; on any error the trainer is left
 * unchanged. */
pp_status pp_trainer_save(const pp_trainer *t, const char *path);
pp_status pp_trainer_load(pp_trainer *t, const char *path);
/* Reads only the model config stored in a checkpoint (to build a trainer for --resume). */
pp_status pp_checkpoint_peek_config(const char *path, pp_model_config *cfg);

#ifdef __cplusplus
}
#endif
#endif /* PP_RUNTIME_H */
