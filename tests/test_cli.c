/* test_cli.c: pptrain as a user runs it: every bad flag, config, data file and checkpoint gets a
 * message naming the problem and exit code 2, no crash and no checkpoint left behind; a good run
 * prints per-step lines and writes the JSON step log. */
#include "pp_runtime.h"

#include "pp_testkit.h"

#include <cJSON.h>
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PPTRAIN PP_BUILD_DIR "/tools/pptrain"

static void setup(void) { tk_dir_create("pp_cli"); }

TestSuite(cli, .init = setup, .fini = tk_dir_remove);

/* Runs pptrain with args (NULL-terminated, without argv[0]) and `env` added (NAME=VALUE,
 * NULL-terminated, or NULL). The result lives until the next call. */
static tk_result *run_env(const char *const *args, const char *const *env)
{
    static tk_result r;
    tk_result_free(&r);
    r = tk_run(PPTRAIN, args, env);
    return &r;
}

static tk_result *run(const char *const *args) { return run_env(args, NULL); }

/* Writes text to name in the test's directory; returns the path. */
static const char *write_text(const char *name, const char *text)
{
    const char *p = tk_path(name);
    tk_write_text(p, text);
    return p;
}

Test(cli, help_exits_zero)
{
    const char *a[] = {"--help", NULL};
    tk_result *r = run(a);
    cr_assert_eq(r->code, 0);
    cr_assert(strstr(r->out, "--microbatches") != NULL);
}

Test(cli, a_short_run_prints_steps_and_logs_json)
{
    char log[256], ck[256];
    snprintf(log, sizeof log, "%s", tk_path("log.jsonl"));
    snprintf(ck, sizeof ck, "%s", tk_path("run.ckpt"));
    const char *a[] = {"--steps", "3", "--batch", "4", "--microbatches", "2", "--log-json", log,
                       "--save", ck, NULL};
    tk_result *r = run(a);
    cr_assert_eq(r->code, 0, "stderr: %s", r->err);
    cr_assert(strstr(r->out, "step      3/3") != NULL, "%s", r->out);
    cr_assert(strstr(r->out, "tok/s") != NULL);
    cr_assert(strstr(r->out, "entropy rate") != NULL);
    cr_assert(tk_exists(ck));
    char *text = tk_slurp(log, NULL);
    cr_assert_not_null(text, "no log %s", log);
    int lines = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        cr_assert_not_null(j, "not JSON: %s", line);
        cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(j, "step")));
        cr_assert_eq(cJSON_GetObjectItem(j, "step")->valueint, lines + 1);
        cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(j, "loss")));
        cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(j, "step_ms")));
        cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(j, "tokens_per_s")));
        cJSON_Delete(j);
        lines++;
    }
    free(text);
    cr_assert_eq(lines, 3);
    /* resuming to a later step continues from the checkpoint */
    const char *b[] = {"--steps", "5", "--batch", "4", "--resume", ck, NULL};
    r = run(b);
    cr_assert_eq(r->code, 0, "stderr: %s", r->err);
    cr_assert(strstr(r->out, "at step 3") != NULL, "%s", r->out);
    cr_assert(strstr(r->out, "step      4/5") != NULL, "%s", r->out);
}

typedef struct bad_case {
    const char *args[16];
    const char *phrase; /* expected in stderr */
} bad_case;

