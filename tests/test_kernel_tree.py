"""The batched sampled tree through a Triton kernel under the interpreter
(examples/kernel_tree.py: its Gumbel keys computed by a kernel that reads the uniforms'
storage). The symbolic tracer cannot follow random values into a kernel, so exact
certification follows it through concrete draws, each evaluation a kernel call. What each
test would catch:

- a kernel sampler certified lossless exactly, in float32, with no ``exact_tolerance``, on
  the cases concrete draws can read: a concrete race that misread a token's weight (the
  heaviest draft given weight 0 where a rejected first child hid the swap) called it lossy;
- the gate's exact check on it within a budget certifies what it can and says how many
  cases it certified and why it stopped on the others (not reached, outgrown, or a draw
  it cannot follow, each named): never silent, never a verdict on a guess.

Needs Triton (the field environment has it: ``.ci/field`` runs this file); the default
suite skips it.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

if importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
    pytest.skip("needs Triton and torch (.ci/field has them)", allow_module_level=True)

os.environ.setdefault("TRITON_INTERPRET", "1")

from rheo.checks.exact.certify import certify_implementation
from rheo.checks.exact.check import check_exact
from rheo.checks.gate.coverage import supported_cases
from rheo.checks.protocol.load import load_implementation

IMPL = "examples.kernel_tree:KernelSampledTree"
# the interpreter computes the kernel with NumPy: log(0) for a token of probability 0 (a key of
# -inf, as on a GPU) warns there, and this suite makes warnings errors
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")


def _cases(impl, depth: int) -> list[dict]:
    return [c for c in supported_cases(impl, "exact", "quick").cases if c["depth"] == depth]


def test_the_kernel_sampler_is_certified_lossless_through_concrete_draws():
    impl = load_implementation(IMPL)
    for case in _cases(impl, 1)[:2]:
        cert = certify_implementation(impl, case)
        assert cert.verdict == "lossless" and cert.draws == "concrete", cert.summary()
        assert cert.tolerance == 1e-6 and cert.tolerance_from.startswith("float32"), cert.summary()


def test_the_exact_check_on_the_kernel_says_what_it_certified_and_why_it_stopped():
    impl = load_implementation(IMPL)
    cases = _cases(impl, 1)[:2] + _cases(impl, 2)[:2]
    out = check_exact(impl, cases, budget=60.0)
    assert out.verdict in ("pass", "skip"), out.detail  # never a finding on this lossless design
    data = out.data
    certified = data["certified"]
    stopped = len(data.get("budget", {}).get("not_reached", [])) + len(data.get("outgrown", {}))
    refused = [c for c in data["cases"] if c["verdict"] == "unsupported"]
    assert certified >= 2, out.detail
    assert certified + stopped + len(refused) == len(cases), data
    if out.verdict == "pass":
        assert f"lossless (exact) on {certified} cases" in out.detail
    for row in refused:
        assert "torch.rand at" in row["detail"], row  # the draw it could not follow, named
