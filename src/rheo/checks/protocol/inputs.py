"""What an implementation is given (the protocol: ``rheo.checks.protocol``): the config
dict, draft and target logits as functions of token paths, the handed uniforms, the
reference's tree in the protocol's format, and the float64 instances a case dict becomes.
"""

from __future__ import annotations

import numpy as np

from rheo.casefile import load_case
from rheo.reference import Uniforms
from rheo.reference.instance import Instance
from rheo.reference.params import Params, Prefix
from rheo.reference.sampling import CASE_KEYS as SAMPLING_KEYS
from rheo.reference.stops import stops_of

KINDS = {"lead": 0, "sample": 1, "fill": 2}
KIND_NAMES = {v: k for k, v in KINDS.items()}


def protocol_config(inst: Instance) -> dict:
    """The config dict the implementation receives: ``Params.to_protocol`` plus
    "temperature" (a float, the same as the ``temperature`` argument)."""
    return config_dict(inst.config, inst.n)


def config_dict(params: Params, vocab_size: int) -> dict:
    return {**params.to_protocol(vocab_size), "temperature": params.temperature.value}


def case_params(case: dict) -> Params:
    """The parameters of a case dict (with or without tables). A large case's "generated"
    is its table recipe (``rheo.checks.cases.large``), not tokens: it has no sampling keys."""
    recipe = isinstance(case.get("generated"), dict)
    keys = [k for k in Params.CASE_KEYS if k in case and not (recipe and k in SAMPLING_KEYS)]
    return Params.from_case({k: case[k] for k in keys})


def case_config(case: dict) -> dict:
    """The config dict of a case dict (with or without tables), as the implementation gets it."""
    return config_dict(case_params(case), case["vocab_size"])


def logits_of(law) -> np.ndarray:
    p = np.array(law, dtype=np.float64)  # each entry by its __float__ (Fractions too), in one pass
    with np.errstate(divide="ignore"):
        return np.log(p)


def draft_logits_fn(inst: Instance):
    """paths -> [len(paths), V] draft logits (the table's law, untruncated)."""

    def draft_logits(paths):
        return np.stack([logits_of(inst.draft(tuple(int(t) for t in p))) for p in paths])

    return draft_logits


def raw_logits(inst: Instance, prefix: Prefix) -> np.ndarray:
    """The target logits an implementation is given at ``prefix``: the case's raw logits
    (``target_logits``, docs/spec.md §9), or log p of its probability table."""
    if inst.target_logits is not None:
        return np.array(inst.raw_target_logits(prefix), dtype=np.float64)
    return logits_of(inst.target(prefix))


def target_logits(inst: Instance, paths: list) -> np.ndarray:
    """[len(paths)+1, V]: the root, then each node's token path."""
    return np.stack([raw_logits(inst, ())] + [raw_logits(inst, tuple(p)) for p in paths])


def target_logits_fn(inst: Instance):
    """paths -> [len(paths), V] target logits (the table's law or the case's raw logits;
    untempered, unfiltered, before the sampling parameters)."""

    def target_logits(paths):
        return np.stack([raw_logits(inst, tuple(int(t) for t in p)) for p in paths])

    return target_logits


def history_of(inst: Instance, prefix: Prefix) -> list[int]:
    """prompt + generated + prefix: every token before the position (docs/spec.md §9)."""
    s = inst.config.sampling
    return list((s.prompt + s.generated) if s is not None else ()) + [int(t) for t in prefix]


def protocol_uniforms(u: Uniforms) -> dict:
    return {
        "u_sample": np.array(u.u_sample, dtype=np.float64),
        "u_det": np.array(u.u_det, dtype=np.float64),
        "u_final": np.array(u.u_final, dtype=np.float64),
    }


def reference_tree(inst: Instance, tree) -> dict:
    """The reference's pruned tree in the protocol's format (order-key order), plus
    ``paths`` (token paths) and ``slot_paths``."""
    pruned = tree.pruned
    index = {n.slot_path: i for i, n in enumerate(pruned)}
    probs = np.zeros((len(pruned), inst.n))
    for i, n in enumerate(pruned):
        if n.kind == "sample":
            residual = inst.node_laws(n.prefix[:-1]).residual
            assert residual is not None  # a sample node's parent has a residual law
            probs[i] = [float(x) for x in residual]
    return {
        "tokens": np.array([n.token for n in pruned], dtype=np.int64),
        "parents": np.array([index.get(n.slot_path[:-1], -1) for n in pruned], dtype=np.int64),
        "kinds": np.array([KINDS[n.kind] for n in pruned], dtype=np.int64),
        "slots": np.array([n.slot_path[-1] for n in pruned], dtype=np.int64),
        "sample_probs": probs,
        "paths": [n.prefix for n in pruned],
        "slot_paths": [n.slot_path for n in pruned],
    }


def float_instance(case: dict) -> Instance:
    """The float64 instance the harness compares on (an exact case read in float64)."""
    return load_case({**case, "arithmetic": "float64"})


class ExactTargets(Instance):
    """A float64 instance whose target law is an exact instance's, rounded once: the
    filters' boundaries (a token at exactly min_p times the largest, a top-p run of mass
    exactly p) are decided exactly, as docs/spec.md §0 says, not by float64 rounding."""

    def __init__(self, inst: Instance, exact: Instance) -> None:
        super().__init__(inst.n, inst.target, inst.draft, inst.config, target_logits=inst.target_logits)
        self.exact_instance = exact

    def target_law(self, prefix: Prefix) -> tuple:  # floats, where the reference's Law may be Fractions
        law = self._target_cache.get(prefix)
        if law is None:
            exact = self.exact_instance.target_law(prefix)
            law = self._target_cache[prefix] = tuple(float(x) if x else 0.0 for x in exact)
        return law


def law_instance(case: dict) -> Instance:
    """The float64 instance the output law runs on: ``float_instance``, with the exact target
    laws (``ExactTargets``) when the case is in exact arithmetic."""
    inst = float_instance(case)
    if case.get("arithmetic", "exact") == "exact":
        inst = ExactTargets(inst, load_case(case))
    inst.stops = stops_of(case)  # type: ignore[attr-defined]  # a whole generation's stops (docs/spec.md §8)
    return inst
