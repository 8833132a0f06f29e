#!/usr/bin/env python3
"""ds_pipe.py: a real DeepSpeed pipeline-parallel job (deepspeed.pipe.PipelineModule trained by
DeepSpeed's PipelineEngine), the fixture of the DeepSpeed tests in tests/test_torch.c. It runs on
CPU: DeepSpeed's CPU accelerator talks gloo when oneCCL is absent. One process per stage, under
torchrun (DeepSpeed reads torchrun's environment):

  torchrun --standalone --nproc-per-node 2 ds_pipe.py --out DIR

The model is --blocks blocks of Linear+tanh, block i repeated work[i] times (--work), cut by
DeepSpeed's own partitioner (--partition: 'uniform', 'parameters', or explicit parts such as
0,3,6: stage s holds blocks parts[s]..parts[s+1]-1, set by a PipelineModule subclass as a user
would). Each train_batch() runs --microbatches
micro-batches (gradient_accumulation_steps) in DeepSpeed's 1F1B TrainSchedule.

torch.profiler records every step after one warm-up (wait=0, warmup=1, active=--steps) with
Python stack and module events (DeepSpeed emits no record_function ranges of its own: its
pipeline instructions show only as the engine's methods in the stack) and writes one Kineto JSON per rank,
DIR/rank<r>.json. --info FILE (rank 0) writes what ran: stages, micro-batches, the parts.

Nothing in it is shaped for pipeprof: it is what a DeepSpeed user writes, plus the profiler.
"""
import argparse
import json
import os

import torch
import torch.nn as nn
import deepspeed
from deepspeed.pipe import LayerSpec, PipelineModule
from torch.profiler import ProfilerActivity, profile, schedule as prof_schedule

from torch_pipe import Block  # work x (Linear, tanh): the blocks of torch_pipe.py's jobs


class PartedPipelineModule(PipelineModule):
    """A PipelineModule cut at given parts (stage s holds layers parts[s]..parts[s+1]-1), the
    way a DeepSpeed user applies exact boundaries: PipelineModule's partition methods are
    'uniform', 'parameters' and 'type:regex', so the split is set where DeepSpeed computes it."""

    def __init__(self, parts, *args, **kwargs):
        self.fixed_parts = parts
        super().__init__(*args, **kwargs)

    def _partition_layers(self, method="uniform"):
        super()._partition_layers(method)
        if self.fixed_parts is not None:
            self.parts = list(self.fixed_parts)
            stage = self._topo.get_coord(self.global_rank).pipe
            self._set_bounds(start=self.parts[stage], stop=self.parts[stage + 1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--blocks", type=int, default=6)
    p.add_argument("--work", default="1")
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--mb-size", type=int, default=8)
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--partition", default="uniform")
    p.add_argument("--checkpoint", type=int, default=0,
                   help="activation_checkpoint_interval: recompute every N layers (0: none)")
    p.add_argument("--stages", type=int, default=0,
                   help="pipeline stages (default: all ranks); the rest data parallelism")
    p.add_argument("--info")
    a = p.parse_args()

    work = [int(w) for w in a.work.split(",")]
    if len(work) == 1:
        work = work * a.blocks
    if len(work) != a.blocks:
        p.error("--work: one number, or one per block")
    torch.manual_seed(0)
    # saturated tanh units' gradients fall into denormal floats after a few steps, which slows
    # the backward down 10x and more on x86 as training goes on (seen here: 10 -> 80 ms)
    torch.set_flush_denormal(True)
    deepspeed.init_distributed(dist_backend="gloo")
    world = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])
    stages = a.stages or world
    if world % stages:
        p.error(f"--stages {stages} does not divide the {world} ranks")
    specs = [LayerSpec(Block, a.dim, w) for w in work]
    parts = None
    if "," in a.partition:
        parts = [int(x) for x in a.partition.split(",")]
        if len(parts) != stages + 1 or parts[0] != 0 or parts[-1] != a.blocks or \
                any(x >= y for x, y in zip(parts, parts[1:])):
            p.error(f"--partition {a.partition}: {stages + 1} increasing parts from 0 to {a.blocks}")
    model = PartedPipelineModule(parts, layers=specs, num_stages=stages,
                                 partition_method="uniform" if parts else a.partition,
                                 loss_fn=nn.MSELoss(),
                                 activation_checkpoint_interval=a.checkpoint)
    config = {
        "train_micro_batch_size_per_gpu": a.mb_size,
        "gradient_accumulation_steps": a.microbatches,
        "optimizer": {"type": "SGD", "params": {"lr": 1e-3}},
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                           config=config)

    def batches():
        g = torch.Generator().manual_seed(1)
        while True:
            yield (torch.randn(a.mb_size, a.dim, generator=g),
                   torch.randn(a.mb_size, a.dim, generator=g))

    it = batches()
    os.makedirs(a.out, exist_ok=True)

    def save(prof):
        prof.export_chrome_trace(os.path.join(a.out, f"rank{rank}.json"))

    with profile(activities=[ProfilerActivity.CPU], with_stack=True, with_modules=True,
                 schedule=prof_schedule(wait=0, warmup=1, active=a.steps),
                 on_trace_ready=save) as prof:
        for _ in range(a.steps + 1):
            engine.train_batch(data_iter=it)
            prof.step()
    if a.info and rank == 0:
        with open(a.info, "w") as f:
            json.dump({"stages": stages, "world": world, "microbatches": a.microbatches, "blocks": a.blocks,
                       "work": work, "parts": list(model.parts)}, f)


if __name__ == "__main__":
    main()
