"""The fastpath's work without the host in the loop, for ``rheo bench fastpath``: the whole
cycle as a CUDA graph or compiled whole (``captured_cycles``, ``rheo.fastpath.graph``), and
on CUDA the tree builds and the batched verifier as CUDA graphs (``captured_builds``,
``captured_verify``); which mode gives a batch size's figures (``fastest``), the top-level
figures (``captured_figures``), what went wrong (``findings``) and their lines of text.
Nothing here runs a host sync inside what it captures; ``capture`` is
``rheo.fastpath.graph.capture`` (a test stands in for it on a CPU:
tests/standin_capture.py)."""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

import torch

from rheo.bench.ops import count_launches
from rheo.bench.runner import TableRunner, sync_device, timed_call
from rheo.fastpath import DraftTree, Params, Uniforms, VerifyResult, build_tree, verify
from rheo.fastpath.expand_dense import expand_dense
from rheo.fastpath.graph import CycleGraph, capture


def captured_cycles(
    vocab: int,
    batch: int,
    params: Params,
    device: str,
    repeats: int = 5,
    count: bool = True,
    mode: Literal["graph", "compile"] | None = None,
) -> dict[str, Any]:
    """The cycle without the host in the loop (``rheo.fastpath.graph.CycleGraph``), for Rheo
    and Top-K at one batch size, in ``mode``: by default on CUDA captured as a CUDA graph
    and replayed ("graph"), elsewhere compiled whole by ``torch.compile`` ("compile"; on a
    CPU on one torch thread: inductor's kernels, and so the launch count, depend on the
    thread count; on CUDA inductor's kernels in CUDA graphs, ``mode="reduce-overhead"``).
    Per policy: the median time of ``repeats`` cycles less the median time of the same
    cycle's forwards alone, run the same way on CUDA (captured in a graph of their own, or
    compiled in CUDA graphs: a replay has no host time to measure them by; on a CPU they run
    eagerly); whether the outputs of a steady call (the third: "compile" on CUDA runs
    eagerly at its first call, records at the second) equal the default eager cycle's; on
    CUDA in mode "compile" whether inductor kept its CUDA graphs (``cuda_graphs``: it skips
    them for some graphs, with a warning); and with ``count`` its kernel launches
    (``count_launches``, forwards included; inductor's kernels made visible to the profiler
    while compiling)."""
    import torch._inductor.config as inductor_config

    cuda = torch.device(device).type == "cuda"
    mode = mode or ("graph" if cuda else "compile")
    out: dict[str, Any] = {"mode": mode, "batch": batch, "torch_threads": torch.get_num_threads() if cuda else 1}
    threads = torch.get_num_threads()
    if not cuda:
        torch.set_num_threads(1)
    try:
        for name, cfg in (("rheo", params), ("topk", params.replace(policy="topk"))):
            out[name] = _captured(vocab, batch, cfg, device, mode, repeats, count, inductor_config)
    finally:
        torch.set_num_threads(threads)
    topk = out["topk"]["cycle_s"]
    out["rheo_over_topk"] = out["rheo"]["cycle_s"] / topk if topk > 0 else None
    return out


def _recorded_queries(r: TableRunner, cfg: Params, u: Uniforms) -> tuple[list, DraftTree]:
    """The draft queries of a static build from the runner's roots, and its tree: what a
    timing of the forwards alone answers again."""
    queries: list = []
    r.model.context = r.context.clone()

    def recording(query):
        queries.append(query)
        return r.model.draft_logits(query)

    return queries, build_tree(recording, cfg, r.T, u, static=True)


def error_text(e: BaseException) -> str:
    """An exception as one row field: its type and message, at most 500 characters."""
    return f"{type(e).__name__}: {e}"[:500]


def both_equal(row: dict[str, Any]) -> bool:
    """Whether a captured-cycle row's outputs equal the eager cycle's for both policies."""
    return bool(row["rheo"]["equals_eager"] and row["topk"]["equals_eager"])


