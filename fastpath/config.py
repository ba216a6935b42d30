"""The fastpath's parameters: the one schema of docs/spec.md §2, ``rheo.reference.params.Params``.

The fastpath runs on float64 ``Params`` (``params.in_arithmetic("float64")`` turns a case
file's exact parameters into them). ``PAPER_TREE`` is the paper's tree and the default;
``FastConfig`` is the constructor the fastpath had before the schema was shared, kept so
that code written against it keeps working.
"""

from __future__ import annotations

from typing import Any, cast

from rheo.reference.params import PAPER_TREE, Params, Proxy, ProxyKind, TargetFilters


def FastConfig(**changes: Any) -> Params:
    """``PAPER_TREE`` with ``changes``, in the fastpath's earlier spelling: ``proxy`` "rheo",
    "self" or a float constant; ``filters`` the target filters.

    >>> FastConfig(K=4, depth=3, budget=8, proxy=0.25).proxy
    Proxy(kind='constant', value=0.25, table=None, fn=None)
    """
    if "filters" in changes:
        changes["target_filters"] = changes.pop("filters")
    proxy = changes.get("proxy")
    if isinstance(proxy, str):
        changes["proxy"] = Proxy(cast(ProxyKind, proxy))  # Params checks the choice
    elif isinstance(proxy, (int, float)) and not isinstance(proxy, bool):
        changes["proxy"] = Proxy("constant", value=float(proxy))
    if "epsilon" in changes:
        changes["epsilon"] = float(changes["epsilon"])
    return PAPER_TREE.replace(**changes)


__all__ = ["PAPER_TREE", "FastConfig", "Params", "Proxy", "TargetFilters"]
