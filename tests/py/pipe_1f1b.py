#!/usr/bin/env python3
"""pipe_1f1b.py: a 1F1B pipeline written the way a Python framework would write one, as a test
fixture for pipeprof's analysis of jobs unlike pptrain.

One thread per stage, a queue.Queue between neighbours in each direction, the 1F1B order per
stage (warm-up forwards, one forward one backward, drain backwards). Forward and backward sleep
fixed durations, so the truth is known. Annotations use the PyPI `nvtx` package in the
fallback form of docs/nvtx-convention.md: domain "pipeprof", category = stage + 1, ASCII
messages ("fwd mb3", "send_act mb3", "step"), one integer payload (micro-batch for compute, bytes
for transfers, step number for steps), and the configuration mark.

The job measures its own truth and writes it as JSON (--out):
  - "step_starts", "step_ends": per stage, the monotonic times (ns) at which each step began and
    ended on that stage (step 1 first);
  - "period_ns": the mean spacing of a stage's step starts over the steps after the first,
    averaged over the stages (what a user would call the step time of a pipelined job);
  - "latency_ns": per link ("act 0->1", "grad 1->0", ...), the median put -> get latency of the
    messages whose receiver was already blocked in get() when the message was put (their arrival
    is observed: get's return), and "latency_samples" how many messages each median is over.

--barrier makes every stage wait for all others before its optimizer step (like an all-reduce
of the gradient norm); without it, stages run ahead into the next step.

--layers N splits each stage's forward and backward into N layer ranges ("layer<i> fwd", i the
layer's index in the whole model, each sleeping its share), what pprof-tune extracts costs from.
--late-every K --late-ms X: every K-th message a stage receives on a link returns X ms late (the
receiving thread sleeps inside its receive range once the message is there), as a receiver that
was descheduled when its data arrived; the delay holds up everything after it on that stage.
"""
import argparse
import json
import queue
import sys
import threading
import time

import nvtx

DOMAIN = "pipeprof"


def rng(msg, stage, payload):
    return nvtx.annotate(msg, domain=DOMAIN, category=stage + 1, payload=payload)


class Link:
    """A one-way queue between two stages that timestamps each message."""

    def __init__(self):
        self.q = queue.Queue()

    def put(self, mb):
        self.q.put((mb, time.monotonic_ns()))

    def get(self, samples, late_every=0, late_s=0.0):
        t0 = time.monotonic_ns()
        mb, t_put = self.q.get()
        self.n_got = getattr(self, "n_got", 0) + 1
        if late_every and self.n_got % late_every == 0:
            time.sleep(late_s)
        t1 = time.monotonic_ns()
        if t0 <= t_put:  # the receiver was waiting: the arrival is observed
            samples.append(t1 - t_put)
        return mb


def order_1f1b(S, M, s):
    """Stage s's list: ("F", mb) and ("B", mb) in 1F1B order."""
    warm = min(S - s - 1, M)
    ops = [("F", i) for i in range(warm)]
    f, b = warm, 0
    while f < M:
        ops.append(("F", f))
        f += 1
        ops.append(("B", b))
        b += 1
    while b < M:
        ops.append(("B", b))
        b += 1
    return ops


def compute(a, s, kind, mb, total_s):
    """A forward or backward of stage s: one sleep, or one per layer inside layer ranges."""
    if not a.layers:
        time.sleep(total_s)
        return
    layers = range(s * a.layers, (s + 1) * a.layers)
    for i in (layers if kind == "fwd" else reversed(layers)):
        with rng("layer%d %s" % (i, kind), s, mb):
            time.sleep(total_s / a.layers)


