#!/usr/bin/env bash
# GPU check for the fastpath (one CUDA device). Each step has a time cap; the caps add up to
# 9 min 15 s, so the whole script fits one 10-minute device call. How long it takes is not
# measured yet (the eager-only version of step 3 and steps 1 and 4 ran on an H200 on
# 2026-12-04; the captured and compiled cycles never have). The steps:
#   1. the device-parametrized tests marked `gpu` (decision equality with the reference in
#      float64, the KV-cache model, the tree format, the statistical cycle-law tests) and the
#      captured cycle (tests/test_fastpath_static.py: a CUDA-graph replay equals the eager cycle
#      decision by decision);
#   2. where a cycle's time goes: torch.profiler on CUDA over one eager cycle and ten graph
#      replays at batch 1 (bench/gpu_profile.py, the top kernels by CUDA time);
#   3. `rheo bench fastpath --device cuda --json` (V = 128256, batches 1 / 16 / 64): the eager
#      cycle, the CUDA-graph cycle per batch size and, at batches 1 and 64, the cycle compiled
#      whole in CUDA graphs (torch.compile, reduce-overhead; the faster mode equal to eager
#      sets the figures: targets 1 ms at batch 1, 3 ms at 64, Rheo over Top-K 1.05), the tree
#      builds (top-128 and Y from all V) and the batched verifier as CUDA graphs (the CUDA
#      targets sparse_over_dense_captured and fast_over_naive_verify_captured) and the ops per
#      cycle (the compiled launch count is the CPU run's);
#   4. the gate's batched checks on CUDA: the fastpath through the batched protocol
#      (`rheo gate --impl rheo.integrations.fastpath_protocol:Fastpath`: 1,000,000 cycles per
#      case, and V = 32,000), whose detail gives the cycles per second on the device.
# The lent machine has a CUDA torch, numpy, scipy, sympy, hypothesis and pytest already and
# no network, hence --no-deps (jsonschema and pytest>=9, which reads the `strict` ini key, travel
# as wheels: docs/tests.md). pytest runs with addopts overridden: the notebooks' --nbmake is not
# installed there and the gpu tests need none of it. Each step has its own time limit, so one
# slow step cannot eat the lease. Results go to $OUT (or ./gpu-results) as well as stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-results}"
mkdir -p "$out"
python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null
python - <<'PY' | tee "$out/device.txt"
import torch
assert torch.cuda.is_available(), "no CUDA device: this script is for the GPU machine"
print("torch", torch.__version__, "on", torch.cuda.get_device_name(0))
PY
# Hypothesis' ci profile (500 examples, derandomized) for the decision-equality test
CI=true timeout 150 python -m pytest -o "addopts=-p no:benchmark" -m gpu -p no:cacheprovider -q -rs --durations=10 \
    tests/test_fastpath_differential.py tests/test_fastpath_models.py tests/test_fastpath_statistical.py \
    tests/test_fastpath_static.py 2>&1 | tee "$out/gpu_tests.txt" || echo "(pytest exited $?: see gpu_tests.txt)"
timeout 45 python bench/gpu_profile.py 2>&1 | tee "$out/gpu_profile.txt" || echo "(the profile exited $?)"
timeout 270 rheo bench fastpath --device cuda --json 2> >(tee "$out/bench_progress.txt" >&2) | tee "$out/bench_fastpath_cuda.json" \
    || echo "(rheo bench fastpath exited $?: a target missed, see the JSON)"
timeout 90 rheo gate --impl rheo.integrations.fastpath_protocol:Fastpath --json 2> >(tee "$out/gate_progress.txt" >&2) \
    | tee "$out/gate_batched_cuda.json" || echo "(rheo gate exited $?: see the JSON)"
