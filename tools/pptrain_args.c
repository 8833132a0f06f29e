/* pptrain_args.c: pptrain's command line. Number flags (with their ranges) and string flags are
 * tables, the few choices a switch, parsed with getopt_long into pptrain_args; the checks between
 * flags and the PPROF_PLAN environment come after; then the model config and the partition (from
 * a plan file, explicit boundaries or an even split) are built from them. Called by
 * tools/pptrain.c. */
#include "pptrain_args.h"
#include "pp_tool.h"

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static const char *k_usage =
    "usage: pptrain [options]\n"
    "Trains a GPT-style decoder-only transformer, pipeline-parallel.\n"
    "\n"
    "pipeline:\n"
    "  --stages S            pipeline stages, layers split evenly (default 1)\n"
    "  --boundaries LIST     explicit cut of the layer list, e.g. 0,3,7,12,14 (S*v+1 values)\n"
    "  --plan FILE           a plan from pprof-tune (docs/plan-file.md); also $PPROF_PLAN\n"
    "  --schedule NAME       gpipe, 1f1b (default), interleaved, zb-h1\n"
    "  --virtual-stages V    model chunks per stage for interleaved (default 2 there, else 1)\n"
    "  --backend NAME        cpu (default): compute; sim: sleep per --costs; cuda: compute on\n"
    "                        a GPU, one stream per stage (CUDA builds)\n"
    "  --precision P         cuda: fp32 (default), tf32 (TF32 tensor-core GEMMs) or bf16\n"
    "                        (bf16 GEMM operands, float32 accumulation and master weights)\n"
    "  --device N            cuda: the GPU (default 0; under mpirun the node-local rank)\n"
    "  --costs FILE          per-layer costs for the sim backend (docs/cost-file.md); the\n"
    "                        cost file's layer list is the model\n"
    "  --sim-slow S=F        sim: multiply stage S's compute costs by F (a straggler)\n"
    "  --sim-jitter SPEC     sim: each compute op's cost times a seeded random factor:\n"
    "                        lognormal:SIGMA (median 1), uniform:W (in [1-W, 1+W]),\n"
    "                        tail:P:X (X times longer with probability P),\n"
    "                        regime:A-B:X (steps A..B X times longer: a machine\n"
    "                        slower for a stretch), seed=N (default --seed);\n"
    "                        comma-separated, e.g. lognormal:0.1,tail:0.01:4\n"
    "                        (docs/executor.md, \"Jitter\")\n"
    "  --recompute WHAT      activation recomputation: none (default), full, or a list of\n"
    "                        layers and stages, e.g. 1-4,7 (layer indices of the layer list,\n"
    "                        0 = embedding) or s0,s2-3 (every layer of those stages): a\n"
    "                        recomputed layer keeps only its input and runs its forward\n"
    "                        again in the backward (docs/pptrain.md)\n"
    "  --print-schedule      print each stage's instruction list and exit\n"
    "  --transport NAME      inproc (default): stages are threads of this process; mpi: one\n"
    "                        stage per MPI rank, mpirun -np S pptrain --transport mpi ...;\n"
    "                        nccl: one stage per rank and GPU, ncclSend/ncclRecv (cuda)\n"
    "  --dp N                data-parallel replicas of the pipeline (needs --transport mpi,\n"
    "                        mpirun -np S*N): rank r runs stage r % S of replica r / S; each\n"
    "                        replica trains --batch / N of the batch, gradients all-reduced\n"
    "  --clock-sync N        mpi: N ping-pong round trips between rank 0 and every rank at\n"
    "                        start and end, NVTX-marked for the analyzer's clock alignment\n"
    "                        across hosts (default 8, 0: none)\n"
    "\n"
    "model:\n"
    "  --model NAME          built-in preset: tiny (default), small, gpt2 (124M, GPUs)\n"
    "  --config FILE         JSON model config (docs/model.md); applied after --model\n"
    "  --vocab N, --seq N, --d-model N, --heads N, --layers N\n"
    "                        override single fields of the model config\n"
    "training:\n"
    "  --steps N             optimizer steps to reach (default 300); a resumed run continues\n"
    "                        from its checkpoint's step up to N\n"
    "  --stop-at N           stop after step N this run (the schedule still spans --steps),\n"
    "                        e.g. to checkpoint and resume later\n"
    "  --batch N             sequences per optimizer step (default 16)\n"
    "  --microbatches M      split each batch into M micro-batches, gradients accumulated\n"
    "                        (default 1; must divide --batch)\n"
    "  --lr X                peak learning rate (default 3e-3)\n"
    "  --warmup N            linear warm-up steps (default 20)\n"
    "  --lr-decay KIND       cosine (default, to 10% of --lr at --steps) or constant\n"
    "  --weight-decay X      AdamW decoupled weight decay on matrices (default 0.1)\n"
    "  --clip X              global gradient-norm clip, 0 disables (default 1.0)\n"
    "  --seed N              parameter initialisation and synthetic data (default 1)\n"
    "data:\n"
    "  --data FILE           a token file (docs/token-file.md); default: the built-in\n"
    "                        synthetic Markov corpus, whose entropy rate is the best loss\n"
    "  --markov-branching K  successors per token of the synthetic corpus (default 4)\n"
    "checkpoints and logs:\n"
    "  --save FILE           write a checkpoint at the end (and every --save-every steps)\n"
    "  --save-every N        also checkpoint every N steps (needs --save)\n"
    "  --resume FILE         continue from a checkpoint (model config taken from it)\n"
    "  --log-json FILE       one JSON object per step: step, loss, step_ms, tokens_per_s, lr,\n"
    "                        grad_norm\n"
    "  -q, --quiet           print only the final summary\n"
    "  -v, --verbose         more diagnostics on stderr\n"
    "  -h, --help            this help\n"
    "      --version         the version and the git commit built from\n"
    "\n"
    "exit codes: 0 ok, 2 bad flag, config, data or checkpoint, 3 runtime error\n";

