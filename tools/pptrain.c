/* pptrain: pipeprof's reference training job, a GPT-style decoder trained pipeline-parallel:
 * S stages under a schedule (GPipe, 1F1B, interleaved, ZB-H1), on the cpu backend or the timed
 * sim backend. A thin main over runtime/: flags (pptrain_args.c) -> pp_pipe_config, then the
 * step loop, logging and checkpoints. Exit codes: 0 ok, 2 usage or bad input, 3 runtime
 * error. */
#include "pp_exec.h"
#ifdef PP_HAVE_CUDA
#include "pp_cuda.h"
#endif
#include "pp_kernels.h"
#include "pp_runtime.h"
#include "pp_tool.h"
#include "pptrain_args.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Everything main builds, in the order it builds it. */
typedef struct job {
    pptrain_args a;
    /* With a one-stage-per-process transport (mpi, nccl: MPI bootstraps NCCL) this process is
     * one rank running one stage; rank 0 alone prints the per-step lines, the summary and the
     * --log-json file (the loss is known on every rank after the all-reduce). */
    int mpi, rank, world;
    int64_t die_step;
    int trainer_made; /* after this, a failing rank must end the whole MPI job */
    int sim, L;
    pp_costs *costs;
    pp_data *data;
    pp_partition part;
    double entropy;
    char data_desc[512];
    pp_pipe_config pc;
    pp_pipe_trainer *tr;
    FILE *log;
} job;

/* The summary's loss averages the last steps: one batch's loss is too noisy to compare with
 * the entropy rate. */
enum { TAIL = 10 };
typedef struct run_totals {
    float tail[TAIL];
    int ntail;
    double total_ms, total_tokens, total_model_ms;
    int64_t ran;
} run_totals;

static void print_pipeline(const pptrain_args *a, const pp_partition *part, pp_pipe_trainer *tr)
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
           pp_backend_kind_name(a->backend), bounds);
    for (int s = 0; s < part->S; s++)
        printf("%s%d", s ? "," : " ", rep->peak_inflight[s]);
    if (a->recompute && strcmp(a->recompute, "none") != 0)
        printf(", recompute %s", a->recompute);
    printf("\n");
}

