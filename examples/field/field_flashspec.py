"""Adapters for flashspec 0.3.1 (pip install flashspec==0.3.1): its speculative-sampling verifiers.

Each adapter drafts a chain with the draft law the gate hands it (the way flashspec's drafters do:
temperature before log-softmax, one multinomial per position) and hands the drafts to one flashspec
entry point; the code that accepts, rejects and resamples is flashspec's. Run from the repository root:

    rheo gate --impl examples/field/field_flashspec.py:RejectionStep
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # the Triton kernel on CPU (set before triton is imported)

import torch
from flashspec.kernels import _reference as fs_reference
from flashspec.sampling import rejection as fs_rejection
from flashspec.sampling import typical as fs_typical
from flashspec.sampling.greedy import greedy_step

FILTERS = ("draft_top_k", "target_top_k", "target_top_p", "target_min_p")


def _chain_sampling(config: dict) -> bool:
    """Chains (K = 1), T > 0, no filters: what flashspec's sampling path implements."""
    return config["K"] == 1 and config["temperature"] > 0 and all(config[f] is None for f in FILTERS)


def _draft_chains(draft_logits, config, temperature, rows):
    """``rows`` independent chains of L drafts, each drawn from the tempered draft law.

    Returns ids [rows, L], draft log-probs [rows, L, V] (float64), and L. One multinomial over
    [rows, V] per position: row r's draw is the r-th slice (the cycle_batch contract)."""
    length = min(int(config["depth"]), int(config["budget"]))
    paths = [() for _ in range(rows)]
    ids, logprobs = [], []
    for _ in range(length):
        scaled = torch.as_tensor(draft_logits(paths), dtype=torch.float64) / temperature
        x = torch.multinomial(torch.softmax(scaled, -1), 1)[:, 0]
        ids.append(x)
        logprobs.append(torch.log_softmax(scaled, -1))
        paths = [path + (int(t),) for path, t in zip(paths, x)]
    return torch.stack(ids, 1), torch.stack(logprobs, 1), length


def _target_logprobs(target_logits, ids, temperature, length):
    """Tempered target log-probs [rows, L + 1, V] at every prefix of every row's chain."""
    rows = ids.shape[0]
    chains = [tuple(int(t) for t in ids[r]) for r in range(rows)]
    paths = [chain[:i] for chain in chains for i in range(length + 1)]
    logits = torch.as_tensor(target_logits(paths), dtype=torch.float64) / temperature
    return torch.log_softmax(logits, -1).view(rows, length + 1, -1)


def _with_bonus(accepted, first, bonus_logprobs, length):
    """Each row's accepted tokens (-1 padded), then the engine's bonus token, drawn from the
    target's law after the last draft position (bonus_logprobs [rows, V]), where the row
    accepted all ``length`` drafts (``first``: the first rejected position)."""
    probs = bonus_logprobs.exp()
    bonus = torch.multinomial(probs / probs.sum(-1, keepdim=True).clamp(min=1e-9), 1)[:, 0]
    out = []
    for r in range(accepted.shape[0]):
        row = [int(t) for t in accepted[r] if int(t) != -1]
        if int(first[r]) == length:
            row.append(int(bonus[r]))
        out.append(row)
    return out


class _Chain:
    follows_uniforms = False

    def supports(self, config):
        return _chain_sampling(config)

    def cycle(self, draft_logits, target_logits, config, temperature):
        return self.cycle_batch(draft_logits, target_logits, config, temperature, 1)[0]


class RejectionStep(_Chain):
    """flashspec.sampling.rejection.rejection_step: the batch-1 engine path's verifier (gamma
    uniforms, then one multinomial for the residual or the bonus)."""

    def cycle_batch(self, draft_logits, target_logits, config, temperature, rows):
        ids, dlp, length = _draft_chains(draft_logits, config, temperature, rows)
        tlp = _target_logprobs(target_logits, ids, temperature, length)
        step = fs_rejection.rejection_step(ids, dlp.float(), tlp.float())
        out = []
        for r in range(rows):
            n, nxt = int(step[r, 0]), int(step[r, 1])
            out.append([int(t) for t in ids[r, :n]] + [nxt])
        return out


class RejectionSample(_Chain):
    """flashspec.sampling.rejection.rejection_sample (the engine's generic loop), plus the bonus
    draw the engine makes after a full accept (SpeculativeEngine._generate_generic: exp of the
    bonus row, renormalized, multinomial). Here the bonus is drawn on every cycle (one fixed
    schedule); rejection_sample itself draws its residual only when a row was rejected."""

    def cycle_batch(self, draft_logits, target_logits, config, temperature, rows):
        ids, dlp, length = _draft_chains(draft_logits, config, temperature, rows)
        tlp = _target_logprobs(target_logits, ids, temperature, length).float()
        accepted, first, _ = fs_rejection.rejection_sample(ids, dlp.float(), tlp[:, :length], ids, gamma=length)
        return _with_bonus(accepted, first, tlp[:, length], length)


