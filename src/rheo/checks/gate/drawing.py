"""The parts the gate's pictures are drawn from (``rheo.checks.gate.pictures``): rows of
sequences against p_T (exact, or observed with a 99% Wilson interval), the words on a
picture, bar panels on a matplotlib ``Figure`` (the Agg canvas, never pyplot), and a draft
tree laid out by depth with its accepted path marked. matplotlib is imported only when a
picture is drawn; it is optional.
"""

from __future__ import annotations

import heapq
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from rheo.reference import Instance

MATPLOTLIB_MISSING = 'needs matplotlib; pip install "rheosampling[notebooks]"'


# colours: the Okabe-Ito palette (readable with every common colour-vision deficiency)
OBSERVED = "#E69F00"  # what the implementation (or the cycle, continued) does
TARGET = "#0072B2"  # p_T, what it must do
ACCEPTED = "#009E73"  # the accepted path in a draft tree
CORRECTION = "#D55E00"
KIND_NAMES = {0: "lead", 1: "sample", 2: "fill"}
KIND_COLOURS = {0: "#CFE3F3", 1: "#FBE3B5", 2: "#E4E4E4"}
DPI = 110
ROWS = 8  # worst sequences drawn for a counterexample
LAW_ROWS = 12  # sequences (and outputs) drawn for ``rheo exact``
Z99 = 2.5758293035489  # two-sided 99% normal quantile
FULL_SEARCH = 20_000  # V^(D+1) up to this: every sequence is looked at; above, a best-first search
SEARCH_PUSHES = 200_000  # the best-first search's work cap (prefixes pushed)


def have_matplotlib() -> bool:
    """Whether matplotlib can be imported (the pictures need it)."""
    return _canvas() is not None


@dataclass
class Row:
    """One sequence of a picture: ``value`` (observed, or continued) against ``target``
    (p_T, or the reference's exact law), with an optional interval around ``value``."""

    sequence: tuple[int, ...]
    value: Any  # a Fraction (exact) or a float
    target: Any
    low: float | None = None
    high: float | None = None
    z: float | None = None  # (observed - target) / binomial standard error under the target

    @property
    def deviation(self) -> Any:
        return self.value - self.target


def sequence_values(inst: Instance, law: Mapping[tuple[int, ...], Any], seq: tuple[int, ...]) -> tuple[Any, Any]:
    """(continued, p_T) of one sequence of length D+1: Pr(O continued by exact target
    sampling = seq) and p_T(seq) (docs/spec.md §5)."""
    pt: Any = inst.one
    for i, x in enumerate(seq):
        pt = pt * inst.target_law(seq[:i])[x]
    cont: Any = inst.zero
    for k in range(1, len(seq) + 1):
        pr = law.get(seq[:k])
        if pr:  # the output seq_<=k, then p_T(seq_k+1.. | seq_<=k)
            rest: Any = inst.one
            for i in range(k, len(seq)):
                rest = rest * inst.target_law(seq[:i])[seq[i]]
            cont = cont + pr * rest
    return cont, pt


