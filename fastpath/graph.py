"""One cycle's tree build and verification as one CUDA graph (issue 37: on a GPU a cycle is
bound by per-op launches and host Python, not by the tensor work).

``static_cycle`` is the function that is captured: ``build_tree(static=True)``, the target
call, ``verify(static=True)``, static shapes for given (b, K, depth, budget, B,
draft_top_k) and no host sync (tested: ``tests/test_fastpath_static.py``), the same
decisions as the default path. ``CycleGraph`` captures it once on CUDA and replays it:
copy the cycle's temperatures and uniforms into its input buffers, one ``replay()``, and
the outputs are read from the graph's own tensors. Off CUDA (or with ``graph=False``) it
runs ``static_cycle`` eagerly, so the same code runs and is tested on a CPU.

The model's forwards are captured with it, so they must be graph-safe: tensor ops only, no
host sync, and any state they read (a KV cache, the request contexts) updated *in place*
between replays (a forward that reads ``self.context`` captures that tensor's address; a
new tensor assigned to ``self.context`` is not seen). ``model.advance`` runs outside the
graph, after a replay. The outputs are overwritten by the next replay: clone what is kept.

>>> import torch
>>> from rheo.fastpath import FastConfig, Uniforms
>>> from rheo.testing import HashTableModel
>>> model = HashTableModel(50, 2, seed=0)
>>> cfg = FastConfig(K=3, depth=2, budget=4, m=1)
>>> T = torch.ones(2, dtype=torch.float64)
>>> u = Uniforms.random(2, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(0))
>>> cycle = CycleGraph(model.draft_logits, model.target_logits, cfg, T, u)  # CPU: eager
>>> tree, result = cycle(T, u)
>>> cycle.captured, result.tokens.shape
(False, torch.Size([2, 3]))
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rheo.reference.params import Params

from .inputs import expect, expect_params
from .tree import DraftFn, DraftTree, build_tree
from .uniforms import Uniforms
from .verify import TargetFn, VerifyResult, verify

TargetCall = Callable[[DraftTree], "torch.Tensor | TargetFn"]


def static_cycle(
    draft: DraftFn, target: TargetCall, params: Params, T: torch.Tensor, uniforms: Uniforms
) -> tuple[DraftTree, VerifyResult]:
    """Build T_R, call the target once, verify: the static-shape, sync-free form of
    ``run_cycle`` without ``model.advance`` (what ``CycleGraph`` captures)."""
    tree = build_tree(draft, params, T, uniforms, static=True)
    return tree, verify(tree, target(tree), T, params, uniforms, static=True)


class CycleGraph:
    """``static_cycle`` captured once as a ``torch.cuda.CUDAGraph`` and replayed per cycle
    (on CUDA with ``graph=True``), else run eagerly. T [b] and uniforms give the shapes,
    dtypes and device of every later call's inputs."""

    def __init__(
        self,
        draft: DraftFn,
        target: TargetCall,
        params: Params,
        T: torch.Tensor,
        uniforms: Uniforms,
        graph: bool = True,
        warmup: int = 2,
    ) -> None:
        expect_params("CycleGraph", params)
        b = expect("CycleGraph", "T", T, "[b]", (None,), "float").shape[0]
        uniforms.expect_for("CycleGraph", params, b)
        self.draft, self.target, self.params = draft, target, params
        self.captured = bool(graph) and T.device.type == "cuda"
        self.graph: torch.cuda.CUDAGraph | None = None
        if not self.captured:
            return
        self.T = T.clone()  # the graph's input buffers
        self.uniforms = Uniforms(
            *(x.clone() for x in (uniforms.u_draw, uniforms.u_sample, uniforms.u_det, uniforms.u_final))
        )
        side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up: caches, workspaces and constants made outside the graph
            for _ in range(max(1, warmup)):
                static_cycle(draft, target, params, self.T, self.uniforms)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = static_cycle(draft, target, params, self.T, self.uniforms)

    def __call__(self, T: torch.Tensor, uniforms: Uniforms) -> tuple[DraftTree, VerifyResult]:
        """One cycle on these temperatures [b] and uniforms: a replay (outputs overwritten by
        the next one) or an eager ``static_cycle``."""
        if self.graph is None:
            return static_cycle(self.draft, self.target, self.params, T, uniforms)
        self.T.copy_(T)
        for mine, given in zip(
            (self.uniforms.u_draw, self.uniforms.u_sample, self.uniforms.u_det, self.uniforms.u_final),
            (uniforms.u_draw, uniforms.u_sample, uniforms.u_det, uniforms.u_final),
        ):
            mine.copy_(given)
        self.graph.replay()
        return self.out
