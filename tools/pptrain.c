/* pptrain: pipeprof's reference training job, a GPT-style decoder trained pipeline-parallel:
 * S stages under a schedule (GPipe, 1F1B, interleaved, ZB-H1), on the cpu backend or the timed
 * sim backend. A thin main over runtime/: flags -> pp_pipe_config, then the step loop, logging
 * and checkpoints. Exit codes: 0 ok, 2 usage or bad input, 3 runtime error. */
#include "pp_exec.h"
#ifdef PP_HAVE_CUDA
#include "pp_cuda.h"
#endif
#include "pp_kernels.h"
#include "pp_runtime.h"
#include "pp_tool.h"

#include <getopt.h>
#include <math.h>
#include <signal.h>
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
    "\n"
    "exit codes: 0 ok, 2 bad flag, config, data or checkpoint, 3 runtime error\n";

enum {
    OPT_MODEL = 256, OPT_CONFIG, OPT_VOCAB, OPT_SEQ, OPT_DMODEL, OPT_HEADS, OPT_LAYERS,
    OPT_STEPS, OPT_STOP_AT, OPT_BATCH, OPT_MICRO, OPT_LR, OPT_WARMUP, OPT_DECAY, OPT_WD, OPT_CLIP, OPT_SEED,
    OPT_DATA, OPT_BRANCH, OPT_SAVE, OPT_SAVE_EVERY, OPT_RESUME, OPT_LOG_JSON, OPT_STAGES,
    OPT_BOUNDS, OPT_PLAN, OPT_SCHEDULE, OPT_VSTAGES, OPT_BACKEND, OPT_COSTS, OPT_SLOW,
    OPT_PRINT_SCHED, OPT_TRANSPORT, OPT_DP, OPT_CLOCK_SYNC, OPT_PRECISION, OPT_DEVICE
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
    {"print-schedule", no_argument, 0, OPT_PRINT_SCHED},
    {"transport", required_argument, 0, OPT_TRANSPORT},
    {"dp", required_argument, 0, OPT_DP},
    {"clock-sync", required_argument, 0, OPT_CLOCK_SYNC},
    {"precision", required_argument, 0, OPT_PRECISION},
    {"device", required_argument, 0, OPT_DEVICE},
    {"quiet", no_argument, 0, 'q'},
    {"verbose", no_argument, 0, 'v'},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

typedef struct args {
    pp_train_config tc;
    const char *preset, *config, *data, *save, *resume, *log_json;
    int shape[5]; /* vocab, seq, d_model, heads, layers overrides; 0 = not given */
    int model_given;
    int branching;
    int64_t save_every;
    int64_t stop_at; /* 0: run to --steps */
    int quiet;
    /* pipeline */
    int stages;             /* 0 = not given */
    const char *boundaries, *plan, *costs;
    pp_schedule_kind schedule;
    int schedule_given, micro_given, batch_given;
    int v;                  /* 0 = not given */
    pp_backend_kind backend;
    int slow_stage;
    double slow_factor;
    int print_schedule;
    int plan_from_env;
    pp_transport_kind transport;
    int dp;
    int clock_sync; /* ping-pong rounds per rank at start and end (mpi) */
    int precision;  /* cuda: pp_cuda_precision */
    int device;     /* cuda: -1 = default (0, or the node-local rank under mpirun) */
} args;

static pp_status parse_int(const char *s, const char *flag, int64_t lo, int64_t hi, int64_t *out)
{
    return pp_parse_i64(s, flag, lo, hi, out);
}

/* Parses argv into a; returns -1 to go on, else an exit code. */
static int parse_args(int argc, char **argv, args *a)
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
    opterr = 0;
    int c;
    int64_t iv;
    double dv;
    pp_status st = PP_OK;
    while ((c = getopt_long(argc, argv, ":qvh", k_opts, NULL)) != -1) {
        switch (c) {
        case OPT_MODEL: a->preset = optarg; a->model_given = 1; break;
        case OPT_CONFIG: a->config = optarg; a->model_given = 1; break;
        case OPT_VOCAB: case OPT_SEQ: case OPT_DMODEL: case OPT_HEADS: case OPT_LAYERS: {
            static const char *names[] = {"--vocab", "--seq", "--d-model", "--heads", "--layers"};
            int k = c - OPT_VOCAB;
            if ((st = parse_int(optarg, names[k], 1, PP_MAX_VOCAB, &iv)) != PP_OK)
                return pp_tool_fail(st);
            a->shape[k] = (int)iv;
            a->model_given = 1;
            break;
        }
        case OPT_STEPS:
            if ((st = parse_int(optarg, "--steps", 0, INT64_C(1) << 40, &iv)) != PP_OK)
                return pp_tool_fail(st);
            a->tc.steps = iv;
            break;
        case OPT_STOP_AT:
            if ((st = parse_int(optarg, "--stop-at", 1, INT64_C(1) << 40, &iv)) != PP_OK)
                return pp_tool_fail(st);
            a->stop_at = iv;
            break;
        case OPT_BATCH:
            if ((st = parse_int(optarg, "--batch", 1, 1 << 20, &iv)) != PP_OK)
                return pp_tool_fail(st);
            a->tc.batch = (int)iv;
            a->batch_given = 1;
            break;
        case OPT_MICRO:
            if ((st = parse_int(optarg, "--microbatches", 1, 1 << 20, &iv)) != PP_OK)
                return pp_tool_fail(st);
            a->tc.microbatches = (int)iv;
            a->micro_given = 1;
            break;
        case OPT_LR:
            if ((st = pp_parse_f64(optarg, "--lr", 1e-12, 10.0, &dv)) != PP_OK)
                return pp_tool_fail(st);
            a->tc.opt.lr = (float)dv;
            break;
        case OPT_WARMUP:
            if ((st = parse_int(optarg, "--warmup", 0, 1 << 30, &iv)) != PP_OK)
                return pp_tool_fail(st);
            a->tc.opt.warmup_steps = (int)iv;
            break;
        case OPT_DECAY:
            if (strcmp(optarg, "cosine") == 0)
                a->tc.opt.cosine = 1;
            else if (strcmp(optarg, "constant") == 0)
                a->tc.opt.cosine = 0;
            else
                return pp_tool_usage_error("%s", "--lr-decay must be 'cosine' or 'constant'");
            break;
        case OPT_WD:
            if ((st = pp_parse_f64(optarg, "--weight-decay", 0.0, 10.0, &dv)) != PP_OK)
                return pp_tool_fail(st);
            a->tc.opt.weight_decay = (float)dv;
            break;
        case OPT_CLIP:
            if ((st = pp_parse_f64(optarg, "--clip", 0.0, 1e9, &dv)) != PP_OK)
                return pp_tool_fail(st);
            a->tc.opt.grad_clip = (float)dv;
            break;
        case OPT_SEED:
            if ((st = parse_int(optarg, "--seed", 0, INT64_MAX, &iv)) != PP_OK)
                return pp_tool_fail(st);
            a->tc.seed = (uint64_t)iv;
            break;
        case OPT_DATA: a->data = optarg; break;
        case OPT_BRANCH:
            if ((st = parse_int(optarg, "--markov-branching", 2, PP_MAX_VOCAB, &iv)) != PP_OK)
                return pp_tool_fail(st);
            a->branching = (int)iv;
            break;
        case OPT_SAVE: a->save = optarg; break;
        case OPT_SAVE_EVERY:
            if ((st = parse_int(optarg, "--save-every", 1, INT64_C(1) << 40, &iv)) != PP_OK)
                return pp_tool_fail(st);
            a->save_every = iv;
            break;
        case OPT_RESUME: a->resume = optarg; break;
        case OPT_LOG_JSON: a->log_json = optarg; break;
        case OPT_STAGES:
            if ((st = parse_int(optarg, "--stages", 1, PP_SCHED_MAX_S, &iv)) != PP_OK)
                return pp_tool_fail(st);
            a->stages = (int)iv;
            break;
        case OPT_BOUNDS: a->boundaries = optarg; break;
        case OPT_PLAN: a->plan = optarg; break;
        case OPT_SCHEDULE:
            if ((st = pp_schedule_kind_parse(optarg, &a->schedule)) != PP_OK)
                return pp_tool_fail(pp_error_wrap(st, "--schedule"));
            a->schedule_given = 1;
            break;
        case OPT_VSTAGES:
            if ((st = parse_int(optarg, "--virtual-stages", 1, PP_SCHED_MAX_V, &iv)) != PP_OK)
                return pp_tool_fail(st);
            a->v = (int)iv;
            break;
        case OPT_BACKEND:
            if (strcmp(optarg, "cpu") == 0)
                a->backend = PP_BACKEND_CPU;
            else if (strcmp(optarg, "sim") == 0)
                a->backend = PP_BACKEND_SIM;
            else if (strcmp(optarg, "cuda") == 0)
                a->backend = PP_BACKEND_CUDA;
            else
                return pp_tool_usage_error("%s", "--backend must be 'cpu', 'sim' or 'cuda'");
            break;
        case OPT_PRECISION:
            if ((a->precision = pp_cuda_precision_parse(optarg)) < 0)
                return pp_tool_usage_error("%s", "--precision must be 'fp32', 'tf32' or 'bf16'");
            break;
        case OPT_DEVICE:
            if ((st = parse_int(optarg, "--device", 0, 1023, &iv)) != PP_OK)
                return pp_tool_fail(st);
            a->device = (int)iv;
            break;
        case OPT_COSTS: a->costs = optarg; break;
        case OPT_TRANSPORT:
            if (strcmp(optarg, "inproc") == 0)
                a->transport = PP_TRANSPORT_INPROC;
            else if (strcmp(optarg, "mpi") == 0)
                a->transport = PP_TRANSPORT_MPI;
            else if (strcmp(optarg, "nccl") == 0)
                a->transport = PP_TRANSPORT_NCCL;
            else
                return pp_tool_usage_error("%s",
                                           "--transport must be 'inproc', 'mpi' or 'nccl'");
            break;
        case OPT_DP:
            if ((st = parse_int(optarg, "--dp", 1, 4096, &iv)) != PP_OK)
                return pp_tool_fail(st);
            a->dp = (int)iv;
            break;
        case OPT_CLOCK_SYNC:
            if ((st = parse_int(optarg, "--clock-sync", 0, 1000, &iv)) != PP_OK)
                return pp_tool_fail(st);
            a->clock_sync = (int)iv;
            break;
        case OPT_SLOW: {
            char *eq = strchr(optarg, '=');
            if (!eq)
                return pp_tool_usage_error("%s", "--sim-slow needs STAGE=FACTOR, e.g. 2=1.5");
            *eq = '\0';
            if ((st = parse_int(optarg, "--sim-slow stage", 0, PP_SCHED_MAX_S - 1, &iv)) != PP_OK)
                return pp_tool_fail(st);
            a->slow_stage = (int)iv;
            if ((st = pp_parse_f64(eq + 1, "--sim-slow factor", 1e-3, 1e3, &dv)) != PP_OK)
                return pp_tool_fail(st);
            a->slow_factor = dv;
            break;
        }
        case OPT_PRINT_SCHED: a->print_schedule = 1; break;
        case 'q': a->quiet = 1; break;
        case 'v':
            pp_log_set_level(2);
            pp_tool_verbose = 1;
            break;
        case 'h': fputs(k_usage, stdout); return PP_EXIT_OK;
        case ':': {
            char msg[128];
            snprintf(msg, sizeof msg, "option '%s' needs a value", argv[optind - 1]);
            return pp_tool_usage_error("%s", msg);
        }
        default: {
            char msg[160];
            snprintf(msg, sizeof msg, "unknown option '%s'", argv[optind - 1]);
            return pp_tool_usage_error("%s", msg);
        }
        }
    }
    if (optind < argc) {
        char msg[160];
        snprintf(msg, sizeof msg, "unexpected argument '%s'", argv[optind]);
        return pp_tool_usage_error("%s", msg);
    }
    if (a->save_every && !a->save)
        return pp_tool_usage_error("%s", "--save-every needs --save FILE");
    if (!a->plan) {
        const char *env = getenv("PPROF_PLAN");
        if (env && *env) {
            /* A plan from the environment is how pprof-tune re-runs an unchanged command line:
             * it replaces the command's own layout flags (said on stderr) instead of
             * conflicting with them. An explicit --plan with contradicting flags is an error. */
            a->plan = env;
            a->plan_from_env = 1;
            if (a->stages || a->boundaries || a->schedule_given || a->micro_given || a->v)
                fprintf(stderr, "pptrain: PPROF_PLAN=%s replaces the layout flags of this "
                                "command line\n",
                        env);
            a->stages = 0;
            a->boundaries = NULL;
            a->schedule_given = a->micro_given = 0;
            a->v = 0;
        }
    }
    if (a->backend == PP_BACKEND_SIM) {
        if (!a->costs)
            return pp_tool_usage_error("%s", "--backend sim needs --costs FILE");
        if (a->model_given)
            return pp_tool_usage_error("%s", "--backend sim takes the model from --costs; drop the model "
                               "flags");
        if (a->data || a->save || a->resume)
            return pp_tool_usage_error("%s", "--backend sim trains nothing: --data, --save and --resume "
                               "need --backend cpu");
    } else if (a->costs) {
        return pp_tool_usage_error("%s", "--costs is for --backend sim");
    }
    if (a->slow_stage >= 0 && a->backend != PP_BACKEND_SIM)
        return pp_tool_usage_error("%s", "--sim-slow is for --backend sim");
    if (a->plan && (a->stages || a->boundaries))
        return pp_tool_usage_error("%s", "--plan sets the stages and boundaries: drop --stages/--boundaries");
    if (a->stages && a->boundaries)
        return pp_tool_usage_error("%s", "give --stages or --boundaries, not both");
    return -1;
}

