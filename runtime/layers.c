/* layers.c: the three layer kinds of the GPT-style model (embedding, transformer block, head)
 * with forward, input-gradient and weight-gradient passes over one micro-batch. The model, the
 * trainer and the pipeline backends call these; the math lives in kernels/, reached through a
 * kernel table (pp_kops.h): the CPU kernels on host memory, or CUDA kernels on one stream and
 * device memory, with the same sequence of operations either way. */
#include "pp_kops.h"
#include "pp_runtime.h"

#include <math.h>
#include <string.h>

/* Parameter tensors of each kind, in layout order. */
enum { EMB_WTE, EMB_WPE };
enum {
    BLK_LN1_W, BLK_LN1_B, BLK_QKV_W, BLK_QKV_B, BLK_PROJ_W, BLK_PROJ_B,
    BLK_LN2_W, BLK_LN2_B, BLK_FC_W, BLK_FC_B, BLK_FCPROJ_W, BLK_FCPROJ_B
};
enum { HEAD_LNF_W, HEAD_LNF_B, HEAD_LM_W };

struct pp_layer_acts {
    pp_layer_kind kind;
    int max_B;
    size_t bytes;
    const pp_kops *k; /* the kernels, and the memory space of every buffer below */
    float *mem; /* one allocation, carved into the buffers below */
    /* shared */
    float *in, *out, *din;
    /* embedding */
    float *demb;
    /* block: forward */
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *r2, *ln2, *ln2_mean, *ln2_rstd, *fc,
        *gelu;
    /* block: gradients kept between the input and weight passes */
    float *dproj2, *dgelu, *dfc, *dln2, *dr2, *datty, *dqkv, *dln1, *scratch;
    /* head */
    float *lnf, *lnf_mean, *lnf_rstd, *logits, *probs, *losses, *dlogits, *dlnf;
    float *loss_mean; /* [1] in the kernels' memory space */
    float loss;       /* host copy (host tables only) */
};

static float *P(const pp_layer *L, int t) { return L->params + L->tensors[t].offset; }
static float *G(const pp_layer *L, int t) { return L->grads + L->tensors[t].offset; }

size_t pp_layer_acts_bytes(const pp_layer_acts *a) { return a ? a->bytes : 0; }

void pp_layer_acts_destroy(pp_layer_acts *a)
{
    if (!a)
        return;
    if (a->mem)
        a->k->free(a->k->ctx, a->mem);
    pp_free(a);
}

/* Two passes over the same list of buffers: the first counts floats, the second hands out
 * pointers, so sizes are written once. */
static float *carve(float **cursor, size_t *total, size_t n)
{
    size_t rounded = (n + 15) & ~(size_t)15; /* keep every buffer 64-byte aligned */
    *total += rounded;
    if (!*cursor)
        return NULL;
    float *p = *cursor;
    *cursor += rounded;
    return p;
}

