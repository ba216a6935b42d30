"""One cycle's tree build and verification without the host in the loop.

On a GPU a short cycle is bound by per-op launches and host Python, not by the tensor work.
``static_cycle`` is the cycle written for that: ``build_tree(static=True)``, one target
call, ``verify(static=True)``: static shapes for given (b, K, depth, budget, B,
draft_top_k), no host sync (tested: ``tests/test_fastpath_static.py``), the same decisions
as the default path. ``CycleGraph`` runs it in one of three modes:

- ``"graph"`` (CUDA only; the default there): captured once as a ``torch.cuda.CUDAGraph``
  and replayed, one host call per cycle;
- ``"compile"``: ``torch.compile(fullgraph=True)`` of the whole cycle, which fuses its
  elementwise ops into fused kernels and leaves sorts, cumulative sums and searches to the
  library (about a tenth of the eager cycle's launches: ``rheo bench fastpath``; C++ on a
  CPU, Triton on CUDA, with ``mode="reduce-overhead"``: CUDA graphs as well);
- ``"eager"`` (the default off CUDA): ``static_cycle`` op by op.

Every mode copies the cycle's temperatures and uniforms into the object's own input
buffers and runs on those, so the data flow of a replay is the same in each. The model's
forwards run inside (captured or compiled with the rest), so they must be graph-safe:
tensor ops only, no host sync (``HashTableModel`` is), and any state they read (a KV cache,
the request contexts) updated *in place* between replays in mode ``"graph"`` (a forward
that reads ``self.context`` captures that tensor's address; a new tensor assigned to
``self.context`` is not seen). ``model.advance`` runs outside, after the cycle. In modes
``"graph"`` and ``"compile"`` on CUDA the outputs are overwritten by the next cycle: clone
what is kept.

>>> import torch
>>> from rheo.fastpath import FastConfig, Uniforms
>>> from rheo.testing import HashTableModel
>>> model = HashTableModel(50, 2, seed=0)
>>> cfg = FastConfig(K=3, depth=2, budget=4, m=1)
>>> T = torch.ones(2, dtype=torch.float64)
>>> u = Uniforms.random(2, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(0))
>>> cycle = CycleGraph(model.draft_logits, model.target_logits, cfg, T, u)  # CPU: eager
>>> tree, result = cycle(T, u)
>>> cycle.mode, cycle.captured, result.tokens.shape
('eager', False, torch.Size([2, 3]))
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import torch

from rheo.reference.params import Params

from .inputs import expect, expect_params
from .tree import DraftFn, DraftTree, build_tree
from .uniforms import Uniforms
from .verify import TargetFn, VerifyResult, static_unsupported, verify

TargetCall = Callable[[DraftTree], "torch.Tensor | TargetFn"]
MODES = ("auto", "eager", "graph", "compile")
_TREE_FIELDS = tuple(f.name for f in dataclasses.fields(DraftTree))
_RESULT_FIELDS = tuple(f.name for f in dataclasses.fields(VerifyResult))


def static_cycle(
    draft: DraftFn, target: TargetCall, params: Params, T: torch.Tensor, uniforms: Uniforms
) -> tuple[DraftTree, VerifyResult]:
    """Build T_R, call the target once, verify: the static-shape, sync-free form of
    ``run_cycle`` without ``model.advance`` (what ``CycleGraph`` captures or compiles)."""
    tree = build_tree(draft, params, T, uniforms, static=True)
    return tree, verify(tree, target(tree), T, params, uniforms, static=True)


def capture(fn: Callable[[], Any], warmup: int = 2) -> tuple[torch.cuda.CUDAGraph, Any]:
    """``fn`` (CUDA work, no host sync) captured as one ``torch.cuda.CUDAGraph`` after
    ``warmup`` eager runs on a side stream (caches, workspaces and constants are made outside
    the graph). Returns the graph and fn's outputs, which each ``replay()`` overwrites."""
    side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(max(1, warmup)):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def _uniform_tensors(u: Uniforms) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    return u.u_draw, u.u_sample, u.u_det, u.u_final


