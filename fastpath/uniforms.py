"""One cycle's uniforms per request, the schedule of SPEC section 7.

The tensors are the batched form of ``rheo.reference.Uniforms``:

- ``u_draw``   [b, 1 + B(D-1)]: the draw of Y at the e-th expansion (e = 0 the root, then
  layer by layer, within a layer in order-key order; every expansion counts, with or
  without a draw);
- ``u_sample`` [b, D+1]: the stochastic step's coin at the visited node of depth d;
- ``u_det``    [b, D+1, K]: the coin of the j-th deterministic child tried there;
- ``u_final``  [b, D+1]: the bonus / correction draw there.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Uniforms:
    u_draw: torch.Tensor
    u_sample: torch.Tensor
    u_det: torch.Tensor
    u_final: torch.Tensor

    @staticmethod
    def random(batch: int, K: int, B: int, D: int, generator: torch.Generator | None = None,
               device=None, dtype=torch.float64) -> "Uniforms":
        """Fresh uniforms in [0, 1) from ``generator`` (on ``device``)."""
        def u(*shape):
            return torch.rand(shape, generator=generator, device=device, dtype=dtype)

        return Uniforms(u(batch, 1 + B * (D - 1)), u(batch, D + 1), u(batch, D + 1, K), u(batch, D + 1))

    @staticmethod
    def stack(per_request: list, device=None, dtype=torch.float64) -> "Uniforms":
        """Batch a list of reference ``Uniforms`` (one per request)."""
        def t(name):
            return torch.tensor([getattr(x, name) for x in per_request], device=device, dtype=dtype)

        return Uniforms(t("u_draw"), t("u_sample"), t("u_det"), t("u_final"))

    def to(self, device=None, dtype=None) -> "Uniforms":
        return Uniforms(*(x.to(device=device, dtype=dtype) for x in
                          (self.u_draw, self.u_sample, self.u_det, self.u_final)))