/* Paths in args starting with '@' are made relative to the test's temp dir. */
static const bad_case k_bad[] = {
    {{"--bogus", NULL}, "unknown option '--bogus'"},
    {{"--steps", NULL}, "needs a value"},
    {{"--steps", "abc", NULL}, "--steps: 'abc' is not an integer"},
    {{"--steps", "-1", NULL}, "--steps: -1 is out of range"},
    {{"--batch", "0", NULL}, "--batch: 0 is out of range"},
    {{"--batch", "16", "--microbatches", "3", NULL}, "not divisible by microbatches"},
    {{"--batch", "4", "--microbatches", "8", NULL}, "microbatches 8 must be in [1, batch = 4]"},
    {{"--model", "huge", NULL}, "unknown model preset 'huge'"},
    {{"--heads", "3", NULL}, "not divisible by n_heads"},
    {{"--lr", "-1", NULL}, "--lr: -1 is out of range"},
    {{"--lr", "nan", NULL}, "--lr: 'nan' is not a finite number"},
    {{"--lr-decay", "linear", NULL}, "--lr-decay must be"},
    {{"--save-every", "5", NULL}, "--save-every needs --save"},
    {{"--config", "@missing.json", NULL}, "missing.json"},
    {{"--config", "@bad.json", NULL}, "unknown key \"layers\""},
    {{"--data", "@missing.tok", NULL}, "missing.tok"},
    {{"--data", "@short.tok", NULL}, "truncated"},
    {{"--resume", "@missing.ckpt", NULL}, "missing.ckpt"},
    {{"--resume", "@corrupt.ckpt", "--save", "@out.ckpt", NULL}, "checksum mismatch"},
    {{"--save", "/tmp/pp_no_such_dir_cli/x.ckpt", NULL}, "does not exist or is not writable"},
    {{"--markov-branching", "1", NULL}, "--markov-branching: 1 is out of range"},
    {{"extra", NULL}, "unexpected argument 'extra'"},
    /* pipeline */
    {{"--schedule", "pipedream", NULL}, "unknown schedule 'pipedream'"},
    {{"--stages", "2", "--schedule", "interleaved", "--microbatches", "3", NULL},
     "a multiple of stages"},
    {{"--schedule", "interleaved", "--stages", "2", "--virtual-stages", "1", "--microbatches", "2",
      NULL},
     "needs v >= 2"},
    {{"--boundaries", "0,3,2,6", NULL}, "not increasing at position 2"},
    {{"--boundaries", "0,3,9", NULL}, "out of range"},
    {{"--boundaries", "0,3,x,6", NULL}, "'x' at position 2 is not an integer"},
    {{"--stages", "7", NULL}, "exceed the model's 6 layers"},
    {{"--stages", "2", "--boundaries", "0,3,6", NULL}, "not both"},
    {{"--backend", "gpu", NULL}, "--backend must be"},
    {{"--backend", "sim", NULL}, "needs --costs"},
    {{"--backend", "sim", "--costs", "@bad_costs.json", NULL}, "\"fwd_us\" must be a number"},
    {{"--backend", "sim", "--costs", "@missing_costs.json", NULL}, "missing_costs.json"},
    {{"--backend", "sim", "--costs", "@good_costs.json", "--model", "tiny", NULL},
     "takes the model from --costs"},
    {{"--backend", "sim", "--costs", "@good_costs.json", "--sim-slow", "9=2", NULL},
     "stage 9 does not exist"},
    /* a cost whose nanoseconds do not fit 64 bits (converting it was undefined behaviour) */
    {{"--backend", "sim", "--costs", "@huge_costs.json", NULL},
     "layer 1 (\"b\"): bwd_us is 1e+300 us: 1e+303 ns does not fit the sim's 64-bit "
     "nanosecond clock"},
    {{"--backend", "sim", "--costs", "@slow_link_costs.json", "--stages", "2", NULL},
     "a transfer of 1000 bytes (p2p_latency_us + bytes / p2p_GBps) is 1e+300 us"},
    {{"--backend", "sim", "--costs", "@sum_costs.json", "--stages", "1", NULL},
     "stage 0's work for one micro-batch"},
    {{"--backend", "sim", "--costs", "@huge_dp_costs.json", NULL},
     "the data-parallel all-reduce (the cost file's dp_allreduce_us and dp_allreduce_us_per_MB) "
     "is 1e+300 us"},
    {{"--backend", "sim", "--costs", "@huge_gap_costs.json", NULL}, "op_gap_us is 1e+300 us"},
    {{"--plan", "@bad_plan.json", NULL}, "missing \"num_layers\""},
    {{"--plan", "@plan9.json", NULL}, "made for a model of 9 layers; this model has 6"},
    {{"--plan", "@plan6.json", "--schedule", "gpipe", NULL}, "contradicts plan"},
};

