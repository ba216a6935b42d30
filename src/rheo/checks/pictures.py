"""Pictures where people would rather look than read: a counterexample's worst sequences
against p_T (and, when the finding carries one, the draft tree it came from), and the law
``rheo exact`` certifies against p_T (docs/spec.md §5).

- ``write_counterexample_picture(payload, png_path)``: the dict that is written as a
  counterexample JSON file (docs/gate.md, "Reading a counterexample"), drawn. It reads
  the output-law kind (``worst_sequences``: observed frequency against p_T, with the 99%
  interval of the frequency from ``cycles``), the cycle-law kind (``largest_gaps``:
  observed against the reference's exact cycle law), and the exact-certificate kind
  (``output_law`` and ``case``: the implementation's exact law, continued to length D+1
  as in docs/spec.md §5, against p_T on the sequences where they differ most; without a
  readable case, only ``worst_sequence`` with ``worst_continued`` and ``worst_target``).
  An optional ``worst_tree`` adds a panel with the draft tree (format below).
- ``write_law_picture(report, png_path, name)``: a ``rheo.reference.Report`` (what
  ``rheo exact`` prints), drawn: the continued cycle law against p_T on the sequences of
  length D+1 with the largest deviation, then the largest probability, and the cycle law
  Pr(O = o) itself. ``rheo exact CASE --plot FILE.png`` calls it.

Both return the path written, or None, writing nothing, when matplotlib is not installed
(it is optional: the ``notebooks`` and ``test`` extras; ``MATPLOTLIB_MISSING`` says how to
get it). They draw with matplotlib's object-oriented API (a ``Figure`` on the Agg canvas),
never pyplot's global state, so they can run in any thread or process. A file that cannot
be written raises ``OSError``; a malformed ``worst_tree`` raises ``ValueError`` naming the
field.

This module imports nothing of ``rheo.checks``: it reads payloads as plain dicts and
recomputes what it needs with ``rheo.reference`` and ``rheo.casefile``.
"""

from __future__ import annotations

import heapq
import math
import os
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from rheo.casefile import load_case
from rheo.reference import CaseError, Instance, Report
from rheo.reference.certify import FLOAT_TOLERANCE

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


# ---- rows: one sequence, its value against p_T ----


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


# ---- words ----


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


# ---- matplotlib ----


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


# ---- the draft tree ----


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


# ---- counterexample files ----


def _exact_rows(payload: Mapping[str, Any]) -> tuple[list[Row], str]:
    """The exact certificate's worst sequences: its output law continued against p_T on
    the case (``continued_rows``); only its worst sequence when the case cannot be read or
    was judged against a law other than docs/spec.md §0's (an implementation's sampler_law)."""
    worst = tuple(int(t) for t in payload.get("worst_sequence") or ())
    single = []
    if worst and payload.get("worst_continued") is not None and payload.get("worst_target") is not None:
        single = [Row(worst, float(payload["worst_continued"]), float(payload["worst_target"]))]
    law_text = payload.get("output_law")
    if not isinstance(law_text, Mapping) or not isinstance(payload.get("case"), Mapping):
        return single, "the worst sequence only (the payload holds no output law)"
    try:
        inst = load_case(dict(payload["case"]))
        law = {tuple(int(t) for t in k.split()): float(v) for k, v in law_text.items()}
        tol = float(payload.get("tolerance") or 1e-9)
        rows = continued_rows(inst, law, ROWS, include=[worst] if worst else (), tolerance=tol)
    except (CaseError, ValueError, TypeError, KeyError, ZeroDivisionError):
        return single, "the worst sequence only (the case could not be read)"
    if single:
        ref = next((r for r in rows if r.sequence == worst), None)
        pt = float(single[0].target)
        if ref is None or not math.isclose(float(ref.target), pt, rel_tol=1e-6, abs_tol=1e-15):
            return single, "the worst sequence only (judged against the implementation's own sampler law)"
    return rows, ""


