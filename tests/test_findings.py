"""Every finding shown (issue 36, item 4): an implementation that is lossy on some cases and
crashes on others gets both in exact certification's headline, JSON and counterexample file,
with the lossy case first (shrunk by Hypothesis where the search finds one)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from examples.without_replacement import UntemperedKeys
from rheo.checks.exact.check import check_exact
from rheo.checks.protocol.load import load_implementation
from tests.test_without_replacement import small_cases


class CrashesOnFour(UntemperedKeys):
    """Lossy where T != 1 (untempered Gumbel keys), and raises on every V = 4 case."""

    def cycle(self, draft_logits, target_logits, config: dict, temperature: float) -> list[int]:
        if config["vocab_size"] == 4:
            raise RuntimeError("no kernel for a vocabulary of 4")
        return super().cycle(draft_logits, target_logits, config, temperature)


def test_a_crash_does_not_hide_a_lossy_law():
    impl = load_implementation("tests.test_findings:CrashesOnFour")
    cases = small_cases(impl)
    assert {c["vocab_size"] for c in cases} >= {3, 4}
    outcome = check_exact(impl, cases, search_examples=12, seed=0)
    assert outcome.verdict == "fail"
    assert outcome.detail.startswith("not lossless (exact)"), outcome.detail
    assert "also failed on" in outcome.detail and "RuntimeError: no kernel for a vocabulary of 4" in outcome.detail
    saved = outcome.counterexample
    assert saved is not None and saved["verdict"] == "not lossless (exact)"
    assert saved["also_crashed"] and all(c["verdict"] == "crashed" for c in saved["also_crashed"])
    assert outcome.data["crashed"]
    if outcome.data["search"]["found"]:  # the shrunk lossy case is the one saved
        assert saved["shrunk"] is True and saved["case"]["vocab_size"] != 4


def test_a_crash_does_not_hide_a_lossy_law_in_the_output_law():
    """The output law runs every case whatever one raised: a rejected law leads the headline,
    the crash follows it, and the counterexample holds both (``also_crashed``)."""
    from rheo.checks.statistics.output_law import check_output_law

    impl = load_implementation("tests.test_findings:CrashesOnFour")
    cases = [c for c in small_cases(impl) if c["temperature"] not in ("1", 1)]
    cases = [c for c in cases if c["vocab_size"] == 3][:2] + [c for c in cases if c["vocab_size"] == 4][:1]
    assert len(cases) == 3, [c["name"] for c in cases]
    outcome = check_output_law(impl, 4_000, cases=cases, min_cases=1)
    assert outcome.verdict == "fail"
    assert outcome.detail.startswith("not lossless on"), outcome.detail
    assert (
        "also broke the protocol on 1 case(s)" in outcome.detail and "no kernel for a vocabulary of 4" in outcome.detail
    )
    assert outcome.counterexample["also_crashed"][0]["case"]["vocab_size"] == 4
    assert outcome.data["crashed"] == [cases[2]["name"]]
