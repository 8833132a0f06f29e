/* test_train.c: training behaviour users rely on: the tiny model learns the synthetic corpus to
 * near its entropy rate, runs are deterministic, micro-batching does not change the result,
 * resume is bit-identical, and bad checkpoints are refused without touching the trainer. */
#include "pp_runtime.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[64];

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/pp_train_XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(train, .init = setup, .fini = teardown);

static const char *tmp_path(const char *name)
{
    static char path[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", g_dir, name);
    return path[k];
}

/* A small model that still has every layer kind and several heads. */
static pp_train_config small_config(int microbatches)
{
    pp_train_config c;
    memset(&c, 0, sizeof c);
    c.model = (pp_model_config){.vocab_size = 64, .seq_len = 16, .d_model = 32, .n_heads = 4,
                                .n_layers = 2};
    pp_adamw_config_default(&c.opt);
    c.opt.warmup_steps = 2;
    c.batch = 8;
    c.microbatches = microbatches;
    c.steps = 20;
    c.seed = 3;
    return c;
}

static pp_trainer *make_trainer(const pp_train_config *c, uint64_t data_seed)
{
    pp_data *d = NULL;
    cr_assert_eq(pp_data_markov_create(c->model.vocab_size, 4, data_seed, &d), PP_OK);
    pp_trainer *t = NULL;
    cr_assert_eq(pp_trainer_create(c, d, &t), PP_OK, "%s", pp_error_message());
    return t;
}

static void run_steps(pp_trainer *t, int n, float *losses)
{
    for (int i = 0; i < n; i++) {
        pp_step_stats s;
        cr_assert_eq(pp_trainer_step(t, &s), PP_OK, "%s", pp_error_message());
        if (losses)
            losses[i] = s.loss;
    }
}

/* Unoptimised and sanitized builds, several times slower (the sanitized one took 38 s of CI for
 * this test), train 40 steps on the same path and check that the loss falls: the convergence to
 * the entropy rate is the optimised build's to show. */
#if defined(__SANITIZE_ADDRESS__) || !defined(NDEBUG)
#define TINY_STEPS 40
#else
#define TINY_STEPS 300
#endif

Test(train, tiny_reaches_within_15_percent_of_the_entropy_rate_in_300_steps, .timeout = 600)
{
    /* The acceptance run, with pptrain's defaults: tiny, 300 steps, batch 16. */
    pp_train_config c;
    memset(&c, 0, sizeof c);
    cr_assert_eq(pp_model_config_preset("tiny", &c.model), PP_OK);
    pp_adamw_config_default(&c.opt);
    c.batch = 16;
    c.microbatches = 1;
    c.steps = TINY_STEPS;
    c.seed = 1;
    pp_data *d = NULL;
    cr_assert_eq(pp_data_markov_create(256, PP_MARKOV_DEFAULT_BRANCHING, 1, &d), PP_OK);
    double H = pp_data_entropy_rate(d);
    pp_trainer *t = NULL;
    cr_assert_eq(pp_trainer_create(&c, d, &t), PP_OK);
    float losses[TINY_STEPS];
    run_steps(t, TINY_STEPS, losses);
    /* The first loss is that of an untrained model: about ln(256) = 5.55. */
    cr_assert(fabsf(losses[0] - logf(256.0f)) < 0.1f, "first loss %g", (double)losses[0]);
    double tail = 0;
    for (int i = TINY_STEPS - 10; i < TINY_STEPS; i++)
        tail += losses[i];
    tail /= 10;
    cr_log_info("entropy rate %.4f, loss after %d steps %.4f (%.1f%% above)", H, TINY_STEPS, tail,
                100 * (tail / H - 1));
    pp_trainer_destroy(t);
    if (TINY_STEPS < 300) {
        cr_assert_lt(tail, 0.95 * losses[0], "the loss did not fall in %d steps: %.4f -> %.4f",
                     TINY_STEPS, (double)losses[0], tail);
        return;
    }
    cr_assert_leq(tail, 1.15 * H, "final loss %.4f is more than 15%% above the entropy rate %.4f",
                  tail, H);
    /* No model can beat the entropy rate by more than sampling noise. */
    cr_assert_geq(tail, 0.9 * H);
}

Test(train, same_seed_same_run)
{
    pp_train_config c = small_config(1);
    pp_trainer *a = make_trainer(&c, 1), *b = make_trainer(&c, 1);
    float la[5], lb[5];
    run_steps(a, 5, la);
    run_steps(b, 5, lb);
    cr_assert_eq(memcmp(la, lb, sizeof la), 0);
    pp_model *ma = pp_trainer_model(a), *mb = pp_trainer_model(b);
    cr_assert_eq(memcmp(ma->params, mb->params, ma->n_params * sizeof(float)), 0);
    /* and the loss went down */
    cr_assert_lt(la[4], la[0]);
    pp_trainer_destroy(a);
    pp_trainer_destroy(b);
}

Test(train, microbatches_give_the_full_batch_result)
{
    /* Gradient accumulation over M micro-batches equals one full-batch step up to float32
     * summation order: 1e-5 relative over 3 steps. */
    pp_train_config c1 = small_config(1);
    pp_trainer *ref = make_trainer(&c1, 2);
    float lref[3];
    run_steps(ref, 3, lref);
    pp_model *mref = pp_trainer_model(ref);
    int Ms[] = {2, 4, 8};
    for (int k = 0; k < 3; k++) {
        pp_train_config c = small_config(Ms[k]);
        pp_trainer *t = make_trainer(&c, 2);
        float l[3];
        run_steps(t, 3, l);
        for (int i = 0; i < 3; i++)
            cr_assert_float_eq(l[i], lref[i], 1e-5 * fabsf(lref[i]), "M=%d step %d", Ms[k], i);
        pp_model *m = pp_trainer_model(t);
        double diff = 0, norm = 0;
        for (size_t i = 0; i < m->n_params; i++) {
            double d = (double)m->params[i] - mref->params[i];
            diff += d * d;
            norm += (double)mref->params[i] * mref->params[i];
        }
        cr_assert_leq(sqrt(diff / norm), 1e-5, "M=%d: parameters differ by %g relative", Ms[k],
                      sqrt(diff / norm));
        pp_trainer_destroy(t);
    }
    pp_trainer_destroy(ref);
}

Test(train, resume_is_bit_identical)
{
    pp_train_config c = small_config(2);
    pp_trainer *straight = make_trainer(&c, 4);
    float ls[20];
    run_steps(straight, 20, ls);

    pp_trainer *first = make_trainer(&c, 4);
    float lr[20];
    run_steps(first, 10, lr);
    const char *ck = tmp_path("resume.ckpt");
    cr_assert_eq(pp_trainer_save(first, ck), PP_OK, "%s", pp_error_message());
    pp_trainer_destroy(first);

    pp_trainer *second = make_trainer(&c, 4);
    cr_assert_eq(pp_trainer_load(second, ck), PP_OK, "%s", pp_error_message());
    cr_assert_eq(pp_trainer_steps_done(second), 10);
    run_steps(second, 10, lr + 10);

    cr_assert_eq(memcmp(ls, lr, sizeof ls), 0, "losses differ after resume");
    pp_model *a = pp_trainer_model(straight), *b = pp_trainer_model(second);
    cr_assert_eq(memcmp(a->params, b->params, a->n_params * sizeof(float)), 0,
                 "parameters differ after resume");
    pp_trainer_destroy(straight);
    pp_trainer_destroy(second);
}

static void flip_byte(const char *path, long offset)
{
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    fseek(f, offset, offset < 0 ? SEEK_END : SEEK_SET);
    int ch = fgetc(f);
    fseek(f, -1, SEEK_CUR);
    fputc(ch ^ 0x5a, f);
    fclose(f);
}

static void truncate_by(const char *path, long bytes)
{
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    cr_assert_eq(truncate(path, n - bytes), 0);
}

typedef struct bad_ckpt {
    const char *what;
    long flip;     /* byte to flip (negative: from the end), 0 for none */
    long truncate; /* bytes cut from the end */
    const char *phrase;
} bad_ckpt;

static const bad_ckpt k_bad_ckpts[] = {
    {"flipped parameter byte", 500, 0, "checksum mismatch in the parameters (bytes 112-"},
    /* the end marker: its own message, not a "checksum mismatch" between equal values */
    {"flipped end-marker byte", -3, 0, "the end marker (bytes"},
    {"flipped checksum byte", -6, 0, "checksum mismatch in the AdamW second moments"},
    {"flipped parameter-count byte", 41, 0, "the header (bytes 0-111"},
    {"flipped version byte", 4, 0, "has version"},
    {"bad magic", 1, 0, "not a pipeprof checkpoint"},
    {"truncated by 1 byte", 0, 1, "truncated: "},
    {"truncated into the header", 0, -1, "shorter than its 112-byte header"},
};

Test(train, corrupt_checkpoints_are_refused_and_leave_the_trainer_unchanged)
{
    pp_train_config c = small_config(1);
    pp_trainer *t = make_trainer(&c, 5);
    run_steps(t, 2, NULL);
    char good[256], bad[256];
    snprintf(good, sizeof good, "%s", tmp_path("good.ckpt"));
    snprintf(bad, sizeof bad, "%s", tmp_path("bad.ckpt"));
    cr_assert_eq(pp_trainer_save(t, good), PP_OK);
    pp_trainer *victim = make_trainer(&c, 5);
    pp_model *vm = pp_trainer_model(victim);
    float *before = malloc(vm->n_params * sizeof(float));
    memcpy(before, vm->params, vm->n_params * sizeof(float));
    for (size_t i = 0; i < sizeof k_bad_ckpts / sizeof k_bad_ckpts[0]; i++) {
        const bad_ckpt *b = &k_bad_ckpts[i];
        char cmd[600];
        snprintf(cmd, sizeof cmd, "cp %s %s", good, bad);
        cr_assert_eq(system(cmd), 0);
        if (b->flip)
            flip_byte(bad, b->flip);
        if (b->truncate > 0)
            truncate_by(bad, b->truncate);
        if (b->truncate < 0)
            cr_assert_eq(truncate(bad, 40), 0);
        pp_status st = pp_trainer_load(victim, bad);
        cr_assert_eq(st, PP_ERR_CORRUPT, "%s: status %d", b->what, st);
        cr_assert(strstr(pp_error_message(), b->phrase) != NULL, "%s: message '%s'", b->what,
                  pp_error_message());
        cr_assert_eq(pp_status_exit_code(st), PP_EXIT_USAGE);
        cr_assert_eq(memcmp(before, vm->params, vm->n_params * sizeof(float)), 0,
                     "%s: parameters changed", b->what);
        cr_assert_eq(pp_trainer_steps_done(victim), 0);
    }
    cr_assert_eq(pp_trainer_load(victim, tmp_path("missing.ckpt")), PP_ERR_IO);
    free(before);
    pp_trainer_destroy(t);
    pp_trainer_destroy(victim);
}

static char *slurp_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(*len);
    cr_assert_eq(fread(buf, 1, *len, f), *len);
    fclose(f);
    return buf;
}

