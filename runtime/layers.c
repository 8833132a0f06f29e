/* layers.c: the three layer kinds of the GPT-style model (embedding, transformer block, head)
 * with forward, input-gradient and weight-gradient passes over one micro-batch. The model, the
 * trainer and (later) the pipeline executor call these; the math lives in kernels/. */
#include "pp_kernels.h"
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
    float loss;
};

static float *P(const pp_layer *L, int t) { return L->params + L->tensors[t].offset; }
static float *G(const pp_layer *L, int t) { return L->grads + L->tensors[t].offset; }

size_t pp_layer_acts_bytes(const pp_layer_acts *a) { return a ? a->bytes : 0; }

void pp_layer_acts_destroy(pp_layer_acts *a)
{
    if (!a)
        return;
    pp_free(a->mem);
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
        a->scratch = carve(&cur, total, T * T);
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
        break;
    }
}

pp_status pp_layer_acts_create(const pp_layer *L, int max_B, pp_layer_acts **out)
{
    if (max_B < 1)
        return PP_ERR(PP_ERR_INVALID, "activation buffers need max_B >= 1 (got %d)", max_B);
    pp_layer_acts *a = pp_alloc(sizeof *a);
    if (!a)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for layer %s activations", L->name);
    a->kind = L->kind;
    a->max_B = max_B;
    size_t total = 0;
    layout(a, L, NULL, &total);
    a->bytes = total * sizeof(float);
    a->mem = pp_alloc(a->bytes);
    if (!a->mem) {
        pp_free(a);
        return PP_ERR(PP_ERR_NOMEM, "out of memory: layer %s needs %.1f MiB of activations",
                      L->name, (double)total * sizeof(float) / 1048576.0);
    }
    layout(a, L, a->mem, &total);
    *out = a;
    return PP_OK;
}

const float *pp_layer_acts_output(const pp_layer_acts *a) { return a->out; }
const float *pp_layer_acts_dinput(const pp_layer_acts *a) { return a->din; }
float pp_layer_acts_loss(const pp_layer_acts *a) { return a->loss; }

void pp_layer_forward(const pp_layer *L, pp_layer_acts *a, const pp_microbatch *mb,
                      const float *in)
{
    int B = mb->B, T = L->cfg.seq_len, C = L->cfg.d_model, NH = L->cfg.n_heads;
    int V = L->cfg.vocab_size, N = B * T;
    size_t NC = (size_t)N * C;
    switch (L->kind) {
    case PP_LAYER_EMBED:
        pp_embed_forward(a->out, mb->tokens, P(L, EMB_WTE), P(L, EMB_WPE), B, T, C);
        break;
    case PP_LAYER_BLOCK:
        memcpy(a->in, in, NC * sizeof(float));
        pp_layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, a->in, P(L, BLK_LN1_W),
                             P(L, BLK_LN1_B), N, C);
        pp_linear_forward(a->qkv, a->ln1, P(L, BLK_QKV_W), P(L, BLK_QKV_B), N, C, 3 * C);
        pp_attention_forward(a->atty, a->att, a->qkv, B, T, C, NH);
        /* r2 = in + proj(atty); the projection is written to out, which is free until the
         * MLP writes the block's output. */
        pp_linear_forward(a->out, a->atty, P(L, BLK_PROJ_W), P(L, BLK_PROJ_B), N, C, C);
        pp_residual_forward(a->r2, a->in, a->out, NC);
        pp_layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->r2, P(L, BLK_LN2_W),
                             P(L, BLK_LN2_B), N, C);
        pp_linear_forward(a->fc, a->ln2, P(L, BLK_FC_W), P(L, BLK_FC_B), N, C, 4 * C);
        pp_gelu_forward(a->gelu, a->fc, NC * 4);
        pp_linear_forward(a->out, a->gelu, P(L, BLK_FCPROJ_W), P(L, BLK_FCPROJ_B), N, 4 * C, C);
        pp_residual_forward(a->out, a->r2, a->out, NC);
        break;
    case PP_LAYER_HEAD: {
        memcpy(a->in, in, NC * sizeof(float));
        pp_layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, a->in, P(L, HEAD_LNF_W),
                             P(L, HEAD_LNF_B), N, C);
        pp_linear_forward(a->logits, a->lnf, P(L, HEAD_LM_W), NULL, N, C, V);
        pp_xent_forward(a->losses, a->probs, a->logits, mb->targets, N, V);
        double sum = 0.0;
        for (int i = 0; i < N; i++)
            sum += a->losses[i];
        a->loss = (float)(sum / N);
        break;
    }
    }
}

