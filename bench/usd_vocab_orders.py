"""How often transformers' universal speculative decoding misplaces the pruned assistant
logits with real fast tokenizers (docs/transformers.md, second defect).

Each build is a fresh process that makes ``UniversalSpeculativeDecodingGenerator``'s two
tokenizers (``tokenizers`` WordLevel models saved to a temporary folder and loaded by
``AutoTokenizer``), certifies the documented counterexample (V = 4, one draft token) exactly,
and reads the order in which the assistant's ``get_vocab()`` listed the shared words when
transformers built its translator. A build whose order is not id order is predicted lossy;
for the first ``--verdicts`` builds the case that order makes lossy is certified too.

    python bench/usd_vocab_orders.py --builds 20 --verdicts 5
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = """
import json, sys
from rheo.checks.exact.certify import certify_implementation
from rheo.checks.protocol.load import Implementation
import rheo.integrations.transformers_assisted as ta
V, verdicts = 4, sys.argv[1] == "1"
target = ["0", "0", "1/2", "1/2"]
case = {"vocab_size": 4, "policy": "rheo", "K": 1, "m": 0, "depth": 1, "budget": 1, "beam": 1,
        "temperature": "1/3", "target": {"": target, "*": target}, "draft": {"": ["0", "0", "0", "1"]}}
adapter = ta.UniversalSpeculativeDecodingGenerator()
cert = certify_implementation(Implementation(adapter, "usd"), case)
order = adapter.shared_order(V, 1)
out = {"order": order, "id_order": order == sorted(order), "counterexample": cert.verdict,
       "deviation": cert.deviation}
ids = ta.usd_words(V)[2]
wrong = [k for k, a in enumerate(order) if a != k and ids[k] < V]
if verdicts and wrong:
    x = int(ids[wrong[0]])
    t = ["1/2" if s in (x, x ^ 1) else "0" for s in range(V)]
    witness = {**case, "target": {"": t, "*": t}, "draft": {"": ["1" if s == x else "0" for s in range(V)]}}
    w = certify_implementation(Implementation(adapter, "usd"), witness)
    out["witness"] = {"token": x, "verdict": w.verdict, "deviation": w.deviation}
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", type=int, default=20)
    parser.add_argument("--verdicts", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for i in range(args.builds):
        flag = "1" if i < args.verdicts else "0"
        run = subprocess.run([sys.executable, "-c", CHILD, flag], capture_output=True, text=True, check=True)
        row = json.loads(run.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"build {i + 1}: {json.dumps(row)}", flush=True)
    shuffled = sum(not r["id_order"] for r in rows)
    lossy = sum(r["counterexample"] == "not lossless" for r in rows)
    judged = [r for r in rows if "witness" in r or r["id_order"]]  # the builds whose order was put to the test
    agree = all(r["id_order"] == (r.get("witness", {}).get("verdict", "lossless") == "lossless") for r in judged)
    print(
        f"{shuffled} of {len(rows)} builds listed the shared words out of id order (predicted lossy); "
        f"the V = 4 counterexample certified not lossless in {lossy} of {len(rows)}; "
        f"the witness verdicts of {len(judged)} builds agree with the order: {agree}"
    )


if __name__ == "__main__":
    main()