/* The model config: from the checkpoint when resuming without model flags, else preset, then
 * config file, then single-field overrides. */
static pp_status build_model_config(const args *a, pp_model_config *mc)
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
static pp_status check_writable_dir(const char *path, const char *flag)
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

/* Applies a plan file: partition, schedule, micro-batches; refuses flags that contradict it. */
static pp_status apply_plan(args *a, int L, pp_partition *part)
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

static pp_status build_partition(args *a, int L, pp_partition *part)
{
    if (a->plan)
        return apply_plan(a, L, part);
    if (!a->v)
        a->v = a->schedule == PP_SCHED_INTERLEAVED ? 2 : 1;
    if (a->boundaries)
        return pp_error_wrap(pp_partition_parse(a->boundaries, L, a->v, part), "--boundaries");
    int S = a->stages ? a->stages : 1;
    pp_status st = pp_partition_even(L, S, a->v, part);
    return st == PP_OK ? st : pp_error_wrap(st, "--stages");
}

static void print_pipeline(const args *a, const pp_partition *part, pp_pipe_trainer *tr)
{
    char bounds[512];
    pp_partition_format(part, bounds, sizeof bounds);
    const pp_schedule_report *rep = pp_pipe_trainer_report(tr);
    printf("pipeline: %d stage(s), schedule %s, %d micro-batch(es)", part->S,
           pp_schedule_kind_name(a->schedule), a->tc.microbatches);
    if (part->v > 1)
        printf(", %d chunks per stage", part->v);
    if (a->dp > 1)
        printf(", %d data-parallel replicas", a->dp);
    printf(", backend %s, boundaries %s, peak in-flight",
           a->backend == PP_BACKEND_SIM ? "sim" : a->backend == PP_BACKEND_CUDA ? "cuda" : "cpu",
           bounds);
    for (int s = 0; s < part->S; s++)
        printf("%s%d", s ? "," : " ", rep->peak_inflight[s]);
    printf("\n");
}

