"""Which check catches each planted engine bug, and at what sample size (docs/engines.md,
"Planted engine bugs"): every check of rheo.checks.engines.verdicts on one case, with the
bug planted and without it.

    python bench/engine_bugs.py                      # transformers (the default venv)
    .ci/.venv-engines/bin/python bench/engine_bugs.py --engine vllm

Prints a markdown table: bug, check, sample size, verdict, seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import replace

from rheo.checks.engines import verdicts as v
from rheo.integrations.engines.base import EngineCase


def transformers_rows(sizes: list[int]) -> list[tuple]:
    from rheo.integrations.engines import hf_bugs
    from rheo.integrations.engines.hf import TransformersEngine

    rows = []
    for bug in [None, *hf_bugs.BUGS]:
        family = "hybrid" if bug == "recurrent_state_not_restored" else "llama"
        case = EngineCase("assisted", family, 1.0, top_k=2, vocab=8, n_tokens=3, draft_len=2)
        engine = TransformersEngine()
        with hf_bugs.BUGS[bug](engine) if bug else contextlib.nullcontext():
            rows.append((bug or "(none)", "exact", "enumeration", v.exact(engine, case)))
            longer = replace(case, n_tokens=4)
            rows.append((bug or "(none)", "differential", "10 requests", v.differential(engine, longer)))
            for n in sizes:
                rows.append((bug or "(none)", "statistical", f"N = {n:,}", v.statistical(engine, case, n, seed=1)))
    return rows


def vllm_rows(sizes: list[int]) -> list[tuple]:
    from rheo.integrations.engines.vllm_engine import BUGS, VllmEngine

    engine = VllmEngine()
    greedy = EngineCase("draft_model", "llama", 0.0, n_tokens=4, prompt=(1, 2, 3, 1, 2), other_prompt=(4, 5, 4, 5))
    greedy = replace(greedy, drafter="target")
    rows = []
    try:
        for bug in [None, *BUGS]:
            with BUGS[bug](engine) if bug else contextlib.nullcontext():
                rows.append((bug or "(none)", "greedy", "10 requests", v.greedy(engine, greedy)))
    finally:
        engine.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=("transformers", "vllm"), default="transformers")
    parser.add_argument("--sizes", default="2000,10000", help="statistical sample sizes, comma-separated")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rows = transformers_rows(sizes) if args.engine == "transformers" else vllm_rows(sizes)
    print("| bug | check | sample | verdict | seconds |")
    print("|---|---|---|---|---|")
    for bug, check, size, r in rows:
        print(f"| {bug} | {check} | {size} | {r.verdict} | {r.seconds:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
