"""The gate's implementation checks in a supervised worker (``rheo gate --impl`` and
``--replay``): the jobs a worker runs (``run_job``, ``replay_job``: loaded by name in the
worker's fresh interpreter) and the gate's side that starts workers, collects their results
and turns a worker that died into a finding on the check that was running
(``rheo.checks.protocol.worker`` supervises the process).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rheo.checks.differential.decision_equality import replay
from rheo.checks.exact.check import replay_exact
from rheo.checks.exact.generation import GENERATION_CHECK, certify_generation
from rheo.checks.gate.checklist import impl_checks, only_note, select_only
from rheo.checks.gate.run import run_checks
from rheo.checks.outcome import CheckResult, Profile, Progress
from rheo.checks.protocol.worker import Limits, LoadFailed, session

RUNNER = "rheo.checks.gate.supervised:run_job"
REPLAYER = "rheo.checks.gate.supervised:replay_job"


def replay_job(conn: Any, impl: Any, job: dict) -> None:
    """In the worker: rerun one saved counterexample and send its answer."""
    try:
        answer = _replay(impl, job["path"])
    except (KeyError, ValueError, TypeError) as e:
        conn.send(("bad_replay", f"{type(e).__name__}: {e}"))
        return
    conn.send(("replay", *answer))


def _replay(impl: Any, path: str) -> tuple[dict, str, int]:
    """(JSON answer, text answer, exit status) of ``--replay`` (rheo.cli.gate prints them)."""
    saved = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(saved, dict) and saved.get("check") == "exact certification":
        cert = replay_exact(impl, saved)
        passed = cert.verdict == "lossless"
        return {"passed": passed, "check": "exact certification", **cert.to_json()}, cert.summary(), 0 if passed else 1
    if isinstance(saved, dict) and saved.get("check") == GENERATION_CHECK:
        cert = certify_generation(impl, saved["case"])
        passed = cert.verdict == "lossless"
        return {"passed": passed, "check": GENERATION_CHECK, **cert.to_json()}, cert.summary(), 0 if passed else 1
    cmp = replay(impl, path)
    out = {
        "status": cmp.check.status,
        "detail": cmp.check.detail,
        "reference": cmp.reference,
        "implementation": cmp.implementation,
    }
    text = f"{cmp.check.status}: {cmp.check.detail or 'same decisions'}"
    return out, text, 1 if cmp.check.status == "differs" else 0


def run_job(conn: Any, impl: Any, job: dict) -> None:
    """In the worker: run the implementation checks one by one, sending each result."""
    checks = impl_checks(impl, job["extra_cases"])
    if job["only"]:
        matched, how = select_only([c.name for c in checks], job["only"])
        if not matched:
            conn.send(("nothing_matched", [c.name for c in checks]))
            return
        if how == "substring" and job["start"] == 0:  # said once, not again after a restart
            conn.send(("progress", only_note(job["only"], matched)))
        checks = [c for c in checks if c.name in matched]
    conn.send(("checks", [c.name for c in checks]))
    for i, check in enumerate(checks):
        if i < job["start"]:
            continue
        conn.send(("start", i))
        [result] = run_checks(
            [check], job["profile"], Path(job["out_dir"]), inner=lambda line: conn.send(("progress", line))
        )
        conn.send(("result", i, asdict(result)))


@dataclass
class Run:
    results: list[CheckResult]
    provides: str


def run_impl_checks(
    spec: str,
    extra_cases: list[dict] | None,
    profile: Profile,
    only: str | None,
    out_dir: Path,
    limits: Limits,
    progress: Progress | None = None,
    ray: str | None = None,
) -> Run:
    """The implementation checks of ``spec``, each run in a supervised worker (see the
    module docstring). Raises LoadFailed or NothingMatched (bad input)."""
    deadline = time.monotonic() + limits.timeout if limits.timeout else None
    results: dict[int, CheckResult] = {}
    start, names, provides = 0, None, ""
    while True:
        job = {
            "runner": RUNNER,
            "spec": spec,
            "extra_cases": extra_cases,
            "only": only,
            "profile": profile,
            "out_dir": str(out_dir),
            "start": start,
            "cwd": os.getcwd(),
            "ray": ray,
        }
        t0 = time.monotonic()
        s = session(job, limits, deadline, results, progress)
        names, provides = s.names or names, s.provides or provides
        if s.finding is None:
            break
        if names is None:  # it died before it listed its checks: nothing else can run
            raise LoadFailed(f"--impl {spec}: {s.finding}")
        index = s.current if s.current is not None else len(results)
        if index < len(names):
            results[index] = CheckResult(names[index], "implementation", "fail", time.monotonic() - t0, s.finding)
            if progress:
                progress(f"      fail: {s.finding}")
        start = index + 1
        if start >= len(names):
            break
        if deadline is not None and time.monotonic() > deadline:
            for i in range(start, len(names)):
                results[i] = CheckResult(
                    names[i], "implementation", "fail", 0.0, "not run: the whole run reached --timeout"
                )
            break
    return Run([results[i] for i in sorted(results)], provides)


def run_replay(spec: str, path: str, limits: Limits) -> tuple[dict, str, int]:
    """``--replay`` in a supervised worker: (JSON answer, text answer, exit status). A
    finding (an exit, a timeout) gives exit status 1 and says so."""
    job = {"runner": REPLAYER, "spec": spec, "path": str(Path(path).resolve()), "cwd": os.getcwd()}
    deadline = time.monotonic() + limits.timeout if limits.timeout else None
    s = session(job, limits, deadline, {}, None)
    if s.finding is not None:
        return {"status": "differs", "detail": s.finding}, f"differs: {s.finding}", 1
    assert s.replay is not None  # a session that ended without a finding sent its answer
    out, text, code = s.replay
    return out, text, code
