"""The gate's checks of the fastpath (they need torch and say ``SKIP`` with the install
command without it): decision equality with the reference, designed score ties, the cycle
law, the calibration of the statistics on planted bugs, and the real model (deep only).
"""

from __future__ import annotations

from rheo.checks.cases.corpus import shrunk_search
from rheo.checks.gate.run import search_seed
from rheo.checks.outcome import FAMILY_ALPHA, Check, Outcome, Profile
from rheo.integrations.hf import MissingModel, chat_ids, gguf_path, load_target, require_hf
from rheo.progress import Meter
from rheo.reference.params import PAPER_TREE

REAL_PROMPT = "Tell me a short story about a robot."  # a first-token law of entropy 3.1 nats
REAL_TREE = PAPER_TREE.replace(K=4, depth=3, budget=8)  # cheap cycles; the law does not depend on the tree's size
REAL_POLICIES = {"rheo m=1": REAL_TREE, "topk": REAL_TREE.replace(policy="topk")}
REAL_SECOND = 2  # (a) tests the second token given each of this many most frequent first tokens
REAL_TESTS_PER_POLICY = 1 + REAL_SECOND + 1  # (a) first token, second tokens; (b) the 12th token


def fast_decisions_check() -> Check:
    """The fastpath's trees, outputs and accepted paths against the reference's, decision by
    decision on the same uniforms: designed edge cases first (``fastpath_designed``), then
    random batches shrunk to a minimal difference.

    Catches: index arithmetic (a pool row off by one), a wrong proxy (q(x_m) for
    min{q(x_m), z}, the m = 0 cap at 1 dropped), a sample verified against the untruncated
    residual. Why not easier: a statistical test of the fastpath's output law needs far
    more cycles to see a small deviation, and an output-law test alone cannot say which
    decision went wrong."""

    def run(profile: Profile, progress) -> Outcome:
        from rheo.checks.differential.fastpath import check_example, fast_examples  # needs torch
        from rheo.checks.differential.fastpath_designed import designed_examples

        seen = {"equal": 0, "near": 0, "differs": 0}

        def differs(example):
            checks = check_example(example)
            for c in checks:
                seen[c.status] += 1
            return any(c.status == "differs" for c in checks)

        designed = designed_examples()  # edge cases first, in every profile
        found, seed = next((e for e in designed if differs(e)), None), search_seed(profile)
        if found is None:
            found, seed = shrunk_search(fast_examples(), differs, profile.fast_examples, seed)
        if found is None:
            return Outcome(
                "pass",
                f"{len(designed)} designed and {profile.fast_examples} random batches x 3 requests (seed {seed}): "
                f"{seen['equal']} equal, {seen['near']} set aside near a threshold",
                data=dict(seen, seed=seed, designed=len(designed)),
            )
        V, cfg = found["case"]
        detail = [c.detail for c in check_example(found) if c.status == "differs"][0]
        return Outcome(
            "fail",
            f"fastpath differs from the reference: {detail}",
            {
                "check": "fastpath decision equality",
                "difference": detail,
                "vocab_size": V,
                "config": cfg.to_case(),
                "example": {k: found[k] for k in ("seed", "noise", "zeros", "temps")},
                "replay": "from rheo.reference import Params; rheo.checks.differential.check_example("
                "{'case': (FILE['vocab_size'], Params.from_case(FILE['config'])), **FILE['example']})",
            },
            seen,
        )

    return Check("fastpath: decision equality", "fastpath", run, needs_torch=True)


def fast_ties_check() -> Check:
    """Designed exact ties (equal scores, a draft_top_k boundary, a child scoring its
    parent's score, target argmax ties) must be decided exactly as the reference decides.

    Catches: a tie-break by token id instead of slot path, an unstable sort, a top-k
    keeping the higher id. Why not easier: random float tables almost never tie exactly,
    so the random decision examples set the rare near-ties aside instead of comparing."""

    def run(profile: Profile, progress) -> Outcome:
        from rheo.checks.differential.fastpath import check_designed_ties, designed_ties  # needs torch

        total, bad = 0, []
        for name, scenario in designed_ties().items():
            n, wrong = check_designed_ties(scenario)
            total += n
            bad += [f"{name}: {w}" for w in wrong]
        if bad:
            return Outcome(
                "fail",
                f"{len(bad)} of {total} requests differ; first: {bad[0]}",
                {"check": "fastpath designed exact ties", "differences": bad[:20]},
            )
        return Outcome(
            "pass",
            f"{total} requests on designed exact ties (score ties under both tie-breaks, "
            "draft_top_k boundary, depth and target ties): all equal",
            data={"requests": total},
        )

    return Check("fastpath: designed exact ties", "fastpath", run, needs_torch=True)


