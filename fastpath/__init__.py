"""rheo.fastpath: RheoSampling in batched PyTorch (SPEC sections 1-4 and 7), any device.

It computes exactly what ``rheo.reference`` computes: decision by decision on the same
uniforms in float64 (tests/test_fastpath_differential.py), and in law (the statistical
tests). float32 is the default working dtype; path scores are always float64.

Glossary: *lead* x_1..x_m deterministic top tokens; *sample* Y drawn from the *residual*
law beyond the leads; *fill* the best-ranked residual tokens after Y; *proxy* the sample's
construction factor; *order key* (score desc, depth asc, slot path asc); *budget* R nodes
kept by pruning; *cycle* one draft-verify round.

Entry points: ``run_cycle(model, FastConfig(...), temperature)`` or the two halves
``build_tree`` (-> ``DraftTree``, the tensors serving engines use) and ``verify``
(-> ``VerifyResult``); models implement ``SpecModel``.
"""
from .config import PAPER_TREE, FastConfig, Params
from .cycle import run_cycle
from .laws import TargetFilters, inverse_cdf, ranked_topk, target_law, tempered
from .models import SpecModel
from .tree import FILL, LEAD, PAD, SAMPLE, DraftQuery, DraftTree, build_tree, expand
from .uniforms import Uniforms
from .verify import VerifyResult, verify

__all__ = [
    "FILL", "LEAD", "PAD", "SAMPLE", "DraftQuery", "DraftTree", "FastConfig", "PAPER_TREE", "Params",
    "SpecModel", "TargetFilters", "Uniforms", "VerifyResult", "build_tree", "expand",
    "inverse_cdf", "ranked_topk", "run_cycle", "target_law", "tempered",
    "verify",
]
