"""``rheo bench exact``, ``rheo bench fastpath`` and ``rheo bench gate``: each benchmark returns a dict
(``rheo.bench``) that this module prints as a table or as JSON. ``rheo bench tau`` is in
``rheo.cli.model``.

Specification: docs/spec.md §5 (bench exact), §1-§4 (bench fastpath).
"""

from __future__ import annotations

import argparse
import json

from rheo.bench.exact import run_bench_exact
from rheo.bench.gate import exact_only, run_bench_gate
from rheo.checks.gate.run import INSTALL_TORCH
from rheo.cli import model
from rheo.cli.common import FORMATTER, Parser, add_json_flag, emit, fail, progress


def add_parser(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """The ``bench`` command and its exact/fastpath subcommands; returns the subparsers
    (``rheo.cli.model`` adds ``bench tau``)."""
    fmt = FORMATTER
    bench = sub.add_parser(
        "bench",
        formatter_class=fmt,
        help="benchmarks (ratios measured side by side in one run)",
        description="Benchmarks. Speed targets live here, never in timed tests. Each target names the\n"
        "devices it holds on (cpu, cuda); a benchmark is judged on the device it ran on: a target\n"
        'for another device shows as "n/a on cpu" (or "n/a on cuda") and never sets the exit\n'
        "status. Every phase longer than about 5 s reports progress on stderr.\n"
        "exit status: 0 every target for this device met, 1 one missed (or a check failed)",
    )
    add_json_flag(bench, "json_bench")
    bsub = bench.add_subparsers(dest="bench_command", parser_class=Parser)
    be = bsub.add_parser(
        "exact",
        formatter_class=fmt,
        help="class enumerator vs naive enumerator; largest vocabulary and depth certified in the limit",
        description="1. n=6, K=3, m=1, depth=3, budget=6, beam=3 (generated tables, seed 0): both\n"
        "   enumerators, same exact answer required, speed ratio (target >= 20x, cpu and cuda).\n"
        "2. the largest vocabulary (K=3, m=1, depth=3, budget=6) and the largest depth\n"
        "   (n=4, K=3, m=1, budget=2*depth) the class enumerator certifies (cycle law +\n"
        "   deviation over V^(D+1)) within --limit seconds.\n"
        "Progress goes to stderr; takes a few minutes at the default limit.\n"
        "exit status: 0 target met and the same answer, 1 otherwise",
    )
    be.add_argument(
        "--limit", type=float, default=60.0, metavar="SECONDS", help="time limit per certification (default 60)"
    )
    be.add_argument("--skip-search", action="store_true", help="only the side-by-side comparison")
    add_json_flag(be)
    bf = bsub.add_parser(
        "fastpath",
        formatter_class=fmt,
        help="the torch fastpath: Rheo/Top-K cycle, sparse/dense draft law, batched/naive verifier",
        description="Times the fastpath with model forwards excluded (logits come from a table model;\n"
        "the time spent answering forwards is subtracted). Default shape: V=128256, K=10,\n"
        "depth=8, budget=60, m=1, draft_top_k=128, batch sizes 1, 16 and 64. Ratios:\n"
        "  rheo_over_topk          Rheo cycle / Top-K cycle   (target <= 1.25, cpu and cuda)\n"
        "  sparse_over_dense       tree with top-128 / tree drawing Y from all V\n"
        "                          (Gumbel-max or multinomial, the faster)\n"
        "                                                     (target <= 0.25, cpu)\n"
        "  fast_over_naive_verify  naive loop verifier / batched verifier at batch 64\n"
        "                          (target >= 0.8 on cpu, where both are bound by the same\n"
        "                          128k-wide softmax)\n"
        "On cuda the eager builds and verifier are bound by kernel launches, so these two\n"
        "are judged on the same work captured as CUDA graphs (skipped with --no-compile):\n"
        "  sparse_over_dense_captured       the two builds (Gumbel), replayed  (<= 0.25)\n"
        "  fast_over_naive_verify_captured  naive loop / batched verifier replayed (>= 10)\n"
        "The cycle without the host in the loop (rheo.fastpath.graph.CycleGraph; skip it\n"
        "with --no-compile): on cuda captured as a CUDA graph at every batch size and, at\n"
        "the first and last, also compiled whole by torch.compile in CUDA graphs (the\n"
        "faster mode whose outputs equal the eager cycle's gives the figures; both shown);\n"
        "on cpu compiled whole at batch 1 (about a minute per policy):\n"
        "  rheo_captured_cycle_ms_b1, _b64   (targets <= 1 ms and <= 3 ms, cuda)\n"
        "  rheo_over_topk_captured           (target <= 1.05, cuda)\n"
        "  launches_compiled_over_before     kernel launches of the compiled cycle / those\n"
        "                          of the fastpath before issue 37 (commit 54c57f7, recorded\n"
        "                          by bench/ops_before_after.py)   (target <= 0.1, cpu)\n"
        "Ops per cycle at batch 1 (ATen ops, kernels, host syncs; kernel launches) are\n"
        "printed for the code before, now, and the static cycle (docs/fastpath.md).\n"
        "Each ratio is measured side by side in one run (A B A B ..., medians). The\n"
        "worst batch size is reported at the top level. Targets are judged for the device\n"
        'of the run (--device); one for another device shows as "n/a on cpu" (or\n'
        '"n/a on cuda"). --json: targets and meets_targets hold the targets for this\n'
        "device, target_verdicts every target with its devices and verdict. Progress\n"
        "goes to stderr.\n"
        "exit status: 0 every target for this device met, 1 one missed, the verifiers\n"
        "disagree, or a capture finding (a capture or compilation that failed, a replay\n"
        "that differs from eager: capture_findings in the JSON)",
        epilog="examples:\n  rheo bench fastpath --json\n  rheo bench fastpath --quick\n"
        "  rheo bench fastpath --device cuda --json",
    )
    bf.add_argument("--quick", action="store_true", help="batch sizes 1 and 16, naive verifier at 16, fewer repeats")
    bf.add_argument("--device", default="cpu", help="torch device (default cpu)")
    bf.add_argument("--vocab", type=int, default=128256, metavar="V", help="vocabulary size (default 128256)")
    bf.add_argument(
        "--repeats", type=int, default=None, metavar="N", help="timed runs per variant (default 5, quick 2)"
    )
    bf.add_argument(
        "--no-compile",
        action="store_true",
        help="skip the cycle without the host in the loop (CPU: torch.compile of the whole cycle, about "
        "a minute per policy to compile, and its launch count; CUDA: the cycle, the tree builds and the "
        "verifier as CUDA graphs, so the CUDA targets on them are not measured)",
    )
    add_json_flag(bf)
    bg = bsub.add_parser(
        "gate",
        formatter_class=fmt,
        help="what the gate's supervised worker costs, per call and per run",
        description="1. per call: a call into the implementation watched by the worker's hook (the call\n"
        "   in flight written to shared memory) against an unwatched call, alternating rounds,\n"
        "   medians (target: under 1 ms; --json key worker_overhead_per_call_us).\n"
        "2. per run: one decision-equality check on examples.loop_impl run in the gate's process\n"
        "   and in a supervised worker (the worker's start plus every call), with the same verdict.\n"
        "3. protocols (needs torch): the output-law check's cycles per second for the fastpath\n"
        "   through the per-request protocol and through the batched torch protocol, side by side,\n"
        "   and the detectable TV per case of a 60-second run of each (targets: >= 1,000,000\n"
        "   batched cycles in 60 s, detectable TV <= 0.006; --json keys per_request_cycles_per_second,\n"
        "   batched_cycles_per_second, batched_detectable_tv_60s).\n"
        "4. adapter speed (needs torch): examples.without_replacement:GumbelChain's cycle in a plain\n"
        "   loop over one case's tables against the gate's output law on the same case (supervised\n"
        "   worker, its own cycles per second), with torch on one thread (--threads 1, the gate's\n"
        "   default) and on its own count (--threads 0) (target: plain / gate <= 2 at one thread;\n"
        "   --json key plain_over_gate).\n"
        "5. exact certification (--exact or --exact-only; several minutes, most of them the replay\n"
        "   path): examples.eagle_style:EagleVerifier (its own draws) on Rheo trees, depth 3, m=1,\n"
        "   beam 1, seed 0 (V=5 K=3 R=6, V=6 K=3 R=8, V=8 K=4 R=10), certified by the replay path\n"
        "   and by the one-pass path, side by side (runs, seconds, ratio; target >= 10x on\n"
        "   V=8 K=4 R=10; --json key exact_fast_over_replay), examples.loop_impl (handed uniforms)\n"
        "   the same two ways, and the largest case of a growing ladder the one-pass path certifies\n"
        "   within --exact-limit seconds. Both paths must find the same law.\n"
        "Every target holds on cpu and cuda (device: where the protocols ran; --json keys\n"
        "device, targets, meets_targets, target_verdicts). Progress goes to stderr.\n"
        "exit status: 0 targets met, 1 one missed",
        epilog="examples:\n  rheo bench gate --json\n  rheo bench gate --quick\n  rheo bench gate --exact-only",
    )
    bg.add_argument("--quick", action="store_true", help="fewer calls and rounds, the smoke profile for the run")
    bg.add_argument("--exact", action="store_true", help="add the exact-certification rows (several minutes)")
    bg.add_argument("--exact-only", action="store_true", help="only the exact-certification rows")
    bg.add_argument(
        "--exact-limit",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="the limit for the largest case certified (default 60)",
    )
    add_json_flag(bg)
    return bsub


def cmd_bench(args: argparse.Namespace) -> int:
    if args.bench_command == "exact":
        return cmd_bench_exact(args)
    if args.bench_command == "fastpath":
        return cmd_bench_fastpath(args)
    if args.bench_command == "gate":
        return cmd_bench_gate(args)
    if args.bench_command == "tau":
        return model.cmd_bench_tau(args, emit)
    return fail(
        "bench: choose a benchmark: `rheo bench exact`, `rheo bench fastpath`, `rheo bench gate` or `rheo bench tau` "
        "(see rheo bench --help)"
    )


def cmd_bench_exact(args: argparse.Namespace) -> int:
    if not args.limit > 0 or args.limit == float("inf"):
        return fail(f"--limit: must be a positive number of seconds, got {args.limit}")
    out = run_bench_exact(limit=args.limit, skip_search=args.skip_search, progress=progress)
    emit(json.dumps(out) if args.json else render_exact(out))
    return 0 if out["pass"] else 1


def cmd_bench_gate(args: argparse.Namespace) -> int:
    if not args.exact_limit > 0 or args.exact_limit == float("inf"):
        return fail(f"--exact-limit: must be a positive number of seconds, got {args.exact_limit}")
    if args.exact_only:
        out = exact_only(progress=progress, limit=args.exact_limit)
        emit(json.dumps(out) if args.json else "\n".join(_render_exact(out)))
        return 0 if out["pass"] else 1
    out = run_bench_gate(quick=args.quick, progress=progress, exact=args.exact, exact_limit=args.exact_limit)
    emit(json.dumps(out) if args.json else render_gate(out))
    return 0 if out["pass"] else 1


def _marks(out: dict) -> dict[str, str]:
    """Each result key's verdict on the run's device ("met", "MISSED", "n/a on cpu", ...)."""
    return {v["key"]: v["verdict"] for v in out.get("target_verdicts", []) if v["applies"]}


def render_gate(out: dict) -> str:
    """``rheo bench gate`` as a table."""
    c, r = out["per_call"], out["per_run"]
    mark = _marks(out).get("worker_overhead_per_call_us", "not judged")
    return "\n".join(
        [
            f"rheo bench gate  ({out['machine']['cpus']} cpus, Python {out['machine']['python']}; medians of "
            f"alternating rounds; targets judged on {out.get('device_kind', 'cpu')}, each holds on cpu and cuda)",
            f"  per call ({c['rounds']} rounds of {c['calls_per_round']} calls)",
            f"    unwatched                         {c['bare_us']:>10.3f} us",
            f"    watched by the worker's hook      {c['with_hook_us']:>10.3f} us",
            f"    overhead per call                 {c['overhead_us']:>10.3f} us   target < "
            f"{out['worker_overhead_per_call_target_us']:g} us: {mark}",
            f"  per run ({r['check']}, profile {r['profile']}, verdict {r['verdict']})",
            f"    in the gate's process             {r['in_process_seconds']:>10.2f} s",
            f"    in a supervised worker            {r['in_worker_seconds']:>10.2f} s",
            f"    overhead (start + calls)          {r['worker_overhead_seconds']:>10.2f} s",
            *_render_protocols(out.get("protocols"), _marks(out)),
            *_render_adapter_speed(out.get("adapter_speed"), _marks(out)),
            *(_render_exact(out) if "exact_certification" in out else []),
        ]
    )


def _render_exact(out: dict) -> list[str]:
    """The exact-certification rows of ``rheo bench gate --exact``."""
    e, mark = out["exact_certification"], _marks(out).get("exact_fast_over_replay", "not judged")
    lines = [
        "  exact certification (replay path vs one-pass path, side by side; depth-3 Rheo trees, m=1, beam 1, seed 0)",
        f"    {'implementation, case':<50} {'replay runs':>11} {'s':>8} {'fast runs':>10} {'s':>8} {'ratio':>7} "
        f"{'cpu ratio':>9}  law",
    ]
    for r in e["own_draws"] + e["handed"]:
        ratio = f"{r['ratio']:.1f}x" if r["ratio"] is not None else "-"
        cpu = f"{r['cpu_ratio']:.1f}x" if r["cpu_ratio"] is not None else "-"
        name = f"{r['implementation'].split(':')[-1]}, {r['case']}"
        lines.append(
            f"    {name:<50} {r['replay_runs']:>11,} {r['replay_seconds']:>8.2f} {r['fast_runs']:>10,} "
            f"{r['fast_seconds']:>8.2f} {ratio:>7} {cpu:>9}  {'same' if r['same_law'] else 'DIFFERENT'}"
        )
    if e["exact_fast_over_replay"] is not None:
        ratio = f"{e['exact_fast_over_replay']:.1f}x"
        lines.append(f"    {'ratio on the largest case':<50} {ratio:>48}  target >= 10x: {mark}")
    big = e["largest_within_limit"]
    best = big["largest"]
    found = "none" if best is None else f"{best['case']} ({best['runs']:,} runs, {best['seconds']:.1f} s)"
    lines.append(f"    {'largest case certified in ' + format(big['limit_seconds'], 'g') + ' s':<50} {found}")
    return lines


def _render_protocols(p: dict | None, marks: dict[str, str]) -> list[str]:
    if p is None:
        return ["  protocols: skipped (torch is not installed)"]
    return [
        f"  protocols (the fastpath through each, case {p['case']}, {p['device']})",
        f"    per request                       {p['per_request_cycles_per_second']:>10,.0f} cycles/s   "
        f"detectable TV in 60 s {p['per_request_detectable_tv_60s']:.4f}",
        f"    batched                           {p['batched_cycles_per_second']:>10,.0f} cycles/s   "
        f"detectable TV in 60 s {p['batched_detectable_tv_60s']:.4f}",
        f"    batched / per request             {p['batched_over_per_request']:>10.0f}x",
        f"    batched cycles in 60 s            {p['batched_cycles_in_60s']:>10,}   target >= 1,000,000: "
        f"{marks.get('batched_cycles_in_60s', 'not judged')}",
        f"    batched detectable TV in 60 s     {p['batched_detectable_tv_60s']:>10.4f}   target <= 0.006: "
        f"{marks.get('batched_detectable_tv_60s', 'not judged')}",
    ]


def _render_adapter_speed(a: dict | None, marks: dict[str, str]) -> list[str]:
    if a is None:
        return []
    return [
        f"  adapter speed ({a['adapter']}, case {a['case']}, {a['cycles']:,} cycles each)",
        f"    {'':<34} {'plain loop':>12} {'gate':>12}",
        f"    {'torch on 1 thread (--threads 1)':<34} {a['plain_cycles_per_second_one_thread']:>12,.0f} "
        f"{a['gate_cycles_per_second_one_thread']:>12,.0f}   cycles/s",
        f"    {'torch on its own (--threads 0)':<34} {a['plain_cycles_per_second_torch_default_threads']:>12,.0f} "
        f"{a['gate_cycles_per_second_torch_default_threads']:>12,.0f}   cycles/s",
        f"    plain / gate at 1 thread          {a['plain_over_gate']:>10.2f}x   target <= 2x: "
        f"{marks.get('plain_over_gate', 'not judged')}",
    ]


def render_exact(out: dict) -> str:
    """``rheo bench exact`` as a table."""
    c = out["comparison"]
    lines = [
        f"rheo bench exact  (limit {out['limit_seconds']:g} s per certification, {out['machine']['cpus']} cpus)",
        f"  {'check':<44} {'result':>30}",
    ]
    label = "naive enumerator, n={n} K={K} m={m} D={depth} R={budget} B={beam}".format(**c["case"])
    lines.append(f"  {label:<44} {c['naive_seconds']:>28.2f} s")
    lines.append(f"  {'class enumerator, same case':<44} {c['classes_seconds']:>28.2f} s")
    mark = _marks(out).get("speedup", "not judged")
    lines.append(f"  {'speedup (target >= 20x, cpu and cuda)':<44} {c['speedup']:>29.1f}x  {mark}")
    lines.append(f"  {'same exact answer':<44} {str(c['same_answer']):>30}")
    lines.append(f"  {'joint draws / classes':<44} {str(c['joint_draws']) + ' / ' + str(c['classes']):>30}")
    if "largest_vocab" in out:
        v, d = out["largest_vocab"], out["largest_depth"]
        vocab = f"n = {v['largest_n']} in {v['seconds']:.1f} s"
        depth = f"D = {d['largest_depth']} in {d['seconds']:.1f} s"
        lines.append(f"  {'largest vocab certified (K=3 m=1 D=3 R=6)':<44} {vocab:>30}")
        lines.append(f"  {'largest depth certified (n=4 K=3 m=1 R=2D)':<44} {depth:>30}")
    lines.append(f"  {'verdict':<44} {'PASS' if out['pass'] else 'FAIL':>30}")
    return "\n".join(lines)


def cmd_bench_fastpath(args: argparse.Namespace) -> int:
    try:
        import torch
    except ImportError:
        return fail(f"bench fastpath needs torch: {INSTALL_TORCH}")
    from rheo.bench.fastpath import bench_fastpath  # needs torch

    if args.vocab < 2:
        return fail(f"--vocab: must be an integer >= 2, got {args.vocab}")
    if args.repeats is not None and args.repeats < 1:
        return fail(f"--repeats: must be an integer >= 1, got {args.repeats}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        return fail(f"--device: {args.device} asked for, but torch sees no CUDA device; use --device cpu")
    try:
        torch.empty(0, device=args.device)
    except (RuntimeError, ValueError) as e:
        return fail(f"--device: {args.device!r} is not a usable torch device ({e})")
    repeats = args.repeats or (2 if args.quick else 5)
    batches, naive = ((1, 16), 16) if args.quick else ((1, 16, 64), 64)
    out = bench_fastpath(
        batches=batches,
        vocab=args.vocab,
        repeats=repeats,
        naive_batch=naive,
        device=args.device,
        progress=progress,
        compiled=not args.no_compile,
    )
    emit(json.dumps(out) if args.json else render_fastpath(out))
    return fastpath_status(out)


def fastpath_status(out: dict) -> int:
    """The exit status of ``rheo bench fastpath``: 1 when a target for the device it ran on
    is missed (``meets_targets`` holds only those), the verifiers disagree or a capture
    finding is reported (``capture_findings``), else 0."""
    ok = all(out["meets_targets"].values()) and out["verify"]["outputs_equal_float64"]
    return 0 if ok and not out.get("capture_findings") else 1


def render_fastpath(out: dict) -> str:
    """The benchmark as a table."""
    lines = [
        f"rheo bench fastpath on {out['device']} ({out['torch_threads']} torch threads; targets judged on "
        f"{out['device_kind']}): V={out['vocab']}, "
        f"K={out['K']}, depth={out['depth']}, budget={out['budget']}, m={out['m']}, "
        f"draft_top_k={out['draft_top_k']}; forwards excluded; medians of alternating runs",
        f"{'batch':>6} {'rheo ms':>9} {'topk ms':>9} {'rheo/topk':>10} {'sparse ms':>10} {'dense ms':>10} "
        f"{'sparse/dense':>13}",
    ]
    for b, r in out["batches"].items():
        lines.append(
            f"{b:>6} {r['rheo_cycle_s'] * 1e3:>9.1f} {r['topk_cycle_s'] * 1e3:>9.1f} "
            f"{r['rheo_over_topk']:>10.3f} {r['sparse_build_s'] * 1e3:>10.1f} {r['dense_build_s'] * 1e3:>10.1f} "
            f"{r['sparse_over_dense']:>13.3f}"
        )
    v = out["verify"]
    lines.append(
        f"verify at batch {v['batch']}: batched {v['fast_s'] * 1e3:.1f} ms, naive loop {v['naive_s'] * 1e3:.1f} ms "
        f"-> x{v['fast_over_naive_verify']:.2f} (mean |O| {v['mean_output_length']:.2f}; outputs equal "
        f"in float64: {v['outputs_equal_float64']})"
    )
    from rheo.bench.captured import describe_captured, describe_captured_builds

    for b, r in out["batches"].items():  # CUDA: the builds and the verifier as CUDA graphs
        if "captured_error" in r:
            lines.append(f"batch {b}, tree builds as CUDA graphs: failed, {r['captured_error']}")
        elif "sparse_build_captured_s" in r:
            lines.append(f"batch {b}, {describe_captured_builds(r)}")
    if "captured_error" in v:
        lines.append(f"verify at batch {v['batch']} as a CUDA graph: failed, {v['captured_error']}")
    elif "fast_captured_s" in v:
        ratio = v["fast_over_naive_verify_captured"]
        lines.append(
            f"verify at batch {v['batch']} as a CUDA graph: {v['fast_captured_s'] * 1e3:.2f} ms -> naive loop "
            f"over it x{'-' if ratio is None else f'{ratio:.1f}'} (outputs equal to the default walk: "
            f"{v['captured_outputs_equal']})"
        )
    for b, row in (out.get("captured") or {}).items():  # the row that sets the figures, then the others
        lines.append(f"batch {b}, {describe_captured(row)}")
        lines.extend(f"  also: {describe_captured(alt)}" for alt in row.get("alternatives", []))
    ops = out.get("ops_per_cycle")
    if ops:
        from rheo.bench.fastpath import render_op_counts

        lines.extend(render_op_counts(ops))
    lines.extend(f"  FINDING: {f}" for f in out.get("capture_findings", []))
    for v in out["target_verdicts"]:  # every target, those for another device as "n/a on ..."
        target = f"{v['target']} ({', '.join(v['devices'])})"
        value = "-" if out.get(v["key"]) is None else f"{out[v['key']]:.3f}"
        lines.append(f"  {v['key']:<30} {value:>8}   target {target:<20} {v['verdict']}")
    return "\n".join(lines)
