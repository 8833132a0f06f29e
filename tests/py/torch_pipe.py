#!/usr/bin/env python3
"""torch_pipe.py: a real torch.distributed.pipelining job, the test fixture of tests/test_torch.c
and the example of docs/torch.md. Run it under torchrun (gloo, CPU), one process per rank:

  torchrun --standalone --nproc-per-node 2 torch_pipe.py --schedule gpipe --out DIR

The model is a sequence of blocks in an attribute `layers` (module FQNs "layers.0",
"layers.1", ..., as torchtitan names them); block i repeats a Linear+tanh `work[i]` times
(--work, one number per block, or one number for all), so stages are as unequal as the test
wants. The blocks are cut into world x chunks pieces at --split-points (FQNs of the first block of
each piece but the first, as torchtitan's pipeline_parallel_split_points; default: even), and
piece p runs on rank p % world (the looped order torch's multi-stage schedules expect), or, for
--schedule zbv and dualpipev (torch's ScheduleZBVZeroBubble and ScheduleDualPipeV, two chunks per
rank), pieces r and 2 world - 1 - r on rank r (the V order). Each piece is a module of its own holding its blocks under their
original FQNs (torchtitan's manual split). --dp N runs N data-parallel copies of the pipeline
on world = N x (ranks per pipeline), their gradients all-reduced before the optimizer step, on a
DeviceMesh as torchtitan builds it (--mesh pp,dp: the pipeline outermost, so rank = stage x N +
replica; dp,pp: the other way), or on plain new_group calls without descriptions (--groups
unnamed); "rank" above is then the place in the pipeline. --piece-call module calls the stage
modules through nn.Module.__call__, as every job that does not avoid it (the profiler then
records a module event around the blocks: the stage module); --compile blocks | pieces runs
torch.compile on each block or on each stage module (--compile-backend, aot_eager by default).
--dp-wrap ddp | fsdp wraps each stage module in DistributedDataParallel or shards it with FSDP2
(with --dp on a DeviceMesh), as torchtitan's 2-D parallelism does.
--ends adds torchtitan's model ends: a token embedding (the input then token ids) before the
blocks, a norm and an output projection after them, run by the first and last pieces.
--frontend tracer builds the stages with torch's pipeline() instead (torch.export traces the
model, each stage module a GraphModule calling the blocks; one chunk per rank).

torch.profiler records every step after one warm-up (schedule wait=0, warmup=1, active=--steps:
ProfilerStep#1..N in the trace) and writes one Kineto JSON per rank, DIR/rank<r>.json;
--with-modules adds module events (nn.Module: Block_<k>), the per-layer times pprof-tune needs;
--with-stack adds Python stack events. --info FILE (rank 0) writes what the job ran as JSON:
schedule, world, chunks, micro-batches, the pieces' first blocks, the per-block work.
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                          ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble,
                                          ScheduleZBVZeroBubble, SplitPoint, pipeline)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel
from torch.distributed.pipelining.schedules import ScheduleDualPipeV
from torch.profiler import ProfilerActivity, profile, schedule as prof_schedule


class Block(nn.Module):
    """work x (Linear, tanh): its cost grows linearly with work."""

    def __init__(self, dim, work):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.work = work

    def forward(self, x):
        for _ in range(self.work):
            x = torch.tanh(self.lin(x))
        return x


class Model(nn.Module):
    """The blocks in `layers`; with ends=True, as torchtitan's models, a token embedding before
    them (tok_embeddings, on token ids) and a norm and an output projection after them."""

    def __init__(self, dim, work, ends=False, vocab=512):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim) if ends else None
        self.layers = nn.ModuleList(Block(dim, w) for w in work)
        self.norm = nn.LayerNorm(dim) if ends else None
        self.output = nn.Linear(dim, dim) if ends else None

    def forward(self, x):  # what torch's pipeline() front end traces (--frontend tracer)
        for blk in self.layers:
            x = blk(x)
        return x


class Piece(nn.Module):
    """Blocks [lo, hi) of the model under their own FQNs (layers.<i>), run in order; the first
    piece also runs the model's embedding, the last its norm and output, when it has them."""

    def __init__(self, model, lo, hi):
        super().__init__()
        self.layers = nn.ModuleDict({str(i): model.layers[i] for i in range(lo, hi)})
        last = hi == len(model.layers)
        self.tok_embeddings = model.tok_embeddings if lo == 0 else None
        self.norm = model.norm if last else None
        self.output = model.output if last else None

    def forward(self, x):
        if self.tok_embeddings is not None:
            x = self.tok_embeddings(x)
        for blk in self.layers.values():
            x = blk(x)
        if self.norm is not None:
            x = self.output(self.norm(x))
        return x

    # Called without nn.Module.__call__, so that the profiler records no module event for the
    # piece itself: the blocks are then the outermost modules inside a stage's action, the
    # layers pipeprof read before it knew the stage module (docs/dialects.md "Layers"; the
    # recorded fixtures are made so). ModulePiece below is called as torch calls any stage
    # module. (No hooks are lost: none is set.)
    def __call__(self, x):
        return self.forward(x)


