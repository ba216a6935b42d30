"""``bench/gpu_check.sh``, the one call a lent GPU machine runs (docs/tests.md), rehearsed on
the CPU (``--cpu``): the same four steps end to end, so that a broken step shows here and
not in the device's few minutes."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "gpu_check.sh"


def _run(*args: str, out: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    # this interpreter's `python` and `rheo` first, as the script calls them by name
    env = {**os.environ, "OUT": str(out), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_an_unknown_argument_is_refused_with_the_usage(tmp_path):
    done = _run("--gpu", out=tmp_path, timeout=60)
    assert done.returncode == 2
    assert "usage: bash bench/gpu_check.sh [--cpu]" in done.stderr
    assert not any(tmp_path.iterdir())  # refused before any step


@pytest.mark.extended
def test_the_cpu_rehearsal_runs_every_step(tmp_path):
    done = _run("--cpu", out=tmp_path, timeout=1800)
    steps = dict(line.split(": ", 1) for line in (tmp_path / "steps.txt").read_text().splitlines())
    assert list(steps) == ["step tests", "step profile", "step bench", "step gate"], done.stderr[-3000:]
    for name in ("step tests", "step profile", "step gate"):
        assert steps[name].endswith("exit 0"), (name, steps[name], done.stderr[-3000:])
    # the bench exits 1 on a missed timing target, which a busy CI machine may cause; what it
    # must show is that it ran every part without a capture finding
    assert steps["step bench"].endswith(("exit 0", "exit 1")), steps["step bench"]
    bench = json.loads((tmp_path / "bench_fastpath_cpu.json").read_text())
    assert bench["device"] == "cpu" and bench["capture_findings"] == []
    assert bench["captured_equals_eager"] is True and set(bench["batches"]) == {"1", "16"}
    assert json.loads((tmp_path / "gate_batched_cpu.json").read_text())["passed"] is True
    tests = (tmp_path / "gpu_tests.txt").read_text()  # the gpu tests' CPU twins
    assert re.search(r"\b\d+ passed", tests) and not re.search(r"\b\d+ (failed|errors?)\b", tests), tests[-2000:]
    profile = (tmp_path / "gpu_profile.txt").read_text()
    assert "== eager cycle (default path)" in profile and "== CycleGraph runs (mode eager)" in profile
    assert done.returncode == (0 if steps["step bench"].endswith("exit 0") else 1)
