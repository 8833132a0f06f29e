#!/usr/bin/env python3
"""paddle_pipe.py: a PaddlePaddle pipeline-parallel job (fleet's PipelineParallel, 1F1B) on CPU,
profiled with paddle.profiler, or with fleet's own pipeline timeline: the foreign job behind
tests/data/kineto/pd, tests/data/kineto/pdtl and tests/data/kineto/pdtl8 (the latter with
--microbatches 8 --mb-size 64).

  python -m paddle.distributed.launch --nproc_per_node 2 tests/py/paddle_pipe.py --out DIR
  python -m paddle.distributed.launch --nproc_per_node 2 tests/py/paddle_pipe.py --out DIR \
      --timeline --dim 1024 --mb-size 128

Each rank writes DIR/*.paddle_trace.json (paddle.profiler.export_chrome_tracing) for steps 2-4 of
5; with --timeline, instead, DIR/profile_record_tmp_file_for_rank_<N> (pp_configs.profiling:
fleet's PipelineParallel stamps each micro-batch's forward and backward, JSON lines, every step,
in milliseconds: hence the larger layers). Paddle's pipeline parallelism is written for GPUs;
three patches let it run on gloo and the CPU, each a no-op for what the trace shows: the device id a CPU ParallelEnv lacks (0),
paddle.device.synchronize (nothing to wait for on the CPU), and the point-to-point sends and
receives "on the calculation stream", which ProcessGroupGloo refuses, made as the process
group's blocking send and receive. Not run by the tests (scripts/setup.sh installs no Paddle):
it records the traces they read. Recorded with paddlepaddle 3.3.1 from PyPI.
"""
import argparse
import os

import paddle
import paddle.distributed as dist
import paddle.nn as nn
import paddle.profiler as profiler
from paddle.distributed import fleet
from paddle.distributed.fleet.meta_parallel import LayerDesc, PipelineLayer


class Block(nn.Layer):
    def __init__(self, dim, work):
        super().__init__()
        self.lins = nn.LayerList([nn.Linear(dim, dim) for _ in range(work)])

    def forward(self, x):
        for lin in self.lins:
            x = paddle.tanh(lin(x))
        return x


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--work", default="1,1,1,3", help="per-block Linear+tanh count")
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--mb-size", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--timeline", action="store_true",
                    help="pp_configs.profiling instead of paddle.profiler")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    paddle.set_device("cpu")
    dist.ParallelEnv.device_id = property(lambda self: 0)
    paddle.device.synchronize = lambda *args, **kw: None
    strategy = fleet.DistributedStrategy()
    strategy.hybrid_configs = {"dp_degree": 1, "mp_degree": 1, "pp_degree": 2,
                               "pp_configs": {"profiling": a.timeline}}
    strategy.pipeline_configs = {"accumulate_steps": a.microbatches,
                                 "micro_batch_size": a.mb_size}
    fleet.init(is_collective=True, strategy=strategy)
    from paddle.distributed.fleet.meta_parallel.pp_utils import p2p_communication as p2p

    def send(tensor, group, dst, nranks=1, rank_id=0):
        return group.process_group.send(tensor, group.get_group_rank(dst), True)

    def recv(tensor, group, src, nranks=1, rank_id=0):
        return group.process_group.recv(tensor, group.get_group_rank(src), True)

    p2p._send_on_calc_stream = send
    p2p._recv_on_calc_stream = recv
    paddle.seed(1234)
    work = [int(w) for w in a.work.split(",")]
    model = PipelineLayer(layers=[LayerDesc(Block, a.dim, w) for w in work], num_stages=2,
                          loss_fn=nn.MSELoss())
    opt = paddle.optimizer.SGD(learning_rate=0.01, parameters=model.parameters())
    model = fleet.distributed_model(model)
    opt = fleet.distributed_optimizer(opt)
    prof = None
    if a.timeline:
        os.chdir(a.out)  # fleet writes ./profile_record_tmp_file_for_rank_<N>
    else:
        prof = profiler.Profiler(targets=[profiler.ProfilerTarget.CPU],
                                 scheduler=(1, a.steps - 1),
                                 on_trace_ready=profiler.export_chrome_tracing(a.out))
        prof.start()
    batch = a.microbatches * a.mb_size
    for _ in range(a.steps):
        x = paddle.randn([batch, a.dim])
        y = paddle.randn([batch, a.dim])
        model.train_batch([x, y], opt)
        if prof:
            prof.step()
    if prof:
        prof.stop()


if __name__ == "__main__":
    main()
