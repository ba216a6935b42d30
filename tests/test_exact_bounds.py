"""`rheo exact` is bounded (docs/spec.md §8, "Limits"): a default --timeout that holds in
every phase, capped file reading, bounded JSON nesting and number length, no recursion
limit at any depth, one escaped and shortened error line for every bad input."""

import doctest
import importlib
import json
import math
import os
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest

from rheo.casefile import MAX_CASE_BYTES, builtin_examples, load_case
from rheo.reference import Deadline, Timeout, certify, cycle_law, make_instance, max_deviation, verification_law
from rheo.reference.enumerate_classes import class_cycle_law
from rheo.reference.estimate import work_estimate
from rheo.reference.numbers import rank_order

ROOT = Path(__file__).resolve().parent.parent

GOOD = {
    "vocab_size": 3,
    "target": {"*": ["1/5", "1/2", "3/10"]},
    "draft": {"*": ["1/2", "3/10", "1/5"]},
    "policy": "rheo",
    "K": 3,
    "m": 1,
    "depth": 1,
    "budget": 2,
}


def rheo(*args):
    return subprocess.run(
        [sys.executable, "-m", "rheo.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def one_error_line(r, code):
    """The run exited with ``code`` and wrote exactly one line on stderr, an error line
    (at --timeout, exit 3, after the line that said at once that the case is too big, if any)."""
    lines = r.stderr.strip().splitlines()
    if code == 3:
        lines = [line for line in lines if not line.startswith("rheo exact: this case needs ")]
    assert r.returncode == code, r.stderr
    assert len(lines) == 1 and lines[0].startswith("rheo: error: "), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def write(tmp_path, case, name="case.json"):
    path = tmp_path / name
    path.write_text(json.dumps(case) if not isinstance(case, str) else case)
    return str(path)


# 1. the time limits ------------------------------------------------------------------------


def test_timeouts_must_be_finite():
    """(-1, nan and a negative --count-timeout: tests/test_hostile_input.py)"""
    line = one_error_line(rheo("exact", "--timeout", "inf"), 2)
    assert "--timeout: must be a number of seconds > 0" in line and "inf" in line


def test_default_timeout_is_stated_in_help_and_zero_means_no_limit():
    help_text = " ".join(rheo("exact", "--help").stdout.split())
    assert "default 300; 0 = no limit" in help_text and "0 = do not count" in help_text
    assert rheo("exact", "--timeout", "0").returncode == 0
    out = json.loads(rheo("exact", "--count-timeout", "0", "--json").stdout)
    assert out["lossless"] and out["joint_draws"] is None  # 0: joint draws are not counted


# 2. the deadline holds in every phase ------------------------------------------------------


def test_each_phase_checks_the_deadline():
    """An expired deadline stops reading the tables, building a node's laws (ranking a huge
    vocabulary), verification and the deviation search, each on its own."""
    n = 100_000
    law = [Fraction(1, n)] * n
    case = {**GOOD, "vocab_size": n, "target": {"*": law}, "draft": {"*": law}}
    with pytest.raises(Timeout):
        load_case(case, Deadline(0))

    inst = make_instance(n, law, law, policy="rheo", K=3, m=1, depth=1, budget=2)
    expired = Deadline(0)
    for phase in (
        lambda: inst.target_law(()),
        lambda: inst.node_laws(()),
        lambda: rank_order(law, expired),
        lambda: class_cycle_law(inst, count_draws=False, deadline=expired),
    ):
        inst.deadline = expired
        with pytest.raises(Timeout):
            phase()
    inst.deadline = None
    big = make_instance(n, law, law, policy="topk", K=1, depth=1, budget=1)
    tree = next(iter(class_cycle_law(big, count_draws=False).trees))
    big.deadline = expired
    with pytest.raises(Timeout):
        verification_law(big, tree)
    with pytest.raises(Timeout):
        max_deviation(big, {(0,): Fraction(1)})


def test_a_deadline_changes_no_answer():
    """The paced loops and the run-by-run ranking give the same exact answers."""
    vec = [Fraction((7 * i) % 13, 1000) for i in range(20_000)]
    assert rank_order(vec, Deadline(600)) == rank_order(vec)
    for case in builtin_examples().values():
        plain, bounded = certify(load_case(case)), certify(load_case(case, Deadline(600)), deadline=Deadline(600))
        assert plain.cycle.law == bounded.cycle.law and plain.deviation == bounded.deviation


def test_counting_joint_draws_stays_within_the_deadline():
    """Counting has its own cap (--count-timeout), but never runs past --timeout."""
    inst = make_instance(3, ["1/3"] * 3, ["1/2", "1/4", "1/4"], policy="rheo", K=3, m=0, depth=6, budget=2)
    t0 = time.perf_counter()
    with pytest.raises(Timeout):
        certify(inst, deadline=Deadline(1), count_seconds=30)
    assert time.perf_counter() - t0 < 3
    capped = certify(inst, deadline=Deadline(60), count_seconds=0.5)
    assert capped.cycle.joint_draws is None and capped.lossless


# 3. reading a file -------------------------------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_file_over_the_cap_is_refused(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * (MAX_CASE_BYTES + 1))
    assert "is larger than 64 MiB, the limit for a case file" in one_error_line(rheo("exact", str(path)), 2)


# 4. JSON nesting ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["[" * 100 + "]" * 100], ids=["100-deep"])  # 200,000 open: test_hostile_input
def test_deep_json_nesting_is_one_line(tmp_path, text):
    line = one_error_line(rheo("exact", write(tmp_path, text)), 2)
    assert "nests JSON arrays and objects more than 64 deep" in line


# 5. any depth: no recursion limit ----------------------------------------------------------


def test_depth_one_thousand_certifies_without_recursion_limit():
    """Verification, the deviation search and the class enumerator run on explicit stacks
    (before: RecursionError at depth ~1000)."""
    chain = make_instance(1, ["1"], ["1"], policy="topk", K=1, depth=1000, budget=1000)
    assert certify(chain).lossless
    skew = make_instance(2, ["1", "0"], ["1/2", "1/2"], policy="topk", K=1, depth=999, budget=1)
    dev = max_deviation(skew, {(1,): Fraction(1)})  # continuations searched 999 tokens deep
    assert dev.value == 1 and dev.sequence == (0,) * 1000
    branchy = make_instance(2, ["1/3", "2/3"], ["1/2", "1/2"], policy="rheo", K=2, m=0, beam=1, depth=3000, budget=3000)
    with pytest.raises(Timeout):  # finishes or stops at its deadline; never RecursionError
        certify(branchy, deadline=Deadline(2), count_draws=False)


def test_deep_cases_finish_or_stop_at_the_deadline(tmp_path):
    chain = {**GOOD, "vocab_size": 1, "target": {"*": ["1"]}, "draft": {"*": ["1"]}}
    chain |= {"policy": "topk", "K": 1, "depth": 1000, "budget": 1000}
    r = rheo("exact", write(tmp_path, chain, "chain.json"), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["lossless"], r.stderr
    branchy = {**GOOD, "vocab_size": 2, "target": {"*": ["1/3", "2/3"]}, "draft": {"*": ["1/2", "1/2"]}}
    branchy |= {"K": 2, "m": 0, "beam": 1, "depth": 1000, "budget": 1000}
    line = one_error_line(rheo("exact", write(tmp_path, branchy, "branchy.json"), "--timeout", "2"), 3)
    assert "--timeout: gave up after 2 s" in line


@pytest.mark.parametrize("name", ["rheo.reference.deadline", "rheo.reference.stack", "rheo.cli.common"])
def test_docstring_examples_of_the_bounding_helpers(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


# 6. gate counterexample files --------------------------------------------------------------


def test_a_gate_counterexample_file_is_read_as_its_case(tmp_path):
    saved = {
        "check": "exact certification",
        "implementation": "examples.buggy_impl:SkippedFilters",
        "verdict": "not lossless",
        "case": GOOD,
        "output_law": {"1 1": 0.25},
        "replay": "rheo gate --impl examples.buggy_impl:SkippedFilters --replay FILE",
    }
    r = rheo("exact", write(tmp_path, saved), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["lossless"] is True
    note = r.stderr.strip().splitlines()
    assert len(note) == 1 and 'the "case" of a gate counterexample file ("exact certification" check' in note[0]


def test_unknown_keys_are_all_named(tmp_path):
    saved = {"check": "exact certification", "case": "paper-abc", "verdict": "not lossless"}
    r = rheo("exact", write(tmp_path, saved))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and lines[0].startswith("rheo: error: case: unknown key (also unknown: check, verdict)")
    missing = ["vocab_size", "target", "draft", "policy", "K", "depth", "budget"]  # and every missing key, one a line
    required = "is required (see `rheo exact --help` for the case format)"
    assert lines[1:] == [f"rheo: error: {k}: {required}" for k in missing]


# 8. long numbers ---------------------------------------------------------------------------


def test_a_long_sum_is_shown_by_its_first_digits_and_length(tmp_path):
    long = "3" + "1" * 3999 + "/1" + "0" * 3999  # read (at most 4300 digits), but the law sums to ~3.8
    line = one_error_line(rheo("exact", write(tmp_path, {**GOOD, "target": {"*": ["1/5", "1/2", long]}})), 2)
    assert len(line) < 300
    assert 'target["*"]: must sum to exactly 1 in exact mode, sums to 381111111111... (4000 digits)/' in line


# 9. control characters ---------------------------------------------------------------------


def test_control_characters_are_escaped_in_report_and_error_lines(tmp_path):
    case = {**GOOD, "name": "n\x1b[2Jame", "description": "red \x1b[31mALERT\x00 \u202e"}
    r = rheo("exact", write(tmp_path, case))
    assert r.returncode == 0 and "\x1b" not in r.stdout and "\x00" not in r.stdout and "\u202e" not in r.stdout
    assert r.stdout.splitlines()[0] == "case: n\\x1b[2Jame - red \\x1b[31mALERT\\x00 \\u202e"
    r = rheo("exact", write(tmp_path, {**GOOD, "\x1b[31mcolour\x00": 1}, "key.json"))
    line = one_error_line(r, 2)
    assert line.startswith("rheo: error: \\x1b[31mcolour\\x00: unknown key") and "\x1b" not in r.stderr
    line = one_error_line(rheo("exact", write(tmp_path, {**GOOD, "policy": "\ud800"}, "surrogate.json")), 2)
    assert line == 'rheo: error: policy: must be one of "rheo", "topk", got "\\ud800"'


def test_float64_underflow_and_huge_numbers_of_slots_are_not_tracebacks(tmp_path):
    cold = {**GOOD, "arithmetic": "float64", "temperature": 0.0001}
    line = one_error_line(rheo("exact", write(tmp_path, cold)), 2)
    assert line.startswith("rheo: error: temperature: in float64, p^(1/T) underflows to 0")
    r = rheo("exact", write(tmp_path, {**GOOD, "K": 10**30}, "wide.json"), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["lossless"], r.stderr


# 10. no flag is ignored --------------------------------------------------------------------


@pytest.mark.parametrize(
    "args,needle",
    [
        (("--list-examples", "cases/control-sample_last.json"), "--list-examples: lists the built-in examples"),
        (("--list-examples", "--example", "abc"), "drop --example"),
        (("--list-examples", "--timeout", "5"), "drop --timeout"),
        (("--list-examples", "--enumerator", "naive"), "drop --enumerator"),
        (("--enumerator", "naive", "--count-timeout", "5"), "--count-timeout: the naive enumerator counts"),
        (("cases/control-sample_last.json", "--example", "abc"), "give either CASE.json or --example NAME"),
    ],
)
def test_flags_that_would_be_ignored_exit_2(args, needle):
    assert needle in one_error_line(rheo("exact", *args), 2)


def test_timeout_numbers_are_what_the_help_says():
    from rheo.cli.exact import DEFAULT_COUNT_TIMEOUT, DEFAULT_TIMEOUT

    assert DEFAULT_TIMEOUT == 300 and DEFAULT_COUNT_TIMEOUT == 30 and math.isfinite(DEFAULT_TIMEOUT)


# 7. the work estimated before it starts, and progress ----------------------------------------


def _enumerated(inst, enumerator):
    d = Deadline(None)
    law = class_cycle_law(inst, count_draws=True, deadline=d) if enumerator == "classes" else cycle_law(inst, "naive")
    return law, d


@pytest.mark.parametrize(
    "tables,config",
    [
        ({"*": ["1/4"] * 4}, dict(policy="rheo", K=3, m=1, depth=2, budget=4)),
        ({"*": ["1/5", "1/5", "1/5", "1/5", "1/5"]}, dict(policy="rheo", K=3, m=0, depth=2, budget=3, beam=2)),
        ({"*": ["1/2", "1/4", "1/8", "1/8"]}, dict(policy="rheo", K=2, m=1, depth=3, budget=4, tie_break="token")),
        ({"*": ["1/3"] * 3}, dict(policy="rheo", K=3, m=1, depth=1, budget=2, proxy="self")),
    ],
)
def test_the_estimate_is_the_count_for_one_law_of_full_support(tables, config):
    """Joint draws: exactly the naive enumerator's count (and at least the classes);
    branches: at least the class enumerator's."""
    n = len(tables["*"])
    case = {"vocab_size": n, "target": tables, "draft": tables, **config}
    inst = load_case(case)
    naive, classes = work_estimate(inst, "naive"), work_estimate(inst, "classes")
    law, d = _enumerated(load_case(case), "classes")
    assert naive.exact and naive.count == law.joint_draws == cycle_law(load_case(case), "naive").joint_draws
    assert classes.what == "class-enumerator branches" and d.counts[classes.what] <= classes.count
    assert law.classes <= naive.count and classes.count <= naive.count
    assert d.shares[classes.what] == pytest.approx(1.0)  # the share explored reaches 1


def test_the_estimate_bounds_the_count_for_sparse_and_prefix_dependent_laws():
    from rheo.reference.generate import hashed_case, hashed_instance

    shapes = [(0, dict(K=3, m=1, budget=6)), (6, dict(K=3, m=1, budget=4)), (5, dict(K=2, m=0, budget=3))]
    for zero_share, config in shapes:
        case = hashed_case(5, 1, 2, zero_share=zero_share, policy="rheo", **config)
        for inst in (load_case(case), hashed_instance(5, 1, zero_share=zero_share, depth=2, policy="rheo", **config)):
            naive, classes = work_estimate(inst, "naive"), work_estimate(inst, "classes")
            law, d = _enumerated(inst, "classes")
            assert law.joint_draws <= naive.count and d.counts[classes.what] <= classes.count
            assert law.classes <= naive.count
    topk = work_estimate(load_case({**GOOD, "policy": "topk", "K": 2}), "naive")
    assert topk.count == 1 and topk.exact


def _huge_case(tmp_path, n=50_000):
    law = [f"1/{n}"] * n
    case = {**GOOD, "vocab_size": n, "target": {"*": law}, "draft": {"*": law}, "depth": 2, "budget": 4}
    return write(tmp_path, case, "huge.json")


def test_a_huge_vocabulary_is_said_to_be_too_big_at_once(tmp_path):
    """Before: the whole --timeout passed before the run said it was too big. Now one line
    on stderr says so as soon as a second of enumeration has measured its rate; --timeout
    still decides when to stop (the run is killed here once the line has come)."""
    path = _huge_case(tmp_path)
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-m", "rheo.cli", "exact", path, "--timeout", "300"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = p.stderr.readline()
        took = time.perf_counter() - t0
    finally:
        p.kill()
        p.communicate()
    assert line.startswith("rheo exact: this case needs ") and "class-enumerator branches" in line, line
    assert "at the measured rate" in line and line.rstrip().endswith("--timeout is 300 s"), line
    assert took < 30, took  # reading 100,000 numbers, a second of enumeration, and the start of Python


def test_under_json_progress_goes_to_stderr_and_stdout_stays_one_object(tmp_path):
    r = rheo("exact", _huge_case(tmp_path), "--timeout", "8", "--json")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 3 and json.loads(r.stdout)["error"].startswith("--timeout: gave up after 8 s")
    assert lines[0].startswith("rheo exact: this case needs ") and lines[-1].startswith("rheo: error: --timeout")
    assert all(line.startswith("  ") for line in lines[1:-1]), r.stderr  # progress lines, if a phase ran 5 s


def test_a_case_that_fits_is_not_said_to_be_too_big(tmp_path):
    r = rheo("exact", write(tmp_path, {**GOOD, "depth": 3, "budget": 6}), "--timeout", "60", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["lossless"] and r.stderr == ""


def test_the_too_big_line_is_decided_on_a_measured_second():
    """rheo exact's Watch on a fake clock and deadline (nothing is timed): after a second of
    enumeration it says once that the case will not fit when every guess of that second's
    second half is over 1.5 x --timeout; never on a guess made too early to mean anything."""
    from types import SimpleNamespace

    from rheo.cli.exact import Watch
    from rheo.reference.estimate import Estimate

    def run(timeout, beats):
        now, lines = [0.0], []
        watch = Watch(timeout, report=lines.append, clock=lambda: now[0])
        watch.estimate = Estimate("class-enumerator branches", 4e5, False, 1e20)
        d = SimpleNamespace(phase="class-enumerator branches", start=0.0, counts={}, totals={}, shares={})
        d.started = {"class-enumerator branches": 2.0}  # 2 s of reading first
        for t, done, share in beats:
            now[0], d.counts[d.phase] = t, done
            if share is not None:
                d.shares[d.phase] = share
            watch(d, "in a loop over a law's entries")
        return lines

    nothing_done = run(300, [(2.01, 0, None), (2.6, 0, None), (3.1, 0, None), (4.0, 0, None)])
    assert len(nothing_done) == 1  # once; the phase's progress lines start at 5 s
    assert nothing_done[0].startswith("rheo exact: this case needs up to 400,000 class-enumerator branches, about")
    assert nothing_done[0].endswith("at the measured rate (none done in 1.1 s); --timeout is 300 s")
    fits = run(300, [(2.6, 500, 0.01), (3.1, 1000, 0.02)])  # 1.1 s for 2%: about 57 s in all
    assert fits == []
    too_long = run(20, [(2.6, 500, 0.01), (3.1, 1000, 0.02), (9.0, 9000, 0.5)])
    assert too_long == [
        "rheo exact: this case needs about 50,000 class-enumerator branches, about 57 s at the measured rate "
        "(909 class-enumerator branches/s); --timeout is 20 s",
        "  class enumerator: 9,000 branches (50%), 1,290 branches/s, about 7 s left",  # 7 s into the phase
    ]
    assert run(None, [(2.6, 0, None), (3.1, 0, None)]) == []  # --timeout 0: no limit, nothing to warn about
