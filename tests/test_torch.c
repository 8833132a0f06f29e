/* test_torch.c: real torch.distributed.pipelining jobs (tests/py/torch_pipe.py) on CPU under
 * torchrun with gloo and torch.profiler, analyzed from their own Kineto traces as a PyTorch user
 * would (pprof-report DIR on the trace directory, no pprof-run), and checked against what
 * tests/py/kineto_truth.py computes from the same files: the stage count, each stage's mean
 * forward and backward per micro-batch (within 2%), the step time, the straggler named. Then the
 * Gantt picture, the Chrome export and a pprof-check baseline from the same directory; and
 * pprof-tune's split points applied to the job: the re-run's step improves and lands near the
 * prediction.
 *
 * The Python comes from PPROF_TORCH_PYTHON, else the CMake cache's PP_TORCH_PYTHON, else the
 * venv scripts/setup.sh makes (PPROF_TORCH_VENV, /var/cache/pipeprof/torch-local, or
 * ${XDG_CACHE_HOME:-~/.cache}/pipeprof/torch-local). The tests skip, saying so, when none of
 * them has torch and numpy. torchrun is `python -m torch.distributed.run`. The extraction of
 * a torch job's layer costs (module events: forward only) is tested without Python. */
#define _GNU_SOURCE
#include "check_internal.h" /* pp_check_fnv1a */
#include "pp_extract.h"

#include <cJSON.h>
#include "pp_testkit.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REPORT PP_BUILD_DIR "/tools/pprof-report"
#define TUNE PP_BUILD_DIR "/tools/pprof-tune"
#define CHECK PP_BUILD_DIR "/tools/pprof-check"
#define JOB PP_TEST_PY_DIR "/torch_pipe.py"
#define TRUTH PP_TEST_PY_DIR "/kineto_truth.py"
#define DS_JOB PP_TEST_PY_DIR "/ds_pipe.py"
#define MG_JOB PP_TEST_PY_DIR "/megatron_pipe.py"

static void setup(void) { tk_dir_create("pp_torch"); }

TestSuite(torch, .init = setup, .fini = tk_dir_remove, .timeout = 300);
TestSuite(torch_stack, .init = setup, .fini = tk_dir_remove, .timeout = 60);

/* The first Python with torch and numpy (found, not imported: an import takes seconds) of:
 * PPROF_TORCH_PYTHON, PP_TORCH_PYTHON, setup.sh's venvs. */
static const char *find_python(void)
{
    return tk_find_python("PPROF_TORCH_PYTHON", PP_TORCH_PYTHON, "PPROF_TORCH_VENV", "torch-local",
                          "import importlib.util as u, sys; "
                          "sys.exit(0 if u.find_spec('torch') and u.find_spec('numpy') else 1)");
}

static const char *need_python(void)
{
    const char *py = find_python();
    if (!py) {
        tk_dir_remove(); /* a skipped test's .fini does not run */
        cr_skip_test("no Python with torch and numpy (run scripts/setup.sh, or set "
                     "PPROF_TORCH_PYTHON or PPROF_TORCH_VENV)");
    }
    return py;
}

/* Under the sanitizers (CI's second pass, where every job runs again at the same speed and only
 * the tools are sanitized) a job whose recording test_kineto analyses with the same tools, under
 * the same sanitizers, is not run again: the test skips, naming the recording (tests/data/kineto/
 * `recording`), or, for a test whose subject is a re-run's timing (recording NULL), saying that
 * timing is the optimised build's to show. The optimised build runs them all. This took the
 * sanitized pass's torch test from 207 s to about 150 (CI, 2 cores, 2026-12-04). */
static void optimised_build_only(const char *recording)
{
#if defined(__SANITIZE_ADDRESS__)
    tk_dir_remove(); /* a skipped test's .fini does not run */
    if (recording)
        cr_skip_test("sanitized build: this job's recording, tests/data/kineto/%s, is analysed "
                     "under the sanitizers by test_kineto; the job itself runs in the optimised "
                     "build",
                     recording);
    cr_skip_test("sanitized build: this test judges a re-run's timing, the optimised build's to "
                 "show");
#else
    (void)recording;
#endif
}

/* Runs argv; fails the test with its output unless it exits 0. */
static void run_ok(const char *what, const char *const *argv)
{
    tk_result r = tk_runv(argv, NULL);
    if (r.code != 0) {
        /* the tail of stderr is where Python and the tools say why */
        const char *err = r.err ? r.err : "";
        size_t n = strlen(err);
        cr_assert_fail("%s failed (%d):\n%s\n%s", what, r.code, r.out ? r.out : "",
                       n > 4000 ? err + n - 4000 : err);
    }
    tk_result_free(&r);
}

/* CI's job cache (PPROF_TORCH_JOB_CACHE, which scripts/test.sh points at build-ci/torch-jobs):
 * the optimised build stores each job's output directory there after it ran, under a hash of its
 * rank count, script and arguments; the sanitized build, which runs the same jobs at the same
 * speed in CI's second pass (only the tools are sanitized), copies an entry it finds into the
 * job's directory instead of running the job again, and analyses it under the sanitizers.
 * Without the variable every job runs. Fills entry with the path; 0 without a cache. */
static int job_cache_entry(int n, const char *script, const char *const *args, char *entry,
                           size_t cap)
{
    const char *cache = getenv("PPROF_TORCH_JOB_CACHE");
    if (!cache || !*cache)
        return 0;
    /* FNV-1a (pprof-check's, which fingerprints layer names) over n, script, args, each with
     * its 0 */
    char nbuf[16];
    snprintf(nbuf, sizeof nbuf, "%d", n);
    uint64_t h = pp_check_fnv1a(1469598103934665603ull, nbuf, strlen(nbuf) + 1);
    h = pp_check_fnv1a(h, script, strlen(script) + 1);
    for (int i = 0; args[i]; i++)
        h = pp_check_fnv1a(h, args[i], strlen(args[i]) + 1);
    int len = snprintf(entry, cap, "%s/%016llx", cache, (unsigned long long)h);
    cr_assert(len > 0 && (size_t)len < cap, "PPROF_TORCH_JOB_CACHE is too long");
    return 1;
}

