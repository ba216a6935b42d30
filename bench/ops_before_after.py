"""Ops and kernel launches per cycle of the fastpath at another commit and now, side by side
in one run (issue 37's "before" figures; `rheo bench fastpath` prints them as recorded). Now
is counted twice: the default eager cycle, and the whole cycle compiled
(`CycleGraph(mode="compile")`, about a minute per policy to compile on a 2-core CPU).

    python bench/ops_before_after.py            # before = 54c57f7, the code before issue 37
    python bench/ops_before_after.py --rev HEAD~3 --json

The other commit's `fastpath/`, `reference/` and `src/` are exported with `git archive` into a
temporary folder and counted in a subprocess that imports them in place of the installed
package; the counters (`rheo.bench.ops`, loaded from this checkout by file) and the cycle (the
bench's `HashTableModel`, V = 128256, `PAPER_TREE`, batch 1, T = 1, one torch thread, one
warm-up cycle) are the same for both: ATen ops with the model forwards excluded, kernel
launches with them included. Needs git and this repository's history.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEFORE = "54c57f7"  # main before issue 37's fastpath changes

# run in a subprocess: sys.argv = [-, tree root, path of this checkout's ops.py]
COUNT = r"""
import importlib.util, json, sys
root, ops_file = sys.argv[1], sys.argv[2]
sys.path.insert(0, root + "/src")
for name, path in (("rheo.reference", root + "/reference"), ("rheo.fastpath", root + "/fastpath")):
    spec = importlib.util.spec_from_file_location(name, path + "/__init__.py", submodule_search_locations=[path])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
spec = importlib.util.spec_from_file_location("_ops", ops_file)
ops = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ops)
import torch
from rheo.fastpath import PAPER_TREE, Uniforms, build_tree, verify
from rheo.testing import HashTableModel

torch.set_num_threads(1)
out = {"fastpath": sys.modules["rheo.fastpath"].__file__}
assert out["fastpath"].startswith(root), f"rheo.fastpath came from {out['fastpath']}, not {root}"
for name, cfg in (("rheo", PAPER_TREE), ("topk", PAPER_TREE.replace(policy="topk"))):
    model = HashTableModel(128256, 1, seed=0, rows=8, scale=6.0, draft_noise=0.3)
    context = model.context.clone()
    T = torch.ones(1, dtype=torch.float64)
    u = Uniforms.random(1, cfg.K, cfg.B, cfg.depth, torch.Generator().manual_seed(1))
    counter = ops.OpCounter()

    def draft(query):
        with counter.paused():
            return model.draft_logits(query)

    def cycle():
        model.context = context.clone()
        tree = build_tree(draft, cfg, T, u)
        with counter.paused():
            logits = model.target_logits(tree)
        return verify(tree, logits, T, cfg, u)

    with counter.paused():
        cycle()  # warm-up
    with counter:
        result = cycle()
    launches = ops.count_launches(cycle)  # the table model's forwards included (a few gathers each)
    out[name] = {
        "ops": counter.total,
        "kernels": counter.kernels,
        "syncs": counter.syncs,
        "launches_with_forwards": launches["launches"],
        "output": result.tokens[0, : int(result.lengths[0])].tolist(),
    }
    if len(sys.argv) > 3:  # this checkout: the whole cycle compiled (rheo.fastpath.graph), counted the same way
        import torch._inductor.config as inductor_config
        from rheo.fastpath.graph import CycleGraph

        model.context = context.clone()
        graph = CycleGraph(model.draft_logits, model.target_logits, cfg, T, u, mode="compile")
        # its kernels shown to the profiler, compiled afresh (not from a cache compiled without that)
        inductor_config.cpp.enable_kernel_profile, inductor_config.fx_graph_cache = True, False
        graph(T, u)
        tree, compiled = graph(T, u)
        seen = ops.count_launches(lambda: graph(T, u))
        assert seen["fused"], "the profiler saw no inductor kernel: the count would be too low"
        out[name]["compiled_launches_with_forwards"] = seen["launches"]
        out[name]["compiled_output"] = compiled.tokens[0, : int(compiled.lengths[0])].tolist()
print(json.dumps(out))
"""


def count(root: Path, compiled: bool = False) -> dict:
    extra = ["compile"] if compiled else []
    proc = subprocess.run(
        [sys.executable, "-c", COUNT, str(root), str(ROOT / "src/rheo/bench/ops.py"), *extra],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"counting the fastpath at {root} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", default=BEFORE, help=f"the commit to compare with (default {BEFORE})")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.rev, "fastpath", "reference", "src"],
            capture_output=True,
            check=False,
        )
        if archive.returncode != 0:
            raise SystemExit(f"git archive {args.rev} failed: {archive.stderr.decode()[-500:]}")
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        before = count(Path(tmp))
    now = count(ROOT, compiled=True)
    out = {"rev": args.rev, "before": before, "now": now}
    for name in ("rheo", "topk"):
        out[f"{name}_ops_now_over_before"] = now[name]["ops"] / before[name]["ops"]
        out[f"{name}_same_output"] = now[name]["output"] == before[name]["output"] == now[name]["compiled_output"]
        out[f"{name}_compiled_launches_over_before"] = (
            now[name]["compiled_launches_with_forwards"] / before[name]["launches_with_forwards"]
        )
    if args.json:
        print(json.dumps(out))
        return
    print(f"ATen ops per cycle (rheo.bench.ops.OpCounter), batch 1, PAPER_TREE, V = 128256: {args.rev} vs now")
    for name in ("rheo", "topk"):
        b, n = before[name], now[name]
        print(
            f"  {name:<5} ops {b['ops']:>5} -> {n['ops']:>5} (x{n['ops'] / b['ops']:.2f}), kernels "
            f"{b['kernels']:>5} -> {n['kernels']:>5}, host syncs {b['syncs']:>3} -> {n['syncs']:>3}, "
            f"same output: {out[f'{name}_same_output']}"
        )
        print(
            f"        kernel launches (profiler, the table model's forwards included): {b['launches_with_forwards']} "
            f"-> eager {n['launches_with_forwards']}, compiled {n['compiled_launches_with_forwards']} "
            f"(x{out[f'{name}_compiled_launches_over_before']:.3f})"
        )


if __name__ == "__main__":
    main()
