#!/usr/bin/env python3
"""kineto_truth.py: the numbers tests/test_torch.c checks pprof-report against, computed from the
PyTorch profiler (Kineto) traces alone, with nothing of pipeprof. Plain Python (json only), so
any interpreter runs it.

  kineto_truth.py DIR_OR_FILES... [--out FILE]

Reads one Kineto JSON (or .json.gz) per rank (rank from the header's distributedInfo, else the file order) and
writes JSON (with data-parallel pipelines, whose process groups say which is the pipeline's, one
pipeline's: --replica, its ranks numbered by their place in it):
  "ranks", "pieces" (torch pipeline stages), "chunks" (pieces per rank), "schedule"
  ("gpipe" for Forward/Backward <i> ranges, "pp" for the PP: actions);
  "steps": per ProfilerStep#N, in step order:
     "step": N,
     "step_ms": the mean over ranks of the spacing of ProfilerStep#N's start to #N+1's start
                (for the last step: of #N-1's end to #N's end),
     "pieces": [p] {"fwd_sum_ms", "fwd_n", "bwd_sum_ms", "bwd_n"}: the compute time of the
                piece's forward and backward actions that start in step N, and their count,
     "ranks": the same per rank (all its pieces: what a pipeline stage of pipeprof holds),
              with its gradient all-reduces ("allreduce_sum_ms", "allreduce_n") and its
              optimizer steps ("opt_sum_ms", "opt_n": Optimizer.step#<Class>.step ranges that
              start in step N);
  "slowest_piece", "slowest_rank": the largest fwd + bwd of a step, taken in each one's least
                disturbed step (its smallest total): on a machine shared by more ranks than
                cores, a rank descheduled inside its actions reads slower for that step alone;
  "heaviest_piece", "heaviest_rank": the job's own shape, from single actions: the largest
                sum over a piece's (a rank's pieces') fastest forward and fastest backward
                (I or W where the backward is split) of the steps read. A rank that shares its core for a whole
                run reads slow in every step (4 ranks and a busy loop on 2 cores: one rank's
                least disturbed step 3x its undisturbed work), but a millisecond action still
                runs undisturbed now and then;
  per step, "slowest_rank" too: the largest fwd + bwd of that step.

The compute time of an action follows the torch dialect's rule, docs/dialects.md "Waits": a
gloo:/nccl: recv or send belongs to the torch action it starts in; an action's compute starts at
the end of its own receive when that end lies inside it (for PP:<s>F<m> / PP:<s>B<m>, the
receive posted in PP:<s>RECV_F<m> / PP:<s>RECV_B<m>; for GPipe's Forward/Backward <m>, the one
started inside the range itself), and ends where its own send is posted (the start of a send
started inside it: GPipe), else at the range's end. DualPipeV's PP:(<s>F<m>;<s'>B<m'>)OVERLAP_F_B
runs a forward then a backward in one range: the forward from its receive's end (as above, else
the range's start) to the end of the last aten op on the range's thread before the backward's
first event (autograd::engine::evaluate_function or backward_one_chunk, any thread), the backward
from its own receive's end (else the forward's end) to the range's end. DeepSpeed's
PipelineEngine (its methods as with_stack events, "deepspeed/runtime/pipe/engine.py(<line>):
_exec_forward_pass" / "_exec_backward_pass", on the rank's stage, one micro-batch each) does its
sends and receives in methods of their own: each of those ranges is compute from start to end;
so do Megatron-LM's schedules (megatron/core/pipeline_parallel/schedules.py's forward_step and
backward_step, their p2p in p2p_communication.py's calls between them).
"""
import argparse
import glob
import gzip
import json
import os
import re
import sys

ACTION = re.compile(r"^PP:(\d+)(F|B|I|W)(\d+)$")
RECV_ACT = re.compile(r"^PP:(\d+)RECV_(F|B)(\d+)$")
GPIPE = re.compile(r"^(Forward|Backward) (\d+)$")
OVERLAP = re.compile(r"^PP:\((\d+)F(\d+);(\d+)(B|I)(\d+)\)OVERLAP_F_B$")
STEP = re.compile(r"^ProfilerStep#(\d+)$")
# DeepSpeed's PipelineEngine: an instruction's method as a with_stack event
DEEPSPEED = re.compile(r"deepspeed/runtime/pipe/engine\.py\(\d+\): _exec_(forward|backward)_pass$")
# Megatron-LM's schedules: each micro-batch's forward_step / backward_step as a with_stack event
MEGATRON = re.compile(r"megatron/core/pipeline_parallel/schedules\.py\(\d+\): (forward|backward)_step$")


