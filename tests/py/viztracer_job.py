#!/usr/bin/env python3
"""viztracer_job.py: a small pipeline-parallel Python job traced by VizTracer, the foreign job
behind tests/data/kineto/viztracer: another tool's Chrome trace (VizTracer's categories "fee" for
every Python and C function call, "FEE" for the job's own log_event ranges, "instant" for
log_instant, counter events of a VizCounter with no category), read by the Kineto importer as
another tool's trace (docs/kineto.md "Chrome traces of other tools") and, with the dialect file
beside the recording, as the pipeline it is (docs/dialects.md "Worked examples").

  viztracer -o OUT.json.gz tests/py/viztracer_job.py [--steps 3] [--microbatches 4]
                                                     [--stages 2] [--work 4,2]

GPipe over threads, one per stage (named stage<k>, new ones each step): each step, under a range
"train_step" on the main thread, the first stage runs the forwards of its micro-batches and
hands each on through a queue, the last runs its forwards and then the backwards in reverse
order, handing the gradients back, and each earlier stage's backwards follow as they arrive.
Every forward is a range "stage<k> forward mb<m>", every backward "stage<k> backward mb<m>"
(VizTracer's log_event: the job's own annotation, the names it chose). The step is the main
thread's, the stages' ranges are their threads': no thread holds both (docs/metrics.md,
"Steps of a driver thread"). The work is real and releases the GIL, so the stages overlap:
SHA-256 over <work> MiB per forward and twice that per backward. Before each step an instant
"step begin", after it a VizCounter "queue" with the queues' depth and the steps done. Standard
library and VizTracer only. tests/test_kineto.c reads the recording (viztracer 1.1.1, CPython
3.11) and, where scripts/setup.sh installed VizTracer, runs the job again.
"""
import argparse
import hashlib
import queue
import threading

from viztracer import get_tracer
from viztracer.vizcounter import VizCounter


def compute(buf, rounds):
    h = b""
    for _ in range(rounds):
        h = hashlib.sha256(buf).digest()  # releases the GIL on large buffers
    return h


def stage(k, stages, mbs, buf, rounds, acts, grads):
    """Stage k: acts[k - 1] brings its inputs, acts[k] takes its outputs; grads likewise back."""
    tr = get_tracer()
    last = k == stages - 1
    for m in range(mbs):
        if k:
            acts[k - 1].get()
        with tr.log_event(f"stage{k} forward mb{m}"):
            compute(buf, rounds)
        if not last:
            acts[k].put(m)
    for m in reversed(range(mbs)):
        if not last:
            grads[k].get()
        with tr.log_event(f"stage{k} backward mb{m}"):
            compute(buf, 2 * rounds)
        if k:
            grads[k - 1].put(m)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--work", default="4,2", help="MiB hashed per forward, per stage")
    a = ap.parse_args()
    work = [int(w) for w in a.work.split(",")]
    work += [work[-1]] * (a.stages - len(work))
    buf = bytes(1 << 20)
    tr = get_tracer()
    counter = VizCounter(tr, "queue")
    for step in range(a.steps):
        tr.log_instant("step begin", args={"step": step})
        acts = [queue.Queue() for _ in range(a.stages - 1)]
        grads = [queue.Queue() for _ in range(a.stages - 1)]
        threads = [threading.Thread(target=stage, name=f"stage{k}",
                                    args=(k, a.stages, a.microbatches, buf, work[k], acts, grads))
                   for k in range(a.stages)]
        with tr.log_event("train_step"):
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        counter.depth = sum(q.qsize() for q in acts + grads)
        counter.steps = step + 1


if __name__ == "__main__":
    main()