def stage_main(a, s, acts, grads, barrier, starts, ends, samples, errors):
    try:
        S, M = a.stages, a.microbatches
        fwd_s, bwd_s, opt_s = a.fwd_ms * 1e-3, a.bwd_ms * 1e-3, a.opt_ms * 1e-3
        ops = order_1f1b(S, M, s)
        for step in range(1, a.steps + 1):
            starts.append(time.monotonic_ns())
            with rng("step", s, step):
                for kind, mb in ops:
                    if kind == "F":
                        if s > 0:
                            with rng("recv_act mb%d" % mb, s, a.bytes):
                                got = acts[s - 1].get(samples["act %d->%d" % (s - 1, s)],
                                                      a.late_every, a.late_ms * 1e-3)
                            assert got == mb, (s, "act", got, mb)
                        with rng("fwd mb%d" % mb, s, mb):
                            compute(a, s, "fwd", mb, fwd_s)
                        if s < S - 1:
                            with rng("send_act mb%d" % mb, s, a.bytes):
                                acts[s].put(mb)
                    else:
                        if s < S - 1:
                            with rng("recv_grad mb%d" % mb, s, a.bytes):
                                got = grads[s].get(samples["grad %d->%d" % (s + 1, s)],
                                                   a.late_every, a.late_ms * 1e-3)
                            assert got == mb, (s, "grad", got, mb)
                        with rng("bwd mb%d" % mb, s, mb):
                            compute(a, s, "bwd", mb, bwd_s)
                        if s > 0:
                            with rng("send_grad mb%d" % mb, s, a.bytes):
                                grads[s - 1].put(mb)
                if barrier is not None:
                    barrier.wait()
                with rng("opt_step", s, 0):
                    time.sleep(opt_s)
            ends.append(time.monotonic_ns())
    except Exception as e:  # a broken fixture must fail the job, not hang it
        errors.append("stage %d: %r" % (s, e))
        if barrier is not None:
            barrier.abort()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stages", type=int, default=4)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--fwd-ms", type=float, default=2.0)
    p.add_argument("--bwd-ms", type=float, default=4.0)
    p.add_argument("--opt-ms", type=float, default=1.0)
    p.add_argument("--bytes", type=int, default=1 << 20, help="bytes each message stands for")
    p.add_argument("--barrier", action="store_true")
    p.add_argument("--layers", type=int, default=0, help="layer ranges per stage (0: none)")
    p.add_argument("--late-every", type=int, default=0,
                   help="every K-th message a stage receives on a link returns late (0: none)")
    p.add_argument("--late-ms", type=float, default=0.0, help="how late, ms")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    S = a.stages
    if S < 2 or a.microbatches < 1 or a.steps < 3 or a.layers < 0 or a.late_every < 0:
        print("pipe_1f1b: need --stages >= 2, --microbatches >= 1, --steps >= 3", file=sys.stderr)
        return 2
    nvtx.mark("config schedule=1f1b S=%d M=%d v=1 samples_per_step=%d schedules=1f1b,gpipe"
              % (S, a.microbatches, a.microbatches), domain=DOMAIN)
    acts = [Link() for _ in range(S - 1)]
    grads = [Link() for _ in range(S - 1)]
    barrier = threading.Barrier(S) if a.barrier else None
    starts = [[] for _ in range(S)]
    ends = [[] for _ in range(S)]
    samples = {}
    for s in range(S - 1):
        samples["act %d->%d" % (s, s + 1)] = []
        samples["grad %d->%d" % (s + 1, s)] = []
    errors = []
    threads = [threading.Thread(target=stage_main,
                                args=(a, s, acts, grads, barrier, starts[s], ends[s], samples,
                                      errors),
                                name="stage %d" % s)
               for s in range(S)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        print("pipe_1f1b: " + "; ".join(errors), file=sys.stderr)
        return 1
    # the period: mean spacing of a stage's step starts after the first (warm-up) step
    per_stage = [(st[-1] - st[1]) / (len(st) - 2) for st in starts]
    latency = {}
    for link, xs in samples.items():
        xs.sort()
        latency[link] = xs[len(xs) // 2] if xs else None
    truth = {
        "stages": S,
        "microbatches": a.microbatches,
        "steps": a.steps,
        "barrier": a.barrier,
        "step_starts": starts,
        "step_ends": ends,
        "period_ns": sum(per_stage) / len(per_stage),
        "latency_ns": latency,
        "latency_samples": {k: len(v) for k, v in samples.items()},
    }
    with open(a.out, "w") as f:
        json.dump(truth, f)
    print("pipe_1f1b: period %.3f ms; queue latency (median, us): %s"
          % (truth["period_ns"] * 1e-6,
             ", ".join("%s %s" % (k, "%.1f" % (v * 1e-3) if v is not None else "unknown")
                       for k, v in latency.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
