"""Running the gate's checks: each check's outcome becomes a ``CheckResult`` (its
counterexample written as a file), and the gate's verdict over them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import time
from pathlib import Path

from rheo.checks.gate.pictures import write_counterexample_picture
from rheo.checks.outcome import Check, CheckResult, Outcome, Profile, Progress

INSTALL_TORCH = 'pip install "rheosampling[torch]"'


def search_seed(profile: Profile) -> int | None:
    """Searches are reproducible (seed 0) in quick and fresh (a new seed, reported) in deep."""
    return None if profile.fresh_random else 0


def torch_missing() -> Outcome | None:
    if importlib.util.find_spec("torch") is None:
        return Outcome("skip", f"torch is not installed: {INSTALL_TORCH}")
    return None


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def impl_stem(spec: str) -> tuple[str, str | None]:
    """The counterexample files' stem for ``--impl spec``, and the resolved file it names
    (None for ``module:Object``). A file gives its stem and the object, never its folders
    (so a temporary folder does not end up in the name); a module keeps its dotted name.

    >>> impl_stem("examples.loop_impl:LoopImplementation")
    ('examples-loop-impl-loopimplementation', None)
    >>> impl_stem("/tmp/tmp3ugvt/mine/chain_verifiers.py:ChainVerifierBuggy")[0]
    'chain-verifiers-chainverifierbuggy'
    """
    module, _, obj = spec.rpartition(":")
    if not module.endswith(".py"):
        return slug(spec), None
    return slug(f"{Path(module).stem}-{obj}"), str(Path(module).resolve())


def _target(out_dir: Path, stem: str, owner: str | None) -> Path:
    """``OUT/<stem>.json``; when that file holds another implementation file's
    counterexample (two files with the same name and object), the stem gets a short hash of
    this file's resolved path, so neither overwrites the other."""
    target = out_dir / f"{stem}.json"
    if owner is None or not target.exists():
        return target
    try:
        held = json.loads(target.read_text(encoding="utf-8")).get("implementation_file")
    except (OSError, ValueError, AttributeError):
        held = None
    if held in (None, owner):
        return target
    return out_dir / f"{stem}-{hashlib.blake2b(owner.encode(), digest_size=3).hexdigest()}.json"


def run_checks(
    checks: list[Check],
    profile: Profile,
    out_dir: Path,
    progress: Progress | None = None,
    inner: Progress | None = None,
) -> list[CheckResult]:
    """Run ``checks``; ``progress`` hears a line as each starts and ends, ``inner`` (default:
    ``progress``) the progress lines from inside each check."""
    inner = inner or progress
    results = []
    for i, check in enumerate(checks, 1):
        if progress:
            progress(f"[{i}/{len(checks)}] {check.name} ...")
        t0 = time.perf_counter()
        try:
            outcome = (check.needs_torch and torch_missing()) or check.run(profile, inner)
        except Exception as e:  # a crash inside a check is a failed check, with its message
            outcome = Outcome("fail", f"the check crashed: {type(e).__name__}: {e}")
        seconds = time.perf_counter() - t0
        path = picture = None
        if outcome.counterexample is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            payload = outcome.counterexample
            if check.owner is not None:
                payload = {**payload, "implementation_file": check.owner}
            target = _target(out_dir, check.file_stem or slug(check.name), check.owner)
            target.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
            path = str(target)
            picture = _picture(payload, target, inner)
        results.append(
            CheckResult(check.name, check.group, outcome.verdict, seconds, outcome.detail, path, outcome.data, picture)
        )
        if progress:
            progress(f"      {outcome.verdict} ({seconds:.1f} s)")
    return results


def _picture(payload: dict, target: Path, progress: Progress | None) -> str | None:
    """``<counterexample>.png`` beside the file, for the findings a picture shows (the worst
    sequences of an output law or an exact certificate, with a draft tree where there is
    one); None without matplotlib or for other findings. Drawing never fails a check: a
    picture that cannot be drawn is left out, and ``progress`` hears why."""
    try:
        written = write_counterexample_picture(payload, target.with_suffix(".png"))
    except Exception as e:  # the finding stands without its picture
        if progress:
            progress(f"      picture not drawn: {type(e).__name__}: {e}")
        return None
    return None if written is None else str(written)


def summary(results: list[CheckResult]) -> dict:
    """Counts of each verdict, the seconds, and ``thin_evidence``: the passing statistical checks
    whose detectable TV is above rheo.checks.statistics.output_law.THIN_TV (name -> that TV)."""
    counts = {v: sum(r.verdict == v for r in results) for v in ("pass", "fail", "skip")}
    thin = {
        r.name: r.data["thin_evidence"]["detectable_tv"]
        for r in results
        if r.verdict == "pass" and r.data.get("thin_evidence")
    }
    return {**counts, "seconds": round(sum(r.seconds for r in results), 1), "thin_evidence": thin}


NOTHING_CHECKED = "every check was skipped: nothing is proven"


def gate_verdict(results: list[CheckResult], strict: bool = False) -> tuple[bool, str | None]:
    """(passed, why not): a failed check, a skip under --strict, or every check skipped
    (a gate that checked nothing does not pass)."""
    s = summary(results)
    if s["fail"]:
        return False, f"{s['fail']} check{'s' if s['fail'] > 1 else ''} failed"
    if results and s["skip"] == len(results):
        return False, NOTHING_CHECKED
    if strict and s["skip"]:
        return False, "a check was skipped and --strict is set"
    return True, None
