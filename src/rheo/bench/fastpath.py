"""``rheo bench fastpath``: the fastpath's costs, each ratio measured side by side in one run.

Model forwards are excluded: logits come from ``HashTableModel`` (a row gather from a bank),
and the time spent answering forwards is measured and subtracted. Per batch size:

- ``rheo_over_topk``: a Rheo cycle (tree + verification) over a Top-K cycle, same shape;
- ``sparse_over_dense``: tree construction with ``draft_top_k`` = 128 over the same
  construction drawing Y from the whole vocabulary (``expand_dense``, the faster of a
  Gumbel-max and ``torch.multinomial``);
- ``fast_over_naive_verify``: the EAGLE-style verifier (``verify_naive``: a Python loop over
  requests and visited nodes, a vocabulary softmax at each) over the batched ``verify``,
  on the same tree, logits and uniforms (their outputs are checked equal).

Runs alternate between the variants being compared (A B A B ...) and report medians; a
cycle variant runs at least ``MIN_SECONDS`` in total (at least ``repeats``, at most 50 runs),
and the dense tree build too (at least ``repeats // 2``, at most 20 builds of each kind).

The cycle without the host in the loop (``captured_cycles``, ``rheo.fastpath.graph``): on
CUDA a CUDA graph per batch size, and at the first and last batch sizes (the targets') also
compiled whole by ``torch.compile`` in CUDA graphs, the faster mode whose outputs equal the
eager cycle's setting the figures; on a CPU compiled whole at batch 1 (one thread); each
timed less its forwards run the same way. And ops per cycle at batch 1 (``op_counts``,
ATen ops and kernel launches) beside those of the code before (``OPS_BEFORE``).

On CUDA, where the eager builds and verifier are bound by kernel launches, the two tree
builds and the batched verifier are also timed as CUDA graphs (``captured_builds``,
``captured_verify``): ``sparse_over_dense_captured`` and ``fast_over_naive_verify_captured``.

Targets (``TARGETS``, judged by ``rheo.bench.targets`` on the device the run used):
``rheo_over_topk <= 1.25`` on CPU and CUDA; ``sparse_over_dense <= 0.25`` on a CPU and
``sparse_over_dense_captured <= 0.25`` on CUDA; ``fast_over_naive_verify >= 0.8`` on a
CPU, where both verifiers are bound by the same vocabulary-wide softmax, and
``fast_over_naive_verify_captured >= 10`` on CUDA, where the loop's every op is a launch;
``launches_compiled_over_before <= 0.1`` on a CPU (where the cycle is compiled and
counted); on CUDA the captured cycle in at most 1 ms at batch 1 and 3 ms at batch 64 and
``rheo_over_topk_captured <= 1.05`` (docs/fastpath.md). Every phase longer than about 5 s
reports progress (``rheo.progress``).

Specification: docs/spec.md §1-§4 (the algorithm timed), §7 (its uniforms).
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable
from typing import Any, Literal

import torch

from rheo.bench.ops import OpCounter, count_launches
from rheo.bench.targets import FASTPATH, judge, summary
from rheo.fastpath import PAPER_TREE, DraftTree, Params, Uniforms, VerifyResult, build_tree, verify
from rheo.fastpath.expand_dense import expand_dense
from rheo.fastpath.graph import CycleGraph, capture
from rheo.fastpath.verify_naive import verify_naive
from rheo.progress import Meter
from rheo.testing import HashTableModel

MIN_SECONDS = 1.0  # each cycle variant runs at least this long in total (up to 50 runs)
SCALE, DRAFT_NOISE = 6.0, 0.3  # target logits 6 x N(0, 1), draft = target + 0.3 x N(0, 1)
TARGETS = FASTPATH


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


class _Runner:
    """One batch size: a table model whose context is reset before every run, so every
    variant sees the same roots and the same uniforms."""

    def __init__(self, V, b, device, seed=0, dtype=torch.float32):
        self.model = HashTableModel(
            V, b, seed=seed, rows=8, scale=SCALE, draft_noise=DRAFT_NOISE, dtype=dtype, device=device
        )
        self.context = self.model.context.clone()
        self.T = torch.ones(b, dtype=torch.float64, device=device)
        self.device = device
        self.b = b

    def uniforms(self, cfg, seed):
        g = torch.Generator(device=self.device).manual_seed(seed)
        return Uniforms.random(self.b, cfg.K, cfg.B, cfg.depth, g, device=self.device)

    def _timed(self, fn):
        self.model.context = self.context.clone()
        self.model.forward_seconds = 0.0
        _sync(self.device)
        t0 = time.perf_counter()
        out = fn()
        _sync(self.device)
        return time.perf_counter() - t0 - self.model.forward_seconds, out

    def cycle(self, cfg, u):
        def run():
            tree = build_tree(self.model.draft_logits, cfg, self.T, u)
            return verify(tree, self.model.target_logits(tree), self.T, cfg, u)

        return self._timed(run)

    def build(self, cfg, u, expand_fn=None):
        return self._timed(lambda: build_tree(self.model.draft_logits, cfg, self.T, u, expand_fn=expand_fn))


# The fastpath before issue 37 (commit 54c57f7), counted by ``bench/ops_before_after.py``, which
# exports that commit's code and counts it beside this checkout's in one run (V = 128256,
# PAPER_TREE, batch 1, float32, the bench's table model and seed, one warm-up cycle): ATen ops
# with forwards excluded (``OpCounter``), and kernel launches with the table model's forwards
# included (``count_launches``, what the compiled cycle is compared with). Op counts do not
# depend on the device; the data-dependent branches follow the seed, on which the outputs
# before and now (eager and compiled) are equal. Recorded 2026-12-05.
OPS_BEFORE: dict[str, dict[str, int]] = {
    "rheo": {"cycle": 2303, "cycle_kernels": 1673, "cycle_syncs": 94, "launches": 1842},
    "topk": {"cycle": 1782, "cycle_kernels": 1325, "cycle_syncs": 49, "launches": 1480},
}
BEFORE_COMMIT = "54c57f7"


def op_counts(
    vocab: int = 128256, batch: int = 1, params: Params = PAPER_TREE, device: str = "cpu", static: bool = False
) -> dict:
    """The ATen ops one cycle dispatches (``rheo.bench.ops.OpCounter``), model forwards
    excluded, for Rheo (``params``) and Top-K on the same shape, each after one uncounted
    warm-up cycle (constants made once per shape are not a cycle's cost): per policy
    ``build``, ``verify`` and ``cycle`` totals, the cycle's kernels (ops that are no views)
    and host syncs, its most frequent ops, and its kernel ``launches`` counted by the
    profiler with the forwards included (``count_launches``, comparable with a compiled
    cycle's). ``static``: the static-shape, sync-free cycle a CUDA graph captures
    (``build_tree(static=True)``, ``verify(static=True)``: all D+1 depths)."""
    out: dict[str, Any] = {"batch": batch, "static": static}
    for name, cfg in (("rheo", params), ("topk", params.replace(policy="topk"))):
        r = _Runner(vocab, batch, device)
        u = r.uniforms(cfg, seed=batch)
        counters = []
        for _ in range(2):  # a warm-up, then the counted cycle
            r.model.context = r.context.clone()
            build_counter, verify_counter = OpCounter(), OpCounter()

            def draft(query, counter=build_counter, model=r.model):
                with counter.paused():
                    return model.draft_logits(query)

            with build_counter:
                tree = build_tree(draft, cfg, r.T, u, static=static)
            logits = r.model.target_logits(tree)
            with verify_counter:
                verify(tree, logits, r.T, cfg, u, static=static)
            counters = [build_counter, verify_counter]
        build, ver = (c.summary() for c in counters)
        both = counters[0].by_name + counters[1].by_name

        def cycle(cfg=cfg, r=r, u=u):
            r.model.context = r.context.clone()
            tree = build_tree(r.model.draft_logits, cfg, r.T, u, static=static)
            return verify(tree, r.model.target_logits(tree), r.T, cfg, u, static=static)

        out[name] = {
            "build": build["total"],
            "verify": ver["total"],
            "cycle": build["total"] + ver["total"],
            "cycle_kernels": build["kernels"] + ver["kernels"],
            "cycle_syncs": build["syncs"] + ver["syncs"],
            "cycle_top_ops": dict(both.most_common(8)),
            "launches": count_launches(cycle)["launches"],
        }
    return out


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


def _cuda_graph_skips() -> int:
    """How many times inductor has skipped CUDA graphs in this process (its own counter)."""
    from torch._dynamo.utils import counters

    return int(counters["inductor"]["cudagraph_skips"])


def _captured(vocab, batch, cfg, device, mode, repeats, count, inductor_config) -> dict[str, Any]:
    """``captured_cycles`` for one policy."""
    r = _Runner(vocab, batch, device)
    u = r.uniforms(cfg, seed=batch)
    want = r.cycle(cfg, u)[1]
    # the forwards alone: the queries and tree of an eager static cycle, answered again
    queries: list = []
    r.model.context = r.context.clone()

    def recording(query):
        queries.append(query)
        return r.model.draft_logits(query)

    tree = build_tree(recording, cfg, r.T, u, static=True)

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
    _sync(device)
    row: dict[str, Any] = {"setup_s": time.perf_counter() - t0}
    graph(r.T, u)  # "compile" on CUDA: the first call ran eagerly, this one records its CUDA graphs
    _, got = graph(r.T, u)  # a replay in every mode
    row["equals_eager"] = bool(torch.equal(got.tokens, want.tokens) and torch.equal(got.accepted, want.accepted))
    if mode == "compile" and torch.device(device).type == "cuda":
        row["cuda_graphs"] = _cuda_graph_skips() == skips
    times, fwd_times = [], []
    for _ in range(max(repeats, 3)):  # the cycle and its forwards alone, alternating
        fwd_times.append(_timed_call(fwd, device))
        times.append(_timed_call(functools.partial(graph, r.T, u), device))
    row["forwards_s"] = statistics.median(fwd_times)
    row["cycle_with_forwards_s"] = statistics.median(times)
    row["cycle_s"] = max(row["cycle_with_forwards_s"] - row["forwards_s"], 0.0)
    if count:
        seen = count_launches(functools.partial(graph, r.T, u))
        # no inductor kernel seen: the profiler missed them, and the count would be too low
        row["launches"] = seen["launches"] if seen["fused"] or mode != "compile" else None
        row["launch_top"] = seen["top"]
    return row


def _attempt(run: Callable[[], dict[str, Any]], mode: str, batch: int) -> dict[str, Any]:
    """``run()``, or where it raises (inductor cannot compile this cycle on this device)
    its error as a row of its own, shown by the CLI: one mode's failure does not lose the
    other's figures (an error that leaves the device unusable still ends the run)."""
    try:
        return run()
    except Exception as e:
        return {"mode": mode, "batch": batch, "error": f"{type(e).__name__}: {e}"[:500]}


def _fastest(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The row that sets a batch size's figures: among the modes whose outputs equal the
    eager cycle's for both policies, the one with the fastest Rheo cycle as measured,
    forwards included (what is subtracted is measured apart and may be floored at 0); none
    equal: the first row, whose ``equals_eager`` says so. The other rows go under
    ``alternatives``."""
    equal = [r for r in rows if "error" not in r and r["rheo"]["equals_eager"] and r["topk"]["equals_eager"]]
    best = min(equal, key=lambda r: r["rheo"]["cycle_with_forwards_s"]) if equal else rows[0]
    return {**best, "alternatives": [r for r in rows if r is not best]}


def captured_figures(captured: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The top-level figures of the captured cycles by batch size (``_fastest``'s rows):
    ``rheo_captured_cycle_ms_b<b>`` (forwards subtracted), ``rheo_over_topk_captured`` (the
    worst batch size; None where no ratio could be formed) and ``captured_equals_eager``,
    over every mode timed, whether it gave the figures or not (a replay must equal the
    eager cycle)."""
    out: dict[str, Any] = {f"rheo_captured_cycle_ms_b{b}": row["rheo"]["cycle_s"] * 1e3 for b, row in captured.items()}
    ratios = [row["rheo_over_topk"] for row in captured.values() if row["rheo_over_topk"] is not None]
    out["rheo_over_topk_captured"] = max(ratios) if ratios else None
    out["captured_equals_eager"] = all(
        r[k]["equals_eager"]
        for row in captured.values()
        for r in [row, *row["alternatives"]]
        if "error" not in r
        for k in ("rheo", "topk")
    )
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


def captured_builds(r: _Runner, cfg: Params, u: Uniforms, repeats: int) -> dict[str, Any]:
    """On CUDA, the two tree builds ``sparse_over_dense`` compares, with the host out of the
    way: ``build_tree(static=True)`` with ``draft_top_k`` and with Y drawn from all V by a
    Gumbel-max (``expand_dense(static=True)``), each captured as a CUDA graph and replayed,
    alternating, less their forwards (the same shapes in both builds) replayed from a graph
    of their own. What is left is each build's own kernels, so the ratio says what the
    vocabulary-wide draw costs, which the launch-bound eager builds on CUDA hide."""
    dense = functools.partial(expand_dense, method="gumbel", static=True)
    r.model.context = r.context.clone()
    queries: list = []

    def recording(query):
        queries.append(query)
        return r.model.draft_logits(query)

    build_tree(recording, cfg, r.T, u, static=True)
    fwd = _replayed(lambda: [r.model.draft_logits(q) for q in queries], r.device, "graph")
    sparse, _ = capture(lambda: build_tree(r.model.draft_logits, cfg, r.T, u, static=True))
    full, _ = capture(lambda: build_tree(r.model.draft_logits, cfg, r.T, u, static=True, expand_fn=dense))
    t_fwd, t_sparse, t_dense = [], [], []
    for _ in range(max(repeats, 5)):
        t_fwd.append(_timed_call(fwd, r.device))
        t_sparse.append(_timed_call(sparse.replay, r.device))
        t_dense.append(_timed_call(full.replay, r.device))
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
    times = [_timed_call(graph.replay, str(T.device)) for _ in range(max(repeats, 5))]
    equal = torch.equal(got.tokens, want.tokens) and torch.equal(got.lengths, want.lengths)
    return {"fast_captured_s": statistics.median(times), "captured_outputs_equal": bool(equal)}


def _timed_call(fn: Callable[[], object], device: str) -> float:
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


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
        f"outputs equal to eager: {row['rheo']['equals_eager'] and row['topk']['equals_eager']}{skipped_text})"
    )


def findings(out: dict[str, Any]) -> list[str]:
    """What went wrong without the host in the loop, one line each (``rheo bench fastpath``
    exits 1 on any): a mode, a build or the verifier that failed to capture or compile or
    gave no ratio, a replay whose outputs differ from the eager cycle's or the default
    walk's. A measurement asked for and missing is a finding, not "not measured"."""
    found = []
    for b, row in (out.get("captured") or {}).items():
        for r in [row, *row.get("alternatives", [])]:
            if "error" in r:
                found.append(f"batch {b}: the cycle in mode {r['mode']} failed: {r['error']}")
            elif not (r["rheo"]["equals_eager"] and r["topk"]["equals_eager"]):
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


def render_op_counts(ops: dict) -> list[str]:
    """The op counts as lines of text: per policy, before, now (default and static eager,
    ``OpCounter``) and the kernel launches of the cycle before, now and compiled whole."""
    lines = [
        f"ops per cycle at batch {ops['batch']}: ATen ops, forwards excluded (kernels, host syncs); "
        "kernel launches, the table model's forwards included"
    ]
    for name in ("rheo", "topk"):
        for label, key in (("before", "before"), ("now", "after"), ("static", "after_static")):
            row = (ops.get(key) or {}).get(name)
            if row is None:
                continue
            lines.append(
                f"  {name:<5} {label:<7} {row['cycle']:>6} ops ({row['cycle_kernels']} kernels, "
                f"{row['cycle_syncs']} syncs); {row['launches']} launches"
            )
        compiled = (ops.get("compiled") or {}).get(name)
        if compiled is not None:
            n = compiled["launches"]
            lines.append(f"  {name:<5} compiled {'not counted' if n is None else f'{n:>5} launches'}")
    if ops.get("compiled_over_before") is not None:
        lines.append(f"  launches, compiled over before (worst policy): x{ops['compiled_over_before']:.3f}")
    return lines


def bench_fastpath(
    *,
    batches=(1, 16, 64),
    vocab: int = 128256,
    params: Params = PAPER_TREE,
    repeats: int = 5,
    naive_batch: int = 64,
    device: str = "cpu",
    progress: Callable[[str], None] | None = None,
    compiled: bool = True,
    graphs: bool | None = None,
) -> dict:
    """Time the fastpath, forwards excluded; returns the rows and ratios as a dict (the CLI
    renders it), judged against the targets for ``device`` (``TARGETS``; ``targets`` and
    ``meets_targets`` hold those for this device, ``target_verdicts`` every one), with
    ``capture_findings``: what went wrong without the host in the loop (``findings``).
    ``compiled``: time the cycle without the host in the loop; ``graphs``: time the tree
    builds and the batched verifier as CUDA graphs (default: on CUDA when ``compiled``;
    ``rheo.fastpath.graph.capture`` does the capturing, which a test stands in for on a
    CPU). ``params``
    is the Rheo configuration timed (Top-K on the same tree beside it); ``progress`` hears
    one line per batch size and a progress line every second of a phase longer than 5 s."""
    say = progress or (lambda msg: None)
    cfg = params
    K, depth, budget, m, draft_top_k = cfg.K, cfg.depth, cfg.budget, cfg.m, cfg.draft_top_k
    topk_cfg = cfg.replace(policy="topk")
    out: dict[str, Any] = {
        "device": str(device),
        "vocab": vocab,
        "K": K,
        "depth": depth,
        "budget": budget,
        "m": m,
        "draft_top_k": draft_top_k,
        "repeats": repeats,
        "torch_threads": torch.get_num_threads(),
        "forwards": "excluded (table model, time subtracted)",
    }
    say("counting ops per cycle (batch 1), eager and static")
    ops_now = op_counts(vocab, 1, cfg, device)
    ops_static = op_counts(vocab, 1, cfg, device, static=True)
    paper = (vocab, cfg) == (128256, PAPER_TREE)
    out["ops_per_cycle"] = ops = {
        "batch": 1,
        "counter": "TorchDispatchMode (rheo.bench.ops.OpCounter): ATen ops below autograd, views included",
        "launch_counter": "torch.profiler (rheo.bench.ops.count_launches): kernels, forwards included",
        "before_commit": BEFORE_COMMIT if paper else None,
        "before": OPS_BEFORE if paper else None,
        "after": {k: ops_now[k] for k in ("rheo", "topk")},
        "after_static": {k: ops_static[k] for k in ("rheo", "topk")},
        "compiled": None,
        "compiled_over_before": None,
    }
    captured: dict[str, Any] = {}
    cuda = torch.device(device).type == "cuda"
    graphs = cuda and compiled if graphs is None else graphs
    if compiled:
        for b in batches if cuda else batches[:1]:
            say(f"batch {b}: the cycle {'captured as a CUDA graph' if cuda else 'compiled whole (about a minute)'}")
            rows = [captured_cycles(vocab, b, cfg, device, repeats, count=(b == 1 and not cuda))]
            say(f"batch {b}: {describe_captured(rows[0])}")  # said now: a run stopped later keeps it
            if cuda and b in (batches[0], batches[-1]):  # 1 and 64 by default, the targets': compiling takes a while
                say(f"batch {b}: the cycle compiled whole, in CUDA graphs (torch.compile, reduce-overhead)")
                compile_run = functools.partial(
                    captured_cycles, vocab, b, cfg, device, repeats, count=False, mode="compile"
                )
                rows.append(_attempt(compile_run, "compile", b))
                say(f"batch {b}: {describe_captured(rows[-1])}")
            captured[str(b)] = _fastest(rows)
        if not cuda and "1" in captured:
            ops["compiled"] = {k: {"launches": captured["1"][k]["launches"]} for k in ("rheo", "topk")}
            if paper and all(captured["1"][k]["launches"] is not None for k in ("rheo", "topk")):
                ops["compiled_over_before"] = max(
                    captured["1"][k]["launches"] / OPS_BEFORE[k]["launches"] for k in ("rheo", "topk")
                )
    for line in render_op_counts(ops):
        say(line)
    out["captured"] = captured
    by_batch: dict[str, dict] = {}
    out["batches"] = by_batch
    for b in batches:
        r = _Runner(vocab, b, device)
        u = r.uniforms(cfg, seed=b)
        r.cycle(cfg, u)  # warm-up
        first = r.cycle(topk_cfg, u)[0]
        runs = min(50, max(repeats, math.ceil(MIN_SECONDS / max(first, 1e-6))))  # small batches: more runs
        t_rheo, t_topk = [], []
        meter = Meter(f"batch {b}: Rheo and Top-K cycles, alternating", 2 * runs, progress, unit="cycles")
        for _ in range(runs):
            t_rheo.append(r.cycle(cfg, u)[0])
            t_topk.append(r.cycle(topk_cfg, u)[0])
            meter.advance(2)
        meter.close()
        # full-vocabulary baseline: pick the faster draw, then alternate with the sparse build
        dense: dict[str, float] = {}
        methods: tuple[Literal["gumbel", "multinomial"], ...] = ("gumbel", "multinomial")
        builds = max(1, repeats // 2)
        meter = Meter(f"batch {b}: tree builds, sparse and dense", len(methods) + 2 * builds, progress, unit="builds")
        for method in methods:
            fn = functools.partial(expand_dense, method=method)
            dense[method] = r.build(cfg, u, fn)[0]
            meter.advance()
        method = min(methods, key=lambda k: dense[k])
        fn = functools.partial(expand_dense, method=method)
        # small batches: more pairs, as for the cycles (one pair at batch 1 let one slow build decide)
        builds = min(20, max(builds, math.ceil(MIN_SECONDS / max(dense[method], 1e-6))))
        meter.total = len(methods) + 2 * builds
        t_sparse, t_dense = [], []
        for _ in range(builds):
            t_sparse.append(r.build(cfg, u)[0])
            t_dense.append(r.build(cfg, u, fn)[0])
            meter.advance(2)
        meter.close()
        row = {
            "rheo_cycle_s": statistics.median(t_rheo),
            "topk_cycle_s": statistics.median(t_topk),
            "sparse_build_s": statistics.median(t_sparse),
            "dense_build_s": statistics.median(t_dense),
            "dense_method": method,
            "cycle_runs": runs,
        }
        row["rheo_over_topk"] = row["rheo_cycle_s"] / row["topk_cycle_s"]
        row["sparse_over_dense"] = row["sparse_build_s"] / row["dense_build_s"]
        by_batch[str(b)] = row
        say(
            f"batch {b}: rheo {row['rheo_cycle_s'] * 1e3:.1f} ms, topk {row['topk_cycle_s'] * 1e3:.1f} ms "
            f"(x{row['rheo_over_topk']:.2f}); build sparse {row['sparse_build_s'] * 1e3:.1f} ms vs dense "
            f"{row['dense_build_s'] * 1e3:.1f} ms [{method}] (x{row['sparse_over_dense']:.3f})"
        )
        if graphs:  # the same builds as CUDA graphs: their own work, launches out of the way
            try:
                row.update(captured_builds(r, cfg, u, repeats))
                say(f"batch {b}: {describe_captured_builds(row)}")
            except Exception as e:  # reported; the run goes on
                row["captured_error"] = f"{type(e).__name__}: {e}"[:500]
                say(f"batch {b}: the tree builds as CUDA graphs failed, {row['captured_error']}")
    # the naive verifier, at one batch size, on one tree
    r = _Runner(vocab, naive_batch, device)
    u = r.uniforms(cfg, seed=99)
    r.model.context = r.context.clone()
    tree = build_tree(r.model.draft_logits, cfg, r.T, u)
    logits = r.model.target_logits(tree)
    assert isinstance(logits, torch.Tensor)  # the table model is not lazy here
    t_fast, t_naive = [], []
    meter = Meter(f"verify at batch {naive_batch}: batched and naive loop", 2 + 2 * repeats, progress, unit="runs")
    verify(tree, logits, r.T, cfg, u), verify_naive(tree, logits, r.T, cfg, u)  # warm-up (workspace, caches)
    meter.advance(2)
    fast_res = verify(tree, logits, r.T, cfg, u)
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        fast_res = verify(tree, logits, r.T, cfg, u)
        _sync(device)
        t_fast.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        verify_naive(tree, logits, r.T, cfg, u)
        _sync(device)
        t_naive.append(time.perf_counter() - t0)
        meter.advance(2)
    meter.close()
    # equality is checked in float64 (float32 CDFs over 128k tokens round differently
    # when the two verifiers normalize at different steps)
    r64 = _Runner(vocab, min(8, naive_batch), device, dtype=torch.float64)
    u64 = r64.uniforms(cfg, seed=98)
    tree64 = build_tree(r64.model.draft_logits, cfg, r64.T, u64)
    logits64 = r64.model.target_logits(tree64)
    assert isinstance(logits64, torch.Tensor)
    same = bool(
        torch.equal(
            verify(tree64, logits64, r64.T, cfg, u64).tokens.cpu(),
            verify_naive(tree64, logits64, r64.T, cfg, u64).tokens.cpu(),
        )
    )
    del logits64
    verify_row: dict[str, Any] = {
        "batch": naive_batch,
        "fast_s": statistics.median(t_fast),
        "naive_s": statistics.median(t_naive),
        "outputs_equal_float64": same,
        "mean_output_length": float(fast_res.lengths.float().mean()),
    }
    verify_row["fast_over_naive_verify"] = verify_row["naive_s"] / verify_row["fast_s"]
    out["verify"] = verify_row
    say(
        f"verify at batch {naive_batch}: batched {verify_row['fast_s'] * 1e3:.1f} ms, naive "
        f"{verify_row['naive_s'] * 1e3:.1f} ms (x{verify_row['fast_over_naive_verify']:.1f}), "
        f"outputs equal: {same}"
    )
    if graphs:  # the batched verifier as a CUDA graph against the same naive loop
        try:
            verify_row.update(captured_verify(tree, logits, r.T, cfg, u, fast_res, repeats))
            fast_captured = verify_row["fast_captured_s"]
            ok = fast_captured > 0 and verify_row["captured_outputs_equal"]  # a wrong verifier gets no ratio
            verify_row["fast_over_naive_verify_captured"] = verify_row["naive_s"] / fast_captured if ok else None
            say(
                f"verify at batch {naive_batch} as a CUDA graph: {fast_captured * 1e3:.2f} ms "
                f"(naive loop over it x{verify_row['fast_over_naive_verify_captured'] or 0:.1f}), "
                f"outputs equal to the default walk: {verify_row['captured_outputs_equal']}"
            )
        except Exception as e:  # reported; the run goes on
            verify_row["captured_error"] = f"{type(e).__name__}: {e}"[:500]
            say(f"verify at batch {naive_batch} as a CUDA graph failed, {verify_row['captured_error']}")
    rows = list(by_batch.values())
    out["rheo_over_topk"] = max(x["rheo_over_topk"] for x in rows)
    out["sparse_over_dense"] = max(x["sparse_over_dense"] for x in rows)
    out["fast_over_naive_verify"] = verify_row["fast_over_naive_verify"]
    out["launches_compiled_over_before"] = ops["compiled_over_before"]
    if graphs:  # None where not measured (and then a capture finding says why)
        measured = [x["sparse_over_dense_captured"] for x in rows if x.get("sparse_over_dense_captured") is not None]
        out["sparse_over_dense_captured"] = max(measured) if len(measured) == len(rows) else None
        out["fast_over_naive_verify_captured"] = verify_row.get("fast_over_naive_verify_captured")
    if captured:  # the cycle without the host in the loop, by batch (ms, forwards subtracted)
        out.update(captured_figures(captured))
    out["capture_findings"] = findings(out)
    out.update(summary(judge(out, device, TARGETS)))  # targets, meets_targets: for this device
    return out