def continued_rows(
    inst: Instance,
    law: Mapping[tuple[int, ...], Any],
    limit: int,
    include: Iterable[tuple[int, ...]] = (),
    tolerance: float = 0.0,
) -> list[Row]:
    """The ``limit`` sequences of length D+1 to draw for a cycle law ``law`` (output ->
    Pr(O = o)): largest |continued - p_T| first (deviations within ``tolerance`` count as
    0), then largest probability. Every sequence is looked at when V^(D+1) <= FULL_SEARCH;
    above, the likeliest ones are found best-first (a prefix's probability bounds its
    sequences'), and the sequences in ``include`` (the worst one) are added."""
    L, n = inst.seq_len, inst.n
    below: dict[tuple[int, ...], Any] = {}  # mass of the outputs strictly extending each prefix
    for o, pr in law.items():
        for k in range(len(o)):
            below[o[:k]] = below.get(o[:k], inst.zero) + pr
    found: dict[tuple[int, ...], Row] = {}
    zero = inst.zero
    if n ** min(L, 64) <= FULL_SEARCH:  # (n >= 2 and L > 64 is far above it)
        stack: list[tuple[tuple[int, ...], Any, Any]] = [((), zero, inst.one)]
        while stack:
            s, a, pt = stack.pop()
            if len(s) == L:
                if a or pt:
                    found[s] = Row(s, a, pt)
                continue
            p = inst.target_law(s)
            for x in range(n):
                t = s + (x,)
                ta, tpt = a * p[x] + law.get(t, zero), pt * p[x]
                if ta or tpt or below.get(t):
                    stack.append((t, ta, tpt))
    else:
        # keys: max(Pr(continued starts with s), p_T(s)) >= the same of every sequence below s
        heap: list[tuple[float, tuple[int, ...], Any, Any]] = [(-1.0, (), zero, inst.one)]
        pushes, wanted = 0, 4 * limit
        while heap and len(found) < wanted and pushes < SEARCH_PUSHES:
            _, s, a, pt = heapq.heappop(heap)
            if len(s) == L:
                found[s] = Row(s, a, pt)
                continue
            p = inst.target_law(s)
            for x in range(n):
                t = s + (x,)
                ta, tpt = a * p[x] + law.get(t, zero), pt * p[x]
                bound = max(float(ta + below.get(t, zero)), float(tpt))
                if bound > 0:
                    heapq.heappush(heap, (-bound, t, ta, tpt))
                    pushes += 1
    for seq in include:
        seq = tuple(seq)
        if len(seq) == L and seq not in found:
            found[seq] = Row(seq, *sequence_values(inst, law, seq))

    def order(r: Row) -> tuple[float, float, tuple[int, ...]]:
        dev = abs(float(r.deviation))
        return (-(dev if dev > tolerance else 0.0), -max(float(r.value), float(r.target)), r.sequence)

    return sorted(found.values(), key=order)[:limit]


def _wilson(p: float, n: int, z: float = Z99) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion ``p`` observed in ``n`` trials."""
    if n <= 0:
        return (0.0, 1.0)
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(p * (1 - p) / n + z * z / (4 * n * n), 0.0)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def _statistical_rows(entries: Sequence[Mapping[str, Any]], seq_key: str, ref_key: str, cycles: int) -> list[Row]:
    rows = []
    for e in entries[:ROWS]:
        obs, ref = float(e["observed"]), float(e[ref_key])
        low, high = _wilson(obs, cycles)
        se = math.sqrt(ref * (1 - ref) / cycles) if cycles > 0 else 0.0
        z = (obs - ref) / se if se > 0 else None
        rows.append(Row(tuple(int(t) for t in e[seq_key]), obs, ref, low, high, z))
    return rows


def _num(x: Any, digits: int = 3) -> str:
    """A probability for a label: a short exact fraction (denominator up to 1000) as it is,
    else 3 significant digits."""
    if isinstance(x, Fraction):
        if x.denominator <= 1000 and abs(x.numerator) < 10**6:
            return str(x)
        x = float(x)
    x = float(x)
    if x == 0:
        return "0"
    if abs(x) >= 1e-3:
        return f"{x:.{digits}g}" if abs(x) < 1 else f"{x:.{digits + 1}g}"
    return f"{x:.{digits - 1}e}"


def _signed(x: Any) -> str:
    text = _num(abs(x))
    return ("-" if x < 0 else "+") + text


def _tokens(seq: Sequence[int]) -> str:
    return " ".join(map(str, seq)) if len(seq) <= 12 else f"{' '.join(map(str, seq[:5]))} ... ({len(seq)} tokens)"


def _clip(text: str, limit: int = 160) -> str:
    text = "".join(ch if ch.isprintable() else "?" for ch in str(text))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def case_summary(case: Mapping[str, Any]) -> str:
    """A case's configuration in a few words: "V=3, rheo K=3 m=1, depth 1, budget 2, T=1"
    and the keys that differ from their defaults (docs/spec.md §8)."""
    if not isinstance(case, Mapping):
        return ""
    get = case.get
    words = [f"V={get('vocab_size', '?')}"]
    policy = get("policy", "?")
    words.append(f"{policy} K={get('K', '?')}" + (f" m={get('m', '?')}" if policy == "rheo" else ""))
    words.append(f"depth {get('depth', '?')}, budget {get('budget', '?')}")
    if get("beam") is not None and get("beam") != get("K"):
        words.append(f"beam {get('beam')}")
    words.append(f"T={get('temperature', '1')}")
    for key in ("draft_top_k", "target_top_k", "target_top_p", "target_min_p"):
        if get(key) is not None:
            words.append(f"{key}={get(key)}")
    proxy = get("proxy")
    if proxy not in (None, "rheo"):
        words.append(f"proxy={proxy}")
    for key, default in (("tie_break", "slot"), ("verify", "rheo"), ("draft_law", "sampled")):
        if get(key, default) != default:
            words.append(f"{key}={get(key)}")
    if get("arithmetic", "exact") != "exact":
        words.append(str(get("arithmetic")))
    return _clip(", ".join(map(str, words)), 200)


def _result_words(result: str) -> str:
    """A gate's chi-square line ("REJECT: chi2 = 598.2 on 36 df, p = 4.74e-103 (alpha ...")
    in a few words."""
    m = re.search(r"chi2 = ([\d.]+) on (\d+) df, p = ([\deE.+-]+) \(alpha ([\deE.+-]+)\)", result)
    if m is None:
        return _clip(result, 150)
    tv = re.search(r"detects TV >= ([\d.]+)", result)
    words = f"chi2 = {m.group(1)} on {m.group(2)} df, p = {m.group(3)} < alpha {m.group(4)}"
    return words + (f"; detects TV >= {tv.group(1)}" if tv else "")


def _canvas() -> tuple[Any, Any] | None:
    """(Figure, FigureCanvasAgg), or None without matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return Figure, FigureCanvasAgg


