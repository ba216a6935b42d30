"""Human-readable and JSON forms of an exact certificate (``rheo exact``)."""
from __future__ import annotations

from rheo.reference.certify import Report
from rheo.reference.numbers import fmt_number
from rheo.reference.theorem3 import child_set_law, per_node_optimum_exact, theorem3_alpha, theorem3_applies

MAX_VOCAB_FOR_OPTIMUM = 12  # the exact per-node optimum enumerates 2^n token sets


def add_single_layer_facts(report: Report) -> None:
    """Theorem 3 (depth 1) and the root's per-node optimum, when they apply."""
    inst, ex = report.inst, report.inst.exact
    if theorem3_applies(inst):
        closed = theorem3_alpha(inst)
        enum = report.cycle.root_acceptance()
        agrees = closed == enum if ex else abs(float(closed) - float(enum)) <= 1e-12
        report.extras["theorem3"] = {"alpha_closed_form": fmt_number(closed, ex),
                                     "alpha_enumerated": fmt_number(enum, ex), "agrees": agrees}
    if report.cycle.trees and inst.n <= MAX_VOCAB_FOR_OPTIMUM:
        sets = child_set_law(report.cycle.trees)
        report.extras["root_optimum"] = fmt_number(per_node_optimum_exact(inst.target_law(()), sets), ex)


def render(report: Report, case: dict, source: str) -> str:
    j = report.to_json()
    inst, c = report.inst, report.inst.config
    lines = []
    name = case.get("name") or source
    desc = f" - {case['description']}" if case.get("description") else ""
    lines.append(f"case: {name}{desc}")
    params = f"policy={c.policy} K={c.K}" + (f" m={c.m}" if c.policy == "rheo" else "")
    params += f" depth={c.depth} budget={c.budget} beam={c.B} T={c.temperature}"
    if c.draft_top_k is not None:
        params += f" draft_top_k={c.draft_top_k}"
    variants = []
    if c.policy == "rheo" and c.proxy.kind != "rheo":
        variants.append(f"proxy={c.proxy.describe()}")
    for key, default in (("tie_break", "slot"), ("verify", "rheo"), ("draft_law", "sampled")):
        if getattr(c, key) != default:
            variants.append(f"{key}={getattr(c, key)}")
    lines.append(f"  {params}  arithmetic={c.arithmetic}" + (f"  [{', '.join(variants)}]" if variants else ""))
    L = inst.seq_len
    verdict = "LOSSLESS" if j["lossless"] else "NOT LOSSLESS"
    lines.append(f"verdict: {verdict}   max |continued - p_T| = {j['max_abs_deviation']} over the {inst.n}^{L} sequences of length {L}")
    if not j["lossless"]:
        lines.append(f"  worst sequence {j['worst_sequence']}: continued law {j['worst_continued']} vs target {j['worst_target']}")
    draws = "not counted (over the time cap)" if j["joint_draws"] is None else j["joint_draws"]
    lines.append(f"tau = E|O| = {j['tau']}   root acceptance = {j['root_acceptance']}   "
                 f"joint draws = {draws}   classes = {j['classes']}   ({j['enumerator']}, {report.seconds:.3f} s)")
    if "theorem3" in j:
        t = j["theorem3"]
        lines.append(f"Theorem 3: closed form alpha = {t['alpha_closed_form']} "
                     f"({'agrees with' if t['agrees'] else 'DIFFERS FROM'} the enumeration)")
    if "root_optimum" in j:
        lines.append(f"per-node optimum at the root (best lossless acceptance for this child-set law) = {j['root_optimum']}")
    lines.append("first token:   token  cycle law      target p_T")
    target = inst.target_law(())
    for t in range(inst.n):
        lines.append(f"               {t:<6} {str(j['first_token_law'][t]):<14} {fmt_number(target[t], inst.exact)}")
    items = sorted(report.cycle.law.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = items[:12]
    lines.append(f"cycle law ({len(items)} outputs{', most likely 12' if len(items) > 12 else ''}):")
    for o, pr in shown:
        lines.append(f"  {' '.join(map(str, o)):<16} {fmt_number(pr, inst.exact)}")
    return "\n".join(lines)
