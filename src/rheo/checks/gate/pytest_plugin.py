"""The gate's implementation checks as a pytest fixture (registered as the ``rheo`` pytest
plugin when rheosampling is installed).

    def test_my_engine_is_lossless(rheo_checker):
        rheo_checker.check(MyEngine())               # every check rheo gate --impl runs
        rheo_checker.check("mypkg.spec:Verifier")    # or a "module:object" string

``check`` runs decision equality (for implementations that follow the uniforms), exact
certification, the output law, and the cycle law when the implementation declares
``implements_spec = True``. A failure raises AssertionError with the shrunk difference; the
counterexample is written as JSON under the test's ``tmp_path``, and its path is in the
message. ``rheo_checker.decisions(...)``, ``.exact(...)``, ``.output_law(...)`` and
``.cycle_law(...)`` run one check and return its outcome.

The implementation runs inside the test's own process: a hang or a crash of the
interpreter in it is the test's.

Specification: docs/spec.md §7 (the uniforms an implementation follows).
"""

from __future__ import annotations

import dataclasses

import pytest

from rheo.checks.differential.decision_equality import check_decisions
from rheo.checks.exact.check import check_exact
from rheo.checks.gate.checklist import impl_checks, supported_cases
from rheo.checks.gate.run import run_checks
from rheo.checks.outcome import PROFILES
from rheo.checks.protocol.load import Implementation, load_implementation
from rheo.checks.statistics.cycle_law import check_cycle_law
from rheo.checks.statistics.output_law import check_output_law


class RheoChecker:
    """The fixture's object (docs/gate.md, "From pytest: the rheo_checker fixture").

    Settings, as attributes: ``level`` ("smoke" | "quick" | "deep": the level of the cases
    drawn from what the implementation supports, rheo.checks.cases.space), ``cycles`` (per output- and cycle-law case),
    ``examples`` (decision-equality examples), ``exact_search`` (small cases searched after
    the exact matrix), ``prefix_cycles`` (per large case of the output law beyond exact
    reach), ``out_dir`` (where ``check`` writes counterexample files)."""

    def __init__(
        self, out_dir, examples: int = 300, cycles: int = 20_000, level: str = "quick", exact_search: int = 40
    ):
        self.out_dir = out_dir
        self.examples = examples
        self.cycles = cycles
        self.level = level  # rheo.checks.cases.matrix level: exact certification's matrix, the output law's spread
        self.exact_search = exact_search  # small cases Hypothesis searches after it
        self.prefix_cycles = PROFILES["quick"].impl_prefix_cycles  # per large case (rheo.checks.cases.large)

    @staticmethod
    def _impl(impl):
        if isinstance(impl, Implementation):
            return impl
        if isinstance(impl, str):
            return load_implementation(impl)
        return Implementation(impl, type(impl).__name__)

    def decisions(self, impl, examples: int | None = None, seed: int | None = 0):
        return check_decisions(self._impl(impl), examples or self.examples, seed)

    def cycle_law(self, impl, cycles: int | None = None):
        return check_cycle_law(self._impl(impl), cycles or self.cycles)

    def exact(self, impl, cases: list[dict] | None = None, search: int | None = None):
        """Exact certification on ``cases`` (default: the covering set of what it supports at
        ``level``, rheo.checks.cases.space)."""
        impl = self._impl(impl)
        cases = supported_cases(impl, "exact", self.level).cases if cases is None else cases
        return check_exact(impl, cases, self.exact_search if search is None else search)

    def output_law(self, impl, cycles: int | None = None):
        """The output law on the covering set of what it supports at ``level``."""
        impl = self._impl(impl)
        cases = supported_cases(impl, "statistical", self.level).cases
        return check_output_law(impl, cycles or self.cycles, cases=cases)

    def check(self, impl) -> list:
        """Every check, as ``rheo gate --impl`` runs them (counterexamples written under the
        test's tmp_path); raises AssertionError if one fails. Returns their results."""
        impl = self._impl(impl)
        profile = dataclasses.replace(
            PROFILES["quick"],
            matrix=self.level,
            impl_examples=self.examples,
            impl_cycles=self.cycles,
            impl_exact_search=self.exact_search,
            impl_prefix_cycles=self.prefix_cycles,
        )
        results = run_checks(impl_checks(impl), profile, self.out_dir)
        failed = [r for r in results if r.verdict == "fail"]
        if failed:
            raise AssertionError(
                "\n".join(
                    f"{impl.name}, {r.name}: {r.detail}\ncounterexample: {r.counterexample or '-'}" for r in failed
                )
            )
        return results


@pytest.fixture
def rheo_checker(tmp_path):
    """Checks an implementation of the ``rheo gate --impl`` protocol (see rheo.checks.protocol)."""
    return RheoChecker(tmp_path / "rheo-counterexamples")
