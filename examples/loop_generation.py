"""Whole generations through the protocol's ``generate`` (rheo.checks.protocol): the
reference's cycles (``rheo.reference``: build the tree, verify it) run again and again, each
from the root the previous one ended on (the tokens emitted so far), until n_tokens tokens
are out. Its randomness is its own (Python's ``random``: a categorical draw per sample, a
coin per acceptance), which the exact check follows and the statistical check samples.

    rheo gate --impl examples.loop_generation:LoopGeneration       # lossless
    rheo gate --impl examples.loop_generation:StaleRootRow         # exits 1

- ``LoopGeneration``: lossless (every cycle is docs/spec.md's cycle from its own root).
- ``StaleRootRow``: a cross-cycle bug. After the first cycle, the next cycle's root row
  (the target law it verifies the root's children against and draws its correction or
  bonus token from) is the row from before the previous cycle's bonus or correction token:
  the row a KV cache rolled back one token too far would give. One cycle alone is right;
  the generation is not.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from rheo.reference import Instance, Params, Table, build_tree, walk

CONFIG_KEYS = [k for k in Params.CASE_KEYS if k not in ("proxy", "arithmetic", "tie_break", "verify", "draft_law")]


def law_of(logits: np.ndarray) -> tuple[float, ...]:
    """softmax over the finite entries (-inf: probability 0)."""
    out = np.zeros_like(logits, dtype=np.float64)
    ok = np.isfinite(logits)
    z = logits[ok] - logits[ok].max()
    out[ok] = np.exp(z) / np.exp(z).sum()
    return tuple(float(x) for x in out)


class RandomChooser:
    """The reference's chooser on Python's ``random``: a draw is ``random.choices`` over the
    tokens with mass, a coin ``random.random() < a``."""

    def draw(self, name, items: Sequence[tuple[int, float]]) -> int:
        kept = [(t, float(m)) for t, m in items if m > 0]
        return random.choices([t for t, _ in kept], weights=[m for _, m in kept])[0]

    def coin(self, name, a) -> bool:
        return random.random() < float(a)


class LoopGeneration:
    """``generate``: the reference's cycles, each from the root the last one ended on."""

    def params(self, config: dict) -> Params:
        cfg = {k: config[k] for k in CONFIG_KEYS if config.get(k) is not None}
        return Params.from_case({**cfg, "arithmetic": "float64"})

    def root_row(self, root: tuple, cycle: int) -> tuple:
        """The path whose target row the cycle at ``root`` verifies its root against."""
        return root

    def generate(self, draft_logits, target_logits, config: dict, temperature: float) -> list[int]:
        params, n, V = self.params(config), int(config["n_tokens"]), int(config["vocab_size"])
        out: list[int] = []
        cycle = 0
        while len(out) < n:
            root = tuple(out)
            row = self.root_row(root, cycle)

            def target(prefix, root=root, row=row):
                path = row if not prefix else root + tuple(prefix)
                return law_of(np.asarray(target_logits([path]), dtype=np.float64)[0])

            def draft(prefix, root=root):
                return law_of(np.asarray(draft_logits([root + tuple(prefix)]), dtype=np.float64)[0])

            inst = Instance(V, Table("target", {}, fn=target), Table("draft", {}, fn=draft), params)
            chooser = RandomChooser()
            tree = build_tree(inst, chooser)
            tokens, _ = walk(inst, tree.labelled, chooser)
            out.extend(int(t) for t in tokens)
            cycle += 1
        return out[:n]


class StaleRootRow(LoopGeneration):
    """The bug: after the first cycle, the root row is the one from before the previous
    cycle's last (bonus or correction) token."""

    def root_row(self, root: tuple, cycle: int) -> tuple:
        return root[:-1] if cycle > 0 else root
