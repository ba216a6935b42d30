"""The gate's implementation checks as a pytest fixture (registered as the ``rheo`` pytest
plugin when rheosampling is installed).

    def test_my_engine_is_lossless(rheo_checker):
        rheo_checker.check(MyEngine())               # decision equality + cycle law
        rheo_checker.check("mypkg.spec:Verifier")    # or a "module:object" string

A failure raises AssertionError with the shrunk difference; the counterexample is written
as JSON under the test's ``tmp_path``, and its path is in the message. ``rheo_checker.
decisions(...)`` and ``.cycle_law(...)`` run one check and return its outcome.
"""
from __future__ import annotations

import json

import pytest


class RheoChecker:
    def __init__(self, out_dir, examples: int = 300, cycles: int = 20_000):
        self.out_dir = out_dir
        self.examples = examples
        self.cycles = cycles

    @staticmethod
    def _impl(impl):
        from rheo.harness import Implementation, load_implementation
        if isinstance(impl, Implementation):
            return impl
        if isinstance(impl, str):
            return load_implementation(impl)
        return Implementation(impl, type(impl).__name__)

    def decisions(self, impl, examples: int | None = None, seed: int | None = 0):
        from rheo.harness import check_decisions
        return check_decisions(self._impl(impl), examples or self.examples, seed)

    def cycle_law(self, impl, cycles: int | None = None):
        from rheo.harness import check_cycle_law
        return check_cycle_law(self._impl(impl), cycles or self.cycles)

    def check(self, impl) -> list:
        """Both checks; raises at the first that fails. Returns their outcomes."""
        impl = self._impl(impl)
        outcomes = []
        for name, run in (("decision equality", self.decisions), ("cycle law", self.cycle_law)):
            outcome = run(impl)
            outcomes.append(outcome)
            if not outcome.passed:
                where = "-"
                if outcome.counterexample is not None:
                    self.out_dir.mkdir(parents=True, exist_ok=True)
                    path = self.out_dir / f"{name.replace(' ', '-')}.json"
                    path.write_text(json.dumps(outcome.counterexample, indent=1))
                    where = str(path)
                raise AssertionError(f"{impl.name}, {name}: {outcome.detail}\ncounterexample: {where}")
        return outcomes


@pytest.fixture
def rheo_checker(tmp_path):
    """Checks an implementation of the ``rheo gate --impl`` protocol (see rheo.harness)."""
    return RheoChecker(tmp_path / "rheo-counterexamples")