static void spill_file(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(buf, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

/* One flipped byte in each part of a checkpoint (docs/checkpoint.md): the message names that
 * part, and only it. */
Test(train, a_damaged_checkpoint_names_the_damaged_part)
{
    pp_train_config c = small_config(1);
    pp_trainer *t = make_trainer(&c, 5);
    run_steps(t, 2, NULL);
    const char *good = tmp_path("good.ckpt"), *bad = tmp_path("bad.ckpt");
    cr_assert_eq(pp_trainer_save(t, good), PP_OK);
    size_t len;
    char *img = slurp_file(good, &len);
    size_t n = pp_trainer_model(t)->n_params, arr = 4 * n;
    cr_assert_eq(len, 112 + 3 * arr + 16, "layout of docs/checkpoint.md");
    static const char *const part[3] = {"the parameters", "the AdamW first moments",
                                        "the AdamW second moments"};
    for (int k = 0; k < 3; k++) {
        size_t at = 112 + (size_t)k * arr + arr / 2;
        img[at] ^= 0x10;
        spill_file(bad, img, len);
        img[at] ^= 0x10;
        cr_assert_eq(pp_trainer_load(t, bad), PP_ERR_CORRUPT);
        const char *msg = pp_error_message();
        cr_assert(strstr(msg, part[k]) != NULL, "part %d: %s", k, msg);
        for (int j = 0; j < 3; j++)
            if (j != k)
                cr_assert(strstr(msg, part[j]) == NULL, "part %d blames %d too: %s", k, j, msg);
    }
    /* cut inside the first moments: the message says where the file ends */
    spill_file(bad, img, 112 + arr + 8);
    cr_assert_eq(pp_trainer_load(t, bad), PP_ERR_CORRUPT);
    cr_assert(strstr(pp_error_message(), "ends inside the AdamW first moments") != NULL, "%s",
              pp_error_message());
    free(img);
    pp_trainer_destroy(t);
}

/* Checkpoints of version 1 (one checksum over the file, a 104-byte header) still load, bit for
 * bit; their damage is still caught, with a message that says why it cannot be placed. */
Test(train, version_1_checkpoints_still_load)
{
    pp_train_config c = small_config(1);
    pp_trainer *t = make_trainer(&c, 5);
    run_steps(t, 2, NULL);
    const char *v2 = tmp_path("v2.ckpt"), *v1 = tmp_path("v1.ckpt");
    cr_assert_eq(pp_trainer_save(t, v2), PP_OK);
    size_t len;
    char *img = slurp_file(v2, &len);
    size_t body = len - 112 - 16;
    size_t len1 = 104 + body + 8;
    char *old = malloc(len1);
    memcpy(old, img, 104);
    uint32_t version = 1, header_bytes = 104;
    memcpy(old + 4, &version, 4);
    memcpy(old + 8, &header_bytes, 4);
    memcpy(old + 104, img + 112, body);
    uint32_t crc = pp_crc32c(0, old, 104 + body);
    memcpy(old + 104 + body, &crc, 4);
    memcpy(old + 104 + body + 4, "KCPP", 4);
    spill_file(v1, old, len1);
    pp_trainer *r = make_trainer(&c, 5);
    cr_assert_eq(pp_trainer_load(r, v1), PP_OK, "%s", pp_error_message());
    pp_model *a = pp_trainer_model(t), *b = pp_trainer_model(r);
    cr_assert_eq(memcmp(a->params, b->params, a->n_params * sizeof(float)), 0);
    cr_assert_eq(pp_trainer_steps_done(r), 2);
    old[200] ^= 1;
    spill_file(v1, old, len1);
    cr_assert_eq(pp_trainer_load(r, v1), PP_ERR_CORRUPT);
    cr_assert(strstr(pp_error_message(), "version 1 has one checksum") != NULL, "%s",
              pp_error_message());
    free(old);
    free(img);
    pp_trainer_destroy(t);
    pp_trainer_destroy(r);
}

/* What `kill -9` during a save leaves (a temporary file nobody holds) is removed by the next
 * save; the temporary file of a save still running (held, as the writer holds it) is not. */
Test(train, the_next_save_removes_temporary_files_of_a_killed_save)
{
    pp_train_config c = small_config(1);
    pp_trainer *t = make_trainer(&c, 8);
    const char *ck = tmp_path("a.ckpt");
    /* a real writer killed mid-save: the child creates and locks its temporary file as
     * pp_write_file_atomic does, writes half, and is killed */
    char stale[256];
    snprintf(stale, sizeof stale, "%s.tmpK9k9K9", ck);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        int fd = open(stale, O_CREAT | O_EXCL | O_WRONLY, 0600);
        if (fd < 0 || flock(fd, LOCK_EX) != 0 || write(fd, "half a checkpoint", 17) != 17)
            _exit(1);
        raise(SIGKILL);
        _exit(2);
    }
    int wst = 0;
    cr_assert_eq(waitpid(pid, &wst, 0), pid);
    cr_assert(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL, "status %d", wst);
    cr_assert_eq(access(stale, F_OK), 0, "the killed save left its temporary file");
    /* one held by a live writer (here: this process) */
    char live[256];
    snprintf(live, sizeof live, "%s.tmpL1veL1", ck);
    int lfd = open(live, O_CREAT | O_EXCL | O_WRONLY, 0600);
    cr_assert_geq(lfd, 0);
    cr_assert_eq(flock(lfd, LOCK_EX), 0);
    /* names that only look alike are not ours to remove */
    const char *other = tmp_path("a.ckpt.tmp-notes");
    spill_file(other, "x", 1);
    cr_assert_eq(pp_trainer_save(t, ck), PP_OK, "%s", pp_error_message());
    cr_assert_eq(access(stale, F_OK), -1, "the stale temporary file is still there");
    cr_assert_eq(access(live, F_OK), 0, "a live writer's temporary file was removed");
    cr_assert_eq(access(other, F_OK), 0);
    cr_assert_eq(pp_trainer_load(t, ck), PP_OK, "%s", pp_error_message());
    close(lfd); /* the live writer goes away too: now its file is stale */
    cr_assert_eq(pp_write_file_atomic_cleanup(ck), 1);
    cr_assert_eq(access(live, F_OK), -1);
    pp_trainer_destroy(t);
}

/* A full disk (here: the file size limit, which any user can set; the CLI test uses a full
 * tmpfs) is a runtime error, exit 3, not bad input; the previous checkpoint stays, and no
 * temporary file is left. */
Test(train, a_save_that_runs_out_of_space_is_a_runtime_error)
{
    pp_train_config c = small_config(1);
    pp_trainer *t = make_trainer(&c, 8);
    const char *ck = tmp_path("full.ckpt");
    cr_assert_eq(pp_trainer_save(t, ck), PP_OK);
    size_t len0;
    char *before = slurp_file(ck, &len0);
    run_steps(t, 1, NULL);
    signal(SIGXFSZ, SIG_IGN); /* then write() fails with EFBIG instead of killing */
    struct rlimit rl = {.rlim_cur = 4096, .rlim_max = RLIM_INFINITY};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    pp_status st = pp_trainer_save(t, ck);
    rl.rlim_cur = RLIM_INFINITY;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    cr_assert_eq(st, PP_ERR_RUNTIME, "status %d: %s", st, pp_error_message());
    cr_assert_eq(pp_status_exit_code(st), PP_EXIT_RUNTIME);
    cr_assert(strstr(pp_error_message(), "File too large") != NULL, "%s", pp_error_message());
    cr_assert(strstr(pp_error_message(), "full.ckpt") != NULL, "%s", pp_error_message());
    size_t len1;
    char *after = slurp_file(ck, &len1);
    cr_assert(len0 == len1 && memcmp(before, after, len0) == 0, "the old checkpoint changed");
    DIR *dir = opendir(g_dir);
    struct dirent *e;
    while ((e = readdir(dir)) != NULL)
        cr_assert(strstr(e->d_name, ".tmp") == NULL, "left behind: %s", e->d_name);
    closedir(dir);
    free(before);
    free(after);
    pp_trainer_destroy(t);
}

Test(train, checkpoint_of_another_model_or_data_is_refused)
{
    pp_train_config c = small_config(1);
    pp_trainer *t = make_trainer(&c, 6);
    const char *ck = tmp_path("m.ckpt");
    cr_assert_eq(pp_trainer_save(t, ck), PP_OK);
    pp_train_config other = c;
    other.model.n_layers = 3;
    pp_trainer *o = make_trainer(&other, 6);
    cr_assert_eq(pp_trainer_load(o, ck), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "different model") != NULL, "%s", pp_error_message());
    pp_trainer *d = make_trainer(&c, 7);
    cr_assert_eq(pp_trainer_load(d, ck), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "different data") != NULL, "%s", pp_error_message());
    pp_model_config peek;
    cr_assert_eq(pp_checkpoint_peek_config(ck, &peek), PP_OK);
    cr_assert_eq(memcmp(&peek, &c.model, sizeof peek), 0);
    pp_trainer_destroy(t);
    pp_trainer_destroy(o);
    pp_trainer_destroy(d);
}

