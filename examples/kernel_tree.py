"""``BatchedSampledTree`` (examples/without_replacement.py) with its Gumbel keys computed by a
Triton kernel that reads the uniforms' storage, as an engine's fused sampling kernel does. On
a CPU the kernel runs under Triton's interpreter (``TRITON_INTERPRET=1``, set here before
Triton is imported); exact certification cannot follow random values into a kernel
symbolically, so it follows this design through concrete draws (docs/gate.md, "Concrete
draws"): each row of uniforms a race whose weights are measured from the outside, one kernel
call per point tried. Needs Triton (``pip install triton``; the field environment has it:
examples/field/requirements.txt).

    TRITON_INTERPRET=1 rheo gate --impl examples.kernel_tree:KernelSampledTree --only exact

Within the quick budget (300 s on 2 cores) the gate certifies 17 of its 24 quick cases
lossless (exact), and says why it stopped on the others (3 not reached, 1 outgrown, 2 draws
it cannot follow, each named); most of the time goes to the interpreter and to the product
check (docs/gate.md, "Races over uniforms"; ``tests/test_kernel_tree.py``, run by
``.ci/field``). ``cycle_batch`` hands the concrete enumeration several points per call.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # the kernel on a CPU (before triton is imported)

import torch
import triton
import triton.language as tl

from examples.without_replacement import BatchedSampledTree


@triton.jit
def _gumbel_keys(q_ptr, u_ptr, out_ptr, V, BLOCK: tl.constexpr):
    """One program per row: keys[row, j] = log q[row, j] - log(-log u[row, j])."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < V
    q = tl.load(q_ptr + row * V + offs, mask=mask, other=1.0)
    u = tl.load(u_ptr + row * V + offs, mask=mask, other=0.5)
    tl.store(out_ptr + row * V + offs, tl.log(q) - tl.log(-tl.log(u)), mask=mask)


class KernelSampledTree(BatchedSampledTree):
    """Lossless: ``BatchedSampledTree`` with its keys from ``_gumbel_keys`` (float32, as the
    draft laws and the uniforms are)."""

    def gumbel_keys(self, q: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        q, u = q.contiguous(), u.contiguous()
        out = torch.empty_like(q)
        n, V = q.shape
        _gumbel_keys[(n,)](q, u, out, V, BLOCK=triton.next_power_of_2(V))
        return out
