"""A batched chain verifier that takes mixed batches: every row its own request (draft length,
temperature, T = 0 rows among sampled ones, a target top-k on some rows only, its own seeded
generator), the way a serving engine batches different requests. The gate judges each row
against its own law, the rows' independence, and that shuffling seeded rows gives each
request the same tokens (docs/adapters.md, "Mixed batches").

    rheo gate --impl examples.mixed_batch:MixedChain --only "mixed batches"        # lossless
    rheo gate --impl examples.mixed_batch:NeighbourStride --only "mixed batches"   # exits 1
    rheo gate --impl examples.mixed_batch:FirstRowTemperature --only "mixed batches"
    rheo gate --impl examples.mixed_batch:FirstRowFilter --only "mixed batches"
    rheo gate --impl examples.mixed_batch:SharedGenerator --only "mixed batches"

One cycle per row: L = min(depth, budget) drafts from the tempered draft law (T = 0: the draft's
argmax), then the standard chain rejection sampler against the row's target law (tempered,
then its top-k, ties to the lower id; T = 0: the target's argmax, drafts kept while they equal
it). The target's rows are laid out as an engine lays them out: one flat buffer, each row
padded to the longest row's L + 1 positions. Chains only (K = 1, policy rheo, m = 0),
no draft top-k, top-p or min-p.

The planted bugs, each a one-line change of the batch code, each invisible in a batch of copies
of one request:

- ``NeighbourStride``: row r's target positions read as if the buffer were packed (row r
  where row r - 1's own L + 1 positions end): a row behind a shorter one reads its
  neighbour's padding and positions;
- ``FirstRowTemperature``: row 0's temperature applied to every row;
- ``FirstRowFilter``: the target top-k applied to row 0 only;
- ``SharedGenerator``: one generator, seeded by row 0's seed, for every row: each row's law is
  right, but a request's tokens depend on which rows share its batch.
"""

from __future__ import annotations

import torch

UNSUPPORTED = ("draft_top_k", "target_top_p", "target_min_p")


def _law(logits, temperature: float, top_k: int | None) -> torch.Tensor:
    """The tempered law of one row of logits (float64), then its top-k (ties to the lower
    id); T = 0: the argmax (ties to the lower id) as a one-hot law."""
    x = torch.as_tensor(logits, dtype=torch.float64)
    if temperature == 0:
        return torch.nn.functional.one_hot(torch.argmax(x), x.shape[-1]).double()
    p = torch.softmax(x / temperature, dim=-1)
    if top_k is not None and top_k < p.shape[-1]:
        order = sorted(range(p.shape[-1]), key=lambda t: (-float(p[t]), t))
        keep = torch.zeros_like(p, dtype=torch.bool)
        keep[order[:top_k]] = True
        p = torch.where(keep, p, torch.zeros_like(p))
        p = p / p.sum()
    return p


class MixedChain:
    """Lossless."""

    follows_uniforms = False
    mixed_batches = True  # cycle_batch takes per-row lists
    row_seeds = True  # config[r]["seed"], when given, seeds row r's own generator

    def supports(self, config: dict) -> bool:
        chain = config["K"] == 1 and config["policy"] == "rheo" and config["m"] == 0
        return chain and all(config.get(k) is None for k in UNSUPPORTED)

    def cycle(self, draft_logits, target_logits, config: dict, temperature: float) -> list[int]:
        return self.cycle_batch([draft_logits], [target_logits], [config], [temperature], 1)[0]

    # ---- what the planted bugs change ----

    def generators(self, configs: list[dict]) -> list[torch.Generator | None]:
        """Each row's generator: its own, seeded by its ``seed``; None (torch's global one)
        where the gate gives no seed."""
        return [None if "seed" not in c else torch.Generator().manual_seed(int(c["seed"])) for c in configs]

    def row_temperature(self, temperature: list[float], r: int) -> float:
        return float(temperature[r])

    def row_top_k(self, configs: list[dict], r: int) -> int | None:
        return configs[r].get("target_top_k")

    def offset(self, lengths: list[int], r: int) -> int:
        """Where row r's target positions start in the flat buffer (rows padded to the
        longest)."""
        return r * (max(lengths) + 1)

    # ---- the batch ----

    def cycle_batch(self, draft_logits, target_logits, config, temperature, rows: int) -> list[list[int]]:
        gens = self.generators(config)
        lengths = [int(min(c["depth"], c["budget"])) for c in config]
        temps = [self.row_temperature(temperature, r) for r in range(rows)]
        drafts: list[list[int]] = [[] for _ in range(rows)]
        qs: list[list[torch.Tensor]] = [[] for _ in range(rows)]
        for i in range(max(lengths)):
            for r in range(rows):
                if i < lengths[r]:
                    q = _law(draft_logits[r]([tuple(drafts[r])])[0], temps[r], None)
                    x = int(torch.argmax(q)) if temps[r] == 0 else int(torch.multinomial(q, 1, generator=gens[r]))
                    drafts[r].append(x)
                    qs[r].append(q)
        flat = []  # the target's rows, each row's L + 1 positions padded to the longest row's
        for r in range(rows):
            logits = target_logits[r]([tuple(drafts[r][:i]) for i in range(lengths[r] + 1)])
            laws = [_law(row, temps[r], self.row_top_k(config, r)) for row in logits]
            flat += laws + [laws[0]] * (max(lengths) - lengths[r])  # padding: any law, never read
        out = []
        for r in range(rows):
            ps = flat[self.offset(lengths, r) :][: lengths[r] + 1]
            coins = torch.rand(lengths[r], dtype=torch.float64, generator=gens[r])
            tokens: list[int] = []
            final = ps[lengths[r]]
            for i, x in enumerate(drafts[r]):
                p, q = ps[i], qs[r][i]
                if float(coins[i]) * float(q[x]) <= float(p[x]) and (temps[r] > 0 or float(p[x]) == 1.0):
                    tokens.append(x)
                    continue
                residual = torch.clamp(p - q, min=0) if temps[r] > 0 else p
                final = residual / residual.sum()
                break
            last = torch.argmax(final) if temps[r] == 0 else torch.multinomial(final, 1, generator=gens[r])
            out.append(tokens + [int(last)])
        return out


class NeighbourStride(MixedChain):
    """Row r's target positions read as if the padded buffer were packed."""

    def offset(self, lengths: list[int], r: int) -> int:
        return sum(n + 1 for n in lengths[:r])


class FirstRowTemperature(MixedChain):
    """Row 0's temperature applied to every row."""

    def row_temperature(self, temperature: list[float], r: int) -> float:
        return float(temperature[0])


class FirstRowFilter(MixedChain):
    """The target top-k applied to row 0 only."""

    def row_top_k(self, configs: list[dict], r: int) -> int | None:
        return configs[0].get("target_top_k") if r == 0 else None


class SharedGenerator(MixedChain):
    """One generator for every row, seeded by row 0's seed."""

    def generators(self, configs: list[dict]) -> list[torch.Generator | None]:
        if "seed" not in configs[0]:
            return [None] * len(configs)
        shared = torch.Generator().manual_seed(int(configs[0]["seed"]))
        return [shared] * len(configs)
