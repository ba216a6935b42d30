"""Real vocabulary sizes, exactly (docs/gate.md, "Real vocabulary sizes"): sparse cases at
V = 8,193 to 256,000 placed at kernel tile boundaries, certified exactly at a cost that follows
the support; the tiled kernel of examples/tiled_kernel.py and its planted bugs; rows without a
law must raise. Times are not asserted here (docs/gate.md names the command that measures them)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from rheo.checks.cases.vocab import PATTERNS, TILE, VOCAB_SIZES, vocab_case
from rheo.checks.exact.certify import certify_implementation
from rheo.checks.gate.vocab_checks import vocab_checks
from rheo.checks.outcome import Profile
from rheo.checks.protocol.load import Implementation, implementation_of

SMOKE = Profile("smoke", "smoke", 0, False, 0, 0, 0, 0)


def support(law: list[str]) -> dict[int, Fraction]:
    return {i: Fraction(x) for i, x in enumerate(law) if x != "0"}


@pytest.mark.parametrize("vocab", VOCAB_SIZES)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_each_case_is_a_sparse_law_at_the_places_kernels_break(vocab: int, pattern: str) -> None:
    case = vocab_case(vocab, pattern)
    target, draft = support(case["target"]["*"]), support(case["draft"]["*"])
    assert sum(target.values()) == 1 and sum(draft.values()) == 1
    assert len(case["target"]["*"]) == vocab and len(target) <= 4
    if pattern == "tile edges":
        assert {TILE - 1, TILE, vocab - 1} <= set(target)
    if pattern == "residual in the last tile":  # (p - q)+ lives only in the last tile
        residual = {t for t, p in target.items() if p > draft.get(t, 0)}
        assert residual and all(t >= vocab - TILE for t in residual)
    if pattern == "disjoint supports":
        assert not set(target) & set(draft) and vocab - 1 in target


def certify(name: str, vocab: int, pattern: str = "tile edges"):
    return certify_implementation(implementation_of(f"examples.tiled_kernel:{name}"), vocab_case(vocab, pattern))


def test_the_tiled_kernel_is_certified_at_qwen_size() -> None:
    cert = certify("TiledChain", 151_936)
    assert cert.verdict == "lossless" and cert.deviation < 1e-12, cert.detail
    assert cert.runs < 2_000  # the draws' cells follow the 4 tokens with mass, not the 151,936 lanes


@pytest.mark.parametrize(
    ("bug", "vocab", "verdict"),
    [
        ("DropsPartialTile", 151_936, "not lossless"),  # a partial tile of 384 lanes
        ("DropsPartialTile", 256_000, "lossless"),  # 250 whole tiles: nothing to drop
        ("Int16TileOffset", 32_000, "lossless"),  # every tile starts below 65,536
        ("Int16TileOffset", 128_256, "not lossless"),
        ("OffByOneTileOffset", 8_193, "not lossless"),
        ("OffByOneTileOffset", 151_936, "not lossless"),
    ],
)
def test_each_planted_tile_bug_shows_where_it_should(bug: str, vocab: int, verdict: str) -> None:
    cert = certify(bug, vocab)
    assert cert.verdict == verdict, cert.detail


class PastTheVocabulary:
    """Returns the id V (one past the last): every run of every check refuses it."""

    follows_uniforms = False

    def cycle(self, draft_logits, target_logits, config, temperature):
        return [config["vocab_size"]]


def test_an_id_past_the_vocabulary_is_a_crash_not_a_token() -> None:
    cert = certify_implementation(Implementation(PastTheVocabulary(), "p"), vocab_case(151_936, "tile edges"))
    assert cert.verdict == "crashed" and "151936 is outside the vocabulary 0..151935" in cert.detail, cert.detail


def run(name: str, check: int):
    checks = vocab_checks(implementation_of(name), "t", None)
    return checks[check].run(SMOKE, None)


def test_the_gate_check_passes_the_kernel_and_fails_a_bug() -> None:
    assert run("examples.tiled_kernel:TiledChain", 0).verdict == "pass"
    out = run("examples.tiled_kernel:DropsPartialTile", 0)
    assert out.verdict == "fail" and "V=8,193 tile edges: not lossless" in out.detail, out.detail


class EmitsFromNaN:
    """Samples by argmax of p / E: from a row of NaN it emits token 0."""

    follows_uniforms = False

    def supports(self, config: dict) -> bool:
        return config["K"] == 1 and config["temperature"] > 0

    def cycle(self, draft_logits, target_logits, config, temperature):
        import torch

        p = torch.softmax(torch.as_tensor(target_logits([()])[0], dtype=torch.float64) / temperature, -1)
        return [int(torch.argmax(p / torch.empty_like(p).exponential_()))]


def test_a_row_without_a_law_must_raise() -> None:
    checks = vocab_checks(Implementation(EmitsFromNaN(), "EmitsFromNaN"), "t", None)
    out = checks[1].run(SMOKE, None)
    assert out.verdict == "fail" and "NaN everywhere: it emitted [0]" in out.detail, out.detail
    for name in ("examples.tiled_kernel:TiledChain", "examples.kernel_chain:KernelChain"):
        assert run(name, 1).verdict == "pass"
