/* checkpoint.c: saving and restoring a trainer (docs/checkpoint.md). The file is built in
 * memory, checksummed with CRC-32C and written atomically (temporary file, fsync, rename), so a
 * crash mid-save leaves the previous checkpoint intact and a damaged file is always detected. */
#include "pp_runtime.h"
#include "trainer_internal.h"

#include <stdlib.h>
#include <string.h>

#define CKPT_MAGIC "PPCK"
#define CKPT_END "KCPP"
enum { CKPT_VERSION = 1 };

/* Fixed-size header (104 bytes, no padding), little-endian, 8-byte aligned fields. */
typedef struct ckpt_header {
    char magic[4];
    uint32_t version;
    uint32_t header_bytes;
    int32_t vocab_size, seq_len, d_model, n_heads, n_layers;
    int64_t steps_done;
    uint64_t n_params;
    uint64_t data_fingerprint;
    uint64_t data_rng[4];
    uint64_t data_pos;
    int64_t data_current;
} ckpt_header;
_Static_assert(sizeof(ckpt_header) == 104, "checkpoint header layout changed: bump the version");

typedef struct ckpt_trailer {
    uint32_t crc; /* CRC-32C of every byte before the trailer */
    char magic[4];
} ckpt_trailer;

pp_status pp_checkpoint_write_image(const char *path, const pp_ckpt_image *img)
{
    size_t n = img->n_params;
    size_t body = 3 * n * sizeof(float);
    size_t total = sizeof(ckpt_header) + body + sizeof(ckpt_trailer);
    char *buf = malloc(total);
    if (!buf)
        return PP_ERR(PP_ERR_NOMEM, "out of memory building checkpoint '%s' (%zu bytes)", path,
                      total);
    ckpt_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CKPT_MAGIC, 4);
    h.version = CKPT_VERSION;
    h.header_bytes = sizeof h;
    h.vocab_size = img->cfg.vocab_size;
    h.seq_len = img->cfg.seq_len;
    h.d_model = img->cfg.d_model;
    h.n_heads = img->cfg.n_heads;
    h.n_layers = img->cfg.n_layers;
    h.steps_done = img->steps_done;
    h.n_params = n;
    h.data_fingerprint = img->data_fingerprint;
    memcpy(h.data_rng, img->data_state.rng, sizeof h.data_rng);
    h.data_pos = img->data_state.pos;
    h.data_current = img->data_state.current;
    char *p = buf;
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    memcpy(p, img->params, n * sizeof(float));
    p += n * sizeof(float);
    memcpy(p, img->m, n * sizeof(float));
    p += n * sizeof(float);
    memcpy(p, img->v, n * sizeof(float));
    p += n * sizeof(float);
    ckpt_trailer tr;
    tr.crc = pp_crc32c(0, buf, (size_t)(p - buf));
    memcpy(tr.magic, CKPT_END, 4);
    memcpy(p, &tr, sizeof tr);
    pp_status st = pp_write_file_atomic(path, buf, total);
    free(buf);
    return st;
}

pp_status pp_trainer_save(const pp_trainer *t, const char *path)
{
    pp_ckpt_image img;
    memset(&img, 0, sizeof img);
    img.cfg = t->cfg.model;
    img.steps_done = t->opt->t;
    img.n_params = t->model->n_params;
    img.params = t->model->params;
    img.m = t->opt->m;
    img.v = t->opt->v;
    img.data_fingerprint = pp_data_fingerprint(t->data);
    pp_data_get_state(t->data, &img.data_state);
    return pp_checkpoint_write_image(path, &img);
}

/* Checks magic, version and header size of a file already in memory. */
static pp_status check_header(const char *path, const char *buf, size_t len, ckpt_header *h)
{
    if (len < sizeof *h)
        return PP_ERR(PP_ERR_CORRUPT,
                      "checkpoint '%s' is truncated: %zu bytes, shorter than its %zu-byte header",
                      path, len, sizeof *h);
    memcpy(h, buf, sizeof *h);
    if (memcmp(h->magic, CKPT_MAGIC, 4) != 0)
        return PP_ERR(PP_ERR_CORRUPT, "'%s' is not a pipeprof checkpoint (bad magic)", path);
    if (h->version != CKPT_VERSION)
        return PP_ERR(PP_ERR_CORRUPT,
                      "checkpoint '%s' has version %u; this build reads version %d", path,
                      h->version, CKPT_VERSION);
    if (h->header_bytes != sizeof *h)
        return PP_ERR(PP_ERR_CORRUPT, "checkpoint '%s' has a %u-byte header, expected %zu", path,
                      h->header_bytes, sizeof *h);
    return PP_OK;
}

