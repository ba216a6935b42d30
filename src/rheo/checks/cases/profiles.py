"""Hypothesis profiles for the test suites (`rheo gate` sets its own search sizes: rheo.checks.outcome.PROFILES).

- ``dev``  (default on a workstation): few examples, quick feedback.
- ``ci``   (default when the CI environment variable is set): Hypothesis' built-in ci
  profile (derandomized, no example database, print_blob) with our example count.
- ``deep`` long searches: many examples and instances up to a much larger joint-draw cap.

Select one with ``pytest --hypothesis-profile=deep`` (or HYPOTHESIS_PROFILE=deep).
``joint_draw_cap()`` is the cap the strategies use under the active profile.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

CAPS = {"dev": 2000, "ci": 3000, "deep": 60000}
_SLOW = [HealthCheck.too_slow, HealthCheck.filter_too_much]


def register() -> None:
    builtin_ci = settings.get_profile("ci")
    settings.register_profile("dev", max_examples=25, deadline=None, suppress_health_check=_SLOW)
    settings.register_profile("ci", parent=builtin_ci, max_examples=500, deadline=None, suppress_health_check=_SLOW)
    settings.register_profile("deep", max_examples=1500, deadline=None, suppress_health_check=_SLOW)
    name = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
    settings.load_profile(name)


def joint_draw_cap() -> int:
    return CAPS.get(settings.get_current_profile_name(), CAPS["dev"])
