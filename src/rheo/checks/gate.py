"""``rheo gate``: the lossless-regression gate (exact matrix, negative controls, fastpath
checks) and the checks of another implementation (``--impl``).

Every check returns a verdict (pass / fail / skip), its time, a one-line detail and, when
it has one, a counterexample file. A negative control *passes* when it is caught: a gate
whose controls are not caught could not fire, so it proves nothing.

Profiles: ``quick`` (the default, under 3 minutes on a 2-core machine: the saved corpus,
bounded reproducible searches, 200,000-cycle samples) and ``deep`` (fresh random searches
with 10x the examples, more exact configurations, 1,000,000-cycle samples; like the
``deep`` test profile).

Specification: docs/spec.md §2-§4 (the variants its controls must catch), §5 (what the exact matrix certifies), §7.
"""

from __future__ import annotations

import importlib.util
import json
import re
import time
import xml.etree.ElementTree as ET
from importlib import resources
from pathlib import Path

from rheo.casefile import load_case, read_case, to_json_number
from rheo.checks import parallel
from rheo.checks.corpus import CONTROLS, corpus_entry, lossy, shrunk_search
from rheo.checks.exact_impl import check_exact
from rheo.checks.harness import check_cycle_law, check_decisions, check_output_law
from rheo.checks.impl_cases import impl_matrix
from rheo.checks.outcome import FAMILY_ALPHA, Check, CheckResult, Outcome, Profile
from rheo.checks.strategies import max_nodes
from rheo.integrations.hf import MissingModel, chat_ids, gguf_path, load_target, require_hf
from rheo.reference import certify
from rheo.reference.generate import hashed_case
from rheo.reference.params import PAPER_TREE

INSTALL_TORCH = 'pip install "rheosampling[torch]"'
REAL_PROMPT = "Tell me a short story about a robot."  # a first-token law of entropy 3.1 nats
REAL_TREE = PAPER_TREE.replace(K=4, depth=3, budget=8)  # cheap cycles; the law does not depend on the tree's size
REAL_POLICIES = {"rheo m=1": REAL_TREE, "topk": REAL_TREE.replace(policy="topk")}
REAL_SECOND = 2  # (a) tests the second token given each of this many most frequent first tokens
REAL_TESTS_PER_POLICY = 1 + REAL_SECOND + 1  # (a) first token, second tokens; (b) the 12th token


# ---- the exact matrix ----

MATRIX_FAMILIES = ("rheo m=0", "rheo m=1", "rheo m=2", "topk", "rheo m=0 epsilon 1/10, m=1 with target filters")


