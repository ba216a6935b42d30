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
# # Lemma 1: a constant proxy is lossless exactly when it reaches q(x_{m+1})
#
# Lemma 1 says that a proxy which does not depend on the drawn token is not enough: it must
# also satisfy proxy >= q(x_{m+1}), the draft probability of the best token after the leads.
# Below that bound, a fill can outrank the sample for some draws and not for others, so
# whether the sample survives pruning depends on which token was drawn.
#
# We sweep a constant proxy c over (0, 1] on a family of instances and compute the exact
# largest deviation max |continued - p_T| over all sequences of length D + 1 (docs/spec.md §5). The
# deviation should be 0 from c = q(x_{m+1}) up, and positive just below it.

# %%
from fractions import Fraction as F

import matplotlib.pyplot as plt

from rheo.reference import certify, make_instance

# (draft q, target p, m): each instance has a different q(x_{m+1}); K = 3, depth 1, budget m + 1
# keeps the leads and one more node, which is where the sample competes with the best fill.
FAMILY = [
    (["1/2", "3/10", "1/5"], ["1/5", "1/2", "3/10"], 1),  # the paper's {A,B,C}: bound 3/10
    (["2/5", "7/20", "1/4"], ["1/10", "3/10", "3/5"], 1),  # bound 7/20
    (["3/5", "1/4", "3/20"], ["1/3", "1/3", "1/3"], 1),  # bound 1/4
    (["9/20", "11/20", "0"], ["1/2", "1/4", "1/4"], 0),  # m = 0, bound q(x_1) = 11/20
]
GRID = [F(k, 40) for k in range(1, 41)]


def deviation(q, p, m, c):
    inst = make_instance(3, target=p, draft=q, policy="rheo", K=3, m=m, depth=1, budget=m + 1, proxy={"constant": c})
    return certify(inst).deviation.value


def bound(q, m):
    ranked = sorted((F(x) for x in q), reverse=True)
    return ranked[m]


curves = []
for q, p, m in FAMILY:
    devs = [deviation(q, p, m, c) for c in GRID]
    curves.append((q, p, m, devs))
    b = bound(q, m)
    above = [d for c, d in zip(GRID, devs) if c >= b]
    below = [d for c, d in zip(GRID, devs) if c < b]
    zero_below = [c for c, d in zip(GRID, devs) if c < b and d == 0]
    print(
        f"q={q} m={m}: bound q(x_(m+1)) = {b}; max deviation for c >= bound: {max(above)}, "
        f"for c < bound: {max(below)}; below the bound, deviation 0 only for c <= {max(zero_below, default='-')}"
    )
    assert max(above) == 0 and below[-1] > 0

# %%
fig, ax = plt.subplots(figsize=(7, 3.6))
for q, _p, m, devs in curves:
    (line,) = ax.plot([float(c) for c in GRID], [float(d) for d in devs], marker=".", label=f"q={q}, m={m}")
    ax.axvline(float(bound(q, m)), color=line.get_color(), linestyle="--", linewidth=0.8)
ax.set_xlabel("constant proxy c")
ax.set_ylabel("max |continued - p_T|")
ax.set_title("Exact deviation vs constant proxy; dashed: q(x_{m+1})")
ax.legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# At exactly c = q(x_{m+1}) the sample and the best fill tie on score. The order key breaks
# score ties by slot path, and the sample's slot m comes before every fill's, so the sample
# still ranks first whatever was drawn, and the deviation is 0 (the dashed line sits at the
# first zero of each curve).
#
# Below the bound the deviation is positive on a window, and 0 again for small c: once c is
# below the draft probability of every fill that could take its place, the sample ranks
# after the fills for *every* draw, so it is never kept and the tree is deterministic again
# (survival no longer depends on Y). A proxy below the bound is lossy exactly when it lands
# between fills, which depends on the draft law at each node, so no constant is safe in
# general; the rank bound is.
#
# The same family with the paper's proxy min(q(x_m), 1 - sum of leads) (m >= 1) or
# q(x_1) + eps (m = 0) is lossless, as Theorem 1 says:

# %%
for q, p, m, _ in curves:
    inst = make_instance(3, target=p, draft=q, policy="rheo", K=3, m=m, depth=1, budget=m + 1)
    print(f"q={q} m={m}: rheo proxy {inst.node_laws(()).proxy}, deviation {certify(inst).deviation.value}")