/* torchrun --nproc-per-node n script --out dir <args> */
static void run_script(const char *py, int n, const char *script, const char *dir,
                       const char *const *args)
{
    char entry[4096];
    int cached = job_cache_entry(n, script, args, entry, sizeof entry);
#if defined(__SANITIZE_ADDRESS__)
    struct stat st;
    if (cached && stat(entry, &st) == 0 && S_ISDIR(st.st_mode)) {
        const char *mk[] = {"mkdir", "-p", dir, NULL};
        run_ok("mkdir -p", mk);
        char from[4200];
        snprintf(from, sizeof from, "%s/.", entry);
        const char *cp[] = {"cp", "-a", from, dir, NULL};
        run_ok("copying the optimised build's run of the job", cp);
        cr_log_info("%s: the optimised build's run of this job (%s)", script, entry);
        return;
    }
#endif
    const char *argv[40] = {py, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node"};
    int k = 5;
    char nbuf[16];
    snprintf(nbuf, sizeof nbuf, "%d", n);
    argv[k++] = nbuf;
    argv[k++] = script;
    argv[k++] = "--out";
    argv[k++] = dir;
    for (int i = 0; args[i]; i++) {
        cr_assert_lt(k, 38);
        argv[k++] = args[i];
    }
    argv[k] = NULL;
    run_ok("the torch job under torchrun", argv);
#if !defined(__SANITIZE_ADDRESS__)
    if (cached) { /* the job's output as it ran, before any analysis writes beside it */
        const char *rm[] = {"rm", "-rf", entry, NULL};
        run_ok("rm -rf", rm);
        char parent[4096];
        snprintf(parent, sizeof parent, "%s", entry);
        *strrchr(parent, '/') = '\0';
        const char *mk[] = {"mkdir", "-p", parent, NULL};
        run_ok("mkdir -p", mk);
        const char *cp[] = {"cp", "-a", dir, entry, NULL};
        run_ok("storing the job's run for the sanitized build", cp);
    }
#endif
}

/* torchrun --nproc-per-node n torch_pipe.py --out dir <args> */
static void run_job(const char *py, int n, const char *dir, const char *const *args)
{
    run_script(py, n, JOB, dir, args);
}

static cJSON *load_json(const char *path)
{
    char *text = tk_slurp(path, NULL);
    cr_assert_not_null(text, "%s was not written", path);
    cJSON *j = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(j, "%s is not JSON", path);
    return j;
}

static const cJSON *item(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    cr_assert_not_null(v, "no '%s'", k);
    return v;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = item(o, k);
    cr_assert(cJSON_IsNumber(v), "'%s' is not a number", k);
    return v->valuedouble;
}

/* pprof-report DIR --json into tk_dir/name; returns it parsed. */
static cJSON *report_json(const char *dir, const char *name)
{
    const char *out = tk_path(name);
    const char *argv[] = {REPORT, dir, "--json", "-q", "-o", out, NULL};
    run_ok("pprof-report --json on the trace directory", argv);
    return load_json(out);
}

/* What kineto_truth.py computes from the traces of dir (of data-parallel pipeline `replica`). */
static cJSON *truth_json_of(const char *py, const char *dir, const char *replica)
{
    const char *out = tk_path("truth.json");
    const char *argv[] = {py, TRUTH, dir, "--out", out, "--replica", replica, NULL};
    run_ok("kineto_truth.py", argv);
    return load_json(out);
}

static cJSON *truth_json(const char *py, const char *dir) { return truth_json_of(py, dir, "0"); }

/* The truth's row of step `step`, NULL when it has none. */
static const cJSON *truth_step(const cJSON *truth, int step)
{
    const cJSON *s;
    cJSON_ArrayForEach(s, item(truth, "steps"))
    {
        if ((int)num(s, "step") == step)
            return s;
    }
    return NULL;
}

static int within(double got, double want, double rel)
{
    return fabs(got - want) <= rel * fabs(want);
}

/* The analysis of a trace directory against the truth from the same files: the stage count
 * (S x v = the torch stages), per stage the mean forward and backward per micro-batch over
 * the analyzed steps within 2%, the mean step time within 2%, and the straggler. pipeprof's
 * stage is the rank (its chunks are the torch stages it holds), so the truth's per-rank sums
 * are what its stages compare with. */
static void check_against_truth(const cJSON *sum, const cJSON *truth)
{
    const cJSON *pipe = item(sum, "pipeline");
    int S = (int)num(pipe, "stages"), v = (int)num(pipe, "virtual_stages");
    int R = (int)num(truth, "ranks"), P = (int)num(truth, "pieces");
    cr_expect_eq(S, R, "pprof-report found %d stages on %d ranks", S, R);
    cr_assert_eq(S * v, P, "pprof-report found %d x %d stages, the traces hold %d torch stages",
                 S, v, P);

    const cJSON *steps = item(sum, "steps");
    int n_steps = cJSON_GetArraySize(steps);
    cr_assert_geq(n_steps, 2, "only %d steps analyzed", n_steps);
    double t_step = 0;
    double *f = calloc((size_t)S, sizeof *f), *b = calloc((size_t)S, sizeof *b);
    double *o = calloc((size_t)S, sizeof *o);
    int *nf = calloc((size_t)S, sizeof *nf), *nb = calloc((size_t)S, sizeof *nb);
    int *no = calloc((size_t)S, sizeof *no);
    cr_assert(f && b && o && nf && nb && no);
    const cJSON *st;
    cJSON_ArrayForEach(st, steps)
    {
        int step = (int)num(st, "step");
        const cJSON *ts = truth_step(truth, step);
        cr_assert_not_null(ts, "step %d of the analysis is no ProfilerStep#%d of the traces",
                           step, step);
        t_step += num(ts, "step_ms");
        for (int s = 0; s < S; s++) {
            const cJSON *c = cJSON_GetArrayItem(item(ts, "ranks"), s);
            f[s] += num(c, "fwd_sum_ms");
            b[s] += num(c, "bwd_sum_ms");
            nf[s] += (int)num(c, "fwd_n");
            nb[s] += (int)num(c, "bwd_n");
            o[s] += num(c, "opt_sum_ms");
            no[s] += (int)num(c, "opt_n");
        }
    }
    t_step /= n_steps;
    double got_step = num(item(item(sum, "aggregates"), "step_ms"), "mean");
    cr_expect(within(got_step, t_step, 0.02), "step time %.3f ms, the traces say %.3f ms",
              got_step, t_step);
    int M = (int)num(pipe, "microbatches");
    const cJSON *stages = item(sum, "stages");
    for (int s = 0; s < S; s++) {
        const cJSON *g = cJSON_GetArrayItem(stages, s);
        cr_assert_not_null(g);
        cr_expect_eq(nf[s], n_steps * M * v, "stage %d: %d forwards in the traces' steps", s,
                     nf[s]);
        const cJSON *fs = item(g, "fwd_ms");
        double want_f = f[s] / nf[s], want_b = b[s] / nb[s];
        cr_expect_eq((int)num(fs, "count"), nf[s], "stage %d forward count", s);
        cr_expect(within(num(fs, "mean"), want_f, 0.02),
                  "stage %d forward %.4f ms per micro-batch, the traces say %.4f ms", s,
                  num(fs, "mean"), want_f);
        /* a split backward (I and W, which the truth counts as backward ops alike): the mean
         * over both kinds */
        double got_b = 0;
        int n_b = 0;
        static const char *const bwd_kinds[] = {"bwd_ms", "bwd_input_ms", "bwd_weight_ms"};
        for (int k = 0; k < 3; k++) {
            const cJSON *bs = item(g, bwd_kinds[k]);
            int n = (int)num(bs, "count");
            if (n > 0)
                got_b += num(bs, "mean") * n;
            n_b += n;
        }
        cr_expect_eq(n_b, nb[s], "stage %d: %d backward ops, the traces hold %d", s, n_b, nb[s]);
        got_b = n_b > 0 ? got_b / n_b : 0;
        cr_expect(within(got_b, want_b, 0.02),
                  "stage %d backward %.4f ms per op, the traces say %.4f ms", s, got_b, want_b);
        cr_log_info("stage %d: fwd %.4f (truth %.4f), bwd %.4f (truth %.4f) ms", s,
                    num(fs, "mean"), want_f, got_b, want_b);
        /* torch.optim's step (Optimizer.step#SGD.step), once a step on every rank */
        const cJSON *os = item(g, "opt_ms");
        cr_expect_eq((int)num(os, "count"), no[s], "stage %d: %d optimizer steps, the traces "
                     "hold %d", s, (int)num(os, "count"), no[s]);
        if (no[s] > 0)
            cr_expect(within(num(os, "mean"), o[s] / no[s], 0.02),
                      "stage %d optimizer step %.4f ms, the traces say %.4f ms", s,
                      num(os, "mean"), o[s] / no[s]);
    }
    /* the straggler: the stage the others' imbalance is blamed on */
    int slow = (int)num(truth, "slowest_rank"), votes = 0, against = 0;
    for (int s = 0; s < S; s++) {
        const cJSON *c = cJSON_GetObjectItem(cJSON_GetArrayItem(stages, s), "imbalance_culprit");
        if (s == slow || !cJSON_IsNumber(c))
            continue;
        if ((int)c->valuedouble == slow)
            votes++;
        else
            against++;
    }
    /* or, judged on the least disturbed evidence, the fastest analyzed step's culprit: these
     * jobs run 2-4 ranks on 2 cores beside another test, and a disturbed step's critical path
     * can run through a stage that waited (CI: once ZBV's, once DualPipeV's under ASan) */
    double fastest = INFINITY;
    int quiet_culprit = -1;
    cJSON_ArrayForEach(st, steps)
    {
        const cJSON *c = cJSON_GetObjectItem(st, "culprit");
        if (cJSON_IsNumber(c) && num(st, "step_ms") < fastest) {
            fastest = num(st, "step_ms");
            quiet_culprit = (int)c->valuedouble;
        }
    }
    /* or, step by step, the stage that was slowest in that step: on 2 cores beside another
     * test a rank can share its core for a whole run (one rank's compute read 3x its work in
     * every step of a GPipe run), and then the others wait for it, not for the heavy stage */
    int agree = 0, judged = 0;
    cJSON_ArrayForEach(st, steps)
    {
        const cJSON *c = cJSON_GetObjectItem(st, "culprit");
        const cJSON *ts = truth_step(truth, (int)num(st, "step"));
        if (!cJSON_IsNumber(c) || !ts)
            continue;
        judged++;
        agree += (int)c->valuedouble == (int)num(ts, "slowest_rank");
    }
    cr_expect(votes > against || quiet_culprit == slow || 2 * agree > judged,
              "stage %d is the slowest, but the analysis blames it for %d stages' imbalance and "
              "another for %d, the fastest step's critical path on stage %d, and %d of %d steps "
              "on the stage slowest in that step",
              slow, votes, against, quiet_culprit, agree, judged);
    free(f);
    free(b);
    free(o);
    free(nf);
    free(nb);
    free(no);
}

/* A 2-stage 1F1B summary's links: activations 0 -> 1 and gradients 1 -> 0, each with every
 * micro-batch's message (M a step). */
static void check_two_links(const cJSON *sum, int M)
{
    int n_steps = cJSON_GetArraySize(item(sum, "steps")), links = 0;
    const cJSON *l;
    cJSON_ArrayForEach(l, item(sum, "links"))
    {
        int src = (int)num(l, "src"), dst = (int)num(l, "dst");
        cr_expect_eq(dst - src, strcmp(item(l, "kind")->valuestring, "grad") == 0 ? -1 : 1,
                     "link %d -> %d", src, dst);
        cr_expect_eq((int)num(l, "messages"), n_steps * M, "link %d -> %d", src, dst);
        links++;
    }
    cr_expect_eq(links, 2, "activations 0 -> 1 and gradients 1 -> 0");
}

/* A framework's 2-stage 1F1B job of 4 micro-batches (its summary, the truth from its traces):
 * read under `dialect` as that, against the truth, both links whole; its analyzed steps. */
static int check_framework_1f1b(const cJSON *sum, const cJSON *truth, const char *dialect)
{
    cr_expect_str_eq(item(sum, "dialect")->valuestring, dialect);
    const cJSON *pipe = item(sum, "pipeline");
    cr_expect_str_eq(item(pipe, "schedule")->valuestring, "1f1b");
    cr_assert_eq((int)num(pipe, "microbatches"), 4);
    cr_assert_eq((int)num(pipe, "stages"), 2);
    check_against_truth(sum, truth);
    check_two_links(sum, 4);
    return cJSON_GetArraySize(item(sum, "steps"));
}

/* Gantt picture, Chrome export and a pprof-check baseline, all from the trace directory. */
static void check_outputs(const char *dir, int S)
{
    const char *png = tk_path("gantt.png"), *chrome = tk_path("chrome.json");
    const char *argv[] = {REPORT, dir, "-q", "--gantt", png, "--chrome", chrome, NULL};
    run_ok("pprof-report --gantt --chrome", argv);
    cr_expect(tk_exists(png), "no Gantt picture");
    cJSON *c = load_json(chrome);
    const cJSON *evs = cJSON_IsArray(c) ? c : cJSON_GetObjectItem(c, "traceEvents");
    cr_assert(cJSON_IsArray(evs), "the Chrome export has no event list");
    int slices = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, evs)
    {
        const cJSON *ph = cJSON_GetObjectItem(e, "ph");
        slices += cJSON_IsString(ph) && strcmp(ph->valuestring, "X") == 0;
    }
    cr_expect_gt(slices, 4 * S, "the Chrome export holds %d slices", slices);
    cJSON_Delete(c);
    const char *base = tk_path("base.json");
    const char *cargv[] = {CHECK, "--save-baseline", dir, "-o", base, NULL};
    run_ok("pprof-check --save-baseline", cargv);
    cJSON *bj = load_json(base);
    cr_expect_not_null(cJSON_GetObjectItem(bj, "baseline_version"));
    cJSON_Delete(bj);
}

/* GPipe on 4 ranks, the last stage three times the work of the others. */
Test(torch, gpipe_4_ranks)
{
    optimised_build_only("gp");
    const char *py = need_python();
    const char *dir = tk_path("gpipe");
    const char *args[] = {"--schedule", "gpipe", "--blocks", "8", "--work",
                          "1,1,1,1,1,1,3,3", "--microbatches", "4", "--steps", "5", NULL};
    run_job(py, 4, dir, args);
    cJSON *truth = truth_json(py, dir);
    cr_assert_eq((int)num(truth, "heaviest_piece"), 3, "the job's own straggler is stage %d",
                 (int)num(truth, "heaviest_piece"));
    cJSON *sum = report_json(dir, "gpipe.json");
    check_against_truth(sum, truth);
    check_outputs(dir, 4);
    cJSON_Delete(sum);
    cJSON_Delete(truth);
}

/* Interleaved1F1B on 2 ranks x 2 chunks: torch stages 0 and 2 on rank 0, 1 and 3 on rank 1;
 * torch stage 3 has three times the work. */
Test(torch, interleaved_2_ranks_2_chunks)
{
    optimised_build_only("il");
    const char *py = need_python();
    const char *dir = tk_path("inter");
    const char *args[] = {"--schedule", "interleaved", "--chunks", "2", "--blocks", "8",
                          "--work", "1,1,1,1,1,1,3,3", "--microbatches", "4", "--steps", "5",
                          "--with-modules", NULL};
    run_job(py, 2, dir, args);
    cJSON *truth = truth_json(py, dir);
    cr_assert_eq((int)num(truth, "heaviest_piece"), 3);
    cJSON *sum = report_json(dir, "inter.json");
    check_against_truth(sum, truth);
    check_outputs(dir, 2);
    /* each rank's two chunks apart over every analyzed step (stages[].chunks): 4 forwards and
     * 4 backwards a step each; the last piece (rank 1's chunk 1: blocks 6-7 of work 3 and the
     * loss) is the slowest forward of its rank */
    double steps = num(item(sum, "analysis"), "steps");
    for (int s = 0; s < 2; s++) {
        const cJSON *chunks = item(cJSON_GetArrayItem(item(sum, "stages"), s), "chunks");
        cr_assert_eq(cJSON_GetArraySize(chunks), 2, "stage %d: %d chunks", s,
                     cJSON_GetArraySize(chunks));
        for (int c = 0; c < 2; c++) {
            const cJSON *ch = cJSON_GetArrayItem(chunks, c);
            cr_expect_eq(num(item(ch, "fwd_ms"), "count"), 4 * steps, "stage %d chunk %d", s, c);
            cr_expect_eq(num(item(ch, "bwd_ms"), "count"), 4 * steps, "stage %d chunk %d", s, c);
        }
        if (s == 1)
            cr_expect_gt(num(item(cJSON_GetArrayItem(chunks, 1), "fwd_ms"), "median"),
                         num(item(cJSON_GetArrayItem(chunks, 0), "fwd_ms"), "median"));
    }
    /* the steps whose optimizer steps started apart (each stage's when its own work ended) or
     * together: --formula names the term before the step by the majority (below) */
    int apart = 0, together = 0;
    const cJSON *st;
    cJSON_ArrayForEach(st, item(sum, "steps"))
    {
        const cJSON *b = cJSON_GetObjectItem(st, "optimizer_barrier");
        apart += cJSON_IsFalse(b);
        together += cJSON_IsTrue(b);
    }
    cJSON_Delete(sum);
    cJSON_Delete(truth);
    /* the layers in the model's order, piece by piece (rank 0's chunk 0, rank 1's chunk 0, rank
     * 0's chunk 1, ...): pprof-tune infers the run's partition, two blocks a piece (before, a
     * rank's two chunks were numbered together and the partition read as not contiguous) */
    const char *targv[] = {TUNE, dir, NULL};
    tk_result r = tk_runv(targv, NULL);
    cr_assert_eq(r.code, 0, "pprof-tune on an interleaved torch run exited %d:\n%s", r.code,
                 r.err ? r.err : "");
    const char *row = r.out ? strstr(r.out, "\nboundaries") : NULL;
    cr_assert_not_null(row, "no boundaries row:\n%s", r.out ? r.out : "");
    cr_expect(strncmp(row + strspn(row + 1, "boundaries ") + 1, "0,2,4,6,8 ", 10) == 0,
              "the run's partition reads:\n%.80s", row + 1);
    tk_result_free(&r);
    /* torch's stages step their optimizers alone; where the analysis sees it in most steps
     * (on a 24-step capture of this job, all of them) the term before the step is named as no
     * barrier. On a small job the stages' ends lie close, and a step whose last stage reached
     * its optimizer late reads as behind a barrier (a CI run read most of its 4 steps so): the
     * name follows the analysis' verdict either way. */
    const char *fargv[] = {TUNE, dir, "--formula", NULL};
    r = tk_runv(fargv, NULL);
    cr_assert_eq(r.code, 0, "pprof-tune --formula exited %d:\n%s", r.code, r.err ? r.err : "");
    cr_log_info("optimizer steps apart in %d steps, together in %d", apart, together);
    if (apart > together)
        cr_expect(strstr(r.out, "+ time before it ") &&
                      !strstr(r.out, "gradient norm and barrier"),
                  "%s", r.out);
    else
        cr_expect(strstr(r.out, "+ gradient norm and barrier ") &&
                      !strstr(r.out, "time before it"),
                  "%s", r.out);
    tk_result_free(&r);
}

