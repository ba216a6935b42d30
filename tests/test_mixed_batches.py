"""Mixed batches (docs/adapters.md, "Mixed batches"): ``cycle_batch`` rows that are different
requests, judged row by row against their own laws, for independence, and by shuffling
seeded rows; the planted bugs of examples/mixed_batch.py, each invisible in a batch of copies."""

from __future__ import annotations

import json

import pytest

from rheo.checks.cases.mixed import mixed_batches
from rheo.checks.exact.certify import certify_implementation
from rheo.checks.exact.mixed import certify_mixed
from rheo.checks.gate.coverage import supported_cases
from rheo.checks.gate.mixed_checks import mixed_checks
from rheo.checks.outcome import Profile
from rheo.checks.protocol.calls import call_cycle_rows
from rheo.checks.protocol.inputs import case_config, law_instance
from rheo.checks.protocol.load import implementation_of
from rheo.cli import main

SMOKE = Profile("smoke", "smoke", 0, False, 0, 0, 0, 0)


def run_check(name: str):
    impl = implementation_of(f"examples.mixed_batch:{name}" if ":" not in name else name)
    checks = mixed_checks(impl, "t", None)
    return checks[0].run(SMOKE, None) if checks else None


def batches(name: str = "MixedChain") -> list[list[dict]]:
    impl = implementation_of(f"examples.mixed_batch:{name}")
    return mixed_batches(supported_cases(impl, "exact", "smoke").cases, lambda c: impl.supports(case_config(c)))


def test_the_batches_mix_what_a_batch_of_copies_cannot() -> None:
    names = [[c["name"] for c in b] for b in batches()]
    assert len(names) >= 3
    rows = [c for b in batches() for c in b]
    assert any(c["temperature"] == "0" for c in rows) and any(c["temperature"] != "0" for c in rows)
    assert any(len({min(c["depth"], c["budget"]) for c in b}) > 1 for b in batches())  # draft lengths differ
    assert any(len({c.get("target_top_k") for c in b}) > 1 for b in batches())  # a filter on one row only


def test_a_lossless_mixed_batch_passes() -> None:
    out = run_check("MixedChain")
    assert out.verdict == "pass", out.detail
    assert all(e["verdict"] == "lossless" for e in out.data["exact"]), out.data["exact"]
    assert out.data["permutation"]["passed"] is True


@pytest.mark.parametrize(
    ("bug", "caught_by"),
    [
        ("NeighbourStride", "exact"),
        ("FirstRowTemperature", "exact"),
        ("FirstRowFilter", "exact"),
        ("SharedGenerator", "permutation"),
    ],
)
def test_each_planted_batch_bug_is_caught(bug: str, caught_by: str) -> None:
    out = run_check(bug)
    assert out.verdict == "fail", out.detail
    assert out.counterexample["findings"][0].startswith(caught_by), out.counterexample["findings"]
    if caught_by == "permutation":  # every row's law is right: only the shuffle shows it
        assert all(e["verdict"] == "lossless" for e in out.data["exact"])


def test_each_planted_bug_passes_a_batch_of_copies() -> None:
    """The same adapters on copies of one request (what cycle_batch was handed before): the
    exact joint law of two copies is right for every bug (SharedGenerator included: its rows
    draw on from one generator, independently)."""
    (a, _), *_ = batches()
    for bug in ("NeighbourStride", "FirstRowTemperature", "FirstRowFilter", "SharedGenerator"):
        cert = certify_mixed(implementation_of(f"examples.mixed_batch:{bug}"), [a, a], [7, 7])
        assert cert.verdict == "lossless", (bug, cert.detail)


def test_the_joint_law_shows_dependent_rows() -> None:
    """Two rows that share one uniform: each row's law is its own, the joint is not the
    product: the independence half of the certificate fails."""

    class Shared:
        follows_uniforms = False
        mixed_batches = True

        def supports(self, config: dict) -> bool:
            return config["K"] == 1 and config["policy"] == "rheo" and config["m"] == 0

        def cycle(self, draft_logits, target_logits, config, temperature):
            return self.cycle_batch([draft_logits], [target_logits], [config], [temperature], 1)[0]

        def cycle_batch(self, draft_logits, target_logits, config, temperature, rows):
            import numpy as np
            import torch

            u = float(torch.rand(1, dtype=torch.float64))
            out = []
            for r in range(rows):
                logits = np.asarray(target_logits[r]([()])[0], dtype=np.float64)
                if temperature[r] == 0:
                    out.append([int(np.argmax(logits))])
                    continue
                p = np.exp((logits - logits.max()) / temperature[r])
                cdf = np.cumsum(p / p.sum())
                out.append([int(min(np.searchsorted(cdf, u, side="right"), len(cdf) - 1))])
            return out

    from rheo.checks.protocol.load import Implementation

    impl = Implementation(Shared(), "Shared")
    a = batches()[0][0]  # no filter, T > 0
    cert = certify_mixed(impl, [a, a])
    assert cert.verdict == "not lossless" and "not independent" in cert.detail, cert.detail
    assert max(cert.deviations) <= cert.tolerance


def test_an_adapter_that_takes_copies_only_is_refused_with_the_fix() -> None:
    out = run_check("examples.kernel_chain:KernelChainRows")
    assert out.verdict == "skip" and "mixed_batches = True" in out.detail and "config[r]" in out.detail
    assert run_check("examples.kernel_chain:KernelChain") is None  # no cycle_batch: no such check


def test_a_mixed_adapter_gets_copies_as_lists() -> None:
    """The rows path of exact certification (concrete draws, many points a call) hands a
    mixed adapter per-row lists; its exact certificate is the same as one request at a time."""
    impl = implementation_of("examples.mixed_batch:MixedChain")
    case = batches()[0][0]
    rows = call_cycle_rows(impl, law_instance(case), 3)
    assert len(rows) == 3 and all(1 <= len(r) <= 2 for r in rows)
    cert = certify_implementation(impl, case)
    assert cert.verdict == "lossless" and cert.draws == "concrete", cert.detail


def test_gate_cli_mixed_batches(capsys) -> None:
    argv = ["gate", "--impl", "examples.mixed_batch:NeighbourStride", "--profile", "smoke"]
    rc = main([*argv, "--only", "mixed batches", "--json"])
    report = json.loads(capsys.readouterr().out)
    (check,) = report["checks"]
    assert rc == 1 and check["verdict"] == "fail" and "row 1" in check["detail"], check