class ModulePiece(Piece):
    """A Piece called as torch calls any stage module (nn.Module.__call__, so the profiler
    records a module event around its blocks), as in torchtitan's pruned model copies."""

    __call__ = nn.Module.__call__


def parse_split_points(text, n_blocks, n_pieces):
    """The first block of every piece but the first, from 'layers.3,layers.6' (or '3,6')."""
    if not text:
        return [round(p * n_blocks / n_pieces) for p in range(1, n_pieces)]
    firsts = []
    for tok in text.split(","):
        tok = tok.strip()
        idx = tok[len("layers."):] if tok.startswith("layers.") else tok
        if not idx.isdigit():
            sys.exit(f"torch_pipe: bad split point '{tok}' (want layers.<i>)")
        firsts.append(int(idx))
    if len(firsts) != n_pieces - 1:
        sys.exit(f"torch_pipe: {len(firsts)} split points for {n_pieces} pieces "
                 f"(want {n_pieces - 1})")
    if any(b <= a for a, b in zip([0] + firsts, firsts + [n_blocks])):
        sys.exit(f"torch_pipe: split points {text} are not increasing inside 1..{n_blocks - 1}")
    return firsts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # interleaved-zb: ScheduleInterleavedZeroBubble (looped, backward split into I and W);
    # zbv: ScheduleZBVZeroBubble (two chunks per rank in a V, split backward); dualpipev:
    # ScheduleDualPipeV (the V, with forward and backward pairs in OVERLAP_F_B actions)
    ap.add_argument("--schedule", default="gpipe",
                    choices=["gpipe", "1f1b", "interleaved", "interleaved-zb", "zbv",
                             "dualpipev"])
    ap.add_argument("--chunks", type=int, default=1,
                    help="pieces per rank (interleaved, interleaved-zb; zbv, dualpipev: 2)")
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--work", default="1", help="per-block work: one number, or one per block")
    ap.add_argument("--split-points", default="", help="e.g. layers.3 (default: even)")
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--mb-size", type=int, default=16, help="samples per micro-batch")
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--steps", type=int, default=4, help="profiled steps (after 1 warm-up)")
    ap.add_argument("--with-modules", action="store_true")
    ap.add_argument("--with-stack", action="store_true")
    ap.add_argument("--piece-call", default="direct", choices=["direct", "module"],
                    help="direct: the stage module is called without nn.Module.__call__ (no "
                         "module event of its own); module: as torch calls any stage module "
                         "(torchtitan's pruned model copies), one module event around its "
                         "blocks")
    ap.add_argument("--ends", action="store_true",
                    help="a token embedding before the blocks, a norm and an output projection "
                         "after them (torchtitan's model layout), on the first and last pieces")
    ap.add_argument("--frontend", default="manual", choices=["manual", "tracer"],
                    help="manual: stage modules built by hand (torchtitan's way); tracer: "
                         "torch's pipeline() traces the model and splits it at the split points")
    ap.add_argument("--compile", default="none", choices=["none", "blocks", "pieces"],
                    help="torch.compile each block (torchtitan's per-block compile) or each "
                         "stage module as a whole")
    ap.add_argument("--compile-backend", default="aot_eager",
                    help="torch.compile's backend (aot_eager: dynamo and AOTAutograd without "
                         "generating C++, quick on a small CPU machine; inductor)")
    ap.add_argument("--out", required=True, help="directory of the Kineto traces")
    ap.add_argument("--info", default="", help="rank 0 writes what it ran here (JSON)")
    ap.add_argument("--dp", type=int, default=1,
                    help="data-parallel replicas of the pipeline (world = dp x ranks per "
                         "pipeline); their gradients all-reduced before the optimizer step")
    ap.add_argument("--dp-wrap", default="none", choices=["none", "ddp", "fsdp"],
                    help="with --dp (a DeviceMesh): each stage module wrapped in "
                         "DistributedDataParallel, or sharded by FSDP2's fully_shard (each "
                         "block, then the stage module), instead of the all-reduce after the "
                         "schedule's step")
    ap.add_argument("--mesh", default="pp,dp", choices=["pp,dp", "dp,pp"],
                    help="with --dp: the DeviceMesh's dimensions, outermost first")
    ap.add_argument("--groups", default="mesh", choices=["mesh", "unnamed"],
                    help="with --dp: a DeviceMesh (groups described mesh_pp, mesh_dp) or plain "
                         "new_group calls without descriptions")
    a = ap.parse_args()

    torch.set_num_threads(1)  # one core per rank: the ranks share a small machine
    dist.init_process_group("gloo")
    grank, gworld = dist.get_rank(), dist.get_world_size()
    if a.dp < 1 or gworld % a.dp:
        sys.exit(f"torch_pipe: --dp {a.dp} does not divide the world of {gworld}")
    world = gworld // a.dp  # ranks per pipeline
    pp_group = dp_group = dp_mesh = None
    if a.dp > 1 and a.groups == "unnamed":
        # plain new_group calls, no descriptions (every process creates every group, in one
        # order); the pipeline outermost: rank = stage x dp + replica
        for d in range(a.dp):
            g = dist.new_group([s * a.dp + d for s in range(world)])
            pp_group = g if grank % a.dp == d else pp_group
        for s in range(world):
            g = dist.new_group([s * a.dp + d for d in range(a.dp)])
            dp_group = g if grank // a.dp == s else dp_group
    elif a.dp > 1:
        # torchtitan's way: a DeviceMesh whose dimension "pp" is the pipeline (its process
        # group described as "mesh_pp"); --mesh orders the dimensions, the first outermost
        dims = a.mesh.split(",")
        mesh = init_device_mesh("cpu", tuple(world if d == "pp" else a.dp for d in dims),
                                mesh_dim_names=tuple(dims))
        pp_group, dp_group = mesh.get_group("pp"), mesh.get_group("dp")
        dp_mesh = mesh["dp"]
    rank = dist.get_rank(pp_group) if pp_group is not None else grank
    if a.dp_wrap != "none" and (dp_mesh is None or a.piece_call != "module"):
        sys.exit("torch_pipe: --dp-wrap needs --dp N on a DeviceMesh and --piece-call module")
    looped = a.schedule in ("interleaved", "interleaved-zb")
    vee = a.schedule in ("zbv", "dualpipev")
    chunks = a.chunks if looped else 2 if vee else 1
    n_pieces = world * chunks
    work = [int(w) for w in a.work.split(",")]
    if len(work) == 1:
        work = work * a.blocks
    if len(work) != a.blocks or min(work) < 1:
        sys.exit(f"torch_pipe: --work needs 1 or {a.blocks} positive numbers")
    if n_pieces > a.blocks:
        sys.exit(f"torch_pipe: {n_pieces} pieces for {a.blocks} blocks")
    firsts = parse_split_points(a.split_points, a.blocks, n_pieces)
    bounds = [0] + firsts + [a.blocks]

    torch.manual_seed(0)
    model = Model(a.dim, work, ends=a.ends)
    mine = (rank, 2 * world - 1 - rank) if vee else \
        [p for p in range(n_pieces) if p % world == rank]
    if a.compile == "blocks":
        for i in range(a.blocks):
            model.layers[i] = torch.compile(model.layers[i], backend=a.compile_backend)

    def piece(p):
        m = (ModulePiece if a.piece_call == "module" else Piece)(model, bounds[p], bounds[p + 1])
        if a.dp_wrap == "ddp":  # the replicas' gradients all-reduced by DDP
            m = DistributedDataParallel(m, process_group=dp_group)
        elif a.dp_wrap == "fsdp":  # FSDP2 over the replicas, per block then the stage module
            for blk in m.layers.values():
                fully_shard(blk, mesh=dp_mesh)
            fully_shard(m, mesh=dp_mesh)
        return torch.compile(m, backend=a.compile_backend) if a.compile == "pieces" else m

    M = a.microbatches
    if a.frontend == "tracer":
        # torch's pipeline(): the model traced (torch.export) and split at the split points;
        # each stage module a GraphModule whose graph calls the blocks (InterpreterModules)
        if chunks != 1 or a.compile != "none" or a.dp > 1 or a.ends:
            sys.exit("torch_pipe: --frontend tracer runs one chunk per rank, no --compile, --dp "
                     "or --ends")
        pipe = pipeline(model, mb_args=(torch.randn(a.mb_size, a.dim),),
                        split_spec={f"layers.{i}": SplitPoint.BEGINNING for i in firsts})
        stages = [pipe.build_stage(rank, torch.device("cpu"))]
    else:
        stages = [PipelineStage(piece(p), p, n_pieces, torch.device("cpu"), group=pp_group)
                  for p in mine]
    loss_fn = lambda y, t: ((y - t) ** 2).mean()
    if a.schedule == "gpipe":
        sched = ScheduleGPipe(stages[0], n_microbatches=M, loss_fn=loss_fn)
    elif a.schedule == "1f1b":
        sched = Schedule1F1B(stages[0], n_microbatches=M, loss_fn=loss_fn)
    elif a.schedule == "interleaved-zb":
        sched = ScheduleInterleavedZeroBubble(stages, n_microbatches=M, loss_fn=loss_fn)
    elif a.schedule == "zbv":
        sched = ScheduleZBVZeroBubble(stages, n_microbatches=M, loss_fn=loss_fn)
    elif a.schedule == "dualpipev":
        sched = ScheduleDualPipeV(stages, n_microbatches=M, loss_fn=loss_fn)
    else:
        sched = ScheduleInterleaved1F1B(stages, n_microbatches=M, loss_fn=loss_fn)
    opt = torch.optim.SGD([p for s in stages for p in s.submod.parameters()], lr=1e-3)
    x = torch.randint(512, (M * a.mb_size,)) if a.ends else torch.randn(M * a.mb_size, a.dim)
    target = torch.randn(M * a.mb_size, a.dim)
    os.makedirs(a.out, exist_ok=True)

    def on_trace(prof):
        prof.export_chrome_trace(os.path.join(a.out, f"rank{grank}.json"))

    # the first stage holds the input and the last the loss: piece 0 on rank 0, piece
    # n_pieces - 1 on rank world - 1 when looped, on rank 0 in the V
    with profile(activities=[ProfilerActivity.CPU], with_modules=a.with_modules,
                 with_stack=a.with_stack or a.with_modules,
                 schedule=prof_schedule(wait=0, warmup=1, active=a.steps),
                 on_trace_ready=on_trace) as prof:
        for _ in range(a.steps + 1):
            opt.zero_grad()
            if rank == 0 and vee:
                sched.step(x, target=target)
            elif rank == 0:
                sched.step(x)
            elif rank == world - 1:
                sched.step(target=target)
            else:
                sched.step()
            if dp_group is not None and a.dp_wrap == "none":  # what DDP does
                for p in (p for s in stages for p in s.submod.parameters()):
                    if p.grad is not None:
                        dist.all_reduce(p.grad, group=dp_group)
                        p.grad /= a.dp
            opt.step()
            prof.step()
    if grank == 0 and a.info:
        with open(a.info, "w") as f:
            json.dump({"schedule": a.schedule, "world": world, "chunks": chunks,
                       "microbatches": M, "blocks": a.blocks, "work": work,
                       "split_points": [f"layers.{i}" for i in firsts], "dp": a.dp,
                       "mesh": a.mesh if a.dp > 1 else "", "piece_call": a.piece_call,
                       "compile": a.compile, "frontend": a.frontend, "ends": a.ends}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