/* Data and pipeline parallelism together, as torchtitan builds them: a DeviceMesh of
 * dimensions ("pp", "dp") on 4 ranks, the pipeline outermost, so ranks 0 and 2 are replica 0's
 * stages and ranks 1 and 3 replica 1's; Interleaved1F1B, 2 chunks a rank, the gradients
 * all-reduced over "dp". Read as ranks, these traces were 4 stages (two of them stage 0's
 * replica); from the process groups the traces describe (docs/kineto.md "Process groups"), each
 * replica is a 2-stage pipeline that agrees with the truth computed from its own ranks, its
 * gradient all-reduce included. */
/* Each of the dp replicas of the pipeline run in dir (rank = stage x dp + replica), analyzed
 * with --replica against the truth of its own ranks: its place per trace, the stages' compute
 * (check_against_truth) and, per step and stage, the replicas' gradient all-reduce (gloo's own
 * thread): what the compute does not hide, as the truth computes it. */
static void check_replicas(const char *py, const char *dir, int dp)
{
    for (int d = 0; d < dp; d++) {
        char rep[16], name[48];
        snprintf(rep, sizeof rep, "%d", d);
        snprintf(name, sizeof name, "dp%d.json", d);
        cJSON *truth = truth_json_of(py, dir, rep);
        cr_assert_eq((int)num(truth, "ranks"), 2);
        const char *out = tk_path(name);
        const char *argv[] = {REPORT, dir, "--json", "-q", "-o", out, "--replica", rep, NULL};
        run_ok("pprof-report --replica on the trace directory", argv);
        cJSON *sum = load_json(out);
        const cJSON *pipe = item(sum, "pipeline");
        cr_expect_eq((int)num(pipe, "data_parallel"), dp);
        cr_expect_eq((int)num(pipe, "replica"), d);
        /* each trace's place, as the summary states it */
        const cJSON *file;
        cJSON_ArrayForEach(file, item(item(sum, "run"), "files"))
        {
            int r = (int)num(file, "rank");
            cr_expect_eq((int)num(file, "pipeline_rank"), r / dp, "rank %d's stage", r);
            cr_expect_eq((int)num(file, "replica"), r % dp, "rank %d's replica", r);
        }
        check_against_truth(sum, truth);
        const cJSON *st;
        int n_ar = 0;
        cJSON_ArrayForEach(st, item(sum, "steps"))
        {
            int step = (int)num(st, "step");
            const cJSON *ts = truth_step(truth, step);
            cr_assert_not_null(ts);
            for (int s = 0; s < 2; s++) {
                double got = num(cJSON_GetArrayItem(item(st, "stages"), s), "allreduce_ms");
                const cJSON *tr = cJSON_GetArrayItem(item(ts, "ranks"), s);
                double want = num(tr, "allreduce_sum_ms");
                n_ar += (int)num(tr, "allreduce_n");
                cr_expect(fabs(got - want) <= 0.02 * want + 0.001,
                          "replica %d step %d stage %d: all-reduce %.4f ms, the traces say %.4f",
                          d, step, s, got, want);
            }
        }
        cr_expect_gt(n_ar, 0, "no all-reduce in the traces' analyzed steps");
        cJSON_Delete(sum);
        cJSON_Delete(truth);
    }
}

Test(torch, data_parallel_replicas_of_a_pipeline_on_a_device_mesh)
{
    optimised_build_only("dp");
    const char *py = need_python();
    const char *dir = tk_path("dp");
    const char *args[] = {"--schedule", "interleaved", "--chunks", "2", "--blocks", "8",
                          "--work", "1,1,1,1,1,1,4,4", "--microbatches", "4", "--steps", "4",
                          "--dp", "2", "--mesh", "pp,dp", "--dim", "128", NULL};
    run_job(py, 4, dir, args);
    check_replicas(py, dir, 2);
}

/* torch's ZBV schedule (ScheduleZBVZeroBubble) on 4 ranks: two chunks per rank placed in a V
 * (rank r holds torch stages r and 7 - r, so the model runs down the ranks and back up) and the
 * backward split into I and W. The analysis finds the V from the stage ids each trace names
 * (docs/dialects.md): chunk 0's activations go up the ranks and chunk 1's come back down, where a
 * looped reading sends them round a ring (3 -> 0) that does not exist; every step is replayed
 * for the bubble decomposition; the stages agree with the traces; and pprof-tune says it does
 * not model the schedule (exit 2) rather than proposing split points for a looped one. Rank 1
 * (torch stages 1 and 6) carries four times the work of the others: with three, one CI run (4
 * ranks on 2 cores beside another test) had the analysis blame rank 0, whose chunks hold the fill
 * and the drain, over its 2 analyzed steps; now 3 steps are analyzed. */
Test(torch, zbv_4_ranks_in_a_v)
{
    const char *py = need_python();
    const char *dir = tk_path("zbv");
    const char *args[] = {"--schedule", "zbv",  "--blocks",       "8", "--work",
                          "1,4,1,1,1,1,4,1",    "--microbatches", "8", "--dim",
                          "128",                "--steps",        "4", NULL};
    run_job(py, 4, dir, args);
    cJSON *truth = truth_json(py, dir);
    cr_assert_eq((int)num(truth, "heaviest_rank"), 1);
    cJSON *sum = report_json(dir, "zbv.json");
    const cJSON *sched = item(item(sum, "pipeline"), "schedule");
    cr_expect(cJSON_IsString(sched) && strcmp(sched->valuestring, "zbv") == 0,
              "the schedule reads %s", cJSON_IsString(sched) ? sched->valuestring : "null");
    check_against_truth(sum, truth);
    const cJSON *st;
    cJSON_ArrayForEach(st, item(sum, "steps"))
    {
        cr_expect(cJSON_IsTrue(item(st, "decomposed")), "step %d was not replayed",
                  (int)num(st, "step"));
    }
    /* the V's links, each carrying one message per micro-batch and analyzed step: activations
     * up (0 -> 1 -> 2 -> 3) for chunk 0 and down (3 -> 2 -> 1 -> 0) for chunk 1, gradients the
     * other way; nothing between ranks 3 and 0 */
    int n_steps = cJSON_GetArraySize(item(sum, "steps")), seen[4][4][2] = {{{0}}};
    const cJSON *l;
    cJSON_ArrayForEach(l, item(sum, "links"))
    {
        int a = (int)num(l, "src"), b = (int)num(l, "dst");
        int grad = strcmp(item(l, "kind")->valuestring, "grad") == 0;
        cr_assert(a >= 0 && a < 4 && b >= 0 && b < 4);
        cr_expect_eq(abs(a - b), 1, "a link %d -> %d (%s): the V has none", a, b,
                     grad ? "grad" : "act");
        cr_expect_eq((int)num(l, "messages"), 8 * n_steps, "link %d -> %d (%s): %d messages",
                     a, b, grad ? "grad" : "act", (int)num(l, "messages"));
        seen[a][b][grad] = 1;
    }
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int g = 0; g < 2; g++)
                cr_expect_eq(seen[a][b][g], abs(a - b) == 1, "link %d -> %d (%s) %s", a, b,
                             g ? "grad" : "act", seen[a][b][g] ? "unexpected" : "missing");
    cJSON_Delete(sum);
    cJSON_Delete(truth);
    const char *targv[] = {TUNE, dir, NULL};
    tk_result r = tk_runv(targv, NULL);
    cr_expect_eq(r.code, 2, "pprof-tune on a ZBV run exited %d:\n%s%s", r.code, r.out ? r.out : "",
                 r.err ? r.err : "");
    cr_expect(r.err && strstr(r.err, "is not one the tuner models"), "pprof-tune said: %s",
              r.err ? r.err : "");
    tk_result_free(&r);
}

/* torch's DualPipeV (the V placement, as ZBV) runs most forwards and backwards in pairs, a forward
 * of one stage then a backward of another in one OVERLAP_F_B action. The dialect splits each
 * where the backward's first autograd event starts (docs/dialects.md): every micro-batch's
 * forward and backward is there, with the compute times kineto_truth.py finds by the same rule
 * from the same files, the steps are replayed, and nothing is warned about. Before, the pairs
 * were not decoded (their time was idle), and with stack events (--with-modules) the
 * forward_one_chunk inside them read as Schedule1F1B's ops, micro-batches 8 to 10 of a job of
 * 8. Rank 0 (torch stages 0 and 3) carries ten Linear+tanh per block to rank 1's one, over 3
 * analyzed steps: at dim 128 a block's fixed cost (autograd, the schedule's Python) is a
 * large part of its time, and with four times the work rank 0 measured only ~1.7x rank 1's
 * compute; a release CI run on 2026-12-03 (beside the jitter test) then read stage 1 on the
 * fastest step's critical path, as runs with three times had before. Ten times measures
 * ~2.4x, and held with a CPU hog beside it. */
Test(torch, dualpipev_overlap_actions_split_into_forward_and_backward)
{
    optimised_build_only("dpv");
    const char *py = need_python();
    const char *dir = tk_path("dpv");
    const char *args[] = {"--schedule",     "dualpipev", "--blocks", "4",   "--work",
                          "10,1,1,10",      "--microbatches", "8",   "--dim", "128",
                          "--steps",        "4",         "--with-modules", NULL};
    run_job(py, 2, dir, args);
    cJSON *truth = truth_json(py, dir);
    cr_assert_eq((int)num(truth, "heaviest_rank"), 0);
    cJSON *sum = report_json(dir, "dpv.json");
    const cJSON *pipe = item(sum, "pipeline");
    cr_expect_eq((int)num(pipe, "microbatches"), 8);
    check_against_truth(sum, truth);
    const cJSON *st;
    cJSON_ArrayForEach(st, item(sum, "steps"))
    {
        cr_expect(cJSON_IsTrue(item(st, "decomposed")), "step %d was not replayed",
                  (int)num(st, "step"));
    }
    const cJSON *w;
    cJSON_ArrayForEach(w, item(item(sum, "run"), "warnings"))
    {
        cr_expect(!cJSON_IsString(w) || !strstr(w->valuestring, "OVERLAP_F_B"), "warned: %s",
                  w->valuestring);
    }
    cJSON_Delete(sum);
    cJSON_Delete(truth);
}

/* torch's Schedule1F1B names none of its actions: with_stack shows its calls (forward_one_chunk,
 * backward_one_chunk), and it posts its sends and receives between them (docs/dialects.md
 * "Schedule1F1B"). Each send is the output of the call before it, each receive the input of the
 * call after it: the links are the pipeline's, every micro-batch's message on both, and the
 * replay waits where the job waited (fill and drain; before, the transfers stayed generic
 * ranges, no links, no fill or drain, and pprof-tune's model of a small job missed its step by
 * 43%). Every rank's torch.optim step is its stage's optimizer op. */
Test(torch, schedule_1f1b_transfers_between_its_calls)
{
    const char *py = need_python();
    const char *dir = tk_path("s1f1b");
    const char *args[] = {"--schedule", "1f1b", "--blocks", "4",     "--work",  "1,1,1,3",
                          "--microbatches", "4", "--dim",  "128",   "--steps", "5",
                          "--with-modules", NULL};
    run_job(py, 2, dir, args);
    cJSON *sum = report_json(dir, "s1f1b.json");
    const cJSON *pipe = item(sum, "pipeline");
    cr_expect_str_eq(item(pipe, "schedule")->valuestring, "1f1b");
    int S = (int)num(pipe, "stages"), M = (int)num(pipe, "microbatches");
    cr_assert(S == 2 && M == 4, "S %d M %d", S, M);
    int n_steps = cJSON_GetArraySize(item(sum, "steps"));
    cr_assert_geq(n_steps, 3);
    check_two_links(sum, M);
    const cJSON *g;
    cJSON_ArrayForEach(g, item(sum, "stages"))
    {
        cr_expect_eq((int)num(item(g, "opt_ms"), "count"), n_steps, "one optimizer step a step");
        cr_expect_gt(num(g, "fill_drain_ms"), 0, "no fill or drain: the replay waited nowhere");
    }
    cJSON_Delete(sum);
}

/* The split points of pprof-tune's torchtitan line ("layers.3", ...), comma-joined. */
static void split_points_of(const char *out, char *buf, size_t cap)
{
    const char *line = strstr(out, "pipeline_parallel_split_points = [");
    cr_assert_not_null(line, "pprof-tune printed no torchtitan split points:\n%s", out);
    line = strchr(line, '[') + 1;
    size_t len = 0;
    buf[0] = '\0';
    while (*line && *line != ']' && *line != '\n') {
        if (*line != '"' && *line != ' ') {
            cr_assert_lt(len + 1, cap);
            buf[len++] = *line;
            buf[len] = '\0';
        }
        line++;
    }
    cr_assert_eq(*line, ']', "unterminated split point list");
}

