"""Run each survivor of a finished ``bench/mutants.sh`` run against the tests as they are now.

    python bench/recheck_survivors.py WORKDIR [--tests tests/test_x.py ...] [--out rechecked.json]

A mutmut run tests every mutant against the tests of the moment it started; tests added
while it ran (or after) are not in its verdicts, and rerunning mutmut with changed tests
starts it over (it resets every result when the tests change). This takes the survivors
(``survived`` and ``no tests``, less messages and listed equivalents: bench/mutation_score.py)
from WORKDIR/repo/mutants, copies that folder once, copies the working tree's tests/ and
proofs_tests/ over the copy's, and runs pytest there once per survivor with the mutant
switched on (mutmut's trampolines read ``MUTANT_UNDER_TEST``). A failing test kills it, and
so does a run past ``--timeout`` seconds (default 10x the clean run, at least 120 s), as
mutmut counts a timeout.

It writes ``{mutant name: {"killed": bool, "by": first failing test or null}}`` to ``--out``
(default WORKDIR/rechecked.json), which ``bench/mutation_score.py --rechecked`` counts and
``bench/mutation_ledger.py save`` keeps; survivors rechecked in any WORKDIR/rechecked*.json
(rechecked-ledger.json: earlier sessions', from the ledger) are skipped. ``--tests`` defaults to
the selection of bench/mutants.sh for the engine the mutant is in, without ``-k``: the recheck
runs each test file whole, the files changed since the run first. ``--only`` rechecks the
survivors matching a pattern (with ``--tests``, the tests written for them: a kill is a kill
whatever else was left out; a recheck that keeps a survivor alive is recorded, and can be redone
with more tests after deleting its entry).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def selection(engine: str) -> list[str]:
    """The test selection bench/mutants.sh gives ``engine`` (its bash array, read from the script)."""
    text = (ROOT / "bench" / "mutants.sh").read_text()
    body = re.search(rf"^{engine}_tests=\((.*?)^\)", text, re.S | re.M)
    if body is None:
        raise SystemExit(f"bench/recheck_survivors.py: no {engine}_tests=(...) in bench/mutants.sh")
    return body.group(1).split()


def _engine(mutant: str) -> str:
    return "fastpath" if ".fastpath." in mutant else "reference"


def ordered(tests: list[str], since: float) -> list[str]:
    """The test files (or node ids, FILE::TEST), those changed since the run (the likely
    killers) first, then the rest, folders last (proofs_tests: the slowest); with -x the
    first failure ends the run."""
    files: list[str] = []
    for t in tests:
        path = ROOT / t
        files += sorted(str(p.relative_to(ROOT)) for p in path.rglob("test_*.py")) if path.is_dir() else [t]
    changed = {f: (ROOT / f.partition("::")[0]).stat().st_mtime > since for f in files}
    return sorted(files, key=lambda f: (not changed[f], f.startswith("proofs_tests")))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir", type=Path, help="the MUTANTS_WORKDIR of a finished bench/mutants.sh run")
    ap.add_argument("--tests", nargs="+", help="test files or folders (default: bench/mutants.sh's selection)")
    ap.add_argument("--only", nargs="+", metavar="PATTERN", help="survivors whose name matches (fnmatch)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument(
        "--timeout",
        type=float,
        help="seconds per survivor before its run is killed, a kill (default: 10x the clean run, at least 120)",
    )
    args = ap.parse_args(argv)
    mutants = args.workdir / "repo" / "mutants"
    if not (mutants / "mutmut-stats.json").exists():
        print(
            f"bench/recheck_survivors.py: {mutants} holds no mutmut run (run bench/mutants.sh first)", file=sys.stderr
        )
        return 2
    out_path = args.out or args.workdir / "rechecked.json"
    since = (mutants / "mutmut-stats.json").stat().st_mtime

    import mutation_score  # bench/mutation_score.py: the same classification as the score

    cwd = Path.cwd()
    os.chdir(args.workdir / "repo")
    try:
        survivors = mutation_score.survivors(ROOT / "bench" / "equivalent_mutants.txt")
    finally:
        os.chdir(cwd)
    done: dict[str, dict[str, object]] = json.loads(out_path.read_text()) if out_path.exists() else {}
    before = dict(done)
    for other in sorted(args.workdir.glob("rechecked*.json")):  # rechecked-ledger.json: earlier sessions'
        before.update(json.loads(other.read_text()))
    todo = [
        name
        for name, _ in survivors
        if name not in before and (not args.only or any(fnmatch.fnmatch(name, p) for p in args.only))
    ]
    print(f"{len(survivors)} survivors, {len(todo)} to recheck ({len(before)} rechecked before)", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="rheo-recheck-") as tmp:
        copy = Path(tmp) / "mutants"
        shutil.copytree(mutants, copy)
        for folder in ("tests", "proofs_tests"):
            shutil.rmtree(copy / folder, ignore_errors=True)
            shutil.copytree(ROOT / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
        env = {**os.environ, "PYTHONPATH": str(copy / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("CI", None)
        # the "mutants" Hypothesis profile (derandomized, no shrinking), where the run's tree has it
        if '"mutants"' in (copy / "src/rheo/checks/cases/profiles.py").read_text():
            env.setdefault("HYPOTHESIS_PROFILE", "mutants")

        limit: float | None = args.timeout  # else set from the clean run below

        def pytest(tests: list[str], mutant: str) -> tuple[bool, str | None]:
            """(failed, the first failing test) with ``mutant`` switched on ("": none); a run
            past ``limit`` seconds is killed and counts as a kill, as mutmut counts a timeout."""
            try:
                run = subprocess.run(
                    [args.python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                    cwd=copy,
                    env={**env, "MUTANT_UNDER_TEST": mutant},
                    capture_output=True,
                    text=True,
                    timeout=limit,
                )
            except subprocess.TimeoutExpired:
                return True, f"timeout (over {limit:.0f} s)"
            failed = re.search(r"^FAILED (\S+)", run.stdout, re.M)
            errored = re.search(r"^ERROR (\S+)", run.stdout, re.M)
            by = failed.group(1) if failed else errored.group(1) if errored else None
            return run.returncode != 0, by or (f"pytest exit {run.returncode}" if run.returncode else None)

        # the current tests must pass on the run's own code (no mutant): a test written for code
        # changed since the run fails there, and every recheck would count a false kill
        clean = sorted({t for name in todo for t in ordered(args.tests or selection(_engine(name)), since)})
        if clean:
            t0 = time.perf_counter()
            failed, by = pytest(clean, "")
            limit = args.timeout or max(120.0, 10 * (time.perf_counter() - t0))
            if failed:
                print(
                    f"bench/recheck_survivors.py: {by} fails on the run's own code, without a mutant (the code "
                    "changed since the run?): leave it out (--tests), or run bench/mutants.sh again",
                    file=sys.stderr,
                )
                return 2
        for i, name in enumerate(todo, 1):
            tests = ordered(args.tests or selection(_engine(name)), since)
            t0 = time.perf_counter()
            killed, by = pytest(tests, name)
            done[name] = {"killed": killed, "by": by}
            out_path.write_text(json.dumps(done, indent=1, sort_keys=True) + "\n")
            verdict = f"killed by {by}" if killed else "survived"
            print(f"[{i}/{len(todo)}] {name}: {verdict} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
