"""The 14 realistic mutants of issue 24, each applied alone: which test catches it.

    python bench/known_mutants.py            # all 14, a Markdown table on stdout
    python bench/known_mutants.py 3 12       # only mutants 3 and 12 (numbers as in the table)

Each mutant is a textual patch (old text -> new text, every occurrence, which must exist)
of one or more files of a temporary mapped copy of the repository (``bench/mapped_tree.py``:
src/rheo/reference, src/rheo/fastpath, ...); the file is restored after its run, and the
copy is deleted at the end. The working tree is never touched. Each run is
``pytest -x -q -p no:cacheprovider`` on the mutant's fast selection, with the copy first on
PYTHONPATH; "caught" names the first failing test. Progress goes to stderr.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mapped_tree import build

Patch = tuple[str, str, str]  # (file in the mapped tree, old text, new text)

REFERENCE_TESTS = [  # the engine-level files of bench/mutants.sh's reference selection (all 14 need no more)
    "tests/test_instance.py",
    "tests/test_numbers.py",
    "tests/test_corpus.py",
    "tests/test_worked_numbers.py",
    "tests/test_simulator.py",
    "tests/test_self_check.py",
    "tests/test_certify.py",
    "tests/test_sampling.py",
]
FASTPATH_TESTS = [  # bench/mutants.sh's fastpath selection
    "tests/test_fastpath_laws.py",
    "tests/test_fastpath_models.py",
    "tests/test_fastpath_differential.py",
]


@dataclass(frozen=True)
class Mutant:
    name: str
    patches: tuple[Patch, ...]
    tests: tuple[str, ...]


R = "src/rheo/reference/"
FP = "src/rheo/fastpath/"
MUTANTS = [
    Mutant(
        "the Rheo proxy min{q(x_m), z} replaced by z",
        ((R + "instance.py", "return min(q[laws.leads[-1]], z)", "return z"),),
        tuple(REFERENCE_TESTS),
    ),
    Mutant(
        "the m = 0 proxy's cap at 1 dropped",
        ((R + "instance.py", "return min(q[ranked[0]] + c.epsilon, one)", "return q[ranked[0]] + c.epsilon"),),
        tuple(REFERENCE_TESTS),
    ),
    Mutant(
        "fills taken in token-id order, not rank order",
        (
            (
                R + "instance.py",
                "(u for u in self.residual_support if u != y)",
                "(u for u in sorted(self.residual_support) if u != y)",
            ),
        ),
        tuple(REFERENCE_TESTS),
    ),
    Mutant(
        "slot-path tie-break reversed",
        (
            (
                R + "tree.py",
                'slot_path if tie_break == "slot" else prefix',
                'tuple(-s for s in slot_path) if tie_break == "slot" else prefix',
            ),
        ),
        tuple(REFERENCE_TESTS),
    ),
    Mutant(
        "pruning keeps budget - 1 nodes",
        (
            (
                R + "tree.py",
                "pruned = sorted(recorded, key=key)[: c.budget]",
                "pruned = sorted(recorded, key=key)[: c.budget - 1]",
            ),
        ),
        tuple(REFERENCE_TESTS),
    ),
    Mutant(
        "verification: the residual not renormalised after a rejection",
        ((R + "verify.py", "return tuple(x / total for x in paced(rest, deadline))", "return tuple(rest)"),),
        tuple(REFERENCE_TESTS),
    ),
    Mutant(
        "verification: the sample checked against its proxy, not r(Y)",
        (
            (
                R + "verify.py",
                'stochastic = Step("stochastic", sample[0], y, r)\n',
                'stochastic = Step("stochastic", sample[0], y, tuple(laws.sample_factor(y) if i == y else x'
                " for i, x in enumerate(r)))\n",
            ),
        ),
        tuple(REFERENCE_TESTS),
    ),
    Mutant(
        "the bonus token from the untempered target",
        (
            (
                R + "verify.py",
                "if not kids:  # step 1: bonus token\n        for t, x in enumerate(paced(p, deadline)):",
                "if not kids:  # step 1: bonus token\n"
                "        for t, x in enumerate(paced(inst.base_target_law(prefix), deadline)):",
            ),
            (
                R + "verify.py",
                "        w = p\n        moved = False",
                "        w = p if kids else inst.base_target_law(prefix)\n        moved = False",
            ),
        ),
        tuple(REFERENCE_TESTS),
    ),
    Mutant(
        "top_k's renormalisation deferred, so top_p sees the wrong mass (reference/numbers.py)",
        (
            (
                R + "numbers.py",
                "    return normalize([x if i in keep else zero for i, x in enumerate(paced(vec, deadline))],"
                " deadline)\n\n\ndef keep_top_p",
                "    return tuple(x if i in keep else zero for i, x in enumerate(paced(vec, deadline)))\n\n\n"
                "def keep_top_p",
            ),
        ),
        tuple(REFERENCE_TESTS),
    ),
    Mutant(
        "fastpath: the proxy replaced by q(x_m)",
        (
            (
                FP + "pool.py",
                "return torch.minimum(q[..., m - 1], 1 - torch.cumsum(q[..., :m], -1)[..., -1])",
                "return q[..., m - 1]",
            ),
        ),
        tuple(FASTPATH_TESTS),
    ),
    Mutant(
        "fastpath: pool row index off by one",
        ((FP + "tree.py", "first_row = 1 + B * (d - 2)", "first_row = B * (d - 2)"),),
        tuple(FASTPATH_TESTS),
    ),
    Mutant(
        "fastpath: `.to(torch.float64)` dropped on path scores",
        ((FP + "tree.py", "pool.factors.to(torch.float64)", "pool.factors"),),
        tuple(FASTPATH_TESTS),
    ),
    Mutant(
        "fastpath: the sample verified against the untruncated residual",
        ((FP + "pool.py", 'if params.draft_law != "sampled":  # the hook', 'if params.policy == "rheo":  # the hook'),),
        tuple(FASTPATH_TESTS),
    ),
    Mutant(
        "the case-file default epsilon changed from 0 to 1/1000",
        (
            (
                R + "params.py",
                'num(case.get("epsilon") or 0, "epsilon")',
                'num(case.get("epsilon") or "1/1000", "epsilon")',
            ),
        ),
        tuple(REFERENCE_TESTS),
    ),
]


def run_one(tree: Path, mutant: Mutant) -> tuple[str, str, float]:
    """(verdict, first failing test or "", seconds) for one mutant applied to ``tree``."""
    saved: dict[Path, str] = {}
    try:
        for rel, old, new in mutant.patches:
            path = tree / rel
            text = saved.setdefault(path, path.read_text())
            current = path.read_text()
            if old not in current:
                raise SystemExit(
                    f"mutant {mutant.name!r}: {old!r} not found in {rel} (the code moved: update the patch)"
                )
            path.write_text(current.replace(old, new))
            assert text  # the original, restored below
        env = {**os.environ, "PYTHONPATH": str(tree / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-rf", "-n", "0", *mutant.tests]
        start = time.monotonic()
        out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        took = time.monotonic() - start
    finally:
        for path, text in saved.items():
            path.write_text(text)
    if out.returncode == 0:
        return "missed", "", took
    failed = re.search(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", out.stdout, re.M)
    if failed is None:  # a collection error or a crash also catches the mutant; say so
        tail = out.stdout.strip().splitlines()[-1:] or ["(no output)"]
        return "caught", f"pytest exit {out.returncode}: {tail[0]}", took
    return "caught", failed.group(1), took


def main(argv: list[str]) -> int:
    chosen = [int(a) for a in argv] if argv else list(range(1, len(MUTANTS) + 1))
    with tempfile.TemporaryDirectory(prefix="rheo-known-mutants-") as tmp:
        tree = build(Path(tmp) / "repo")
        # the copy imports as rheo: check it before trusting a "missed"
        env = {**os.environ, "PYTHONPATH": str(tree / "src")}
        where = subprocess.run(
            [sys.executable, "-c", "import rheo.reference.numbers as n; print(n.__file__)"],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if not where.startswith(str(tree)):
            raise SystemExit(f"the copy is not what imports as rheo ({where})")
        rows = []
        for i in chosen:
            mutant = MUTANTS[i - 1]
            print(f"[{i}/{len(MUTANTS)}] {mutant.name} ...", file=sys.stderr, flush=True)
            verdict, test, took = run_one(tree, mutant)
            print(f"    {verdict} {test} ({took:.0f} s)", file=sys.stderr, flush=True)
            rows.append((i, mutant.name, verdict, test, took))
    print("| # | mutant | verdict | caught by (first failing test) | s |")
    print("|---|---|---|---|---|")
    for i, name, verdict, test, took in rows:
        shown = "caught" if verdict == "caught" else "**missed**"
        print(f"| {i} | {name} | {shown} | {f'`{test}`' if test else ''} | {took:.0f} |")
    missed = sum(1 for r in rows if r[2] == "missed")
    print(f"\n{len(rows) - missed} of {len(rows)} caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