enum {
    OPT_MODEL = 256, OPT_CONFIG, OPT_VOCAB, OPT_SEQ, OPT_DMODEL, OPT_HEADS, OPT_LAYERS,
    OPT_STEPS, OPT_STOP_AT, OPT_BATCH, OPT_MICRO, OPT_LR, OPT_WARMUP, OPT_DECAY, OPT_WD, OPT_CLIP,
    OPT_SEED, OPT_DATA, OPT_BRANCH, OPT_SAVE, OPT_SAVE_EVERY, OPT_RESUME, OPT_LOG_JSON,
    OPT_STAGES, OPT_BOUNDS, OPT_PLAN, OPT_SCHEDULE, OPT_VSTAGES, OPT_BACKEND, OPT_COSTS,
    OPT_SLOW, OPT_PRINT_SCHED, OPT_TRANSPORT, OPT_DP, OPT_CLOCK_SYNC, OPT_PRECISION, OPT_DEVICE,
    OPT_JITTER, OPT_RECOMPUTE
};

static const struct option k_opts[] = {
    {"model", required_argument, 0, OPT_MODEL},
    {"config", required_argument, 0, OPT_CONFIG},
    {"vocab", required_argument, 0, OPT_VOCAB},
    {"seq", required_argument, 0, OPT_SEQ},
    {"d-model", required_argument, 0, OPT_DMODEL},
    {"heads", required_argument, 0, OPT_HEADS},
    {"layers", required_argument, 0, OPT_LAYERS},
    {"steps", required_argument, 0, OPT_STEPS},
    {"stop-at", required_argument, 0, OPT_STOP_AT},
    {"batch", required_argument, 0, OPT_BATCH},
    {"microbatches", required_argument, 0, OPT_MICRO},
    {"lr", required_argument, 0, OPT_LR},
    {"warmup", required_argument, 0, OPT_WARMUP},
    {"lr-decay", required_argument, 0, OPT_DECAY},
    {"weight-decay", required_argument, 0, OPT_WD},
    {"clip", required_argument, 0, OPT_CLIP},
    {"seed", required_argument, 0, OPT_SEED},
    {"data", required_argument, 0, OPT_DATA},
    {"markov-branching", required_argument, 0, OPT_BRANCH},
    {"save", required_argument, 0, OPT_SAVE},
    {"save-every", required_argument, 0, OPT_SAVE_EVERY},
    {"resume", required_argument, 0, OPT_RESUME},
    {"log-json", required_argument, 0, OPT_LOG_JSON},
    {"stages", required_argument, 0, OPT_STAGES},
    {"boundaries", required_argument, 0, OPT_BOUNDS},
    {"plan", required_argument, 0, OPT_PLAN},
    {"schedule", required_argument, 0, OPT_SCHEDULE},
    {"virtual-stages", required_argument, 0, OPT_VSTAGES},
    {"backend", required_argument, 0, OPT_BACKEND},
    {"costs", required_argument, 0, OPT_COSTS},
    {"sim-slow", required_argument, 0, OPT_SLOW},
    {"sim-jitter", required_argument, 0, OPT_JITTER},
    {"recompute", required_argument, 0, OPT_RECOMPUTE},
    {"print-schedule", no_argument, 0, OPT_PRINT_SCHED},
    {"transport", required_argument, 0, OPT_TRANSPORT},
    {"dp", required_argument, 0, OPT_DP},
    {"clock-sync", required_argument, 0, OPT_CLOCK_SYNC},
    {"precision", required_argument, 0, OPT_PRECISION},
    {"device", required_argument, 0, OPT_DEVICE},
    {"quiet", no_argument, 0, 'q'},
    {"verbose", no_argument, 0, 'v'},
    {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, PP_TOOL_OPT_VERSION},
    {0, 0, 0, 0},
};

