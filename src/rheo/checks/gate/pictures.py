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

It imports nothing of ``rheo.checks`` but its drawing parts (``drawing``): it reads payloads as plain dicts and
recomputes what it needs with ``rheo.reference`` and ``rheo.casefile``.
"""

from __future__ import annotations

import math
import os
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rheo.casefile import load_case
from rheo.checks.gate.drawing import (  # the public helpers are re-exported: __all__
    ACCEPTED,
    CORRECTION,
    LAW_ROWS,
    LEGEND_PAD,
    MATPLOTLIB_MISSING,
    ROWS,
    Row,
    _bars_height,
    _canvas,
    _clip,
    _draw_bars,
    _draw_tree,
    _legend_pad,
    _num,
    _result_words,
    _save,
    _statistical_rows,
    _tokens,
    _tree_layout,
    case_summary,
    continued_rows,
    have_matplotlib,
    sequence_values,
)
from rheo.reference import CaseError, Report
from rheo.reference.certify import FLOAT_TOLERANCE


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


__all__ = [
    "MATPLOTLIB_MISSING",
    "case_summary",
    "continued_rows",
    "have_matplotlib",
    "sequence_values",
    "write_counterexample_picture",
    "write_law_picture",
]