Test(cli, bad_input_exits_2_with_a_clear_message)
{
    write_text("bad.json", "{\"layers\": 4}");
    write_text("bad_costs.json", "{\"layers\": [{\"name\": \"a\", \"fwd_us\": -1, \"bwd_us\": 2}]}");
    write_text("good_costs.json", "{\"layers\": [{\"name\": \"a\", \"fwd_us\": 1, \"bwd_us\": 2},"
                                  "{\"name\": \"b\", \"fwd_us\": 1, \"bwd_us\": 2}]}");
    write_text("huge_costs.json", "{\"layers\": [{\"name\": \"a\", \"fwd_us\": 1, \"bwd_us\": 2},"
                                  "{\"name\": \"b\", \"fwd_us\": 1, \"bwd_us\": 1e300}]}");
    write_text("slow_link_costs.json",
               "{\"p2p_GBps\": 1e-300, \"layers\": [{\"name\": \"a\", \"fwd_us\": 1, \"bwd_us\": 2, "
               "\"activation_bytes\": 1000}, {\"name\": \"b\", \"fwd_us\": 1, \"bwd_us\": 2}]}");
    /* each below the limit (2^62 ns = 4.6e15 us), together above it */
    write_text("sum_costs.json", "{\"layers\": [{\"name\": \"a\", \"fwd_us\": 4e15, \"bwd_us\": 2},"
                                 "{\"name\": \"b\", \"fwd_us\": 4e15, \"bwd_us\": 2}]}");
    write_text("huge_dp_costs.json", "{\"dp_allreduce_us\": 1e300, \"layers\": [{\"name\": \"a\", "
                                     "\"fwd_us\": 1, \"bwd_us\": 2}]}");
    write_text("huge_gap_costs.json", "{\"op_gap_us\": 1e300, \"layers\": [{\"name\": \"a\", "
                                      "\"fwd_us\": 1, \"bwd_us\": 2}]}");
    write_text("bad_plan.json", "{\"version\": 1, \"stages\": 2}");
    write_text("plan9.json", "{\"version\": 1, \"num_layers\": 9, \"stages\": 2, \"boundaries\": "
                             "[0,3,9], \"schedule\": \"1f1b\", \"microbatches\": 2}");
    write_text("plan6.json", "{\"version\": 1, \"num_layers\": 6, \"stages\": 2, \"boundaries\": "
                             "[0,3,6], \"schedule\": \"1f1b\", \"microbatches\": 2}");
    /* a token file cut short by one byte */
    int32_t toks[200];
    for (int i = 0; i < 200; i++)
        toks[i] = i % 256;
    char tok[256];
    snprintf(tok, sizeof tok, "%s", tk_path("short.tok"));
    cr_assert_eq(pp_tokfile_write(tok, toks, 200, 2), PP_OK, "%s", pp_error_message());
    struct stat sb;
    stat(tok, &sb);
    cr_assert_eq(truncate(tok, sb.st_size - 1), 0);
    /* a checkpoint with one byte flipped */
    char ck[256];
    snprintf(ck, sizeof ck, "%s", tk_path("corrupt.ckpt"));
    const char *mk[] = {"--steps", "1", "--batch", "2", "--save", ck, "-q", NULL};
    cr_assert_eq(run(mk)->code, 0);
    FILE *f = fopen(ck, "r+b");
    fseek(f, 300, SEEK_SET);
    fputc(0xAB, f);
    fclose(f);

    for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
        const char *args[16];
        char paths[16][256];
        for (int k = 0; k < 16; k++) {
            args[k] = k_bad[i].args[k];
            if (args[k] && args[k][0] == '@') {
                snprintf(paths[k], sizeof paths[k], "%s", tk_path(args[k] + 1));
                args[k] = paths[k];
            }
            if (!args[k])
                break;
        }
        tk_result *r = run(args);
        cr_assert_eq(r->code, 2, "case %zu (%s): exit %d, stderr: %s", i, k_bad[i].args[0],
                     r->code, r->err);
        cr_assert(strstr(r->err, k_bad[i].phrase) != NULL, "case %zu: stderr '%s' lacks '%s'", i,
                  r->err, k_bad[i].phrase);
        cr_assert(strncmp(r->err, "pptrain: ", 9) == 0, "case %zu: '%s'", i, r->err);
    }
    cr_assert(!tk_exists(tk_path("out.ckpt")), "a failed run left a checkpoint behind");
}

/* A disk that fills up during --save is the machine's problem, not the user's input: exit 3
 * (not 2), a message saying so, and no temporary file left to fill it further. Needs to mount a
 * 1 MiB tmpfs (root); skipped where that is not allowed. */
