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
# # The paper's {A, B, C} example: the rheo proxy against an ad-hoc constant proxy
#
# Vocabulary {A, B, C} = {0, 1, 2}; draft q = (1/2, 3/10, 1/5) and target p = (1/5, 1/2, 3/10)
# at every prefix; K = 3 slots, m = 1 lead, depth 1, budget R = 2 (docs/spec.md §6).
#
# The lead is A. The sample Y is drawn from the residual law r = (0, 3/5, 2/5) and the fill
# is the other residual token. With the **rheo proxy** min(q(A), 1 - q(A)) = 1/2 the sample
# always ranks second, so the budget keeps {A, Y} whatever Y is. With the **constant proxy 1/4**
# the sample ranks second only when its fill is C (q = 1/5 < 1/4), that is when Y = B. When
# Y = C, the fill B (q = 3/10 > 1/4) takes the second place and the sample is pruned. Survival
# now says which token was drawn, but the verifier still uses r(B) = 3/5.
#
# Everything below is exact (Fraction arithmetic), computed by `rheo.reference`.

# %%
from fractions import Fraction as F

import matplotlib.pyplot as plt
import numpy as np

from rheo.casefile import builtin_examples, load_case
from rheo.reference import certify

rheo_case = builtin_examples()["abc"]
constant_case = builtin_examples()["abc-constant"]
reports = {
    name: certify(load_case(case)) for name, case in (("rheo proxy", rheo_case), ("constant proxy 1/4", constant_case))
}
target = load_case(rheo_case).target_law(())
for name, r in reports.items():
    print(
        f"{name:>20}: lossless={r.lossless}, first-token law {[str(x) for x in r.cycle.first_token_law(3)]}, "
        f"max |continued - p_T| = {r.deviation.value} at {list(r.deviation.sequence)}, tau = {r.tau}"
    )
print(f"{'target p':>20}: {[str(x) for x in target]}")

# %% [markdown]
# The spec's numbers (docs/spec.md §6): the rheo proxy reproduces p exactly; the constant proxy gives
# (9/50, 7/10, 3/25), a first-token deviation of 1/5, and a largest deviation of 1/10 over
# the sequences of length D + 1 = 2.

# %%
rheo_first = reports["rheo proxy"].cycle.first_token_law(3)
const_first = reports["constant proxy 1/4"].cycle.first_token_law(3)
assert rheo_first == list(target)
assert const_first == [F(9, 50), F(7, 10), F(3, 25)]
assert reports["constant proxy 1/4"].deviation.value == F(1, 10)

fig, ax = plt.subplots(figsize=(6, 3.2))
x = np.arange(3)
for k, (label, law) in enumerate(
    (("target p", target), ("rheo proxy", rheo_first), ("constant proxy 1/4", const_first))
):
    ax.bar(x + (k - 1) * 0.27, [float(v) for v in law], width=0.27, label=label)
ax.set_xticks(x, ["A", "B", "C"])
ax.set_ylabel("Pr(first emitted token)")
ax.set_title("Exact first-token law of one cycle")
ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Where the mass goes: the cycle law, tree by tree
#
# The engine enumerates every joint draw and groups them into equivalence classes (distinct
# labelled pruned trees). With the constant proxy, the tree {A, sample B} appears with
# probability r(B) = 3/5 and the tree {A, fill B} with r(C) = 2/5.

# %%
for name, r in reports.items():
    print(name)
    for tree, pr in sorted(r.cycle.trees.items(), key=lambda kv: -kv[1]):
        nodes = ", ".join(f"{'ABC'[tok]} ({kind})" for _, tok, kind in tree.nodes)
        print(f"   P = {str(pr):>5}: root children {nodes}")
    print("   cycle law:", {"".join("ABC"[t] for t in o): str(p) for o, p in sorted(r.cycle.law.items())})

# %% [markdown]
# ## The counterexample Hypothesis finds on its own
#
# `rheo.checks.cases.corpus` searches random small cases (vocabulary up to 5, any K, m, depth, budget,
# temperature, sparse or not) for one where a constant proxy is lossy, and shrinks it. The
# search is derandomized, so this cell prints the same case every run. The shrunk case is
# the smallest one Hypothesis reaches; `cases/control-constant_proxy.json` is the saved copy
# that `rheo gate` replays.

# %%
from hypothesis import settings

from rheo.checks.cases.corpus import CONTROLS_BY_NAME, SEARCH_SETTINGS, corpus_entry, find_counterexample

control = CONTROLS_BY_NAME["constant_proxy"]
found = corpus_entry(control, find_counterexample(control, settings(SEARCH_SETTINGS, max_examples=300)))
for key in ("vocab_size", "policy", "K", "m", "depth", "budget", "beam", "temperature", "draft_top_k", "proxy"):
    print(f"{key:>12}: {found.get(key)}")
print(f"{'draft':>12}: {found['draft']}")
print(f"{'target':>12}: {found['target']}")
print(f"{'verdict':>12}: {found['expected']}")
shrunk = certify(load_case({k: v for k, v in found.items() if k not in ("name", "description", "expected")}))
assert not shrunk.lossless
print(
    "first-token law",
    [str(x) for x in shrunk.cycle.first_token_law(found["vocab_size"])],
    "vs target",
    [str(x) for x in load_case(found).target_law(())],
)
