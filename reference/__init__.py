"""rheo.reference: the exact RheoSampling engine (docs/spec.md §0-§8).

Glossary (the paper's words): *lead* x_1..x_m deterministic top tokens; *sample* Y drawn from
the *residual* law r beyond the leads; *fill* the best-ranked residual tokens after Y;
*proxy* the sample's construction factor; *order key* (score desc, depth asc, slot path asc);
*budget* R nodes kept by pruning; *cycle law* Pr(O = o) of one draft-verify cycle.

>>> from rheo.reference import make_instance, certify
>>> inst = make_instance(3, ["1/5", "1/2", "3/10"], ["1/2", "3/10", "1/5"],
...                      policy="rheo", K=3, m=1, depth=1, budget=2)
>>> report = certify(inst)
>>> report.lossless, report.cycle.first_token_law(3)
(True, [Fraction(1, 5), Fraction(1, 2), Fraction(3, 10)])
"""

from .certify import Report, certify, continued_sequence_law, cycle_law, max_deviation, target_sequence_probability
from .choices import UniformChooser, Uniforms, enumerate_choices
from .cycle import CycleLaw, Deadline, Timeout
from .enumerate_classes import class_cycle_law, count_joint_draws
from .enumerate_naive import naive_cycle_law
from .instance import Config, Instance, NodeLaws, Table, make_instance
from .numbers import CaseError, Temperature
from .params import PAPER_TREE, Params, Proxy, TargetFilters, parse_prefix, prefix_key
from .simulate import CycleResult, simulate_cycle
from .tree import LabelledTree, Node, Tree, build_tree, order_key
from .verify import steps_at, verification_law, walk

__all__ = [
    "PAPER_TREE",
    "CaseError",
    "Config",
    "CycleLaw",
    "CycleResult",
    "Deadline",
    "Instance",
    "LabelledTree",
    "Node",
    "NodeLaws",
    "Params",
    "Proxy",
    "Report",
    "Table",
    "TargetFilters",
    "Temperature",
    "Timeout",
    "Tree",
    "UniformChooser",
    "Uniforms",
    "build_tree",
    "certify",
    "class_cycle_law",
    "continued_sequence_law",
    "count_joint_draws",
    "cycle_law",
    "enumerate_choices",
    "make_instance",
    "max_deviation",
    "naive_cycle_law",
    "order_key",
    "parse_prefix",
    "prefix_key",
    "simulate_cycle",
    "steps_at",
    "target_sequence_probability",
    "verification_law",
    "walk",
]
