#!/usr/bin/env python3
"""plain_nvtx.py: a Python job annotated with the PyPI `nvtx` package the way any Python user
would, knowing nothing of pipeprof's convention: a fixture of tests/test_generic.c (the generic
view). nvtx.annotate (as a context manager), push_range/pop_range, start_range/end_range (ended
on another thread), marks, two domains plus the default one, categories and payloads, on three
threads.

Its truth goes to the file named by --out, one line per event, in the format of
tests/plain_nvtx_app.c:
  R <domain> <tid> <t0> <t1> <name>   t0 read just before the opening call, t1 just after the
                                      closing one (time.monotonic_ns, CLOCK_MONOTONIC)
  M <domain> <tid> <name>
<domain> is "-" for the default domain.
"""
import argparse
import threading
import time

import nvtx

lock = threading.Lock()
lines = []


def out(line):
    with lock:
        lines.append(line)


def spin_us(us):
    end = time.monotonic_ns() + us * 1000
    while time.monotonic_ns() < end:
        pass


def one_round(who):
    tid = threading.get_native_id()
    t0 = time.monotonic_ns()
    with nvtx.annotate("py step"):
        l0 = time.monotonic_ns()
        nvtx.push_range("read", domain="data", category=1)
        spin_us(40)
        nvtx.pop_range(domain="data")
        l1 = time.monotonic_ns()
        out(f"R data {tid} {l0} {l1} read")
        for k in range(2):
            f0 = time.monotonic_ns()
            with nvtx.annotate("layer", domain="net", category="compute", payload=k):
                spin_us(60)
            f1 = time.monotonic_ns()
            out(f"R net {tid} {f0} {f1} layer")
        nvtx.mark(who, domain="net")
        out(f"M net {tid} {who}")
    t1 = time.monotonic_ns()
    out(f"R - {tid} {t0} {t1} py step")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    handoff = {}
    ready = threading.Event()

    def worker(name):
        for _ in range(args.rounds):
            one_round(name)
        if name == "w0":
            ready.wait()
            spin_us(20)
            nvtx.end_range(handoff["id"])
            t1 = time.monotonic_ns()
            out(f"R data {threading.get_native_id()} {handoff['t0']} {t1} handoff")

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("w0", "w1")]
    for t in threads:
        t.start()
    for _ in range(args.rounds):
        one_round("main")
    tid = threading.get_native_id()
    nvtx.mark("finished")
    out(f"M - {tid} finished")
    handoff["t0"] = time.monotonic_ns()
    handoff["id"] = nvtx.start_range("handoff", domain="data")
    ready.set()
    for t in threads:
        t.join()
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
