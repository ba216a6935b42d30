"""mutmut's verdicts kept in the repository, so that mutation runs add up across sessions.

    python bench/mutation_ledger.py save WORKDIR      # after (or during) a bench/mutants.sh run
    python bench/mutation_ledger.py seed TREE [--retry-survivors]   # bench/mutants.sh does this
    python bench/mutation_ledger.py show              # what the ledger holds, per file

A ``bench/mutants.sh`` run of reference/ takes longer than a 3-hour session on 2 cores, and its
work folder does not outlive the session. The ledger, ``bench/mutation_results/ENGINE.json``,
keeps every decided verdict (mutmut's exit code per mutant) with the hash mutmut gives each
mutated function, plus ``bench/recheck_survivors.py``'s verdicts. ``bench/mutants.sh`` seeds a new
work folder's ``mutants/*.meta`` from it before ``mutmut run``, and mutmut keeps a seeded
verdict exactly when the function's hash is unchanged (its own rule for an edited source file):
a changed function is run again, an unchanged one is not. So each run tests only what no earlier
run decided, and ``save`` folds its verdicts back in.

What a kept verdict assumes: the tests that killed a mutant still kill it (tests are added, not
weakened; a weakened test would show as a survivor only in a run without the ledger:
``MUTANTS_LEDGER=0``). A survivor is kept as a survivor, because running it again with the same
tests decides nothing new; ``--retry-survivors`` (``MUTANTS_RETRY_SURVIVORS=1``) leaves them
undecided so that mutmut runs them against the tests as they are now, and
``bench/recheck_survivors.py`` does the same for chosen ones, faster to aim.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEDGER = ROOT / "bench" / "mutation_results"
MUTMUT = "3.8.1"  # the mutant names and function hashes are mutmut's: another version may differ
SURVIVED = 0  # mutmut's exit code of a mutant the tests pass with
NO_TESTS = (5, 33)  # pytest found no test; no test of the selection reaches the function
# the exit codes that are verdicts (mutmut.stats.status_by_exit_code): killed (1, 3), survived,
# no tests, timeout (36, SIGXCPU), caught by the type check (37), a crash (-9: mutmut's kill
# after SIGXCPU, or out of memory; -11). Not kept: an interrupted run (2), a run stopped from
# outside (-15), "suspicious", "skipped".
VERDICTS = {0, 1, 3, 5, 33, 36, 37, -24, 24, 152, 255, -9, -11}


def _survived(code: int) -> bool:
    return code == SURVIVED or code in NO_TESTS


def _engine(path: str) -> str:
    return "fastpath" if "/fastpath/" in path else "reference"


def _function(mutant: str) -> str:
    """The mangled function name that mutmut hashes: ``x_f`` or ``xǁClassǁmethod``."""
    return mutant.rpartition(".")[2].rpartition("__mutmut_")[0]


def _read(engine: str) -> dict:
    path = LEDGER / f"{engine}.json"
    if not path.exists():
        return {"mutmut": MUTMUT, "files": {}, "rechecked": {}}
    ledger = json.loads(path.read_text())
    if ledger.get("mutmut") != MUTMUT:
        written = ledger.get("mutmut")
        raise SystemExit(f"bench/mutation_ledger.py: {path} was written with mutmut {written}, not {MUTMUT}")
    return ledger


def _write(engine: str, ledger: dict) -> Path:
    LEDGER.mkdir(exist_ok=True)
    path = LEDGER / f"{engine}.json"
    files = {
        f: {
            "hash_by_function_name": dict(sorted(d["hash_by_function_name"].items())),
            "exit_code_by_key": dict(sorted(d["exit_code_by_key"].items())),
        }
        for f, d in sorted(ledger["files"].items())
    }
    out = {"mutmut": MUTMUT, "files": files, "rechecked": dict(sorted(ledger["rechecked"].items()))}
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    return path


def _read_meta(path: Path) -> dict:
    """A meta file; a run still going rewrites it, so a half-written one is read again."""
    for _ in range(20):
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError:
            time.sleep(0.1)
    raise SystemExit(f"bench/mutation_ledger.py: {path} is not JSON")


def save(workdir: Path) -> int:
    """Fold WORKDIR's decided verdicts (and its rechecks) into the ledger."""
    mutants = workdir / "repo" / "mutants"
    metas = sorted(mutants.glob("src/rheo/**/*.py.meta"))
    if not metas:
        print(f"bench/mutation_ledger.py: no mutmut results under {mutants} (run bench/mutants.sh)", file=sys.stderr)
        return 2
    ledgers: dict[str, dict] = {}
    hashes: dict[str, str] = {}  # qualified function -> hash, for the rechecks
    for meta_path in metas:
        source = str(meta_path.relative_to(mutants))[: -len(".meta")]
        engine = _engine(source)
        ledger = ledgers.setdefault(engine, _read(engine))
        meta = _read_meta(meta_path)
        new_hashes = meta["hash_by_function_name"]
        old = ledger["files"].get(source, {"hash_by_function_name": {}, "exit_code_by_key": {}})
        verdicts = {}
        for key, code in meta["exit_code_by_key"].items():
            func = _function(key)
            if code is None and old["hash_by_function_name"].get(func) == new_hashes.get(func):
                code = old["exit_code_by_key"].get(key)  # decided before, not in this run
            if code in VERDICTS:
                verdicts[key] = code
        ledger["files"][source] = {"hash_by_function_name": new_hashes, "exit_code_by_key": verdicts}
        module = source[len("src/") : -len(".py")].replace("/", ".")
        hashes.update({f"{module}.{f}": h for f, h in new_hashes.items()})
    rechecks: dict[str, dict] = {}
    for f in sorted(workdir.glob("rechecked*.json")):
        rechecks.update(json.loads(f.read_text()))
    for engine, ledger in ledgers.items():
        # a recheck stands while its function's hash does; one of a function this run did not
        # cover (a run of some files only) stands as it was
        kept = {
            k: v
            for k, v in ledger["rechecked"].items()
            if hashes.get(k.rpartition("__mutmut_")[0], v["hash"]) == v["hash"]
        }
        for name, verdict in rechecks.items():
            h = hashes.get(name.rpartition("__mutmut_")[0])
            if h is not None and _engine(name.replace(".", "/")) == engine:
                kept[name] = {"killed": verdict["killed"], "by": verdict["by"], "hash": h}
        ledger["rechecked"] = kept
        path = _write(engine, ledger)
        print(f"{path}: {_summary(ledger)}")
    return 0


