"""What the fastpath's entry points accept and its stages hand on: the shape and dtype checks.

Each public entry point (``build_tree``, ``expand``, ``verify``, ``run_cycle``, the laws
of docs/spec.md §0-§1 and the draws of §7) checks its tensors' shapes and dtypes and its
``Params`` before it computes anything, as vLLM's rejection sampler asserts its inputs at
entry. The handoffs between stages are checked the same way: every pool ``build_tree`` gets
from ``expand`` (``check_pool``), the recorded nodes before pruning (path scores float64),
and the two results, ``DraftTree`` and ``VerifyResult``, when they are made (their
``__post_init__``: every tensor's dtype and shape as their docstrings give them, path
scores float64 whatever the model's dtype). The checks read only ``.shape`` and ``.dtype``
(host metadata: no device sync, so never a value); a failure names the function, the
argument, what it got and what is expected. Value ranges (probabilities in [0, 1], indices
in range, parents before children) would need the values, a sync on a GPU: they are
checked in tests only (``rheo.testing.ranges``).

>>> import torch
>>> expect("expand", "valid", torch.zeros(2, 3), "[b, n]", (2, 3), "bool")
Traceback (most recent call last):
...
ValueError: expand: valid must be a bool tensor of shape [b, n] = [2, 3], got shape [2, 3] and dtype torch.float32
"""

from __future__ import annotations

from collections.abc import Sequence
from types import EllipsisType
from typing import Literal

import torch

from rheo.reference.numbers import CaseError
from rheo.reference.params import Params

Kind = Literal["float", "int", "bool"] | torch.dtype  # a dtype: exactly that dtype


def _of_kind(dtype: torch.dtype, kind: Kind) -> bool:
    if isinstance(kind, torch.dtype):
        return dtype == kind
    if kind == "float":
        return dtype.is_floating_point
    if kind == "bool":
        return dtype == torch.bool
    return not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)


def expect(
    where: str, name: str, x: object, spec: str, sizes: Sequence[int | None | EllipsisType], kind: Kind
) -> torch.Tensor:
    """``x`` as a tensor of these sizes (None: any size; one ``...``: any number of
    dimensions there) and a dtype of this kind (or exactly this dtype); else a ValueError (a
    TypeError if it is no tensor at all).

    >>> expect("tree", "scores", torch.zeros(2), "[b]", (2,), torch.float64)
    Traceback (most recent call last):
    ...
    ValueError: tree: scores must be a torch.float64 tensor of shape [b] = [2], got shape [2] and dtype torch.float32
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{where}: {name} must be a torch.Tensor of shape {spec}, got {type(x).__name__}")
    if ... in sizes:
        cut = list(sizes).index(...)
        head, tail = list(sizes[:cut]), list(sizes[cut + 1 :])
        fits = (
            x.dim() >= len(head) + len(tail)
            and _same(head, x.shape[: len(head)])
            and _same(tail, x.shape[x.dim() - len(tail) :])
        )
    else:
        fits = x.dim() == len(sizes) and _same(list(sizes), x.shape)
    if not (fits and _of_kind(x.dtype, kind)):
        want = ", ".join("..." if s is ... else "*" if s is None else str(s) for s in sizes)
        raise ValueError(
            f"{where}: {name} must be a {kind} tensor of shape {spec} = [{want}], "
            f"got shape {list(x.shape)} and dtype {x.dtype}"
        )
    return x


def _same(sizes: list[int | None | EllipsisType], shape: Sequence[int]) -> bool:
    return all(s is None or s == n for s, n in zip(sizes, shape))


def expect_params(where: str, params: object) -> Params:
    """``params`` as float64 ``Params`` whose proxy the fastpath computes ("rheo", "self" or
    a constant; docs/spec.md §2)."""
    if not isinstance(params, Params):
        raise TypeError(
            f"{where}: params must be a rheo.reference.params.Params (e.g. PAPER_TREE.replace(...)), "
            f"got {type(params).__name__}"
        )
    if params.arithmetic != "float64":
        raise CaseError(
            "arithmetic",
            f"{where}: the fastpath computes in float64; pass "
            f'params.in_arithmetic("float64"), got {params.arithmetic!r}',
        )
    if params.proxy.kind not in ("rheo", "self", "constant"):
        raise CaseError(
            "proxy",
            f'{where}: the fastpath computes the proxies "rheo", "self" and '
            f'{{"constant": c}}, got {params.proxy.kind!r}',
        )
    return params