static void layout(pp_layer_acts *a, const pp_layer *L, float *base, size_t *total)
{
    const pp_kops *k = a->k;
    size_t B = (size_t)a->max_B, T = (size_t)L->cfg.seq_len, C = (size_t)L->cfg.d_model;
    size_t NH = (size_t)L->cfg.n_heads, V = (size_t)L->cfg.vocab_size, N = B * T;
    float *cur = base;
    *total = 0;
    switch (L->kind) {
    case PP_LAYER_EMBED:
        a->out = carve(&cur, total, N * C);
        a->demb = carve(&cur, total, N * C);
        break;
    case PP_LAYER_BLOCK:
        a->in = carve(&cur, total, N * C);
        a->out = carve(&cur, total, N * C);
        a->din = carve(&cur, total, N * C);
        a->ln1 = carve(&cur, total, N * C);
        a->ln1_mean = carve(&cur, total, N);
        a->ln1_rstd = carve(&cur, total, N);
        a->qkv = carve(&cur, total, N * 3 * C);
        a->att = carve(&cur, total, B * NH * T * T);
        a->atty = carve(&cur, total, N * C);
        a->r2 = carve(&cur, total, N * C);
        a->ln2 = carve(&cur, total, N * C);
        a->ln2_mean = carve(&cur, total, N);
        a->ln2_rstd = carve(&cur, total, N);
        a->fc = carve(&cur, total, N * 4 * C);
        a->gelu = carve(&cur, total, N * 4 * C);
        a->dproj2 = carve(&cur, total, N * C);
        a->dgelu = carve(&cur, total, N * 4 * C);
        a->dfc = carve(&cur, total, N * 4 * C);
        a->dln2 = carve(&cur, total, N * C);
        a->dr2 = carve(&cur, total, N * C);
        a->datty = carve(&cur, total, N * C);
        a->dqkv = carve(&cur, total, N * 3 * C);
        a->dln1 = carve(&cur, total, N * C);
        a->scratch = carve(&cur, total, k->attention_scratch_floats((int)B, (int)T, (int)NH));
        break;
    case PP_LAYER_HEAD:
        a->in = carve(&cur, total, N * C);
        a->din = carve(&cur, total, N * C);
        a->lnf = carve(&cur, total, N * C);
        a->lnf_mean = carve(&cur, total, N);
        a->lnf_rstd = carve(&cur, total, N);
        a->logits = carve(&cur, total, N * V);
        a->probs = carve(&cur, total, N * V);
        a->losses = carve(&cur, total, N);
        a->dlogits = carve(&cur, total, N * V);
        a->dlnf = carve(&cur, total, N * C);
        a->loss_mean = carve(&cur, total, 1);
        break;
    }
}

pp_status pp_layer_acts_create_k(const pp_layer *L, int max_B, const pp_kops *k,
                                 pp_layer_acts **out)
{
    if (max_B < 1)
        return PP_ERR(PP_ERR_INVALID, "activation buffers need max_B >= 1 (got %d)", max_B);
    pp_layer_acts *a = pp_alloc(sizeof *a);
    if (!a)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for layer %s activations", L->name);
    a->kind = L->kind;
    a->max_B = max_B;
    a->k = k;
    size_t total = 0;
    layout(a, L, NULL, &total);
    a->bytes = total * sizeof(float);
    a->mem = k->alloc(k->ctx, a->bytes);
    if (!a->mem) {
        pp_free(a);
        return PP_ERR(PP_ERR_NOMEM, "out of %s memory: layer %s needs %.1f MiB of activations",
                      k->name, L->name, (double)total * sizeof(float) / 1048576.0);
    }
    layout(a, L, a->mem, &total);
    *out = a;
    return PP_OK;
}

size_t pp_layer_acts_size(const pp_model_config *cfg, int layer, int max_B, const pp_kops *k)
{
    int L = pp_model_config_num_layers(cfg);
    pp_layer l = {.kind = layer == 0 ? PP_LAYER_EMBED
                          : layer == L - 1 ? PP_LAYER_HEAD
                                           : PP_LAYER_BLOCK,
                  .index = layer, .cfg = *cfg};
    pp_layer_acts a = {.kind = l.kind, .max_B = max_B, .k = k};
    size_t total = 0;
    layout(&a, &l, NULL, &total);
    return total * sizeof(float);
}

pp_status pp_layer_acts_create(const pp_layer *L, int max_B, pp_layer_acts **out)
{
    return pp_layer_acts_create_k(L, max_B, &pp_kops_cpu, out);
}

const float *pp_layer_acts_output(const pp_layer_acts *a) { return a->out; }
const float *pp_layer_acts_loss_mean(const pp_layer_acts *a) { return a->loss_mean; }
const float *pp_layer_acts_dinput(const pp_layer_acts *a) { return a->din; }
float pp_layer_acts_loss(const pp_layer_acts *a) { return a->loss; }

