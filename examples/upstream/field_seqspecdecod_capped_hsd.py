"""sequential-speculative-decoding 0.1.1 (import seqspecdecod): capped_hsd_step does not sample from the
target's law once gamma >= 2.

Self-contained: seqspecdecod, torch and the standard library only; no model download. Two stand-in
language models answer fixed next-token laws whatever the context (V = 2): target p = (1/2, 1/2),
draft q = (9/10, 1/10), both at temperature 1 (logits = log-probabilities). One call of
capped_hsd_step(gamma=2) from a one-token prompt emits 2 or 3 tokens; the first two are, under the
target, uniform over {00, 01, 10, 11} (1/4 each). The script measures them over N calls and prints
the chi-square against 1/4 each. With gamma=1 (second run) the same step is exact: there
compute_capped_prefix_ratio(ratios, gamma - 1) reads ratios[-1], the full chain's ratio, by
accident; for gamma >= 2 it reads the ratio of the first gamma - 1 drafts only.

Second defect, same function, already at gamma = 1: after a rejection the step resamples from
q * q_prefix * (r* - 1)_+, which is 0 on every token the draft gives probability 0 (a truncated draft,
a one-hot draft at T = 0). Such a token is never emitted after a rejection (third run: V = 4, gamma = 1,
target (0, 0, 1/2, 1/2), draft (0, 2/3, 0, 1/3), the case rheo's gate shrank to: token 2 is never the
first token, where the target gives it 1/2); and when no token the draft can propose has residual
mass, the law is 0/0 and torch.multinomial raises (fourth run: V = 2, gamma = 1, target (1/2, 1/2),
draft (1, 0): the first rejection, probability 1/2 per call, raises).

    python examples/upstream/field_seqspecdecod_capped_hsd.py [N]   (default N = 4000; or REPRO_SAMPLES=N)
    (exit 0 when both defects reproduce)
"""

import os
import sys
from types import SimpleNamespace

import torch
from seqspecdecod.capped_hsd import capped_hsd_step

TARGET = (0.5, 0.5)
DRAFT = (0.9, 0.1)


class FixedLaw:
    """model(ids [1, L]).logits [1, L, V]: the same law at every position."""

    def __init__(self, probs):
        self.logits = torch.tensor(probs, dtype=torch.float64).log()

    def __call__(self, ids):
        return SimpleNamespace(logits=self.logits.expand(1, ids.shape[1], -1).clone())


def chi_square(counts, law):
    n = sum(counts)
    stat = sum((c - n * q) ** 2 / (n * q) for c, q in zip(counts, law) if q > 0)
    df = len([q for q in law if q > 0]) - 1
    half = torch.tensor([df / 2, stat / 2], dtype=torch.float64)
    return stat, df, float(torch.special.gammaincc(half[0], half[1]))


def run(n, gamma):
    torch.manual_seed(0)
    draft, target = FixedLaw(DRAFT), FixedLaw(TARGET)
    counts = [0, 0, 0, 0]
    for _ in range(n):
        out, _, _ = capped_hsd_step(
            draft, target, torch.tensor([[0]]), gamma=gamma, draft_temperature=1.0, target_temperature=1.0
        )
        new = [int(t) for t in out[0, 1:]]
        if len(new) < 2:  # gamma = 1 and a rejection: complete with the target's law (uniform)
            new.append(int(torch.randint(0, 2, ())))
        counts[2 * new[0] + new[1]] += 1
    exact = [TARGET[a] * TARGET[b] for a in range(2) for b in range(2)]
    print(f"capped_hsd_step, gamma={gamma}, target {TARGET}, draft {DRAFT}, T=1, {n} calls, seed 0")
    print(" first two tokens  measured   exact")
    for i, (c, e) in enumerate(zip(counts, exact)):
        print(f"              {i >> 1}{i & 1}    {c / n:.4f}  {e:.4f}")
    stat, df, p = chi_square(counts, exact)
    tv = 0.5 * sum(abs(c / n - e) for c, e in zip(counts, exact))
    print(f"chi-square against the target law: chi2 = {stat:.1f} on {df} df, p = {p:.3g}, TV = {tv:.3f}, N = {n}")
    return p


def zero_draft(n):
    torch.manual_seed(0)
    target_law, draft_law = (0.0, 0.0, 0.5, 0.5), (0.0, 2 / 3, 0.0, 1 / 3)
    draft, target = FixedLaw(draft_law), FixedLaw(target_law)
    counts = [0, 0, 0, 0]
    for _ in range(n):
        out, _, _ = capped_hsd_step(
            draft, target, torch.tensor([[0]]), gamma=1, draft_temperature=1.0, target_temperature=1.0
        )
        counts[int(out[0, 1])] += 1
    print(f"capped_hsd_step, gamma=1, target {target_law}, draft (0, 2/3, 0, 1/3), T=1, {n} calls, seed 0")
    print(" first token  measured   exact")
    for t in range(4):
        print(f"          {t}    {counts[t] / n:.4f}  {target_law[t]:.4f}")
    stat, df, p = chi_square(counts, target_law)
    tv = 0.5 * sum(abs(c / n - e) for c, e in zip(counts, target_law))
    print(f"chi-square against the target law: chi2 = {stat:.1f} on {df} df, p = {p:.3g}, TV = {tv:.3f}, N = {n}")
    return p


def crash():
    torch.manual_seed(0)
    draft, target = FixedLaw((1.0, 0.0)), FixedLaw(TARGET)
    print(f"capped_hsd_step, gamma=1, target {TARGET}, draft (1.0, 0.0), T=1, up to 100 calls, seed 0")
    for call in range(100):
        try:
            capped_hsd_step(draft, target, torch.tensor([[0]]), gamma=1, draft_temperature=1.0, target_temperature=1.0)
        except RuntimeError as exc:
            print(f"CRASH at call {call + 1}: RuntimeError: {exc}")
            return True
    print("no crash in 100 calls")
    return False


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("REPRO_SAMPLES", "4000"))
    torch.set_num_threads(1)
    p2 = run(n, 2)
    print()
    run(n, 1)
    print()
    p0 = zero_draft(n)
    print()
    crashed = crash()
    sys.exit(0 if p2 < 1e-6 and p0 < 1e-6 and crashed else 1)  # exit 0 when both defects reproduce


if __name__ == "__main__":
    main()