def fast_cycle_law_check() -> Check:
    """The fastpath's empirical cycle law against the reference's exact one (chi-square).

    Catches: a bug that only shows over many cycles (a uniform reused across requests of
    a batch, per-request temperatures mixed up). Why not easier: decision equality runs
    both engines on the same uniforms, so a bug in how the fastpath draws or assigns its
    own uniforms is invisible to it."""

    def run(profile: Profile, progress) -> Outcome:
        from rheo.checks.statistics.sampling import (  # needs torch
            cycle_law_test,
            quiet_cases,
            random_instance,
            sample_cycles,
        )

        cases = quiet_cases()
        alpha = FAMILY_ALPHA / len(cases)
        lines, data, bad = [], {}, None
        meter = Meter("fastpath cycle law", len(cases) * profile.fast_cycles, progress, unit="cycles")
        for name, (V, cfg, T) in cases.items():
            inst = random_instance(V, cfg, T, seed=11)
            res = cycle_law_test(inst, sample_cycles(inst, profile.fast_cycles, seed=1), alpha)
            meter.advance(profile.fast_cycles)
            lines.append(f"{name}: {res.describe()}")
            data[name] = {"reject": res.reject, "p_value": res.p_value, "detectable_tv": res.detectable_tv}
            if res.reject and bad is None:
                bad = {
                    "check": "fastpath cycle law",
                    "case": name,
                    "vocab_size": V,
                    "config": repr(cfg),
                    "temperature": T,
                    "cycles": profile.fast_cycles,
                    "result": res.describe(),
                }
        meter.close()
        return Outcome("fail" if bad else "pass", "; ".join(lines), bad, data)

    return Check("fastpath: cycle law", "fastpath", run, needs_torch=True)


def fast_calibration_check() -> Check:
    """The statistical check must fire on planted bugs at the same sample size.

    Catches: a statistical check that lost its power (too few cycles for its TV, a wrong
    alpha split, bins merged): it would pass lossy code. Why not easier: a test that only
    runs the lossless fastpath cannot tell a powerful check from one that never fails."""

    def run(profile: Profile, progress) -> Outcome:
        from rheo.checks.statistics.sampling import (  # needs torch
            cycle_law_test,
            quiet_cases,
            random_instance,
            sample_cycles,
        )
        from rheo.testing.planted import PLANTED_BASE, planted  # needs torch

        V, cfg, T = PLANTED_BASE
        inst = random_instance(V, cfg, T, seed=5)
        alpha = FAMILY_ALPHA / len(quiet_cases())  # the alpha the cycle-law check uses
        lines, missed = [], []
        meter = Meter("fastpath calibration", 2 * profile.fast_cycles, progress, unit="cycles")
        for kind in ("sample_last", "uniform_reused"):
            bug_cfg, tamper = planted(kind)
            res = cycle_law_test(
                inst, sample_cycles(inst, profile.fast_cycles, seed=2, cfg=bug_cfg, tamper=tamper), alpha
            )
            meter.advance(profile.fast_cycles)
            lines.append(f"{kind}: {'fired' if res.reject else 'NOT FIRED'} ({res.describe()})")
            if not res.reject:
                missed.append(kind)
        return Outcome("fail" if missed else "pass", "; ".join(lines), data={"missed": missed})

    return Check("fastpath: statistical check fires on planted bugs", "fastpath", run, needs_torch=True)


def real_model_check() -> Check:
    """Losslessness end to end on SmolLM2-135M-Instruct with the committed draft head
    (``rheo.checks.statistics.real_model``), Rheo m=1 and Top-K, at T = 1 on a small tree
    (K=4, D=3, R=8: cheap cycles; the law does not depend on the tree's size): (a) the
    first token and the second given the two most frequent first tokens, ``real_first``
    samples each; (b) the 12th token vs plain sampling, ``real_later`` samples per side.
    alpha 1e-6 in all, split over its 8 tests (``REAL_TESTS_PER_POLICY`` per policy)."""

    def run(profile: Profile, progress) -> Outcome:
        try:
            require_hf()
            gguf_path()
        except MissingModel as e:
            return Outcome("skip", str(e))
        import torch

        from rheo.checks.statistics.real_model import first_tokens_check, later_token_check  # needs torch
        from rheo.integrations.eagle import load_head  # needs torch

        target, tok = load_target(quiet=True)
        head = load_head(target.config)
        torch.set_grad_enabled(False)
        prompt = chat_ids(tok, REAL_PROMPT)
        alpha = FAMILY_ALPHA / (REAL_TESTS_PER_POLICY * len(REAL_POLICIES))
        lines, data, bad = [], {}, None
        for name, cfg in REAL_POLICIES.items():
            say = (lambda msg, n=name: progress(f"  {n}: {msg.strip()}")) if progress else None
            a = first_tokens_check(
                target,
                head,
                prompt,
                cfg,
                profile.real_first,
                (1 + REAL_SECOND) * alpha,
                second=REAL_SECOND,
                progress=say,
            )
            b = later_token_check(target, head, prompt, cfg, profile.real_later, alpha, progress=say)
            data[name] = {"first_tokens": a, "token_12": b}
            for t in a["tests"]:
                what = "first token" if t["given"] is None else f"second token | first = {t['given']}"
                lines.append(
                    f"{name} {what}: {'REJECT' if t['reject'] else 'ok'} p={t['p_value']:.3g}, "
                    f"N={t['n']}, detects TV >= {t['detectable_tv']}"
                )
            lines.append(
                f"{name} 12th token vs plain sampling: {'REJECT' if b['reject'] else 'ok'} "
                f"p={b['p_value']:.3g}, N={b['samples']} each, detects TV >= {b['detectable_tv']}"
            )
            if (not a["passed"] or not b["passed"]) and bad is None:
                bad = {
                    "check": "real model losslessness",
                    "policy": name,
                    "prompt": prompt,
                    "config": repr(cfg),
                    "first_tokens": a,
                    "token_12": b,
                }
        return Outcome("fail" if bad else "pass", "; ".join(lines), bad, data)

    return Check("real model: SmolLM2-135M lossless (Rheo m=1, Top-K)", "real model", run, needs_torch=True)
