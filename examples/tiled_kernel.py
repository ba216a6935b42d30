"""A chain verifier that samples the way a GPU kernel does at real vocabulary sizes: the
vocabulary in tiles of 1,024 lanes, a cumulative sum over the tiles' masses picks a tile, a
second one inside the tile picks the lane. Drafts, the residual after a rejection and the
bonus are all drawn so (inverse CDF on one uniform each), the acceptance test is u <= p / q.
The gate's check "impl: real vocabulary sizes, exactly" certifies it at V = 8,193 to 256,000 on
sparse laws placed where such kernels break (docs/gate.md, "Real vocabulary sizes").

    rheo gate --impl examples.tiled_kernel:TiledChain --only "real vocabulary"          # lossless
    rheo gate --impl examples.tiled_kernel:DropsPartialTile --only "real vocabulary"    # exits 1
    rheo gate --impl examples.tiled_kernel:Int16TileOffset --only "real vocabulary"     # exits 1
    rheo gate --impl examples.tiled_kernel:OffByOneTileOffset --only "real vocabulary"  # exits 1

The planted bugs, each a one-line change of the tile arithmetic:

- ``DropsPartialTile``: V // 1024 tiles (at least one), not ceil(V / 1024): the last,
  partial tile is never read (at V = 151,936 its 384 lanes);
- ``Int16TileOffset``: the tile's first lane kept in 16 bits: a tile past lane 65,535 reads a
  low tile's lanes (only vocabularies over 65,536 show it);
- ``OffByOneTileOffset``: the tile's lanes read one lane late (each lane gets its right
  neighbour's weight).

Chains (K = 1, policy rheo, m = 0), T > 0, no filters.
"""

from __future__ import annotations

import torch

TILE = 1024
FILTERS = ("draft_top_k", "target_top_k", "target_top_p", "target_min_p")


class TiledChain:
    """Lossless."""

    follows_uniforms = False

    def supports(self, config: dict) -> bool:
        chain = config["K"] == 1 and config["policy"] == "rheo" and config["m"] == 0
        return chain and config["temperature"] > 0 and all(config.get(k) is None for k in FILTERS)

    def tiles(self, vocab: int) -> int:
        return (vocab + TILE - 1) // TILE

    def tile_start(self, tile: int) -> int:
        return tile * TILE

    lane_shift = 0  # where the tile's lanes are read from, past its first lane

    def sample(self, weights: torch.Tensor, u: torch.Tensor) -> int:
        """The lane at u x (total mass) of ``weights`` [V], tile by tile."""
        vocab = weights.shape[0]
        n = self.tiles(vocab)
        padded = torch.zeros(n * TILE + TILE, dtype=torch.float64)  # one tile of slack past the end
        padded[: min(vocab, n * TILE)] = weights[: n * TILE]
        tile_mass = padded[: n * TILE].view(n, TILE).sum(dim=1)
        cum = torch.cumsum(tile_mass, dim=0)
        if not bool(torch.isfinite(cum[-1])) or not float(cum[-1]) > 0:  # a row of NaN, or nothing with mass
            raise ValueError(f"no law to sample: the weights sum to {float(cum[-1])}")
        target = u * cum[-1]
        tile = min(int((cum <= target).sum()), n - 1)
        before = cum[tile - 1] if tile > 0 else torch.zeros((), dtype=torch.float64)
        start = self.tile_start(tile)
        lanes = torch.cumsum(padded[start + self.lane_shift : start + self.lane_shift + TILE], dim=0) + before
        lane = min(int((lanes <= target).sum()), TILE - 1, vocab - 1 - start)  # clamped to the vocabulary
        return start + lane

    def cycle(self, draft_logits, target_logits, config: dict, temperature: float) -> list[int]:
        length = int(min(config["depth"], config["budget"]))
        # one schedule: a uniform per draft, per coin and for the last token, each its own draw
        u_draft = [torch.rand((), dtype=torch.float64) for _ in range(length)]
        u_coin = [torch.rand((), dtype=torch.float64) for _ in range(length)]
        u_last = torch.rand((), dtype=torch.float64)
        drafts: list[int] = []
        qs = []
        for i in range(length):
            q = torch.softmax(torch.as_tensor(draft_logits([tuple(drafts)])[0], dtype=torch.float64) / temperature, -1)
            drafts.append(self.sample(q, u_draft[i]))
            qs.append(q)
        rows = torch.as_tensor(target_logits([tuple(drafts[:i]) for i in range(length + 1)]), dtype=torch.float64)
        ps = torch.softmax(rows / temperature, dim=-1)
        final = ps[length]
        out: list[int] = []
        for i, x in enumerate(drafts):
            if float(u_coin[i]) * float(qs[i][x]) <= float(ps[i][x]):
                out.append(x)
                continue
            final = torch.clamp(ps[i] - qs[i], min=0)
            break
        return out + [self.sample(final, u_last)]


class DropsPartialTile(TiledChain):
    def tiles(self, vocab: int) -> int:
        return max(vocab // TILE, 1)


class Int16TileOffset(TiledChain):
    def tile_start(self, tile: int) -> int:
        return (tile * TILE) & 0xFFFF


class OffByOneTileOffset(TiledChain):
    lane_shift = 1