Test(cli, a_full_disk_during_save_is_exit_3)
{
    const char *mnt = tk_path("full");
    cr_assert_eq(mkdir(mnt, 0755), 0);
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=1m tmpfs '%s' 2>/dev/null", mnt);
    if (system(cmd) != 0)
        cr_skip_test("cannot mount a small tmpfs here (not root?)");
    char ck[PATH_MAX];
    snprintf(ck, sizeof ck, "%s/c.ckpt", mnt); /* the tiny model's checkpoint is ~2.8 MB */
    const char *args[] = {"--steps", "1", "--batch", "2", "--save", ck, "-q", NULL};
    tk_result *r = run(args);
    int code = r->code;
    char err[1024];
    snprintf(err, sizeof err, "%s", r->err);
    snprintf(cmd, sizeof cmd, "ls -A '%s'", mnt);
    FILE *ls = popen(cmd, "r");
    char left[256] = "";
    if (ls) {
        if (!fgets(left, sizeof left, ls))
            left[0] = '\0';
        pclose(ls);
    }
    snprintf(cmd, sizeof cmd, "umount '%s'", mnt);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(code, 3, "exit %d: %s", code, err);
    cr_assert(strstr(err, "No space left on device") != NULL, "%s", err);
    cr_assert(strstr(err, "c.ckpt") != NULL, "%s", err);
    cr_assert_str_empty(left, "left on the full disk: %s", left);
}

/* The loss column of a --log-json file, one value per line, as printed. */
static void losses_of(const char *log, char *out, size_t cap)
{
    char *text = tk_slurp(log, NULL);
    cr_assert_not_null(text, "no log %s", log);
    out[0] = '\0';
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        cr_assert_not_null(j);
        char v[64];
        snprintf(v, sizeof v, "%.9g ", cJSON_GetObjectItem(j, "loss")->valuedouble);
        strncat(out, v, cap - strlen(out) - 1);
        cJSON_Delete(j);
    }
    free(text);
}

Test(cli, resume_matches_a_straight_run)
{
    /* tk_path() recycles its buffers and run() uses it too: keep private copies. */
    char a_log[256], a_ck[256];
    snprintf(a_log, sizeof a_log, "%s", tk_path("a.jsonl"));
    snprintf(a_ck, sizeof a_ck, "%s", tk_path("a.ckpt"));
    const char *run_a[] = {"--steps", "20", "--batch", "4", "-q", "--log-json", a_log,
                           "--save", a_ck, NULL};
    cr_assert_eq(run(run_a)->code, 0);
    char b1_log[256], b2_log[256], b_ck[256];
    snprintf(b1_log, sizeof b1_log, "%s", tk_path("b1.jsonl"));
    snprintf(b2_log, sizeof b2_log, "%s", tk_path("b2.jsonl"));
    snprintf(b_ck, sizeof b_ck, "%s", tk_path("b.ckpt"));
    const char *run_b1[] = {"--steps", "20", "--stop-at", "10", "--batch", "4", "-q",
                            "--log-json", b1_log, "--save", b_ck, NULL};
    cr_assert_eq(run(run_b1)->code, 0);
    const char *run_b2[] = {"--steps", "20", "--batch", "4", "-q", "--resume", b_ck,
                            "--log-json", b2_log, "--save", b_ck, NULL};
    tk_result *r = run(run_b2);
    cr_assert_eq(r->code, 0, "%s", r->err);
    char la[4096], lb1[4096], lb2[4096];
    losses_of(a_log, la, sizeof la);
    losses_of(b1_log, lb1, sizeof lb1);
    losses_of(b2_log, lb2, sizeof lb2);
    strncat(lb1, lb2, sizeof lb1 - strlen(lb1) - 1);
    cr_assert_str_eq(la, lb1, "losses differ after resume");
    /* Parameters, moments, step count and data position: the two final checkpoints are the same
     * bytes. */
    char ca[1 << 16], cb[1 << 16];
    FILE *fa = fopen(a_ck, "rb"), *fb = fopen(b_ck, "rb");
    cr_assert(fa && fb);
    cr_assert_eq(fseek(fa, 0, SEEK_END), 0);
    long size = ftell(fa);
    rewind(fa);
    int same = 1;
    size_t na, nb;
    while ((na = fread(ca, 1, sizeof ca, fa)) > 0) {
        nb = fread(cb, 1, sizeof cb, fb);
        same &= na == nb && memcmp(ca, cb, na) == 0;
    }
    same &= fread(cb, 1, 1, fb) == 0;
    fclose(fa);
    fclose(fb);
    cr_assert(size > 1000);
    cr_assert(same, "final checkpoints differ");
}

