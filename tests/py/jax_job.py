#!/usr/bin/env python3
"""jax_job.py: a small JAX program profiled by jax.profiler, the foreign job behind
tests/data/kineto/jax: another framework's Chrome trace (no category on any event, one process per
device, its threads numbered by the OS), read by the Kineto importer as another tool's trace
(docs/kineto.md "Chrome traces of other tools").

  python tests/py/jax_job.py --out DIR

Four jitted layers (tanh(x @ w), 256 x 256) run 3 steps, each step under
jax.profiler.StepTraceAnnotation("train") and each layer under TraceAnnotation("layer<i>"), after
one warm-up call outside the profile. jax.profiler.trace(create_perfetto_trace=True) writes
DIR/plugins/profile/<time>/<host>.trace.json.gz and, the same trace again,
perfetto_trace.json.gz (and the .xplane.pb, not read). Not run by the tests (scripts/setup.sh
installs no JAX): it recorded the files they read, with jax 0.10.2 from PyPI on the CPU; the
recording's host file was renamed host.trace.json.gz.
"""
import argparse

import jax
import jax.numpy as jnp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--layers", type=int, default=4)
    a = ap.parse_args()

    @jax.jit
    def layer(w, x):
        return jnp.tanh(x @ w)

    key = jax.random.PRNGKey(0)
    ws = [jax.random.normal(jax.random.fold_in(key, i), (256, 256)) for i in range(a.layers)]
    x = jax.random.normal(key, (64, 256))
    layer(ws[0], x).block_until_ready()  # compiled outside the profile
    with jax.profiler.trace(a.out, create_perfetto_trace=True):
        for step in range(a.steps):
            with jax.profiler.StepTraceAnnotation("train", step_num=step):
                h = x
                for i, w in enumerate(ws):
                    with jax.profiler.TraceAnnotation(f"layer{i}"):
                        h = layer(w, h)
                h.block_until_ready()


if __name__ == "__main__":
    main()
