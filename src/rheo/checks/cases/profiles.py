"""Hypothesis profiles for the test suites (`rheo gate` sets its own search sizes: rheo.checks.outcome.PROFILES).

- ``dev``  (default on a workstation): few examples, quick feedback.
- ``ci``   (default when the CI environment variable is set): Hypothesis' built-in ci
  profile (derandomized, no example database, print_blob) with our example count.
- ``deep`` long searches: many examples and instances up to a much larger joint-draw cap.
- ``mutants`` (bench/mutants.sh, bench/recheck_survivors.py): the dev profile's examples,
  derandomized (a mutant's verdict is the same in every run, so the ledger can keep it) and
  without the shrink phase (a killed mutant needs a failure, not its smallest form).

Select one with ``pytest --hypothesis-profile=deep`` (or HYPOTHESIS_PROFILE=deep).
``joint_draw_cap()`` is the cap the strategies use under the active profile.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

CAPS = {"dev": 2000, "ci": 3000, "deep": 60000}  # any other profile: dev's
_SLOW = [HealthCheck.too_slow, HealthCheck.filter_too_much]


def register() -> None:
    builtin_ci = settings.get_profile("ci")
    settings.register_profile("dev", max_examples=25, deadline=None, suppress_health_check=_SLOW)
    settings.register_profile("ci", parent=builtin_ci, max_examples=500, deadline=None, suppress_health_check=_SLOW)
    settings.register_profile("deep", max_examples=1500, deadline=None, suppress_health_check=_SLOW)
    settings.register_profile(
        "mutants",
        parent=settings.get_profile("dev"),
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        report_multiple_bugs=False,
    )
    name = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
    settings.load_profile(name)


def joint_draw_cap() -> int:
    return CAPS.get(settings.get_current_profile_name(), CAPS["dev"])
