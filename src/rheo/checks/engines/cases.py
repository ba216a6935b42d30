"""The end-to-end cases of each engine method on each layer family, per profile
(docs/engines.md, "Cases"). Each is (check, case): the check runs on it (``verdicts``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rheo.integrations.engines.base import STOPS, EngineCase

STATISTICAL_SAMPLES = {"smoke": 2_000, "quick": 10_000, "deep": 20_000}
LOOKUP_PROMPT = (1, 2, 3, 1, 2)  # its last token was followed by 3, 1 before: prompt lookup proposes them


def _prompt(method: str) -> tuple[int, ...]:
    return LOOKUP_PROMPT if method == "prompt_lookup" else (1, 2, 3)


MIXED_PROMPTS = ((1, 2, 3, 1, 2), (4, 5, 4, 5))  # both with repeats: n-gram drafters propose
# A prompt of more than two KV blocks of 32 (vLLM with EAGLE recomputes the last cached block)
# and several prefill chunks, repeating so that n-gram drafters propose.
LONG_PROMPT = (1, 2, 3, 4, 5) * 14
LONG_SETTINGS = {"prefix_cache": True, "prefill_chunk": 16}  # EngineCase.extra of the long-prompt cases
SHORT_LONG_PROMPT = (1, 2, 3, 4, 5) * 3  # the exact checks' long prompt: 4 prefill chunks of 4
SHORT_LONG_SETTINGS = {"prefix_cache": True, "prefill_chunk": 4}
# The penalties cases' settings (base.PENALTIES), each case taking those its driver honours,
# and prompt: many distinct tokens for the repetition penalty to reach (an engine that shows
# its penalty only some of them samples another law), a repeat for n-gram drafters.
PENALTY_SETTINGS = {"repetition_penalty": 2.0, "frequency_penalty": 0.5, "presence_penalty": 0.5}
PENALTY_PROMPT = (1, 2, 3, 4, 5, 6, 1, 2)


def _with_extra(driver: Any, case: EngineCase, settings: dict[str, Any]) -> EngineCase | None:
    """``case`` with each of ``settings`` the driver honours (its ``extras``) and takes on
    this case (its ``supports``); None when it takes none of them."""
    honoured = tuple(
        (k, v)
        for k, v in settings.items()
        if k in getattr(driver, "extras", ()) and driver.supports(replace(case, extra=((k, v),))) is None
    )
    return replace(case, extra=honoured) if honoured else None


def _stopping(driver: Any, case: EngineCase) -> EngineCase | None:
    """``case`` with a stop token (``STOPS``): the second token of the target's greedy output
    after its prompt, so that a greedy generation stops there, inside a step whose accepted
    drafts run past it (they must be dropped); None where the driver does not honour stops."""
    if driver is None or STOPS not in getattr(driver, "extras", ()) or driver.supports(case) is not None:
        return None
    greedy = next(iter(driver.reference_law(replace(case, temperature=0.0, top_k=None, top_p=None))))
    return replace(case, extra=((STOPS, (greedy[1],)),))


def served_cases(method: str, family: str, profile: str, driver: Any = None) -> list[tuple[str, EngineCase]]:
    """(check, case) for an engine whose draws cannot be followed: statistical runs (a
    mixed batch of two prompts where the driver ``batches``, then filters: top-p too where
    its reference mirrors it, ``top_p``), greedy decoding, where the driver takes per-request
    seeds (``seeds``) seeded requests, where it shows its logits (``verified_rows``) the
    differential check, and where it honours them (``extras``) the sampling penalties
    (sampled and greedy), a long prompt served from the prefix cache and prefilled in
    chunks, with 4 drafts a step, sampled and greedy, and a stop token (``_stopping``),
    sampled and greedy."""
    a, b = MIXED_PROMPTS
    batches, top_p, seeds = (getattr(driver, k, True) for k in ("batches", "top_p", "seeds"))
    other = b if batches else None
    out: list[tuple[str, EngineCase]] = [
        ("statistical", EngineCase(method, family, 1.0, n_tokens=3, draft_len=2, prompt=a, other_prompt=other)),
        ("statistical", EngineCase(method, family, 0.7, top_k=3, top_p=0.9 if top_p else None, n_tokens=3, prompt=a)),
        ("greedy", EngineCase(method, family, 0.0, n_tokens=4, draft_len=2, prompt=a, other_prompt=other)),
    ]
    if seeds:
        out.append(("seeded", EngineCase(method, family, 1.0, n_tokens=4, draft_len=2, prompt=a)))
    if hasattr(driver, "verified_rows"):
        out.append(("differential", EngineCase(method, family, 1.0, n_tokens=4, draft_len=2, prompt=a)))
    if hasattr(driver, "reported"):
        out.append(("logprobs", EngineCase(method, family, 1.0, n_tokens=4, draft_len=2, prompt=a)))
    if profile == "smoke":
        return out[:1] + out[2:3]
    penalised = _with_extra(
        driver, EngineCase(method, family, 1.0, n_tokens=3, prompt=PENALTY_PROMPT), PENALTY_SETTINGS
    )
    if penalised:
        out += [("statistical", penalised), ("greedy", replace(penalised, temperature=0.0, n_tokens=4))]
    long = _with_extra(
        driver, EngineCase(method, family, 1.0, n_tokens=3, draft_len=4, prompt=LONG_PROMPT), LONG_SETTINGS
    )
    if long:
        out += [("statistical", long), ("greedy", replace(long, temperature=0.0, n_tokens=4))]
    stopped = _stopping(driver, EngineCase(method, family, 1.0, n_tokens=3, draft_len=2, prompt=a))
    if stopped:
        out += [("statistical", stopped), ("greedy", replace(stopped, temperature=0.0, n_tokens=5, draft_len=3))]
    return out


def engine_cases(
    method: str, family: str, profile: str, statistical: bool, driver: Any = None
) -> list[tuple[str, EngineCase]]:
    """(check, case) for one method on one family of an engine whose draws can be followed.
    ``statistical``: add the seeded statistical run (a larger vocabulary, no filter) that
    confirms the exact verdicts. Where the driver honours them (``extras``), a longer
    prompt with 4 drafts a step, prefilled in chunks in one case, its start served from a
    prompt cache in another, the sampling penalties and a stop token (``_stopping``), each
    exact, and greedy."""
    p = _prompt(method)
    small: dict[str, Any] = {"vocab": 8, "n_tokens": 3, "draft_len": 2, "prompt": p}
    out: list[tuple[str, EngineCase]] = [
        ("exact", EngineCase(method, family, 1.0, top_k=2, **small)),
        ("differential", EngineCase(method, family, 1.0, top_k=2, **{**small, "n_tokens": 4})),
        ("greedy", EngineCase(method, family, 0.0, draft_len=4, n_tokens=4, prompt=p)),
    ]
    if hasattr(driver, "reported"):  # the values it reports beside its tokens
        out.append(("logprobs", EngineCase(method, family, 1.0, top_k=2, **{**small, "n_tokens": 4})))
    if method == "assisted" and profile != "smoke":
        out += [
            ("exact", EngineCase(method, family, 1.0, top_k=2, drafter="target", **small)),
            ("exact", EngineCase(method, family, 1.0, top_k=2, drafter="reject", **small)),
            ("exact", EngineCase(method, family, 0.5, top_k=3, top_p=0.8, **{**small, "draft_len": 1})),
        ]
    case = EngineCase(method, family, 1.0, top_k=2, **{**small, "draft_len": 4, "prompt": SHORT_LONG_PROMPT})
    if profile != "smoke":  # one setting a case, so that a failure names the one that breaks
        for setting in SHORT_LONG_SETTINGS.items():
            long = _with_extra(driver, case, dict([setting]))
            out += [("exact", long)] if long else []
        small_penalised = EngineCase(method, family, 1.0, top_k=3, **{**small, "prompt": PENALTY_PROMPT})
        penalised = _with_extra(driver, small_penalised, PENALTY_SETTINGS)
        if penalised:
            greedy = replace(penalised, temperature=0.0, top_k=None, vocab=16, draft_len=4, n_tokens=4)
            out += [("exact", penalised), ("greedy", greedy)]
        stopped = _stopping(driver, EngineCase(method, family, 1.0, top_k=2, **small))
        if stopped:
            greedy = replace(stopped, temperature=0.0, top_k=None, draft_len=4, n_tokens=5)
            out += [("exact", stopped), ("greedy", greedy)]
    if method == "assisted" and profile == "deep":
        out.append(("exact", EngineCase(method, family, 1.0, top_k=2, **{**small, "n_tokens": 4, "draft_len": 3})))
    if statistical:
        out.append(("statistical", EngineCase(method, family, 1.0, vocab=16, n_tokens=2, draft_len=2, prompt=p)))
    return out
