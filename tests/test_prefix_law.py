"""The prefix-law check on cases beyond exact reach (rheo.checks.statistics.prefix_law, the
large pool of rheo.checks.cases.large), and how statistical cases are sized
(cycles_for_tv, --tv, --time-budget: rheo.checks.statistics.sizing)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from examples.buggy_impl import ReusedUniform, SkippedFilters
from examples.eagle_style import EagleReleaseBonusBug, EagleVerifier
from examples.loop_impl import LoopImplementation
from rheo.checks.cases.large import is_large, large_case, large_cases, large_instance
from rheo.checks.protocol.load import Implementation
from rheo.checks.statistics import prefix_law
from rheo.checks.statistics.goodness_of_fit import cycles_for_tv, gof, law_tv
from rheo.checks.statistics.prefix_law import check_prefix_law, prefix_tests
from rheo.checks.statistics.sizing import Sizing, sized_counts

SMOKE = large_cases(0, "smoke")
TREE = SMOKE[0]  # V = 16, K = 8, m = 3, budget 60, every target filter: where the lossy examples show


def test_the_large_pool_covers_the_dimensions_beyond_exact_reach():
    deep = large_cases(0, "deep")
    assert {c["name"] for c in large_cases(0, "quick")} < {c["name"] for c in deep}
    assert len({c["name"] for c in deep}) == len(deep) and all(is_large(c) for c in deep)
    assert min(c["vocab_size"] for c in deep) == 16 and max(c["vocab_size"] for c in deep) == 1024
    assert {c["depth"] for c in deep} == {3, 4, 5, 6} and max(c["K"] for c in deep) == 8
    assert max(c["budget"] for c in deep) == 60
    kinds = {("chain" if c["K"] == 1 else c["policy"], c.get("m")) for c in deep}
    assert {("chain", 0), ("topk", None)} <= kinds and len({m for p, m in kinds if p == "rheo"}) >= 4
    assert {float(c["temperature"]) < 1 for c in deep} == {True, False}
    assert any(float(c["temperature"]) > 1 for c in deep) and any(c["temperature"] == "1" for c in deep)
    filters = {tuple(k for k in ("target_top_k", "target_top_p", "target_min_p") if k in c) for c in deep}
    assert {(), ("target_top_k",), ("target_top_p",), ("target_min_p",)} < filters and len(max(filters, key=len)) == 3
    assert {"draft_top_k" in c for c in deep} == {True, False}
    json.dumps(deep)  # plain data: a counterexample file holds its case


def test_generated_tables_are_reproducible_prefix_dependent_and_sparse_where_asked():
    case = large_case(("tree", 1024, 8, 3, 3, 4, 48, None, "1", "", 3.0, 0.7, 2), seed=5)
    a, b = large_instance(case), large_instance(case)
    assert a.target((1, 2)) == b.target((1, 2)) and a.target((1, 2)) != a.target((2, 1))
    assert a.target((1, 2)) != a.draft((1, 2))
    law = np.array(a.target(()))
    assert abs(law.sum() - 1) < 1e-12 and 0.02 < (law == 0).mean() < 0.25 and law.max() > 0.05
    assert a.target_law(()) == b.target_law(())  # the config is read: T = 1, no filter


def _outputs(impl, case, cycles, seed=0):
    inst = prefix_law.judged_instance(impl, prefix_law.case_instance(case))
    return prefix_law.emitted_outputs(impl, inst, cycles, np.random.default_rng(seed)), inst


def test_prefix_tests_continue_only_where_a_test_needs_it_and_keep_every_cycle():
    impl = Implementation(LoopImplementation(), "loop")
    outputs, inst = _outputs(impl, TREE, 600)
    tests = prefix_tests(outputs, inst, np.random.default_rng(1))
    root, counts, law = tests[0]
    assert root == () and sum(counts.values()) == 600 and abs(sum(law.values()) - 1) < 1e-9
    lengths = Counter(len(s) for s, _, _ in tests)
    assert lengths[0] == 1 and all(lengths[k] <= prefix_law.TOP_PREFIXES for k in lengths)
    for s, counts, _ in tests[1:]:  # a tested prefix: enough cycles through it, all of them counted
        parent = next(c for p, c, _ in tests if p == s[:-1])
        assert sum(counts.values()) == parent[s[-1]] >= prefix_law.MIN_PREFIX_SAMPLES


def test_prefix_tests_reject_a_law_that_is_off_at_a_deep_prefix_only():
    """A planted sampler: p_T everywhere except after the most likely two tokens, where the
    third token comes from a uniform law; the first-token test is quiet, the deep one fires."""
    inst = large_instance(large_case(("chain", 16, 1, 0, 3, 1, 3, None, "1", "", 2.0, 0.5, 0), 3))
    rng = np.random.default_rng(0)
    first = int(np.argmax(inst.target_law(())))
    second = int(np.argmax(inst.target_law((first,))))
    outputs: Counter = Counter()
    for _ in range(4000):
        seq: tuple = ()
        for _ in range(4):
            law = np.array(inst.target_law(seq))
            if seq == (first, second):
                law = np.ones(16) / 16
            seq += (int(rng.choice(16, p=law / law.sum())),)
        outputs[seq] += 1
    tests = prefix_tests(outputs, inst, np.random.default_rng(1))
    verdicts = {s: gof(c, law, 1e-8).reject for s, c, law in tests}
    assert verdicts[()] is False and verdicts[(first, second)] is True, verdicts


@pytest.mark.parametrize("impl", [LoopImplementation, EagleVerifier])
def test_prefix_law_passes_lossless_implementations_on_large_cases(impl):
    r = check_prefix_law(Implementation(impl(), impl.__name__), SMOKE, 800)
    assert r.verdict == "pass", r.detail
    assert r.detail.startswith("lossless on 2 cases as far as these tests show"), r.detail
    for case in r.data["cases"].values():
        assert case["cycles"] == 800 and 0 < case["detectable_tv"] < 0.25 and len(case["tests"]) >= 2
    assert sum(c["cycles"] for c in r.data["cases"].values()) == 1600


@pytest.mark.parametrize("impl", [ReusedUniform, EagleReleaseBonusBug])
def test_prefix_law_fails_lossy_implementations_on_a_large_case(impl, tmp_path):
    r = check_prefix_law(Implementation(impl(), impl.__name__), [TREE], 2000)
    assert r.verdict == "fail" and r.detail.startswith(f"not lossless on {TREE['name']}"), r.detail
    saved = r.counterexample
    assert saved["check"] == "prefix law" and saved["case"] == TREE and saved["worst_tokens"], saved
    assert "--only 'beyond exact reach'" in saved["rerun"]
    json.dumps(saved)


def test_prefix_law_fails_skipped_filters_on_a_filtered_large_case():
    r = check_prefix_law(Implementation(SkippedFilters(), "s"), [TREE], 300)
    assert r.verdict == "fail" and "probability 0" in r.detail, r.detail


def test_prefix_law_judges_the_users_case_files_too():
    """A docs/spec.md §8 case (tables listed, exact arithmetic) runs as --cases gives it, next
    to a large one; a greedy case (T = 0) has one bin and no TV bound, and says so."""
    from rheo.checks.cases.matrix import make_case

    small = make_case(("tree", 4, 2, 1, 2, 2, 3, None), "1/2", "top_p", 3)
    greedy = make_case(("chain", 3, 1, 0, 2, 1, 2, None), "0", "", 4)
    r = check_prefix_law(Implementation(LoopImplementation(), "loop"), [small, greedy, SMOKE[1]], 300)
    assert r.verdict == "pass" and len(r.data["cases"]) == 3, r.detail
    assert f"{greedy['name']}: 300 cycles, first token of one bin (no TV bound)" in r.detail, r.detail
    assert r.data["cases"][small["name"]]["detectable_tv"] < 0.5


def test_prefix_law_counts_unsupported_cases_and_proves_nothing_without_one():
    class NoChains(LoopImplementation):
        def supports(self, config):
            return config["K"] > 1

    r = check_prefix_law(Implementation(NoChains(), "n"), SMOKE, 200)
    assert r.verdict == "pass" and r.data["unsupported"] == [SMOKE[1]["name"]], r.detail
    assert f"unsupported: {SMOKE[1]['name']}" in r.detail
    r = check_prefix_law(Implementation(NoChains(), "n"), [SMOKE[1]], 200)
    assert r.verdict == "fail" and "nothing is proven" in r.detail, r.detail


@pytest.mark.parametrize(
    "law",
    [
        np.ones(2) / 2,
        np.ones(50) / 50,
        np.r_[0.9, np.full(200, 0.1 / 200)],  # a heavy outcome and a long tail merged at small n
        np.exp(-np.arange(1000) / 30.0) / np.exp(-np.arange(1000) / 30.0).sum(),
    ],
)
@pytest.mark.parametrize("tv", [0.2, 0.05, 0.01])
def test_cycles_for_tv_is_the_inverse_of_detectable_tv(law, tv):
    n = cycles_for_tv(law, tv, alpha=1e-8)
    assert law_tv(law, n, 1e-8) <= tv < law_tv(law, n // 2, 1e-8)
    assert law_tv(law, n - 1, 1e-8) > tv  # the fewest


def test_cycles_for_tv_refuses_a_one_bin_law_and_a_tv_out_of_range():
    with pytest.raises(ValueError, match="one bin"):
        cycles_for_tv({"a": 1.0, "b": 0.0}, 0.1, 1e-6)
    for bad in (0, 1.5, -0.1):
        with pytest.raises(ValueError, match="tv must be"):
            cycles_for_tv({"a": 0.5, "b": 0.5}, bad, 1e-6)


def _runner(calls):
    def run(n, part):
        calls.append((n, part))
        return Counter({"a": n})

    return run


def test_sizing_by_tv_runs_the_cycles_the_tv_needs():
    calls: list = []
    law = {"a": 0.5, "b": 0.5}
    counts, how = sized_counts(_runner(calls), Sizing(100, tv=0.1), None, law, 1e-6)
    assert calls == [(cycles_for_tv(law, 0.1, 1e-6), 0)] and how["sized_by"] == "tv" and how["tv_target"] == 0.1
    calls.clear()
    sized_counts(_runner(calls), Sizing(100), None, law, 1e-6)
    assert calls == [(100, 0)]


def _clock(monkeypatch, rate: float):
    """perf_counter as a fake clock that moves only while the runner runs: ``rate`` cycles a second."""
    from rheo.checks.statistics import sizing

    now = [0.0]
    monkeypatch.setattr(sizing.time, "perf_counter", lambda: now[0])

    def runner(calls):
        def run(n, part):
            calls.append((n, part))
            now[0] += n / rate
            return Counter({"a": n})

        return run

    return runner


def test_sizing_by_time_budget_runs_a_growing_pilot_then_what_the_rest_affords(monkeypatch):
    runner = _clock(monkeypatch, rate=200.0)  # 200 cycles a second: 10 s afford 2000
    calls: list = []
    counts, how = sized_counts(runner(calls), Sizing(100, time_budget=10), 10.0, {"a": 0.5, "b": 0.5}, 1e-6)
    assert calls == [(10, 0), (40, 1), (200, 2), (1750, 3)] and counts["a"] == 2000, calls
    assert how["pilot_cycles_per_second"] == 200 and how["runs"] == 4
    calls.clear()  # with --tv too: the smaller count
    law = {"a": 0.5, "b": 0.5}
    counts, how = sized_counts(runner(calls), Sizing(100, tv=0.2, time_budget=10), 10.0, law, 1e-6)
    assert sum(n for n, _ in calls) == min(cycles_for_tv(law, 0.2, 1e-6), 2000) and how["sized_by"] == "tv+time_budget"


def test_a_time_budget_bounds_the_pilot_too(monkeypatch):
    """A slow implementation (2 cycles a second) with a 30 s share runs 60 cycles in 30 s, not a
    200-cycle pilot of 100 s; below the first run's MIN_CYCLES a case never goes."""
    from rheo.checks.statistics.sizing import MIN_CYCLES

    runner = _clock(monkeypatch, rate=2.0)
    calls: list = []
    counts, _ = sized_counts(runner(calls), Sizing(100, time_budget=30), 30.0, {"a": 0.5, "b": 0.5}, 1e-6)
    assert sum(n for n, _ in calls) == 60 and calls[0] == (MIN_CYCLES, 0), calls
    calls.clear()
    sized_counts(runner(calls), Sizing(100, time_budget=1), 1.0, {"a": 0.5, "b": 0.5}, 1e-6)
    assert calls == [(MIN_CYCLES, 0)]


