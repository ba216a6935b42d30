"""One cycle's uniforms per request: the schedule of docs/spec.md §7, batched.

The tensors are the batched form of ``rheo.reference.Uniforms``:

- ``u_draw``   [b, 1 + B(D-1)]: the draw of Y at the e-th expansion (e = 0 the root, then
  layer by layer, within a layer in order-key order; every expansion counts, with or
  without a draw);
- ``u_sample`` [b, D+1]: the stochastic step's coin at the visited node of depth d;
- ``u_det``    [b, D+1, K]: the coin of the j-th deterministic child tried there;
- ``u_final``  [b, D+1]: the bonus / correction draw there.

>>> u = Uniforms.random(4, K=3, B=2, D=3, generator=torch.Generator().manual_seed(0))
>>> u.u_draw.shape, u.u_det.shape
(torch.Size([4, 5]), torch.Size([4, 4, 3]))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import torch

from rheo.reference.params import Params

from .inputs import expect


@dataclass
class Uniforms:
    u_draw: torch.Tensor  # [b, 1 + B(D-1)]
    u_sample: torch.Tensor  # [b, D+1]
    u_det: torch.Tensor  # [b, D+1, K]
    u_final: torch.Tensor  # [b, D+1]

    def __post_init__(self) -> None:
        b = expect("Uniforms", "u_draw", self.u_draw, "[b, 1+B(D-1)]", (None, None), "float").shape[0]
        D1 = expect("Uniforms", "u_sample", self.u_sample, "[b, D+1]", (b, None), "float").shape[1]
        expect("Uniforms", "u_det", self.u_det, "[b, D+1, K]", (b, D1, None), "float")
        expect("Uniforms", "u_final", self.u_final, "[b, D+1]", (b, D1), "float")

    def expect_for(self, where: str, params: Params, b: int) -> Uniforms:
        """These uniforms, checked to be the schedule of ``params`` for b requests."""
        D1 = params.depth + 1
        expect(where, "uniforms.u_draw", self.u_draw, "[b, 1+B(D-1)]", (b, params.expansions), "float")
        expect(where, "uniforms.u_sample", self.u_sample, "[b, D+1]", (b, D1), "float")
        expect(where, "uniforms.u_det", self.u_det, "[b, D+1, K]", (b, D1, params.K), "float")
        expect(where, "uniforms.u_final", self.u_final, "[b, D+1]", (b, D1), "float")
        return self

    @staticmethod
    def random(
        batch: int,
        K: int,
        B: int,
        D: int,
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float64,
    ) -> Uniforms:
        """Fresh uniforms in [0, 1) from ``generator`` (on ``device``)."""
        for name, value in (("batch", batch), ("K", K), ("B", B), ("D", D)):
            if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
                raise ValueError(f"Uniforms.random: {name} must be an integer >= 1, got {value!r}")
        if not dtype.is_floating_point:
            raise ValueError(f"Uniforms.random: dtype must be a floating-point dtype, got {dtype}")

        def u(*shape: int) -> torch.Tensor:
            return torch.rand(shape, generator=generator, device=device, dtype=dtype)

        return Uniforms(u(batch, 1 + B * (D - 1)), u(batch, D + 1), u(batch, D + 1, K), u(batch, D + 1))

    @staticmethod
    def stack(
        per_request: Sequence[Any], device: torch.device | str | None = None, dtype: torch.dtype = torch.float64
    ) -> Uniforms:
        """Batch a list of ``rheo.reference.Uniforms`` (one per request, all of one schedule)."""
        if not per_request:
            raise ValueError("Uniforms.stack: per_request must hold at least one request's uniforms")

        def t(name: str) -> torch.Tensor:
            return torch.tensor([getattr(x, name) for x in per_request], device=device, dtype=dtype)

        return Uniforms(t("u_draw"), t("u_sample"), t("u_det"), t("u_final"))

    def to(self, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> Uniforms:
        return Uniforms(
            *(x.to(device=device, dtype=dtype) for x in (self.u_draw, self.u_sample, self.u_det, self.u_final))
        )