def write_counterexample_picture(payload: dict, png_path: str | os.PathLike) -> Path | None:
    """Draw a counterexample ``payload`` (the dict written as the counterexample JSON file)
    into the PNG file ``png_path``; return its path, or None (nothing written) without
    matplotlib or when the payload holds nothing to draw (no worst sequences and no
    ``worst_tree``: a decision-equality difference, say).

    The first panel pairs, for the worst sequences (worst on top; token ids as "2 0 1"),
    the implementation's probability (orange) with p_T (blue) and writes the deviation:

    - output law (``worst_sequences``: [{"sequence", "observed", "p_T"}], ``cycles``,
      ``result``): observed frequencies with their 99% Wilson interval over ``cycles``
      cycles, and z = (observed - p_T) / sqrt(p_T (1 - p_T) / cycles);
    - cycle law (``largest_gaps``: [{"output", "observed", "exact"}]): against the
      reference's exact cycle law instead of p_T;
    - exact certificate (``output_law`` {"2 1": Pr(O = o)}, ``case``, ``worst_sequence``,
      ``worst_continued``, ``worst_target``, ``max_abs_deviation``, ``tolerance``):
      the exact output law continued to length D+1 against p_T, the sequences with the
      largest deviation (deviations within ``tolerance`` count as 0).

    The title names ``check``, ``implementation`` and the case (``case_name`` and
    ``case_summary(case)``); the line under it the verdict's numbers.

    An optional key ``worst_tree`` adds a second panel with a draft tree, in the
    protocol's own form (docs/gate.md, ``build_tree`` and ``verify``)::

        {"tokens":   [R ints],  token of each node
         "parents":  [R ints],  parent's index, -1 = the root (the context)
         "kinds":    [R ints],  0 lead, 1 sample, 2 fill
         "accepted": [ints],    accepted node indices, root to leaf (may be empty)
         "emitted":  [ints],    the cycle's output: the accepted tokens, then the final token
         "last":     "bonus" | "correction"   (optional; default: bonus when the last
                                               accepted node is a leaf, else correction)
         "slots":    [R ints]   (optional: sibling order; default the node order)
         "probability": float   (optional: the probability of this tree and walk)
         "note":     str        (optional: one line under the panel's title)}

    drawn root at top, each node boxed with its token and kind, the accepted path in
    green, the final token as a dashed box under the last accepted node."""
    mpl = _canvas()
    if mpl is None:
        return None
    Figure, Canvas = mpl
    check = str(payload.get("check", "counterexample"))
    impl = str(payload.get("implementation", ""))
    case: Mapping[str, Any] = payload["case"] if isinstance(payload.get("case"), Mapping) else {}
    bars = _payload_bars(payload)
    if payload.get("worst_tree") is not None and not isinstance(payload["worst_tree"], Mapping):
        kind = type(payload["worst_tree"]).__name__
        raise ValueError(f"worst_tree: must be an object (tokens, parents, kinds, ...), got a {kind}")
    tree: Mapping[str, Any] = payload.get("worst_tree") or {}
    if bars is None and not tree:
        return None
    layout = _tree_layout(tree) if tree else None  # checked before anything is drawn
    bars_w = 8.6 if bars is not None else 0.0
    tree_w = 0.0 if layout is None else min(12.0, max(4.8, 0.95 * layout["leaves"] + 1.6))
    tree_h = 0.0 if layout is None else 2.6 + 1.05 * max(layout["depth"].values())
    height = max(_bars_height(len(bars.rows)) if bars is not None else 0.0, tree_h)
    fig = Figure(figsize=(bars_w + tree_w, height), layout="constrained")
    panels = [w for w in (bars_w, tree_w) if w]
    axes = fig.subplots(1, len(panels), width_ratios=panels, squeeze=False)[0]
    if bars is not None:
        bars.draw(axes[0])
    if layout is not None:
        _draw_tree(axes[-1], tree, layout)
    head = f"{check}: {impl}" if impl else check
    name = str(payload.get("case_name") or (case.get("name") if case else "") or "")
    if re.fullmatch(r"V=\d+ \w+ K=\d+", name):
        name = ""  # an unnamed case's placeholder (V, policy, K): the summary says more
    summary = case_summary(case)
    where = f"case {_clip(name, 80)}" + (f" ({summary})" if summary else "") if name else f"case: {summary}"
    width = int(11 * (bars_w + tree_w))
    fig.suptitle("\n".join([*textwrap.wrap(_clip(head, 200), width), *textwrap.wrap(where, width)]), fontsize=12)
    return _save(fig, Canvas, png_path)


@dataclass
class _Bars:
    """The bar panel of a picture: its rows and words."""

    rows: list[Row]
    verdict: str  # the panel's title: the verdict's numbers
    lossless: bool
    value_label: str  # legend of the orange bars
    value_name: str  # "observed", "continued": their name beside each row
    target_label: str = "p_T (target law)"
    target_name: str = "p_T"
    interval_label: str | None = None
    xlabel: str = "probability of the sequence (continued output, length D+1)"
    tolerance: float = 0.0  # deviations up to this are drawn as equal

    def draw(self, ax: Any) -> None:
        _draw_bars(
            ax,
            self.rows,
            self.value_label,
            self.target_label,
            self.interval_label,
            self.xlabel,
            self.value_name,
            self.target_name,
            self.tolerance,
        )
        lines = [w for line in self.verdict.split("\n") for w in textwrap.wrap(line, VERDICT_WIDTH)]
        colour = ACCEPTED if self.lossless else CORRECTION
        ax.set_title("\n".join(lines), fontsize=10, loc="left", pad=LEGEND_PAD, color=colour)


