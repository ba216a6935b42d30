"""Independent seeded sampling confirmation for the field adapters (no rheo code involved).

One small case (--case default): V = 3, depth 2 (chains of 2 drafts), T = 1 (T = 0 with --greedy), context-dependent
draft and target laws (below). N cycles of the adapter from its first token; each output is completed
to 3 tokens by sampling the target law (the same completion the gate's output-law check makes), and
the 27 counts are compared with the exact target law of 3 tokens by Pearson's chi-square
(scipy.stats.chi2.sf for p).

--case typical: the same shape with context-free laws, target (0.4, 0.35, 0.25) and draft
(0.1, 0.8, 0.1) everywhere: token 1 lies in flashspec's typical set at typical_p 0.9 (for the lossy
typical-acceptance verifiers, which the default case does not move).

--tree (for `verify` adapters): one expanded root, a RheoSampling pool built here (K = 3, m = 1:
the lead is the draft's most likely token, the sample Y is drawn from the tempered draft law
restricted to the other tokens, the fill is the best-ranked remaining token other than Y), depth 1;
the adapter's verify emits 1 or 2 tokens, completed to 2 and compared with the target's 9 sequences.

    python examples/field/confirm.py field_seqspecdecod:StandardStep [N] [seed] [--greedy] [--case typical]
    python examples/field/confirm.py field_economize:RejectionVerifyTree [N] [seed] --tree
"""

from __future__ import annotations

import importlib
import itertools
import os
import sys
import time

import numpy as np
import torch
from scipy.stats import chi2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

V, DEPTH = 3, 2
# logits depend on the last token of the path (and its length), so deeper positions matter
TARGET = np.log(np.array([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4], [0.2, 0.2, 0.6]]))
DRAFT = np.log(np.array([[0.2, 0.5, 0.3], [0.4, 0.4, 0.2], [0.6, 0.1, 0.3], [0.3, 0.3, 0.4]]))
if "--case" in sys.argv and sys.argv[sys.argv.index("--case") + 1] == "typical":
    TARGET = np.log(np.array([[0.4, 0.35, 0.25]] * 4))
    DRAFT = np.log(np.array([[0.1, 0.8, 0.1]] * 4))


def _row(table, path):
    return table[0] if not path else table[1 + path[-1]]


def target_logits(paths):
    return np.stack([_row(TARGET, p) for p in paths])


def draft_logits(paths):
    assert all(len(p) < DEPTH for p in paths), "draft asked past depth - 1"
    return np.stack([_row(DRAFT, p) for p in paths])


def law(path, temperature):
    logits = _row(TARGET, path)
    if temperature == 0:
        out = np.zeros(V)
        out[int(np.argmax(logits))] = 1.0
        return out
    e = np.exp((logits - logits.max()) / temperature)
    return e / e.sum()


def tree_cycle(adapter, config, temperature, rng):
    """A depth-1 RheoSampling pool (K = 3, m = 1) over V = 3, built here, verified by the adapter."""
    q = np.exp(_row(DRAFT, ()))
    q = q / q.sum()
    ranked = sorted(range(V), key=lambda t: (-q[t], t))
    lead, rest = ranked[0], ranked[1:]
    if temperature == 0:
        r = np.zeros(V)
        r[rest[0]] = 1.0
    else:
        r = np.zeros(V)
        r[rest] = q[rest] ** (1 / temperature)
        r = r / r.sum()
    sample = int(rng.choice(V, p=r))
    fill = [t for t in rest if t != sample][0]
    sample_probs = np.zeros((3, V))
    sample_probs[1] = r
    tree = {
        "tokens": np.array([lead, sample, fill]),
        "parents": np.array([-1, -1, -1]),
        "kinds": np.array([0, 1, 2]),
        "slots": np.array([0, 1, 2]),
        "sample_probs": sample_probs,
    }
    rows = target_logits([(), (lead,), (sample,), (fill,)])
    out = adapter.verify(tree, rows, config, temperature, None)
    return out["tokens"]


def main() -> None:
    args = [a for i, a in enumerate(sys.argv) if not a.startswith("--") and sys.argv[i - 1] != "--case"]
    spec = args[1]
    n = int(args[2]) if len(args) > 2 else 100_000
    seed = int(args[3]) if len(args) > 3 else 0
    case = sys.argv[sys.argv.index("--case") + 1] if "--case" in sys.argv else "default"
    temperature = 0.0 if "--greedy" in sys.argv else 1.0
    module, name = spec.split(":")
    adapter = getattr(importlib.import_module(module), name)()
    config = dict(
        vocab_size=V,
        policy="rheo",
        K=1,
        m=0,
        depth=DEPTH,
        budget=DEPTH,
        beam=1,
        draft_top_k=None,
        epsilon=0,
        target_top_k=None,
        target_top_p=None,
        target_min_p=None,
        temperature=temperature,
    )
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    torch.set_num_threads(1)
    tree = "--tree" in sys.argv
    depth = 1 if tree else DEPTH
    if tree:
        config.update(K=3, m=1, depth=1, budget=3, beam=3)
    counts = dict.fromkeys(itertools.product(range(V), repeat=depth + 1), 0)
    started = time.perf_counter()
    done, batch = 0, 1000
    while done < n:
        rows = min(batch, n - done)
        if tree:
            outs = [tree_cycle(adapter, config, temperature, rng) for _ in range(rows)]
        elif hasattr(adapter, "cycle_batch"):
            outs = adapter.cycle_batch(draft_logits, target_logits, config, temperature, rows)
        else:
            outs = [adapter.cycle(draft_logits, target_logits, config, temperature) for _ in range(rows)]
        for out in outs:
            seq = tuple(int(t) for t in (out["tokens"] if isinstance(out, dict) else out))
            assert 1 <= len(seq) <= depth + 1, seq
            while len(seq) < depth + 1:
                seq += (int(rng.choice(V, p=law(seq, temperature))),)
            counts[seq] += 1
        done += rows
    exact = {s: float(np.prod([law(s[:i], temperature)[s[i]] for i in range(depth + 1)])) for s in counts}
    cells = [s for s in counts if exact[s] > 0]
    stat = sum((counts[s] - n * exact[s]) ** 2 / (n * exact[s]) for s in cells)
    stray = sum(counts[s] for s in counts if exact[s] == 0)
    df = len(cells) - 1
    if stray:
        p = 0.0
    elif df == 0:  # T = 0: one possible sequence; every output on it
        p = 1.0
    else:
        p = float(chi2.sf(stat, df))
    tv = 0.5 * sum(abs(counts[s] / n - exact[s]) for s in counts)
    print(
        f"{spec}: case={case}{' tree' if tree else ''} N={n} seed={seed} T={temperature:g} "
        f"chi2={stat:.1f} df={df} p={p:.3g} "
        f"TV={tv:.4f} off-support={stray} ({time.perf_counter() - started:.0f} s)"
    )


if __name__ == "__main__":
    main()
