"""Where exact certification's time goes on a sampler through a Triton kernel, and whether
concrete draws agree with the symbolic tracer where both follow a design.

    TRITON_INTERPRET=1 .ci/.venv-field/bin/python bench/exact_kernel_profile.py \\
        [--case "topk K=2 V=3 D=2 B=1 R=2 T=1/3 zeros"]
    python bench/exact_kernel_profile.py --compare [--seconds 40]

Without ``--compare`` (needs Triton: the field venv, ``.ci/field``): one quick case of
``examples.kernel_tree:KernelSampledTree`` certified under cProfile; prints its verdict, the
points evaluated, and the seconds (and share) spent inside the kernel under Triton's
interpreter and inside the product check (they overlap: the check rebuilds nodes, which runs
the kernel).

``--compare``: every quick case of ``BatchedSampledTree`` and its two planted bugs, certified
symbolically and through concrete draws (the symbolic tracer switched off, each case bounded
by SECONDS); prints each case's two verdicts and exits 1 where both give a verdict and the
verdicts differ (a SKIP on either side is no contradiction).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # examples/ from the repository root

from rheo.checks.exact import certify
from rheo.checks.exact.budget import case_clock
from rheo.checks.exact.random_values import Unsupported
from rheo.checks.gate.coverage import supported_cases
from rheo.checks.protocol.load import load_implementation

DESIGNS = ("BatchedSampledTree", "FirstRowKeys", "ResidualOfLastSibling")
VERDICTS = ("lossless", "not lossless")


def profile(name: str) -> int:
    warnings.simplefilter("ignore")  # the interpreter's NumPy warns at log(0): a key of -inf
    impl = load_implementation("examples.kernel_tree:KernelSampledTree")
    case = next((c for c in supported_cases(impl, "exact", "quick").cases if c["name"] == name), None)
    if case is None:
        print(f"--case: no quick case of KernelSampledTree is named {name!r}", file=sys.stderr)
        return 2
    prof, t0 = cProfile.Profile(), time.perf_counter()
    prof.enable()
    cert = certify.certify_implementation(impl, case)
    prof.disable()
    total = time.perf_counter() - t0
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]

    def inside(path: str, function: str) -> float:
        return sum(v[3] for k, v in stats.items() if k[0].endswith(path) and k[2] == function)

    print(cert.summary())
    print(f"{total:.1f} s, {cert.runs:,} points evaluated")
    for what, seconds in (
        ("the kernel under Triton's interpreter", inside("triton/runtime/interpreter.py", "__call__")),
        ("the product check", inside("rheo/checks/exact/concrete.py", "check_product")),
    ):
        print(f"  {what}: {seconds:.1f} s ({seconds / total:.0%})")
    return 0


def compare(seconds: float) -> int:
    symbolic_law = certify._symbolic_cycle_law
    differ = 0
    for design in DESIGNS:
        impl = load_implementation(f"examples.without_replacement:{design}")
        for case in supported_cases(impl, "exact", "quick").cases:
            verdicts = []
            for how in ("symbolic", "concrete"):
                certify._symbolic_cycle_law = symbolic_law if how == "symbolic" else _refused  # type: ignore[assignment]
                with case_clock(case["name"], time.time() + seconds, None):
                    verdicts.append(certify.certify_implementation(impl, case).verdict)
            certify._symbolic_cycle_law = symbolic_law
            clash = verdicts[0] in VERDICTS and verdicts[1] in VERDICTS and verdicts[0] != verdicts[1]
            differ += clash
            print(
                f"{design}, {case['name']}: symbolic {verdicts[0]}, concrete {verdicts[1]}"
                + (" DIFFER" if clash else "")
            )
    print(f"{differ} case(s) where the two verdicts differ")
    return 1 if differ else 0


def _refused(*args, **kwargs):
    raise Unsupported("the symbolic tracer switched off (bench/exact_kernel_profile.py --compare)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="topk K=2 V=3 D=2 B=1 R=2 T=1/3 zeros", help="the quick case to profile")
    ap.add_argument("--compare", action="store_true", help="symbolic against concrete verdicts instead")
    ap.add_argument("--seconds", type=float, default=40.0, help="--compare: each case's bound (default 40)")
    args = ap.parse_args()
    return compare(args.seconds) if args.compare else profile(args.case)


if __name__ == "__main__":
    sys.exit(main())