/* Each local stage's peak memory, in total and of its activations (docs/pptrain.md). */
static void print_memory(const job *j)
{
    int S = j->part.S, first = 0;
    int local = pp_pipe_trainer_local_stage(j->tr);
    printf("memory: peak MiB per stage (total/activations)");
    for (int s = 0; s < S; s++) {
        pp_stage_mem m;
        if ((local >= 0 && s != local) || pp_pipe_trainer_memory(j->tr, s, &m) != PP_OK)
            continue;
        printf("%s s%d %.2f/%.2f", first++ ? "," : "", s, (double)m.peak_total / 1048576.0,
               (double)m.peak[PP_STAGE_MEM_ACTIVATIONS] / 1048576.0);
    }
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

/* What the transport needs before anything else: its backend, replicas only where one process
 * runs one stage, and MPI started for those. -1 to go on, else an exit code. */
static int start_processes(job *j, int *argc, char ***argv)
{
    const pp_transport_entry *e = pp_transport_entry_of(j->a.transport);
    j->world = 1;
    j->mpi = e->one_stage_per_process;
    if (e->device_only && j->a.backend != PP_BACKEND_CUDA)
        return pp_tool_usage_error("--transport %s moves GPU memory: it needs --backend cuda",
                                   e->name);
    if (j->a.dp > 1 && !j->mpi)
        return pp_tool_usage_error("--dp %d: data-parallel replicas need --transport mpi or nccl "
                                   "(and mpirun -np STAGES*%d)",
                                   j->a.dp, j->a.dp);
    if (j->mpi && !e->built)
        return pp_tool_usage_error("--transport %s: this build has no %s", e->name, e->missing);
    if (j->mpi) {
        pp_status st = pp_mpi_init(argc, argv, &j->rank, &j->world);
        if (st != PP_OK)
            return pp_tool_fail(st);
        if (j->rank != 0) {
            j->a.quiet = 1;
            j->a.log_json = NULL;
        }
    }
    /* Test hook (docs/pptrain.md): a rank that dies without warning, for the tests of
     * pprof-run and the analyzer on a job that loses a process mid-run. */
    j->die_step = test_die_step(j->rank);
    return -1;
}

/* The world must hold one rank per stage and replica. */
static pp_status check_world(const job *j)
{
    int S = j->part.S, dp = j->a.dp;
    if (!j->mpi || j->world == S * dp)
        return PP_OK;
    if (dp > 1)
        return PP_ERR(PP_ERR_INVALID,
                      "--transport mpi runs one stage per rank: %d stage(s) x %d replica(s) "
                      "need mpirun -np %d, this job has %d rank(s)",
                      S, dp, S * dp, j->world);
    return PP_ERR(PP_ERR_INVALID,
                  "--transport mpi runs one stage per rank: %d stage(s) need mpirun -np %d, this "
                  "job has %d rank(s)",
                  S, S, j->world);
}

/* --print-schedule: each stage's instruction list (rank 0). */
static pp_status print_schedule(const job *j)
{
    pp_schedule *sc = NULL;
    pp_status st = pp_schedule_create(j->a.schedule, j->part.S, j->a.tc.microbatches, j->part.v,
                                      &sc);
    if (st == PP_OK) {
        pp_schedule_print(sc, stdout);
        pp_schedule_destroy(sc);
    }
    return st;
}

/* Training data (cpu, cuda): a token file or the synthetic corpus, after the config checks. */
static pp_status open_data(job *j)
{
    const pptrain_args *a = &j->a;
    pp_status st;
    if ((st = pp_train_config_validate(&a->tc)) != PP_OK)
        return st;
    if (a->save && (st = pptrain_check_writable_dir(a->save, "--save")) != PP_OK)
        return st;
    if (a->data)
        st = pp_data_tokens_open(a->data, a->tc.model.vocab_size, a->tc.model.seq_len, &j->data);
    else
        st = pp_data_markov_create(a->tc.model.vocab_size, a->branching, a->tc.seed, &j->data);
    if (st != PP_OK)
        return st;
    j->entropy = pp_data_entropy_rate(j->data);
    snprintf(j->data_desc, sizeof j->data_desc, "%s", pp_data_describe(j->data));
    return PP_OK;
}

/* The GPU of this process: --device, or under mpirun the node-local rank. */
static pp_status choose_cuda_device(job *j)
{
#ifdef PP_HAVE_CUDA
    char why[256] = "";
    int ndev = pp_cuda_device_count(why, sizeof why);
    if (ndev < 1)
        return PP_ERR(PP_ERR_INVALID, "--backend cuda: %s", why);
    if (j->a.device < 0 && j->mpi) {
        /* one process per GPU: the node-local rank picks it */
        const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        j->pc.cuda_device = lr ? atoi(lr) % ndev : 0;
    }
    if (j->pc.cuda_device >= ndev)
        return PP_ERR(PP_ERR_INVALID, "--device %d: this machine has %d CUDA device(s)",
                      j->pc.cuda_device, ndev);
    return PP_OK;
#else
    (void)j;
    return PP_ERR(PP_ERR_INVALID, "--backend cuda: this build has no CUDA (no CUDA toolkit at "
                                  "configure time)");
#endif
}

/* The pipeline trainer's configuration from the flags and what was loaded. */
static pp_status make_pipe_config(job *j)
{
    const pptrain_args *a = &j->a;
    j->pc = (pp_pipe_config){.train = a->tc,
                             .backend = a->backend,
                             .schedule = a->schedule,
                             .v = j->part.v,
                             .partition = j->part,
                             .costs = j->costs,
                             .slow_stage = a->slow_stage,
                             .slow_factor = a->slow_factor,
                             .sim_jitter = a->jitter_given ? &a->jitter : NULL,
                             .recompute = a->recompute,
                             .transport = a->transport,
                             .dp = a->dp,
                             .cuda_device = a->device >= 0 ? a->device : 0,
                             .cuda_precision = a->precision};
    return a->backend == PP_BACKEND_CUDA ? choose_cuda_device(j) : PP_OK;
}

/* Everything before the trainer: model (or cost file), partition, checks, data. *early is set
 * when --print-schedule has done the job. */
static pp_status prepare(job *j, int *early)
{
    pptrain_args *a = &j->a;
    pp_status st;
    if ((st = pptrain_partition(a, j->L, &j->part)) != PP_OK ||
        (st = pp_schedule_check_args(a->schedule, j->part.S, a->tc.microbatches, j->part.v)) !=
            PP_OK ||
        (st = check_world(j)) != PP_OK)
        return st;
    if (a->print_schedule && j->rank == 0) {
        *early = 1;
        return print_schedule(j);
    }
    if (!j->sim && (st = open_data(j)) != PP_OK)
        return st;
    if (a->slow_stage >= j->part.S)
        return PP_ERR(PP_ERR_INVALID, "--sim-slow stage %d does not exist (S = %d)",
                      a->slow_stage, j->part.S);
    /* Stages are threads that already share the cores; unless the user chose a BLAS thread
     * count, each stage's GEMMs run on its own thread (2x faster at S = 4 on 2 cores). */
    if (!j->sim && j->part.S > 1 && !getenv("OPENBLAS_NUM_THREADS"))
        pp_kernels_set_blas_threads(1);
    return make_pipe_config(j);
}

/* The trainer, a checkpoint to resume from, the first clock exchange and the step log. */
static pp_status start_trainer(job *j)
{
    const pptrain_args *a = &j->a;
    pp_status st;
    j->trainer_made = 1;
    st = pp_pipe_trainer_create(&j->pc, j->data, &j->tr);
    j->data = NULL; /* owned by the trainer now, even on failure */
    if (st != PP_OK)
        return st;
    if (a->resume && (st = pp_pipe_trainer_load(j->tr, a->resume)) != PP_OK)
        return st;
    if (j->mpi && a->clock_sync > 0 && (st = pp_mpi_clock_sync(a->clock_sync, 0)) != PP_OK)
        return st;
    if (a->log_json) {
        j->log = fopen(a->log_json, "w");
        if (!j->log)
            return PP_ERR(PP_ERR_INVALID, "--log-json '%s': cannot open for writing",
                          a->log_json);
    }
    return PP_OK;
}

static void print_header(const job *j)
{
    const pptrain_args *a = &j->a;
    const pp_model_config *mc = &a->tc.model;
    if (j->sim)
        printf("model: %d layers from cost file '%s'\n", j->L, a->costs);
    else
        printf("model: V=%d T=%d C=%d heads=%d layers=%d, %zu parameters\n", mc->vocab_size,
               mc->seq_len, mc->d_model, mc->n_heads, mc->n_layers,
               pp_model_config_num_params(mc));
    if (!j->sim)
        printf("data: %s\n", j->data_desc);
    print_pipeline(a, &j->part, j->tr);
    if (j->sim && a->jitter_given) {
        char spec[PP_JITTER_MAX_SPEC];
        pp_jitter_format(&a->jitter, spec, sizeof spec);
        printf("jitter: %s (each compute op's cost times a factor of this distribution)\n",
               spec);
    }
    if (!j->sim)
        printf("training: %lld steps, batch %d (%d micro-batches), lr %g, seed %llu%s\n",
               (long long)a->tc.steps, a->tc.batch, a->tc.microbatches, (double)a->tc.opt.lr,
               (unsigned long long)a->tc.seed, a->resume ? ", resumed" : "");
    if (a->resume)
        printf("resumed from '%s' at step %lld\n", a->resume,
               (long long)pp_pipe_trainer_steps_done(j->tr));
    fflush(stdout);
}

/* One step's line on stdout (unless -q) and in the --log-json file. */
static void report_step(const job *j, const pp_step_stats *s, const pp_exec_result *r)
{
    if (!j->a.quiet) {
        if (j->sim)
            printf("step %6lld/%lld | %8.2f ms (model %8.2f ms)\n", (long long)s->step,
                   (long long)j->a.tc.steps, s->step_ms, r->model_ms);
        else
            printf("step %6lld/%lld | loss %.4f | lr %.2e | norm %6.3f | %8.2f ms | %9.0f "
                   "tok/s\n",
                   (long long)s->step, (long long)j->a.tc.steps, (double)s->loss, (double)s->lr,
                   s->grad_norm, s->step_ms, s->tokens_per_s);
        fflush(stdout);
    }
    if (!j->log)
        return;
    if (j->sim)
        fprintf(j->log, "{\"step\": %lld, \"step_ms\": %.3f, \"model_ms\": %.3f}\n",
                (long long)s->step, s->step_ms, r->model_ms);
    else
        fprintf(j->log,
                "{\"step\": %lld, \"loss\": %.6f, \"step_ms\": %.3f, \"tokens_per_s\": "
                "%.1f, \"lr\": %.6g, \"grad_norm\": %.6g}\n",
                (long long)s->step, (double)s->loss, s->step_ms, s->tokens_per_s, (double)s->lr,
                s->grad_norm);
    fflush(j->log);
}

/* The steps up to --steps (or --stop-at), with periodic checkpoints. */
static pp_status run_steps(job *j, run_totals *tot)
{
    const pptrain_args *a = &j->a;
    pp_status st;
    pp_step_stats s = {0};
    pp_exec_result r = {0};
    int64_t last = a->stop_at && a->stop_at < a->tc.steps ? a->stop_at : a->tc.steps;
    while (pp_pipe_trainer_steps_done(j->tr) < last) {
        if (j->die_step > 0 && pp_pipe_trainer_steps_done(j->tr) + 1 >= j->die_step) {
            fflush(NULL);
            raise(SIGKILL);
        }
        if ((st = pp_pipe_trainer_step(j->tr, &s, &r)) != PP_OK)
            return st;
        tot->tail[tot->ntail++ % TAIL] = s.loss;
        tot->total_ms += s.step_ms;
        tot->total_model_ms += r.model_ms;
        tot->total_tokens += j->sim ? 0.0 : (double)a->tc.batch * a->tc.model.seq_len;
        tot->ran++;
        report_step(j, &s, &r);
        if (a->save_every && s.step % a->save_every == 0 &&
            (st = pp_pipe_trainer_save(j->tr, a->save)) != PP_OK)
            return st;
    }
    if (a->save && (st = pp_pipe_trainer_save(j->tr, a->save)) != PP_OK)
        return st;
    /* again at the end: two exchanges far apart pin the clock's drift as well as its offset */
    if (j->mpi && a->clock_sync > 0)
        return pp_mpi_clock_sync(a->clock_sync, 1);
    return PP_OK;
}

/* docs/metrics.md "Model FLOPs and MFU": every GPU of the job counts in the peak. */
static void print_gpu_summary(const job *j, const run_totals *tot)
{
#ifdef PP_HAVE_CUDA
    const pp_model_config *mc = &j->a.tc.model;
    pp_cuda_precision prec = (pp_cuda_precision)j->a.precision;
    int gpus = j->mpi ? j->world : 1;
    const char *peak_source = "unknown";
    double peak = pp_cuda_peak_flops(j->pc.cuda_device, prec, &peak_source);
    double per_token = pp_model_config_train_flops_per_token(mc);
    double flops = tot->total_tokens / (tot->total_ms / 1e3) * per_token;
    char dev[160] = "";
    pp_cuda_device_describe(j->pc.cuda_device, dev, sizeof dev);
    printf("gpu: %s, %s; %.4g GFLOP/token, model %.2f TFLOP/s", dev, pp_cuda_precision_name(prec),
           per_token * 1e-9, flops * 1e-12);
    if (peak > 0)
        printf(", MFU %.1f%% of %d x %.1f TFLOP/s peak (%s)", 100.0 * flops / (gpus * peak), gpus,
               peak * 1e-12, peak_source);
    else
        printf(", no MFU (peak of this GPU unknown)");
    printf("\n");
#else
    (void)j, (void)tot;
#endif
}

/* The last lines (rank 0): mean step time (sim) or throughput, final loss and its gap to the
 * corpus' entropy rate; the checkpoint written. */
static void print_summary(const job *j, const run_totals *tot)
{
    int64_t ran = tot->ran;
    if (j->rank != 0)
        return;
    if (ran > 0 && j->sim) {
        printf("done: %lld steps, mean step time %.3f ms (time model %.3f ms)\n", (long long)ran,
               tot->total_ms / ran, tot->total_model_ms / ran);
    } else if (ran > 0) {
        int n = tot->ntail < TAIL ? tot->ntail : TAIL;
        double mean = 0.0;
        for (int i = 0; i < n; i++)
            mean += tot->tail[i];
        mean /= n;
        printf("done: %lld steps in %.2f s, %.0f tokens/s; final loss %.4f (mean of last %d "
               "steps)",
               (long long)ran, tot->total_ms / 1e3, tot->total_tokens / (tot->total_ms / 1e3),
               mean, n);
        if (!isnan(j->entropy))
            printf("; entropy rate %.4f, gap %+.1f%%", j->entropy,
                   100.0 * (mean / j->entropy - 1.0));
        printf("\n");
        if (j->a.backend == PP_BACKEND_CUDA)
            print_gpu_summary(j, tot);
    }
    if (ran > 0)
        print_memory(j);
    else {
        printf("done: nothing to do, already at step %lld\n",
               (long long)pp_pipe_trainer_steps_done(j->tr));
    }
    if (j->a.save)
        printf("checkpoint: %s (step %lld)\n", j->a.save,
               (long long)pp_pipe_trainer_steps_done(j->tr));
}

/* Frees the job and turns st into the exit code; over MPI a rank that fails once the trainer
 * exists ends the whole job (the others may be blocked on it). */
static int finish(job *j, pp_status st)
{
    if (j->log && fclose(j->log) != 0 && st == PP_OK)
        st = PP_ERR(PP_ERR_IO, "--log-json '%s': write failed", j->a.log_json);
    pp_pipe_trainer_destroy(j->tr);
    pp_data_destroy(j->data);
    pp_costs_destroy(j->costs);
    pp_partition_free(&j->part);
    if (!j->mpi)
        return st == PP_OK ? PP_EXIT_OK : pp_tool_fail(st);
    if (st != PP_OK && j->trainer_made) {
        fprintf(stderr, "pptrain: rank %d: %s\n", j->rank, pp_error_message());
        fflush(stderr);
        pp_mpi_abort_job(pp_status_exit_code(st));
    }
    /* Errors before the trainer are the same on every rank (flags, files): rank 0 reports. */
    int rc = st == PP_OK ? PP_EXIT_OK
             : j->rank == 0 ? pp_tool_fail(st)
                            : pp_status_exit_code(st);
    pp_mpi_finalize();
    return rc;
}

int main(int argc, char **argv)
{
    pp_tool_init("pptrain");
    static job j; /* zeroed */
    pptrain_args *a = &j.a;
    int rc = pptrain_parse_args(argc, argv, a);
    if (rc < 0)
        rc = start_processes(&j, &argc, &argv);
    if (rc >= 0)
        return rc;
    pp_status st;
    j.sim = a->backend == PP_BACKEND_SIM;
    j.entropy = NAN;
    if (j.sim) {
        if ((st = pp_costs_load(a->costs, &j.costs)) != PP_OK)
            return pp_tool_fail(st);
        j.L = j.costs->n_layers;
        if ((st = pp_adamw_config_validate(&a->tc.opt)) != PP_OK)
            return finish(&j, st);
    } else {
        if ((st = pptrain_model_config(a, &a->tc.model)) != PP_OK)
            return pp_tool_fail(st);
        j.L = pp_model_config_num_layers(&a->tc.model);
    }
    int early = 0;
    if ((st = prepare(&j, &early)) != PP_OK || early || (st = start_trainer(&j)) != PP_OK)
        return finish(&j, st);
    if (!a->quiet)
        print_header(&j);
    run_totals tot = {0};
    if ((st = run_steps(&j, &tot)) == PP_OK)
        print_summary(&j, &tot);
    return finish(&j, st);
}
