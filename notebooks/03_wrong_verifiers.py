# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Wrong verifiers and wrong trees, each with its minimal counterexample
#
# Each variant below is something an implementer could plausibly write (docs/spec.md §2-§4).
# For each we load the shrunk counterexample saved in `cases/` (found by Hypothesis, the
# same one `rheo gate` replays), certify it exactly, and certify the same case with the
# correct choice. The correct one is lossless; the variant is not, and we show where.
#
# | variant | what is wrong |
# |---|---|
# | `sample_last` | the deterministic children are verified before the sample |
# | `draft_law: dense` | verified with the untruncated draft law, though drawn from the truncated one |
# | `draft_law: untempered` | the sample is verified with the untempered draft law |
# | `tie_break: token` | score ties in the tree are broken by token ids instead of slot paths |
# | `class_law` | the per-node optimal equivalence-class verifier, used in a dynamic tree |

# %%
import json

import matplotlib.pyplot as plt

from rheo.casefile import load_case
from rheo.checks.gate.reference_checks import corpus_dir
from rheo.reference import certify
from rheo.reference.theorem3 import child_set_law, per_node_optimum_exact

FIX = {
    "sample_last": {"verify": "rheo"},
    "draft_law_dense": {"draft_law": "sampled"},
    "draft_law_untempered": {"draft_law": "sampled"},
    "tie_break_token": {"tie_break": "slot"},
    "class_law_depth2": {"verify": "rheo"},
}
ENGINE_KEYS = lambda case: {k: v for k, v in case.items() if k not in ("name", "description", "expected")}

rows = []
for name, fix in FIX.items():
    case = json.loads((corpus_dir() / f"control-{name}.json").read_text())
    wrong, right = certify(load_case(ENGINE_KEYS(case))), certify(load_case({**ENGINE_KEYS(case), **fix}))
    shape = {k: case.get(k) for k in ("vocab_size", "K", "m", "depth", "budget", "temperature", "draft_top_k")}
    rows.append((name, wrong, right))
    print(f"{name}: {shape}")
    print(
        f"   variant: lossless={wrong.lossless}, max deviation {wrong.deviation.value} at sequence "
        f"{list(wrong.deviation.sequence)} (continued {wrong.deviation.continued} vs target {wrong.deviation.target})"
    )
    print(f"   correct: lossless={right.lossless}, tau {right.tau}")
    assert not wrong.lossless and right.lossless
    assert str(wrong.deviation.value) == case["expected"]["max_abs_deviation"]

# %%
fig, ax = plt.subplots(figsize=(7, 3))
ax.barh([r[0] for r in rows], [float(r[1].deviation.value) for r in rows], label="variant")
ax.barh([r[0] for r in rows], [float(r[2].deviation.value) for r in rows], label="correct (0)")
ax.set_xlabel("max |continued - p_T| on the shrunk counterexample")
ax.invert_yaxis()
ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## The smallest one, read closely: `draft_law: dense`
#
# Two tokens, K = 1, m = 0, `draft_top_k` = 1, T = 1/3. Truncation keeps only the top draft
# token, so the sample is always that token and its law is a point mass. The dense variant
# verifies it with the untruncated tempered law instead, which gives it less than mass 1, so
# the acceptance min(1, p/r) is too high and the drafted token is over-produced.

# %%
case = json.loads((corpus_dir() / "control-draft_law_dense.json").read_text())
inst = load_case(ENGINE_KEYS(case))
laws = inst.node_laws(())
print("draft q (raw):", [str(x) for x in inst.draft(())], " truncated:", [str(x) for x in laws.q])
print("residual r (truncated, tempered):", [str(x) for x in laws.residual])
print("residual the dense variant verifies with:", [str(x) for x in laws.dense_residual])
print("target p_T:", [str(x) for x in inst.target_law(())])
print("first-token law, variant:", [str(x) for x in certify(inst).cycle.first_token_law(2)])

# %% [markdown]
# ## `class_law`: lossless and LP-optimal at depth 1, lossy at depth 2
#
# At one node, the best acceptance any lossless verifier can reach, given the law of the
# set of surviving children, is a transport LP (docs/spec.md §5; solved exactly by min-cut duality in
# `per_node_optimum_exact`). RheoVerification can fall short of it when fills are present,
# because the fill set depends on Y. The class-law verifier closes that gap at depth 1: it
# is lossless there and reaches the optimum. At depth 2 the number of surviving fills
# depends on Y through global pruning, and it breaks.

# %%
# found by Hypothesis (the search in proofs_tests/test_theorem3.py, at T = 1): three equally
# likely draft tokens, m = 0, one fill; the target puts 1/2 on tokens 1 and 2
depth1 = {
    "vocab_size": 4,
    "target": {"*": ["0", "1/2", "1/2", "0"]},
    "draft": {"*": ["0", "1/3", "1/3", "1/3"]},
    "policy": "rheo",
    "K": 2,
    "m": 0,
    "depth": 1,
    "budget": 2,
}
for verify in ("rheo", "class_law"):
    r = certify(load_case({**depth1, "verify": verify}))
    opt = per_node_optimum_exact(load_case(depth1).target_law(()), child_set_law(r.cycle.trees))
    print(
        f"depth 1, {verify:>9}: lossless={r.lossless}, root acceptance {r.cycle.root_acceptance()} "
        f"(per-node optimum {opt})"
    )
    assert r.lossless and (r.cycle.root_acceptance() == opt) == (verify == "class_law")
depth2 = json.loads((corpus_dir() / "control-class_law_depth2.json").read_text())
r = certify(load_case(ENGINE_KEYS(depth2)))
print(
    f"depth 2, class_law (the shrunk counterexample): lossless={r.lossless}, deviation {r.deviation.value} "
    f"at {list(r.deviation.sequence)}"
)