def matrix_cases(family: str, level: str) -> list[dict]:
    """Generated exact cases of one lossless family: every temperature 0 / 1/2 / 1, sparse
    on and off, beams 1 and K, budgets from 1 to the full tree (every budget at depth 2;
    a spread at depth 3 in quick), some with zero-probability tokens."""
    shapes = {
        "smoke": [(4, 3, 2)],
        "quick": [(4, 3, 2), (4, 3, 3)],
        "deep": [(4, 3, 2), (4, 3, 3), (5, 3, 2), (4, 4, 2), (5, 4, 2)],
    }[level]
    policy, m = {
        "rheo m=0": ("rheo", 0),
        "rheo m=1": ("rheo", 1),
        "rheo m=2": ("rheo", 2),
        "topk": ("topk", None),
        MATRIX_FAMILIES[-1]: ("rheo", "variants"),
    }[family]
    out, seed = [], 0
    for n, K, depth in shapes:
        for beam in sorted({1, 2, K}) if level == "deep" else (1, K):
            full = max_nodes(K, depth, beam)
            budgets: list[int]
            if level == "smoke":
                budgets = sorted({1, 2, K, full})
            elif level == "deep" or depth == 2:
                budgets = list(range(1, full + 1))
            else:
                budgets = sorted({1, 2, 3, K, K + 2, full // 2, full})
            for budget in budgets:
                for T in ("0", "1/2", "1"):
                    for sparse in (None, K):
                        seed += 1
                        cfg: dict[str, object] = {
                            "policy": policy,
                            "K": K,
                            "budget": budget,
                            "beam": beam,
                            "temperature": T,
                            "draft_top_k": sparse,
                        }
                        if policy == "rheo":
                            cfg["m"] = m
                        if m == "variants":  # the last family alternates its two variants
                            cfg.update(
                                {"m": 0, "epsilon": "1/10"}
                                if seed % 2
                                else {"m": 1, "target_top_k": 3, "target_top_p": "9/10", "target_min_p": "1/20"}
                            )
                        out.append(hashed_case(n, seed, depth, zero_share=2 if seed % 3 == 0 else 0, **cfg))  # type: ignore[arg-type]  # case-file keys
    return out


def matrix_instance(case: dict) -> tuple[bool, str, list[int]]:
    """One exact-matrix instance certified (a piece of work: rheo.checks.parallel): lossless,
    the deviation, the worst sequence."""
    report = certify(load_case(case), count_draws=False)
    return report.lossless, str(report.deviation.value), list(report.deviation.sequence)


def exact_matrix_check(family: str) -> Check:
    def run(profile: Profile, progress) -> Outcome:
        cases = matrix_cases(family, profile.matrix)
        verdicts = parallel.current().map(matrix_instance, [(case,) for case in cases])
        for i, (case, (lossless, deviation, sequence)) in enumerate(zip(cases, verdicts)):
            if not lossless:
                return Outcome(
                    "fail",
                    f"deviation {deviation} at sequence {sequence} on instance {i + 1} of {len(cases)}",
                    {"name": f"gate-matrix-{family}", "description": "a lossless family that is NOT lossless", **case},
                    {"instances": len(cases)},
                )
        shapes = sorted({(c["vocab_size"], c["K"], c["depth"]) for c in cases})
        return Outcome(
            "pass",
            f"{len(cases)} generated instances, deviation exactly 0 on every one "
            f"((V, K, depth) in {shapes}; T 0, 1/2, 1; sparse on/off; budgets 1..full; beams)",
            data={"instances": len(cases)},
        )

    return Check(f"exact: {family}", "exact matrix", run)


# ---- negative controls ----


def corpus_dir() -> Path:
    """The saved counterexample corpus (``cases/``; packaged as ``rheo.cases``)."""
    return Path(str(resources.files("rheo.cases")))


def control_check(control) -> Check:
    def run(profile: Profile, progress) -> Outcome:
        path = corpus_dir() / f"control-{control.name}.json"
        saved = read_case(path)
        report = certify(load_case(saved))
        expected = saved["expected"]
        if report.lossless or to_json_number(report.deviation.value) != expected["max_abs_deviation"]:
            return Outcome(
                "fail",
                f"the saved counterexample {path.name} is no longer caught as recorded: deviation "
                f"{report.deviation.value}, expected {expected['max_abs_deviation']}",
            )
        case, seed = shrunk_search(control.strategy, lossy, profile.search_examples, _seed(profile))
        if case is None:
            return Outcome(
                "fail",
                f"NOT CAUGHT: a fresh search of {profile.search_examples} cases (seed {seed}) found "
                "no counterexample, so this gate could not fire on this bug",
            )
        entry = corpus_entry(control, case)
        dev = entry["expected"]["max_abs_deviation"]
        return Outcome(
            "pass",
            f"caught: corpus {path.name} (deviation {expected['max_abs_deviation']}) and a fresh "
            f"search (seed {seed}, shrunk to V={entry['vocab_size']}, depth {entry['depth']}, "
            f"deviation {dev})",
            entry,
            {"seed": seed, "corpus_deviation": expected["max_abs_deviation"], "fresh_deviation": dev},
        )

    return Check(f"control: {control.name}", "negative control", run, file_stem=f"control-{control.name}")


def paper_example_check() -> Check:
    def run(profile: Profile, progress) -> Outcome:
        saved = read_case(corpus_dir() / "paper-abc-constant-proxy.json")
        r = certify(load_case(saved))
        first = [str(x) for x in r.cycle.first_token_law(3)]
        ok = not r.lossless and str(r.deviation.value) == "1/10" and first == ["9/50", "7/10", "3/25"]
        return Outcome(
            "pass" if ok else "fail",
            f"first-token law {first} (docs/spec.md §6: 9/50, 7/10, 3/25), deviation {r.deviation.value} "
            "(docs/spec.md §6: 1/10)",
        )

    return Check("control: paper {A,B,C}, constant proxy 1/4", "negative control", run)


# ---- the fastpath ----


def _seed(profile: Profile) -> int | None:
    """Searches are reproducible (seed 0) in quick and fresh (a new seed, reported) in deep."""
    return None if profile.fresh_random else 0


def _torch_missing() -> Outcome | None:
    if importlib.util.find_spec("torch") is None:
        return Outcome("skip", f"torch is not installed: {INSTALL_TORCH}")
    return None


def fast_decisions_check() -> Check:
    def run(profile: Profile, progress) -> Outcome:
        from rheo.checks.differential import check_example, fast_examples  # needs torch

        seen = {"equal": 0, "near": 0, "differs": 0}

        def differs(example):
            checks = check_example(example)
            for c in checks:
                seen[c.status] += 1
            return any(c.status == "differs" for c in checks)

        found, seed = shrunk_search(fast_examples(), differs, profile.fast_examples, _seed(profile))
        if found is None:
            return Outcome(
                "pass",
                f"{profile.fast_examples} batches x 3 requests (seed {seed}): {seen['equal']} equal, "
                f"{seen['near']} set aside near a threshold",
                data=dict(seen, seed=seed),
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
    def run(profile: Profile, progress) -> Outcome:
        from rheo.checks.differential import check_designed_ties, designed_ties  # needs torch

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
    def run(profile: Profile, progress) -> Outcome:
        from rheo.checks.sampling import cycle_law_test, quiet_cases, random_instance, sample_cycles  # needs torch

        cases = quiet_cases()
        alpha = FAMILY_ALPHA / len(cases)
        lines, data, bad = [], {}, None
        for name, (V, cfg, T) in cases.items():
            inst = random_instance(V, cfg, T, seed=11)
            res = cycle_law_test(inst, sample_cycles(inst, profile.fast_cycles, seed=1), alpha)
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
        return Outcome("fail" if bad else "pass", "; ".join(lines), bad, data)

    return Check("fastpath: cycle law", "fastpath", run, needs_torch=True)


def fast_calibration_check() -> Check:
    """The statistical check must fire on planted bugs at the same sample size."""

    def run(profile: Profile, progress) -> Outcome:
        from rheo.checks.sampling import cycle_law_test, quiet_cases, random_instance, sample_cycles  # needs torch
        from rheo.testing.planted import PLANTED_BASE, planted  # needs torch

        V, cfg, T = PLANTED_BASE
        inst = random_instance(V, cfg, T, seed=5)
        alpha = FAMILY_ALPHA / len(quiet_cases())  # the alpha the cycle-law check uses
        lines, missed = [], []
        for kind in ("sample_last", "uniform_reused"):
            bug_cfg, tamper = planted(kind)
            res = cycle_law_test(
                inst, sample_cycles(inst, profile.fast_cycles, seed=2, cfg=bug_cfg, tamper=tamper), alpha
            )
            lines.append(f"{kind}: {'fired' if res.reject else 'NOT FIRED'} ({res.describe()})")
            if not res.reject:
                missed.append(kind)
        return Outcome("fail" if missed else "pass", "; ".join(lines), data={"missed": missed})

    return Check("fastpath: statistical check fires on planted bugs", "fastpath", run, needs_torch=True)


def real_model_check() -> Check:
    """Losslessness end to end on SmolLM2-135M-Instruct with the committed draft head
    (``rheo.checks.real_model``), Rheo m=1 and Top-K, at T = 1 on a small tree
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

        from rheo.checks.real_model import first_tokens_check, later_token_check  # needs torch
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


def gate_checks(profile: Profile | None = None) -> list[Check]:
    checks = [exact_matrix_check(f) for f in MATRIX_FAMILIES]
    checks.append(paper_example_check())
    checks += [control_check(c) for c in CONTROLS]
    checks += [fast_decisions_check(), fast_ties_check(), fast_cycle_law_check(), fast_calibration_check()]
    if profile is not None and profile.real_first:
        checks.append(real_model_check())
    return checks


# ---- another implementation ----


def impl_checks(impl, extra_cases: list[dict] | None = None) -> list[Check]:
    """The checks of an ``--impl`` implementation (``rheo.checks.harness``): decision
    equality (sameness with the reference; not listed for ``follows_uniforms = False``), exact
    certification (``rheo.checks.exact_impl``: losslessness, exactly, on the profile's level
    of ``rheo.checks.impl_cases`` plus ``extra_cases``, then a Hypothesis search), the
    output law (losslessness, on the profile's level of ``rheo.checks.impl_cases`` plus
    ``extra_cases``, the user's ``--cases``), and the cycle law only for implementations
    that declare ``implements_spec = True`` (not listed otherwise: a lossless
    implementation of another algorithm has another cycle law, and a check that could
    only be skipped would make --strict fail). Decision equality is likewise not listed
    for an implementation that draws its own randomness (``follows_uniforms = False``)."""
    extra = list(extra_cases or [])

    def decisions(profile: Profile, progress) -> Outcome:
        return check_decisions(impl, profile.impl_examples, _seed(profile), min_compared=profile.impl_min_compared)

    def output_law(profile: Profile, progress) -> Outcome:
        return check_output_law(
            impl, profile.impl_cycles, FAMILY_ALPHA, level=profile.matrix, extra_cases=extra, progress=progress
        )

    def cycle_law(profile: Profile, progress) -> Outcome:
        return check_cycle_law(impl, profile.impl_cycles, FAMILY_ALPHA, deep=profile.name == "deep", progress=progress)

    def exact(profile: Profile, progress) -> Outcome:
        cases = impl_matrix(profile.matrix) + extra
        return check_exact(impl, cases, profile.impl_exact_search, _seed(profile), progress=progress)

    def output_law_batched(profile: Profile, progress) -> Outcome:
        from rheo.checks.batched import check_output_law_batched  # needs torch

        return check_output_law_batched(
            impl, profile.impl_batched_cycles, FAMILY_ALPHA, level=profile.matrix, extra_cases=extra, progress=progress
        )

    def large_vocabulary(profile: Profile, progress) -> Outcome:
        from rheo.checks.batched import check_large_vocabulary  # needs torch

        return check_large_vocabulary(impl, profile.impl_large_vocab_cycles, FAMILY_ALPHA, progress=progress)

    what, stem = impl.provides(), _slug(impl.name)
    checks = []
    if impl.batched:
        checks += [
            Check(
                f"impl: output law, batched ({what})",
                "implementation",
                output_law_batched,
                needs_torch=True,
                file_stem=f"{stem}-output-law-batched",
            ),
            Check(
                f"impl: large vocabulary, batched ({what})",
                "implementation",
                large_vocabulary,
                needs_torch=True,
                file_stem=f"{stem}-large-vocabulary",
            ),
        ]
    if not impl.per_request:
        return checks
    if impl.follows_uniforms:
        checks.append(
            Check(
                f"impl: decision equality ({what})", "implementation", decisions, file_stem=f"{stem}-decision-equality"
            )
        )
    checks += [
        Check(f"impl: exact certification ({what})", "implementation", exact, file_stem=f"{stem}-exact"),
        Check(f"impl: output law ({what})", "implementation", output_law, file_stem=f"{stem}-output-law"),
    ]
    if impl.implements_spec:
        checks.append(Check(f"impl: cycle law ({what})", "implementation", cycle_law, file_stem=f"{stem}-cycle-law"))
    return checks


# ---- running and reporting ----


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def run_checks(checks: list[Check], profile: Profile, out_dir: Path, progress=None) -> list[CheckResult]:
    results = []
    for i, check in enumerate(checks, 1):
        if progress:
            progress(f"[{i}/{len(checks)}] {check.name} ...")
        t0 = time.perf_counter()
        try:
            outcome = (check.needs_torch and _torch_missing()) or check.run(profile, progress)
        except Exception as e:  # a crash inside a check is a failed check, with its message
            outcome = Outcome("fail", f"the check crashed: {type(e).__name__}: {e}")
        seconds = time.perf_counter() - t0
        path = None
        if outcome.counterexample is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            target = out_dir / f"{check.file_stem or _slug(check.name)}.json"
            target.write_text(json.dumps(outcome.counterexample, indent=1) + "\n", encoding="utf-8")
            path = str(target)
        results.append(
            CheckResult(check.name, check.group, outcome.verdict, seconds, outcome.detail, path, outcome.data)
        )
        if progress:
            progress(f"      {outcome.verdict} ({seconds:.1f} s)")
    return results


def summary(results: list[CheckResult]) -> dict:
    counts = {v: sum(r.verdict == v for r in results) for v in ("pass", "fail", "skip")}
    return {**counts, "seconds": round(sum(r.seconds for r in results), 1)}


NOTHING_CHECKED = "every check was skipped: nothing is proven"


def gate_verdict(results: list[CheckResult], strict: bool = False) -> tuple[bool, str | None]:
    """(passed, why not): a failed check, a skip under --strict, or every check skipped
    (a gate that checked nothing does not pass)."""
    s = summary(results)
    if s["fail"]:
        return False, f"{s['fail']} check{'s' if s['fail'] > 1 else ''} failed"
    if results and s["skip"] == len(results):
        return False, NOTHING_CHECKED
    if strict and s["skip"]:
        return False, "a check was skipped and --strict is set"
    return True, None


def render(results: list[CheckResult], profile: str, header: str = "", strict: bool = False) -> str:
    """The table, then a line per check that did not pass (and per implementation check,
    whose detail says what it showed), then the verdict."""
    rows = [("check", "verdict", "time", "counterexample")]
    for r in results:
        rows.append((r.name, r.verdict.upper(), f"{r.seconds:.1f} s", r.counterexample or "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [header] if header else []
    for j, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    s = summary(results)
    lines.append("")
    for r in results:
        if r.verdict != "pass" or r.group == "implementation":
            lines.append(f"{r.verdict.upper()} {r.name}: {r.detail}")
    passed, why = gate_verdict(results, strict)
    lines.append(
        f"gate {'PASSED' if passed else 'FAILED'} ({profile}): {s['pass']} passed, {s['fail']} failed, "
        f"{s['skip']} skipped in {s['seconds']} s" + (f": {why}" if why and not s["fail"] else "")
    )
    return "\n".join(lines)


def junit_xml(results: list[CheckResult], suite: str = "rheo gate", strict: bool = False) -> str:
    """JUnit XML (one testcase per check; failures carry the detail and the counterexample
    path). A gate that fails with no failed check (every check skipped, or a skip under
    --strict) gets one more failing testcase, "rheo gate: verdict", saying why."""
    s = summary(results)
    passed, why = gate_verdict(results, strict)
    verdict_case = not passed and not s["fail"]
    root = ET.Element(
        "testsuite",
        name=suite,
        tests=str(len(results) + verdict_case),
        failures=str(s["fail"] + verdict_case),
        skipped=str(s["skip"]),
        errors="0",
        time=f"{s['seconds']:.3f}",
    )
    for r in results:
        case = ET.SubElement(
            root, "testcase", classname=f"rheo.checks.gate.{_slug(r.group)}", name=r.name, time=f"{r.seconds:.3f}"
        )
        text = r.detail + (f"\ncounterexample: {r.counterexample}" if r.counterexample else "")
        if r.verdict == "fail":
            ET.SubElement(case, "failure", message=r.detail[:200]).text = text
        elif r.verdict == "skip":
            ET.SubElement(case, "skipped", message=r.detail[:200])
        else:
            ET.SubElement(case, "system-out").text = text
    if verdict_case:
        case = ET.SubElement(root, "testcase", classname="rheo.checks.gate", name="rheo gate: verdict", time="0.000")
        ET.SubElement(case, "failure", message=str(why)).text = str(why)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)
