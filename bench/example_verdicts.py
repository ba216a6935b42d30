"""Every example's exact verdict on each of its smoke exact cases, written as JSON, to compare
two versions of the enumerator (the same verdicts and deviations, and the time each took).

    python bench/example_verdicts.py OUT.json        # from the repository root

Run it at two commits and compare the files: issue 35's note quotes bba1db6 against its HEAD
(391 example/case pairs, every verdict the same). examples/without_replacement.py is left out
(it did not exist before).
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import sys
import time

sys.path.insert(0, ".")

import examples
from rheo.checks.exact.certify import certify_implementation
from rheo.checks.gate.coverage import supported_cases
from rheo.checks.protocol.load import load_implementation

ENTRY_POINTS = ("build_tree", "verify", "cycle")


def main(out_path: str) -> None:
    out = {}
    for info in pkgutil.iter_modules(examples.__path__):
        if info.name.startswith("test_") or info.name == "without_replacement":
            continue
        mod = importlib.import_module(f"examples.{info.name}")
        for name, obj in vars(mod).items():
            if not (inspect.isclass(obj) and obj.__module__ == mod.__name__ and not name.startswith("_")):
                continue
            if not any(callable(getattr(obj, a, None)) for a in ENTRY_POINTS):
                continue
            full = f"examples.{info.name}:{name}"
            impl = load_implementation(full)
            for case in supported_cases(impl, "exact", "smoke").cases:
                t0 = time.perf_counter()
                cert = certify_implementation(impl, case)
                spent = round(time.perf_counter() - t0, 2)
                out[f"{full} {cert.name}"] = (cert.verdict, cert.draws, round(cert.deviation or 0, 6), spent)
    with open(out_path, "w") as f:
        json.dump(out, f, indent=0)
    print(f"{len(out)} example/case pairs written to {out_path}")


if __name__ == "__main__":
    main(sys.argv[1])
