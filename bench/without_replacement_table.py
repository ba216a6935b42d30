"""The figures of examples/without_replacement.py's exact certification, one row per example.

    python bench/without_replacement_table.py                    # a markdown table on stdout
    python bench/without_replacement_table.py --json             # the same as one JSON object
    python bench/without_replacement_table.py --quick --float32  # every quick case, float32 variants too

Each example is certified on the cases tests/test_without_replacement.py uses (the first 8 of
the quick matrix's supported cases with V <= 5 and depth <= 2; the sampled-tree bug also on
its hand case), or with ``--quick`` on every quick case the gate draws for it: how many are
certified exactly, the runs and seconds in all and for the slowest case, how the draws were
followed, the largest deviation (a bug's is its finding), the tolerance the gate found (from
the lowest precision that met a random value; the widest over the cases, and where it came
from), and the
tokens per cycle beside the reference's on the same laws. ``--float32`` adds each float64
design with ``law_dtype = torch.float32`` (tests/test_found_tolerance.py's ``in_float32``),
which must keep its verdict with no ``exact_tolerance``. Every witness is replayed
(``rheo.checks.witness``) and must agree. The issue notes quote it.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # examples/ and tests/ from the repository root

from rheo.checks.exact.certify import certify_implementation, reference_tokens
from rheo.checks.gate.coverage import supported_cases
from rheo.checks.protocol.load import load_implementation
from rheo.checks.witness import replay
from tests.test_found_tolerance import in_float32
from tests.test_without_replacement import BUGS, LOSSLESS, SECOND_SIBLING, small_cases

BATCHED = ["BatchedSampledTree", "RejectsEveryDraft"]  # lossless, in float32 already or with no float32 variant
BATCHED_BUGS = ["FirstRowKeys", "ResidualOfLastSibling"]


def span(xs: list[float]) -> str:
    return (
        "-"
        if not xs
        else f"{min(xs):.3g}"
        if f"{min(xs):.3g}" == f"{max(xs):.3g}"
        else f"{min(xs):.3g} to {max(xs):.3g}"
    )


def row(name: str, quick: bool = False, float32: bool = False) -> dict:
    impl = in_float32(name) if float32 else load_implementation(f"examples.without_replacement:{name}")
    if quick:
        cases = supported_cases(impl, "exact", "quick").cases
    else:
        cases = small_cases(impl) + ([SECOND_SIBLING] if name == "SampledTreeFirstLaw" else [])
    out = {"example": name + (" (float32)" if float32 else ""), "cases": len(cases), "exact": 0, "lossy": 0}
    out |= {"runs": 0, "seconds": 0.0, "slowest_case_seconds": 0.0, "largest_deviation": 0.0, "draws": set()}
    out |= {"witnesses_agree": True, "tolerance": None, "tolerance_from": "", "tokens": [], "reference": []}
    for case in cases:
        t0 = time.perf_counter()
        cert = certify_implementation(impl, case)
        spent = time.perf_counter() - t0
        out["seconds"] += spent
        out["slowest_case_seconds"] = max(out["slowest_case_seconds"], spent)
        out["runs"] += cert.runs
        if cert.verdict in ("lossless", "not lossless"):
            out["exact"] += 1
            out["lossy"] += cert.verdict == "not lossless"
            out["largest_deviation"] = max(out["largest_deviation"], cert.deviation or 0.0)
            out["draws"].add(cert.draws)
            out["witnesses_agree"] &= replay(json.loads(json.dumps(cert.with_witness()))).agrees
            if out["tolerance"] is None or (cert.tolerance or 0) > out["tolerance"]:
                out["tolerance"], out["tolerance_from"] = cert.tolerance, cert.tolerance_from
            out["tokens"].append(cert.tokens_per_cycle)
            ref = reference_tokens(case)
            if ref is not None:
                out["reference"].append(ref)
    out["tokens"], out["reference"] = span(out["tokens"]), span(out["reference"])
    out["draws"] = "/".join(sorted(out["draws"]))
    out["seconds"], out["slowest_case_seconds"] = round(out["seconds"], 2), round(out["slowest_case_seconds"], 2)
    return out


def main() -> int:
    quick, float32 = "--quick" in sys.argv, "--float32" in sys.argv
    rows = [row(name, quick) for name in LOSSLESS + BATCHED + sorted(BUGS) + BATCHED_BUGS]
    if float32:
        rows += [row(name, quick, float32=True) for name in LOSSLESS + sorted(BUGS)]
    if "--json" in sys.argv:
        print(json.dumps({"rows": rows}))
    else:
        head = (
            "example | exact / cases | lossy | runs | seconds (slowest case) | largest deviation | draws | "
            "witnesses | tolerance found | tokens per cycle (the reference's)"
        )
        print(f"| {head} |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['example']} | {r['exact']} / {r['cases']} | {r['lossy']} | {r['runs']} | {r['seconds']:.1f} "
                f"({r['slowest_case_seconds']:.1f}) | {r['largest_deviation']:.3g} | {r['draws']} | "
                f"{'agree' if r['witnesses_agree'] else 'DISAGREE'} | {r['tolerance']:g} ({r['tolerance_from']}) | "
                f"{r['tokens']} ({r['reference']}) |"
            )
    ok = all(r["witnesses_agree"] and r["exact"] == r["cases"] for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
