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