#define AT(field) offsetof(pptrain_args, field)

/* Number flags: where the value goes (an int, int64_t, uint64_t or float field) and its range
 * (lo, hi for the integers; flo, fhi for the reals). */
typedef enum { INT_FIELD, I64_FIELD, U64_FIELD, F32_FIELD } num_field;
typedef struct num_opt {
    int id;
    const char *flag;
    size_t at;
    num_field type;
    int64_t lo, hi;
    double flo, fhi;
} num_opt;

static const num_opt k_num_opts[] = {
    {OPT_VOCAB, "--vocab", AT(shape[0]), INT_FIELD, 1, PP_MAX_VOCAB, 0, 0},
    {OPT_SEQ, "--seq", AT(shape[1]), INT_FIELD, 1, PP_MAX_VOCAB, 0, 0},
    {OPT_DMODEL, "--d-model", AT(shape[2]), INT_FIELD, 1, PP_MAX_VOCAB, 0, 0},
    {OPT_HEADS, "--heads", AT(shape[3]), INT_FIELD, 1, PP_MAX_VOCAB, 0, 0},
    {OPT_LAYERS, "--layers", AT(shape[4]), INT_FIELD, 1, PP_MAX_VOCAB, 0, 0},
    {OPT_STEPS, "--steps", AT(tc.steps), I64_FIELD, 0, INT64_C(1) << 40, 0, 0},
    {OPT_STOP_AT, "--stop-at", AT(stop_at), I64_FIELD, 1, INT64_C(1) << 40, 0, 0},
    {OPT_BATCH, "--batch", AT(tc.batch), INT_FIELD, 1, 1 << 20, 0, 0},
    {OPT_MICRO, "--microbatches", AT(tc.microbatches), INT_FIELD, 1, 1 << 20, 0, 0},
    {OPT_WARMUP, "--warmup", AT(tc.opt.warmup_steps), INT_FIELD, 0, 1 << 30, 0, 0},
    {OPT_SEED, "--seed", AT(tc.seed), U64_FIELD, 0, INT64_MAX, 0, 0},
    {OPT_BRANCH, "--markov-branching", AT(branching), INT_FIELD, 2, PP_MAX_VOCAB, 0, 0},
    {OPT_SAVE_EVERY, "--save-every", AT(save_every), I64_FIELD, 1, INT64_C(1) << 40, 0, 0},
    {OPT_STAGES, "--stages", AT(stages), INT_FIELD, 1, PP_SCHED_MAX_S, 0, 0},
    {OPT_VSTAGES, "--virtual-stages", AT(v), INT_FIELD, 1, PP_SCHED_MAX_V, 0, 0},
    {OPT_DEVICE, "--device", AT(device), INT_FIELD, 0, 1023, 0, 0},
    {OPT_DP, "--dp", AT(dp), INT_FIELD, 1, 4096, 0, 0},
    {OPT_CLOCK_SYNC, "--clock-sync", AT(clock_sync), INT_FIELD, 0, 1000, 0, 0},
    {OPT_LR, "--lr", AT(tc.opt.lr), F32_FIELD, 0, 0, 1e-12, 10.0},
    {OPT_WD, "--weight-decay", AT(tc.opt.weight_decay), F32_FIELD, 0, 0, 0.0, 10.0},
    {OPT_CLIP, "--clip", AT(tc.opt.grad_clip), F32_FIELD, 0, 0, 0.0, 1e9},
};