Test(train, save_is_atomic)
{
    pp_train_config c = small_config(1);
    pp_trainer *t = make_trainer(&c, 8);
    cr_assert_eq(pp_trainer_save(t, "/tmp/pp_no_such_dir_q/x.ckpt"), PP_ERR_IO);
    const char *ck = tmp_path("a.ckpt");
    cr_assert_eq(pp_trainer_save(t, ck), PP_OK);
    run_steps(t, 1, NULL);
    cr_assert_eq(pp_trainer_save(t, ck), PP_OK); /* overwrite in place */
    DIR *dir = opendir(g_dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL)
        n += e->d_name[0] != '.';
    closedir(dir);
    cr_assert_eq(n, 1, "temporary files left next to the checkpoint");
    pp_trainer_destroy(t);
}

Test(train, invalid_training_configs_are_named)
{
    pp_train_config c = small_config(3); /* 8 sequences do not split into 3 */
    cr_assert_eq(pp_train_config_validate(&c), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "not divisible by microbatches") != NULL);
    c = small_config(1);
    c.opt.lr = -1;
    cr_assert_eq(pp_train_config_validate(&c), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "learning rate") != NULL);
    c = small_config(16);
    cr_assert_eq(pp_train_config_validate(&c), PP_ERR_INVALID);
}

Test(train, learning_rate_schedule)
{
    pp_adamw_config o;
    pp_adamw_config_default(&o);
    o.lr = 1.0f;
    o.warmup_steps = 10;
    o.lr_min_ratio = 0.1f;
    cr_assert_float_eq(pp_adamw_lr_at(&o, 5, 110), 0.5f, 1e-6);
    cr_assert_float_eq(pp_adamw_lr_at(&o, 10, 110), 1.0f, 1e-6);
    cr_assert_float_eq(pp_adamw_lr_at(&o, 60, 110), 0.55f, 1e-6); /* half-way down the cosine */
    cr_assert_float_eq(pp_adamw_lr_at(&o, 110, 110), 0.1f, 1e-6);
    o.cosine = 0;
    cr_assert_float_eq(pp_adamw_lr_at(&o, 100, 110), 1.0f, 1e-6);
    cr_assert_float_eq(pp_grad_clip_scale(1.0f, 4.0), 0.25f, 1e-7);
    cr_assert_float_eq(pp_grad_clip_scale(1.0f, 0.5), 1.0f, 1e-7);
    cr_assert_float_eq(pp_grad_clip_scale(0.0f, 100.0), 1.0f, 1e-7);
}
