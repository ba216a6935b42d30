"""The mutation score of a finished ``mutmut run`` (run in the mapped tree; bench/mutants.sh).

    python bench/mutation_score.py [--equivalent bench/equivalent_mutants.txt] [--survivors]

Every mutant is put in one class:

- ``message``: the mutant changes only a string literal (mutmut's "XX..XX", lower- and
  upper-case mutations of a plain string, or the string replaced by None) whose text is a message: it holds a space or
  other non-identifier text ("must be >= 0, got ", "ranking tokens"). Messages do not
  count (issue 24). A string that reads as an identifier ("slot", "rheo", "epsilon")
  can be logic (a mode, a key, a field name) and counts like any other mutant;
- ``equivalent``: listed in the equivalent file with its reason (docs/tests.md);
  does not count;
- ``device-only``: listed there with a reason that starts "device-only:": a ``device=``
  argument dropped or set to None, the same tensor on the CPU that mutation testing runs on,
  another device only on an accelerator (the GPU tests, bench/gpu_check.sh). It does not count
  in the score; a second, strict score counts it as a survivor;
- ``killed`` (mutmut's killed, timeout and segfault: a crash, -9 or -11), ``survived``, ``no tests`` (no test of the
  selection reaches the function: counted as not killed), anything else as mutmut says.

score = killed / (every mutant - message - equivalent - device-only - not run yet). The survivors (``survived`` and
``no tests``, not equivalent) are printed, with their diffs with ``--survivors``. With
``--rechecked`` (bench/recheck_survivors.py's verdicts), a survivor that the current tests
kill counts as killed ("killed on recheck").
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import tokenize
from collections import Counter
from pathlib import Path

from mutmut.mutation.data import SourceFileMutationData
from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.stats import status_by_exit_code
from mutmut.utils.file_utils import walk_mutatable_files

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def _tokens(line: str) -> list[tuple[int, str]] | None:
    try:
        toks = tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline)
        return [(t.type, t.string) for t in toks if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER)]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None


def _string_body(token: str) -> str:
    return re.sub(r"^[rRbBuU]*(['\"])(.*)\1$", r"\2", token, flags=re.S)


def message_only(diff: str) -> bool:
    """True when the mutant changes one line, and only string literals in it (to another
    string or to None), each a message."""
    removed = [ln[1:] for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    added = [ln[1:] for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    if len(removed) != 1 or len(added) != 1:
        return False
    old, new = _tokens(removed[0]), _tokens(added[0])
    if old is None or new is None or len(old) != len(new):
        return False
    changed = [(a, b) for a, b in zip(old, new) if a != b]
    if not changed:
        return False
    for (ta, sa), (tb, sb) in changed:
        if ta != tokenize.STRING or not (tb == tokenize.STRING or (tb, sb) == (tokenize.NAME, "None")):
            return False
        if IDENTIFIER.fullmatch(_string_body(sa)):
            return False  # an identifier-like string may be logic: it counts
    return True


def read_equivalent(path: Path | None) -> dict[str, str]:
    """``mutant-name  reason`` per line; # comments and blank lines skipped."""
    if path is None or not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, reason = line.partition(" ")
            out[name] = reason.strip()
    return out


def classify(equivalent: dict[str, str]) -> tuple[dict[str, Counter[str]], list[tuple[str, str, str]]]:
    """Per engine, the count of each class; and the survivors (name, status, diff). Run in
    the mapped tree of a ``mutmut run`` (its current directory)."""
    per_engine: dict[str, Counter[str]] = {}
    survivors: list[tuple[str, str, str]] = []
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        engine = "fastpath" if "/fastpath/" in str(path) else "reference"
        for name, code in data.exit_code_by_key.items():
            status = status_by_exit_code[code]
            if status in ("timeout", "segfault"):  # the tests did not pass: the process ran out of time or crashed
                status = "killed"
            if status not in ("killed", "not checked"):
                diff = get_diff_for_mutant(name, path=path)
                if message_only(diff):
                    status = "message"
                elif name in equivalent:
                    # "device-only: ...": the same on the CPU this runs on, not on an accelerator
                    status = "device-only" if equivalent[name].startswith("device-only") else "equivalent"
                else:
                    survivors.append((name, status, diff))
            per_engine.setdefault(engine, Counter())[status] += 1
    return per_engine, survivors