void pp_layer_forward(const pp_layer *L, pp_layer_acts *a, const pp_microbatch *mb,
                      const float *in)
{
    const pp_kops *K = a->k;
    int B = mb->B, T = L->cfg.seq_len, C = L->cfg.d_model, NH = L->cfg.n_heads;
    int V = L->cfg.vocab_size, N = B * T;
    size_t NC = (size_t)N * C;
    switch (L->kind) {
    case PP_LAYER_EMBED:
        K->embed_forward(K->ctx, a->out, mb->tokens, P(L, EMB_WTE), P(L, EMB_WPE), B, T, C);
        break;
    case PP_LAYER_BLOCK:
        K->copy(K->ctx, a->in, in, NC * sizeof(float));
        K->layernorm_forward(K->ctx, a->ln1, a->ln1_mean, a->ln1_rstd, a->in, P(L, BLK_LN1_W),
                             P(L, BLK_LN1_B), N, C);
        K->linear_forward(K->ctx, a->qkv, a->ln1, P(L, BLK_QKV_W), P(L, BLK_QKV_B), N, C, 3 * C);
        K->attention_forward(K->ctx, a->atty, a->att, a->qkv, B, T, C, NH);
        /* r2 = in + proj(atty); the projection is written to out, which is free until the
         * MLP writes the block's output. */
        K->linear_forward(K->ctx, a->out, a->atty, P(L, BLK_PROJ_W), P(L, BLK_PROJ_B), N, C, C);
        K->residual_forward(K->ctx, a->r2, a->in, a->out, NC);
        K->layernorm_forward(K->ctx, a->ln2, a->ln2_mean, a->ln2_rstd, a->r2, P(L, BLK_LN2_W),
                             P(L, BLK_LN2_B), N, C);
        K->linear_forward(K->ctx, a->fc, a->ln2, P(L, BLK_FC_W), P(L, BLK_FC_B), N, C, 4 * C);
        K->gelu_forward(K->ctx, a->gelu, a->fc, NC * 4);
        K->linear_forward(K->ctx, a->out, a->gelu, P(L, BLK_FCPROJ_W), P(L, BLK_FCPROJ_B), N, 4 * C, C);
        K->residual_forward(K->ctx, a->out, a->r2, a->out, NC);
        break;
    case PP_LAYER_HEAD: {
        K->copy(K->ctx, a->in, in, NC * sizeof(float));
        K->layernorm_forward(K->ctx, a->lnf, a->lnf_mean, a->lnf_rstd, a->in, P(L, HEAD_LNF_W),
                             P(L, HEAD_LNF_B), N, C);
        K->linear_forward(K->ctx, a->logits, a->lnf, P(L, HEAD_LM_W), NULL, N, C, V);
        K->xent_forward(K->ctx, a->losses, a->probs, a->logits, mb->targets, N, V);
        K->loss_mean(K->ctx, a->loss_mean, a->losses, N);
        if (!K->on_device)
            a->loss = *a->loss_mean;
        break;
    }
    }
}

