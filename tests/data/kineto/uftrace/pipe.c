/* pipe.c: the C job behind tests/data/kineto/uftrace/uftrace.json, a trace of another language's
 * tool: a two-stage GPipe over POSIX threads (new ones each of 3 steps; 4 micro-batches, the
 * second stage twice the work), its functions traced by uftrace (a function tracer for C and
 * C++ programs built with -pg), exported as a Chrome trace. Recorded with uftrace v0.13 on
 * Debian 12:
 *
 *   gcc -pg -O0 -pthread pipe.c -o pipe
 *   uftrace record -d uf.data ./pipe && uftrace dump -d uf.data --chrome > uftrace.json
 *
 * The file: begin/end events ("B", "E") of no category, each thread a process of its own in
 * uftrace's metadata ("process_name" and "thread_name" events keyed by pid), "displayTimeUnit"
 * "ns" and a "metadata" object. tests/test_kineto.c reads it. */
#include <pthread.h>
#include <stdio.h>

static volatile double sink;

static void work(int n)
{
    double x = 0;
    for (int i = 0; i < n * 100000; i++)
        x += i * 0.5;
    sink = x;
}

static void stage_forward(int mb, int w) { (void)mb; work(w); }
static void stage_backward(int mb, int w) { (void)mb; work(2 * w); }

static void *stage(void *arg)
{
    long s = (long)arg;
    for (int mb = 0; mb < 4; mb++)
        stage_forward(mb, (int)s + 1);
    for (int mb = 3; mb >= 0; mb--)
        stage_backward(mb, (int)s + 1);
    return NULL;
}

static void train_step(void)
{
    pthread_t t[2];
    for (long s = 0; s < 2; s++)
        pthread_create(&t[s], NULL, stage, (void *)s);
    for (int s = 0; s < 2; s++)
        pthread_join(t[s], NULL);
}

int main(void)
{
    for (int i = 0; i < 3; i++)
        train_step();
    printf("%g\n", sink);
    return 0;
}