def is_recv(name):
    return name.endswith(":recv") and name.split(":")[0] in ("gloo", "nccl")


def is_send(name):
    return name.endswith(":send") and name.split(":")[0] in ("gloo", "nccl")


def inputs(args):
    files = []
    for a in args:
        if os.path.isdir(a):
            files += sorted(glob.glob(os.path.join(a, "*.json")) +
                            glob.glob(os.path.join(a, "*.json.gz")))
        else:
            files.append(a)
    if not files:
        sys.exit("kineto_truth: no trace files")
    return files


def load(path, order):
    """(rank, replica, events): with a process group described as the pipeline's in
    distributedInfo.pg_config (DeviceMesh's "mesh_pp", Megatron-LM's
    PIPELINE_MODEL_PARALLEL_GROUP), the rank is the place in that group and the replica its
    lowest global rank; else the global rank and replica 0."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        j = json.load(f)
    info = j.get("distributedInfo") or {}
    rank, replica = info.get("rank", order), 0
    pipes = [g["ranks"] for g in info.get("pg_config", [])
             if g.get("pg_desc") == "mesh_pp" or "pipeline" in g.get("pg_desc", "").lower()]
    evs = [e for e in j.get("traceEvents", []) if e.get("ph") == "X" and "dur" in e]
    if not pipes and any(DEEPSPEED_ENGINE in e["name"] for e in evs):
        pipes = deepspeed_pipeline(info, rank)
    if len(pipes) == 1 and rank in pipes[0]:
        rank, replica = pipes[0].index(rank), min(pipes[0])
    evs.sort(key=lambda e: (e["ts"], -e["dur"]))
    return rank, replica, evs


DEEPSPEED_ENGINE = "deepspeed/runtime/pipe/engine.py("


def deepspeed_pipeline(info, rank):
    """[ranks of the pipeline] of a DeepSpeed job, whose groups carry no description: with its
    default topology (rank = stage x dp + replica) the rank's data-parallel group is dp
    consecutive ranks and its pipeline group world / dp ranks dp apart; [] unless exactly one
    such pipeline is found."""
    world = info.get("world_size", 0)
    groups = [sorted(g["ranks"]) for g in info.get("pg_config", []) if len(g["ranks"]) > 1]
    found = set()
    for d in groups:
        if rank not in d or d != list(range(d[0], d[0] + len(d))):
            continue
        for p in groups:
            n = len(d)
            if rank in p and len(p) * n == world and p == list(range(p[0], p[-1] + 1, n)):
                found.add(tuple(p))
    return [list(p) for p in found] if len(found) == 1 else []


def contains(outer, e):
    return outer["ts"] <= e["ts"] <= outer["ts"] + outer["dur"]


def analyze_rank(evs):
    """-> steps {N: (start, end)}, actions [(step, piece or None, kind, compute_ms)], kinds seen."""
    steps = {}
    for e in evs:
        m = STEP.match(e["name"])
        if m:
            steps[int(m.group(1))] = (e["ts"], e["ts"] + e["dur"])
    order = sorted(steps)

    def step_of(ts):
        for n in order:
            if steps[n][0] <= ts <= steps[n][1]:
                return n
        return None

    recvs = [e for e in evs if is_recv(e["name"])]
    sends = [e for e in evs if is_send(e["name"])]
    # the receive posted inside each PP:<s>RECV_<F|B><m>, by (step, s, F|B, m)
    posted = {}
    for e in evs:
        m = RECV_ACT.match(e["name"])
        if not m:
            continue
        r = next((x for x in recvs if contains(e, x)), None)
        if r:
            key = (step_of(e["ts"]), int(m.group(1)), m.group(2), int(m.group(3)))
            posted[key] = r["ts"] + r["dur"]
    backward_marks = sorted(e["ts"] for e in evs
                            if e["name"].startswith("autograd::engine::evaluate_function")
                            or e["name"].endswith(": backward_one_chunk"))
    atens = [e for e in evs if e["name"].startswith("aten::")]
    acts, gpipe = [], False
    for e in evs:
        name, t0, t1 = e["name"], e["ts"], e["ts"] + e["dur"]
        n = step_of(t0)
        if n is None:
            continue
        m = OVERLAP.match(name)
        if m:
            mark = next((x for x in backward_marks if t0 <= x), None)
            if mark is None or mark >= t1 or mark <= t0:
                continue  # not split: no pipeline op
            sf, mf, sb, mb = int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(5))
            ready = posted.get((n, sf, "F", mf))
            f0 = ready if ready is not None and t0 <= ready <= t1 else t0
            ends = [x["ts"] + x["dur"] for x in atens
                    if x.get("tid") == e.get("tid") and x["ts"] >= t0 and x["ts"] + x["dur"] <= mark]
            fend = max(ends) if ends else 0
            f1 = fend if f0 < fend <= mark else mark
            ready = posted.get((n, sb, "B", mb))
            b0 = ready if ready is not None and t0 <= ready <= t1 and ready > f1 else f1
            if b0 >= t1:
                b0 = f1
            acts.append((n, sf, "F", (f1 - f0) / 1e3))
            acts.append((n, sb, "B", (t1 - b0) / 1e3))
            continue
        m = ACTION.match(name)
        if m:
            s, k, mb = int(m.group(1)), m.group(2), int(m.group(3))
            ready = None if k == "W" else posted.get((n, s, "F" if k == "F" else "B", mb))
            start = ready if ready is not None and t0 <= ready <= t1 else t0
            acts.append((n, s, "F" if k == "F" else "B", (t1 - start) / 1e3))
            continue
        m = DEEPSPEED.search(name) or MEGATRON.search(name)
        if m:
            # the engine's p2p runs in its own methods (_exec_recv_activations, ...), Megatron's
            # in p2p_communication.py's calls, between these: their whole time is compute
            acts.append((n, None, "F" if m.group(1) == "forward" else "B", (t1 - t0) / 1e3))
            continue
        m = GPIPE.match(name)
        if m:
            gpipe = True
            r = next((x for x in recvs if contains(e, x)), None)
            ready = r["ts"] + r["dur"] if r else None
            start = ready if ready is not None and t0 <= ready <= t1 else t0
            snd = next((x for x in sends if contains(e, x)), None)
            end = snd["ts"] if snd else t1
            acts.append((n, None, "F" if m.group(1) == "Forward" else "B",
                         max(0.0, end - start) / 1e3))
    return steps, acts, gpipe


def allreduce_of(evs, steps):
    """[(step, ms)]: the gradient all-reduces (gloo:all_reduce, nccl:all_reduce: on any thread,
    the process group's own among them; DeepSpeed's from its optimizer step on excepted), each in
    the step whose ProfilerStep started last at or before it, with the part of it that overlaps the rank's compute (its PP: and Forward/Backward
    actions) taken out: what the step waits for."""
    starts = sorted((t0, n) for n, (t0, _) in steps.items())
    comp = sorted((e["ts"], e["ts"] + e["dur"]) for e in evs
                  if ACTION.match(e["name"]) or GPIPE.match(e["name"])
                  or DEEPSPEED.search(e["name"]))
    out = []

    def step_at(ts):
        n = None
        for t0, k in starts:
            if t0 <= ts:
                n = k
        return n

    # DeepSpeed: the all-reduces from its optimizer step on (the gradient norm over the stages)
    # are the optimizer's, not the data-parallel one (_exec_reduce_grads runs that one before)
    opt_start = {}
    for e in evs:
        if e["name"].endswith("): _exec_optimizer_step") and DEEPSPEED_ENGINE in e["name"]:
            opt_start[step_at(e["ts"])] = e["ts"]
    for e in evs:
        if e["name"] not in ("gloo:all_reduce", "nccl:all_reduce"):
            continue
        n = step_at(e["ts"])
        if n is None or (n in opt_start and e["ts"] >= opt_start[n]):
            continue
        a0, a1 = e["ts"], e["ts"] + e["dur"]
        hidden = sum(max(0.0, min(a1, c1) - max(a0, c0)) for c0, c1 in comp)
        out.append((n, (a1 - a0 - hidden) / 1e3))
    return out


OPT = re.compile(r"^Optimizer\.step#[^#]+\.step$")


def optimizer_of(evs, steps):
    """[(step, ms)]: torch.optim's steps (Optimizer.step#<Class>.step, its profile hook's
    record_function), each in the step whose ProfilerStep holds its start."""
    out = []
    for e in evs:
        if not OPT.match(e["name"]):
            continue
        n = next((k for k, (t0, t1) in steps.items() if t0 <= e["ts"] <= t1), None)
        if n is not None:
            out.append((n, e["dur"] / 1e3))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--out", default="-")
    ap.add_argument("--replica", type=int, default=0,
                    help="with data-parallel pipelines: the one to read, by their lowest ranks")
    a = ap.parse_args()
    ranks, allreduces, optimizers = {}, {}, {}
    loaded = [load(path, i) + (path,) for i, path in enumerate(inputs(a.inputs))]
    firsts = sorted(set(rep for _, rep, _, _ in loaded))
    if not 0 <= a.replica < len(firsts):
        sys.exit(f"kineto_truth: replica {a.replica} of {len(firsts)}")
    for rank, rep, evs, path in loaded:
        if rep != firsts[a.replica]:
            continue
        if rank in ranks:
            sys.exit(f"kineto_truth: rank {rank} twice ({path})")
        ranks[rank] = analyze_rank(evs)
        allreduces[rank] = allreduce_of(evs, ranks[rank][0])
        optimizers[rank] = optimizer_of(evs, ranks[rank][0])
    R = len(ranks)
    if sorted(ranks) != list(range(R)):
        sys.exit(f"kineto_truth: ranks {sorted(ranks)} are not 0..{R - 1}")
    gpipe = any(g for _, _, g in ranks.values())
    pieces = set()
    for r, (_, acts, _) in ranks.items():
        for act in acts:
            pieces.add(r if act[1] is None else act[1])
    P = max(pieces) + 1 if pieces else 0
    if P == 0 or P % R:
        sys.exit(f"kineto_truth: {P} pipeline stages on {R} ranks")
    common = sorted(set.intersection(*(set(st) for st, _, _ in ranks.values())))
    out_steps = []
    for i, n in enumerate(common):
        spans = []
        for st, _, _ in ranks.values():
            if i + 1 < len(common):
                spans.append(st[common[i + 1]][0] - st[n][0])
            elif i > 0:
                spans.append(st[n][1] - st[common[i - 1]][1])
            else:
                spans.append(st[n][1] - st[n][0])
        row = {"step": n, "step_ms": sum(spans) / len(spans) / 1e3,
               "pieces": [{"fwd_sum_ms": 0.0, "fwd_n": 0, "bwd_sum_ms": 0.0, "bwd_n": 0}
                          for _ in range(P)],
               "ranks": [{"fwd_sum_ms": 0.0, "fwd_n": 0, "bwd_sum_ms": 0.0, "bwd_n": 0}
                         for _ in range(R)]}
        for r, evs in allreduces.items():
            row["ranks"][r]["allreduce_sum_ms"] = sum(d for sn, d in evs if sn == n)
            row["ranks"][r]["allreduce_n"] = sum(1 for sn, _ in evs if sn == n)
        for r, evs in optimizers.items():
            row["ranks"][r]["opt_sum_ms"] = sum(d for sn, d in evs if sn == n)
            row["ranks"][r]["opt_n"] = sum(1 for sn, _ in evs if sn == n)
        for r, (_, acts, _) in ranks.items():
            for sn, piece, kind, ms in acts:
                if sn != n:
                    continue
                piece = r if piece is None else piece
                k = "fwd" if kind == "F" else "bwd"
                for cell in (row["pieces"][piece], row["ranks"][r]):
                    cell[k + "_sum_ms"] += ms
                    cell[k + "_n"] += 1
        out_steps.append(row)

    def slowest(key, n):
        tot = [min((s[key][i]["fwd_sum_ms"] + s[key][i]["bwd_sum_ms"] for s in out_steps),
                   default=0.0) for i in range(n)]
        return max(range(n), key=lambda i: tot[i])

    for row in out_steps:
        tot = [c["fwd_sum_ms"] + c["bwd_sum_ms"] for c in row["ranks"]]
        row["slowest_rank"] = max(range(R), key=lambda i: tot[i])
    # each piece's fastest action of each kind (I and W apart) over the steps read
    fastest, owner = [{} for _ in range(P)], [0] * P
    in_steps = set(common)
    for r, (_, acts, _) in ranks.items():
        for sn, piece, kind, ms in acts:
            if sn in in_steps:
                piece = r if piece is None else piece
                owner[piece] = r
                fastest[piece][kind] = min(fastest[piece].get(kind, ms), ms)
    work = [sum(c.values()) for c in fastest]
    rank_work = [0.0] * R
    for p in range(P):
        rank_work[owner[p]] += work[p]

    res = {"ranks": R, "pieces": P, "chunks": P // R, "schedule": "gpipe" if gpipe else "pp",
           "steps": out_steps, "slowest_piece": slowest("pieces", P),
           "slowest_rank": slowest("ranks", R),
           "heaviest_piece": max(range(P), key=lambda i: work[i]),
           "heaviest_rank": max(range(R), key=lambda i: rank_work[i])}
    text = json.dumps(res, indent=1)
    if a.out == "-":
        print(text)
    else:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
