"""How many cycles a statistical case gets (``rheo gate --cycles / --tv / --time-budget``).

- a fixed count (``--cycles N``, else the profile's): every case gets N;
- ``--tv D``: each case gets the fewest cycles at which its test detects a TV of D with
  power 0.99 (``cycles_for_tv`` on the law the case is judged against);
- ``--time-budget S`` (seconds per check): each case gets its share of what is left of S,
  counted in cycles from the rate of the runs so far: a pilot that grows geometrically from
  ``MIN_CYCLES`` (x``GROWTH`` a run) while its rate covers fewer than ``PILOT_CYCLES`` cycles,
  each run no longer than the share affords at the rate measured, then the rest in one run.
  The budget is a bound: a case stops once its share is spent (past it only when its first
  ``MIN_CYCLES`` cycles alone take longer);
- both: the smaller of the two counts (the report says whether D was reached).

Either way the case's verdict states the TV its cycles reached (``detectable_tv``).
``sized_counts`` runs the cycles of one case; the pilot's runs and the rest are separate runs
with their own seeds (``run(n, part)``, part 0, 1, ...), and a count never depends on what
was sampled, only on the law, D and the clock.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from rheo.checks.statistics.goodness_of_fit import cycles_for_tv

PILOT_CYCLES = 200  # the time budget's pilot per case: its runs grow until they cover this many
MIN_CYCLES = 10  # a case never gets fewer (a time budget too short for any more); the pilot's first run
GROWTH = 4  # each pilot run at most this many times the cycles run before it


@dataclass(frozen=True)
class Sizing:
    """What sizes a statistical check's cases: ``cycles`` (used when neither ``tv`` nor
    ``time_budget`` is given), ``tv`` (the TV to detect at power 0.99), ``time_budget``
    (seconds for the whole check)."""

    cycles: int
    tv: float | None = None
    time_budget: float | None = None

    @property
    def fixed(self) -> bool:
        return self.tv is None and self.time_budget is None

    def describe(self) -> str:
        """E.g. "20000 cycles per case", "cycles per case sized to detect TV 0.05",
        "cycles per case sized to a 60 s budget", "... to detect TV 0.05 within a 60 s budget"."""
        if self.fixed:
            return f"{self.cycles} cycles per case"
        tv = f" to detect TV {self.tv:g}" if self.tv is not None else ""
        if self.time_budget is None:
            return f"cycles per case sized{tv}"
        return f"cycles per case sized{tv} {'within' if tv else 'to'} a {self.time_budget:g} s budget"


class Budget:
    """The clock of one check under ``Sizing``: each case's share of what is left."""

    def __init__(self, sizing: Sizing, cases: int) -> None:
        self.sizing, self.left_cases = sizing, cases
        self.deadline = None if sizing.time_budget is None else time.monotonic() + sizing.time_budget

    def share(self) -> float | None:
        """Seconds for the next case (None: no budget); call once per case."""
        if self.deadline is None:
            return None
        left = max(self.deadline - time.monotonic(), 0.0)
        share = left / max(self.left_cases, 1)
        self.left_cases -= 1
        return share


def sized_counts(
    run: Callable[[int, int], Counter], sizing: Sizing, share: float | None, law, alpha: float
) -> tuple[Counter, dict]:
    """One case's counts and how they were sized: ``run(n, part)`` gives the counts of n
    cycles (part 0 the first run, then 1, 2, ...: each its own seeds); ``law`` is what the
    case is judged against (for ``--tv``), ``share`` its seconds (None: none). The dict says
    ``sized_by`` and, when asked, ``tv_target``, ``cycles_for_tv``, and under a time budget
    ``pilot_cycles_per_second`` (the rate the pilot measured) and ``runs``."""
    if sizing.fixed:
        return run(sizing.cycles, 0), {"sized_by": "cycles"}
    info: dict = {"sized_by": "+".join(k for k, v in (("tv", sizing.tv), ("time_budget", share)) if v is not None)}
    want = None
    if sizing.tv is not None:
        info["tv_target"] = sizing.tv
        try:
            want = info["cycles_for_tv"] = cycles_for_tv(law, sizing.tv, alpha)
        except ValueError:  # one bin: no TV is detectable; the fixed count
            want = info["cycles_for_tv"] = None
            if share is None:
                info["sized_by"] = "cycles (one bin: no TV to size for)"
                return run(sizing.cycles, 0), info
    if share is None:
        assert want is not None
        return run(want, 0), info
    t0 = time.perf_counter()
    counts: Counter = Counter()
    done, part, step = 0, 0, MIN_CYCLES
    while step > 0:
        piloting = done < PILOT_CYCLES
        counts = counts + run(step, part)
        done, part = done + step, part + 1
        rate = done / max(time.perf_counter() - t0, 1e-9)
        if piloting:
            info["pilot_cycles_per_second"] = rate
        affordable = max(MIN_CYCLES, math.floor(rate * share))
        left = (affordable if want is None else min(want, affordable)) - done
        step = max(0, left if done >= PILOT_CYCLES else min(left, GROWTH * done))
    info["runs"] = part
    return counts, info
