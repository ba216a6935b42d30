"""flashspec 0.3.1: the Triton kernel flashspec.kernels.verify_tokens reads its inputs as if they were
contiguous. Handed the draft positions as a view (target_logprobs[:, :gamma] of the [B, gamma + 1, V]
scores that include the bonus row, the slice SpeculativeEngine._generate_generic makes before its
acceptance test), every row b >= 1 is tested against another position's log-probabilities, and its
result differs from verify_tokens_reference, which the kernel is documented to match.

Self-contained: flashspec, torch, triton and the standard library only. On a CUDA machine it runs the
compiled kernel; on CPU it runs Triton's interpreter (TRITON_INTERPRET=1, set below) and pins the
kernel's autotuner to one of its own configs, because the autotuner's benchmark needs a GPU driver
("0 active drivers") and raises on a CPU-only machine.

Smallest case: B = 2, gamma = 1, V = 2, u = 1/2 everywhere. Draft q = (1/2, 1/2) at every position,
draft token 0 in both rows. Target at the draft position: p = (0.999999, 0.000001) in both rows, so
p(0)/q(0) > 1 and both rows accept. Target at the bonus position: p = (0.000001, 0.999999). The kernel
reads row 1's draft position at offset 1 * gamma * V, which in the view is row 0's bonus row: it
rejects row 1.

    python examples/upstream/field_flashspec_verify_tokens_strides.py   (exit 0 when it reproduces)
"""

import os
import sys

import torch

CUDA = torch.cuda.is_available()
if not CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

from flashspec.kernels import verify_kernel  # noqa: E402
from flashspec.kernels._reference import verify_tokens_reference  # noqa: E402


def main():
    device = "cuda" if CUDA else "cpu"
    if not CUDA:
        kernel = verify_kernel._verify_acceptance_kernel
        kernel.configs = [c for c in kernel.configs if c.kwargs["BLOCK_B"] == 1]
    hi, lo = 0.999999, 0.000001
    scores = torch.tensor([[hi, lo], [lo, hi]]).log()  # [gamma + 1, V]: draft position, bonus position
    target = scores.expand(2, 2, 2).clone().to(device)  # [B, gamma + 1, V]
    draft = torch.full((2, 1, 2), 0.5).log().to(device)  # [B, gamma, V]
    ids = torch.zeros(2, 1, dtype=torch.long, device=device)
    u = torch.full((2, 1), 0.5, device=device)
    view = target[:, :1]  # the draft positions, as the engine slices them
    print(f"flashspec verify_tokens ({'CUDA' if CUDA else 'Triton interpreter on CPU'}), B=2, gamma=1, V=2, u=1/2")
    print(f"view strides {tuple(view.stride())}, contiguous {view.is_contiguous()}")
    ref_acc, ref_first = verify_tokens_reference(draft, view, u, ids)
    acc, first = verify_kernel.verify_tokens(draft, view, u, ids)
    acc_c, first_c = verify_kernel.verify_tokens(draft, view.contiguous(), u, ids)
    for label, (a, f) in [
        ("verify_tokens_reference(view)", (ref_acc, ref_first)),
        ("verify_tokens(view)", (acc, first)),
        ("verify_tokens(view.contiguous())", (acc_c, first_c)),
    ]:
        print(f"{label:34s} accepted {a.view(-1).tolist()}  first_rejection {f.tolist()}")
    differs = not torch.equal(acc.cpu(), ref_acc.cpu())
    print("REPRODUCED: the kernel disagrees with its reference on the view" if differs else "not reproduced")
    sys.exit(0 if differs else 1)


if __name__ == "__main__":
    main()
