#!/usr/bin/env python3
"""pyspy_job.py: a small pipeline-parallel Python job with no profiler in it, the foreign job
behind tests/data/kineto/pyspy: recorded from outside by py-spy, a sampling profiler, whose
Chrome trace (--format chrometrace) is another tool's trace with begin/end events ("B", "E") of
category "py-spy", one pair per run of samples with the same stack frame, on threads numbered by
pthread_self() (near 2^47: docs/kineto.md "Chrome traces of other tools").

  py-spy record --format chrometrace --rate 250 -o OUT.json -- \
      python3 tests/py/pyspy_job.py [--steps 3] [--microbatches 4] [--work 16,8]

GPipe over two threads, one per stage, new ones each step: the first stage runs the forwards of
its micro-batches (stage_forward) and hands each on through a queue, the second runs its
forwards and then its backwards (stage_backward) in reverse order, handing the gradients back,
and the first stage's backwards follow as they arrive; the main thread waits in train_step. The
work is real and releases the GIL: SHA-256 over <work> MiB per forward, twice that per backward.
Standard library only. tests/test_kineto.c reads the recording (py-spy 0.4.3, CPython 3.11.7) and, where
scripts/setup.sh installed py-spy, records the job again.
"""
import argparse
import hashlib
import queue
import threading


def compute(buf, rounds):
    h = b""
    for _ in range(rounds):
        h = hashlib.sha256(buf).digest()  # releases the GIL on large buffers
    return h


def stage_forward(buf, rounds):
    return compute(buf, rounds)


def stage_backward(buf, rounds):
    return compute(buf, 2 * rounds)


def first_stage(m, buf, rounds, acts, grads):
    for mb in range(m):
        acts.put(stage_forward(buf, rounds))
    for mb in range(m):
        grads.get()
        stage_backward(buf, rounds)


def last_stage(m, buf, rounds, acts, grads):
    for mb in range(m):
        acts.get()
        stage_forward(buf, rounds)
    for mb in reversed(range(m)):
        stage_backward(buf, rounds)
        grads.put(mb)


def train_step(m, buf, work):
    acts, grads = queue.Queue(), queue.Queue()
    threads = [threading.Thread(target=first_stage, args=(m, buf, work[0], acts, grads)),
               threading.Thread(target=last_stage, args=(m, buf, work[1], acts, grads))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--work", default="16,8", help="SHA-256 rounds over 1 MiB per forward, per stage")
    a = ap.parse_args()
    work = [int(w) for w in a.work.split(",")]
    buf = bytes(1 << 20)
    for _ in range(a.steps):
        train_step(a.microbatches, buf, work)


if __name__ == "__main__":
    main()
