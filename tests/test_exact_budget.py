"""Exact certification bounded and visible, with acceptance beside its verdict
(rheo.checks.exact.budget; docs/gate.md, "Bounded and visible" and "Acceptance beside the
verdict"). What each test would catch:

- a case that outgrows its bound must stop, skipped by name with its size and the runs done
  (before, ``--exact-budget`` did not stop a case once started: 47 minutes of silence), and
  the check still passes on the cases it certified;
- a long case must say how far it got while it runs;
- a ``supports`` that admits trees beyond reach is told so before any case starts;
- every certified case carries its tokens per cycle, acceptance rate and the reference's
  tokens per cycle on the same laws; a verifier that never accepts a draft is lossless, and
  marked so in the verdict (exactly and statistically) instead of passing silently.
"""

from __future__ import annotations

import math
import re

import pytest

torch = pytest.importorskip("torch")

from rheo.checks.exact import budget  # noqa: E402
from rheo.checks.exact import check as check_module  # noqa: E402
from rheo.checks.exact.certify import certify_implementation  # noqa: E402
from rheo.checks.exact.check import check_exact, exact_case  # noqa: E402
from rheo.checks.gate.coverage import supported_cases  # noqa: E402
from rheo.checks.protocol.load import load_implementation  # noqa: E402
from rheo.checks.statistics.output_law import check_output_law  # noqa: E402
from rheo.progress import about  # noqa: E402


def _cases(impl, **where) -> list[dict]:
    return [c for c in supported_cases(impl, "exact", "quick").cases if all(c[k] == v for k, v in where.items())]


def test_a_case_that_outgrows_its_bound_is_skipped_by_name_with_its_size_and_runs():
    impl = load_implementation("examples.without_replacement:BatchedSampledTreeAnySize")
    big = _cases(impl, K=3, depth=3)[0]
    cert = exact_case(impl, big, 200_000, None, 2.0)
    assert cert.verdict == "outgrown", cert.summary()
    assert re.match(r"outgrew the exact budget \([\d,]+ runs in \d+ s", cert.detail), cert.detail
    slots, orders = 1 + 3 + 9, math.perm(3, 3)  # a full 3-ary tree of depth 3 draws at 13 node slots
    words = f"V=3, K=3, depth 3: {slots} node slots drawing children, {orders} orders each"
    assert f"{words} (up to {about(orders**slots)} trees)" in cert.detail, cert.detail
    assert cert.runs > 0 and cert.seconds < 10


def test_the_run_cap_is_an_outgrown_case_too():
    impl = load_implementation("examples.without_replacement:BatchedSampledTreeAnySize")
    cert = certify_implementation(impl, _cases(impl, K=3, depth=3)[0], max_runs=50)
    assert cert.verdict == "outgrown" and cert.detail.startswith("needed more than the 50 runs"), cert.detail


def test_the_check_passes_on_what_it_certified_and_names_what_outgrew():
    impl = load_implementation("examples.without_replacement:BatchedSampledTreeAnySize")
    small, big = _cases(impl, K=3, depth=1)[0], _cases(impl, K=3, depth=3)[0]
    lines: list[str] = []
    out = check_exact(impl, [small, big], budget=3.0, progress=lines.append)
    assert out.verdict == "pass", out.detail
    assert out.data["certified"] == 1 and list(out.data["outgrown"]) == [big["name"]], out.data
    assert f"1 case skipped, outgrown: {big['name']} (stopped where the check's exact budget ended" in out.detail
    assert "supports admits trees the exact enumeration may not afford" in out.data["beyond_reach"]
    assert any("may not afford" in line for line in lines[:1]), lines  # said before any case starts


def test_every_case_outgrown_is_a_skip_not_a_pass_or_a_fail(monkeypatch):
    monkeypatch.setattr(check_module, "CASE_MINIMUM", 1.0)
    impl = load_implementation("examples.without_replacement:BatchedSampledTreeAnySize")
    big = _cases(impl, K=3, depth=3)[0]
    out = check_exact(impl, [{**big, "name": "big"}], budget=0.0)  # the one case: bounded by CASE_MINIMUM
    assert out.verdict == "skip" and "outgrew its bound" in out.detail, out.detail


