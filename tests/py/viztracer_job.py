#!/usr/bin/env python3
"""viztracer_job.py: a small two-stage Python job traced by VizTracer, the foreign job behind
tests/data/kineto/viztracer: another tool's Chrome trace (VizTracer's categories "fee" for every
Python and C function call, "FEE" for the job's own log_event ranges, "instant" for
log_instant, counter events of a VizCounter with no category), read by the Kineto importer as
another tool's trace (docs/kineto.md "Chrome traces of other tools").

  viztracer -o tests/data/kineto/viztracer/vz.json.gz tests/py/viztracer_job.py

Each of 3 steps: an instant "step begin", a range "train_step" around two threads, stage 0
(named stage0) computing 4 micro-batches and handing each to stage 1 (stage1) through a queue,
every micro-batch under a range "stage<k> forward mb<m>"; after the step a VizCounter "queue"
records the queue's depth and the steps done. Not run by the tests (scripts/setup.sh installs no
VizTracer): it recorded the file they read, with viztracer 1.1.1 from PyPI, CPython 3.11.
"""
import argparse
import queue
import threading

from viztracer import get_tracer
from viztracer.vizcounter import VizCounter


def matmul(n):
    a = [[(i * j) % 7 for j in range(n)] for i in range(n)]
    return sum(sum(row) for row in a)


def stage(k, q_in, q_out, mbs, work):
    tr = get_tracer()
    for m in range(mbs):
        x = q_in.get() if q_in else m
        with tr.log_event(f"stage{k} forward mb{m}"):
            matmul(work)
        if q_out:
            q_out.put(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--microbatches", type=int, default=4)
    a = ap.parse_args()
    tr = get_tracer()
    counter = VizCounter(tr, "queue")
    for step in range(a.steps):
        tr.log_instant("step begin", args={"step": step})
        q = queue.Queue()
        t0 = threading.Thread(target=stage, args=(0, None, q, a.microbatches, 24), name="stage0")
        t1 = threading.Thread(target=stage, args=(1, q, None, a.microbatches, 12), name="stage1")
        with tr.log_event("train_step"):
            t0.start()
            t1.start()
            t0.join()
            t1.join()
        counter.depth = q.qsize()
        counter.steps = step + 1


if __name__ == "__main__":
    main()