/* rm -rf dir (a run directory of an earlier attempt) */
static void remove_dir(const char *dir)
{
    const char *argv[] = {"rm", "-rf", dir, NULL};
    run_ok("rm -rf", argv);
}

/* How far one re-run may land from the prediction here. One run's median step moves by up to
 * ~10% between runs of the same layout on a shared 2-core machine (the balanced layout, both
 * ranks busy, the most), so one pair of runs cannot judge 5%; that claim is measured over
 * alternating rounds by benchmarks/bench_torch_tune.sh (benchmarks/README.md). This bound
 * still fails a model that is plainly wrong (the stale costs of a disturbed step read 45% off). */
#define TUNE_TOLERANCE 0.15

static char attempts_log[1024]; /* what each attempt measured, for the failure message */

/* One attempt of the tuning loop: capture, pprof-tune, the job with the proposed split points,
 * capture again. Fills the medians and the prediction; returns whether the proposal made the
 * median step faster and the re-run landed within TUNE_TOLERANCE of the prediction. */
static int tune_attempt(const char *py, int attempt, double *before_ms, double *after_ms,
                        double *pred_ms)
{
    char bname[32], aname[32];
    snprintf(bname, sizeof bname, "base%d", attempt);
    snprintf(aname, sizeof aname, "after%d", attempt);
    const char *base = tk_path(bname), *after = tk_path(aname), *plan = tk_path("plan.json");
    const char *args[] = {"--schedule", "gpipe", "--blocks", "8", "--work", "3,3,3,3,1,1,1,1",
                          "--microbatches", "4", "--steps", "12", "--dim", "512", "--mb-size",
                          "32", "--with-modules", NULL};
    run_job(py, 2, base, args);
    const char *targv[] = {TUNE, base, "-q", "-o", plan, NULL};
    tk_result r = tk_runv(targv, NULL);
    cr_assert_eq(r.code, 0, "pprof-tune failed (%d):\n%s%s", r.code, r.out, r.err);
    char split[256];
    split_points_of(r.out, split, sizeof split);
    cr_expect(strstr(r.out, "SplitPoint.BEGINNING") != NULL, "no torch split_spec line");
    tk_result_free(&r);
    cJSON *pj = load_json(plan);
    *pred_ms = num(item(pj, "predicted"), "median_ms"); /* like with like: a median step */
    cJSON_Delete(pj);
    cr_assert_str_neq(split, "layers.4", "pprof-tune kept the split it was given");

    const char *args2[] = {"--schedule", "gpipe", "--blocks", "8", "--work", "3,3,3,3,1,1,1,1",
                           "--microbatches", "4", "--steps", "12", "--dim", "512", "--mb-size",
                           "32", "--with-modules", "--split-points", split, NULL};
    run_job(py, 2, after, args2);
    cJSON *s0 = report_json(base, "base.json"), *s1 = report_json(after, "after.json");
    *before_ms = num(item(item(s0, "aggregates"), "step_ms"), "median");
    *after_ms = num(item(item(s1, "aggregates"), "step_ms"), "median");
    cJSON_Delete(s0);
    cJSON_Delete(s1);
    char line[512]; /* split: up to 255 bytes */
    snprintf(line, sizeof line,
             "attempt %d: split points %s; median step %.3f ms before, %.3f ms after (predicted "
             "%.3f ms, %+.1f%%)\n",
             attempt, split, *before_ms, *after_ms, *pred_ms,
             100 * (*after_ms - *pred_ms) / *pred_ms);
    cr_log_info("%s", line);
    size_t len = strlen(attempts_log);
    snprintf(attempts_log + len, sizeof attempts_log - len, "%s", line);
    remove_dir(base);
    remove_dir(after);
    return *after_ms < *before_ms && within(*after_ms, *pred_ms, TUNE_TOLERANCE);
}

/* Deliver 4 of issue 16: module times (with_modules) let pprof-tune rebalance a foreign job.
 * 8 blocks on 2 ranks, the first four with three times the work: the even split (layers.4)
 * gives rank 0 three times rank 1's work. The proposal's split points, applied to the job,
 * must make its median step faster (by ~20% predicted) and land within TUNE_TOLERANCE of the
 * prediction. Two ranks share the machine's cores with whatever else runs, so a disturbed
 * pair of runs is tried again, up to three attempts. When none passes and the attempts could
 * not even reproduce their own baseline (the same layout measured more than 10% apart: the
 * machine was busy with other work), the prediction cannot be judged here and the test says
 * so and skips; with steady baselines a miss is a failure. */
Test(torch, tune_split_points_from_module_times)
{
    optimised_build_only(NULL);
    const char *py = need_python();
    double before[3] = {0}, after = 0, pred = 0;
    int ok = 0, n = 0;
    attempts_log[0] = '\0';
    for (; n < 3 && !ok; n++)
        ok = tune_attempt(py, n + 1, &before[n], &after, &pred);
    if (!ok) {
        double lo = before[0], hi = before[0];
        for (int i = 1; i < n; i++) {
            lo = before[i] < lo ? before[i] : lo;
            hi = before[i] > hi ? before[i] : hi;
        }
        if (hi > 1.10 * lo) {
            tk_dir_remove(); /* a skipped test's .fini does not run */
            cr_skip_test("the machine is too busy to judge a prediction: the same layout "
                         "measured %.3f to %.3f ms across the attempts\n%s",
                         lo, hi, attempts_log);
        }
    }
    cr_expect_lt(after, before[n - 1],
                 "the proposed split made the step slower: %.3f -> %.3f ms\n%s", before[n - 1],
                 after, attempts_log);
    cr_expect(within(after, pred, TUNE_TOLERANCE),
              "the re-run's median step %.3f ms is not within %.0f%% of the predicted %.3f ms\n%s",
              after, 100 * TUNE_TOLERANCE, pred, attempts_log);
}

static void parts_of(const char *out, char *buf, size_t cap);

/* Whether rank 0's trace in dir shows torch.compile at work (its compiled regions). */
static int trace_compiled(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/rank0.json", dir);
    char *text = tk_slurp(path, NULL);
    cr_assert_not_null(text, "%s was not written", path);
    int yes = strstr(text, "Torch-Compiled Region") != NULL;
    free(text);
    return yes;
}

/* The job with its stage modules called the way torch calls them (nn.Module.__call__: one
 * module event around the blocks, as in torchtitan's pruned model copies and torch's own
 * tutorial), optionally under torch.compile (aot_eager: dynamo and AOTAutograd, no C++ to build),
 * or built by torch's pipeline() front end (a traced GraphModule per stage calling the blocks as
 * InterpreterModules).
 * Before, the stage module was its stage's one layer: "2 layers", parts [0, 1, 2] and the layout
 * called optimal for a model of 8 blocks, 3 times heavier in its first half. Now:
 * - called as torch calls it: the 8 blocks are the layers (their forward times follow the work
 *   each does), and pprof-tune moves the split off the even one;
 * - each block compiled (torchtitan's per-block torch.compile): the same 8 layers, by the
 *   OptimizedModule events around the compiled blocks;
 * - each stage module compiled as a whole: its blocks are fused out of sight; the stage-level
 *   analysis holds, the report says why there are no layers, pprof-tune exits 2 saying what to
 *   change;
 * - pipeline()'s stages: the 8 InterpreterModules the graphs call (the GraphModule's own frames,
 *   torch/fx/, taken for compiled code, read as "compiled as a whole" in a first version);
 * - 2 data-parallel replicas (4 ranks) with DDP around each stage module (the module it wraps
 *   takes the stage module's place: before, that was the one layer of its stage) or FSDP2's
 *   fully_shard on each block and stage module (FSDPBlock_<k>, the class FSDP2 makes);
 * - torchtitan's model layout (an embedding before the blocks, a norm and an output after
 *   them, inside the first and last stage modules): 11 layers, and the split points count the
 *   blocks only (layers.i of the model's 'layers' list). */
Test(torch, stage_modules_as_torch_calls_them_and_under_torch_compile)
{
    const char *py = need_python();
    static const struct {
        const char *compile, *frontend, *wrap, *layer; /* layer: the blocks' class */
        int ranks, balanced; /* balanced: the layer times follow the blocks' work */
        int ends;            /* --ends: an embedding, a norm and a head around the blocks */
    } modes[] = {{"none", "manual", "none", "Block_", 2, 1, 0},
                 {"blocks", "manual", "none", "OptimizedModule_", 2, 1, 0},
                 {"pieces", "manual", "none", NULL, 2, 1, 0}, /* no layers */
                 {"none", "tracer", "none", "InterpreterModule_", 2, 1, 0},
                 /* 2 replicas: DDP around each stage module, FSDP2 (whose all-gathers run
                  * inside the blocks: their times follow the communication as much) */
                 {"none", "manual", "ddp", "Block_", 4, 1, 0},
                 {"none", "manual", "fsdp", "FSDPBlock_", 4, 0, 0},
                 /* torchtitan's model layout: tok_embeddings, the blocks, norm, output */
                 {"none", "manual", "none", "Block_", 2, 1, 1}};
    int retried[sizeof modes / sizeof modes[0]] = {0};
    for (int k = 0; k < (int)(sizeof modes / sizeof modes[0]); k++) {
        char name[32];
        snprintf(name, sizeof name, "mod_%d", k);
        const char *dir = tk_path(name);
        int dp = modes[k].ranks > 2;
        const char *args[] = {"--schedule", "1f1b", "--blocks", "8", "--work", "3,3,3,3,1,1,1,1",
                              "--microbatches", "4", "--steps", dp ? "4" : "6",
                              "--dim", dp ? "256" : "512", "--mb-size", dp ? "16" : "32",
                              "--with-modules", "--piece-call", "module",
                              "--compile", modes[k].compile, "--frontend", modes[k].frontend,
                              "--dp-wrap", modes[k].wrap, "--dp", dp ? "2" : "1",
                              modes[k].ends ? "--ends" : NULL, NULL};
        run_job(py, modes[k].ranks, dir, args);
        int compiled = strcmp(modes[k].compile, "none") != 0;
        cr_assert_eq(trace_compiled(dir), compiled, "torch.compile %s in run %d",
                     compiled ? "did not run" : "ran", k);
        snprintf(name, sizeof name, "mod_%d.json", k);
        cJSON *sum = report_json(dir, name);
        const cJSON *g;
        cJSON_ArrayForEach(g, item(sum, "stages"))
        {
            cr_expect_gt(num(item(g, "fwd_ms"), "count"), 0, "run %d: stage forwards", k);
            cr_expect_gt(num(item(g, "bwd_ms"), "count"), 0, "run %d: stage backwards", k);
        }
        const cJSON *y;
        int n = 0, e = modes[k].ends; /* e: the embedding's layer before the blocks */
        double heavy = 0, light = 0;
        cJSON_ArrayForEach(y, item(sum, "layers"))
        {
            const char *lname = item(y, "name")->valuestring;
            const char *want = modes[k].layer ? modes[k].layer : "(none)";
            if (e && (n == 0 || n > 8))
                want = n == 0 ? "Embedding_0" : n == 9 ? "LayerNorm_0" : "Linear_";
            cr_expect(strncmp(lname, want, strlen(want)) == 0, "run %d: layer %d is %s", k, n,
                      lname);
            double ms = num(item(y, "fwd_ms"), "median");
            if (n >= e && n < e + 4)
                heavy += ms / 4;
            else if (n >= e + 4 && n < e + 8)
                light += ms / 4;
            n++;
        }
        const char *targv[] = {TUNE, dir, "-q", NULL};
        tk_result r = tk_runv(targv, NULL);
        const char *rargv[] = {REPORT, dir, NULL};
        tk_result t = tk_runv(rargv, NULL);
        cr_expect_eq(t.code, 0);
        if (modes[k].layer) {
            cr_expect_eq(n, 8 + 3 * e, "run %d: %d layers, the model has 8 blocks%s", k, n,
                         e ? " and 3 modules around them" : "");
            /* work 3 against 1 per block, plus what each block costs whatever its work (the
             * profiler's Python tracing, dynamo's guards when compiled): measured here 2.1-2.6x
             * eager, 1.4-1.5x compiled */
            cr_expect(!modes[k].balanced || heavy > 1.2 * light,
                      "run %d: blocks of work 3 ran %.3f ms, of work 1 %.3f ms", k, heavy, light);
            cr_expect_eq(r.code, 0, "pprof-tune (run %d): %d\n%s%s", k, r.code, r.out, r.err);
            cr_expect(strstr(r.out, e ? "11 layers, 2 stages" : "8 layers, 2 stages") != NULL,
                      "%s", r.out);
            if (r.code == 0 && modes[k].balanced) {
                char split[256], parts[128], want[32];
                split_points_of(r.out, split, sizeof split);
                /* once per mode, a run whose proposal is the even split runs again: on 2 cores
                 * a rank can share its core for a whole run, and the costs measured then make
                 * the even split the best (a CI run, once, the tracer's; on a slow day of the
                 * VM, 2026-12-05, the torch test alone on it, two modes of one run, when the
                 * retry was once per test) */
                if (strcmp(split, "layers.4") == 0 && retried[k]++ == 0) {
                    /* info, not warn: a Criterion warning makes the run exit 1 with every
                     * test passed (CI, 2026-12-04) */
                    cr_log_info("run %d: pprof-tune kept the even split; running it again", k);
                    tk_result_free(&t);
                    tk_result_free(&r);
                    cJSON_Delete(sum);
                    remove_dir(dir);
                    k--;
                    continue;
                }
                cr_expect_str_neq(split, "layers.4", "run %d: pprof-tune kept the even split", k);
                /* the split point counts the blocks: the layer the second piece starts at,
                 * less the embedding before the blocks */
                parts_of(r.out, parts, sizeof parts);
                const char *comma = strchr(parts, ',');
                cr_assert_not_null(comma, "parts %s", parts);
                snprintf(want, sizeof want, "layers.%d", atoi(comma + 1) - e);
                cr_expect_str_eq(split, want, "run %d: parts %s", k, parts);
                /* the ends placed too, under torchtitan's names */
                cr_expect(!e || strstr(r.out, "module_fqns_per_model_part = [[\"tok_embeddings\", "
                                              "\"layers.0\"") != NULL, "%s", r.out);
            }
            /* a GraphModule of its own (the tracer's) is no sign of torch.compile */
            cr_expect(strstr(t.out, "compiled code") == NULL, "run %d:\n%s", k, t.out);
        } else {
            cr_expect_eq(n, 0, "a stage module compiled as a whole: %d layers", n);
            /* costed by its stages: the boundaries cannot move, and it says why (and what
             * would give layers) whatever the verbosity; no split points */
            cr_expect_eq(r.code, 0, "pprof-tune without layers: %d\n%s", r.code, r.err);
            cr_expect(strstr(r.out, "split_points") == NULL, "%s", r.out);
            const char *nargv[] = {TUNE, dir, NULL}; /* not quiet: its notes */
            tk_result nq = tk_runv(nargv, NULL);
            cr_expect(strstr(nq.err, "one layer per stage") != NULL &&
                          strstr(nq.err, "compiled as a whole") != NULL,
                      "%s", nq.err);
            tk_result_free(&nq);
            cr_expect(strstr(t.out, "ran inside compiled code") != NULL, "%s", t.out);
        }
        tk_result_free(&t);
        tk_result_free(&r);
        cJSON_Delete(sum);
        remove_dir(dir);
    }
}