def survivors(equivalent_file: Path | None) -> list[tuple[str, str]]:
    """(name, status) of every survivor: for bench/recheck_survivors.py."""
    return [(name, status) for name, status, _ in classify(read_equivalent(equivalent_file))[1]]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--equivalent", type=Path)
    ap.add_argument(
        "--rechecked", type=Path, nargs="+", default=[], help="bench/recheck_survivors.py's verdicts: their kills count"
    )
    ap.add_argument("--survivors", action="store_true", help="print every survivor's diff")
    ap.add_argument("--markdown", type=Path, help="write the survivors as a table (docs/mutation_survivors.md)")
    args = ap.parse_args(argv)
    per_engine, found = classify(read_equivalent(args.equivalent))
    rechecked: dict[str, dict[str, object]] = {}
    for path in args.rechecked:
        if path.exists():
            rechecked.update(json.loads(path.read_text()))
    left: list[tuple[str, str, str]] = []
    for name, status, diff in found:
        verdict = rechecked.get(name)
        if verdict and verdict["killed"]:
            c = per_engine["fastpath" if ".fastpath." in name else "reference"]
            c[status] -= 1
            c["killed on recheck"] += 1
        else:
            left.append((name, status, diff))
    if not per_engine:
        print("no mutmut results here: run bench/mutants.sh")
        return 2
    summary: list[str] = []
    classes: Counter[str] = Counter()
    for c in per_engine.values():
        classes.update(c)
    for engine, c in [*sorted(per_engine.items()), ("all", classes)]:
        killed = c["killed"] + c["killed on recheck"]
        counted = sum(c.values()) - c["message"] - c["equivalent"] - c["device-only"] - c["not checked"]
        score = 100.0 * killed / counted if counted else 100.0
        rest = ", ".join(
            f"{k} {v}"
            for k, v in sorted(c.items())
            if v and k not in ("killed", "message", "equivalent", "device-only", "not checked")
        )
        # device-only mutants survive every CPU run; the strict score counts them as survivors
        strict = 100.0 * killed / (counted + c["device-only"]) if counted + c["device-only"] else 100.0
        device = f", {c['device-only']} device-only" if c["device-only"] else ""
        summary.append(
            f"{engine}: {sum(c.values())} mutants, {c['message']} message strings, "
            f"{c['equivalent']} equivalent{device} and {c['not checked']} not (yet) run not counted; "
            f"killed {killed} of {counted}: score {score:.1f}%"
            + (f" ({rest})" if rest else "")
            + (f"; strict, device-only counted as survivors: {strict:.1f}%" if device else "")
        )
        print(summary[-1])
    for name, status, diff in left:
        print(f"\n# {name}: {status}")
        if args.survivors:
            print(diff)
    if args.markdown:
        args.markdown.write_text(markdown(left, rechecked, summary))
    return 0


def change(diff: str, width: int = 160) -> str:
    """A diff's first removed and first added line, as ``old -> new``, cut to ``width``."""
    removed = next((ln[1:].strip() for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")), "")
    added = next((ln[1:].strip() for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")), "")
    text = f"{removed} -> {added}"[:width]
    return text.replace("|", "\\|").replace("`", "'")


def markdown(left: list[tuple[str, str, str]], rechecked: dict[str, dict[str, object]], summary: list[str]) -> str:
    """docs/mutation_survivors.md: every survivor left, with how far it was checked."""
    lines = [
        "# Mutation-testing survivors (generated)",
        "",
        "Written by `bench/mutation_score.py --markdown` in a `bench/mutants.sh` run's mapped tree",
        '(docs/tests.md, "Mutation testing", has the command): the mutants that are not equivalent',
        "(bench/equivalent_mutants.txt), not a message, and not killed by the run or by",
        '`bench/recheck_survivors.py`. "rechecked, survived": the current tests ran against it and it lived;',
        '"not rechecked": it survived the tests of its run.',
        "",
        *[f"    {line}" for line in summary],
        "",
    ]
    if not left:
        lines.append(
            "None: every mutant that counts is killed. The equivalent and device-only ones are listed, "
            "each with its reason, in bench/equivalent_mutants.txt."
        )
        return "\n".join(lines) + "\n"
    lines += ["| mutant | status | the change (first 160 characters) |", "|---|---|---|"]
    for name, status, diff in left:
        how = "rechecked, survived" if name in rechecked else "not rechecked"
        short = name.removeprefix("rheo.")
        lines.append(f"| `{short}` | {status}, {how} | `{change(diff)}` |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
