"""Cases drawn from what an implementation supports (rheo.checks.cases.space) and the gate's
coverage reports, on the slices of examples/restricted.py."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rheo.casefile import load_case
from rheo.checks.cases import space
from rheo.checks.gate.checklist import impl_checks
from rheo.checks.gate.report import junit_xml, render
from rheo.checks.gate.run import run_checks
from rheo.checks.outcome import PROFILES
from rheo.checks.protocol.load import load_implementation

FILTERS = ("target_top_k", "target_top_p", "target_min_p")
SLICES = {
    "everything": lambda c: True,
    "topk trees, no filter": lambda c: c["policy"] == "topk" and c["K"] > 1 and all(c.get(k) is None for k in FILTERS),
    "chains": lambda c: c["K"] == 1,
    "greedy-draft chains": lambda c: c["K"] == 1 and c["policy"] == "topk",
    "m = 1 at T = 1/2": lambda c: c["policy"] == "rheo" and c.get("m") == 1 and str(c["temperature"]) == "1/2",
}


@pytest.mark.parametrize("name", list(SLICES))
@pytest.mark.parametrize("purpose", ["exact", "statistical"])
def test_the_covering_set_meets_its_quota_and_covers_every_supported_value(name, purpose):
    supports = SLICES[name]
    sel = space.select(supports, purpose, "quick")
    assert len(sel.cases) >= space.QUOTAS["quick"][purpose == "statistical"]
    assert all(supports(c) for c in sel.cases)
    for case in sel.cases:
        load_case(case)  # every chosen case is a valid case file
        if purpose == "statistical":
            assert space.temperature_class(case["temperature"]) != "0"
    for dim, c in sel.coverage().items():
        assert c["covered"] == c["supported"], (dim, c)  # every supported value appears in a chosen case
        assert not set(c["supported"]) & set(c["refused"])
    assert len({c["name"] for c in sel.cases}) == len(sel.cases)


def test_a_slice_names_the_dimensions_that_limit_it_and_refused_values_are_listed():
    sel = space.select(SLICES["greedy-draft chains"], "exact", "smoke")
    assert {"policy", "K", "beam"} <= set(sel.limited_by)
    cov = sel.coverage()
    assert cov["policy"] == {"covered": ["topk"], "supported": ["topk"], "refused": ["rheo"]}
    assert cov["K"]["refused"] == ["2", "3"]
    short = dataclasses.replace(sel, quota=10**6).shortfall(len(sel.cases))
    assert short is not None and "limited by" in short and "policy (only topk)" in short
    assert sel.shortfall(len(sel.cases)) is None


def test_the_same_seed_gives_the_same_cases_and_another_seed_other_ones():
    a = space.select(SLICES["chains"], "exact", "quick", seed=0)
    b = space.select(SLICES["chains"], "exact", "quick", seed=0)
    c = space.select(SLICES["chains"], "exact", "quick", seed=1)
    assert json.dumps(a.cases) == json.dumps(b.cases)
    assert json.dumps(a.cases) != json.dumps(c.cases)


def test_greedy_only_and_nothing_supported():
    greedy = space.select(lambda c: str(c["temperature"]) == "0", "statistical", "quick")
    assert greedy.greedy_only and greedy.cases == []
    assert not space.select(SLICES["chains"], "statistical", "quick").greedy_only
    none = space.select(lambda c: False, "exact", "quick")
    assert none.cases == [] and none.supported_configs == 0
    assert "supports 0 of" in str(none.shortfall(0))


def test_the_pool_size_the_docs_state():
    doc = Path(__file__).resolve().parents[1].joinpath("docs", "gate.md").read_text(encoding="utf-8")
    assert f"asked on {len(space.candidate_configs()):,} candidate configurations" in doc


def test_no_op_settings_count_as_off():
    base = {"vocab_size": 4, "policy": "rheo", "K": 2, "m": 0, "depth": 1, "beam": 2, "budget": 2, "temperature": "1"}
    assert space.dimensions({**base, "target_top_p": "1", "target_min_p": "0"})["target filters"] == "off"
    assert space.dimensions({**base, "target_top_k": 4, "draft_top_k": 4})["target filters"] == "off"
    assert space.dimensions({**base, "target_top_k": 3})["target filters"] == "top_k"
    assert space.dimensions({**base, "target_top_k": 3, "target_min_p": "1/10"})["target filters"] == "together"
    assert space.dimensions({**base, "draft_top_k": 3})["draft_top_k"] == "on"
    assert space.dimensions({**base, "budget": 1})["budget"] == "below the pool"
    assert "beam" not in space.dimensions(base) and "m" not in space.dimensions({**base, "policy": "topk"})


SMOKE = dataclasses.replace(PROFILES["smoke"], impl_exact_search=0)


def _run(spec, tmp_path, only=("exact certification (", "output law (", "beyond exact reach")):
    impl = load_implementation(spec)
    checks = [c for c in impl_checks(impl) if any(o in c.name for o in only)]
    assert len(checks) == len(only)
    return run_checks(checks, SMOKE, tmp_path)


@pytest.mark.parametrize("name", ["TopKTrees", "Chains", "GreedyDraftChains", "OneLeadHalfTemperature"])
def test_lossless_slices_pass_with_their_quotas_met(name, tmp_path):
    results = _run(f"examples.restricted:{name}", tmp_path)
    assert [r.verdict for r in results] == ["pass", "pass", "pass"], [r.detail for r in results]
    for r in results:
        assert "shortfall" not in r.data, r.data["shortfall"]
        assert r.data["coverage"]["policy"]["covered"]


def test_a_greedy_only_implementation_passes_on_exact_certification_alone(tmp_path):
    exact, law, large = _run("examples.restricted:GreedyOnly", tmp_path)
    assert exact.verdict == "pass" and exact.data["certified"] >= space.QUOTAS["smoke"][0]
    for r in (law, large):
        assert r.verdict == "pass" and r.detail.startswith("not applicable: greedy only")
        assert r.data["applicable"] is False
    text = render([exact, law, large], "smoke", strict=True)
    assert "gate PASSED" in text and "  coverage" in text


def test_a_slice_lossy_only_at_t_not_1_is_caught_by_a_finding(tmp_path):
    exact, law = _run("examples.restricted:ChainBonusUntempered", tmp_path, ("exact certification (", "output law ("))
    assert exact.verdict == "fail" and "not lossless (exact)" in exact.detail
    assert "nothing is proven" not in exact.detail
    assert "then a bonus token" in exact.detail  # the path that went wrong
    saved = json.loads(Path(exact.counterexample).read_text(encoding="utf-8"))
    assert space.temperature_class(saved["case"]["temperature"]) != "1"
    assert saved["worst_tree"]["last"] == "bonus"
    root = ET.fromstring(junit_xml([exact, law]))
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["coverage.K.covered"] == "1" and props["coverage.K.refused"] == "2,3"
