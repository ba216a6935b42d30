"""The witness of an exact verdict (rheo.checks.witness): every example's certificate carries
what its law was computed from, and the small replayer, which shares no code with the
enumerator, recomputes the law and the verdict from it alone."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil

import pytest

import examples
from rheo.checks.cases.generations import generation_cases
from rheo.checks.exact.certify import certify_implementation
from rheo.checks.exact.check import cost
from rheo.checks.exact.generation import certify_generation
from rheo.checks.gate.coverage import supported_cases
from rheo.checks.protocol.inputs import law_instance
from rheo.checks.protocol.judged import judged_instance
from rheo.checks.protocol.load import load_implementation
from rheo.checks.witness import WitnessError, law_of, plackett_luce, replay, step_probability

ENTRY_POINTS = ("build_tree", "verify", "cycle", "generate")
NOT_CERTIFIED = {
    "examples.kernel_chain:SeededFusedBonus": "refused at its randint: no exact verdict to witness",
    "examples.transformers_style:AssistantChain": "the base of GreedyDraftChain and EarlyStopChain: no next_token",
    # their bugs are refused on every run (tests/test_reported_values.py, tests/test_stops.py): no law to witness
    "examples.logprobs:DraftLogprobs": "a wrong logprob on every run: refused, no exact verdict",
    "examples.logprobs:RowBeforeLogprobs": "a wrong logprob on every run: refused, no exact verdict",
    "examples.stops:OvershootsMaxTokens": "tokens past max_tokens on every run: refused, no exact verdict",
}


def _examples() -> list[str]:
    """Every implementation class in examples/ with an entry point exact certification runs
    (whole generations, ``generate``, by their own check: ``certify_generation``)."""
    out = []
    for info in pkgutil.iter_modules(examples.__path__):
        if info.name.startswith("test_"):
            continue
        try:
            mod = importlib.import_module(f"examples.{info.name}")
        except ImportError:  # an optional engine's example
            continue
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and obj.__module__ == mod.__name__ and not name.startswith("_"):
                if any(callable(getattr(obj, a, None)) for a in ENTRY_POINTS):
                    out.append(f"examples.{info.name}:{name}")
    return out


EXAMPLES = _examples()


def test_the_examples_are_found():
    assert "examples.without_replacement:RecursiveWithoutReplacement" in EXAMPLES
    assert "examples.kernel_chain:KernelChain" in EXAMPLES
    assert len(EXAMPLES) >= 35


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_examples_witness_replays_to_its_verdict(name):
    if name in NOT_CERTIFIED:
        pytest.skip(NOT_CERTIFIED[name])
    if "kernel_chain" in name or "without_replacement" in name:
        pytest.importorskip("torch")
    impl = load_implementation(name)
    if not (impl.builds_trees or impl.verifies or impl.runs_cycles):  # generate alone
        certify, cases = certify_generation, generation_cases("smoke")
    else:
        certify, cases = certify_implementation, sorted(supported_cases(impl, "exact", "smoke").cases, key=cost)
    assert cases, f"{name}: no supported case"
    replayed = 0
    for case in cases:  # the two cheapest with an exact verdict (some raise NotImplementedError on a case)
        if replayed == 2:
            break
        cert = certify(impl, case)
        if cert.verdict not in ("lossless", "not lossless"):
            continue
        saved = json.loads(json.dumps(cert.with_witness()))  # as a file holds it
        judged = judged_instance(impl, law_instance(case)) if impl.has_sampler_law else None
        again = replay(saved, judged)
        assert again.agrees, (name, cert.summary(), again.verdict, again.deviation)
        assert again.verdict == cert.verdict
        replayed += 1
    assert replayed, f"{name}: no exact verdict among {len(cases)} cases"


def test_a_tampered_witness_no_longer_agrees():
    impl = load_implementation("examples.loop_impl:LoopImplementation")
    case = sorted(supported_cases(impl, "exact", "smoke").cases, key=cost)[0]
    saved = json.loads(json.dumps(certify_implementation(impl, case).with_witness()))
    assert replay(saved).agrees
    tree = saved["witness"]["trees"][0]
    tree["walk"][0]["output"] = [(tree["walk"][0]["output"][0] + 1) % case["vocab_size"]]
    assert not replay(saved).agrees


def test_each_step_kind_has_its_probability():
    assert step_probability({"kind": "uniform", "grid_bits": 24, "cell": [0, 2**22]}) == 0.25
    assert step_probability({"kind": "interval", "cell": [0.25, 0.75]}) == 0.5
    assert step_probability({"kind": "choice", "weights": [1.0, 3.0], "option": 1}) == 0.75
    assert step_probability({"kind": "categorical", "weights": [1.0, 0.0, 3.0], "options": [0]}) == 0.25
    race = {"kind": "race", "weights": [0.5, 0.3, 0.2], "orders": [[0, 1], [1, 0]]}
    assert step_probability(race) == pytest.approx(0.5 * 0.3 / 0.5 + 0.3 * 0.5 / 0.7)
    assert step_probability({"kind": "given", "probability": 0.125}) == 0.125
    assert plackett_luce([1.0, 1.0, 2.0], [2, 0]) == pytest.approx(0.5 * 0.5)


def test_a_malformed_witness_is_refused_by_name():
    with pytest.raises(WitnessError, match="format"):
        law_of({"cycle": []})
    with pytest.raises(WitnessError, match="step kind 'dice'"):
        law_of({"format": "rheo-witness/1", "cycle": [{"steps": [{"kind": "dice"}], "output": [0]}]})
