"""``rheo gate --ray``: the exact-matrix instances, the exact-certification cases and the
statistical shards run as Ray tasks on a local Ray instance, and every verdict and every
number in it is the serial run's (rheo.checks.parallel: each shard carries its own seed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from rheo.checks import parallel  # noqa: E402
from rheo.checks.cases.matrix import impl_matrix  # noqa: E402
from rheo.checks.exact.check import check_exact  # noqa: E402
from rheo.checks.gate.reference_checks import exact_matrix_check  # noqa: E402
from rheo.checks.outcome import PROFILES  # noqa: E402
from rheo.checks.protocol.load import load_implementation  # noqa: E402
from rheo.checks.statistics.output_law import check_output_law  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def on_ray():
    executor = parallel.RayTasks("local")
    yield executor
    executor.close()


def _pid() -> int:
    return os.getpid()


def _without_times(value):
    """An outcome's data and detail with the wall-clock figures taken out (they differ)."""
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if k not in ("seconds", "cycles_per_second")}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def _both(on_ray, run):
    """``run()`` serially, then with the pieces on Ray."""
    parallel.use(parallel.Serial())
    serial = run()
    parallel.use(on_ray)
    try:
        distributed = run()
    finally:
        parallel.use(parallel.Serial())
    return serial, distributed


def test_the_pieces_run_in_ray_workers(on_ray):
    assert os.getpid() not in set(on_ray.map(_pid, [()] * 4))


def test_merged_verdicts_are_the_serial_run_s(on_ray, monkeypatch):
    """The exact matrix, exact certification of an implementation and its output law
    (several shards per case: 5,000 cycles in shards of 2,000)."""
    monkeypatch.setattr(parallel, "SHARD_CYCLES", 2_000)
    smoke = PROFILES["smoke"]
    impl = load_implementation("examples.loop_impl:LoopImplementation")
    runs = {
        "exact matrix": lambda: exact_matrix_check("topk").run(smoke, None),
        "exact certification": lambda: check_exact(impl, impl_matrix("smoke")[:6]),
        "output law": lambda: check_output_law(impl, 5_000, level="smoke"),
    }
    for name, run in runs.items():
        serial, distributed = _both(on_ray, run)
        assert serial.verdict == distributed.verdict == "pass", (name, distributed.detail)
        assert _without_times(serial.data) == _without_times(distributed.data), name
    assert serial.data["cycles"] == 5_000 and parallel.shards(5_000, parallel.SHARD_CYCLES) == [2_000, 2_000, 1_000]


def test_batched_shards_are_the_serial_run_s(on_ray):
    pytest.importorskip("torch")
    from rheo.checks.protocol.load import Implementation
    from rheo.checks.statistics.batched import check_output_law_batched
    from rheo.integrations.fastpath_protocol import Fastpath

    impl = Implementation(Fastpath(), "rheo.integrations.fastpath_protocol:Fastpath")
    serial, distributed = _both(on_ray, lambda: check_output_law_batched(impl, 30_000, level="smoke", batch=10_000))
    assert serial.passed and _without_times(serial.data) == _without_times(distributed.data)


def test_rheo_gate_ray_on_a_local_instance_gives_the_serial_verdicts():
    def gate(*extra):
        r = subprocess.run(
            [sys.executable, "-m", "rheo.cli", "gate", "--profile", "smoke", "--only", "output law ("]
            + ["--impl", "examples.loop_impl:LoopImplementation", "--json", *extra],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout), r.stderr

    distributed, log = gate("--ray")
    serial, _ = gate()
    assert "the pieces of work run on Ray (local" in log
    assert [c["verdict"] for c in distributed["checks"]] == [c["verdict"] for c in serial["checks"]] == ["pass"]
    assert _without_times(distributed["checks"][0]["data"]) == _without_times(serial["checks"][0]["data"])


def test_an_address_that_answers_nothing_is_bad_input():
    r = subprocess.run(
        [sys.executable, "-m", "rheo.cli", "gate", "--ray", "127.0.0.1:1", "--only", "exact: topk"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and lines[-1].startswith("rheo: error: --ray 127.0.0.1:1: cannot connect"), r.stderr
