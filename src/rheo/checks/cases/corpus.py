"""Negative controls: the wrong-on-purpose variants, Hypothesis searches that find and
shrink their counterexamples, and the saved corpus under ``cases/`` (docs/spec.md §2-§4).

``rheo.checks.cases.corpus.refresh(folder)`` rewrites the corpus from fresh searches; the tests replay
every saved file and check its expected deviation exactly, and check that each control
is still found by a fresh search.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from rheo.casefile import builtin_examples, compact_tables, dump_case, load_case, to_json_number
from rheo.checks.cases.strategies import cases, per_node_proxy_cases
from rheo.reference import certify
from rheo.reference.params import parse_prefix, prefix_key


def lossy(case: dict) -> bool:
    return not certify(load_case(case)).lossless


@dataclass(frozen=True)
class Control:
    """A wrong-on-purpose variant and the strategy its counterexamples are searched in."""

    name: str
    what: str
    strategy: st.SearchStrategy


def _constant_below():
    return (
        st.fractions(min_value=0, max_value=1, max_denominator=10)
        .filter(lambda c: c > 0)
        .map(lambda c: {"proxy": {"constant": to_json_number(c)}})
    )


CONTROLS = [
    Control(
        "constant_proxy",
        "a constant proxy (the paper's ad-hoc 1/4 family), below the rank bound somewhere",
        cases(policies=("rheo",), extra=_constant_below()),
    ),
    Control(
        "per_node_proxy_below_bound",
        "an identity-independent proxy strictly below q(x_{m+1}) (Lemma 1)",
        per_node_proxy_cases(above_bound=False),
    ),
    Control(
        "self_proxy",
        "proxy = q(Y), the drawn token's own draft probability",
        cases(policies=("rheo",), extra={"proxy": "self"}),
    ),
    Control(
        "sample_last",
        "deterministic children verified before the sample",
        cases(policies=("rheo",), extra={"verify": "sample_last"}),
    ),
    Control(
        "draft_law_dense",
        "the stochastic step uses the untruncated draft law",
        cases(policies=("rheo",), sparse=(True,), extra={"draft_law": "dense"}),
    ),
    Control(
        "draft_law_untempered",
        "the stochastic step uses the untempered draft law",
        cases(policies=("rheo",), temperatures=("0", "1/3", "1/2"), extra={"draft_law": "untempered"}),
    ),
    Control(
        "tie_break_token",
        "the order key breaks score ties by token ids",
        cases(policies=("rheo",), extra={"tie_break": "token"}),
    ),
    Control(
        "class_law_depth2",
        "the per-node optimal class-law verifier in a dynamic tree (depth >= 2)",
        cases(policies=("rheo",), min_depth=2, extra={"verify": "class_law"}),
    ),
]
CONTROLS_BY_NAME = {c.name: c for c in CONTROLS}

SEARCH_SETTINGS = settings(
    max_examples=2000,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.generate, Phase.shrink],
)


def shrunk_search(strategy: st.SearchStrategy, condition, max_examples: int, seed: int | None = 0):
    """(the shrunk example satisfying ``condition``, or None; the seed). At most
    ``max_examples`` generated; ``seed`` None = a fresh random search (the seed it drew is
    returned, so the run can be repeated), an int = the same search every run."""
    if seed is None:
        seed = random.SystemRandom().randrange(2**32)
    s = settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate, Phase.shrink],
    )
    try:
        return find(strategy, condition, settings=s, random=random.Random(seed)), seed
    except NoSuchExample:
        return None, seed


def find_counterexample(control: Control, search_settings: settings = SEARCH_SETTINGS) -> dict:
    """The shrunk counterexample Hypothesis finds (raises hypothesis.errors.NoSuchExample)."""
    return find(control.strategy, lossy, settings=search_settings)


def compact_vocab(case: dict) -> dict:
    """Drop tokens with zero mass in every target and draft vector, renumbering the rest in
    order (so every id tie-break is kept). Such a token is never ranked, drafted or emitted,
    and every sequence through it has deviation 0, so the certificate is unchanged."""
    n = case["vocab_size"]
    laws = list(case["target"].values()) + list(case["draft"].values())
    keep = [t for t in range(n) if any(str(v[t]) not in ("0", "0/1") and v[t] != 0 for v in laws)]
    if len(keep) == n or len(keep) < 2:
        return case
    new_id = {t: i for i, t in enumerate(keep)}

    def key(k):
        if k == "*":
            return k
        toks = parse_prefix(k)
        return None if any(t not in new_id for t in toks) else prefix_key(tuple(new_id[t] for t in toks))

    out = dict(case, vocab_size=len(keep))
    for name in ("target", "draft"):
        out[name] = {key(k): [v[t] for t in keep] for k, v in case[name].items() if key(k) is not None}
    proxy = case.get("proxy")
    if isinstance(proxy, dict) and "per_prefix" in proxy:
        out["proxy"] = {"per_prefix": {key(k): v for k, v in proxy["per_prefix"].items() if key(k) is not None}}
    for name in ("draft_top_k", "target_top_k"):
        if case.get(name) is not None:
            out[name] = min(case[name], len(keep))
    return out


def corpus_entry(control: Control, case: dict) -> dict:
    report = certify(load_case(case))
    small = compact_vocab(case)
    if small is not case:
        smaller = certify(load_case(small))
        if smaller.deviation.value == report.deviation.value and not smaller.lossless:
            case, report = small, smaller
    out = {
        "name": f"control-{control.name}",
        "description": f"Negative control: {control.what}. Shrunk by Hypothesis; NOT lossless.",
        **compact_tables(case),
    }
    out["expected"] = {
        "lossless": report.lossless,
        "max_abs_deviation": to_json_number(report.deviation.value),
        "worst_sequence": list(report.deviation.sequence),
        "control": control.name,
    }
    return out


def paper_example_entry() -> dict:
    """The paper's {A,B,C} example with the ad-hoc constant proxy 1/4 (docs/spec.md §6)."""
    case = {k: v for k, v in builtin_examples()["abc-constant"].items() if k not in ("name", "description")}
    entry = corpus_entry(CONTROLS_BY_NAME["constant_proxy"], case)
    entry["name"] = "paper-abc-constant-proxy"
    entry["description"] = (
        "The paper's worked example (docs/spec.md §6) with the ad-hoc constant proxy 1/4: "
        "first-token law (9/50, 7/10, 3/25) instead of (1/5, 1/2, 3/10)."
    )
    return entry


def refresh(folder: str | Path = "cases") -> list[Path]:
    """Search every control afresh and (re)write cases/control-NAME.json, plus the paper's
    example as cases/paper-abc-constant-proxy.json."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paper = folder / "paper-abc-constant-proxy.json"
    paper.write_text(dump_case(paper_example_entry()), encoding="utf-8")
    written = [paper]
    for control in CONTROLS:
        case = find_counterexample(control)
        path = folder / f"control-{control.name}.json"
        path.write_text(dump_case(corpus_entry(control, case)), encoding="utf-8")
        written.append(path)
        print(f"wrote {path}")
    return written


if __name__ == "__main__":
    refresh(sys.argv[1] if len(sys.argv) > 1 else "cases")