/* ---- DeepSpeed's pipeline engine (tests/py/ds_pipe.py) ---------------------------------- */

/* torch's Python with the Python module `module` as well (scripts/setup.sh installs `package`
 * into the torch venv), else the test skips, saying so. */
static const char *need_python_with(const char *module, const char *package)
{
    const char *py = need_python();
    char check[256];
    snprintf(check, sizeof check,
             "import importlib.util as u, sys; sys.exit(0 if u.find_spec('%s') else 1)", module);
    if (!tk_python_ok(py, check)) {
        tk_dir_remove();
        cr_skip_test("%s has no %s (scripts/setup.sh installs it next to torch)", py, package);
    }
    return py;
}

static const char *need_deepspeed(void) { return need_python_with("deepspeed", "deepspeed"); }

/* script under torchrun on 2 ranks with args into dir (emptied first): its median step, from
 * pprof-report's summary written to tk_dir/name. */
static double job_median_step(const char *py, const char *script, const char *dir,
                              const char *name, const char *const *args)
{
    remove_dir(dir);
    run_script(py, 2, script, dir, args);
    cJSON *s = report_json(dir, name);
    double ms = num(item(item(s, "aggregates"), "step_ms"), "median");
    cJSON_Delete(s);
    return ms;
}

/* A layout's run (a framework's form of it: DeepSpeed's parts, Megatron's layout): its median
 * step. */
typedef double (*layout_run)(const char *py, const char *dir, const char *name,
                             const char *layout);

/* Whether the proposal ran faster than the current layout, judged on the least disturbed run
 * of each (one layout's step varies by ~10% between quiet runs): up to five runs of the
 * proposal into `after`, each after the first paired with another run of the current layout
 * into `dir` while the proposal is not yet faster; *before_ms (the first run's) is lowered by
 * those. Expects it faster; returns the least step of the proposal's runs. Three pairs were not
 * enough on a slow day of the VM (CI, 2026-12-05, the torch test alone on the machine): the
 * Megatron job's proposal, 1.8% faster measured on a quiet machine (1588 -> 1560 ms), read
 * 1770 -> 1859 ms, and DeepSpeed's, 2.8% faster (254.5 -> 247.3), 250.2 -> 255.3: the least of
 * more runs comes closer to each layout's undisturbed step. */
static double expect_faster(const char *py, layout_run run, const char *dir, const char *after,
                            const char *current, const char *proposal, double *before_ms,
                            double pred_ms)
{
    double after_ms = INFINITY;
    for (int attempt = 0; attempt < 5; attempt++) {
        if (attempt > 0) {
            double b = run(py, dir, "before.json", current);
            *before_ms = b < *before_ms ? b : *before_ms;
        }
        double a = run(py, after, "after.json", proposal);
        after_ms = a < after_ms ? a : after_ms;
        cr_log_info("%s -> %s: median step %.3f ms (least of the runs) before, %.3f after "
                    "(predicted %.3f, this run %+.1f%%)", current, proposal, *before_ms,
                    after_ms, pred_ms, 100 * (a - pred_ms) / pred_ms);
        if (after_ms < *before_ms || !TK_TIMING_JUDGED)
            break;
    }
    /* judged in the optimised build (TK_TIMING_JUDGED); the sanitized one runs the analyses once,
     * for memory safety, and in CI reads the optimised build's runs (PPROF_TORCH_JOB_CACHE) */
    if (TK_TIMING_JUDGED)
        cr_expect_lt(after_ms, *before_ms, "the proposal %s made the step slower: %.3f -> %.3f ms",
                     proposal, *before_ms, after_ms);
    return after_ms;
}

/* The DeepSpeed line of pprof-tune's output ("PipelineModule parts = [0, 6, 8]") as "0,6,8". */
static void parts_of(const char *out, char *buf, size_t cap)
{
    const char *line = strstr(out, "PipelineModule parts = [");
    cr_assert_not_null(line, "pprof-tune printed no DeepSpeed parts:\n%s", out);
    line = strchr(line, '[') + 1;
    size_t len = 0;
    for (; *line && *line != ']' && *line != '\n'; line++)
        if (*line != ' ') {
            cr_assert_lt(len + 1, cap);
            buf[len++] = *line;
        }
    buf[len] = '\0';
    cr_assert_eq(*line, ']', "unterminated parts");
}

/* A real DeepSpeed job: deepspeed.pipe.PipelineModule trained by DeepSpeed's PipelineEngine
 * (1F1B TrainSchedule, gloo on CPU), 8 blocks on 2 stages by DeepSpeed's 'uniform' partition, the
 * first four with three times the work of the others, traced by torch.profiler with stacks and
 * modules. DeepSpeed names nothing for a profiler: its instructions are only its engine's methods
 * in the stack (before, the analysis read such a trace as a torch job without ops: GPipe, no
 * forward or backward, 99% bubble; and took the stage's whole PipelineModule for one layer).
 * Checked: the stages, 1F1B, the per-stage forward and backward against the truth computed from
 * the same files, the straggler, both links with every micro-batch's message, the layers the
 * blocks (not the stage module, not the loss), the gradient-norm all-reduces of the optimizer step
 * not taken for a data-parallel one; then pprof-tune's parts, applied through PipelineModule as a
 * user would, make the step faster (12 units of work on stage 0 against 4: parts 0,3,8 leave 9
 * and 7: 1-20% faster measured here, the step's fixed costs and the VM's noise taking the rest).
 * One layout's step varies by ~10% between quiet runs, so "faster" is judged on the least of
 * each layout's runs, another pair run while it is not (five pairs at most). */
static double ds_median_step(const char *py, const char *dir, const char *name,
                             const char *partition)
{
    const char *args[] = {"--blocks", "8", "--work", "3,3,3,3,1,1,1,1", "--microbatches", "4",
                          "--steps", "10", "--dim", "512", "--mb-size", "32", "--partition",
                          partition, NULL};
    return job_median_step(py, DS_JOB, dir, name, args);
}

Test(torch, deepspeed_pipeline_engine)
{
    optimised_build_only("ds");
    const char *py = need_deepspeed();
    const char *dir = tk_path("ds"), *after = tk_path("ds_after"), *plan = tk_path("dsplan.json");
    const char *args[] = {"--blocks", "8", "--work", "3,3,3,3,1,1,1,1", "--microbatches", "4",
                          "--steps", "10", "--dim", "512", "--mb-size", "32", NULL};
    run_script(py, 2, DS_JOB, dir, args);
    cJSON *truth = truth_json(py, dir);
    cr_assert_eq((int)num(truth, "heaviest_rank"), 0, "the job's own straggler is stage %d",
                 (int)num(truth, "heaviest_rank"));
    cJSON *sum = report_json(dir, "ds.json");
    int n_steps = check_framework_1f1b(sum, truth, "deepspeed (torch profiler)");
    int n_layers = 0;
    const cJSON *y;
    cJSON_ArrayForEach(y, item(sum, "layers"))
    {
        const char *name = item(y, "name")->valuestring;
        cr_expect(strncmp(name, "Block_", 6) == 0, "layer %d is %s, not a block", n_layers, name);
        n_layers++;
    }
    cr_expect_eq(n_layers, 8, "%d layers, the PipelineModule holds 8 blocks", n_layers);
    /* one data-parallel all-reduce a step (_exec_reduce_grads: a group of one rank here), not
     * the optimizer's gradient norm over both stages, which waits for the other stage */
    const cJSON *g;
    cJSON_ArrayForEach(g, item(sum, "stages"))
    {
        cr_expect_eq((int)num(item(g, "allreduce_ms"), "count"), n_steps,
                     "stage %d: %d all-reduces in %d steps", (int)num(g, "stage"),
                     (int)num(item(g, "allreduce_ms"), "count"), n_steps);
    }
    double before_ms = num(item(item(sum, "aggregates"), "step_ms"), "median");
    cJSON_Delete(sum);
    cJSON_Delete(truth);

    const char *targv[] = {TUNE, dir, "-q", "-o", plan, NULL};
    tk_result r = tk_runv(targv, NULL);
    cr_assert_eq(r.code, 0, "pprof-tune failed (%d):\n%s%s", r.code, r.out, r.err);
    char parts[128];
    parts_of(r.out, parts, sizeof parts);
    tk_result_free(&r);
    cr_assert_str_eq(parts, "0,3,8", "pprof-tune proposed parts %s", parts);
    cJSON *pj = load_json(plan);
    double pred_ms = num(item(pj, "predicted"), "median_ms");
    cJSON_Delete(pj);
    expect_faster(py, ds_median_step, dir, after, "uniform", parts, &before_ms, pred_ms);
}

/* DeepSpeed with data parallelism: 2 stages x 2 replicas on 4 ranks (DeepSpeed's default
 * topology, rank = stage x 2 + replica), with activation checkpointing (every layer recomputed
 * in the backward). Its process groups carry no description, so the pipeline's is recognised by
 * their shape (docs/kineto.md "Process groups"); before, each rank was read as a stage of a
 * 4-stage pipeline. Each replica against its own ranks' truth; the all-reduce is the replicas'
 * gradient one of _exec_reduce_grads, once a step, not the optimizer's gradient norm; the
 * layers are still the 4 blocks (the recomputation runs them again inside the backward, outside
 * the stage module: no layers there). */
Test(torch, deepspeed_data_parallel_replicas)
{
    const char *py = need_deepspeed();
    const char *dir = tk_path("dsdp");
    const char *args[] = {"--stages", "2", "--blocks", "4", "--work", "1,1,3,3",
                          "--microbatches", "4", "--steps", "4", "--dim", "128", "--mb-size",
                          "8", "--checkpoint", "1", NULL};
    run_script(py, 4, DS_JOB, dir, args);
    check_replicas(py, dir, 2);
    cJSON *sum = load_json(tk_path("dp0.json"));
    int n_layers = 0;
    const cJSON *y;
    cJSON_ArrayForEach(y, item(sum, "layers"))
    {
        const char *name = item(y, "name")->valuestring;
        cr_expect(strncmp(name, "Block_", 6) == 0, "layer %d is %s", n_layers, name);
        cr_expect_gt(num(item(y, "fwd_ms"), "count"), 0, "layer %d has no forward", n_layers);
        n_layers++;
    }
    cr_expect_eq(n_layers, 4, "%d layers, the PipelineModule holds 4 blocks", n_layers);
    cJSON_Delete(sum);
}