Test(cli, pipeline_runs_on_the_cpu_and_sim_backends_and_follow_a_plan)
{
    const char *cpu[] = {"--stages", "3", "--schedule", "gpipe", "--microbatches", "2", "--batch",
                         "4", "--steps", "2", NULL};
    tk_result *r = run(cpu);
    cr_assert_eq(r->code, 0, "%s", r->err);
    cr_assert(strstr(r->out, "pipeline: 3 stage(s), schedule gpipe, 2 micro-batch(es)") != NULL,
              "%s", r->out);
    cr_assert(strstr(r->out, "boundaries 0,2,4,6") != NULL, "%s", r->out);
    cr_assert(strstr(r->out, "step      2/2 | loss") != NULL, "%s", r->out);

    char costs[256];
    snprintf(costs, sizeof costs, "%s", write_text("c.json",
        "{\"layers\": [{\"name\": \"a\", \"fwd_us\": 100, \"bwd_us\": 200},"
        "{\"name\": \"b\", \"fwd_us\": 100, \"bwd_us\": 200}]}"));
    const char *sim[] = {"--backend", "sim", "--costs", costs, "--stages", "2", "--microbatches",
                         "4", "--steps", "2", NULL};
    r = run(sim);
    cr_assert_eq(r->code, 0, "%s", r->err);
    cr_assert(strstr(r->out, "model: 2 layers from cost file") != NULL, "%s", r->out);
    cr_assert(strstr(r->out, "mean step time") != NULL, "%s", r->out);

    /* a plan sets the cut, the schedule and the micro-batches; PPROF_PLAN works like --plan */
    char plan[256];
    snprintf(plan, sizeof plan, "%s", write_text("p.json",
        "{\"version\": 1, \"num_layers\": 6, \"stages\": 2, \"boundaries\": [0,4,6], "
        "\"schedule\": \"zb-h1\", \"microbatches\": 4, \"microbatch_size\": 1}"));
    char plan_env[300];
    snprintf(plan_env, sizeof plan_env, "PPROF_PLAN=%s", plan);
    const char *planned[] = {"--steps", "1", NULL};
    const char *planned_env[] = {plan_env, NULL};
    r = run_env(planned, planned_env);
    cr_assert_eq(r->code, 0, "%s", r->err);
    cr_assert(strstr(r->out, "2 stage(s), schedule zb-h1, 4 micro-batch(es)") != NULL, "%s",
              r->out);
    cr_assert(strstr(r->out, "boundaries 0,4,6") != NULL, "%s", r->out);
    cr_assert(strstr(r->out, "batch 4 (4 micro-batches)") != NULL, "%s", r->out);

    /* the plan's recompute choice is applied like its boundaries (issue 17) */
    snprintf(plan, sizeof plan, "%s", write_text("pr.json",
        "{\"version\": 1, \"num_layers\": 6, \"stages\": 2, \"boundaries\": [0,4,6], "
        "\"schedule\": \"1f1b\", \"microbatches\": 4, \"microbatch_size\": 1, "
        "\"recompute\": \"s1\"}"));
    snprintf(plan_env, sizeof plan_env, "PPROF_PLAN=%s", plan);
    const char *rc_cli[] = {"--steps", "1", "--recompute", "full", NULL};
    r = run_env(rc_cli, planned_env);
    cr_assert_eq(r->code, 0, "%s", r->err);
    cr_assert(strstr(r->out, ", recompute s1") != NULL, "%s", r->out);
    cr_assert(strstr(r->err, "replaces --recompute full with s1") != NULL, "%s", r->err);
    const char *rc_plan[] = {"--plan", plan, "--steps", "1", "--recompute", "full", NULL};
    r = run(rc_plan);
    cr_assert_eq(r->code, 2, "%s", r->err);
    cr_assert(strstr(r->err, "--recompute full contradicts plan") != NULL, "%s", r->err);

    const char *print[] = {"--stages", "2", "--microbatches", "2", "--print-schedule", NULL};
    r = run(print);
    cr_assert_eq(r->code, 0, "%s", r->err);
    cr_assert(strstr(r->out, "s0: ") != NULL && strstr(r->out, "s1: ") != NULL, "%s", r->out);
}
