"""The differential room: evidence decision by decision. Two engines get the same uniforms
(docs/spec.md §7) and must take the same decisions, with the margin of each decision
measured (``decisions``) so that float rounding at a threshold is set aside, never called
a difference. ``decision_equality``: an implementation against the reference (``rheo gate
--impl``); ``fastpath``: the fastpath against the reference (needs torch). The room may
import ``rheo.checks.protocol``, ``rheo.checks.cases``, ``rheo.checks.outcome``,
``rheo.reference``, ``rheo.fastpath`` and ``rheo.testing``.

The fastpath comparison's names (``check_example``, ``fast_examples``, ...) are importable
from here as before the room was split (saved replay lines name
``rheo.checks.differential.check_example``); they are loaded on first use, since they need
torch.
"""

from __future__ import annotations

from typing import Any

FASTPATH_NAMES = (
    "TEMPERATURES",
    "check_designed_ties",
    "check_example",
    "compare",
    "compare_batch",
    "designed_ties",
    "fast_configs",
    "fast_examples",
    "float32_near_tie",
    "run_example",
)


def __getattr__(name: str) -> Any:
    if name in FASTPATH_NAMES:
        from rheo.checks.differential import fastpath  # needs torch

        return getattr(fastpath, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