VERDICT_WIDTH = 105  # characters of a verdict line over the bar panel
SEQUENCE_AXIS = "probability of the sequence (length D+1)"
Z_WORDS = "; z = Δ in standard errors under the target"


def _payload_bars(payload: Mapping[str, Any]) -> _Bars | None:
    """The bar panel of a counterexample payload, by its kind; None when it has no worst sequences."""
    cycles = int(payload.get("cycles") or 0)
    result = f": {_result_words(str(payload['result']))}" if payload.get("result") else ""
    seed = f"; seed {payload['seed']}" if "seed" in payload else ""
    entries = payload.get("worst_sequences")
    if isinstance(entries, list) and entries:
        if "observed" in entries[0]:
            verdict = f"NOT lossless{result}{seed}"
            if payload.get("impossible_sequences"):
                verdict += (
                    f"\nseen although p_T = 0: {', '.join(_tokens(s) for s in payload['impossible_sequences'][:3])}"
                )
            return _Bars(
                _statistical_rows(entries, "sequence", "p_T", cycles),
                verdict,
                False,
                f"observed frequency ({cycles:,} cycles)",
                "observed",
                interval_label="99% interval of the frequency",
                xlabel="probability of the sequence (continued output, length D+1)" + Z_WORDS,
            )
        rows = [  # exact probabilities written the same way ("continued" or "certified" against "p_T")
            Row(
                tuple(int(t) for t in e["sequence"]),
                float(e.get("continued", e.get("certified", 0.0))),
                float(e["p_T"]),
            )
            for e in entries[:ROWS]
        ]
        return _Bars(rows, f"NOT lossless{result}", False, "the implementation's law, continued (exact)", "continued")
    gaps = payload.get("largest_gaps")
    if isinstance(gaps, list) and gaps:
        return _Bars(
            _statistical_rows(gaps, "output", "exact", cycles),
            f"a different cycle law from the reference's{result}{seed}",
            False,
            f"observed frequency ({cycles:,} cycles)",
            "observed",
            "the reference's exact cycle law",
            "exact",
            "99% interval of the frequency",
            "probability of the output O of one cycle" + Z_WORDS,
        )
    if payload.get("worst_sequence") or payload.get("output_law"):
        rows, note = _exact_rows(payload)
        if not rows:
            return None
        dev, tol = payload.get("max_abs_deviation"), payload.get("tolerance")
        lossless = payload.get("verdict") == "lossless"
        verdict = "lossless (exact)" if lossless else "NOT lossless (exact)"
        if dev is not None:
            verdict += f": max |continued - p_T| = {_num(dev)}"
            verdict += f" > tolerance {float(tol):g}" if tol is not None and float(dev) > float(tol) else ""
            worst = payload.get("worst_sequence")
            verdict += f" at {_tokens(worst)}" if worst else ""
        if payload.get("runs"):
            verdict += f"; {payload['runs']:,} runs enumerated"
        if note:
            verdict += f"\n{note}"
        bars = _Bars(rows, verdict, lossless, "the implementation's law, continued (exact)", "continued")
        bars.tolerance = float(tol or 0)
        return bars
    return None


# ---- rheo exact ----


