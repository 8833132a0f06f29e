#!/usr/bin/env bash
# setup.sh: installs what pipeprof needs on Debian 12 (as root), only what is missing.
# Called by scripts/demo.sh and scripts/test.sh; safe to run again.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libcriterion-dev libopenblas-dev libcjson-dev gnuplot-nox
      clang libclang-rt-dev
      openmpi-bin libopenmpi-dev # the MPI transport (pptrain --transport mpi) and its test
      zlib1g-dev # gzip-compressed PyTorch profiler traces (analyzer/kineto_json.c)
      dpkg-dev man-db # the Debian package (cpack's dpkg-shlibdeps) and its man pages, checked
                      # by scripts/package_test.sh
      chromium) # pprof-report --html opened in a real browser (tests/html/html_test.sh)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The Python fixture of the tests (tests/py: a pipeline in another language) needs the PyPI
# `nvtx` package. It goes into a venv kept outside the clone, created once and reused by later
# runs and other clones: /var/cache/pipeprof/venv when that is writable (root), else
# ${XDG_CACHE_HOME:-~/.cache}/pipeprof/venv; PPROF_VENV chooses another place. tests/test_pyjob.c
# looks in the same places (PPROF_PYTHON names an interpreter directly). A failure here only
# costs those tests (they skip); nothing else needs Python.
if [[ -n "${PPROF_VENV:-}" ]]; then
  venv=$PPROF_VENV
elif mkdir -p /var/cache/pipeprof 2>/dev/null && [[ -w /var/cache/pipeprof ]]; then
  venv=/var/cache/pipeprof/venv
else
  venv=${XDG_CACHE_HOME:-$HOME/.cache}/pipeprof/venv
fi
if ! "$venv/bin/python" -c 'import nvtx' 2>/dev/null; then
  py=${PPROF_SETUP_PYTHON:-python3}
  if ! "$py" -c 'import ensurepip, venv' 2>/dev/null && command -v apt-get >/dev/null; then
    echo "setup: installing python3-venv" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q --no-install-recommends python3-venv || true
  fi
  echo "setup: creating $venv with the nvtx package" >&2
  if mkdir -p "$(dirname "$venv")" && "$py" -m venv "$venv" &&
     "$venv/bin/pip" install -q --disable-pip-version-check nvtx; then
    echo "setup: $venv/bin/python has nvtx" >&2
  else
    echo "setup: could not install nvtx into $venv; the Python fixture's tests will skip" >&2
  fi
fi

# VizTracer (PyPI) into the same venv: tests/test_kineto.c runs a Python pipeline job traced by
# VizTracer (tests/py/viztracer_job.py), another tool's Chrome trace. A failure only skips that
# test, saying why.
if "$venv/bin/python" -c 'import nvtx' 2>/dev/null &&
   ! "$venv/bin/python" -c 'import viztracer' 2>/dev/null; then
  echo "setup: installing viztracer into $venv (PyPI)" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check viztracer==1.1.1 ||
    echo "setup: could not install viztracer into $venv; the VizTracer job's test will skip" >&2
fi
# py-spy (PyPI, a sampling profiler for Python: a binary wheel) into the same venv:
# tests/test_kineto.c records tests/py/pyspy_job.py with it from outside, another tool's Chrome
# trace of a job with no profiler in it. A failure only skips that test, saying why.
if "$venv/bin/python" -c 'import nvtx' 2>/dev/null && [[ ! -x "$venv/bin/py-spy" ]]; then
  echo "setup: installing py-spy into $venv (PyPI)" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check py-spy==0.4.3 ||
    echo "setup: could not install py-spy into $venv; the py-spy job's test will skip" >&2
fi
# The torch tests (tests/test_torch.c: real torch.distributed.pipelining jobs on CPU under
# torchrun, tests/py/torch_*.py) need torch and numpy. Same idea as above, a venv of its own
# outside the clone, reused by fresh clones and later CI runs: /var/cache/pipeprof/torch-local
# when writable, else ${XDG_CACHE_HOME:-~/.cache}/pipeprof/torch-local; PPROF_TORCH_VENV chooses
# another. An existing venv that imports torch and numpy is kept as it is. torch comes from PyPI
# (the default wheel is large, ~5 GB with its CUDA libraries, and runs without a GPU). A failure
# only costs the torch tests: they skip, saying why.
if [[ -n "${PPROF_TORCH_VENV:-}" ]]; then
  tvenv=$PPROF_TORCH_VENV
elif mkdir -p /var/cache/pipeprof 2>/dev/null && [[ -w /var/cache/pipeprof ]]; then
  tvenv=/var/cache/pipeprof/torch-local
else
  tvenv=${XDG_CACHE_HOME:-$HOME/.cache}/pipeprof/torch-local
fi
if ! "$tvenv/bin/python" -c 'import torch, numpy' 2>/dev/null; then
  py=${PPROF_SETUP_PYTHON:-python3}
  echo "setup: creating $tvenv with torch and numpy (PyPI; a large download)" >&2
  if mkdir -p "$(dirname "$tvenv")" && { [[ -x "$tvenv/bin/python" ]] || "$py" -m venv "$tvenv"; } &&
     "$tvenv/bin/pip" install -q --disable-pip-version-check torch numpy &&
     "$tvenv/bin/python" -c 'import torch, numpy'; then
    echo "setup: $tvenv/bin/python has torch" >&2
  else
    echo "setup: could not install torch into $tvenv; the torch tests will skip" >&2
  fi
fi
# DeepSpeed (PyPI) into the same venv: tests/test_torch.c's deepspeed_pipeline_engine runs a real
# DeepSpeed pipeline job (tests/py/ds_pipe.py) on CPU. Its CPU accelerator compiles a shared-
# memory communication op at its first init_distributed (~45 s on 2 cores, cached under
# ~/.cache/torch_extensions): built here once, so that the test's time stays the job's own. A
# failure only skips that test, saying why.
if "$tvenv/bin/python" -c 'import torch, numpy' 2>/dev/null &&
   ! "$tvenv/bin/python" -c 'import importlib.util as u, sys; sys.exit(0 if u.find_spec("deepspeed") else 1)' 2>/dev/null; then
  echo "setup: installing deepspeed into $tvenv (PyPI)" >&2
  "$tvenv/bin/pip" install -q --disable-pip-version-check deepspeed ||
    echo "setup: could not install deepspeed into $tvenv; the DeepSpeed test will skip" >&2
fi
if "$tvenv/bin/python" -c 'import importlib.util as u, sys; sys.exit(0 if u.find_spec("deepspeed") else 1)' 2>/dev/null; then
  "$tvenv/bin/python" -c 'from deepspeed.comm.torch import build_shm_op; build_shm_op()' \
    >/dev/null 2>&1 || echo "setup: deepspeed's CPU communication op did not build here" >&2
fi
# Megatron-LM's core (PyPI megatron-core) into the same venv: tests/test_torch.c's megatron_* tests
# run real megatron-core pipeline jobs (tests/py/megatron_pipe.py: its GPTModel and schedules) on
# CPU. A failure only skips those tests, saying why.
if "$tvenv/bin/python" -c 'import torch, numpy' 2>/dev/null &&
   ! "$tvenv/bin/python" -c 'import importlib.util as u, sys; sys.exit(0 if u.find_spec("megatron.core") else 1)' 2>/dev/null; then
  echo "setup: installing megatron-core into $tvenv (PyPI)" >&2
  "$tvenv/bin/pip" install -q --disable-pip-version-check megatron-core ||
    echo "setup: could not install megatron-core into $tvenv; the Megatron tests will skip" >&2
fi
