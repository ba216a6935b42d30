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
# slow step cannot eat the lease; each step's time and exit status go to steps.txt. Results go
# to $OUT (or ./gpu-results) as well as stdout.
#   bash bench/gpu_check.sh --cpu   rehearses the same steps on the CPU (no device needed): the
# gpu tests' CPU twins (the capture test has none), the profile of the CycleGraph's CPU mode,
# `rheo bench fastpath --quick` and the gate on the CPU, each under three times its cap, with
# the package as installed (no pip). It checks the script end to end; its times are the CPU's,
# not the device's (tests/test_gpu_check.py runs it in the extended step).
set -euo pipefail
cd "$(dirname "$0")/.."
device=cuda scale=1 tests_select=(-m gpu) bench_size=()
case "${1:-}" in
"") ;;
--cpu) # the rehearsal: the same steps on the CPU (the gpu tests' CPU twins, the quick benchmark)
    device=cpu scale=3 tests_select=(-m "not gpu and not deep and not extended" -k cpu) bench_size=(--quick) ;;
*)
    echo "usage: bash bench/gpu_check.sh [--cpu]   (--cpu: rehearse every step on the CPU)" >&2
    exit 2
    ;;
esac
out="${OUT:-gpu-results}"
mkdir -p "$out"
step() { # step NAME CAP_SECONDS COMMAND...: run it under its cap (times scale on the CPU), time it
    local name=$1 cap=$(($2 * scale)) t0=$SECONDS rc=0
    shift 2
    timeout "$cap" "$@" || rc=$?
    echo "step $name: $((SECONDS - t0)) s (cap $cap s), exit $rc" | tee -a "$out/steps.txt" >&2
    [ "$rc" = 0 ] || { failed="$failed $name" && echo "($name exited $rc: see its file in $out)" >&2; }
}
failed=""
: >"$out/steps.txt"
[ "$device" = cpu ] || python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null # the rehearsal's is installed
RHEO_CHECK_DEVICE=$device python - <<'PY' | tee "$out/device.txt"
import os
import torch
if os.environ["RHEO_CHECK_DEVICE"] == "cuda":
    assert torch.cuda.is_available(), "no CUDA device: this script is for the GPU machine (--cpu rehearses it here)"
    print("torch", torch.__version__, "on", torch.cuda.get_device_name(0))
else:
    print("torch", torch.__version__, "on the CPU,", torch.get_num_threads(), "threads: a rehearsal")
PY
# Hypothesis' ci profile (500 examples, derandomized) for the decision-equality test
step tests 150 env CI=true python -m pytest -o "addopts=-p no:benchmark" "${tests_select[@]}" -p no:cacheprovider -q -rs \
    --durations=10 tests/test_fastpath_differential.py tests/test_fastpath_models.py tests/test_fastpath_statistical.py \
    tests/test_fastpath_static.py > >(tee "$out/gpu_tests.txt") 2>&1
step profile 45 python bench/gpu_profile.py --device "$device" > >(tee "$out/gpu_profile.txt") 2>&1
step bench 270 rheo bench fastpath --device "$device" "${bench_size[@]}" --json \
    2> >(tee "$out/bench_progress.txt" >&2) > >(tee "$out/bench_fastpath_$device.json")
step gate 90 rheo gate --impl rheo.integrations.fastpath_protocol:Fastpath --json \
    2> >(tee "$out/gate_progress.txt" >&2) > >(tee "$out/gate_batched_$device.json")
wait # the gate's JSON tee: bash waits for the last process substitution (the earlier tees had the later steps' time to finish)
echo "steps (also in $out/steps.txt):" >&2
cat "$out/steps.txt" >&2
# exit 1 when a step failed (a missed target or a capture finding is the bench's exit 1)
[ -z "$failed" ] || { echo "failed:$failed" >&2 && exit 1; }
