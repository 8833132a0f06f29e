#!/usr/bin/env python3
"""megatron_pipe.py: a real Megatron-LM pipeline-parallel job (megatron-core's GPTModel, its
1F1B or interleaved schedule from get_forward_backward_func, its p2p communicator), the fixture
of the Megatron tests in tests/test_torch.c. One process per pipeline stage, under torchrun:

  torchrun --standalone --nproc-per-node 2 megatron_pipe.py --out DIR [--layout "Et*6|t*2L"]

The model is megatron-core's GPT (local layer spec: torch LayerNorm and Linear, no Transformer
Engine) of --layers transformer layers, split over the stages by Megatron itself: evenly, or by
--layout (Megatron's --pipeline-model-parallel-layout syntax: E the embedding, t a transformer
layer, L the output layer and loss, | between stages). --vp V runs the interleaved schedule with V
model chunks per rank (a layout then lists S x V pieces); --overlap-p2p overlaps its p2p with the
compute (overlap_p2p_comm on, batch_p2p_comm off), as Megatron-LM's training script runs the
interleaved schedule by default. Each step runs --microbatches
micro-batches through forward_backward_func, then a torch SGD step.

torch.profiler is set up as Megatron's training loop sets it up for --use-pytorch-profiler
(a wait/warm-up/active schedule, with_stack=True as --pytorch-profiler-collect-callstack asks,
with_modules left off: torch's Python tracer records the module calls anyway), and each rank's
trace is written where Megatron writes it, gzipped: DIR/rank-<r>.json.gz.

Megatron-LM assumes CUDA; this machine has none. So that its own code runs unchanged on CPU
(gloo), three things are adapted and nothing else: tensors Megatron asks for on device "cuda"
(or torch.cuda.current_device()) are made on the CPU (its tensor factories wrapped),
torch.cuda.synchronize
is a no-op, and the CUDA RNG tracker's fork (dropout's model-parallel RNG state) runs in the
CPU's RNG. The schedule, the p2p, the model and the loss are Megatron's.
"""
import argparse
import contextlib
import functools
import json
import os

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, schedule as prof_schedule


def _cuda(d):
    if isinstance(d, bool):
        return False
    if isinstance(d, int):
        return True
    if isinstance(d, str):
        return d.startswith("cuda")
    return isinstance(d, torch.device) and d.type == "cuda"


def _on_cpu(make):
    @functools.wraps(make)
    def made(*args, **kwargs):
        if _cuda(kwargs.get("device")):
            kwargs["device"] = "cpu"
        return make(*args, **kwargs)

    return made


# the tensor factories Megatron calls with device="cuda" or torch.cuda.current_device() (wrapped
# one by one rather than by a TorchFunctionMode, which would run Python around every op)
FACTORIES = ("empty", "zeros", "ones", "full", "tensor", "arange", "rand", "randn", "randint")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--layout", default=None)
    p.add_argument("--vp", type=int, default=1)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--mb-size", type=int, default=4)
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--overlap-p2p", action="store_true",
                   help="interleaved: overlap_p2p_comm on, batch_p2p_comm off, as Megatron-LM's "
                        "training script sets them by default (--no-overlap-p2p-communication "
                        "turns it off)")
    p.add_argument("--no-batch-p2p", action="store_true",
                   help="batch_p2p_comm off without the overlap: Megatron's _p2p_ops posts "
                        "each send and receive alone, in another order than the batch")
    p.add_argument("--info", default=None)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)

    torch.manual_seed(1234)
    for name in FACTORIES:
        setattr(torch, name, _on_cpu(getattr(torch, name)))
    torch.cuda.current_device = lambda: "cpu"
    torch.cuda.synchronize = lambda *args, **kw: None
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    rank = dist.get_rank()

    from megatron.core import parallel_state as ps
    from megatron.core import tensor_parallel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.pipeline_parallel import get_forward_backward_func
    from megatron.core.transformer.transformer_config import TransformerConfig

    vp = a.vp if a.vp > 1 else None
    ps.initialize_model_parallel(pipeline_model_parallel_size=world,
                                 virtual_pipeline_model_parallel_size=vp)
    tensor_parallel.get_cuda_rng_tracker().fork = lambda *args, **kw: contextlib.nullcontext()
    cfg = TransformerConfig(num_layers=a.layers, hidden_size=a.hidden,
                            num_attention_heads=a.heads, pipeline_model_parallel_size=world,
                            virtual_pipeline_model_parallel_size=vp,
                            pipeline_model_parallel_layout=a.layout,
                            pipeline_dtype=torch.float32, use_cpu_initialization=True,
                            overlap_p2p_comm=a.overlap_p2p, batch_p2p_comm=not (a.overlap_p2p or a.no_batch_p2p),
                            hidden_dropout=0.0, attention_dropout=0.0)
    chunks = []
    for c in range(a.vp):
        chunks.append(GPTModel(
            config=cfg, transformer_layer_spec=get_gpt_layer_local_spec(),
            vocab_size=a.vocab, max_sequence_length=a.seq,
            pre_process=ps.is_pipeline_first_stage(ignore_virtual=False, vp_stage=c),
            post_process=ps.is_pipeline_last_stage(ignore_virtual=False, vp_stage=c),
            vp_stage=c if vp else None))
    params = [q for m in chunks for q in m.parameters()]
    opt = torch.optim.SGD(params, lr=1e-4)
    mask = torch.ones(a.mb_size, 1, a.seq, a.seq, dtype=torch.bool).tril().logical_not()
    pos = torch.arange(a.seq).expand(a.mb_size, a.seq)

    def batches():
        while True:
            tok = torch.randint(0, a.vocab, (a.mb_size, a.seq))
            yield {"tokens": tok, "labels": torch.roll(tok, -1, 1)}

    def forward_step(it, model):
        b = next(it)
        out = model(b["tokens"], pos, mask, labels=b["labels"])

        def loss_func(o):
            loss = o.float().mean()
            return loss, {"loss": loss.detach()}

        return out, loss_func

    fb = get_forward_backward_func()
    steps = a.steps + 2
    prof = profile(activities=[ProfilerActivity.CPU],
                   schedule=prof_schedule(wait=1, warmup=1, active=a.steps, repeat=1),
                   on_trace_ready=lambda pr: pr.export_chrome_trace(
                       os.path.join(a.out, f"rank-{rank}.json.gz")),
                   with_stack=True)
    iters = [batches() for _ in chunks]
    prof.start()
    for _ in range(steps):
        fb(forward_step_func=forward_step, data_iterator=iters if vp else iters[0],
           model=chunks, num_microbatches=a.microbatches, seq_length=a.seq,
           micro_batch_size=a.mb_size, forward_only=False)
        opt.step()
        opt.zero_grad()
        prof.step()
    prof.stop()
    if a.info and rank == 0:
        with open(a.info, "w") as f:
            json.dump({"stages": world, "vp": a.vp, "microbatches": a.microbatches,
                       "layers": a.layers, "layout": a.layout}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