def _save(fig: Any, canvas_cls: Any, png_path: str | os.PathLike) -> Path:
    path = Path(png_path)
    canvas_cls(fig)
    fig.savefig(path, dpi=DPI, format="png", metadata={"Software": "rheosampling"})
    return path


def _draw_bars(
    ax: Any,
    rows: Sequence[Row],
    value_label: str,
    target_label: str,
    interval_label: str | None,
    xlabel: str,
    value_name: str = "observed",
    target_name: str = "p_T",
    tolerance: float = 0.0,
) -> None:
    """Paired horizontal bars per sequence, the first row on top: ``value`` (orange, with
    its interval when given) and ``target`` (blue), the deviation written at the right."""
    h = 0.38
    ys = list(range(len(rows)))
    values = [float(r.value) for r in rows]
    targets = [float(r.target) for r in rows]
    ax.barh([y - h / 2 for y in ys], values, height=h, color=OBSERVED, label=value_label, zorder=2)
    ax.barh([y + h / 2 for y in ys], targets, height=h, color=TARGET, label=target_label, zorder=2)
    if interval_label is not None:
        lows = [v - (r.low if r.low is not None else v) for v, r in zip(values, rows)]
        highs = [(r.high if r.high is not None else v) - v for v, r in zip(values, rows)]
        ax.errorbar(
            values,
            [y - h / 2 for y in ys],
            xerr=[lows, highs],
            fmt="none",
            ecolor="black",
            elinewidth=1.2,
            capsize=3,
            label=interval_label,
            zorder=3,
        )
    right = max([max(float(r.high or 0), float(r.value), float(r.target)) for r in rows] + [1e-300])
    for y, r in zip(ys, rows):
        end = max(float(r.high or 0), float(r.value), float(r.target))
        if float(r.target) == 0 and float(r.value) > 0:
            note = f"impossible: p_T = 0\n{value_name} {_num(r.value)}"
        elif r.deviation == 0 or abs(float(r.deviation)) <= tolerance:
            note = f"equal: {_num(r.value)}" if r.deviation == 0 else f"equal within {tolerance:g}: {_num(r.value)}"
        else:
            rel = f" ({float(r.deviation) / float(r.target):+.0%})" if float(r.target) > 0 else ""
            note = f"Δ = {_signed(r.deviation)}{rel}" + (f", z = {r.z:+.1f}" if r.z is not None else "")
            note += f"\n{_num(r.value)} vs {target_name} {_num(r.target)}"
        ax.text(end + 0.015 * right, y, note, va="center", ha="left", fontsize=9, linespacing=1.25)
    ax.set_yticks(ys)
    ax.set_yticklabels([_tokens(r.sequence) for r in rows], fontfamily="monospace", fontsize=10)
    ax.set_ylim(len(rows) - 0.45, -0.55)  # the first (worst) row on top
    ax.set_xlim(0, right * 1.5)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("sequence (token ids)")
    ax.grid(axis="x", color="#DDDDDD", zorder=0)
    ax.spines[["top", "right"]].set_visible(False)
    # above the plot, under the title (set with LEGEND_PAD): it never hides a bar or a label
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=3, fontsize=8.5, frameon=False, borderaxespad=0.2)