class RejectionStepOnehot(_Chain):
    """flashspec.sampling.rejection.rejection_step_onehot: a deterministic (lookup-style) drafter
    proposes the draft law's most likely token at every position (ties: lowest id), so q is
    one-hot; the engine uses this with its n-gram drafters."""

    def supports(self, config):
        return config["K"] == 1 and config["temperature"] > 0 and all(config[f] is None for f in FILTERS)

    def cycle_batch(self, draft_logits, target_logits, config, temperature, rows):
        length = min(int(config["depth"]), int(config["budget"]))
        chain = ()
        for _ in range(length):  # deterministic: the same for every row
            chain += (int(torch.as_tensor(draft_logits([chain])[0]).argmax()),)
        ids = torch.tensor([chain] * rows, dtype=torch.long)
        tlp = _target_logprobs(target_logits, ids, temperature, length).float()
        step = fs_rejection.rejection_step_onehot(ids, tlp)
        return [list(chain[: int(step[r, 0])]) + [int(step[r, 1])] for r in range(rows)]


def _accept_then_resample(accepted_first, ids, dlp, tlp, length):
    """After an acceptance test: one multinomial per row from flashspec's residual at the first
    rejection (_residual_probs: residual_distribution plus its fallback to p when the residual mass
    is below 1e-6, the weights rejection_step and rejection_sample draw from), or from the bonus
    row after a full accept. Drawn on every cycle for every row (one fixed schedule)."""
    rows = ids.shape[0]
    first = accepted_first.long()
    at = first.clamp(max=length - 1)
    p_rej = tlp[torch.arange(rows), at].exp()
    q_rej = dlp[torch.arange(rows), at].exp()
    residual = fs_rejection._residual_probs(p_rej, q_rej)
    bonus = tlp[:, length].exp()
    probs = torch.where((first < length)[:, None], residual, bonus / bonus.sum(-1, keepdim=True))
    nxt = torch.multinomial(probs, 1)[:, 0]
    return [[int(t) for t in ids[r, : int(first[r])]] + [int(nxt[r])] for r in range(rows)]


class VerifyTokensReference(_Chain):
    """flashspec.kernels._reference.verify_tokens_reference (the kernel's pure-PyTorch twin):
    its acceptance mask and first rejection, then flashspec's residual_distribution."""

    def cycle_batch(self, draft_logits, target_logits, config, temperature, rows):
        ids, dlp, length = _draft_chains(draft_logits, config, temperature, rows)
        tlp = _target_logprobs(target_logits, ids, temperature, length).float()
        dlp = dlp.float()
        u = torch.rand(rows, length)
        _, first = fs_reference.verify_tokens_reference(dlp, tlp[:, :length].contiguous(), u, ids)
        return _accept_then_resample(first, ids, dlp, tlp, length)


def _triton_verify(dlp, tlp, u, ids, block_b):
    """flashspec.kernels.verify_tokens, the Triton kernel, with its autotuner pinned to one of its
    own configs: under TRITON_INTERPRET=1 on a CPU-only machine the autotuner's benchmark needs an
    active GPU driver ("0 active drivers") and raises; with one config it does not benchmark."""
    from flashspec.kernels import verify_kernel

    kernel = verify_kernel._verify_acceptance_kernel
    if not hasattr(kernel, "_field_all_configs"):
        kernel._field_all_configs = list(kernel.configs)
    kernel.configs = [c for c in kernel._field_all_configs if c.kwargs["BLOCK_B"] == block_b]
    kernel.cache.clear()
    return verify_kernel.verify_tokens(dlp, tlp, u, ids)


class VerifyTokensTriton(_Chain):
    """flashspec.kernels.verify_tokens (Triton, interpreted on CPU; BLOCK_B = 4 so rows are masked)
    on contiguous inputs, then flashspec's residual_distribution."""

    block_b = 4
    time_budget = 60

    def cycle_batch(self, draft_logits, target_logits, config, temperature, rows):
        ids, dlp, length = _draft_chains(draft_logits, config, temperature, rows)
        tlp = _target_logprobs(target_logits, ids, temperature, length).float()
        dlp = dlp.float().contiguous()
        u = torch.rand(rows, length)
        _, first = _triton_verify(dlp, tlp[:, :length].contiguous(), u, ids.contiguous(), self.block_b)
        return _accept_then_resample(first, ids, dlp, tlp, length)


