"""A CPU stand-in for ``rheo.fastpath.graph.capture`` (CUDA graphs cannot be captured
without a GPU), for tests of the code that captures and replays: the outputs it hands back
are buffers of its own that hold a sentinel until the first replay (reading them earlier
reads garbage, as on CUDA), and each ``replay()`` runs the function again and writes its
results into those buffers. It counts its captures and replays."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch


def _tensors(x: Any) -> Iterator[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        yield x
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            yield from _tensors(getattr(x, f.name))
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _tensors(y)


def _buffers(x: Any) -> Any:
    """``x`` with each tensor replaced by a fresh buffer of its shape holding a sentinel."""
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.bool:
            return ~x
        return torch.full_like(x, float("nan") if x.is_floating_point() else -7)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.replace(x, **{f.name: _buffers(getattr(x, f.name)) for f in dataclasses.fields(x)})
    if isinstance(x, (list, tuple)):
        return type(x)(_buffers(y) for y in x)
    return x


class StandInGraph:
    def __init__(self, fn: Callable[[], Any], out: Any) -> None:
        self.fn, self.out, self.replays = fn, out, 0

    def replay(self) -> None:
        self.replays += 1
        for kept, fresh in zip(_tensors(self.out), _tensors(self.fn()), strict=True):
            kept.copy_(fresh)


class StandInCapture:
    """Call it as ``capture(fn, warmup)`` is called; ``graphs`` holds what it captured."""

    def __init__(self) -> None:
        self.graphs: list[StandInGraph] = []

    def __call__(self, fn: Callable[[], Any], warmup: int = 2) -> tuple[StandInGraph, Any]:
        out = _buffers(fn())
        graph = StandInGraph(fn, out)
        self.graphs.append(graph)
        return graph, out