/* ---- Megatron-LM's schedules (tests/py/megatron_pipe.py) ------------------------------- */

static const char *need_megatron(void)
{
    return need_python_with("megatron.core", "megatron-core");
}

/* The Megatron-LM line of pprof-tune's output (--pipeline-model-parallel-layout "...") as the
 * layout itself. */
static void layout_of(const char *out, char *buf, size_t cap)
{
    static const char key[] = "--pipeline-model-parallel-layout \"";
    const char *line = strstr(out, key);
    cr_assert_not_null(line, "pprof-tune printed no Megatron-LM layout:\n%s", out);
    line += sizeof key - 1;
    const char *end = strchr(line, '"');
    cr_assert(end && (size_t)(end - line) < cap, "unterminated layout");
    memcpy(buf, line, (size_t)(end - line));
    buf[end - line] = '\0';
}

/* The transformer layers of stage s of a Megatron layout ("Et*6|t*2L": 6, then 2). */
static int layout_blocks(const char *layout, int s)
{
    const char *p = layout;
    for (int k = 0; k < s && p; k++)
        p = strchr(p, '|') ? strchr(p, '|') + 1 : NULL;
    cr_assert_not_null(p, "layout %s has no stage %d", layout, s);
    int n = 0;
    for (; *p && *p != '|'; p++)
        if (*p == 't')
            n += p[1] == '*' ? atoi(p + 2) : 1;
    return n;
}

static double mg_median_step(const char *py, const char *dir, const char *name,
                             const char *layout)
{
    const char *args[] = {"--layout", layout, "--steps", "4", NULL};
    return job_median_step(py, MG_JOB, dir, name, args);
}

/* A real Megatron-LM job: megatron-core's GPTModel (8 transformer layers, local layer spec) on 2
 * stages in its 1F1B schedule (forward_backward_pipelining_without_interleaving, its p2p
 * communicator, gloo on CPU), laid out by Megatron itself from --pipeline-model-parallel-layout
 * "Et*8|L" (the embedding and the 8 layers on stage 0; the output layer and the loss on stage
 * 1), traced by torch.profiler as Megatron's --use-pytorch-profiler does, with module
 * events. Megatron names nothing for a profiler: before, the traces read as "no pipeline
 * ranges". Checked: the dialect, 1F1B, M = 4, the per-stage forward and backward against the
 * truth computed from the same files, both links with every micro-batch's message, the layers
 * (the embedding, the 8 blocks as their stages run them, the output layer as "head"; not the
 * model, not the decoder, not its final norm); then pprof-tune's layout, in Megatron's own
 * syntax, moves blocks off stage 0, and the job laid out by it (Megatron reading the layout as
 * it is) makes the step faster. One layout's step varies by several percent between quiet runs,
 * so "faster" is judged on the least of each layout's runs, another pair run while it is not
 * (five pairs at most). The start was "Et*6|t*2L" until 2026-12-06, whose proposal (Et*5|t*3L)
 * is 2-8% faster, within that variation: a CI run read it slower in all five pairs (590.8 ->
 * 609.4 ms). From "Et*8|L" the proposal (Et*5|t*3L or Et*4|t*4L) measured 1.16, 1.46 and 1.24x
 * faster in three runs here, the first pair enough each time. */
Test(torch, megatron_gpt_1f1b_layout_tuned)
{
    const char *py = need_megatron();
    const char *dir = tk_path("mg"), *after = tk_path("mg_after"), *plan = tk_path("mgplan.json");
    const char *start = "Et*8|L";
    const char *args[] = {"--layout", start, "--steps", "4", NULL};
    run_script(py, 2, MG_JOB, dir, args);
    cJSON *truth = truth_json(py, dir);
    cJSON *sum = report_json(dir, "mg.json");
    int n_steps = check_framework_1f1b(sum, truth, "megatron-lm (torch profiler)");
    int n_layers = 0;
    const cJSON *y;
    cJSON_ArrayForEach(y, item(sum, "layers"))
    {
        const char *name = item(y, "name")->valuestring;
        if (n_layers == 0)
            cr_expect_str_eq(name, "embedding");
        else if (n_layers == 9)
            cr_expect_str_eq(name, "head");
        else
            cr_expect(strncmp(name, "TransformerLayer_", 17) == 0, "layer %d is %s", n_layers,
                      name);
        cr_expect_eq((int)num(item(y, "fwd_ms"), "count"), n_steps * 4,
                     "layer %d: a forward per micro-batch", n_layers);
        n_layers++;
    }
    cr_expect_eq(n_layers, 10, "%d layers: the embedding, 8 blocks, the output layer", n_layers);
    double before_ms = num(item(item(sum, "aggregates"), "step_ms"), "median");
    cJSON_Delete(sum);
    cJSON_Delete(truth);

    const char *targv[] = {TUNE, dir, "-q", "-o", plan, NULL};
    tk_result r = tk_runv(targv, NULL);
    cr_assert_eq(r.code, 0, "pprof-tune failed (%d):\n%s%s", r.code, r.out, r.err);
    cr_assert(strstr(r.out, "10 layers, 2 stages, 1f1b, M = 4") != NULL, "%s", r.out);
    char layout[128];
    layout_of(r.out, layout, sizeof layout);
    tk_result_free(&r);
    cr_assert(layout[0] == 'E' && layout[strlen(layout) - 1] == 'L' &&
                  layout_blocks(layout, 0) + layout_blocks(layout, 1) == 8,
              "pprof-tune proposed the layout %s", layout);
    cr_assert_lt(layout_blocks(layout, 0), 8, "the layout %s keeps stage 0's 8 blocks", layout);
    cJSON *pj = load_json(plan);
    double pred_ms = num(item(pj, "predicted"), "median_ms");
    cJSON_Delete(pj);
    expect_faster(py, mg_median_step, dir, after, start, layout, &before_ms, pred_ms);
    /* the re-run holds the plan's boundaries: pprof-tune --verify says it ran the plan */
    const char *vargv[] = {TUNE, "--verify", plan, after, NULL};
    r = tk_runv(vargv, NULL);
    cr_expect_eq(r.code, 0, "pprof-tune --verify (%d):\n%s%s", r.code, r.out, r.err);
    cr_expect(strstr(r.out, "ran the plan") != NULL, "%s", r.out);
    tk_result_free(&r);
}

/* The same model in Megatron's interleaved schedule (--vp 2: two model chunks per rank, pieces
 * 0-3 on ranks 0, 1, 0, 1, Megatron's even split of 2 blocks a piece), its p2p overlapped with
 * the compute as Megatron-LM's training script runs it by default (overlap_p2p_comm: each
 * receive posted early, waited for after the stage's next op). Which chunk a forward_step runs
 * shows only in the module it calls: with module events the analysis reads the interleaved
 * schedule with M = 4 and v = 2, the pieces' layers in model order, the four links with every
 * message, and proposes a 4-piece layout (before: 1F1B, 8 micro-batches, the chunks merged, the
 * links backwards). A receive the stage computed inside times no transfer and is replayed where
 * it was waited for (before: links of 5-27 ms latency, transfer parts of -25 ms, a self-check
 * 13% long). The batched p2p (batch_p2p_comm) and the traces without module events:
 * tests/test_kineto.c. */
Test(torch, megatron_interleaved_model_chunks)
{
    const char *py = need_megatron();
    const char *dir = tk_path("mgv");
    const char *args[] = {"--vp", "2", "--steps", "3", "--overlap-p2p", NULL};
    run_script(py, 2, MG_JOB, dir, args);
    cJSON *sum = report_json(dir, "mgv.json");
    cr_expect_str_eq(item(sum, "dialect")->valuestring, "megatron-lm (torch profiler)");
    const cJSON *pipe = item(sum, "pipeline");
    cr_expect_str_eq(item(pipe, "schedule")->valuestring, "interleaved");
    cr_assert_eq((int)num(pipe, "microbatches"), 4);
    cr_assert_eq((int)num(pipe, "virtual_stages"), 2);
    int n_steps = cJSON_GetArraySize(item(sum, "steps")), links = 0;
    const cJSON *l;
    cJSON_ArrayForEach(l, item(sum, "links"))
    {
        int src = (int)num(l, "src");
        int act = strcmp(item(l, "kind")->valuestring, "act") == 0;
        int per_mb = (src == 0) == act ? 2 : 1;
        cr_expect_eq((int)num(l, "messages"), n_steps * 4 * per_mb, "link %d -> %d %s", src,
                     (int)num(l, "dst"), act ? "act" : "grad");
        /* loopback gloo: tens to hundreds of us in flight, not the compute a receive spans */
        const cJSON *lat = item(l, "latency_us");
        if (cJSON_IsNumber(cJSON_GetObjectItem(lat, "median")))
            cr_expect_lt(num(lat, "median"), 5000.0, "link %d -> %d %s: %.0f us in flight", src,
                         (int)num(l, "dst"), act ? "act" : "grad", num(lat, "median"));
        links++;
    }
    cr_expect_eq(links, 4, "%d links", links);
    const cJSON *sg;
    cJSON_ArrayForEach(sg, item(sum, "stages"))
        cr_expect_geq(num(sg, "transfer_ms"), -2.0, "stage %d's transfer part %.3f ms",
                      (int)num(sg, "stage"), num(sg, "transfer_ms"));
    int n_layers = 0;
    const cJSON *y;
    cJSON_ArrayForEach(y, item(sum, "layers"))
    {
        cr_expect_eq((int)num(item(y, "fwd_ms"), "count"), n_steps * 4,
                     "layer %d: a forward per micro-batch", n_layers);
        n_layers++;
    }
    cr_expect_eq(n_layers, 10, "%d layers", n_layers);
    const cJSON *g;
    cJSON_ArrayForEach(g, item(sum, "stages"))
    {
        cr_expect_eq(cJSON_GetArraySize(item(g, "chunks")), 2);
        cr_expect_eq((int)num(item(g, "fwd_ms"), "count"), n_steps * 8);
    }
    cJSON_Delete(sum);
    const char *targv[] = {TUNE, dir, "-q", NULL};
    tk_result r = tk_runv(targv, NULL);
    cr_assert_eq(r.code, 0, "pprof-tune failed (%d):\n%s%s", r.code, r.out, r.err);
    cr_expect(strstr(r.out, "10 layers, 2 stages, interleaved, M = 4") != NULL, "%s", r.out);
    char layout[128];
    layout_of(r.out, layout, sizeof layout);
    int bars = 0;
    for (const char *q = layout; *q; q++)
        bars += *q == '|';
    cr_expect_eq(bars, 3, "the layout %s has not 4 pieces", layout);
    tk_result_free(&r);
}

/* ---- costs of layers that have forward times only (no Python needed) ------------------- */

/* A torch trace's module events time only the forward: pp_extract shares each piece's measured
 * backward op among its layers in proportion to their forward times, and scales their forward
 * times to add up to the piece's forward op (what the op holds beyond its modules is charged
 * too). The piece's op: with one chunk per stage its stage's median over every analyzed step,
 * else (or without statistics) the kept timeline's median; without either, its stage's mean
 * backward is shared. */