def test_prefix_law_sized_by_tv_reaches_it_on_the_first_token():
    r = check_prefix_law(Implementation(LoopImplementation(), "loop"), [TREE], tv=0.3)
    case = r.data["cases"][TREE["name"]]
    law = np.array([p for p in large_instance(TREE).target_law(()) if p > 0])
    alpha = 1e-6 / prefix_law.case_tests(TREE)
    assert r.verdict == "pass" and case["detectable_tv"] <= 0.3 < law_tv(law, case["cycles"] // 2, alpha), r.detail
    assert "sized to detect TV 0.3" in r.detail and case["cycles"] == case["cycles_for_tv"] < 1000


def test_the_gate_lists_the_check_for_per_request_implementations_and_a_profile_without_cycles_skips_it():
    from rheo.checks.gate.prefix_law_checks import prefix_law_checks
    from rheo.checks.outcome import PROFILES, Profile

    [check] = prefix_law_checks(Implementation(LoopImplementation(), "loop"), None, "loop", None)
    assert check.name == "impl: output law, beyond exact reach (tree builder and verifier)"
    assert check.file_stem == "loop-prefix-law"
    assert check.run(Profile("t", "smoke", 0, False, 0, 0, 0, 0), None).verdict == "skip"
    assert all(p.impl_prefix_cycles > 0 and p.impl_tv is None and p.impl_time_budget is None for p in PROFILES.values())

    class Batched:
        def verify_batch(self, *args):
            raise NotImplementedError

    assert prefix_law_checks(Implementation(Batched(), "b"), None, "b", None) == []


def test_the_output_law_sized_by_tv_reaches_it_on_every_case_and_says_so():
    from rheo.checks.statistics.output_law import check_output_law

    r = check_output_law(Implementation(LoopImplementation(), "loop"), 50, level="smoke", tv=0.2)
    assert r.verdict == "pass" and "cycles per case sized to detect TV 0.2 against" in r.detail, r.detail
    for case in r.data["cases"].values():
        assert case["sized_by"] == "tv" and case["cycles"] == case["cycles_for_tv"] > 50
        assert case["detectable_tv"] <= 0.2