/* Flags whose value is kept as given (a name or a path). */
typedef struct string_opt {
    int id;
    size_t at;
} string_opt;

static const string_opt k_string_opts[] = {
    {OPT_MODEL, AT(preset)}, {OPT_CONFIG, AT(config)},     {OPT_DATA, AT(data)},
    {OPT_SAVE, AT(save)},    {OPT_RESUME, AT(resume)},     {OPT_LOG_JSON, AT(log_json)},
    {OPT_BOUNDS, AT(boundaries)}, {OPT_PLAN, AT(plan)},    {OPT_COSTS, AT(costs)},
};

static void set_defaults(pptrain_args *a)
{
    memset(a, 0, sizeof *a);
    a->preset = "tiny";
    a->tc.batch = 16;
    a->tc.microbatches = 1;
    a->tc.steps = 300;
    a->tc.seed = 1;
    a->branching = PP_MARKOV_DEFAULT_BRANCHING;
    a->schedule = PP_SCHED_1F1B;
    a->backend = PP_BACKEND_CPU;
    a->slow_stage = -1;
    a->slow_factor = 1.0;
    a->dp = 1;
    a->clock_sync = 8;
    a->device = -1;
    pp_adamw_config_default(&a->tc.opt);
}

/* Which flags say that the model or the layout was chosen on the command line. */
static void note_given(pptrain_args *a, int id)
{
    if (id == OPT_MODEL || id == OPT_CONFIG || (id >= OPT_VOCAB && id <= OPT_LAYERS))
        a->model_given = 1;
    else if (id == OPT_BATCH)
        a->batch_given = 1;
    else if (id == OPT_MICRO)
        a->micro_given = 1;
}

/* Parses a number flag into its field. */
static pp_status store_number(const num_opt *o, const char *val, char *base)
{
    pp_status st;
    int64_t iv;
    double dv;
    if (o->type == F32_FIELD) {
        if ((st = pp_parse_f64(val, o->flag, o->flo, o->fhi, &dv)) == PP_OK)
            *(float *)(base + o->at) = (float)dv;
        return st;
    }
    if ((st = pp_parse_i64(val, o->flag, o->lo, o->hi, &iv)) != PP_OK)
        return st;
    if (o->type == INT_FIELD)
        *(int *)(base + o->at) = (int)iv;
    else if (o->type == I64_FIELD)
        *(int64_t *)(base + o->at) = iv;
    else
        *(uint64_t *)(base + o->at) = (uint64_t)iv;
    return PP_OK;
}

/* A flag of the two tables: 1 with *rc set (-1 to go on, else an exit code), or 0 when the
 * flag is in neither. */