def test_a_long_case_shows_its_progress_while_it_runs(monkeypatch):
    """Lines from inside the case (runs so far, the share of the mass, an estimate), then its
    skip: never silent while it runs."""
    monkeypatch.setenv("RHEO_PROGRESS_AFTER", "0")
    monkeypatch.setattr(budget, "PROGRESS_EVERY", 0.2)
    monkeypatch.setattr(check_module, "CASE_MINIMUM", 1.5)
    impl = load_implementation("examples.without_replacement:BatchedSampledTreeAnySize")
    big = {**_cases(impl, K=3, depth=3)[0], "name": "big"}
    lines: list[str] = []
    out = check_exact(impl, [big], budget=0.0, progress=lines.append)
    inside = [line for line in lines if line.startswith("  exact certification, big: ")]
    assert len(inside) >= 2, lines
    assert all(" runs (" in line and "runs/s" in line and "left" in line for line in inside[:-1]), inside
    assert out.verdict == "skip"


def test_the_notice_up_front_names_the_largest_tree_and_the_largest_affordable():
    cases = [
        {"vocab_size": 3, "K": 3, "depth": 3},
        {"vocab_size": 3, "K": 2, "depth": 2},
        {"vocab_size": 4, "K": 1, "depth": 4},
    ]
    notice = budget.beyond_reach(cases)
    assert notice is not None
    assert "1 case up to V=3, K=3, depth 3: 13 node slots drawing children, 6 orders each" in notice
    assert "the largest it surely affords here: V=3, K=2, depth 2" in notice
    assert budget.beyond_reach(cases[1:]) is None  # chains and small trees: nothing to say


# ---- acceptance beside the verdict ----


def test_each_certified_case_carries_its_tokens_per_cycle_and_the_references():
    impl = load_implementation("examples.without_replacement:GumbelChain")
    case = supported_cases(impl, "exact", "quick").cases[0]
    cert = exact_case(impl, case, 200_000)
    assert cert.verdict == "lossless"
    # a chain verified by standard rejection accepts as the reference's chain does: the same E|O|,
    # computed by another enumeration (the reference's class enumerator, exactly)
    assert cert.reference_tokens_per_cycle is not None and cert.tokens_per_cycle > 1
    assert cert.tokens_per_cycle == pytest.approx(cert.reference_tokens_per_cycle, abs=1e-9)
    assert cert.acceptance_rate == pytest.approx((cert.tokens_per_cycle - 1) / case["depth"])
    row = cert.to_json()
    assert {"tokens_per_cycle", "acceptance_rate", "reference_tokens_per_cycle"} <= set(row)
    assert "tokens per cycle, acceptance rate" in cert.summary()


def test_a_verifier_that_rejects_every_draft_is_lossless_but_marked_as_accepting_nothing():
    impl = load_implementation("examples.without_replacement:RejectsEveryDraft")
    cases = supported_cases(impl, "exact", "quick").cases[:3]
    out = check_exact(impl, cases)
    assert out.verdict == "pass" and out.detail.startswith("lossless (exact) on 3 cases ("), out.detail
    assert "), but accepts no draft: every cycle emits one token" in out.detail, out.detail
    assert out.data["accepts_no_draft"] is True
    assert all(row["tokens_per_cycle"] == pytest.approx(1.0) for row in out.data["cases"])
    assert "the reference on the same laws" in out.detail
    honest = check_exact(load_implementation("examples.without_replacement:GumbelChain"), cases)
    assert honest.verdict == "pass" and honest.data["accepts_no_draft"] is False, honest.detail
    stat = check_output_law(impl, 2_000, 1e-6, seed=0, cases=cases[:1])
    assert stat.verdict == "pass" and "but accepts no draft" in stat.detail, stat.detail
    assert next(iter(stat.data["cases"].values()))["tokens_per_cycle"] == 1.0
