"""Top-k and top-p composed two ways (docs/spec.md §0; examples/filter_composition.py): both
built-in target laws, an adapter declares its engine's (``filter_composition``), every
verdict with both filters on names the one it assumed."""

from __future__ import annotations

from fractions import Fraction

import pytest

from rheo.checks.cases.composition import composition_cases
from rheo.checks.exact.check import check_exact
from rheo.checks.protocol.inputs import law_instance
from rheo.checks.protocol.judged import judged_instance
from rheo.checks.protocol.load import ImplLoadError, implementation_of, load_implementation
from rheo.reference.numbers import apply_filters
from rheo.reference.params import TargetFilters

P = [Fraction(2, 5), Fraction(3, 10), Fraction(1, 5), Fraction(1, 10)]


@pytest.mark.parametrize(
    ("composition", "expected"),
    [("top_k_first", ["4/7", "3/7", "0", "0"]), ("joint", ["4/9", "1/3", "2/9", "0"])],
)
def test_the_worked_row_of_spec_section_0(composition: str, expected: list[str]) -> None:
    law = apply_filters(P, TargetFilters(top_k=3, top_p=Fraction(3, 4)), composition=composition)
    assert list(law) == [Fraction(x) for x in expected]


def test_alone_each_filter_is_the_same_either_way() -> None:
    for filters in (TargetFilters(top_k=2), TargetFilters(top_p=Fraction(3, 4)), TargetFilters(min_p=Fraction(1, 2))):
        assert apply_filters(P, filters, composition="joint") == apply_filters(P, filters)


def test_the_judged_law_follows_the_declaration() -> None:
    (case, _) = composition_cases()
    joint = judged_instance(implementation_of("examples.filter_composition:JointEngine"), law_instance(case))
    assert [float(x) for x in joint.target_law(())] == pytest.approx([4 / 9, 1 / 3, 2 / 9, 0], abs=1e-15)
    spec = judged_instance(implementation_of("examples.kernel_chain:KernelChain"), law_instance(case))
    assert [float(x) for x in spec.target_law(())] == pytest.approx([4 / 7, 3 / 7, 0, 0], abs=1e-15)


def composition_verdict(name: str, declared: str | None = None):
    impl = load_implementation(f"examples.filter_composition:{name}")  # a fresh object: it may be changed here
    if declared is not None:
        impl.obj.filter_composition = declared  # the instance's own attribute: the class keeps its own
    return check_exact(impl, composition_cases())


def test_the_fixed_engine_passes_against_its_own_law_and_the_old_verifier_fails() -> None:
    fixed = composition_verdict("JointEngine")
    assert fixed.verdict == "pass" and "target law: top-k and top-p joint" in fixed.detail, fixed.detail
    old = composition_verdict("JointEngineOldVerifier")
    assert old.verdict == "fail" and "target law: top-k and top-p joint" in old.detail, old.detail


def test_judged_against_the_spec_default_the_verdicts_would_swap() -> None:
    """What the gate did before compositions were named: it passed the old verifier and
    failed the fix."""
    assert composition_verdict("JointEngine", "top_k_first").verdict == "fail"
    old = composition_verdict("JointEngineOldVerifier", "top_k_first")
    assert old.verdict == "pass" and "top-p on the renormalised top-k law" in old.detail, old.detail


def test_an_unknown_composition_is_refused_at_load(tmp_path) -> None:
    src = tmp_path / "bad.py"
    src.write_text(
        "class Bad:\n    filter_composition = 'sideways'\n    def cycle(self, d, t, c, T):\n        return [0]\n"
    )
    with pytest.raises(ImplLoadError, match="filter_composition must be one of top_k_first, joint"):
        implementation_of(f"{src}:Bad")