static int table_option(int id, const char *val, pptrain_args *a, int *rc)
{
    char *base = (char *)a;
    *rc = -1;
    for (size_t i = 0; i < sizeof k_num_opts / sizeof *k_num_opts; i++)
        if (k_num_opts[i].id == id) {
            pp_status st = store_number(&k_num_opts[i], val, base);
            if (st != PP_OK)
                *rc = pp_tool_fail(st);
            return 1;
        }
    for (size_t i = 0; i < sizeof k_string_opts / sizeof *k_string_opts; i++)
        if (k_string_opts[i].id == id) {
            *(const char **)(base + k_string_opts[i].at) = val;
            return 1;
        }
    return 0;
}

/* --sim-slow STAGE=FACTOR. */
static int parse_slow(char *val, pptrain_args *a)
{
    pp_status st;
    int64_t iv;
    double dv;
    char *eq = strchr(val, '=');
    if (!eq)
        return pp_tool_usage_error("%s", "--sim-slow needs STAGE=FACTOR, e.g. 2=1.5");
    *eq = '\0';
    if ((st = pp_parse_i64(val, "--sim-slow stage", 0, PP_SCHED_MAX_S - 1, &iv)) != PP_OK)
        return pp_tool_fail(st);
    a->slow_stage = (int)iv;
    if ((st = pp_parse_f64(eq + 1, "--sim-slow factor", 1e-3, 1e3, &dv)) != PP_OK)
        return pp_tool_fail(st);
    a->slow_factor = dv;
    return -1;
}

/* Flags that pick one of a few names, and the flags without a value: -1 to go on, else an exit
 * code. */
static int choice_option(int id, char *val, pptrain_args *a)
{
    pp_status st;
    switch (id) {
    case OPT_DECAY:
        if (strcmp(val, "cosine") != 0 && strcmp(val, "constant") != 0)
            return pp_tool_usage_error("%s", "--lr-decay must be 'cosine' or 'constant'");
        a->tc.opt.cosine = strcmp(val, "cosine") == 0;
        return -1;
    case OPT_SCHEDULE:
        if ((st = pp_schedule_kind_parse(val, &a->schedule)) != PP_OK)
            return pp_tool_fail(pp_error_wrap(st, "--schedule"));
        a->schedule_given = 1;
        return -1;
    case OPT_BACKEND:
        if (pp_backend_kind_parse(val, &a->backend) != PP_OK)
            return pp_tool_usage_error("%s", pp_error_message());
        return -1;
    case OPT_PRECISION:
        if ((a->precision = pp_cuda_precision_parse(val)) < 0)
            return pp_tool_usage_error("%s", "--precision must be 'fp32', 'tf32' or 'bf16'");
        return -1;
    case OPT_TRANSPORT:
        if (pp_transport_kind_parse(val, &a->transport) != PP_OK)
            return pp_tool_usage_error("%s", pp_error_message());
        return -1;
    case OPT_SLOW: return parse_slow(val, a);
    case OPT_JITTER:
        if ((st = pp_jitter_parse(val, &a->jitter)) != PP_OK)
            return pp_tool_fail(pp_error_wrap(st, "--sim-jitter"));
        a->jitter_given = 1;
        return -1;
    case OPT_RECOMPUTE:
        /* the syntax now; indices against the model and stages once the partition exists */
        if ((st = pp_recompute_parse(val, NULL, NULL)) != PP_OK)
            return pp_tool_fail(st);
        a->recompute = val;
        return -1;
    case OPT_PRINT_SCHED: a->print_schedule = 1; return -1;
    case 'q': a->quiet = 1; return -1;
    case 'v':
        pp_log_set_level(2);
        pp_tool_verbose = 1;
        return -1;
    case 'h': fputs(k_usage, stdout); return PP_EXIT_OK;
    case PP_TOOL_OPT_VERSION: pp_tool_print_version(); return PP_EXIT_OK;
    default: return -2;
    }
}

/* A plan from the environment is how pprof-tune re-runs an unchanged command line: it replaces
 * the command's own layout flags (said on stderr) instead of conflicting with them. An explicit
 * --plan with contradicting flags is an error. */
