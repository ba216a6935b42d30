"""Field adapters (examples/field/, docs/field.md): four third-party speculative-decoding libraries
judged by `rheo gate --impl`, one test per adapter, at a small size.

Each test runs the gate's CLI on the adapter (`--json`, a subprocess: the adapters set
TRITON_INTERPRET and import torch-heavy libraries) on the case files in examples/field/cases*
(`--cases DIR --cases-only`), and asserts the verdict the quick gate gave in docs/field.md: a pass
for the lossless ones, exit 1 with a "not lossless" finding for the lossy ones. The libraries are not
project dependencies: every test skips without its library (examples/field/requirements.txt lists
the versions judged). The quick-profile confirmations are marked deep.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAIN = "examples/field/cases"
TREE = "examples/field/cases_tree"


def gate(impl: str, *args: str, timeout: float = 170) -> tuple[int, dict]:
    cmd = [sys.executable, "-m", "rheo.cli", "gate", "--impl", impl, "--json", *args]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


EXACT = "impl: exact certification"
GREEDY = "examples/field/cases_greedy"
KERNEL = "examples/field/cases_kernel"  # one small case: the one the quick gate found the sliced kernel lossy on

# (library to import, adapter, case directory, lossless?) -- the verdicts of docs/field.md
ADAPTERS = [
    ("flashspec", "field_flashspec.py:RejectionStep", CHAIN, True),
    ("flashspec", "field_flashspec.py:RejectionSample", CHAIN, True),
    ("flashspec", "field_flashspec.py:RejectionStepOnehot", CHAIN, True),
    ("flashspec", "field_flashspec.py:VerifyTokensReference", CHAIN, True),
    ("triton", "field_flashspec.py:VerifyTokensTriton", KERNEL, True),
    ("triton", "field_flashspec.py:VerifyTokensTritonSliced", KERNEL, False),
    ("flashspec", "field_flashspec.py:TypicalSample", CHAIN, False),
    ("flashspec", "field_flashspec.py:GreedyStep", GREEDY, True),
    ("mini_infer", "field_mini_infer.py:SpeculativeStep", CHAIN, True),
    ("seqspecdecod", "field_seqspecdecod.py:StandardStep", CHAIN, True),
    ("seqspecdecod", "field_seqspecdecod.py:NaiveHSDStep", CHAIN, True),
    ("seqspecdecod", "field_seqspecdecod.py:CappedHSDStep", CHAIN, False),
    ("economize", "field_economize.py:RejectionVerify", CHAIN, True),
    ("economize", "field_economize.py:RejectionVerifyBatch", CHAIN, True),
    ("economize", "field_economize.py:RejectionVerifyTree", TREE, True),
    ("economize", "field_economize.py:TypicalVerify", CHAIN, False),
    ("economize", "field_economize.py:GreedyVerifyTree", GREEDY, True),
]
IDS = [impl.split(":")[1] for _, impl, _, _ in ADAPTERS]


def verdict(rc: int, report: dict, lossless: bool) -> None:
    (check,) = [c for c in report["checks"] if c["name"].startswith(EXACT)]
    if lossless:
        assert rc == 0 and check["verdict"] == "pass", check
        assert check["detail"].startswith("lossless (exact)"), check["detail"]
    else:
        assert rc == 1 and check["verdict"] == "fail", check
        assert check["detail"].startswith("not lossless (exact)"), check["detail"]


@pytest.mark.parametrize(("library", "impl", "cases", "lossless"), ADAPTERS, ids=IDS)
def test_field_adapter_exact_on_its_cases(library, impl, cases, lossless, tmp_path):
    """Exact certification on the adapter's case files alone: a proof on those cases, in seconds."""
    pytest.importorskip(library)
    rc, report = gate(
        f"examples/field/{impl}", "--cases", cases, "--cases-only", "--only", EXACT, "--out", str(tmp_path)
    )
    verdict(rc, report, lossless)


@pytest.mark.deep
@pytest.mark.parametrize(("library", "impl", "cases", "lossless"), ADAPTERS, ids=IDS)
def test_field_adapter_quick_gate(library, impl, cases, lossless, tmp_path):
    """The whole quick gate (drawn cases, Hypothesis search, output laws), as docs/field.md ran it."""
    pytest.importorskip(library)
    rc, report = gate(f"examples/field/{impl}", "--time-budget", "30", "--out", str(tmp_path), timeout=1800)
    assert rc == (0 if lossless else 1), json.dumps(report)[:3000]
    if not lossless:
        assert any("not lossless" in c["detail"] for c in report["checks"] if c["verdict"] == "fail")


MIXED = "impl: mixed batches"


@pytest.mark.parametrize(
    ("impl", "lossless"),
    [("field_flashspec.py:VerifyTokensTritonMixed", True), ("field_flashspec.py:VerifyTokensTritonSlicedMixed", False)],
    ids=["contiguous", "sliced"],
)
def test_a_mixed_batch_catches_the_sliced_kernel_without_picking_a_row(impl, lossless, tmp_path):
    """The sliced-view kernel call on a batch of different requests (docs/field.md, defect 2):
    a request alone sits in row 0 and is certified lossless; the gate's mixed batches put a
    request in row 1, and exact certification of the batch names it."""
    pytest.importorskip("triton")
    pytest.importorskip("flashspec")
    rc, report = gate(f"examples/field/{impl}", "--profile", "smoke", "--only", MIXED, "--out", str(tmp_path))
    (check,) = [c for c in report["checks"] if c["name"].startswith(MIXED)]
    if lossless:
        assert rc == 0 and check["verdict"] == "pass", check
        return
    assert rc == 1 and check["verdict"] == "fail" and "row 1" in check["detail"] and "exact" in check["detail"], check
    rc, report = gate(
        f"examples/field/{impl}", "--cases", KERNEL, "--cases-only", "--only", EXACT, "--out", str(tmp_path / "alone")
    )
    verdict(rc, report, lossless=True)  # one request a call: row 0, read right
