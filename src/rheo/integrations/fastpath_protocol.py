"""The fastpath behind the gate's protocols: the batched one (``build_tree_batch`` /
``verify_batch``, rheo.checks.statistics.batched) and the per-request one (``build_tree`` / ``verify``,
rheo.checks.protocol; one request per call, numpy in and out, the tree converted with
rheo.integrations.tree_formats). The same algorithm through both, so that ``rheo bench
gate`` measures what each protocol costs.

    rheo gate --impl rheo.integrations.fastpath_protocol:Fastpath              # batched
    rheo gate --impl rheo.integrations.fastpath_protocol:FastpathOwnGenerator  # batched, its own draws
    rheo gate --impl rheo.integrations.fastpath_protocol:FastpathPerRequest    # per request

Specification: docs/spec.md §1-§4 and §7 (what the fastpath computes).
"""

from __future__ import annotations

import numpy as np
import torch

from rheo.fastpath import DraftQuery, DraftTree, Params, Uniforms, VerifyResult, build_tree, verify
from rheo.integrations.tree_formats import draft_tree_to_protocol, protocol_to_draft_tree


class Fastpath:
    """``rheo.fastpath.build_tree`` and ``verify`` on the uniforms the gate hands over."""

    def build_tree_batch(
        self, draft_logits, params: Params, temperature: torch.Tensor, uniforms: Uniforms
    ) -> DraftTree:
        return build_tree(draft_logits, params, temperature, uniforms)

    def verify_batch(
        self, tree: DraftTree, target_logits: torch.Tensor, params: Params, temperature: torch.Tensor, uniforms
    ) -> VerifyResult:
        return verify(tree, target_logits, temperature, params, uniforms)


class FastpathOwnGenerator(Fastpath):
    """The fastpath drawing its own uniforms from the generator the gate hands over (an
    engine with its own randomness): build and verify draw independently."""

    follows_uniforms = False

    def _uniforms(self, params: Params, b: int, generator: torch.Generator) -> Uniforms:
        return Uniforms.random(b, params.K, params.B, params.depth, generator, device=generator.device)

    def build_tree_batch(self, draft_logits, params, temperature, generator) -> DraftTree:
        return build_tree(draft_logits, params, temperature, self._uniforms(params, temperature.shape[0], generator))

    def verify_batch(self, tree, target_logits, params, temperature, generator) -> VerifyResult:
        u = self._uniforms(params, temperature.shape[0], generator)
        return verify(tree, target_logits, temperature, params, u)


def params_of(config: dict) -> Params:
    """The float64 ``Params`` of a protocol config dict."""
    keys = {k: v for k, v in config.items() if k in Params.CASE_KEYS and v is not None}
    if keys.get("policy") == "topk":
        keys.pop("m", None)
    return Params.from_case({**keys, "arithmetic": "float64"})


class FastpathPerRequest:
    """The fastpath, one request per call through the per-request protocol."""

    def build_tree(self, draft_logits, config: dict, temperature: float, u_draw) -> dict:
        params = params_of(config)

        def draft(query: DraftQuery) -> torch.Tensor:  # [1, n, L] token paths -> [1, n, V]
            paths = [[t for t in row if t >= 0] for row in query.prefixes[0].tolist()]
            return torch.from_numpy(np.asarray(draft_logits(paths), dtype=np.float64))[None]

        D1 = params.depth + 1
        u = Uniforms(
            torch.as_tensor(np.asarray(u_draw, dtype=np.float64))[None],
            torch.zeros(1, D1, dtype=torch.float64),
            torch.zeros(1, D1, params.K, dtype=torch.float64),
            torch.zeros(1, D1, dtype=torch.float64),
        )
        tree = build_tree(draft, params, torch.tensor([float(temperature)], dtype=torch.float64), u)
        return draft_tree_to_protocol(tree, 0, config["vocab_size"])

    def verify(self, tree: dict, target_logits, config: dict, temperature: float, uniforms: dict) -> dict:
        params = params_of(config)
        dt = protocol_to_draft_tree([tree], params.K, params.depth, params.budget)
        u = Uniforms(
            torch.zeros(1, params.expansions, dtype=torch.float64),
            torch.as_tensor(np.asarray(uniforms["u_sample"], dtype=np.float64))[None],
            torch.as_tensor(np.asarray(uniforms["u_det"], dtype=np.float64))[None],
            torch.as_tensor(np.asarray(uniforms["u_final"], dtype=np.float64))[None],
        )
        rows = torch.as_tensor(np.asarray(target_logits, dtype=np.float64))  # [nodes + 1, V]
        logits = torch.zeros(1, params.budget + 1, rows.shape[1], dtype=torch.float64)  # padded to the budget
        logits[0, : rows.shape[0]] = rows
        res = verify(dt, logits, torch.tensor([float(temperature)], dtype=torch.float64), params, u)
        n = int(res.lengths[0])
        accepted = [int(x) for x in res.accepted[0].tolist() if x >= 0]
        return {"tokens": res.tokens[0, :n].numpy(), "accepted": np.array(accepted, dtype=np.int64)}