static void plan_from_environment(pptrain_args *a)
{
    const char *env = getenv("PPROF_PLAN");
    if (a->plan || !env || !*env)
        return;
    a->plan = env;
    a->plan_from_env = 1;
    if (a->stages || a->boundaries || a->schedule_given || a->micro_given || a->v)
        fprintf(stderr, "pptrain: PPROF_PLAN=%s replaces the layout flags of this command line\n",
                env);
    a->stages = 0;
    a->boundaries = NULL;
    a->schedule_given = a->micro_given = 0;
    a->v = 0;
}

/* The flags that exclude or need each other: -1 when they agree, else an exit code. */
static int check_combinations(const pptrain_args *a)
{
    if (a->backend == PP_BACKEND_SIM) {
        if (!a->costs)
            return pp_tool_usage_error("%s", "--backend sim needs --costs FILE");
        if (a->model_given)
            return pp_tool_usage_error("%s", "--backend sim takes the model from --costs; drop "
                                             "the model flags");
        if (a->data || a->save || a->resume)
            return pp_tool_usage_error("%s", "--backend sim trains nothing: --data, --save and "
                                             "--resume need --backend cpu");
    } else if (a->costs) {
        return pp_tool_usage_error("%s", "--costs is for --backend sim");
    }
    if (a->slow_stage >= 0 && a->backend != PP_BACKEND_SIM)
        return pp_tool_usage_error("%s", "--sim-slow is for --backend sim");
    if (a->jitter_given && a->backend != PP_BACKEND_SIM)
        return pp_tool_usage_error("%s", "--sim-jitter is for --backend sim");
    if (a->plan && (a->stages || a->boundaries))
        return pp_tool_usage_error("%s", "--plan sets the stages and boundaries: drop "
                                         "--stages/--boundaries");
    if (a->stages && a->boundaries)
        return pp_tool_usage_error("%s", "give --stages or --boundaries, not both");
    return -1;
}

int pptrain_parse_args(int argc, char **argv, pptrain_args *a)
{
    set_defaults(a);
    opterr = 0;
    int c, rc;
    while ((c = getopt_long(argc, argv, ":qvh", k_opts, NULL)) != -1) {
        char msg[160];
        if (c == ':') {
            snprintf(msg, sizeof msg, "option '%s' needs a value", argv[optind - 1]);
            return pp_tool_usage_error("%s", msg);
        }
        if (table_option(c, optarg, a, &rc)) {
            note_given(a, c);
        } else if ((rc = choice_option(c, optarg, a)) == -2) {
            snprintf(msg, sizeof msg, "unknown option '%s'", argv[optind - 1]);
            return pp_tool_usage_error("%s", msg);
        }
        if (rc != -1)
            return rc;
    }
    if (optind < argc) {
        char msg[160];
        snprintf(msg, sizeof msg, "unexpected argument '%s'", argv[optind]);
        return pp_tool_usage_error("%s", msg);
    }
    if (a->save_every && !a->save)
        return pp_tool_usage_error("%s", "--save-every needs --save FILE");
    plan_from_environment(a);
    if (a->jitter_given && !a->jitter.seed_given)
        a->jitter.seed = a->tc.seed; /* after the loop: --seed may come after --sim-jitter */
    return check_combinations(a);
}

/* The model config: from the checkpoint when resuming without model flags, else preset, then
 * config file, then single-field overrides. */
pp_status pptrain_model_config(const pptrain_args *a, pp_model_config *mc)
{
    pp_status st;
    if (a->resume && !a->model_given)
        return pp_checkpoint_peek_config(a->resume, mc);
    if ((st = pp_model_config_preset(a->preset, mc)) != PP_OK)
        return pp_error_wrap(st, "--model");
    if (a->config && (st = pp_model_config_load_json(a->config, mc)) != PP_OK)
        return st;
    int *fields[5] = {&mc->vocab_size, &mc->seq_len, &mc->d_model, &mc->n_heads, &mc->n_layers};
    for (int k = 0; k < 5; k++)
        if (a->shape[k])
            *fields[k] = a->shape[k];
    return pp_model_config_validate(mc);
}