/* PPTRAIN_TEST_DIE_RANK=R and PPTRAIN_TEST_DIE_STEP=N: the step at which this process kills
 * itself with SIGKILL (no cleanup, no trace footer), or 0 for none. R defaults to 0, which is
 * also the rank of a process without --transport mpi. */
static int64_t test_die_step(int rank)
{
    const char *step = getenv("PPTRAIN_TEST_DIE_STEP");
    const char *r = getenv("PPTRAIN_TEST_DIE_RANK");
    if (!step || !*step)
        return 0;
    char *end;
    long die_rank = r && *r ? strtol(r, &end, 10) : 0;
    if (r && *r && *end)
        return 0;
    long long n = strtoll(step, &end, 10);
    if (*end || n < 1 || die_rank != rank)
        return 0;
    return (int64_t)n;
}

int main(int argc, char **argv)
{
    pp_tool_init("pptrain");
    args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    pp_status st;
    /* With --transport mpi this process is one rank running one stage; rank 0 alone prints the
     * per-step lines, the summary and the --log-json file (the loss is known on every rank after
     * the all-reduce). */
    /* nccl: one stage per MPI rank as well, MPI bootstrapping NCCL */
    int mpi = a.transport == PP_TRANSPORT_MPI || a.transport == PP_TRANSPORT_NCCL, rank = 0,
        world = 1;
    if (a.transport == PP_TRANSPORT_NCCL && a.backend != PP_BACKEND_CUDA)
        return pp_tool_usage_error("%s", "--transport nccl moves GPU memory: it needs --backend "
                                         "cuda");
    if (a.dp > 1 && !mpi)
        return pp_tool_usage_error("--dp %d: data-parallel replicas need --transport mpi or nccl "
                                   "(and mpirun -np STAGES*%d)",
                                   a.dp, a.dp);
    if (mpi) {
#ifdef PP_HAVE_MPI
        if ((st = pp_mpi_init(&argc, &argv, &rank, &world)) != PP_OK)
            return pp_tool_fail(st);
        if (rank != 0) {
            a.quiet = 1;
            a.log_json = NULL;
        }
#else
        return pp_tool_usage_error("%s", "--transport mpi: this build has no MPI");
#endif
    }
    /* Test hook (docs/pptrain.md): a rank that dies without warning, for the tests of
     * pprof-run and the analyzer on a job that loses a process mid-run. */
    int64_t die_step = test_die_step(rank);
    int trainer_made = 0; /* after this, a failing rank must end the whole MPI job */
    (void)trainer_made; /* unused without MPI */
    pp_pipe_trainer *tr = NULL;
    pp_data *data = NULL;
    pp_costs *costs = NULL;
    pp_partition part = {0};
    FILE *log = NULL;
    int sim = a.backend == PP_BACKEND_SIM;
    int L;
    if (sim) {
        if ((st = pp_costs_load(a.costs, &costs)) != PP_OK)
            return pp_tool_fail(st);
        L = costs->n_layers;
        if ((st = pp_adamw_config_validate(&a.tc.opt)) != PP_OK)
            goto out;
    } else {
        if ((st = build_model_config(&a, &a.tc.model)) != PP_OK)
            return pp_tool_fail(st);
        L = pp_model_config_num_layers(&a.tc.model);
    }
    if ((st = build_partition(&a, L, &part)) != PP_OK)
        goto out;
    if ((st = pp_schedule_check_args(a.schedule, part.S, a.tc.microbatches, part.v)) != PP_OK)
        goto out;
    if (mpi && world != part.S * a.dp) {
        if (a.dp > 1)
            st = PP_ERR(PP_ERR_INVALID,
                        "--transport mpi runs one stage per rank: %d stage(s) x %d replica(s) "
                        "need mpirun -np %d, this job has %d rank(s)",
                        part.S, a.dp, part.S * a.dp, world);
        else
            st = PP_ERR(PP_ERR_INVALID,
                        "--transport mpi runs one stage per rank: %d stage(s) need mpirun -np "
                        "%d, this job has %d rank(s)",
                        part.S, part.S, world);
        goto out;
    }
    if (a.print_schedule && rank == 0) {
        pp_schedule *sc = NULL;
        if ((st = pp_schedule_create(a.schedule, part.S, a.tc.microbatches, part.v, &sc)) ==
            PP_OK) {
            pp_schedule_print(sc, stdout);
            pp_schedule_destroy(sc);
        }
        goto out;
    }
    if (!sim) {
        if ((st = pp_train_config_validate(&a.tc)) != PP_OK)
            goto out;
        if (a.save && (st = check_writable_dir(a.save, "--save")) != PP_OK)
            goto out;
        if (a.data)
            st = pp_data_tokens_open(a.data, a.tc.model.vocab_size, a.tc.model.seq_len, &data);
        else
            st = pp_data_markov_create(a.tc.model.vocab_size, a.branching, a.tc.seed, &data);
        if (st != PP_OK)
            goto out;
    }
    if (a.slow_stage >= part.S) {
        st = PP_ERR(PP_ERR_INVALID, "--sim-slow stage %d does not exist (S = %d)", a.slow_stage,
                    part.S);
        goto out;
    }
    /* Stages are threads that already share the cores; unless the user chose a BLAS thread
     * count, each stage's GEMMs run on its own thread (2x faster at S = 4 on 2 cores). */
    if (!sim && part.S > 1 && !getenv("OPENBLAS_NUM_THREADS"))
        pp_kernels_set_blas_threads(1);
    double entropy = data ? pp_data_entropy_rate(data) : NAN;
    char data_desc[512] = "";
    if (data)
        snprintf(data_desc, sizeof data_desc, "%s", pp_data_describe(data));
    pp_pipe_config pc = {.train = a.tc,
                         .backend = a.backend,
                         .schedule = a.schedule,
                         .v = part.v,
                         .partition = part,
                         .costs = costs,
                         .slow_stage = a.slow_stage,
                         .slow_factor = a.slow_factor};
    pc.transport = a.transport;
    pc.dp = a.dp;
    pc.cuda_precision = a.precision;
    pc.cuda_device = a.device >= 0 ? a.device : 0;
    if (a.backend == PP_BACKEND_CUDA) {
#ifdef PP_HAVE_CUDA
        char why[256] = "";
        int ndev = pp_cuda_device_count(why, sizeof why);
        if (ndev < 1) {
            st = PP_ERR(PP_ERR_INVALID, "--backend cuda: %s", why);
            goto out;
        }
        if (a.device < 0 && mpi) {
            /* one process per GPU: the node-local rank picks it */
            const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
            pc.cuda_device = lr ? atoi(lr) % ndev : 0;
        }
        if (pc.cuda_device >= ndev) {
            st = PP_ERR(PP_ERR_INVALID, "--device %d: this machine has %d CUDA device(s)",
                        pc.cuda_device, ndev);
            goto out;
        }
#else
        st = PP_ERR(PP_ERR_INVALID, "--backend cuda: this build has no CUDA (no CUDA toolkit "
                                    "at configure time)");
        goto out;
#endif
    }
    trainer_made = 1;
    st = pp_pipe_trainer_create(&pc, data, &tr);
    data = NULL; /* owned by the trainer now, even on failure */
    if (st != PP_OK)
        goto out;
    if (a.resume && (st = pp_pipe_trainer_load(tr, a.resume)) != PP_OK)
        goto out;
#ifdef PP_HAVE_MPI
    if (mpi && a.clock_sync > 0 && (st = pp_mpi_clock_sync(a.clock_sync, 0)) != PP_OK)
        goto out;
#endif
    if (a.log_json) {
        log = fopen(a.log_json, "w");
        if (!log) {
            st = PP_ERR(PP_ERR_INVALID, "--log-json '%s': cannot open for writing", a.log_json);
            goto out;
        }
    }
    const pp_model_config *mc = &a.tc.model;
    if (!a.quiet) {
        if (sim)
            printf("model: %d layers from cost file '%s'\n", L, a.costs);
        else
            printf("model: V=%d T=%d C=%d heads=%d layers=%d, %zu parameters\n", mc->vocab_size,
                   mc->seq_len, mc->d_model, mc->n_heads, mc->n_layers,
                   pp_model_config_num_params(mc));
        if (!sim)
            printf("data: %s\n", data_desc);
        print_pipeline(&a, &part, tr);
        if (!sim)
            printf("training: %lld steps, batch %d (%d micro-batches), lr %g, seed %llu%s\n",
                   (long long)a.tc.steps, a.tc.batch, a.tc.microbatches, (double)a.tc.opt.lr,
                   (unsigned long long)a.tc.seed, a.resume ? ", resumed" : "");
        if (a.resume)
            printf("resumed from '%s' at step %lld\n", a.resume,
                   (long long)pp_pipe_trainer_steps_done(tr));
        fflush(stdout);
    }
    /* The summary's loss averages the last steps: one batch's loss is too noisy to compare
     * with the entropy rate. */
    enum { TAIL = 10 };
    float tail[TAIL];
    int ntail = 0;
    double total_ms = 0.0, total_tokens = 0.0, total_model_ms = 0.0;
    int64_t ran = 0;
    pp_step_stats s = {0};
    pp_exec_result r = {0};
    int64_t last = a.stop_at && a.stop_at < a.tc.steps ? a.stop_at : a.tc.steps;
    while (pp_pipe_trainer_steps_done(tr) < last) {
        if (die_step > 0 && pp_pipe_trainer_steps_done(tr) + 1 >= die_step) {
            fflush(NULL);
            raise(SIGKILL);
        }
        if ((st = pp_pipe_trainer_step(tr, &s, &r)) != PP_OK)
            goto out;
        tail[ntail++ % TAIL] = s.loss;
        total_ms += s.step_ms;
        total_model_ms += r.model_ms;
        total_tokens += sim ? 0.0 : (double)a.tc.batch * mc->seq_len;
        ran++;
        if (!a.quiet) {
            if (sim)
                printf("step %6lld/%lld | %8.2f ms (model %8.2f ms)\n", (long long)s.step,
                       (long long)a.tc.steps, s.step_ms, r.model_ms);
            else
                printf("step %6lld/%lld | loss %.4f | lr %.2e | norm %6.3f | %8.2f ms | %9.0f "
                       "tok/s\n",
                       (long long)s.step, (long long)a.tc.steps, (double)s.loss, (double)s.lr,
                       s.grad_norm, s.step_ms, s.tokens_per_s);
            fflush(stdout);
        }
        if (log) {
            if (sim)
                fprintf(log, "{\"step\": %lld, \"step_ms\": %.3f, \"model_ms\": %.3f}\n",
                        (long long)s.step, s.step_ms, r.model_ms);
            else
                fprintf(log,
                        "{\"step\": %lld, \"loss\": %.6f, \"step_ms\": %.3f, \"tokens_per_s\": "
                        "%.1f, \"lr\": %.6g, \"grad_norm\": %.6g}\n",
                        (long long)s.step, (double)s.loss, s.step_ms, s.tokens_per_s,
                        (double)s.lr, s.grad_norm);
            fflush(log);
        }
        if (a.save_every && s.step % a.save_every == 0 &&
            (st = pp_pipe_trainer_save(tr, a.save)) != PP_OK)
            goto out;
    }
    if (a.save && (st = pp_pipe_trainer_save(tr, a.save)) != PP_OK)
        goto out;
#ifdef PP_HAVE_MPI
    /* again at the end: two exchanges far apart pin the clock's drift as well as its offset */
    if (mpi && a.clock_sync > 0 && (st = pp_mpi_clock_sync(a.clock_sync, 1)) != PP_OK)
        goto out;
#endif
    if (rank != 0) {
        /* the summary is rank 0's */
    } else if (ran > 0 && sim) {
        printf("done: %lld steps, mean step time %.3f ms (time model %.3f ms)\n", (long long)ran,
               total_ms / ran, total_model_ms / ran);
    } else if (ran > 0) {
        int n = ntail < TAIL ? ntail : TAIL;
        double mean = 0.0;
        for (int i = 0; i < n; i++)
            mean += tail[i];
        mean /= n;
        printf("done: %lld steps in %.2f s, %.0f tokens/s; final loss %.4f (mean of last %d "
               "steps)",
               (long long)ran, total_ms / 1e3, total_tokens / (total_ms / 1e3), mean, n);
        if (!isnan(entropy))
            printf("; entropy rate %.4f, gap %+.1f%%", entropy, 100.0 * (mean / entropy - 1.0));
        printf("\n");
#ifdef PP_HAVE_CUDA
        if (a.backend == PP_BACKEND_CUDA) {
            /* docs/metrics.md "Model FLOPs and MFU": every GPU of the job counts in the peak */
            int gpus = mpi ? world : 1;
            const char *peak_source = "unknown";
            double peak = pp_cuda_peak_flops(pc.cuda_device, (pp_cuda_precision)a.precision,
                                             &peak_source);
            double flops = total_tokens / (total_ms / 1e3) * pp_model_config_train_flops_per_token(mc);
            char dev[160] = "";
            pp_cuda_device_describe(pc.cuda_device, dev, sizeof dev);
            printf("gpu: %s, %s; %.4g GFLOP/token, model %.2f TFLOP/s", dev,
                   pp_cuda_precision_name((pp_cuda_precision)a.precision),
                   pp_model_config_train_flops_per_token(mc) * 1e-9, flops * 1e-12);
            if (peak > 0)
                printf(", MFU %.1f%% of %d x %.1f TFLOP/s peak (%s)",
                       100.0 * flops / (gpus * peak), gpus, peak * 1e-12, peak_source);
            else
                printf(", no MFU (peak of this GPU unknown)");
            printf("\n");
        }
#endif
    } else {
        printf("done: nothing to do, already at step %lld\n",
               (long long)pp_pipe_trainer_steps_done(tr));
    }
    if (a.save && rank == 0)
        printf("checkpoint: %s (step %lld)\n", a.save,
               (long long)pp_pipe_trainer_steps_done(tr));
out:
    if (log && fclose(log) != 0 && st == PP_OK)
        st = PP_ERR(PP_ERR_IO, "--log-json '%s': write failed", a.log_json);
    pp_pipe_trainer_destroy(tr);
    pp_data_destroy(data);
    pp_costs_destroy(costs);
    pp_partition_free(&part);
    if (!mpi)
        return st == PP_OK ? PP_EXIT_OK : pp_tool_fail(st);
#ifdef PP_HAVE_MPI
    if (st != PP_OK && trainer_made) {
        /* The other ranks may be blocked on this one: report, then end the job. */
        fprintf(stderr, "pptrain: rank %d: %s\n", rank, pp_error_message());
        fflush(stderr);
        pp_mpi_abort_job(pp_status_exit_code(st));
    }
    /* Errors before the trainer are the same on every rank (flags, files): rank 0 reports. */
    rc = st == PP_OK ? PP_EXIT_OK : rank == 0 ? pp_tool_fail(st) : pp_status_exit_code(st);
    pp_mpi_finalize();
#endif
    return rc;
}