def seed(tree: Path, retry_survivors: bool) -> int:
    """Write the ledger's verdicts as mutmut's meta files in TREE/mutants (a new work folder),
    and its rechecks as TREE/../rechecked-ledger.json for bench/mutation_score.py."""
    # the files the run mutates: the only_mutate list bench/mutants.sh wrote (a JSON-like TOML array)
    listed = re.search(r"^only_mutate = (\[.*\])$", (tree / "pyproject.toml").read_text(), re.M)
    only = json.loads(listed.group(1)) if listed else ["*"]
    rechecked: dict[str, dict] = {}
    for engine in ("reference", "fastpath"):
        ledger = _read(engine)
        for source, data in ledger["files"].items():
            meta_path = tree / "mutants" / f"{source}.meta"
            if meta_path.exists() or not any(fnmatch.fnmatch(source, g) for g in only):
                continue  # the folder has its own results (newer), or the run leaves the file alone
            codes = {k: c for k, c in data["exit_code_by_key"].items() if not (retry_survivors and _survived(c))}
            meta_path.parent.mkdir(parents=True, exist_ok=True)
            meta = {
                "exit_code_by_key": codes,
                "hash_by_function_name": data["hash_by_function_name"],
                "type_check_error_by_key": {},
                "durations_by_key": {},
                "estimated_durations_by_key": {},
            }
            meta_path.write_text(json.dumps(meta, indent=4, ensure_ascii=False))
        if not retry_survivors:
            for name, v in ledger["rechecked"].items():
                rechecked[name] = {"killed": v["killed"], "by": v["by"]}
        if ledger["files"]:
            print(f"bench/mutation_ledger.py: seeded {engine}: {_summary(ledger)}", file=sys.stderr)
    if rechecked:
        (tree.parent / "rechecked-ledger.json").write_text(json.dumps(rechecked, indent=1, sort_keys=True) + "\n")
    return 0


def _summary(ledger: dict) -> str:
    codes = [c for d in ledger["files"].values() for c in d["exit_code_by_key"].values()]
    survived = sum(map(_survived, codes))
    rechecked = len(ledger["rechecked"])
    killed = sum(v["killed"] for v in ledger["rechecked"].values())
    return (
        f"{len(codes)} decided verdicts in {len(ledger['files'])} files ({survived} survived or untested); "
        f"{rechecked} rechecks ({killed} killed)"
    )


def show() -> int:
    for engine in ("reference", "fastpath"):
        ledger = _read(engine)
        print(f"{engine}: {_summary(ledger)}")
        for source, data in ledger["files"].items():
            print(f"  {source}: {len(data['exit_code_by_key'])} decided")
    return 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("save", help="fold a work folder's verdicts into the ledger").add_argument("workdir", type=Path)
    p = sub.add_parser("seed", help="write the ledger into a new mapped tree's mutants/")
    p.add_argument("tree", type=Path)
    p.add_argument("--retry-survivors", action="store_true", help="leave survivors undecided: mutmut runs them again")
    sub.add_parser("show", help="what the ledger holds")
    args = ap.parse_args(argv)
    if args.command == "save":
        return save(args.workdir)
    if args.command == "seed":
        return seed(args.tree, args.retry_survivors)
    return show()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