/* Refuses a --save or --log-json path whose directory cannot be written, before any training
 * time is spent. */
pp_status pptrain_check_writable_dir(const char *path, const char *flag)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        dir[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    if (access(dir, W_OK) != 0)
        return PP_ERR(PP_ERR_INVALID, "%s '%s': directory '%s' does not exist or is not writable",
                      flag, path, dir);
    return PP_OK;
}

/* Applies a plan file: partition, schedule, micro-batches, recomputation; refuses flags that
 * contradict it. */
static pp_status apply_plan(pptrain_args *a, int L, pp_partition *part)
{
    pp_plan plan;
    pp_status st = pp_plan_load(a->plan, &plan);
    if (st != PP_OK)
        return st;
    if (plan.num_layers != L) {
        st = PP_ERR(PP_ERR_INVALID,
                    "plan '%s' was made for a model of %d layers; this model has %d", a->plan,
                    plan.num_layers, L);
        goto done;
    }
    pp_schedule_kind kind;
    if ((st = pp_schedule_kind_parse(plan.schedule, &kind)) != PP_OK) {
        st = pp_error_wrap(st, "plan '%s'", a->plan);
        goto done;
    }
    if (a->schedule_given && kind != a->schedule) {
        st = PP_ERR(PP_ERR_INVALID, "--schedule %s contradicts plan '%s' (schedule %s)",
                    pp_schedule_kind_name(a->schedule), a->plan, plan.schedule);
        goto done;
    }
    if (a->micro_given && plan.microbatches != a->tc.microbatches) {
        st = PP_ERR(PP_ERR_INVALID, "--microbatches %d contradicts plan '%s' (%d micro-batches)",
                    a->tc.microbatches, a->plan, plan.microbatches);
        goto done;
    }
    if (a->v && a->v != plan.partition.v) {
        st = PP_ERR(PP_ERR_INVALID, "--virtual-stages %d contradicts plan '%s' (%d)", a->v,
                    a->plan, plan.partition.v);
        goto done;
    }
    if (plan.recompute[0]) {
        /* the plan's choice, like its boundaries: from PPROF_PLAN it replaces --recompute, and
         * a --plan given with a different --recompute is a contradiction */
        if (a->recompute && !a->plan_from_env && strcmp(a->recompute, plan.recompute) != 0) {
            st = PP_ERR(PP_ERR_INVALID, "--recompute %s contradicts plan '%s' (recompute %s)",
                        a->recompute, a->plan, plan.recompute);
            goto done;
        }
        if (a->recompute && a->plan_from_env && strcmp(a->recompute, plan.recompute) != 0)
            fprintf(stderr, "pptrain: PPROF_PLAN=%s replaces --recompute %s with %s\n", a->plan,
                    a->recompute, plan.recompute);
        snprintf(a->plan_recompute, sizeof a->plan_recompute, "%s", plan.recompute);
        a->recompute = a->plan_recompute;
    }
    a->schedule = kind;
    a->tc.microbatches = plan.microbatches;
    a->v = plan.partition.v;
    if (plan.microbatch_size > 0 && !a->batch_given)
        a->tc.batch = plan.microbatch_size * plan.microbatches;
    st = pp_partition_from_bounds(plan.partition.bounds, plan.partition.P + 1, L,
                                  plan.partition.S, plan.partition.v, part);
done:
    pp_plan_free(&plan);
    return st;
}

pp_status pptrain_partition(pptrain_args *a, int L, pp_partition *part)
{
    if (a->plan)
        return apply_plan(a, L, part);
    if (!a->v)
        a->v = pp_schedule_default_v(a->schedule);
    if (a->boundaries)
        return pp_error_wrap(pp_partition_parse(a->boundaries, L, a->v, part), "--boundaries");
    int S = a->stages ? a->stages : 1;
    pp_status st = pp_partition_even(L, S, a->v, part);
    return st == PP_OK ? st : pp_error_wrap(st, "--stages");
}