static pp_status read_checked(const char *path, char **buf, size_t *len, ckpt_header *h)
{
    pp_status st = pp_read_file(path, buf, len);
    if (st != PP_OK)
        return pp_error_wrap(st, "cannot read checkpoint");
    st = check_header(path, *buf, *len, h);
    if (st != PP_OK)
        goto fail;
    if (h->n_params > (uint64_t)(SIZE_MAX / 16)) {
        st = PP_ERR(PP_ERR_CORRUPT, "checkpoint '%s' claims %llu parameters", path,
                    (unsigned long long)h->n_params);
        goto fail;
    }
    size_t expect = sizeof *h + 3 * (size_t)h->n_params * sizeof(float) + sizeof(ckpt_trailer);
    if (*len != expect) {
        st = PP_ERR(PP_ERR_CORRUPT,
                    "checkpoint '%s' is %s: %zu bytes, expected %zu for %llu parameters", path,
                    *len < expect ? "truncated" : "longer than its contents", *len, expect,
                    (unsigned long long)h->n_params);
        goto fail;
    }
    ckpt_trailer tr;
    memcpy(&tr, *buf + expect - sizeof tr, sizeof tr);
    uint32_t crc = pp_crc32c(0, *buf, expect - sizeof tr);
    if (memcmp(tr.magic, CKPT_END, 4) != 0 || crc != tr.crc) {
        st = PP_ERR(PP_ERR_CORRUPT,
                    "checkpoint '%s' is corrupt: checksum mismatch (stored %08x, computed %08x)",
                    path, tr.crc, crc);
        goto fail;
    }
    return PP_OK;
fail:
    free(*buf);
    *buf = NULL;
    return st;
}

pp_status pp_checkpoint_peek_config(const char *path, pp_model_config *cfg)
{
    char *buf = NULL;
    size_t len = 0;
    ckpt_header h;
    pp_status st = read_checked(path, &buf, &len, &h);
    if (st != PP_OK)
        return st;
    free(buf);
    pp_model_config c = {h.vocab_size, h.seq_len, h.d_model, h.n_heads, h.n_layers};
    st = pp_model_config_validate(&c);
    if (st != PP_OK)
        return pp_error_wrap(PP_ERR_CORRUPT, "checkpoint '%s' holds an invalid model config",
                             path);
    *cfg = c;
    return PP_OK;
}

pp_status pp_checkpoint_read_image(const char *path, const pp_model_config *cfg,
                                   size_t n_params, pp_data *data, pp_ckpt_image *img,
                                   void **owner)
{
    char *buf = NULL;
    size_t len = 0;
    ckpt_header h;
    pp_status st = read_checked(path, &buf, &len, &h);
    if (st != PP_OK)
        return st;
    if (h.vocab_size != cfg->vocab_size || h.seq_len != cfg->seq_len ||
        h.d_model != cfg->d_model || h.n_heads != cfg->n_heads || h.n_layers != cfg->n_layers) {
        st = PP_ERR(PP_ERR_INVALID,
                    "checkpoint '%s' is for a different model (vocab %d, seq %d, d_model %d, "
                    "heads %d, layers %d; this run: %d, %d, %d, %d, %d)",
                    path, h.vocab_size, h.seq_len, h.d_model, h.n_heads, h.n_layers,
                    cfg->vocab_size, cfg->seq_len, cfg->d_model, cfg->n_heads, cfg->n_layers);
        goto fail;
    }
    if (h.n_params != n_params) {
        st = PP_ERR(PP_ERR_CORRUPT, "checkpoint '%s' holds %llu parameters, the model has %zu",
                    path, (unsigned long long)h.n_params, n_params);
        goto fail;
    }
    if (h.data_fingerprint != pp_data_fingerprint(data)) {
        st = PP_ERR(PP_ERR_INVALID,
                    "checkpoint '%s' was trained on different data than %s (resume with the "
                    "same --data and --seed)",
                    path, pp_data_describe(data));
        goto fail;
    }
    if (h.steps_done < 0) {
        st = PP_ERR(PP_ERR_CORRUPT, "checkpoint '%s' has a negative step count", path);
        goto fail;
    }
    memset(img, 0, sizeof *img);
    img->cfg = *cfg;
    img->steps_done = h.steps_done;
    img->n_params = n_params;
    img->data_fingerprint = h.data_fingerprint;
    memcpy(img->data_state.rng, h.data_rng, sizeof img->data_state.rng);
    img->data_state.pos = h.data_pos;
    img->data_state.current = h.data_current;
    const float *p = (const float *)(buf + sizeof h);
    img->params = p;
    img->m = p + n_params;
    img->v = p + 2 * n_params;
    *owner = buf;
    return PP_OK;
fail:
    free(buf);
    return st;
}

pp_status pp_checkpoint_apply_data_state(const char *path, pp_data *data,
                                         const pp_data_state *ds)
{
    pp_data_state old;
    pp_data_get_state(data, &old);
    pp_status st = pp_data_set_state(data, ds);
    if (st != PP_OK) {
        (void)pp_data_set_state(data, &old);
        return pp_error_wrap(st, "checkpoint '%s'", path);
    }
    return PP_OK;
}

pp_status pp_trainer_load(pp_trainer *t, const char *path)
{
    pp_ckpt_image img;
    void *owner = NULL;
    pp_status st = pp_checkpoint_read_image(path, &t->cfg.model, t->model->n_params, t->data,
                                            &img, &owner);
    if (st != PP_OK)
        return st;
    /* The data state is the last thing that can fail; after it the trainer is overwritten. */
    st = pp_checkpoint_apply_data_state(path, t->data, &img.data_state);
    if (st == PP_OK) {
        size_t n = img.n_params;
        memcpy(t->model->params, img.params, n * sizeof(float));
        memcpy(t->opt->m, img.m, n * sizeof(float));
        memcpy(t->opt->v, img.v, n * sizeof(float));
        t->opt->t = img.steps_done;
    }
    free(owner);
    return st;
}
