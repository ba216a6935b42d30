"""The figures of examples/without_replacement.py's exact certification, one row per example.

    python bench/without_replacement_table.py            # a markdown table on stdout
    python bench/without_replacement_table.py --json     # the same as one JSON object

Each example is certified on the cases tests/test_without_replacement.py uses (the first 8 of
the quick matrix's supported cases with V <= 5 and depth <= 2; the sampled-tree bug also on
its hand case): how many are certified exactly, the runs and seconds in all and for the
slowest case, how the draws were followed, and the largest deviation (a bug's is its finding).
Every witness is replayed (``rheo.checks.witness``) and must agree. The issue notes quote it.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # examples/ and tests/ from the repository root

from rheo.checks.exact.certify import certify_implementation
from rheo.checks.protocol.load import load_implementation
from rheo.checks.witness import replay
from tests.test_without_replacement import BUGS, LOSSLESS, SECOND_SIBLING, small_cases


def row(name: str) -> dict:
    impl = load_implementation(f"examples.without_replacement:{name}")
    cases = small_cases(impl) + ([SECOND_SIBLING] if name == "SampledTreeFirstLaw" else [])
    out = {"example": name, "cases": len(cases), "exact": 0, "lossy": 0, "runs": 0, "seconds": 0.0}
    out |= {"slowest_case_seconds": 0.0, "largest_deviation": 0.0, "draws": set(), "witnesses_agree": True}
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
    out["draws"] = "/".join(sorted(out["draws"]))
    out["seconds"], out["slowest_case_seconds"] = round(out["seconds"], 2), round(out["slowest_case_seconds"], 2)
    return out


def main() -> int:
    rows = [row(name) for name in LOSSLESS + sorted(BUGS)]
    if "--json" in sys.argv:
        print(json.dumps({"rows": rows}))
    else:
        head = "example | exact / cases | lossy | runs | seconds (slowest case) | largest deviation | draws | witnesses"
        print(f"| {head} |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['example']} | {r['exact']} / {r['cases']} | {r['lossy']} | {r['runs']} | {r['seconds']:.1f} "
                f"({r['slowest_case_seconds']:.1f}) | {r['largest_deviation']:.3g} | {r['draws']} | "
                f"{'agree' if r['witnesses_agree'] else 'DISAGREE'} |"
            )
    ok = all(r["witnesses_agree"] and r["exact"] == r["cases"] for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
