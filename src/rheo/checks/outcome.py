"""What a check returns, and the profiles that size the checks (a leaf module).

Every check (``rheo.checks.gate`` runs them) returns an ``Outcome``: a verdict (pass / fail / skip),
a one-line detail and, when it has one, a counterexample dict that the gate writes to a
file. ``Profile`` sizes the checks: ``quick`` (the default), ``deep`` and ``smoke``;
``matrix`` is also the level of the ``--impl`` case matrix (``rheo.checks.cases.matrix``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

REAL_FIRST, REAL_LATER = 2000, 300  # see real_model_check
QUICK_PREFIX_CYCLES = 4_000  # the prefix law's cycles per large case in the quick profile


@dataclass(frozen=True)
class Profile:
    name: str
    matrix: str  # "smoke" | "quick" | "deep" exact matrix
    search_examples: int  # per negative control (fresh search)
    fresh_random: bool  # deep: a fresh random search each run (its seed is reported)
    fast_examples: int  # fastpath decision equality (x 3 requests each)
    fast_cycles: int  # fastpath cycle-law samples per case (every case of rheo.checks.statistics.sampling.quiet_cases)
    impl_examples: int  # decision equality: cases searched
    impl_cycles: int  # output law and cycle law: cycles per case (rheo gate --cycles)
    real_first: int = 0  # real model (a): two-token samples per policy (0: the check is not in the profile)
    real_later: int = 0  # real model (b): samples of the 12th token per policy and side
    impl_min_compared: int = 1  # decision equality fails with fewer compared cases: nothing is proven
    impl_exact_search: int = 0  # exact certification: small cases Hypothesis searches after the matrix
    impl_batched_cycles: int = 0  # batched protocol: output-law cycles per case (rheo gate --cycles)
    impl_large_vocab_cycles: int = 0  # batched protocol: cycles of the V = 32,000 first/second-token check
    impl_prefix_cycles: int = 0  # prefix law (cases beyond exact reach): cycles per case (rheo gate --cycles)
    impl_tv: float | None = None  # rheo gate --tv: statistical cases sized to detect this TV (None: fixed cycles)
    impl_time_budget: float | None = None  # rheo gate --time-budget: seconds per statistical check (None: none)
    impl_exact_budget: float | None = None  # rheo gate --exact-budget: seconds of exact certification past its minimum
    impl_cases_only: bool = False  # rheo gate --cases-only: exact certification and the output law on --cases alone
    impl_cycles_given: bool = False  # rheo gate --cycles was given: an implementation's time_budget does not apply


def statistical_budget(profile: Profile, obj: Any) -> float | None:
    """The seconds per statistical check: ``--time-budget``, else (when neither ``--cycles``
    nor ``--tv`` fixes the cycles) the implementation's own ``time_budget`` attribute, which a
    slow engine declares so that its cycles are sized to its speed (docs/gate.md)."""
    if profile.impl_time_budget is not None or profile.impl_tv is not None or profile.impl_cycles_given:
        return profile.impl_time_budget
    own = getattr(obj, "time_budget", None)
    return float(own) if isinstance(own, (int, float)) and own > 0 else None


PROFILES = {
    "quick": Profile(
        "quick",
        "quick",
        500,
        False,
        500,
        200_000,
        300,
        20_000,
        impl_min_compared=20,
        impl_exact_search=40,
        impl_batched_cycles=1_000_000,
        impl_large_vocab_cycles=20_000,
        impl_prefix_cycles=QUICK_PREFIX_CYCLES,
        impl_exact_budget=300.0,
    ),
    "deep": Profile(
        "deep",
        "deep",
        5000,
        True,
        5000,
        1_000_000,
        3000,
        100_000,
        real_first=REAL_FIRST,
        real_later=REAL_LATER,
        impl_min_compared=200,
        impl_exact_search=400,
        impl_batched_cycles=10_000_000,
        impl_large_vocab_cycles=500_000,
        impl_prefix_cycles=10_000,
    ),
    # toy sizes: every check runs in seconds. For testing rheo itself; it is not evidence.
    "smoke": Profile(
        "smoke",
        "smoke",
        500,
        False,
        20,
        2_000,
        10,
        2_000,
        impl_min_compared=3,
        impl_batched_cycles=20_000,
        impl_large_vocab_cycles=2_000,
        impl_prefix_cycles=300,
        impl_exact_budget=60.0,
    ),
}
FAMILY_ALPHA = 1e-6  # false-positive budget of each statistical check, split over its cases


@dataclass
class Outcome:
    verdict: str  # "pass" | "fail" | "skip"
    detail: str
    counterexample: dict[str, Any] | None = None  # written to OUT/<check>.json
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.verdict != "fail"


Progress = Callable[[str], None]


@dataclass
class Check:
    name: str
    group: str
    run: Callable[[Profile, Progress | None], Outcome]
    needs_torch: bool = False  # skipped, with the install command, when torch is absent
    file_stem: str | None = None  # counterexample file name (default: from the check's name)
    owner: str | None = None  # the resolved implementation file (--impl path.py:Object): names apart two of one name


@dataclass
class CheckResult:
    name: str
    group: str
    verdict: str
    seconds: float
    detail: str
    counterexample: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    picture: str | None = None  # <counterexample>.png beside it (rheo.checks.gate.pictures), if drawn

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "group": self.group,
            "verdict": self.verdict,
            "seconds": round(self.seconds, 3),
            "detail": self.detail,
            "counterexample": self.counterexample,
            "picture": self.picture,
            "data": self.data,
        }
