"""Every call into an implementation goes through ``watched``: the supervised worker
(``rheo.checks.protocol.worker``) sets a hook that hears of each call and its return, so
the gate can enforce ``--call-timeout`` and name the call and the case in a finding.
``describe`` writes a case's configuration in one line for those findings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rheo.reference.instance import Instance
from rheo.reference.params import Params

_CALL_HOOK: Callable[[str, str, str], None] | None = None  # set by rheo.checks.protocol.worker in its process


def set_call_hook(hook: Callable[[str, str, str], None] | None) -> None:
    """``hook(event, method, case)`` is called with event "call" before and "return" after
    every call into the implementation (the supervised worker reports them to the gate,
    which enforces --call-timeout and names the call and the case in a finding)."""
    global _CALL_HOOK
    _CALL_HOOK = hook


def describe(vocab_size: int, c: Params) -> str:
    """A case's configuration in one line, every key that is set: the case named in a
    finding (``describe_instance``) and in an exact certificate (``exact_impl``).

    >>> describe(3, Params.from_case({"policy": "rheo", "K": 3, "m": 1, "depth": 1, "budget": 2}))
    'V=3, policy rheo, m=1, K=3, depth 1, budget 2, T=1'
    """
    parts = [f"V={vocab_size}", f"policy {c.policy}"] + ([f"m={c.m}"] if c.policy == "rheo" else [])
    parts += [f"K={c.K}", f"depth {c.depth}", f"budget {c.budget}"]
    if c.beam not in (None, c.K):
        parts.append(f"beam {c.beam}")
    parts.append(f"T={c.temperature}")
    f = c.target_filters
    for key, value in (
        ("draft_top_k", c.draft_top_k),
        ("target_top_k", f.top_k),
        ("target_top_p", f.top_p),
        ("target_min_p", f.min_p),
    ):
        if value is not None:
            parts.append(f"{key} {value}")
    return ", ".join(parts)


def describe_instance(inst: Instance) -> str:
    """The case a call is made on, in one line (``describe``, cached on the instance)."""
    desc = inst.__dict__.get("_rheo_description")
    if desc is None:
        desc = inst.__dict__["_rheo_description"] = describe(inst.n, inst.config)
    return desc


def watched(method: str, inst: Instance | None, fn: Callable[..., Any], *args: Any) -> Any:
    hook = _CALL_HOOK
    if hook is None:
        return fn(*args)
    hook("call", method, describe_instance(inst) if inst is not None else "")
    try:
        out = fn(*args)
    except Exception:
        hook("return", method, "")
        raise
    # not on SystemExit: the worker is about to end inside this call, and the gate says so
    hook("return", method, "")
    return out
