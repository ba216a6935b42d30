"""Triton kernels under the interpreter, as the gate runs them (rheo.checks.protocol.triton_interpreter):
an autotuned kernel runs one config instead of failing on "0 active drivers", and an integer
load mask is read as the compiled kernel reads it, instead of "mask has unsupported dtype".
Needs Triton: the default suite skips it, the engines' venv (.ci/engines) runs it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

# not imported here: Triton imported into the test process without TRITON_INTERPRET=1 would
# stop rheo.integrations.vllm from loading in the tests that follow (.ci/engines runs both)
if importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
    pytest.skip("needs Triton and torch (.ci/engines has them)", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent

KERNELS = """
import os, torch, triton, triton.language as tl
from rheo.checks.protocol import triton_interpreter

@triton.autotune(configs=[triton.Config({"BLOCK": 4}), triton.Config({"BLOCK": 8})], key=["n"])
@triton.jit
def add_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask, other=0.0) + 1, mask=mask)

@triton.jit
def int_mask(x_ptr, m_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = tl.load(m_ptr + offs)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m, other=-1.0))  # an int64 load mask

def run():
    x, out = torch.arange(4, dtype=torch.float32), torch.zeros(4)
    add_one[(1,)](x, out, 4)
    masked = torch.full((4,), 9.0)
    int_mask[(1,)](x, torch.tensor([1, 0, 2, 0]), masked, BLOCK=4)
    return out.tolist(), masked.tolist()

PATCH = os.environ.get("PATCH") == "1"
if PATCH:
    assert triton_interpreter.patch()
try:
    print(run())
except Exception as e:
    print("ERROR", type(e).__name__, e)
"""


def _run(patch: bool, **env: str) -> str:
    import os

    full = {**os.environ, "TRITON_INTERPRET": "1", "PATCH": "1" if patch else "0", **env}
    r = subprocess.run([sys.executable, "-c", KERNELS], capture_output=True, text=True, env=full, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip().splitlines()[-1]


def test_without_the_patch_the_interpreter_fails_on_autotune():
    assert _run(False).startswith("ERROR") and "driver" in _run(False)


def test_with_the_patch_autotune_picks_one_config_and_integer_masks_read_nonzero():
    assert _run(True) == "([1.0, 2.0, 3.0, 4.0], [0.0, -1.0, 2.0, -1.0])"
    assert _run(True, RHEO_TRITON_CONFIG="1") == "([1.0, 2.0, 3.0, 4.0], [0.0, -1.0, 2.0, -1.0])"


def test_a_config_index_out_of_range_is_named():
    out = _run(True, RHEO_TRITON_CONFIG="5")
    assert "RHEO_TRITON_CONFIG=5: this kernel has 2 autotune configs" in out, out


def test_patch_does_nothing_without_the_interpreter():
    code = "from rheo.checks.protocol import triton_interpreter as t; print(t.patch())"
    import os

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.stdout.strip() == "False", r.stderr
