"""What every engine driver shares: the case it runs and the rows it reports."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DRAFTERS = ("model", "target", "reject")  # an independent tiny model; the target's own weights; always rejected
# Sampling penalties a case may set (``EngineCase.extra``), as OpenAI's API names them; a
# driver honours those its engine applies (its ``extras``).
PENALTIES = ("repetition_penalty", "frequency_penalty", "presence_penalty")
# Stop tokens a case may set (``EngineCase.extra``): a generation ends with the first of them
# it emits (the token kept, as every engine here returns it); a driver that honours them
# lists the name in its ``extras`` and marks a wrong finish reason in the output it returns.
STOPS = "stop_token_ids"


@dataclass(frozen=True)
class EngineCase:
    """One end-to-end case: an engine method on a layer family, the sampler settings, the
    draft length, the number of generated tokens and the drafter.

    ``drafter``: "model" (a tiny model of the same family, another seed: drafts accepted and
    rejected at every depth with positive probability), "target" (the target's own weights:
    every draft accepted), "reject" (a scripted drafter proposing a token the target gives
    probability 0 after every reachable prefix: every draft rejected; needs top-k)."""

    method: str
    family: str
    temperature: float
    top_k: int | None = None
    top_p: float | None = None
    draft_len: int = 2
    n_tokens: int = 3
    drafter: str = "model"
    prompt: tuple[int, ...] = (1, 2, 3)
    vocab: int = 16
    other_prompt: tuple[int, ...] | None = None  # a mixed batch: odd requests use this prompt
    extra: tuple[tuple[str, object], ...] = field(default=())  # engine-specific settings, named

    def setting(self, name: str) -> Any:
        """The value of setting ``name`` in ``extra``, or None."""
        return dict(self.extra).get(name)

    @property
    def name(self) -> str:
        parts = [self.method, self.family, f"T={self.temperature:g}"]
        if self.top_k is not None:
            parts.append(f"top_k={self.top_k}")
        if self.top_p is not None:
            parts.append(f"top_p={self.top_p:g}")
        parts += [f"L={self.draft_len}", f"n={self.n_tokens}", f"V={self.vocab}"]
        if self.drafter != "model":
            parts.append(f"drafter={self.drafter}")
        if self.other_prompt:
            parts.append("mixed prompts")
        parts += [f"{k}={v}" for k, v in self.extra]
        return " ".join(parts)

    def to_json(self) -> dict:
        return {
            "method": self.method,
            "family": self.family,
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "draft_len": self.draft_len,
            "n_tokens": self.n_tokens,
            "drafter": self.drafter,
            "prompt": list(self.prompt),
            "vocab": self.vocab,
            **({"other_prompt": list(self.other_prompt)} if self.other_prompt else {}),
            **{k: v for k, v in self.extra},
        }


class EngineRefused(Exception):
    """The engine would not start on the case's models (not a finding about its tokens)."""


@dataclass
class Row:
    """One logits row the verifier consumed: request ``request``, the row after ``prefix``
    (prompt + tokens), the engine's logits and a teacher-forced forward's over ``prefix``."""

    request: int
    prefix: tuple[int, ...]
    engine: list[float]
    teacher: list[float] | None  # None: the engine's cache held positions no accepted token fills
    note: str = ""


def stops_of(case: EngineCase) -> frozenset[int]:
    """The case's stop tokens (``STOPS``), none by default."""
    return frozenset(int(t) for t in case.setting(STOPS) or ())


def sequence_law(case: EngineCase, next_law: Callable[[EngineCase, tuple[int, ...]], np.ndarray]) -> dict:
    """The law of ``case.n_tokens`` tokens: the product of ``next_law(case, prefix)`` (the
    law of the token after prompt + prefix) over the prefixes of positive probability; a
    prefix that ends with one of the case's stop tokens (``stops_of``) is a whole output."""
    stops = stops_of(case)
    law: dict[tuple[int, ...], float] = {(): 1.0}
    for _ in range(case.n_tokens):
        nxt: dict[tuple[int, ...], float] = {}
        for prefix, p in law.items():
            if prefix and prefix[-1] in stops:
                nxt[prefix] = p
                continue
            q = next_law(case, prefix)
            for t in np.flatnonzero(q > 0):
                nxt[prefix + (int(t),)] = p * float(q[t])
        law = nxt
    return law


def penalise(
    logits: np.ndarray,
    repeated: Sequence[int],
    counted: Sequence[int],
    repetition: float | None = None,
    frequency: float | None = None,
    presence: float | None = None,
) -> np.ndarray:
    """Logits after the sampling penalties as vLLM, llama.cpp and mlx-lm apply them to raw
    logits, before the temperature: each token in ``repeated`` has a positive logit divided
    by ``repetition`` and any other multiplied by it (CTRL's penalty); then each token's
    logit loses ``frequency`` times its count in ``counted`` and ``presence`` once if it
    occurs there (OpenAI's definition). Which tokens each engine puts in ``repeated`` and
    ``counted`` (the prompt, the output, a window of the last few) is the driver's to say."""
    out = np.array(logits, dtype=np.float64)
    if repetition is not None and repeated:
        ids = np.unique(np.asarray(repeated, dtype=np.int64))
        out[ids] = np.where(out[ids] > 0, out[ids] / repetition, out[ids] * repetition)
    if counted:
        counts = np.bincount(np.asarray(counted, dtype=np.int64), minlength=len(out))[: len(out)]
        out -= (frequency or 0.0) * counts + (presence or 0.0) * (counts > 0)
    return out
