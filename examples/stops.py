"""Whole generations that stop (docs/spec.md §8, "Stops"): the reference's cycles run from each
root the last one ended on (``examples.loop_generation``), the output ending right after the
first stop token (EOS) or stop sequence, or at max_tokens (``n_tokens``), with the finish
reason, "stop" or "length". A cycle emits several tokens at once, and that is where engines
have leaked tokens past a stop to their clients.

    rheo gate --impl examples.stops:StoppingGeneration --only generation       # lossless
    rheo gate --impl examples.stops:StopCheckedPerCycle --only generation      # exits 1
    rheo gate --impl examples.stops:BonusAfterStop --only generation           # exits 1
    rheo gate --impl examples.stops:OvershootsMaxTokens --only generation      # exits 1

- ``StoppingGeneration``: lossless: each token of a cycle appended in turn, the stops checked
  after each.
- ``StopCheckedPerCycle``: the stops checked once a cycle, on its last token: a draft accepted
  after an EOS, and the cycle's last token, are kept.
- ``BonusAfterStop``: the accepted drafts checked one by one, but the cycle's last (bonus or
  correction) token appended after an accepted EOS.
- ``OvershootsMaxTokens``: a cycle's tokens appended whole: the output runs past max_tokens by
  the accepted drafts.
"""

from __future__ import annotations

import numpy as np

from examples.loop_generation import LoopGeneration, RandomChooser, law_of
from rheo.reference import Instance, Table, build_tree, walk


def stopped(tokens: list[int], config: dict) -> bool:
    """``tokens`` end at a stop: an EOS id last, or a stop sequence's last token."""
    if not tokens:
        return False
    if tokens[-1] in (config.get("stop_token_ids") or []):
        return True
    return any(tokens[-len(s) :] == list(s) for s in (config.get("stop_sequences") or []) if len(tokens) >= len(s))


class StoppingGeneration(LoopGeneration):
    """Lossless."""

    stops = True  # it implements stop_token_ids and stop_sequences: the gate draws stopping cases

    def take(self, out: list[int], cycle: list[int], config: dict, n: int) -> bool:
        """Append the cycle's tokens to ``out``; True when the generation is over."""
        for t in cycle:
            out.append(t)
            if stopped(out, config) or len(out) == n:
                return True
        return False

    def generate(self, draft_logits, target_logits, config: dict, temperature: float) -> dict:
        n = int(config["n_tokens"])
        out: list[int] = []
        index = [0]

        def cycles():
            while True:
                cycle = self.one_cycle(draft_logits, target_logits, config, out, index[0])
                index[0] += 1
                yield cycle

        for cycle in cycles():
            if self.take(out, cycle, config, n):
                break
        return {"tokens": out, "finish_reason": "stop" if stopped(out, config) else "length"}

    def one_cycle(self, draft_logits, target_logits, config: dict, out: list[int], cycle: int) -> list[int]:
        """One reference cycle from the root ``out`` ends on (as ``LoopGeneration.generate``
        runs each of its cycles): its emitted tokens."""
        params, V = self.params(config), int(config["vocab_size"])
        root = tuple(out)
        row = self.root_row(root, cycle)

        def target(prefix):
            path = row if not prefix else root + tuple(prefix)
            return law_of(np.asarray(target_logits([path]), dtype=np.float64)[0])

        def draft(prefix):
            return law_of(np.asarray(draft_logits([root + tuple(prefix)]), dtype=np.float64)[0])

        inst = Instance(V, Table("target", {}, fn=target), Table("draft", {}, fn=draft), params)
        chooser = RandomChooser()
        tokens, _ = walk(inst, build_tree(inst, chooser).labelled, chooser)
        return [int(t) for t in tokens]


class StopCheckedPerCycle(StoppingGeneration):
    def take(self, out, cycle, config, n):
        out.extend(cycle)
        if len(out) >= n:
            del out[n:]
            return True
        return stopped(out, config)


class BonusAfterStop(StoppingGeneration):
    def take(self, out, cycle, config, n):
        for t in cycle[:-1]:
            out.append(t)
            if len(out) == n:
                return True
            if stopped(out, config):
                break
        out.append(cycle[-1])
        return stopped(out, config) or len(out) >= n or stopped(out[:-1], config)


class OvershootsMaxTokens(StoppingGeneration):
    def take(self, out, cycle, config, n):
        for t in cycle:
            out.append(t)
            if stopped(out, config):
                return True
        return len(out) >= n
