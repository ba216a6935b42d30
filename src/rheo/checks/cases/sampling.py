"""Cases with sampling parameters (docs/spec.md §9), for implementations that declare them
(``sampling_parameters``; ``rheo.checks.cases.space`` draws from these beside its pool).

Each parameter gets a setting that acts differently along different paths, so that a
history taken at the wrong place changes the law: the prompt and the tokens generated
before the cycle leave some tokens unseen (a repetition penalty, a frequency count, a
no-repeat n-gram or a bad word then depends on the drafts), a two-token bad word and a
sequence bias start at a token a draft can write, min_tokens holds the end-of-sequence id
back for two positions. Settings come alone (each variant of a parameter engines define
differently) and two together. Cases carry raw target logits with both signs (log p +
log V, rounded), since a repetition penalty depends on the sign. Every case runs in float64.

>>> cfgs = sampling_configs({"repetition_penalty", "bad_words"})
>>> sorted({tuple(sampling_names(c)) for c in cfgs})
[('bad_words',), ('repetition_penalty',), ('repetition_penalty', 'bad_words')]
>>> case = with_logits(hashed_case(3, 1, 1, policy="topk", K=1, budget=1, **SETTINGS["min_tokens"][0](3)))
>>> sorted(case)[:3], case["target_logits"][""][0] > 0 or case["target_logits"][""][0] <= 0
(['K', 'arithmetic', 'budget'], True)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any

from rheo.casefile import load_case
from rheo.checks.cases.strategies import joint_draw_bound, max_nodes
from rheo.reference.generate import hashed_case
from rheo.reference.numbers import CaseError
from rheo.reference.sampling import PARAMETERS, process_logits

__all__ = ["SETTINGS", "hashed_case", "masked_prefix", "sampling_configs", "sampling_names", "with_logits"]

Setting = Callable[[int], dict[str, Any]]


def _history(V: int) -> dict[str, Any]:
    """Token 0 twice and 1 once before the cycle; 2..V-1 unseen until a draft writes them."""
    return {"prompt": [0, 1], "generated": [0]}


def _setting(**values: Any) -> Setting:
    return lambda V: {**_history(V), **values}


SETTINGS: dict[str, list[Setting]] = {
    "repetition_penalty": [
        _setting(repetition_penalty=1.8, repetition_penalty_form="sign"),
        _setting(repetition_penalty=1.8, repetition_penalty_form="divide"),
    ],
    "frequency_penalty": [_setting(frequency_penalty=0.6)],
    "presence_penalty": [_setting(presence_penalty=0.9)],
    "logit_bias": [lambda V: {**_history(V), "logit_bias": {"1": 1.5, str(V - 1): -1.0}}],
    "sequence_bias": [_setting(sequence_bias={"0,2": 1.4, "2,1": -1.1})],
    # [2, 0]: after a drafted 2, 0 is banned; [1, 0, 1]: the history ends with 1, 0 (prompt and
    # generated) but the output alone does not, so the two scopes give different laws at the
    # root (1 banned or not), and 2 stays drawable there for the first word to act on
    "bad_words": [
        _setting(bad_words=[[2, 0], [1, 0, 1]], bad_words_scope="prompt_and_generated"),
        _setting(bad_words=[[2, 0], [1, 0, 1]], bad_words_scope="generated"),
    ],
    "no_repeat_ngram_size": [_setting(no_repeat_ngram_size=2)],
    "allowed_token_ids": [lambda V: {**_history(V), "allowed_token_ids": [t for t in range(V) if t != 1]}],
    "min_tokens": [lambda V: {**_history(V), "min_tokens": 3, "eos_token_id": [V - 1]}],
}
assert tuple(SETTINGS) == PARAMETERS

TEMPERATURES = ("1", "1/2", "0")
SHAPES_MAX_DRAWS = 60  # the shapes sampling settings are tried on: cheap to certify


def sampling_names(case: dict[str, Any]) -> list[str]:
    """The sampling parameters a case (or config) sets, in ``PARAMETERS`` order."""
    return [p for p in PARAMETERS if case.get(p) not in (None, 0, [], {})]


def _shapes() -> list[dict[str, Any]]:
    out = []
    for policy, K, m, depth in itertools.product(("rheo", "topk"), (1, 2, 3), (0, 1), (1, 2)):
        if (policy == "topk" and m) or m >= K:
            continue
        V = 3 if depth == 2 or K < 3 else 4
        if joint_draw_bound(V, policy, K, m, depth, K) > SHAPES_MAX_DRAWS:
            continue
        for budget in sorted({K, min(max_nodes(K, depth, K), K + 2)}):  # the root's pool, and deeper
            shape = {"vocab_size": V, "policy": policy, "K": K, "depth": depth, "beam": K, "budget": budget}
            if policy == "rheo":
                shape["m"] = m
            out.append(shape)
    return out


def sampling_configs(names: Iterable[str]) -> list[dict[str, Any]]:
    """Candidate configurations (case dicts without tables) with the sampling parameters
    ``names``: each setting alone, and each pair of parameters together (their first
    settings), on every cheap shape (``_shapes``) at T = 1, 1/2 and 0, in float64."""
    wanted = [p for p in PARAMETERS if p in set(names)]
    combos: list[list[Setting]] = [[s] for p in wanted for s in SETTINGS[p]]
    combos += [[SETTINGS[a][0], SETTINGS[b][0]] for a, b in itertools.combinations(wanted, 2)]
    out = []
    for shape in _shapes():
        V = shape["vocab_size"]
        for combo in combos:
            values: dict[str, Any] = {}
            for setting in combo:
                values.update(setting(V))
            for t in TEMPERATURES:
                out.append({**shape, "temperature": t, "draft_top_k": None, "arithmetic": "float64", **values})
    return out


def with_logits(case: dict[str, Any]) -> dict[str, Any]:
    """The case with its target probabilities given as raw logits of both signs:
    log p + log V, rounded to 6 decimals ("-inf" where p = 0), in float64."""
    out = {k: v for k, v in case.items() if k != "target"}
    V = case["vocab_size"]

    def logit(x: Any) -> float | str:
        p = float(Fraction(str(x)))
        return "-inf" if p == 0 else round(math.log(p * V), 6)

    out["target_logits"] = {k: [logit(x) for x in law] for k, law in case["target"].items()}
    out["arithmetic"] = "float64"
    return out


def masked_prefix(case: dict[str, Any]) -> tuple[int, ...] | None:
    """The first prefix (length <= depth) where the sampling parameters mask every token,
    or None: a case with one has no law there, so the drawing leaves it out."""
    inst = load_case(case)
    s = inst.config.sampling
    if s is None:
        return None
    for length in range(int(case["depth"]) + 1):
        for prefix in itertools.product(range(inst.n), repeat=length):
            try:
                logits = process_logits(inst.raw_target_logits(prefix), s, prefix)
            except CaseError:
                return prefix
            if all(x == -math.inf for x in logits):
                return prefix
    return None
