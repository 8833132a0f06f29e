"""benchmarks/gpu/torch_job.py: a real PyTorch pipeline job for the GPU check (benchmarks/gpu/run.sh).

Two stages of an MLP, one Python thread and one CUDA stream each, GPipe order (every forward,
then every backward) over M micro-batches per step, activations and gradients handed between the
threads through queues with a CUDA event each. It annotates itself the way any framework can,
with the PyPI nvtx package in pipeprof's NVTX convention (docs/nvtx-convention.md, the fallback
form: message + category + one integer), so `pprof-run --cuda` projects its kernels onto the
stages' forward and backward ranges. It knows nothing of pipeprof beyond those names.

usage: python3 torch_job.py [--steps N] [--microbatches M] [--hidden H] [--layers L] [--batch B]
Prints one line per step (wall time) and "done" at the end; runs on the CPU when there is no GPU.
"""
import argparse
import contextlib
import queue
import threading
import time

import nvtx
import torch

DOMAIN = "pipeprof"
S = 2


def rng(msg, stage, payload=None):
    """a range in the convention: category = stage + 1, payload = mb, bytes or step"""
    return nvtx.annotate(msg, domain=DOMAIN, category=stage + 1, payload=payload)


class Link:
    """one direction between two stages: (tensor, event) pairs in order"""

    def __init__(self):
        self.q = queue.Queue()

    def send(self, t, stream):
        ev = None
        if t.is_cuda:
            ev = torch.cuda.Event()
            ev.record(stream)
        self.q.put((t, ev))

    def recv(self, stream):
        t, ev = self.q.get()
        if ev is not None:
            stream.wait_event(ev)
        return t


def stage_worker(s, model, opt, args, act, grad, barrier, dev, errors):
    try:
        stream = torch.cuda.Stream(dev) if dev.type == "cuda" else None
        ctx = torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()
        mb_rows = args.batch // args.microbatches
        gen = torch.Generator(device="cpu").manual_seed(1234 + s)
        with ctx:
            for step in range(1, args.steps + 1):
                barrier.wait()
                t0 = time.perf_counter()
                with rng("step", s, step):
                    opt.zero_grad(set_to_none=True)
                    ins, outs = [], []
                    for mb in range(args.microbatches):
                        if s == 0:
                            x = torch.randn(mb_rows, args.hidden, generator=gen).to(dev, non_blocking=True)
                        else:
                            with rng(f"recv_act mb{mb}", s, mb_rows * args.hidden * 4):
                                x = act.recv(stream).detach().requires_grad_(True)
                        with rng(f"fwd mb{mb}", s, mb):
                            y = model(x)
                            if s == S - 1:
                                y = (y.float() ** 2).mean()
                        ins.append(x)
                        outs.append(y)
                        if s == 0:
                            with rng(f"send_act mb{mb}", s, y.numel() * y.element_size()):
                                act.send(y.detach(), stream)
                    for mb in range(args.microbatches):
                        if s == S - 1:
                            with rng(f"bwd mb{mb}", s, mb):
                                outs[mb].backward()
                            with rng(f"send_grad mb{mb}", s, ins[mb].grad.numel() * 4):
                                grad.send(ins[mb].grad, stream)
                        else:
                            with rng(f"recv_grad mb{mb}", s, mb_rows * args.hidden * 4):
                                g = grad.recv(stream)
                            with rng(f"bwd mb{mb}", s, mb):
                                outs[mb].backward(g)
                    with rng("opt_step", s):
                        opt.step()
                    if stream is not None:
                        stream.synchronize()
                ms = (time.perf_counter() - t0) * 1e3
                if s == 0:
                    print(f"step {step}: {ms:.2f} ms", flush=True)
    except BaseException as e:  # a failing thread must not leave the other blocked forever
        errors.append(f"stage {s}: {e!r}")
        barrier.abort()
        raise


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=4, help="layers per stage")
    ap.add_argument("--batch", type=int, default=1024, help="rows per step")
    args = ap.parse_args()
    if args.batch % args.microbatches:
        ap.error("--batch must divide into --microbatches")
    dev = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    models, opts = [], []
    for s in range(S):
        layers = []
        for _ in range(args.layers):
            layers += [torch.nn.Linear(args.hidden, args.hidden), torch.nn.GELU()]
        m = torch.nn.Sequential(*layers).to(dev)
        models.append(m)
        opts.append(torch.optim.SGD(m.parameters(), lr=1e-4))
    nvtx.mark(f"config schedule=gpipe S={S} M={args.microbatches} v=1 layers={S * args.layers} "
              f"samples_per_step={args.batch} tokens_per_step=0 backend=torch-{dev.type}", domain=DOMAIN)
    act, grad = Link(), Link()
    barrier = threading.Barrier(S)
    errors = []
    threads = [threading.Thread(target=stage_worker, name=f"stage {s}",
                                args=(s, models[s], opts[s], args, act, grad, barrier, dev, errors))
               for s in range(S)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit("torch_job: " + "; ".join(errors))
    print(f"done: {args.steps} steps, {S} stages x {args.layers} layers of {args.hidden}, "
          f"M={args.microbatches}, device {dev}", flush=True)


if __name__ == "__main__":
    main()