void pp_layer_backward_input(const pp_layer *L, pp_layer_acts *a, const pp_microbatch *mb,
                             const float *dout, float loss_scale)
{
    const pp_kops *K = a->k;
    int B = mb->B, T = L->cfg.seq_len, C = L->cfg.d_model, NH = L->cfg.n_heads;
    int V = L->cfg.vocab_size, N = B * T;
    size_t NC = (size_t)N * C, bytes = NC * sizeof(float);
    switch (L->kind) {
    case PP_LAYER_EMBED:
        K->copy(K->ctx, a->demb, dout, bytes);
        break;
    case PP_LAYER_BLOCK:
        /* MLP branch: out = r2 + fcproj(gelu(fc(ln2(r2)))) */
        K->copy(K->ctx, a->dproj2, dout, bytes);
        K->zero(K->ctx, a->dgelu, bytes * 4);
        K->linear_backward_input(K->ctx, a->dgelu, a->dproj2, P(L, BLK_FCPROJ_W), N, 4 * C, C);
        K->zero(K->ctx, a->dfc, bytes * 4);
        K->gelu_backward(K->ctx, a->dfc, a->dgelu, a->fc, NC * 4);
        K->zero(K->ctx, a->dln2, bytes);
        K->linear_backward_input(K->ctx, a->dln2, a->dfc, P(L, BLK_FC_W), N, C, 4 * C);
        K->copy(K->ctx, a->dr2, dout, bytes); /* the residual path */
        K->layernorm_backward_input(K->ctx, a->dr2, a->dln2, a->r2, P(L, BLK_LN2_W), a->ln2_mean,
                                    a->ln2_rstd, N, C);
        /* attention branch: r2 = in + proj(attn(qkv(ln1(in)))) */
        K->zero(K->ctx, a->datty, bytes);
        K->linear_backward_input(K->ctx, a->datty, a->dr2, P(L, BLK_PROJ_W), N, C, C);
        K->zero(K->ctx, a->dqkv, bytes * 3);
        K->attention_backward(K->ctx, a->dqkv, a->scratch, a->datty, a->qkv, a->att, B, T, C, NH);
        K->zero(K->ctx, a->dln1, bytes);
        K->linear_backward_input(K->ctx, a->dln1, a->dqkv, P(L, BLK_QKV_W), N, C, 3 * C);
        K->copy(K->ctx, a->din, a->dr2, bytes);
        K->layernorm_backward_input(K->ctx, a->din, a->dln1, a->in, P(L, BLK_LN1_W), a->ln1_mean,
                                    a->ln1_rstd, N, C);
        break;
    case PP_LAYER_HEAD:
        K->zero(K->ctx, a->dlogits, (size_t)N * V * sizeof(float));
        K->xent_backward(K->ctx, a->dlogits, a->probs, mb->targets, loss_scale, N, V);
        K->zero(K->ctx, a->dlnf, bytes);
        K->linear_backward_input(K->ctx, a->dlnf, a->dlogits, P(L, HEAD_LM_W), N, C, V);
        K->zero(K->ctx, a->din, bytes);
        K->layernorm_backward_input(K->ctx, a->din, a->dlnf, a->in, P(L, HEAD_LNF_W), a->lnf_mean,
                                    a->lnf_rstd, N, C);
        break;
    }
}

void pp_layer_backward_weight(pp_layer *L, pp_layer_acts *a, const pp_microbatch *mb)
{
    const pp_kops *K = a->k;
    int B = mb->B, T = L->cfg.seq_len, C = L->cfg.d_model, V = L->cfg.vocab_size, N = B * T;
    switch (L->kind) {
    case PP_LAYER_EMBED:
        K->embed_backward(K->ctx, G(L, EMB_WTE), G(L, EMB_WPE), a->demb, mb->tokens, B, T, C);
        break;
    case PP_LAYER_BLOCK:
        K->linear_backward_weight(K->ctx, G(L, BLK_FCPROJ_W), G(L, BLK_FCPROJ_B), a->dproj2, a->gelu, N,
                                  4 * C, C);
        K->linear_backward_weight(K->ctx, G(L, BLK_FC_W), G(L, BLK_FC_B), a->dfc, a->ln2, N, C, 4 * C);
        K->layernorm_backward_weight(K->ctx, G(L, BLK_LN2_W), G(L, BLK_LN2_B), a->dln2, a->r2,
                                     a->ln2_mean, a->ln2_rstd, N, C);
        K->linear_backward_weight(K->ctx, G(L, BLK_PROJ_W), G(L, BLK_PROJ_B), a->dr2, a->atty, N, C, C);
        K->linear_backward_weight(K->ctx, G(L, BLK_QKV_W), G(L, BLK_QKV_B), a->dqkv, a->ln1, N, C,
                                  3 * C);
        K->layernorm_backward_weight(K->ctx, G(L, BLK_LN1_W), G(L, BLK_LN1_B), a->dln1, a->in,
                                     a->ln1_mean, a->ln1_rstd, N, C);
        break;
    case PP_LAYER_HEAD:
        K->linear_backward_weight(K->ctx, G(L, HEAD_LM_W), NULL, a->dlogits, a->lnf, N, C, V);
        K->layernorm_backward_weight(K->ctx, G(L, HEAD_LNF_W), G(L, HEAD_LNF_B), a->dlnf, a->in,
                                     a->lnf_mean, a->lnf_rstd, N, C);
        break;
    }
}

void pp_layer_backward(pp_layer *L, pp_layer_acts *a, const pp_microbatch *mb, const float *dout,
                       float loss_scale)
{
    pp_layer_backward_input(L, a, mb, dout, loss_scale);
    pp_layer_backward_weight(L, a, mb);
}
