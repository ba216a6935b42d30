"""The cases whole generations are judged on (the protocol's ``generate``,
rheo.checks.protocol): ``generation_cases(level)`` (levels "smoke", "quick", "deep"), small
generated case dicts (docs/spec.md §8) with ``n_tokens`` 3 to 5 and tables that cover every
prefix of length <= n_tokens - 1 (target and draft), so that every cycle of a generation,
wherever its root lies, reads listed laws. V 2-3 and n_tokens <= 5, since the runs of an
exact enumeration multiply with the cycles. Together they cover chains (K = 1, policy rheo,
m = 0), trees (m 0 and 1), Top-K, T in {1/2, 1, 3/2} (3/2 in float64 arithmetic) and a
target top-k; T = 0 is left out (its law is a point mass: the statistical check could not
reject anything). The implementation's ``supports`` filters them when the check runs.

``uncovered_generation_prefix(inst, n_tokens)`` finds a target prefix of positive mass,
of length <= n_tokens - 1, that a case's table does not give (``--cases``,
rheo.checks.cases.matrix.read_case_dir, refuses such a file).

>>> [c["name"] for c in generation_cases("smoke")]
['generation n=4 chain K=1 D=2 R=2 T=1', 'generation n=3 tree K=2 m=1 D=2 R=3 T=1/2']

Specification: docs/spec.md §5 (the n-token law), §8 (``n_tokens``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from rheo.reference import CaseError
from rheo.reference.generate import hashed_case

# (kind, V, K, m, depth, beam, budget, temperature, filters, n_tokens, seed)
_SMOKE: list[tuple] = [
    ("chain", 2, 1, 0, 2, 1, 2, "1", {}, 4, 1),
    ("tree", 3, 2, 1, 2, 1, 3, "1/2", {}, 3, 2),
]
_QUICK: list[tuple] = _SMOKE + [
    ("chain", 3, 1, 0, 2, 1, 2, "1/2", {"target_top_k": 2}, 3, 3),
    ("topk", 2, 2, 0, 2, 2, 3, "1", {}, 4, 4),
    ("chain", 2, 1, 0, 1, 1, 1, "3/2", {}, 5, 5),
]
_DEEP: list[tuple] = _QUICK + [
    ("tree", 2, 2, 0, 2, 2, 3, "1", {}, 5, 6),
    ("chain", 2, 1, 0, 3, 1, 3, "1", {}, 4, 7),
]
GENERATION_CASES = {"smoke": _SMOKE, "quick": _QUICK, "deep": _DEEP}


def generation_case_name(kind: str, K: int, m: int, depth: int, budget: int, T: str, filters: dict, n: int) -> str:
    """E.g. "generation n=4 chain K=1 D=2 R=2 T=1"."""
    parts = [f"generation n={n}", kind, f"K={K}"] + ([f"m={m}"] if kind == "tree" else [])
    parts += [f"D={depth}", f"R={budget}", f"T={T}"] + [k.removeprefix("target_") for k in filters]
    return " ".join(parts)


def generation_case(
    kind: str, V: int, K: int, m: int, depth: int, beam: int, budget: int, T: str, filters: dict, n: int, seed: int
) -> dict[str, Any]:
    """One generated generation case: hashed tables (``rheo.reference.generate``) at every
    prefix of length <= n - 1, target and draft."""
    cfg: dict[str, Any] = {"policy": "topk" if kind == "topk" else "rheo", "K": K, "budget": budget, "beam": beam}
    cfg.update(temperature=T, **filters)
    if kind != "topk":
        cfg["m"] = m
    if T not in ("0", "1") and not T.startswith("1/"):
        cfg["arithmetic"] = "float64"
    case = hashed_case(V, seed, n, max_weight=9, zero_share=2 if seed % 3 == 0 else 0, **cfg)
    case["target"] = {k: v for k, v in case["target"].items() if (k.count(",") + 1 if k else 0) < n}
    case.update(depth=depth, n_tokens=n)
    return {"name": generation_case_name(kind, K, m, depth, budget, T, filters, n), **case}


def generation_cases(level: str) -> list[dict[str, Any]]:
    """The generation cases of ``level`` (see the module docstring); names are unique."""
    if level not in GENERATION_CASES:
        raise ValueError(f"level must be one of {', '.join(GENERATION_CASES)}, got {level!r}")
    return [generation_case(*row) for row in GENERATION_CASES[level]]


def stop_cases(level: str) -> list[dict[str, Any]]:
    """Generations that stop (docs/spec.md §8, "Stops"): the level's first chain and first
    tree case, each with an EOS id (the token the target ranks second at the root: likely
    enough to stop often, not always) and, apart, a stop sequence of two tokens; for an
    implementation that declares ``stops = True``."""
    out = []
    base = [c for c in generation_cases(level) if c["n_tokens"] >= 3]
    for case in [next((c for c in base if c["K"] == 1), None), next((c for c in base if c["K"] > 1), None)]:
        if case is None:
            continue
        root = [float(Fraction(x)) for x in case["target"][""]]
        order = sorted(range(len(root)), key=lambda t: (-root[t], t))
        eos, first = order[min(1, len(order) - 1)], order[0]
        out.append({**case, "name": f"{case['name']} stop at EOS {eos}", "stop_token_ids": [eos]})
        out.append(
            {**case, "name": f"{case['name']} stop sequence {[first, first]}", "stop_sequences": [[first, first]]}
        )
    return out


def uncovered_generation_prefix(inst, n_tokens: int) -> CaseError | None:
    """The CaseError of the first target prefix of positive mass and length <= n_tokens - 1
    that the instance's table does not give (None when every one is given)."""
    stack: list[tuple[int, ...]] = [()]
    while stack:
        prefix = stack.pop()
        if len(prefix) >= n_tokens:
            continue
        try:
            law = inst.target_law(prefix)
        except CaseError as e:
            return e
        stack.extend(prefix + (x,) for x in range(inst.n) if law[x] > 0)
    return None
