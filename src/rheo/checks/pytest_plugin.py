"""The ``rheo_checker`` pytest fixture, as importable before the checks moved into rooms
(CHANGELOG.md, 0.2.0); the ``rheo`` pytest plugin is ``rheo.checks.gate.pytest_plugin``.
"""

from __future__ import annotations

from rheo.checks.gate.pytest_plugin import RheoChecker, rheo_checker

__all__ = ["RheoChecker", "rheo_checker"]
