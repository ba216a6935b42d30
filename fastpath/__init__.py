"""rheo.fastpath: RheoSampling in batched PyTorch (docs/spec.md §0-§4 and §7), any device.

It computes exactly what ``rheo.reference`` computes: decision by decision on the same
uniforms in float64 (tests/test_fastpath_differential.py), and in law (the statistical
tests). float32 is the default working dtype; path scores are always float64. Shapes and
dtypes are asserted at run time (entry points and stage handoffs, ``inputs``; no device
sync); value ranges in tests only (``rheo.testing.ranges``).

Glossary: *lead* x_1..x_m deterministic top tokens; *sample* Y drawn from the *residual*
law beyond the leads; *fill* the best-ranked residual tokens after Y; *proxy* the sample's
construction factor; *order key* (score desc, depth asc, slot path asc); *budget* R nodes
kept by pruning; *cycle* one draft-verify round.

Modules, in the order of the spec:

- ``laws``: temperature and target filters (§0), the ranked truncated draft law (§1), the
  inverse-CDF draw (§7);
- ``pool``: ``expand``, the K-slot pool of an expanded node (§1-§2);
- ``tree``: ``build_tree``, growth layer by layer and pruning to T_R (§3), ``DraftTree``;
- ``walk`` and ``verify``: the verification walk, steps 1-5 (§4), ``VerifyResult``;
- ``uniforms``: the randomness schedule (§7); ``cycle``: ``run_cycle``;
- ``variants``: the wrong-on-purpose variants, each behind one hook;
- ``inputs``: the entry checks; ``config``: ``Params``, ``PAPER_TREE``, ``FastConfig``;
- ``models``: the ``SpecModel`` interface; ``expand_dense`` and ``verify_naive``: the
  benchmark's baselines;
- ``graph``: ``CycleGraph``, the static-shape cycle (``build_tree(static=True)``,
  ``verify(static=True)``) captured as one CUDA graph (eager off CUDA).

Entry points: ``run_cycle(model, PAPER_TREE, temperature)`` or the two halves
``build_tree`` (-> ``DraftTree``, the tensors serving engines use) and ``verify``
(-> ``VerifyResult``); models implement ``SpecModel``. ``params`` must be float64 ``Params``.
"""

from .config import PAPER_TREE, FastConfig, Params, TargetFilters
from .cycle import run_cycle
from .laws import inverse_cdf, ranked_topk, target_law, tempered
from .models import SpecModel
from .pool import FILL, LEAD, PAD, SAMPLE, expand
from .tree import DraftQuery, DraftTree, build_tree
from .uniforms import Uniforms
from .verify import VerifyResult, verify

__all__ = [
    "FILL",
    "LEAD",
    "PAD",
    "SAMPLE",
    "DraftQuery",
    "DraftTree",
    "FastConfig",
    "PAPER_TREE",
    "Params",
    "SpecModel",
    "TargetFilters",
    "Uniforms",
    "VerifyResult",
    "build_tree",
    "expand",
    "inverse_cdf",
    "ranked_topk",
    "run_cycle",
    "target_law",
    "tempered",
    "verify",
]