LEGEND_PAD = 24  # points between the plot and its title: room for a one-row legend above the plot


def _legend_pad(rows: int) -> float:
    """Points between a plot and its title with a legend of ``rows`` rows between them."""
    return LEGEND_PAD + 17 * (rows - 1)


def _bars_height(n: int) -> float:
    return 1.9 + 0.62 * max(n, 1)


def _tree_layout(tree: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``worst_tree`` and place its nodes: a tidy layout by depth (leaves at
    consecutive x in depth-first order, a parent above the middle of its children), the
    final token as the last child of the last accepted node."""
    try:
        tokens = [int(t) for t in tree["tokens"]]
        parents = [int(p) for p in tree["parents"]]
        kinds = [int(k) for k in tree["kinds"]]
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"worst_tree: needs integer lists tokens, parents and kinds ({e})") from None
    size = len(tokens)
    if len(parents) != size or len(kinds) != size:
        raise ValueError(
            f"worst_tree: tokens, parents and kinds differ in length ({size}, {len(parents)}, {len(kinds)})"
        )
    if any(p < -1 or p >= size or p == i for i, p in enumerate(parents)):
        raise ValueError(f"worst_tree: parents must be -1 (the root) or another node's index, got {parents}")
    if any(k not in KIND_NAMES for k in kinds):
        raise ValueError(f"worst_tree: kinds must be 0 (lead), 1 (sample) or 2 (fill), got {kinds}")
    accepted = [int(a) for a in tree.get("accepted", [])]
    if any(not 0 <= a < size for a in accepted):
        raise ValueError(f"worst_tree: accepted holds node indices below {size}, got {accepted}")
    for before, a in zip([-1, *accepted], accepted):
        if parents[a] != before:
            raise ValueError(f"worst_tree: accepted must walk down from the root, got {accepted}")
    emitted = [int(t) for t in tree.get("emitted", [tokens[a] for a in accepted])]
    order = tree.get("slots")
    children: dict[int, list[int]] = {-1: []}
    for i in range(size):
        children.setdefault(i, [])
    for i in sorted(range(size), key=lambda i: (order[i], i) if order is not None else (i,)):
        children[parents[i]].append(i)
    final = None
    if len(emitted) == len(accepted) + 1:
        last = tree.get("last")
        holder = accepted[-1] if accepted else -1
        if last not in ("bonus", "correction"):  # a leaf gets a bonus token, a rejection a correction
            last = "bonus" if not children[holder] else "correction"
        final = {"token": emitted[-1], "kind": last, "parent": holder}
        children[holder] = [*children[holder], size]  # index ``size``: the final token
    depth = {-1: 0}
    x: dict[int, float] = {}
    leaves = 0
    stack: list[tuple[int, bool]] = [(-1, False)]
    seen = 0
    while stack:
        node, done = stack.pop()
        kids = children.get(node, [])
        if done:
            x[node] = (x[kids[0]] + x[kids[-1]]) / 2
            continue
        seen += 1
        if seen > size + 2:
            raise ValueError(f"worst_tree: parents do not form a tree, got {parents}")
        if not kids:
            x[node] = leaves
            leaves += 1
            continue
        stack.append((node, True))
        for k in reversed(kids):
            depth[k] = depth[node] + 1
            stack.append((k, False))
    if len(x) != size + 1 + (final is not None):
        raise ValueError(f"worst_tree: some nodes do not hang from the root, parents {parents}")
    return {
        "tokens": tokens,
        "parents": parents,
        "kinds": kinds,
        "accepted": accepted,
        "emitted": emitted,
        "final": final,
        "x": x,
        "depth": depth,
        "leaves": max(leaves, 1),
        "size": size,
    }


def _draw_tree(ax: Any, tree: Mapping[str, Any], t: Mapping[str, Any]) -> None:
    """The draft tree ``tree`` on ``ax``, placed by ``_tree_layout`` (``t``)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    x, depth, size, final = t["x"], t["depth"], t["size"], t["final"]
    on_path = set(t["accepted"]) | {-1}
    font = 9 if t["leaves"] <= 10 else 7.5 if t["leaves"] <= 18 else 6

    def parent_of(i: int) -> int:
        return final["parent"] if i == size else t["parents"][i]

    for i in x:
        if i == -1:
            continue
        p = parent_of(i)
        good = i in on_path or (i == size and final is not None)
        colour = (CORRECTION if final["kind"] == "correction" else ACCEPTED) if i == size else ACCEPTED
        ax.plot(
            [x[p], x[i]],
            [-depth[p], -depth[i]],
            color=colour if good else "#999999",
            lw=3 if good else 1.2,
            ls="--" if i == size else "-",
            zorder=1,
        )
    for i in x:
        if i == -1:
            label, fc, ec, lw = "root", "white", ACCEPTED, 2.5
        elif i == size:
            label = f"{final['token']}\n{final['kind']}"
            fc, ec, lw = ("#F7C6A6" if final["kind"] == "correction" else "#B9E6D3"), "black", 1.2
        else:
            label = f"{t['tokens'][i]}\n{KIND_NAMES[t['kinds'][i]]}"
            fc = KIND_COLOURS[t["kinds"][i]]
            ec, lw = (ACCEPTED, 2.8) if i in on_path else ("#666666", 1)
        ax.text(
            x[i],
            -depth[i],
            label,
            ha="center",
            va="center",
            fontsize=font,
            zorder=3,
            linespacing=1.1,
            bbox={"boxstyle": "round,pad=0.35", "fc": fc, "ec": ec, "lw": lw, "ls": "--" if i == size else "-"},
        )
    deepest = max(depth.values())
    drafted = max([depth[i] for i in depth if i != size] + [0])
    for d in range(1, drafted + 1):
        ax.text(-0.75, -d, f"depth {d}", ha="right", va="center", fontsize=8, color="#555555")
    ax.set_xlim(-1.6, t["leaves"] - 0.4)
    ax.set_ylim(-deepest - 0.6, 0.6)
    ax.axis("off")
    handles: list[Any] = [Patch(fc=KIND_COLOURS[k], ec="#666666", label=KIND_NAMES[k]) for k in KIND_NAMES]
    handles.append(Line2D([], [], color=ACCEPTED, lw=3, label="accepted path"))
    if final is not None:
        fc = "#F7C6A6" if final["kind"] == "correction" else "#B9E6D3"
        handles.append(Patch(fc=fc, ec="black", ls="--", label=f"{final['kind']} token (emitted last)"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, fontsize=8, frameon=False)
    acc = _tokens([t["tokens"][a] for a in t["accepted"]])
    title = f"draft tree: accepted {acc}" if t["accepted"] else "draft tree: nothing accepted"
    if final is not None:
        title += f", then the {final['kind']} {final['token']}"
    title += f"; emitted {_tokens(t['emitted'])}"
    if tree.get("probability") is not None:
        title += f"\n(this tree and walk: probability {_num(tree['probability'])})"
    if tree.get("note"):
        title += f"\n{_clip(tree['note'], 90)}"
    ax.set_title(title, fontsize=9.5)