class CycleGraph:
    """``static_cycle`` for one shape, run as ``mode`` says (module docstring): ``"auto"``
    is ``"graph"`` on CUDA and ``"eager"`` elsewhere. T [b] and uniforms give the shapes,
    dtypes and device of every later call's inputs. ``warmup``: eager cycles run before a
    capture (caches, workspaces and constants are made outside the graph)."""

    def __init__(
        self,
        draft: DraftFn,
        target: TargetCall,
        params: Params,
        T: torch.Tensor,
        uniforms: Uniforms,
        mode: str = "auto",
        warmup: int = 2,
    ) -> None:
        expect_params("CycleGraph", params)
        b = expect("CycleGraph", "T", T, "[b]", (None,), "float").shape[0]
        uniforms.expect_for("CycleGraph", params, b)
        unsupported = static_unsupported("CycleGraph", params)
        if unsupported:
            raise ValueError(unsupported)
        if mode not in MODES:
            raise ValueError(f"CycleGraph: mode must be one of {', '.join(MODES)}, got {mode!r}")
        cuda = T.device.type == "cuda"
        if mode == "auto":
            mode = "graph" if cuda else "eager"
        if mode == "graph" and not cuda:
            raise ValueError(
                f"CycleGraph: mode 'graph' captures a CUDA graph and needs CUDA tensors (T is on {T.device}); "
                "use mode 'eager' or 'compile' on a CPU"
            )
        self.draft, self.target, self.params, self.mode, self.b = draft, target, params, mode, b
        self.T = T.clone()  # the input buffers every mode runs on
        self.uniforms = Uniforms(*(x.clone() for x in _uniform_tensors(uniforms)))
        # mode "graph": the captured graph and the outputs each replay overwrites
        self._graph: tuple[torch.cuda.CUDAGraph, tuple[DraftTree, VerifyResult]] | None = None
        self._compiled: Callable[..., Any] | None = None
        self._compiled_once = False
        if mode == "compile":
            self._compiled = torch.compile(
                self._flat, fullgraph=True, dynamic=False, mode="reduce-overhead" if cuda else None
            )
        elif mode == "graph":
            self._graph = capture(lambda: static_cycle(draft, target, params, self.T, self.uniforms), warmup)

    @property
    def captured(self) -> bool:
        """Whether the cycle is a captured CUDA graph (mode ``"graph"``)."""
        return self._graph is not None

    def _flat(self, *inputs: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """The cycle on (T, u_draw, u_sample, u_det, u_final) as a flat tuple of the tree's
        and the result's tensors (what ``torch.compile`` is handed)."""
        tree, result = static_cycle(self.draft, self.target, self.params, inputs[0], Uniforms(*inputs[1:]))
        return tuple(getattr(tree, n) for n in _TREE_FIELDS) + tuple(getattr(result, n) for n in _RESULT_FIELDS)

    def __call__(self, T: torch.Tensor, uniforms: Uniforms) -> tuple[DraftTree, VerifyResult]:
        """One cycle on these temperatures [b] and uniforms (copied into the input buffers)."""
        expect("CycleGraph", "T", T, "[b]", (self.b,), "float")
        uniforms.expect_for("CycleGraph", self.params, self.b)
        self.T.copy_(T)
        for mine, given in zip(_uniform_tensors(self.uniforms), _uniform_tensors(uniforms)):
            mine.copy_(given)
        if self._graph is not None:
            graph, out = self._graph
            graph.replay()
            return out
        if self._compiled is not None:
            if not self._compiled_once:  # the compiling call
                with warnings.catch_warnings():
                    # Dynamo traces through the cached constants (what is wanted: they only make
                    # constants); inductor's compilation warns of torch's own jit deprecation
                    warnings.filterwarnings("ignore", message=".*lru_cache|.*functools.cache", category=UserWarning)
                    warnings.filterwarnings("ignore", message=".*torch.jit", category=DeprecationWarning)
                    flat = self._compiled(self.T, *_uniform_tensors(self.uniforms))
                self._compiled_once = True
            else:
                flat = self._compiled(self.T, *_uniform_tensors(self.uniforms))
            n = len(_TREE_FIELDS)
            return DraftTree(*flat[:n]), VerifyResult(*flat[n:])
        return static_cycle(self.draft, self.target, self.params, self.T, self.uniforms)
