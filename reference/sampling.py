"""Sampling parameters: what a request does to the target's raw logits before temperature
(docs/spec.md §9): penalties, biases, bad words, no-repeat n-grams, an allowed list and
min_tokens, each with the history of the position it acts at.

The tree algorithm does not change: ``Instance.target_law(prefix)`` is the law of the
processed logits ``process_logits(raw logits at prefix, sampling, prefix)``, then
temperature and the target filters (§0). The arithmetic is float64: the exponential of a
bias or of a penalised logit is not rational.

>>> s = SamplingParameters(prompt=(0, 1), repetition_penalty=2.0)
>>> process_logits([1.0, -1.0, 0.0], s, ())
[0.5, -2.0, 0.0]
>>> process_logits([1.0, -1.0, 0.0], s.replace(repetition_penalty_form="divide"), ())
[0.5, -0.5, 0.0]
>>> s = SamplingParameters(bad_words=((2, 0),), bad_words_scope="generated")
>>> process_logits([0.0, 0.0, 0.0], s, (2,))
[-inf, 0.0, 0.0]
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from .numbers import CaseError

RepetitionForm = Literal["sign", "divide"]
BadWordsScope = Literal["prompt_and_generated", "generated"]
Prefix = tuple[int, ...]

PARAMETERS = (
    "repetition_penalty",
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
    "sequence_bias",
    "bad_words",
    "no_repeat_ngram_size",
    "allowed_token_ids",
    "min_tokens",
)
"""The parameter names an implementation may declare in ``sampling_parameters``."""

VARIANTS = ("repetition_penalty_form", "bad_words_scope")  # how an engine defines one
HISTORY = ("prompt", "generated")
EXTRA = ("eos_token_id",)  # read with min_tokens
CASE_KEYS = PARAMETERS + VARIANTS + HISTORY + EXTRA
NEG_INF = float("-inf")


@dataclass(frozen=True)
class SamplingParameters:
    """The sampling parameters of one request, under the case-file names (docs/spec.md §9).
    None (or an empty collection, 0 for min_tokens) = off. ``prompt`` and ``generated``
    are the tokens before the generation and before the cycle."""

    prompt: tuple[int, ...] = ()
    generated: tuple[int, ...] = ()
    repetition_penalty: float | None = None
    repetition_penalty_form: RepetitionForm = "sign"
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    logit_bias: tuple[tuple[int, float], ...] = ()
    sequence_bias: tuple[tuple[tuple[int, ...], float], ...] = ()
    bad_words: tuple[tuple[int, ...], ...] = ()
    bad_words_scope: BadWordsScope = "prompt_and_generated"
    no_repeat_ngram_size: int | None = None
    allowed_token_ids: tuple[int, ...] | None = None
    min_tokens: int = 0
    eos_token_id: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        _choice("repetition_penalty_form", self.repetition_penalty_form, RepetitionForm)
        _choice("bad_words_scope", self.bad_words_scope, BadWordsScope)
        r = self.repetition_penalty
        if r is not None and not (_finite(r) and r > 0):
            raise CaseError("repetition_penalty", f"must be a number > 0 (1 = off), got {r!r}")
        for name in ("frequency_penalty", "presence_penalty"):
            v = getattr(self, name)
            if v is not None and not _finite(v):
                raise CaseError(name, f"must be a finite number, got {v!r}")
        for tok, b in self.logit_bias:
            if not _finite(b):
                raise CaseError(f'logit_bias["{tok}"]', f"must be a finite number, got {b!r}")
        for seq, b in self.sequence_bias:
            if not seq:
                raise CaseError("sequence_bias", 'a key names one or more token ids joined by ",", got ""')
            if not _finite(b):
                raise CaseError(f'sequence_bias["{_key(seq)}"]', f"must be a finite number, got {b!r}")
        for i, word in enumerate(self.bad_words):
            if not word:
                raise CaseError(f"bad_words[{i}]", "must list one or more token ids, got []")
        if self.no_repeat_ngram_size is not None:
            _int("no_repeat_ngram_size", self.no_repeat_ngram_size, 1)
        if self.allowed_token_ids is not None and not self.allowed_token_ids:
            raise CaseError("allowed_token_ids", "must list one or more token ids (leave it out to allow every token)")
        _int("min_tokens", self.min_tokens, 0)
        if self.min_tokens > 0 and not self.eos_token_id:
            raise CaseError("eos_token_id", "is required when min_tokens > 0: the end-of-sequence id(s) it holds back")

    @property
    def active(self) -> tuple[str, ...]:
        """The parameters that are set (in ``PARAMETERS`` order)."""
        return tuple(name for name in PARAMETERS if _is_set(self, name))

    def replace(self, **changes: Any) -> SamplingParameters:
        return dataclasses.replace(self, **changes)

    def token_ids(self) -> list[tuple[str, int]]:
        """Every (field, token id) the parameters name: checked against the vocabulary."""
        out = [(f"prompt[{i}]", t) for i, t in enumerate(self.prompt)]
        out += [(f"generated[{i}]", t) for i, t in enumerate(self.generated)]
        out += [(f'logit_bias["{t}"]', t) for t, _ in self.logit_bias]
        out += [(f'sequence_bias["{_key(s)}"]', t) for s, _ in self.sequence_bias for t in s]
        out += [(f"bad_words[{i}]", t) for i, w in enumerate(self.bad_words) for t in w]
        out += [(f"allowed_token_ids[{i}]", t) for i, t in enumerate(self.allowed_token_ids or ())]
        out += [(f"eos_token_id[{i}]", t) for i, t in enumerate(self.eos_token_id)]
        return out

    @staticmethod
    def from_case(case: Mapping[str, Any]) -> SamplingParameters | None:
        """The sampling keys of a case dict (``CASE_KEYS``), read and checked; None when no
        parameter is set (a prompt alone changes nothing)."""
        kw: dict[str, Any] = {}
        for name in HISTORY:
            if case.get(name) is not None:
                kw[name] = _ids(case[name], name)
        for name in ("repetition_penalty", "frequency_penalty", "presence_penalty"):
            if case.get(name) is not None:
                kw[name] = _float(case[name], name)
        for name in VARIANTS:
            if case.get(name) is not None:
                kw[name] = case[name]
        if case.get("logit_bias") is not None:
            pairs = [
                (_id(k, f'logit_bias["{k}"]'), _float(v, f'logit_bias["{k}"]')) for k, v in _items(case, "logit_bias")
            ]
            kw["logit_bias"] = tuple(sorted(pairs))
        if case.get("sequence_bias") is not None:
            kw["sequence_bias"] = tuple(
                sorted(
                    (_seq(k, f'sequence_bias["{_key(k)}"]'), _float(v, f'sequence_bias["{_key(k)}"]'))
                    for k, v in _items(case, "sequence_bias")
                )
            )
        if case.get("bad_words") is not None:
            words = case["bad_words"]
            if not isinstance(words, Sequence) or isinstance(words, str):
                raise CaseError("bad_words", f"must be a list of token-id lists, got {words!r}")
            kw["bad_words"] = tuple(_ids(w, f"bad_words[{i}]") for i, w in enumerate(words))
        if case.get("no_repeat_ngram_size") is not None:
            kw["no_repeat_ngram_size"] = case["no_repeat_ngram_size"]
        if case.get("allowed_token_ids") is not None:
            kw["allowed_token_ids"] = _ids(case["allowed_token_ids"], "allowed_token_ids")
        if case.get("min_tokens") is not None:
            kw["min_tokens"] = case["min_tokens"]
        eos = case.get("eos_token_id")
        if eos is not None:
            kw["eos_token_id"] = (_id(eos, "eos_token_id"),) if isinstance(eos, int) else _ids(eos, "eos_token_id")
        s = SamplingParameters(**kw)
        return s if s.active else None

    def to_case(self) -> dict[str, Any]:
        """The case-file spelling: the history, then every parameter that is set."""
        out: dict[str, Any] = {"prompt": list(self.prompt), "generated": list(self.generated)}
        for name in self.active:
            value: Any = getattr(self, name)
            if name == "logit_bias":
                value = {str(t): b for t, b in value}
            elif name == "sequence_bias":
                value = {_key(s): b for s, b in value}
            elif name == "bad_words":
                value = [list(w) for w in value]
            elif name == "allowed_token_ids":
                value = list(value)
            out[name] = value
            if name == "repetition_penalty":
                out["repetition_penalty_form"] = self.repetition_penalty_form
            elif name == "bad_words":
                out["bad_words_scope"] = self.bad_words_scope
            elif name == "min_tokens":
                out["eos_token_id"] = list(self.eos_token_id)
        return out

    def to_protocol(self) -> dict[str, Any]:
        """The config entries an ``--impl`` implementation receives (rheo.checks.protocol):
        Python types (logit_bias {int: float}, sequence_bias {tuple: float})."""
        out = self.to_case()
        if "logit_bias" in out:
            out["logit_bias"] = dict(self.logit_bias)
        if "sequence_bias" in out:
            out["sequence_bias"] = dict(self.sequence_bias)
        return out


def history(sampling: SamplingParameters, path: Prefix) -> tuple[int, ...]:
    """h: every token before the position after ``path`` (prompt + generated + path)."""
    return sampling.prompt + sampling.generated + tuple(path)


def process_logits(logits: Sequence[float], sampling: SamplingParameters, path: Prefix) -> list[float]:
    """Steps 1-7 of docs/spec.md §9 on the raw logits at the position after ``path`` (the
    tokens since the cycle root), in float64; -inf marks a masked token."""
    s = sampling
    out = [float(x) for x in logits]
    n = len(out)
    h = history(s, path)
    o = s.generated + tuple(path)
    if s.allowed_token_ids is not None:  # 1
        allowed = set(s.allowed_token_ids)
        out = [x if i in allowed else NEG_INF for i, x in enumerate(out)]
    scope = h if s.bad_words_scope == "prompt_and_generated" else o
    for word in s.bad_words:  # 2
        if len(word) == 1 or _ends_with(scope, word[:-1]):
            out[word[-1]] = NEG_INF
    N = s.no_repeat_ngram_size
    if N is not None and len(h) >= N - 1:  # 3
        tail = h[len(h) - (N - 1) :] if N > 1 else ()
        for i in range(len(h) - N + 1):
            if h[i : i + N - 1] == tail:
                out[h[i + N - 1]] = NEG_INF
    if len(o) < s.min_tokens:  # 4
        for eos in s.eos_token_id:
            out[eos] = NEG_INF
    for tok, b in s.logit_bias:  # 5
        out[tok] += b
    for seq, b in s.sequence_bias:
        if len(seq) == 1 or _ends_with(h, seq[:-1]):
            out[seq[-1]] += b
    r = s.repetition_penalty
    if r is not None:  # 6
        for tok in set(h):
            x = out[tok]
            out[tok] = x / r if (x > 0 or s.repetition_penalty_form == "divide") else x * r
    counts = Counter(o)
    f, p = s.frequency_penalty or 0.0, s.presence_penalty or 0.0
    if f or p:  # 7
        for tok, c in counts.items():
            out[tok] -= f * c + p
    assert len(out) == n
    return out


def softmax(logits: Sequence[float], field: str = "target_logits") -> tuple[float, ...]:
    """The law of ``logits`` (float64; -inf -> 0). Every entry -inf has no law: CaseError."""
    top = max(logits)
    if top == NEG_INF:
        raise CaseError(field, "every token is masked here (-inf), so there is no law to sample from")
    if not math.isfinite(top):
        raise CaseError(field, f"a logit is {top}; logits are finite numbers or -inf")
    e = [math.exp(x - top) for x in logits]
    total = math.fsum(e)
    return tuple(x / total for x in e)


def _ends_with(seq: Sequence[int], tail: Sequence[int]) -> bool:
    return len(tail) <= len(seq) and tuple(seq[len(seq) - len(tail) :]) == tuple(tail)


def _is_set(s: SamplingParameters, name: str) -> bool:
    v = getattr(s, name)
    if name == "min_tokens":
        return bool(v)
    if name == "allowed_token_ids":
        return v is not None
    return v is not None and v != ()


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _choice(name: str, value: object, kind: Any) -> None:
    if value not in get_args(kind):
        raise CaseError(name, f"must be one of {', '.join(repr(c) for c in get_args(kind))}, got {value!r}")


def _int(name: str, value: object, lo: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise CaseError(name, f"must be an integer >= {lo}, got {value!r}")


def _float(value: object, field: str) -> float:
    if isinstance(value, bool):
        raise CaseError(field, f"must be a number, got {value!r}")
    try:
        x = float(value)  # type: ignore[arg-type]  # str, Decimal, Fraction, int, float
    except (TypeError, ValueError):
        raise CaseError(field, f"must be a number, got {value!r}") from None
    if not math.isfinite(x):
        raise CaseError(field, f"must be a finite number, got {value!r}")
    return x


def _id(value: object, field: str) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CaseError(field, f"must be a token id (an integer >= 0), got {value!r}")
    return value


def _ids(value: object, field: str) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise CaseError(field, f"must be a list of token ids, got {value!r}")
    return tuple(_id(v, f"{field}[{i}]") for i, v in enumerate(value))


def _seq(key: object, field: str) -> tuple[int, ...]:
    if isinstance(key, tuple):
        return tuple(_id(t, field) for t in key)
    if isinstance(key, int) and not isinstance(key, bool):
        return (key,)
    if not isinstance(key, str) or not key:
        raise CaseError(field, f'keys are token ids joined by "," (e.g. "3,1"), got {key!r}')
    parts = key.split(",")
    if not all(p.strip().isdigit() for p in parts):
        raise CaseError(field, f'keys are token ids joined by "," (e.g. "3,1"), got {key!r}')
    return tuple(int(p) for p in parts)


def _items(case: Mapping[str, Any], name: str) -> list[tuple[Any, Any]]:
    value = case[name]
    if not isinstance(value, Mapping):
        raise CaseError(name, f'must be an object {{"<token id(s)>": bias}}, got {value!r}')
    return list(value.items())


def _key(seq: object) -> str:
    return ",".join(str(t) for t in seq) if isinstance(seq, tuple) else str(seq)
