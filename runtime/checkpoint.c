/* checkpoint.c: saving and restoring a trainer (docs/checkpoint.md). The file is built in
 * memory, each part checksummed with CRC-32C, and written atomically (temporary file, fsync,
 * rename), so a crash mid-save leaves the previous checkpoint intact, its temporary file is
 * removed by the next save, and a damaged file is always detected and its damaged part named. */
#include "pp_runtime.h"
#include "trainer_internal.h"

#include <stdlib.h>
#include <string.h>

#define CKPT_MAGIC "PPCK"
#define CKPT_END "KCPP"
/* Version 2 checksums each part on its own (header, parameters, first and second moments), so
 * a damaged file's message names what is damaged; version 1 (one checksum over everything) is
 * still read. */
enum { CKPT_VERSION = 2, CKPT_VERSION_1 = 1 };

/* The fields of both versions (104 bytes, no padding), little-endian, 8-byte aligned. */
typedef struct ckpt_fields {
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
} ckpt_fields;
_Static_assert(sizeof(ckpt_fields) == 104, "checkpoint header layout changed: bump the version");

/* Version 2's header: the fields and their own checksum, so that the parameter count the rest
 * of the file is measured by is known to be intact. */
typedef struct ckpt_header {
    ckpt_fields f;
    uint32_t header_crc; /* CRC-32C of f */
    uint32_t reserved;   /* 0 */
} ckpt_header;
_Static_assert(sizeof(ckpt_header) == 112, "checkpoint header layout changed: bump the version");

/* Version 2's trailer: one CRC-32C per array, then the end magic. */
typedef struct ckpt_trailer {
    uint32_t crc[3]; /* parameters, AdamW first moments, AdamW second moments */
    char magic[4];
} ckpt_trailer;

/* Version 1's trailer: one CRC-32C of every byte before it. */
typedef struct ckpt_trailer_v1 {
    uint32_t crc;
    char magic[4];
} ckpt_trailer_v1;

static const char *const k_part_names[3] = {"the parameters", "the AdamW first moments",
                                            "the AdamW second moments"};

pp_status pp_checkpoint_write_image(const char *path, const pp_ckpt_image *img)
{
    size_t n = img->n_params;
    size_t total = sizeof(ckpt_header) + 3 * n * sizeof(float) + sizeof(ckpt_trailer);
    char *buf = malloc(total);
    if (!buf)
        return PP_ERR(PP_ERR_NOMEM, "out of memory building checkpoint '%s' (%zu bytes)", path,
                      total);
    ckpt_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.f.magic, CKPT_MAGIC, 4);
    h.f.version = CKPT_VERSION;
    h.f.header_bytes = sizeof h;
    h.f.vocab_size = img->cfg.vocab_size;
    h.f.seq_len = img->cfg.seq_len;
    h.f.d_model = img->cfg.d_model;
    h.f.n_heads = img->cfg.n_heads;
    h.f.n_layers = img->cfg.n_layers;
    h.f.steps_done = img->steps_done;
    h.f.n_params = n;
    h.f.data_fingerprint = img->data_fingerprint;
    memcpy(h.f.data_rng, img->data_state.rng, sizeof h.f.data_rng);
    h.f.data_pos = img->data_state.pos;
    h.f.data_current = img->data_state.current;
    h.header_crc = pp_crc32c(0, &h.f, sizeof h.f);
    char *p = buf;
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    ckpt_trailer tr;
    const float *arrays[3] = {img->params, img->m, img->v};
    for (int k = 0; k < 3; k++) {
        memcpy(p, arrays[k], n * sizeof(float));
        tr.crc[k] = pp_crc32c(0, p, n * sizeof(float));
        p += n * sizeof(float);
    }
    memcpy(tr.magic, CKPT_END, 4);
    memcpy(p, &tr, sizeof tr);
    pp_status st = pp_write_file_atomic(path, buf, total);
    free(buf);
    if (st != PP_OK)
        return pp_error_wrap(st, "saving checkpoint '%s' (the previous file, if any, is kept)",
                             path);
    return PP_OK;
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

/* Magic, version and header of a file already in memory; *h gets the fields. */
static pp_status check_header(const char *path, const char *buf, size_t len, ckpt_fields *h)
{
    if (len < 12)
        return PP_ERR(PP_ERR_CORRUPT, "checkpoint '%s' is truncated: %zu bytes, not even its "
                                      "magic and version", path, len);
    memset(h, 0, sizeof *h);
    memcpy(h, buf, 12);
    if (memcmp(h->magic, CKPT_MAGIC, 4) != 0)
        return PP_ERR(PP_ERR_CORRUPT, "'%s' is not a pipeprof checkpoint (bad magic)", path);
    if (h->version != CKPT_VERSION && h->version != CKPT_VERSION_1)
        return PP_ERR(PP_ERR_CORRUPT,
                      "checkpoint '%s' has version %u; this build reads versions 1 and %d (or "
                      "its header is damaged)", path, h->version, CKPT_VERSION);
    size_t want = h->version == CKPT_VERSION ? sizeof(ckpt_header) : sizeof(ckpt_fields);
    if (h->header_bytes != want)
        return PP_ERR(PP_ERR_CORRUPT, "checkpoint '%s': the header is damaged (it gives its size "
                                      "as %u bytes; version %u headers have %zu)", path,
                      h->header_bytes, h->version, want);
    if (len < want)
        return PP_ERR(PP_ERR_CORRUPT,
                      "checkpoint '%s' is truncated: %zu bytes, shorter than its %zu-byte header",
                      path, len, want);
    memcpy(h, buf, sizeof *h);
    if (h->version == CKPT_VERSION) {
        ckpt_header full;
        memcpy(&full, buf, sizeof full);
        uint32_t crc = pp_crc32c(0, buf, sizeof full.f);
        if (crc != full.header_crc)
            return PP_ERR(PP_ERR_CORRUPT,
                          "checkpoint '%s': the header (bytes 0-%zu: model shape, parameter "
                          "count, step, data position) is damaged: its checksum is %08x, the "
                          "bytes give %08x", path, sizeof full - 1, full.header_crc, crc);
    }
    return PP_OK;
}

