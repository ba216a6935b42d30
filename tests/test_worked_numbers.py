"""docs/spec.md's documented defaults and worked numbers, read from the text itself: the
filter compositions of §0, the tau per policy of §6 (also src/rheo/checks/gate/worked.json,
which the gate's paper-example check reads) and the defaults table of §8. A changed
default or a changed filter composition then changes a number checked here."""

from __future__ import annotations

import json
import re
from fractions import Fraction as F
from importlib import resources
from pathlib import Path

import pytest

from rheo.casefile import load_case
from rheo.checks.exact.self_check import independent_law
from rheo.checks.gate.reference_checks import paper_example_check, worked_cases
from rheo.checks.outcome import PROFILES
from rheo.reference import certify
from rheo.reference.numbers import Temperature, apply_filters, keep_min_p, keep_top_k, keep_top_p, temper
from rheo.reference.params import Params, TargetFilters

SPEC = (Path(__file__).resolve().parents[1] / "docs" / "spec.md").read_text(encoding="utf-8")


def table_after(heading: str) -> list[list[str]]:
    """The rows (cells stripped) of the first Markdown table after ``heading`` (indented or
    not), without its header and rule."""
    rows: list[list[str]] = []
    for ln in SPEC[SPEC.index(heading) :].splitlines():
        if ln.lstrip().startswith("|"):
            rows.append([c.strip() for c in ln.strip().strip("|").split("|")])
        elif rows:
            break
    return rows[2:]


def law(text: str) -> tuple[F, ...]:
    return tuple(F(x.strip()) for x in re.search(r"\(([^)]*)\)", text).group(1).split(","))  # type: ignore[union-attr]


P = (F(2, 5), F(3, 10), F(1, 5), F(1, 10))
COMPOSITIONS = table_after("**Worked compositions**")


def parse_filters(text: str) -> tuple[Temperature, list[tuple[str, F]]]:
    T, filters = Temperature.parse("1", exact=True), []
    for part in text.split(","):
        name, value = part.split()
        if name == "T":
            T = Temperature.parse(value, exact=True)
        else:
            filters.append((name, F(value)))
    return T, filters


def test_the_spec_lists_every_filter_pair():
    pairs = {tuple(n for n, _ in parse_filters(row[0])[1]) for row in COMPOSITIONS}
    assert {("top_k", "top_p"), ("top_k", "min_p"), ("top_p", "min_p"), ("top_k", "top_p", "min_p")} <= pairs


@pytest.mark.parametrize("row", COMPOSITIONS, ids=[r[0] for r in COMPOSITIONS])
def test_worked_compositions(row):
    T, filters = parse_filters(row[0])
    tempered = temper(P, T)
    one = {"top_k": lambda v, x: keep_top_k(v, int(x)), "top_p": keep_top_p, "min_p": keep_min_p}
    first = one[filters[0][0]](tempered, filters[0][1]) if T.power == 1 else tempered
    assert first == law(row[1])
    given = {f"target_{name}": (int(v) if name == "top_k" else v) for name, v in filters}
    f = TargetFilters(given.get("target_top_k"), given.get("target_top_p"), given.get("target_min_p"))
    assert apply_filters(tempered, f) == law(row[2])
    case = {
        "vocab_size": 4,
        "target": {"*": [str(x) for x in P]},
        "draft": {"*": ["1/4"] * 4},
        "policy": "topk",
        "K": 1,
        "depth": 1,
        "budget": 1,
        "temperature": str(T),
        **{k: (v if isinstance(v, int) else str(v)) for k, v in given.items()},
    }
    assert independent_law(load_case(case), ())[0] == law(row[2])


WORKED = table_after("**Worked tau per policy.**")


def test_the_spec_tau_table_is_the_shipped_worked_cases():
    shipped = json.loads(resources.files("rheo.checks.gate").joinpath("worked.json").read_text(encoding="utf-8"))
    assert len(WORKED) == len(shipped["cases"])
    for row, entry in zip(WORKED, shipped["cases"]):
        policy, q, K, depth, budget, other, tau = row
        cfg = entry["config"]
        assert policy.split()[0] == cfg["policy"] and int(K) == cfg["K"] and int(depth) == cfg["depth"]
        assert int(budget) == cfg["budget"] and law(q) == tuple(F(x) for x in entry["draft"])
        if "m=" in policy:
            assert int(policy.split("m=")[1]) == cfg["m"]
        assert (other == "") == ("epsilon" not in cfg) and (not other or F(other.split()[1]) == F(cfg["epsilon"]))
        assert F(tau) == F(entry["tau"])


@pytest.mark.parametrize("case", worked_cases(), ids=lambda c: c["name"])
def test_worked_tau(case):
    report = certify(load_case(case))
    assert report.lossless and report.tau == F(case["expected"]["tau"])


def test_the_gate_reads_the_worked_numbers():
    outcome = paper_example_check().run(PROFILES["smoke"], None)
    assert outcome.verdict == "pass" and "tau" in outcome.detail, outcome.detail


DEFAULTS = {row[0]: row[1] for row in table_after("- **Optional keys and their defaults**")}


def test_the_documented_defaults_are_the_defaults():
    p = Params.from_case({"policy": "rheo", "K": 3, "m": 1, "depth": 2, "budget": 2})
    expected = {
        "`beam`": ("K", p.B == 3 and p.beam is None),
        "`proxy`": ('"rheo"', p.proxy.kind == "rheo"),
        "`epsilon`": ('"0"', p.epsilon == 0),
        "`tie_break`": ('"slot"', p.tie_break == "slot"),
        "`temperature`": ('"1"', p.temperature.text == "1"),
        "`draft_top_k`": ("null (no truncation)", p.draft_top_k is None),
        "`verify`": ('"rheo"', p.verify == "rheo"),
        "`draft_law`": ('"sampled"', p.draft_law == "sampled"),
        "`arithmetic`": ('"exact"', p.arithmetic == "exact"),
        "`target_top_k`": ("null", p.target_filters.top_k is None),
        "`target_top_p`": ("null", p.target_filters.top_p is None),
        "`target_min_p`": ("null", p.target_filters.min_p is None),
        "`min_tokens`": ("0", p.sampling is None),
    }
    for key, (documented, holds) in expected.items():
        assert DEFAULTS[key] == documented, key
        assert holds, key
