"""Cases at real vocabulary sizes with sparse supports (docs/gate.md, "Real vocabulary
sizes"): a handful of tokens with positive mass per law, everything else probability 0,
placed where kernels over the vocabulary break: the last lane of a tile and the first lane of
the next, the partial last tile, id V - 1, a residual whose mass lies only in the last tile,
draft and target supports disjoint. Tiles of 1,024 lanes (a multiple of the common kernel
block sizes: 128, 256, 512, 1,024 lanes end there too).

Every case is a chain of one draft (K = 1, depth 1, T = 1), the same law at every prefix
(``"*"`` tables): exact certification of it costs what its support costs, not V.
"""

from __future__ import annotations

from fractions import Fraction

VOCAB_SIZES = (8_193, 32_000, 128_256, 151_936, 256_000)  # Llama 2, Llama 3, Qwen 2, Gemma
TILE = 1024
PATTERNS = ("tile edges", "residual in the last tile", "disjoint supports")
PER_PROFILE = {  # (vocabulary sizes, patterns) each profile certifies
    "smoke": ((8_193,), ("tile edges",)),
    "quick": (VOCAB_SIZES, PATTERNS),
    "deep": (VOCAB_SIZES, PATTERNS),
}


def _law(vocab: int, mass: list[tuple[int, str]]) -> list[str]:
    """A dense law of ``vocab`` entries: the masses added up per token (two places may be one
    token: at V = 8,193 the partial last tile is the lane V - 1 alone), zero elsewhere."""
    total: dict[int, Fraction] = {}
    for token, share in mass:
        total[token] = total.get(token, Fraction(0)) + Fraction(share)
    law = ["0"] * vocab
    for token, value in total.items():
        law[token] = str(value)
    return law


def vocab_case(vocab: int, pattern: str) -> dict:
    """One sparse case (module docstring) at ``vocab`` tokens."""
    if vocab <= 2 * TILE:
        raise ValueError(f"vocab: expected more than {2 * TILE} tokens (two tiles and a partial one), got {vocab}")
    last = vocab - 1
    partial = vocab - vocab % TILE if vocab % TILE else vocab - TILE  # the first lane of the last tile
    if pattern == "tile edges":
        target = [(TILE - 1, "1/4"), (TILE, "1/4"), (partial, "1/4"), (last, "1/4")]
        draft = [(TILE - 1, "1/2"), (7, "1/4"), (last, "1/4")]
    elif pattern == "residual in the last tile":  # the draft covers the target but where it is short: last tile
        target = [(7, "1/2"), (partial, "1/4"), (last, "1/4")]
        draft = [(7, "3/4"), (TILE, "1/4")]
    elif pattern == "disjoint supports":  # every draft rejected: the residual is the target law itself
        target = [(2 * TILE - 1, "1/2"), (last, "1/2")]
        draft = [(0, "1/2"), (TILE, "1/2")]
    else:
        raise ValueError(f"pattern: expected one of {', '.join(PATTERNS)}, got {pattern!r}")
    return {
        "name": f"V={vocab:,} {pattern}",
        "vocab_size": vocab,
        "target": {"*": _law(vocab, target)},
        "draft": {"*": _law(vocab, draft)},
        "depth": 1,
        "policy": "rheo",
        "K": 1,
        "beam": 1,
        "budget": 1,
        "m": 0,
        "temperature": "1",
    }


def vocab_cases(profile: str) -> list[dict]:
    """The profile's cases (``PER_PROFILE``), smallest vocabulary first."""
    sizes, patterns = PER_PROFILE.get(profile, PER_PROFILE["quick"])
    return [vocab_case(v, p) for v in sizes for p in patterns]