/* Where byte offset `at` of a file with n parameters falls, for messages about truncation. */
static const char *part_at(const ckpt_fields *h, size_t at)
{
    size_t hb = h->header_bytes, arr = (size_t)h->n_params * sizeof(float);
    if (at < hb)
        return "the header";
    for (int k = 0; k < 3; k++)
        if (at < hb + (size_t)(k + 1) * arr)
            return k_part_names[k];
    return "the trailer (checksums and end marker)";
}

static pp_status read_checked(const char *path, char **buf, size_t *len, ckpt_fields *h)
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
    int v2 = h->version == CKPT_VERSION;
    size_t arr = (size_t)h->n_params * sizeof(float);
    size_t tb = v2 ? sizeof(ckpt_trailer) : sizeof(ckpt_trailer_v1);
    size_t expect = h->header_bytes + 3 * arr + tb;
    if (*len != expect) {
        if (*len < expect)
            st = PP_ERR(PP_ERR_CORRUPT,
                        "checkpoint '%s' is truncated: %zu bytes, expected %zu for %llu "
                        "parameters (it ends inside %s)", path, *len, expect,
                        (unsigned long long)h->n_params, part_at(h, *len));
        else
            st = PP_ERR(PP_ERR_CORRUPT,
                        "checkpoint '%s' is longer than its contents: %zu bytes, expected %zu "
                        "for %llu parameters", path, *len, expect,
                        (unsigned long long)h->n_params);
        goto fail;
    }
    const char *end = *buf + expect - 4;
    if (memcmp(end, CKPT_END, 4) != 0) {
        st = PP_ERR(PP_ERR_CORRUPT, "checkpoint '%s': the end marker (bytes %zu-%zu) is damaged "
                                    "(expected \"%s\")", path, expect - 4, expect - 1, CKPT_END);
        goto fail;
    }
    if (!v2) {
        ckpt_trailer_v1 tr;
        memcpy(&tr, *buf + expect - sizeof tr, sizeof tr);
        uint32_t crc = pp_crc32c(0, *buf, expect - sizeof tr);
        if (crc != tr.crc) {
            st = PP_ERR(PP_ERR_CORRUPT,
                        "checkpoint '%s' (version 1) is damaged: checksum mismatch (stored %08x, "
                        "computed %08x); version 1 has one checksum over the whole file, so the "
                        "damaged part cannot be named", path, tr.crc, crc);
            goto fail;
        }
        return PP_OK;
    }
    ckpt_trailer tr;
    memcpy(&tr, *buf + expect - sizeof tr, sizeof tr);
    char which[300] = "";
    for (int k = 0; k < 3; k++) {
        size_t at = h->header_bytes + (size_t)k * arr;
        if (pp_crc32c(0, *buf + at, arr) != tr.crc[k]) {
            size_t l = strlen(which);
            snprintf(which + l, sizeof which - l, "%s%s (bytes %zu-%zu)", l ? ", " : "",
                     k_part_names[k], at, at + arr - 1);
        }
    }
    if (which[0]) {
        st = PP_ERR(PP_ERR_CORRUPT, "checkpoint '%s' is damaged: checksum mismatch in %s (or in "
                                    "the trailer's checksums of them)", path, which);
        goto fail;
    }
    return PP_OK;
fail:
    free(*buf);
    *buf = NULL;
    return st;
}

/* read_checked for the callers that do not need the length: on success the contents stay in
 * *keep (the caller frees them with free()), or are freed at once when keep is NULL (only the
 * header was wanted). */
static pp_status read_header_checked(const char *path, char **keep, ckpt_fields *h)
{
    char *buf = NULL;
    size_t len = 0;
    pp_status st = read_checked(path, &buf, &len, h);
    if (keep)
        *keep = buf;
    else
        free(buf);
    return st;
}

pp_status pp_checkpoint_peek_config(const char *path, pp_model_config *cfg)
{
    ckpt_fields h;
    pp_status st = read_header_checked(path, NULL, &h);
    if (st != PP_OK)
        return st;
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
    ckpt_fields h;
    pp_status st = read_header_checked(path, &buf, &h);
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
    const float *p = (const float *)(buf + h.header_bytes);
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
