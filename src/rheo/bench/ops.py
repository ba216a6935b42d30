"""Counting the torch ops a function dispatches (``rheo bench fastpath``'s op counts).

On a GPU a short cycle is bound by what each op costs the host (Python, dispatch, a kernel
launch), not by the tensor work, so the number of ops per cycle is the figure to cut. It is
counted here with a ``torch.utils._python_dispatch.TorchDispatchMode``: the mode sees every
ATen op that reaches the dispatcher below autograd, after the composite functions
(``torch.where``'s broadcasting, ``x[mask]``, ``torch.nn.functional.*``) have been
decomposed into the ops that actually run, i.e. one count per kernel a device would launch
(plus the views, which launch nothing and are counted apart). A ``TorchFunctionMode`` would
count the Python-level calls instead: a composite call as one, ``Tensor.shape`` reads and
other non-ops included, which says less about launches. The count is of ops, not of time,
so it is deterministic for a given code path and is the same on every device (a run on CPU
counts what CUDA would launch, data-dependent branches aside).

Host syncs are counted apart: ``aten._local_scalar_dense`` (``bool(t)``, ``t.item()``,
``int(t)``) and the ops whose output size depends on values (``nonzero``, boolean
indexing), each of which makes a CUDA host wait for the device. Given the ``device`` the
work is meant to stay on, the counter also counts the ops that take or make a tensor on
another one (``off_device``): a CPU constant or index tensor that a CUDA op would copy to
the device each call (a host round trip, and inside a captured CUDA graph an error or a
value frozen at capture). A CPU without a GPU can check both for CUDA's sake by running
the work on the ``meta`` device, whose tensors have shapes and no values.

>>> import torch
>>> count_ops(lambda: torch.ones(3) + 1)
2
>>> with OpCounter() as c:
...     x = torch.zeros(4)
...     for _ in range(5):
...         x = x.mul(2)
>>> c.total, c.by_name["aten.mul.Tensor"]
(6, 5)
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

# ops whose result needs a value on the host: a device sync on CUDA
SYNC_OPS = frozenset({"aten._local_scalar_dense.default", "aten.nonzero.default", "aten.masked_select.default"})


def on_device(want: torch.device, at: torch.device) -> bool:
    """Whether a tensor at ``at`` is on ``want``: the same kind, and the same index where
    both name one ("cuda" matches "cuda:1"; "cpu" and "cpu:0" are one device).

    >>> d = torch.device
    >>> on_device(d("cuda"), d("cuda:1")), on_device(d("cuda:0"), d("cuda:1")), on_device(d("cpu:0"), d("cpu"))
    (True, False, True)
    """
    return at.type == want.type and (want.index is None or at.index is None or at.index == want.index)


def _is_view(func: Any) -> bool:
    schema = getattr(func, "_schema", None)
    if schema is None:
        return False
    # a view's output aliases its input without writing: alias_info set and not a write
    return any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


class OpCounter(TorchDispatchMode):
    """Counts the ATen ops dispatched while it is active (``with OpCounter() as c:``).

    ``total`` every op, ``views`` those that only make a view (no kernel), ``syncs`` those
    that make the host wait for a value (``SYNC_OPS``), ``by_name`` each op's count by its
    ATen overload name ("aten.add.Tensor"). With ``device``: ``off_device``, the ops with a
    tensor argument or result on another device, by name (a device kind, "cuda", matches
    every index of it)."""

    def __init__(self, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.by_name: Counter[str] = Counter()
        self.views = 0
        self.syncs = 0
        self.off_device: Counter[str] = Counter()
        self._device = None if device is None else torch.device(device)
        self._paused = 0

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Ops dispatched inside ``with counter.paused():`` are not counted (a model
        forward inside the function measured)."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self._paused:
            return func(*args, **(kwargs or {}))
        name = str(func)
        self.by_name[name] += 1
        if _is_view(func):
            self.views += 1
        if name in SYNC_OPS:
            self.syncs += 1
        out = func(*args, **(kwargs or {}))
        if self._device is not None and any(
            isinstance(t, torch.Tensor) and not on_device(self._device, t.device)
            for t in pytree.tree_leaves((args, kwargs, out))
        ):
            self.off_device[name] += 1
        return out

    @property
    def total(self) -> int:
        return sum(self.by_name.values())

    @property
    def kernels(self) -> int:
        """The ops that are no views: an upper bound on the kernels a device launches."""
        return self.total - self.views

    def summary(self, top: int = 10) -> dict[str, Any]:
        """``total``, ``kernels``, ``views``, ``syncs`` and the ``top`` most frequent ops
        (with a ``device``: ``off_device`` too, the count of those ops)."""
        out: dict[str, Any] = {
            "total": self.total,
            "kernels": self.kernels,
            "views": self.views,
            "syncs": self.syncs,
            "top": dict(self.by_name.most_common(top)),
        }
        if self._device is not None:
            out["off_device"] = sum(self.off_device.values())
        return out


def count_ops(fn: Callable[[], object]) -> int:
    """The number of ATen ops ``fn()`` dispatches (views and syncs included)."""
    with OpCounter() as c:
        fn()
    return c.total


def op_breakdown(fn: Callable[[], object]) -> Counter[str]:
    """The ATen ops ``fn()`` dispatches, by name, with their counts."""
    with OpCounter() as c:
        fn()
    return c.by_name


# what the profiler shows that launches no kernel: allocations and metadata-only ops
_NO_KERNEL = frozenset(
    {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "resize_", "set_", "lift_fresh"}
    | {"detach", "alias", "_unsafe_view"}
)


def _launches_kernel(name: str) -> bool | None:
    """Whether a profiler event named ``name`` is a kernel launch: an inductor kernel (a
    fused C++ or Triton kernel) or an ATen op that is no view or allocation; None for the
    rest (Python wrappers, Dynamo's bookkeeping)."""
    if "_fused_" in name or name.startswith("triton_"):
        return True
    if not name.startswith("aten::"):
        return None
    op = name[len("aten::") :]
    if op in _NO_KERNEL:
        return False
    return not _aten_view(op)


@functools.cache
def _aten_view(op: str) -> bool:
    """Whether the ATen op ``op`` ("slice", "select") makes a view, by its schemas."""
    try:
        packet = getattr(torch.ops.aten, op)
        return any(_is_view(getattr(packet, name)) for name in packet.overloads())
    except (AttributeError, RuntimeError):
        return False


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 pointed at the null device for a moment (native code's logging)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def count_launches(fn: Callable[[], object]) -> dict[str, Any]:
    """The kernels ``fn()`` launches, counted from ``torch.profiler``'s events: inductor's
    fused kernels and the ATen ops that are no views or allocations, each counted where no
    enclosing event is already counted (``aten::_to_copy`` once, not again for its ``copy_``;
    an op whose schema may alias, ``to`` or ``reshape``, counts as what it calls).
    Unlike ``OpCounter`` this also sees a ``torch.compile``d function's kernels (a dispatch
    mode stops torch.compile), so eager and compiled code are counted the same way.
    A launch here is one op that runs work: on CUDA a ``sort`` or ``topk`` may run more
    than one kernel and still counts once, so this is a lower bound on the kernels there.
    Returns ``launches``, ``fused`` (inductor kernels among them) and the ``top`` ops."""
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU])
    with _quiet_stderr():  # the profiler's native layer logs its start and stop on stderr
        prof.__enter__()
    try:
        fn()
    finally:
        with _quiet_stderr():
            prof.__exit__(None, None, None)
    by_name: Counter[str] = Counter()
    for ev in prof.events():
        if not _launches_kernel(ev.name):
            continue
        parent, nested = ev.cpu_parent, False
        while parent is not None:
            if _launches_kernel(parent.name):  # inside a counted op (a view that may copy, as
                nested = True  # ``to`` or ``reshape``, is not: what it calls is counted)
                break
            parent = parent.cpu_parent
        if not nested:
            by_name["inductor kernel" if "_fused_" in ev.name or ev.name.startswith("triton_") else ev.name] += 1
    return {
        "launches": sum(by_name.values()),
        "fused": by_name["inductor kernel"],
        "top": dict(by_name.most_common(8)),
    }