Test(torch_extract, backward_shared_by_forward_times)
{
    enum { S = 2, L = 4 };
    pp_alayer layers[L];
    pp_aop layer_ops[L], ops[2 * S];
    pp_astage stages[S];
    memset(layers, 0, sizeof layers);
    memset(stages, 0, sizeof stages);
    const double fwd_us[L] = {1, 2, 3, 5};
    for (int l = 0; l < L; l++) {
        layers[l].layer = l;
        snprintf(layers[l].name, sizeof layers[l].name, "layers.%d", l);
        layers[l].fwd_ns = (pp_astats){.count = 1, .mean = fwd_us[l] * 1e3,
                                       .median = fwd_us[l] * 1e3};
        int s = l / 2;
        layer_ops[l] = (pp_aop){.kind = PP_AOP_FWD, .stage = s, .mb = 0, .chunk = l,
                                .t0 = 100 + (uint64_t)l, .t1 = 101 + (uint64_t)l};
    }
    /* stage 0: forward op 4 us (its layers' 3 us + 1 us of its own), backward op 30 us;
     * stage 1: forward op 8 us (= its layers'), backward op 16 us */
    const uint64_t f_ns[S] = {4000, 8000}, b_ns[S] = {30000, 16000};
    for (int s = 0; s < S; s++) {
        /* the kept step's ops are three times slower than the all-step medians: not used */
        ops[2 * s] = (pp_aop){.kind = PP_AOP_FWD, .stage = s, .mb = 0, .chunk = 0, .t0 = 0,
                              .t1 = 3 * f_ns[s]};
        ops[2 * s + 1] = (pp_aop){.kind = PP_AOP_BWD, .stage = s, .mb = 0, .chunk = 0,
                                  .t0 = 50000, .t1 = 50000 + 3 * b_ns[s]};
        stages[s].stage = s;
        stages[s].imbalance_culprit = -1;
        stages[s].fwd_ns = (pp_astats){.count = 4, .mean = 2e3, .median = (double)f_ns[s]};
        stages[s].bwd_ns = (pp_astats){.count = 4, .mean = 2e3, .median = (double)b_ns[s]};
    }
    pp_analysis a;
    memset(&a, 0, sizeof a);
    a.S = S;
    a.M = 4;
    a.v = 1;
    snprintf(a.schedule, sizeof a.schedule, "gpipe");
    a.stages = stages;
    a.layers = layers;
    a.n_layers = L;
    a.layer_ops = layer_ops;
    a.n_layer_ops = L;
    a.ops = ops;
    a.n_ops = 2 * S;
    pp_extract e;
    cr_assert_eq(pp_extract_from_analysis(&a, &e), PP_OK, "%s", pp_error_message());
    cr_assert_eq(e.partition.P, 2);
    cr_expect_eq(e.partition.bounds[1], 2);
    const double want_f[L] = {4.0 / 3, 8.0 / 3, 3, 5}, want_b[L] = {10, 20, 6, 10};
    for (int l = 0; l < L; l++) {
        cr_expect_float_eq(e.costs->layers[l].fwd_us, want_f[l], 1e-9, "layer %d", l);
        cr_expect_float_eq(e.costs->layers[l].bwd_us, want_b[l], 1e-9, "layer %d", l);
        cr_expect_float_eq(e.costs->layers[l].bwd_input_us + e.costs->layers[l].bwd_weight_us,
                           want_b[l], 1e-9);
    }
    cr_expect(strstr(e.notes, "without backward ranges") != NULL, "notes: %s", e.notes);
    pp_extract_free(&e);

    /* no statistics (an analysis made by hand): the kept timeline's ops */
    for (int s = 0; s < S; s++) {
        ops[2 * s].t1 = f_ns[s];
        ops[2 * s + 1].t1 = 50000 + b_ns[s];
        stages[s].fwd_ns = stages[s].bwd_ns = (pp_astats){0};
    }
    cr_assert_eq(pp_extract_from_analysis(&a, &e), PP_OK, "%s", pp_error_message());
    for (int l = 0; l < L; l++) {
        cr_expect_float_eq(e.costs->layers[l].fwd_us, want_f[l], 1e-9, "layer %d", l);
        cr_expect_float_eq(e.costs->layers[l].bwd_us, want_b[l], 1e-9, "layer %d", l);
    }
    pp_extract_free(&e);

    /* no forward op kept, a stage backward of 99 us: shared, the forwards not scaled */
    for (int s = 0; s < S; s++)
        stages[s].bwd_ns = (pp_astats){.count = 4, .mean = 99e3, .median = 99e3};
    a.n_ops = 1; /* stage 0's forward op only */
    cr_assert_eq(pp_extract_from_analysis(&a, &e), PP_OK, "%s", pp_error_message());
    cr_expect_float_eq(e.costs->layers[0].bwd_us, 33, 1e-9);
    cr_expect_float_eq(e.costs->layers[3].bwd_us, 99 * 5.0 / 8, 1e-9);
    cr_expect_float_eq(e.costs->layers[3].fwd_us, 5, 1e-9, "no forward op: not scaled");
    pp_extract_free(&e);

    /* no backward anywhere on a stage: refused, naming the stage */
    stages[1].bwd_ns = (pp_astats){0};
    cr_expect_eq(pp_extract_from_analysis(&a, &e), PP_ERR_INVALID);
    cr_expect(strstr(pp_error_message(), "stage 1") != NULL, "%s", pp_error_message());
}

/* ---- a with_stack trace's actions (no Python needed) ----------------------------------- */

/* One rank's Kineto JSON as torch.profiler writes it with with_stack=True: every
 * record_function range (ProfilerStep#1, Forward 0, Backward 0) starts inside the Python frame
 * that opens it (__enter__) and outlives it, so the importer writes them as START/END, not
 * nested; the schedule's own frames (forward_one_chunk) and the blocks (nn.Module) are nested
 * in those actions by time. The stage module is called the way torch_pipe.py calls it (its own
 * __call__, a frame of the job's code, no module event of its own): each block is a layer. */
static void write_stack_trace(const char *path, int rank)
{
    /* rank 0 sends its activation at 26 and receives the gradient in its backward; rank 1
     * waits for the activation inside its forward, computes the loss, sends the gradient */
    const char *events0 =
        "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"torch/profiler/profiler.py(9): step\","
        "\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":2},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"pid\":1,\"tid\":1,"
        "\"ts\":1,\"dur\":99},"
        "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"torch/autograd/profiler.py(7): "
        "__enter__\",\"pid\":1,\"tid\":1,\"ts\":10,\"dur\":2},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"Forward 0\",\"pid\":1,\"tid\":1,"
        "\"ts\":11,\"dur\":19},"
        "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"torch/distributed/pipelining/"
        "stage.py(1142): forward_one_chunk\",\"pid\":1,\"tid\":1,\"ts\":13,\"dur\":12},"
        "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"torch_pipe.py(78): __call__\","
        "\"pid\":1,\"tid\":1,\"ts\":13.5,\"dur\":11},"
        "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"nn.Module: Block_0\",\"pid\":1,"
        "\"tid\":1,\"ts\":14,\"dur\":10},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"gloo:send\",\"pid\":1,\"tid\":1,"
        "\"ts\":26,\"dur\":14},"
        "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"torch/autograd/profiler.py(7): "
        "__enter__\",\"pid\":1,\"tid\":1,\"ts\":49,\"dur\":2},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"Backward 0\",\"pid\":1,\"tid\":1,"
        "\"ts\":50,\"dur\":40},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"gloo:recv\",\"pid\":1,\"tid\":1,"
        "\"ts\":52,\"dur\":18},"
        "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"torch/distributed/pipelining/"
        "stage.py(1300): backward_one_chunk\",\"pid\":1,\"tid\":1,\"ts\":71,\"dur\":18}";
    const char *events1 =
        "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"torch/profiler/profiler.py(9): step\","
        "\"pid\":2,\"tid\":2,\"ts\":0,\"dur\":2},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"pid\":2,\"tid\":2,"
        "\"ts\":1,\"dur\":99},"
        "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"torch/autograd/profiler.py(7): "
        "__enter__\",\"pid\":2,\"tid\":2,\"ts\":10,\"dur\":2},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"Forward 0\",\"pid\":2,\"tid\":2,"
        "\"ts\":11,\"dur\":39},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"gloo:recv\",\"pid\":2,\"tid\":2,"
        "\"ts\":13,\"dur\":27},"
        "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"torch/distributed/pipelining/"
        "stage.py(1142): forward_one_chunk\",\"pid\":2,\"tid\":2,\"ts\":41,\"dur\":8},"
        "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"torch_pipe.py(78): __call__\","
        "\"pid\":2,\"tid\":2,\"ts\":41.5,\"dur\":7},"
        "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"nn.Module: Block_0\",\"pid\":2,"
        "\"tid\":2,\"ts\":42,\"dur\":6},"
        "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"torch/autograd/profiler.py(7): "
        "__enter__\",\"pid\":2,\"tid\":2,\"ts\":50,\"dur\":2},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"Backward 0\",\"pid\":2,\"tid\":2,"
        "\"ts\":51,\"dur\":20},"
        "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"torch/distributed/pipelining/"
        "stage.py(1300): backward_one_chunk\",\"pid\":2,\"tid\":2,\"ts\":52,\"dur\":14},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"gloo:send\",\"pid\":2,\"tid\":2,"
        "\"ts\":67,\"dur\":4}";
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp);
    fprintf(fp,
            "{\"schemaVersion\":1,\"distributedInfo\":{\"backend\":\"gloo\",\"rank\":%d,"
            "\"world_size\":2},\"traceEvents\":[%s]}\n",
            rank, rank ? events1 : events0);
    cr_assert_eq(fclose(fp), 0);
}

/* Appends one complete event (thread = process = pid) to the comma-separated list in buf. */
static void add_event(char *buf, size_t cap, const char *cat, const char *name, int pid,
                      double ts, double dur)
{
    size_t n = strlen(buf);
    int w = snprintf(buf + n, cap - n,
                     "%s{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":%d,"
                     "\"tid\":%d,\"ts\":%g,\"dur\":%g}",
                     n ? "," : "", cat, name, pid, pid, ts, dur);
    cr_assert(w > 0 && (size_t)w < cap - n, "event list full");
}

#define FWD_CHUNK "torch/distributed/pipelining/stage.py(1142): forward_one_chunk"
#define BWD_CHUNK "torch/distributed/pipelining/stage.py(1300): backward_one_chunk"
#define NOSYNC "torch/distributed/pipelining/stage.py(1041): forward_maybe_with_nosync"

/* One rank's Kineto JSON of a GPipe step whose stage modules torch's pipelining calls itself,
 * as in every job that does not work around it (torchtitan's pruned model copies, torch's
 * tutorial): PipelineStage.forward_one_chunk -> forward_maybe_with_nosync -> the stage module's
 * event. Rank 0's stage module (Transformer_0) runs two blocks, each with a Linear inside, from
 * the model's own forward; its backward recomputes the stage module under activation
 * checkpointing. Rank 1's stage module is compiled as a whole (torch.compile: the OptimizedModule
 * wrapper called through dynamo's frames, the module it compiled inside it, a Torch-Compiled
 * Region and AOTAutograd's GraphModule inside that); with compiled = 0 it runs as rank 0's. */
static void write_module_trace(const char *path, int rank, int compiled)
{
    char ev[24576] = "";
    const size_t cap = sizeof ev;
    const int p = rank + 1;
    const char *ua = "user_annotation", *py = "python_function";
    for (int step = 1; step <= 3; step++) {
        double o = 200.0 * (step - 1); /* the step's start */
#define E(cat, name, ts, dur) add_event(ev, cap, cat, name, p, o + (ts), dur)
        char name[32];
        snprintf(name, sizeof name, "ProfilerStep#%d", step);
        E(ua, name, 1, 199);
        if (rank == 0) {
            E(ua, "Forward 0", 11, 79);
            E(py, FWD_CHUNK, 12, 67);
            E(py, NOSYNC, 13, 65);
            E(py, "nn.Module: Transformer_0", 14, 63);
            E(py, "torch/nn/modules/module.py(1791): _call_impl", 14.5, 62);
            E(py, "model.py(90): forward", 15, 61);
            E(py, "nn.Module: TransformerBlock_0", 16, 24);
            E(py, "nn.Module: Linear_0", 17, 22);
            E(py, "nn.Module: TransformerBlock_1", 41, 30);
            E(py, "nn.Module: Linear_1", 42, 28);
            E(ua, "gloo:send", 81, 4);
            E(ua, "Backward 0", 100, 90);
            E(ua, "gloo:recv", 101, 19);
            E(py, BWD_CHUNK, 121, 68);
            E(py, "torch/utils/checkpoint.py(500): recompute_fn", 122, 38);
            E(py, "nn.Module: Transformer_0", 123, 36);
            E(py, "model.py(90): forward", 124, 34);
            E(py, "nn.Module: TransformerBlock_0", 125, 15);
            E(py, "nn.Module: TransformerBlock_1", 141, 16);
            continue;
        }
        E(ua, "Forward 0", 11, 88);
        E(ua, "gloo:recv", 12, 73);
        E(py, FWD_CHUNK, 86, 12);
        E(py, NOSYNC, 86.5, 11);
        if (!compiled) {
            E(py, "nn.Module: Transformer_0", 87, 10);
            E(py, "model.py(90): forward", 87.5, 9);
            E(py, "nn.Module: TransformerBlock_0", 88, 4);
            E(py, "nn.Module: TransformerBlock_1", 92, 4);
        } else {
            E(py, "torch/_dynamo/eval_frame.py(551): __call__", 87, 10);
            E(py, "nn.Module: OptimizedModule_0", 87.5, 9);
            E(py, "torch/_dynamo/eval_frame.py(1150): compile_wrapper", 87.6, 8.8);
            E(py, "nn.Module: Transformer_0", 87.8, 8.4);
            E(py, "torch/_dynamo/eval_frame.py(1527): _fn", 88, 8);
            E("cpu_op", "Torch-Compiled Region: 0/0", 88.5, 7);
            E(py, "torch/_functorch/aot_autograd.py(1281): forward", 89, 6);
            E(py, "torch/fx/graph_module.py(496): __call__", 89.5, 5);
            E(py, "nn.Module: GraphModule_0", 90, 4);
        }
        E(ua, "Backward 0", 100, 30);
        E(py, BWD_CHUNK, 101, 24);
        E(ua, "gloo:send", 126, 3);
#undef E
    }
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp);
    fprintf(fp,
            "{\"schemaVersion\":1,\"distributedInfo\":{\"backend\":\"gloo\",\"rank\":%d,"
            "\"world_size\":2},\"traceEvents\":[%s]}\n",
            rank, ev);
    cr_assert_eq(fclose(fp), 0);
}