def _mode_rows(captured: dict[str, dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(batch size, row) for every mode timed: the row that gave the figures, then the others."""
    for b, row in captured.items():
        for r in [row, *row.get("alternatives", [])]:
            yield b, r


def _cuda_graph_skips() -> int:
    """How many times inductor has skipped CUDA graphs in this process (its own counter)."""
    from torch._dynamo.utils import counters

    return int(counters["inductor"]["cudagraph_skips"])


def _captured(vocab, batch, cfg, device, mode, repeats, count, inductor_config) -> dict[str, Any]:
    """``captured_cycles`` for one policy."""
    r = TableRunner(vocab, batch, device)
    u = r.uniforms(cfg, seed=batch)
    want = r.cycle(cfg, u)[1]
    queries, tree = _recorded_queries(r, cfg, u)  # the forwards alone, answered again

    def forwards():
        for q in queries:
            r.model.draft_logits(q)
        return r.model.target_logits(tree)

    skips = _cuda_graph_skips()
    fwd = _replayed(forwards, device, mode)
    r.model.context = r.context.clone()
    t0 = time.perf_counter()
    graph = CycleGraph(r.model.draft_logits, r.model.target_logits, cfg, r.T, u, mode=mode)
    # compiled at the first call; to be counted, its kernels made visible to the profiler
    # and not taken from inductor's cache (where they may have been compiled without that)
    saved = inductor_config.cpp.enable_kernel_profile, inductor_config.fx_graph_cache
    if count:
        inductor_config.cpp.enable_kernel_profile, inductor_config.fx_graph_cache = True, False
    try:
        graph(r.T, u)
    finally:
        inductor_config.cpp.enable_kernel_profile, inductor_config.fx_graph_cache = saved
    sync_device(device)
    row: dict[str, Any] = {"setup_s": time.perf_counter() - t0}
    graph(r.T, u)  # "compile" on CUDA: the first call ran eagerly, this one records its CUDA graphs
    _, got = graph(r.T, u)  # a replay in every mode
    row["equals_eager"] = bool(torch.equal(got.tokens, want.tokens) and torch.equal(got.accepted, want.accepted))
    if mode == "compile" and torch.device(device).type == "cuda":
        row["cuda_graphs"] = _cuda_graph_skips() == skips
    times, fwd_times = [], []
    for _ in range(max(repeats, 3)):  # the cycle and its forwards alone, alternating
        fwd_times.append(timed_call(fwd, device))
        times.append(timed_call(functools.partial(graph, r.T, u), device))
    row["forwards_s"] = statistics.median(fwd_times)
    row["cycle_with_forwards_s"] = statistics.median(times)
    row["cycle_s"] = max(row["cycle_with_forwards_s"] - row["forwards_s"], 0.0)
    if count:
        seen = count_launches(functools.partial(graph, r.T, u))
        # no inductor kernel seen: the profiler missed them, and the count would be too low
        row["launches"] = seen["launches"] if seen["fused"] or mode != "compile" else None
        row["launch_top"] = seen["top"]
    return row


def attempt(run: Callable[[], dict[str, Any]], mode: str, batch: int) -> dict[str, Any]:
    """``run()``, or where it raises (inductor cannot compile this cycle on this device)
    its error as a row of its own, shown by the CLI: one mode's failure does not lose the
    other's figures (an error that leaves the device unusable still ends the run)."""
    try:
        return run()
    except Exception as e:
        return {"mode": mode, "batch": batch, "error": error_text(e)}


def fastest(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The row that sets a batch size's figures: among the modes whose outputs equal the
    eager cycle's for both policies, the one with the fastest Rheo cycle as measured,
    forwards included (what is subtracted is measured apart and may be floored at 0); none
    equal: the first row, whose ``equals_eager`` says so. The other rows go under
    ``alternatives``."""
    equal = [r for r in rows if "error" not in r and both_equal(r)]
    best = min(equal, key=lambda r: r["rheo"]["cycle_with_forwards_s"]) if equal else rows[0]
    return {**best, "alternatives": [r for r in rows if r is not best]}


def captured_figures(captured: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The top-level figures of the captured cycles by batch size (``fastest``'s rows):
    ``rheo_captured_cycle_ms_b<b>`` (forwards subtracted), ``rheo_over_topk_captured`` (the
    worst batch size; None where no ratio could be formed) and ``captured_equals_eager``,
    over every mode timed, whether it gave the figures or not (a replay must equal the
    eager cycle)."""
    out: dict[str, Any] = {f"rheo_captured_cycle_ms_b{b}": row["rheo"]["cycle_s"] * 1e3 for b, row in captured.items()}
    ratios = [row["rheo_over_topk"] for row in captured.values() if row["rheo_over_topk"] is not None]
    out["rheo_over_topk_captured"] = max(ratios) if ratios else None
    out["captured_equals_eager"] = all(both_equal(r) for _, r in _mode_rows(captured) if "error" not in r)
    return out


def _replayed(fn: Callable[[], object], device: str, mode: str) -> Callable[[], object]:
    """``fn`` (the forwards alone) run as the cycle runs them: on CUDA captured once and
    replayed (mode "graph") or compiled in CUDA graphs (mode "compile"), warmed up; on a
    CPU eagerly."""
    if torch.device(device).type != "cuda":
        return fn
    if mode == "compile":
        compiled = torch.compile(fn, fullgraph=True, dynamic=False, mode="reduce-overhead")
        for _ in range(3):  # compiled, run eagerly once, recorded, replayed
            compiled()
        return compiled
    graph, kept = capture(fn, warmup=1)  # its outputs live in the graph's pool

    def replay() -> object:
        graph.replay()
        return kept

    return replay


def captured_builds(r: TableRunner, cfg: Params, u: Uniforms, repeats: int) -> dict[str, Any]:
    """On CUDA, the two tree builds ``sparse_over_dense`` compares, with the host out of the
    way: ``build_tree(static=True)`` with ``draft_top_k`` and with Y drawn from all V by a
    Gumbel-max (``expand_dense(static=True)``), each captured as a CUDA graph and replayed,
    alternating, less their forwards (the same shapes in both builds) replayed from a graph
    of their own. What is left is each build's own kernels, so the ratio says what the
    vocabulary-wide draw costs, which the launch-bound eager builds on CUDA hide."""
    dense = functools.partial(expand_dense, method="gumbel", static=True)
    queries, _ = _recorded_queries(r, cfg, u)
    fwd = _replayed(lambda: [r.model.draft_logits(q) for q in queries], r.device, "graph")
    sparse, _ = capture(lambda: build_tree(r.model.draft_logits, cfg, r.T, u, static=True))
    full, _ = capture(lambda: build_tree(r.model.draft_logits, cfg, r.T, u, static=True, expand_fn=dense))
    t_fwd, t_sparse, t_dense = [], [], []
    for _ in range(max(repeats, 5)):
        t_fwd.append(timed_call(fwd, r.device))
        t_sparse.append(timed_call(sparse.replay, r.device))
        t_dense.append(timed_call(full.replay, r.device))
    f = statistics.median(t_fwd)
    row: dict[str, Any] = {
        "build_forwards_captured_s": f,
        "sparse_build_captured_s": max(statistics.median(t_sparse) - f, 0.0),
        "dense_build_captured_s": max(statistics.median(t_dense) - f, 0.0),
    }
    if row["sparse_build_captured_s"] <= 0 or row["dense_build_captured_s"] <= 0:  # no ratio to judge
        row["sparse_over_dense_captured"] = None
        row["captured_error"] = "a build measured no longer than its forwards alone: no ratio"
    else:
        row["sparse_over_dense_captured"] = row["sparse_build_captured_s"] / row["dense_build_captured_s"]
    return row


def captured_verify(
    tree: DraftTree, logits: torch.Tensor, T: torch.Tensor, cfg: Params, u: Uniforms, want: VerifyResult, repeats: int
) -> dict[str, Any]:
    """On CUDA, the batched verifier with the host out of the way: ``verify(static=True)``
    captured as a CUDA graph and replayed (median of ``repeats``, at least 5), and whether a
    replay's outputs equal ``want`` (the default walk's on the same inputs)."""
    graph, got = capture(lambda: verify(tree, logits, T, cfg, u, static=True))
    times = [timed_call(graph.replay, str(T.device)) for _ in range(max(repeats, 5))]
    equal = torch.equal(got.tokens, want.tokens) and torch.equal(got.lengths, want.lengths)
    return {"fast_captured_s": statistics.median(times), "captured_outputs_equal": bool(equal)}


def describe_captured(row: dict[str, Any]) -> str:
    """One mode's captured-cycle row as a line of text (the CLI's table and the progress)."""
    how = {"graph": "CUDA graph replay", "compile": "compiled whole (torch.compile)"}.get(row["mode"], row["mode"])
    if "error" in row:
        return f"the cycle {how}: failed, {row['error']}"
    ratio = "-" if row["rheo_over_topk"] is None else f"{row['rheo_over_topk']:.3f}"
    skipped = any(row[k].get("cuda_graphs") is False for k in ("rheo", "topk"))
    skipped_text = "; inductor skipped its CUDA graphs" if skipped else ""
    return (
        f"the cycle {how}: rheo {row['rheo']['cycle_s'] * 1e3:.2f} ms, topk {row['topk']['cycle_s'] * 1e3:.2f} ms "
        f"(x{ratio}; forwards {row['rheo']['forwards_s'] * 1e3:.2f} ms subtracted; "
        f"outputs equal to eager: {both_equal(row)}{skipped_text})"
    )


def findings(out: dict[str, Any]) -> list[str]:
    """What went wrong without the host in the loop, one line each (``rheo bench fastpath``
    exits 1 on any): a mode, a build or the verifier that failed to capture or compile or
    gave no ratio, a replay whose outputs differ from the eager cycle's or the default
    walk's. A measurement asked for and missing is a finding, not "not measured"."""
    found = []
    for b, r in _mode_rows(out.get("captured") or {}):
        if "error" in r:
            found.append(f"batch {b}: the cycle in mode {r['mode']} failed: {r['error']}")
        elif not both_equal(r):
            found.append(f"batch {b}: the cycle in mode {r['mode']} differs from the eager cycle")
    for b, row in out.get("batches", {}).items():
        if "captured_error" in row:
            found.append(f"batch {b}: the tree builds as CUDA graphs: {row['captured_error']}")
    v = out.get("verify", {})
    if "captured_error" in v:
        found.append(f"the verifier as a CUDA graph failed: {v['captured_error']}")
    elif v.get("captured_outputs_equal") is False:
        found.append("the verifier as a CUDA graph differs from the default walk")
    return found


def describe_captured_builds(row: dict[str, Any]) -> str:
    """A batch size's tree builds as CUDA graphs (``captured_builds``) as a line of text."""
    ratio = row["sparse_over_dense_captured"]
    return (
        f"tree builds as CUDA graphs: sparse {row['sparse_build_captured_s'] * 1e3:.2f} ms vs dense "
        f"{row['dense_build_captured_s'] * 1e3:.2f} ms [gumbel] (x{'-' if ratio is None else f'{ratio:.3f}'}; "
        f"forwards {row['build_forwards_captured_s'] * 1e3:.2f} ms subtracted)"
    )
