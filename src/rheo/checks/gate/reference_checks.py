"""The gate's checks of the reference itself: the exact matrix (every family proven lossless
on generated cases), the negative controls (every wrong-on-purpose variant caught, its
saved counterexample still caught as recorded) and the paper's {A,B,C} example.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from rheo.casefile import load_case, read_case, to_json_number
from rheo.checks import parallel
from rheo.checks.cases.corpus import corpus_entry, lossy, shrunk_search
from rheo.checks.cases.sampling import SETTINGS, masked_prefix, sampling_names, with_logits
from rheo.checks.cases.strategies import max_nodes
from rheo.checks.exact.self_check import self_check
from rheo.checks.gate.run import search_seed
from rheo.checks.outcome import Check, Outcome, Profile
from rheo.progress import Meter
from rheo.reference import certify
from rheo.reference.certify import FLOAT_TOLERANCE
from rheo.reference.generate import hashed_case
from rheo.reference.sampling import PARAMETERS

MATRIX_FAMILIES = (
    "rheo m=0",
    "rheo m=1",
    "rheo m=2",
    "topk",
    "rheo m=1 with sampling parameters",
    "rheo m=0 epsilon 1/10, m=1 with target filters",
)
SAMPLING_FAMILY = MATRIX_FAMILIES[-2]  # float64: the target law of docs/spec.md §9 at every node


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
        SAMPLING_FAMILY: ("rheo", "sampling"),
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
                        zeros = 2 if seed % 3 == 0 else 0
                        if m == "sampling":  # every setting of rheo.checks.cases.sampling in turn
                            out.append(_sampling_case(n, seed, depth, zeros, cfg))
                            continue
                        out.append(hashed_case(n, seed, depth, zero_share=zeros, **cfg))  # type: ignore[arg-type]  # case-file keys
    if m == "variants":
        out += designed_cases()
    return out


def _instances(cases: list[dict]) -> str:
    designed = sum(str(c.get("name", "")).startswith("designed:") for c in cases)
    return f"instances ({len(cases) - designed} generated, {designed} designed)" if designed else "generated instances"


def designed_cases() -> list[dict]:
    """Designed edge cases of the variants family, at every level: docs/spec.md §0's worked
    filter compositions (each pair; a top-p run of exactly p; min_p at exactly the
    threshold), decided exactly here, where float engines round, and the m = 0 proxy above
    1 (q(x_1) + epsilon = 11/10, capped). The reference self-check compares the target law
    at every prefix with an independent one, so a wrong composition fails here."""
    p = ["2/5", "3/10", "1/5", "1/10"]
    tree: dict[str, object] = {
        "policy": "rheo",
        "K": 3,
        "m": 1,
        "depth": 2,
        "budget": 3,
        "beam": 3,
        "draft_top_k": None,
    }
    filters: list[dict[str, object]] = [
        {"target_top_k": 3, "target_top_p": "3/4"},
        {"target_top_k": 3, "target_min_p": "1/2"},
        {"target_top_p": "9/10", "target_min_p": "3/5"},
        {"target_top_k": 3, "target_top_p": "3/4", "target_min_p": "1/2"},
        {"temperature": "1/2", "target_top_k": 2},
    ]
    out = [
        {
            "name": "designed: " + " ".join(f"{k.removeprefix('target_')} {v}" for k, v in f.items()),
            "vocab_size": 4,
            "target": {"*": p},
            "draft": {"*": ["1/10", "1/5", "3/10", "2/5"], "": ["2/5", "3/10", "1/5", "1/10"]},
            **tree,
            "temperature": "1",
            **f,
        }
        for f in filters
    ]
    out.append(
        {
            "name": "designed: m=0 proxy above 1 (epsilon 3/5)",
            "vocab_size": 3,
            "target": {"*": ["1/5", "1/2", "3/10"]},
            "draft": {"*": ["1/2", "3/10", "1/5"]},
            **tree,
            "m": 0,
            "epsilon": "3/5",
            "temperature": "1",
        }
    )
    return out


def _sampling_case(n: int, seed: int, depth: int, zeros: int, cfg: dict) -> dict:
    """A generated case of the sampling family: m = 1, the seed's sampling setting (the
    next one where a setting masks every token somewhere), raw logits, float64."""
    settings = [s for name in PARAMETERS for s in SETTINGS[name]]
    for k in range(len(settings)):
        values = settings[(seed + k) % len(settings)](n)
        case = with_logits(hashed_case(n, seed, depth, zero_share=zeros, **{**cfg, "m": 1, **values}))
        if masked_prefix(case) is None:
            return case
    raise AssertionError(f"every sampling setting masks every token somewhere at seed {seed}")


def matrix_instance(case: dict) -> tuple[bool, str, list[int], dict]:
    """One exact-matrix instance certified (a piece of work: rheo.checks.parallel): lossless,
    the deviation, the worst sequence, and the reference's target law checked against an
    independent one at every prefix the certification visited (``self_check``: a
    certificate compares the cycle law with the reference's own p_T, so a wrong p_T alone
    would pass)."""
    inst = load_case(case)
    report = certify(inst, count_draws=False)
    return report.lossless, str(report.deviation.value), list(report.deviation.sequence), self_check(inst).to_json()


def exact_matrix_check(family: str) -> Check:
    """Certify every generated (and designed) instance of one lossless family exactly, and
    check the reference's target law against an independent one at every prefix visited.

    Catches: any change to the reference's tree building or verification that moves
    probability mass (a residual not renormalised, a proxy used in place of r(Y), a
    bonus token from the untempered target), and, through the self-check, a wrong p_T
    itself (a filter renormalised at the wrong step). Why not easier: sampling the
    reference (a chi-square) misses a deviation below its detectable TV; comparing cycle
    laws against the reference's own p_T alone cannot see a p_T that is wrong in the same
    way everywhere."""

    def run(profile: Profile, progress) -> Outcome:
        cases = matrix_cases(family, profile.matrix)
        meter = Meter(f"exact matrix, {family}", len(cases), progress, unit="instances")
        verdicts = parallel.current().map(matrix_instance, [(case,) for case in cases], lambda i: meter.advance())
        meter.close()
        for i, (case, (lossless, deviation, sequence, checked)) in enumerate(zip(cases, verdicts)):
            if not checked["passed"]:
                where = ",".join(map(str, checked["prefix"]))
                return Outcome(
                    "fail",
                    f"reference self-check failed on instance {i + 1} of {len(cases)}: at prefix [{where}] the "
                    f"reference's target law differs from an independent implementation of docs/spec.md §0 by "
                    f"{checked['max_difference']:.3g} (a bug in rheo)",
                    {"name": f"gate-self-check-{family}", "description": "the reference's p_T is wrong", **case},
                    {"instances": len(cases), "self_check": checked},
                )
            if not lossless:
                return Outcome(
                    "fail",
                    f"deviation {deviation} at sequence {sequence} on instance {i + 1} of {len(cases)}",
                    {"name": f"gate-matrix-{family}", "description": "a lossless family that is NOT lossless", **case},
                    {"instances": len(cases)},
                )
        shapes = sorted({(c["vocab_size"], c["K"], c["depth"]) for c in cases})
        what = f"((V, K, depth) in {shapes}; T 0, 1/2, 1; sparse on/off; budgets 1..full; beams)"
        compared = sum(v[3]["prefixes"] for v in verdicts)
        what += f"; the reference's p_T equal to an independent one at all {compared} prefixes visited"
        if family == SAMPLING_FAMILY:
            worst = max(float(v[1]) for v in verdicts)
            names = sorted({n for c in cases for n in sampling_names(c)}, key=PARAMETERS.index)
            return Outcome(
                "pass",
                f"{len(cases)} generated float64 instances, largest deviation {worst:.2g} (tolerance "
                f"{FLOAT_TOLERANCE:g}), with {', '.join(names)} in turn {what}",
                data={"instances": len(cases), "max_abs_deviation": worst, "self_check_prefixes": compared},
            )
        return Outcome(
            "pass",
            f"{len(cases)} {_instances(cases)}, deviation exactly 0 on every one {what}",
            data={"instances": len(cases), "self_check_prefixes": compared},
        )

    return Check(f"exact: {family}", "exact matrix", run)


def corpus_dir() -> Path:
    """The saved counterexample corpus (``cases/``; packaged as ``rheo.cases``)."""
    return Path(str(resources.files("rheo.cases")))


def control_check(control) -> Check:
    """One wrong-on-purpose variant (``rheo.checks.cases.corpus.CONTROLS``) must be found
    NOT lossless by a shrunk search, and its saved counterexample must still be caught as
    recorded.

    Catches: a certifier that stopped seeing deviations (a tolerance grown, a comparison
    against the wrong law, an enumerator that skips draws): every control would then
    "pass". Why not easier: the matrix only shows that lossless code passes; without
    known-lossy inputs a certifier that says LOSSLESS to everything would pass it too."""

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
        case, seed = shrunk_search(control.strategy, lossy, profile.search_examples, search_seed(profile))
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


def worked_cases() -> list[dict]:
    """docs/spec.md §6's worked tau per policy (``src/rheo/checks/gate/worked.json``) as case
    dicts, each with its ``expected`` tau. Their defaults are left unset on purpose."""
    shipped = json.loads(resources.files("rheo.checks.gate").joinpath("worked.json").read_text(encoding="utf-8"))
    tables = shipped["tables"]
    return [
        {"name": e["name"], **tables, "draft": {"*": e["draft"]}, **e["config"], "expected": {"tau": e["tau"]}}
        for e in shipped["cases"]
    ]


def paper_example_check() -> Check:
    """The paper's {A,B,C} example with the constant proxy (a lossy first-token law and
    deviation, exactly), and docs/spec.md §6's worked tau per policy (m = 0 with a tie
    that epsilon breaks and with the proxy's cap at 1): a changed default (epsilon) or a
    dropped cap leaves every certificate lossless, and only tau shows it."""

    def run(profile: Profile, progress) -> Outcome:
        saved = read_case(corpus_dir() / "paper-abc-constant-proxy.json")
        r = certify(load_case(saved))
        first = [str(x) for x in r.cycle.first_token_law(3)]
        ok = not r.lossless and str(r.deviation.value) == "1/10" and first == ["9/50", "7/10", "3/25"]
        detail = (
            f"first-token law {first} (docs/spec.md §6: 9/50, 7/10, 3/25), deviation {r.deviation.value} "
            "(docs/spec.md §6: 1/10)"
        )
        wrong = []
        cases = worked_cases()
        for case in cases:
            report = certify(load_case(case))
            if not report.lossless or str(report.tau) != case["expected"]["tau"]:
                wrong.append(f"{case['name']}: tau {report.tau}, docs/spec.md §6 says {case['expected']['tau']}")
        if wrong:
            return Outcome("fail", f"{detail}; worked tau differs: {'; '.join(wrong)}")
        detail += f"; tau as docs/spec.md §6 gives it on all {len(cases)} worked cases"
        return Outcome("pass" if ok else "fail", detail)

    return Check("control: paper {A,B,C}, constant proxy 1/4", "negative control", run)