/* Before, the stage module was the one "layer" of its stage (2 layers for 2 stages: nothing to
 * rebalance, pprof-tune said the layout was optimal). Now its blocks are the layers, forward and
 * (recomputed) backward, and a stage module compiled as a whole is said to hide them. */
Test(torch_stack, a_stage_module_torch_calls_holds_the_layers)
{
    for (int compiled = 1; compiled >= 0; compiled--) {
        const char *dir = tk_path(compiled ? "compiled" : "eager");
        cr_assert_eq(mkdir(dir, 0755), 0);
        char p[512];
        for (int r = 0; r < 2; r++) {
            snprintf(p, sizeof p, "%s/rank%d.json", dir, r);
            write_module_trace(p, r, compiled);
        }
        const char *out = tk_path("modules.json");
        const char *argv[] = {REPORT, dir, "--json", "-q", "--warmup", "0", "-o", out, NULL};
        run_ok("pprof-report on the traces", argv);
        cJSON *j = load_json(out);
        const cJSON *layers = item(j, "layers"), *y;
        cr_assert_eq(cJSON_GetArraySize(layers), compiled ? 2 : 4,
                     "the blocks are the layers, not the stage module nor what is inside them");
        int i = 0;
        cJSON_ArrayForEach(y, layers)
        {
            char want[32];
            snprintf(want, sizeof want, "TransformerBlock_%d", i % 2);
            cr_expect_str_eq(item(y, "name")->valuestring, want, "layer %d", i);
            cr_expect_eq((int)num(item(y, "fwd_ms"), "count"), 3, "layer %d: a forward a step", i);
            if (i < 2) /* rank 0 recomputes its stage module inside its backward */
                cr_expect_eq((int)num(item(y, "bwd_ms"), "count"), 3, "layer %d: recomputed", i);
            i++;
        }
        cJSON_Delete(j);

        const char *rargv[] = {REPORT, dir, "--warmup", "0", NULL};
        tk_result r = tk_runv(rargv, NULL);
        cr_assert_eq(r.code, 0);
        cr_expect_eq(strstr(r.out, "3 module event(s) where the layers would be ran inside "
                                   "compiled code") != NULL,
                     compiled, "%s", r.out);
        tk_result_free(&r);
        const char *targv[] = {TUNE, dir, "-q", NULL};
        r = tk_runv(targv, NULL);
        if (compiled) {
            cr_expect_eq(r.code, 2, "pprof-tune on a stage without layers: %d\n%s", r.code, r.out);
            cr_expect(strstr(r.err, "piece 1 ran no layer") && strstr(r.err, "compiled as a whole"),
                      "%s", r.err);
        } else {
            cr_expect_eq(r.code, 0, "%s%s", r.out, r.err);
            cr_expect(strstr(r.out, "4 layers, 2 stages") != NULL, "%s", r.out);
        }
        tk_result_free(&r);
    }
}

/* Two ranks' traces written by write into the new folder dir (rank<r>.json), analyzed with
 * every step kept: the summary. */
static cJSON *two_rank_report(const char *dir, void (*write)(const char *path, int rank))
{
    cr_assert_eq(mkdir(dir, 0755), 0);
    char p[512];
    for (int r = 0; r < 2; r++) {
        snprintf(p, sizeof p, "%s/rank%d.json", dir, r);
        write(p, r);
    }
    snprintf(p, sizeof p, "%s.json", dir);
    const char *argv[] = {REPORT, dir, "--json", "-q", "--warmup", "0", "-o", p, NULL};
    run_ok("pprof-report on the traces", argv);
    return load_json(p);
}

#define MG_FWD "megatron/core/pipeline_parallel/schedules.py(311): forward_step"
#define MG_BWD "megatron/core/pipeline_parallel/schedules.py(446): backward_step"

/* One rank's Kineto JSON of a Megatron-LM 1F1B step (2 micro-batches) whose model chunk is
 * wrapped as Megatron wraps it in a mixed-precision data-parallel job: DistributedDataParallel
 * around Float16Module around GPTModel. Rank 0 runs the embedding and two blocks, rank 1 two
 * blocks, the decoder's final norm and the output layer; each block has a Linear inside; the
 * p2p between the calls is posted by p2p_communication.py's send_forward / recv_backward ...;
 * rank 1's backward recomputes a block (activation recomputation). */
static void write_megatron_trace(const char *path, int rank)
{
    char ev[32768] = "";
    const size_t cap = sizeof ev;
    const int p = rank + 1;
    const char *ua = "user_annotation", *py = "python_function";
    static const char *const p2p = "megatron/core/pipeline_parallel/p2p_communication.py(%d): %s";
    for (int step = 1; step <= 3; step++) {
        double o = 400.0 * (step - 1);
#define E(cat, name, ts, dur) add_event(ev, cap, cat, name, p, o + (ts), dur)
        char name[160];
        snprintf(name, sizeof name, "ProfilerStep#%d", step);
        E(ua, name, 1, 399);
        for (int mb = 0; mb < 2; mb++) {
            double f0 = rank == 0 ? 10 + 60.0 * mb : 60 + 60.0 * mb; /* forward's start */
            if (rank == 1) {
                snprintf(name, sizeof name, p2p, 402, "recv_forward");
                E(py, name, f0 - 6, 5);
                E(ua, "gloo:recv", f0 - 5, 3);
            }
            E(py, MG_FWD, f0, 40);
            E(py, "pretrain_gpt.py(150): forward_step", f0 + 1, 38);
            E(py, "nn.Module: DistributedDataParallel_0", f0 + 2, 36);
            E(py, "megatron/core/distributed/data_parallel_base.py(20): forward", f0 + 2.5, 35);
            E(py, "nn.Module: Float16Module_0", f0 + 3, 34);
            E(py, "nn.Module: GPTModel_0", f0 + 4, 32);
            double b = f0 + 5;
            if (rank == 0) {
                E(py, "nn.Module: LanguageModelEmbedding_0", b, 4);
                E(py, "nn.Module: VocabParallelEmbedding_0", b + 0.5, 3);
                b += 5;
            }
            E(py, "nn.Module: TransformerBlock_0", b, 22);
            E(py, "nn.Module: TransformerLayer_0", b + 1, 9);
            E(py, "nn.Module: ColumnParallelLinear_0", b + 2, 7);
            E(py, "nn.Module: TransformerLayer_1", b + 11, 9);
            E(py, "nn.Module: ColumnParallelLinear_1", b + 12, 7);
            if (rank == 1) {
                E(py, "nn.Module: LayerNorm_4", b + 20.5, 1);
                E(py, "nn.Module: ColumnParallelLinear_2", b + 23, 4);
            }
            if (rank == 0) {
                snprintf(name, sizeof name, p2p, 463, "send_forward");
                E(py, name, f0 + 41, 4);
                E(ua, "gloo:send", f0 + 42, 2);
            }
        }
        for (int mb = 0; mb < 2; mb++) {
            double b0 = rank == 1 ? 190 + 50.0 * mb : 200 + 50.0 * mb;
            if (rank == 0) {
                snprintf(name, sizeof name, p2p, 430, "recv_backward");
                E(py, name, b0 - 6, 5);
                E(ua, "gloo:recv", b0 - 5, 3);
            }
            E(py, MG_BWD, b0, 30);
            if (rank == 1) {
                E(py, "torch/utils/checkpoint.py(500): recompute_fn", b0 + 1, 10);
                E(py, "nn.Module: TransformerLayer_1", b0 + 2, 8);
                snprintf(name, sizeof name, p2p, 485, "send_backward");
                E(py, name, b0 + 31, 4);
                E(ua, "gloo:send", b0 + 32, 2);
            }
        }
        E("cpu_op", "Optimizer.step#SGD.step", 380, 10);
#undef E
    }
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp);
    fprintf(fp,
            "{\"schemaVersion\":1,\"distributedInfo\":{\"backend\":\"gloo\",\"rank\":%d,"
            "\"world_size\":2,\"pg_config\":[{\"pg_desc\":\"PIPELINE_MODEL_PARALLEL_GROUP\","
            "\"ranks\":[0,1]},{\"pg_desc\":\"EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP\","
            "\"ranks\":[0,1]}]},\"traceEvents\":[%s]}\n",
            rank, ev);
    cr_assert_eq(fclose(fp), 0);
}

/* Megatron's wrappers hand the model chunk's role to the module inside them, its decoder's
 * blocks are the layers and not its final norm, the embedding and output layer are named as
 * the layout form writes them; the links are the calls' directions with every micro-batch's
 * message; pprof-tune writes its proposal in Megatron's layout syntax. */
Test(torch_stack, megatron_wrapped_model_chunk)
{
    const char *dir = tk_path("megatron");
    cJSON *j = two_rank_report(dir, write_megatron_trace);
    cr_expect_str_eq(item(j, "dialect")->valuestring, "megatron-lm (torch profiler)");
    const cJSON *pipe = item(j, "pipeline");
    cr_expect_str_eq(item(pipe, "schedule")->valuestring, "gpipe"); /* every forward first */
    cr_expect_eq((int)num(pipe, "microbatches"), 2);
    static const char *const want[] = {"embedding",          "TransformerLayer_0",
                                       "TransformerLayer_1", "TransformerLayer_0",
                                       "TransformerLayer_1", "head"};
    const cJSON *y;
    int i = 0;
    cJSON_ArrayForEach(y, item(j, "layers"))
    {
        if (i < 6)
            cr_expect_str_eq(item(y, "name")->valuestring, want[i], "layer %d", i);
        cr_expect_eq((int)num(item(y, "fwd_ms"), "count"), 6, "layer %d: a forward per mb", i);
        cr_expect_eq((int)num(item(y, "bwd_ms"), "count"), 0, "layer %d: no recomputed layer", i);
        i++;
    }
    cr_expect_eq(i, 6, "%d layers: the embedding, 4 blocks, the output layer", i);
    const cJSON *l;
    int links = 0;
    cJSON_ArrayForEach(l, item(j, "links"))
    {
        int src = (int)num(l, "src"), dst = (int)num(l, "dst");
        cr_expect_eq(dst - src, strcmp(item(l, "kind")->valuestring, "grad") == 0 ? -1 : 1);
        cr_expect_eq((int)num(l, "messages"), 6, "link %d -> %d", src, dst);
        links++;
    }
    cr_expect_eq(links, 2);
    cJSON_Delete(j);
    const char *targv[] = {TUNE, dir, "-q", "--warmup", "0", NULL};
    tk_result r = tk_runv(targv, NULL);
    cr_expect(strstr(r.out, "--pipeline-model-parallel-layout \"Ett|ttL\"") != NULL ||
                  r.code != 0,
              "%s", r.out);
    tk_result_free(&r);
}

/* The actions of such a trace decode as without with_stack: one forward and one backward per
 * stage (the schedule's frames inside them are theirs, no second op), the compute from the
 * receive's end, the blocks as layers, the transfers as links. */
Test(torch_stack, with_stack_actions_decode_as_without)
{
    const char *dir = tk_path("stack");
    cJSON *j = two_rank_report(dir, write_stack_trace);
    cr_assert_eq((int)num(item(j, "pipeline"), "stages"), 2);
    const cJSON *stages = item(j, "stages");
    for (int s = 0; s < 2; s++) {
        const cJSON *g = cJSON_GetArrayItem(stages, s);
        cr_expect_eq((int)num(item(g, "fwd_ms"), "count"), 1, "stage %d: forwards", s);
        cr_expect_eq((int)num(item(g, "bwd_ms"), "count"), 1, "stage %d: backwards", s);
    }
    /* rank 1's forward starts where its receive ended (40 us), ends with its range (50) */
    const cJSON *g1 = cJSON_GetArrayItem(stages, 1);
    cr_expect_float_eq(num(item(g1, "fwd_ms"), "mean"), 0.010, 1e-9);
    /* rank 0's backward: from its receive's end (70) to its range's end (90) */
    const cJSON *g0 = cJSON_GetArrayItem(stages, 0);
    cr_expect_float_eq(num(item(g0, "bwd_ms"), "mean"), 0.020, 1e-9);
    cr_expect_geq(cJSON_GetArraySize(item(j, "links")), 2, "the transfers as links");
    cr_expect_eq(cJSON_GetArraySize(item(j, "layers")), 2, "one block per stage as a layer");
    cJSON_Delete(j);
}