class VerifyTokensTritonSliced(_Chain):
    """The same kernel handed the draft positions as a view, tlp[:, :gamma] of the [B, gamma + 1, V]
    scores (the slice SpeculativeEngine._generate_generic hands rejection_sample; the reference
    verify_tokens_reference accepts it). A cycle is the request in row 1 of a batch of two
    independent requests of the same case (row 0 another request): the kernel indexes the view as if
    it were contiguous, so row 1 reads row 0's scores. (No cycle_batch: the rows of one call are not
    independent copies here, which is the defect.)"""

    block_b = 4
    time_budget = 60

    def cycle(self, draft_logits, target_logits, config, temperature):
        ids, dlp, length = _draft_chains(draft_logits, config, temperature, 2)
        tlp = _target_logprobs(target_logits, ids, temperature, length).float()
        dlp = dlp.float().contiguous()
        u = torch.rand(2, length)
        _, first = _triton_verify(dlp, tlp[:, :length], u, ids.contiguous(), self.block_b)
        return _accept_then_resample(first, ids, dlp, tlp, length)[1]


class TypicalSample(_Chain):
    """flashspec.sampling.typical.typical_sample (sampling.variant="typical", documented lossy), with
    typical_p 0.9 (the engine passes SamplingConfig.top_p, default 1.0; 0.9 is the function's own
    default) and the engine's bonus after a full accept."""

    typical_p = 0.9

    def cycle_batch(self, draft_logits, target_logits, config, temperature, rows):
        ids, dlp, length = _draft_chains(draft_logits, config, temperature, rows)
        tlp = _target_logprobs(target_logits, ids, temperature, length).float()
        accepted, first, _ = fs_typical.typical_sample(
            dlp.float(), tlp[:, :length], ids, gamma=length, typical_p=self.typical_p
        )
        return _with_bonus(accepted, first, tlp[:, length], length)


class GreedyStep:
    """flashspec.sampling.greedy.greedy_step (sampling.variant="greedy", T = 0): the drafter proposes
    the draft law's argmax chain (greedy drafting, as the engine's greedy path does), the target's
    argmax at each of the gamma + 1 positions decides."""

    follows_uniforms = False

    def supports(self, config):
        return config["K"] == 1 and config["temperature"] == 0 and all(config[f] is None for f in FILTERS)

    def cycle(self, draft_logits, target_logits, config, temperature):
        length = min(int(config["depth"]), int(config["budget"]))
        chain = ()
        for _ in range(length):
            chain += (int(torch.as_tensor(draft_logits([chain])[0]).argmax()),)
        argmax = torch.as_tensor(target_logits([chain[:i] for i in range(length + 1)])).argmax(-1)
        step = greedy_step(torch.tensor([chain]), argmax[None])
        return list(chain[: int(step[0, 0])]) + [int(step[0, 1])]


class VerifyTokensTritonMixed(_Chain):
    """``VerifyTokensTriton`` (contiguous inputs) as an engine calls it: one kernel call over a
    batch of different requests (``mixed_batches``: each row its own laws and temperature; one
    draft length, the kernel's gamma). The control of ``VerifyTokensTritonSlicedMixed``."""

    block_b = 4
    time_budget = 60
    mixed_batches = True
    sliced = False  # hand the kernel the draft positions as a view of the scores with the bonus row

    def cycle(self, draft_logits, target_logits, config, temperature):
        return self.cycle_batch([draft_logits], [target_logits], [config], [temperature], 1)[0]

    def cycle_batch(self, draft_logits, target_logits, config, temperature, rows):
        lengths = {min(int(c["depth"]), int(c["budget"])) for c in config}
        if len(lengths) > 1:
            raise NotImplementedError("verify_tokens takes one draft length (gamma) per batch")
        chains = [_draft_chains(draft_logits[r], config[r], temperature[r], 1) for r in range(rows)]
        length = chains[0][2]
        ids = torch.cat([c[0] for c in chains])
        dlp = torch.cat([c[1] for c in chains]).float().contiguous()
        tlp = torch.cat(
            [_target_logprobs(target_logits[r], chains[r][0], temperature[r], length) for r in range(rows)]
        ).float()
        u = torch.rand(rows, length)
        drafted = tlp[:, :length] if self.sliced else tlp[:, :length].contiguous()
        _, first = _triton_verify(dlp, drafted, u, ids.contiguous(), self.block_b)
        return _accept_then_resample(first, ids, dlp, tlp, length)


class VerifyTokensTritonSlicedMixed(VerifyTokensTritonMixed):
    """The sliced-view call of ``VerifyTokensTritonSliced`` on a batch of different requests. A
    request alone (``cycle``) sits in row 0, which the kernel reads right; the gate's mixed
    batches put requests in every row, and row 1 reads row 0's scores."""

    sliced = True