def write_law_picture(report: Report, png_path: str | os.PathLike, name: str = "", top: int = LAW_ROWS) -> Path | None:
    """Draw what ``rheo exact`` certifies (``report``: ``rheo.reference.certify``) into the
    PNG file ``png_path``; return its path, or None (nothing written) without matplotlib.

    Left: the cycle law continued by exact target sampling to length D+1 (orange) against
    p_T (blue) on the ``top`` sequences with the largest |continued - p_T|, then the
    largest probability (``continued_rows``; the worst sequence always among them); for a
    lossless case the bars coincide and the title says "LOSSLESS: max |continued - p_T| =
    0". Right: the cycle law Pr(O = o) itself, its ``top`` likeliest outputs coloured by
    length, with tau = E|O|. ``name`` names the case in the title."""
    mpl = _canvas()
    if mpl is None:
        return None
    Figure, Canvas = mpl
    inst, c, dev = report.inst, report.inst.config, report.deviation
    tol = 0.0 if inst.exact else FLOAT_TOLERANCE
    rows = continued_rows(inst, report.cycle.law, top, include=[tuple(dev.sequence)], tolerance=tol)
    L = inst.seq_len
    if report.lossless:
        verdict = f"LOSSLESS: max |continued - p_T| = {_num(dev.value)} over the {inst.n}^{L} sequences of length {L}"
    else:
        verdict = (
            f"NOT LOSSLESS: max |continued - p_T| = {_num(dev.value)} at {_tokens(dev.sequence)} "
            f"(continued {_num(dev.continued)} vs p_T {_num(dev.target)})"
        )
    every = len(rows) == inst.n ** min(L, 64)
    which = "likeliest" if report.lossless else "with the largest deviation, then the likeliest"
    more = "" if every else f"; the {len(rows)} {which}"
    verdict += f"\nthe cycle's output, continued by exact target sampling, against p_T{more}"
    outputs = sorted(report.cycle.law.items(), key=lambda kv: (-kv[1], kv[0]))
    outputs = [(o, pr) for o, pr in outputs if pr][:top]
    height = _bars_height(max(len(rows), len(outputs)))
    fig = Figure(figsize=(14.0, height), layout="constrained")
    ax, ax2 = fig.subplots(1, 2, width_ratios=[8.6, 5.4])
    bars = _Bars(rows, verdict, report.lossless, "the cycle law, continued to length D+1", "continued")
    bars.xlabel, bars.tolerance = SEQUENCE_AXIS, tol
    bars.draw(ax)
    _draw_outputs(ax2, outputs, L, report)
    params = f"policy {c.policy} K={c.K}" + (f" m={c.m}" if c.policy == "rheo" else "")
    params += f", depth {c.depth}, budget {c.budget}, beam {c.B}, T={c.temperature}"
    if c.policy == "rheo" and c.proxy.kind != "rheo":
        params += f", proxy {c.proxy.describe()}"
    for key, default in (("tie_break", "slot"), ("verify", "rheo"), ("draft_law", "sampled")):
        if getattr(c, key) != default:
            params += f", {key}={getattr(c, key)}"
    params += f", V={inst.n}, {c.arithmetic} arithmetic"
    head = f"rheo exact: {_clip(name, 100)}" if name else "rheo exact"
    fig.suptitle("\n".join([head, *textwrap.wrap(_clip(params, 300), 150)]), fontsize=12)
    return _save(fig, Canvas, png_path)


def _draw_outputs(ax: Any, outputs: Sequence[tuple[tuple[int, ...], Any]], L: int, report: Report) -> None:
    """The cycle law Pr(O = o): one bar per output, coloured by its length |O|."""
    from matplotlib.patches import Patch

    shades = ["#56B4E9", "#009E73", "#CC79A7", "#F0E442", "#999999"]
    colour = {k: shades[min(k - 1, len(shades) - 1)] for k in range(1, L + 1)}
    ys = list(range(len(outputs)))
    values = [float(pr) for _, pr in outputs]
    ax.barh(ys, values, height=0.6, color=[colour[len(o)] for o, _ in outputs], zorder=2)
    right = max(values + [1e-300])
    for y, (_, pr) in zip(ys, outputs):
        ax.text(float(pr) + 0.02 * right, y, _num(pr), va="center", ha="left", fontsize=9)
    ax.set_yticks(ys)
    ax.set_yticklabels([_tokens(o) for o, _ in outputs], fontfamily="monospace", fontsize=10)
    ax.set_ylim(len(outputs) - 0.5, -0.5)
    ax.set_xlim(0, right * 1.3)
    ax.set_xlabel("Pr(O = o): probability of the output of one cycle")
    ax.set_ylabel("output o (token ids)")
    ax.grid(axis="x", color="#DDDDDD", zorder=0)
    ax.spines[["top", "right"]].set_visible(False)
    lengths = sorted({len(o) for o, _ in outputs})
    handles = [Patch(color=colour[k], label=f"|O| = {k}") for k in lengths]
    ncol = min(len(handles), 5)
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=ncol, fontsize=8.5, frameon=False)
    total = len([1 for pr in report.cycle.law.values() if pr])
    more = f", the {len(outputs)} likeliest shown" if total > len(outputs) else ""
    title = f"what one cycle emits: the cycle law Pr(O = o)\n{total:,} outputs{more}; tau = E|O| = {_num(report.tau)}"
    title += "\n|O| = tokens emitted (the accepted ones + the final one)"
    ax.set_title(title, fontsize=10, loc="left", pad=_legend_pad(-(-len(handles) // ncol)))