void pp_layer_backward_input(const pp_layer *L, pp_layer_acts *a, const pp_microbatch *mb,
                             const float *dout, float loss_scale)
{
    int B = mb->B, T = L->cfg.seq_len, C = L->cfg.d_model, NH = L->cfg.n_heads;
    int V = L->cfg.vocab_size, N = B * T;
    size_t NC = (size_t)N * C, bytes = NC * sizeof(float);
    switch (L->kind) {
    case PP_LAYER_EMBED:
        memcpy(a->demb, dout, bytes);
        break;
    case PP_LAYER_BLOCK:
        /* MLP branch: out = r2 + fcproj(gelu(fc(ln2(r2)))) */
        memcpy(a->dproj2, dout, bytes);
        memset(a->dgelu, 0, bytes * 4);
        pp_linear_backward_input(a->dgelu, a->dproj2, P(L, BLK_FCPROJ_W), N, 4 * C, C);
        memset(a->dfc, 0, bytes * 4);
        pp_gelu_backward(a->dfc, a->dgelu, a->fc, NC * 4);
        memset(a->dln2, 0, bytes);
        pp_linear_backward_input(a->dln2, a->dfc, P(L, BLK_FC_W), N, C, 4 * C);
        memcpy(a->dr2, dout, bytes); /* the residual path */
        pp_layernorm_backward_input(a->dr2, a->dln2, a->r2, P(L, BLK_LN2_W), a->ln2_mean,
                                    a->ln2_rstd, N, C);
        /* attention branch: r2 = in + proj(attn(qkv(ln1(in)))) */
        memset(a->datty, 0, bytes);
        pp_linear_backward_input(a->datty, a->dr2, P(L, BLK_PROJ_W), N, C, C);
        memset(a->dqkv, 0, bytes * 3);
        pp_attention_backward(a->dqkv, a->scratch, a->datty, a->qkv, a->att, B, T, C, NH);
        memset(a->dln1, 0, bytes);
        pp_linear_backward_input(a->dln1, a->dqkv, P(L, BLK_QKV_W), N, C, 3 * C);
        memcpy(a->din, a->dr2, bytes);
        pp_layernorm_backward_input(a->din, a->dln1, a->in, P(L, BLK_LN1_W), a->ln1_mean,
                                    a->ln1_rstd, N, C);
        break;
    case PP_LAYER_HEAD:
        memset(a->dlogits, 0, (size_t)N * V * sizeof(float));
        pp_xent_backward(a->dlogits, a->probs, mb->targets, loss_scale, N, V);
        memset(a->dlnf, 0, bytes);
        pp_linear_backward_input(a->dlnf, a->dlogits, P(L, HEAD_LM_W), N, C, V);
        memset(a->din, 0, bytes);
        pp_layernorm_backward_input(a->din, a->dlnf, a->in, P(L, HEAD_LNF_W), a->lnf_mean,
                                    a->lnf_rstd, N, C);
        break;
    }
}

void pp_layer_backward_weight(pp_layer *L, pp_layer_acts *a, const pp_microbatch *mb)
{
    int B = mb->B, T = L->cfg.seq_len, C = L->cfg.d_model, V = L->cfg.vocab_size, N = B * T;
    switch (L->kind) {
    case PP_LAYER_EMBED:
        pp_embed_backward(G(L, EMB_WTE), G(L, EMB_WPE), a->demb, mb->tokens, B, T, C);
        break;
    case PP_LAYER_BLOCK:
        pp_linear_backward_weight(G(L, BLK_FCPROJ_W), G(L, BLK_FCPROJ_B), a->dproj2, a->gelu, N,
                                  4 * C, C);
        pp_linear_backward_weight(G(L, BLK_FC_W), G(L, BLK_FC_B), a->dfc, a->ln2, N, C, 4 * C);
        pp_layernorm_backward_weight(G(L, BLK_LN2_W), G(L, BLK_LN2_B), a->dln2, a->r2,
                                     a->ln2_mean, a->ln2_rstd, N, C);
        pp_linear_backward_weight(G(L, BLK_PROJ_W), G(L, BLK_PROJ_B), a->dr2, a->atty, N, C, C);
        pp_linear_backward_weight(G(L, BLK_QKV_W), G(L, BLK_QKV_B), a->dqkv, a->ln1, N, C,
                                  3 * C);
        pp_layernorm_backward_weight(G(L, BLK_LN1_W), G(L, BLK_LN1_B), a->dln1, a->in,
                                     a->ln1_mean, a->ln1_rstd, N, C);
        break;
    case PP_LAYER_HEAD:
        pp_linear_backward_weight(G(L, HEAD_LM_W), NULL, a->dlogits, a->lnf, N, C, V);
        pp_layernorm_backward_weight(G(L, HEAD_LNF_W), G(L, HEAD_LNF_B), a->dlnf, a->in,
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
