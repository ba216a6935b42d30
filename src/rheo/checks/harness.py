"""The ``--impl`` protocol and its per-request checks, as they were importable before the
checks moved into rooms (CHANGELOG.md, 0.2.0). Thin re-exports: the protocol is documented
in ``rheo.checks.protocol`` (``help(rheo.checks.protocol)``), decision equality in
``rheo.checks.differential.decision_equality``, the output and cycle laws in
``rheo.checks.statistics``.
"""

from __future__ import annotations

from rheo.checks.differential.decision_equality import (
    JITTER,
    POOL_SIZE,
    PROB_TOLERANCE,
    Comparison,
    check_decisions,
    compare_decisions,
    counterexample_payload,
    decision_examples,
    fragile_tree,
    replay,
    supported_configs,
)
from rheo.checks.protocol.calls import (
    SAMPLER_LAW_TOLERANCE,
    call_build_tree,
    call_cycle,
    call_sampler_law,
    call_verify,
    impl_cycle,
)
from rheo.checks.protocol.inputs import (
    KIND_NAMES,
    KINDS,
    ExactTargets,
    case_config,
    config_dict,
    draft_logits_fn,
    float_instance,
    law_instance,
    protocol_config,
    protocol_uniforms,
    reference_tree,
    target_logits,
    target_logits_fn,
)
from rheo.checks.protocol.judged import JudgedInstance, judged_instance, sampler_law_difference
from rheo.checks.protocol.load import Implementation, ImplLoadError, implementation_of, load_implementation, shipped
from rheo.checks.protocol.outputs import SUM_TOLERANCE, BadOutput, read_tree
from rheo.checks.protocol.watch import describe, describe_instance, set_call_hook, watched
from rheo.checks.statistics.cycle_law import check_cycle_law, statistical_cases
from rheo.checks.statistics.output_law import (
    STATISTICAL_MIN_CASES,
    check_output_law,
    continued_outputs,
    law_counterexample,
    law_head,
    output_law_shard,
    per_request_counts,
    sequence_law,
)

__all__ = [
    "BadOutput",
    "Comparison",
    "ExactTargets",
    "ImplLoadError",
    "Implementation",
    "JITTER",
    "JudgedInstance",
    "KINDS",
    "KIND_NAMES",
    "POOL_SIZE",
    "PROB_TOLERANCE",
    "SAMPLER_LAW_TOLERANCE",
    "STATISTICAL_MIN_CASES",
    "SUM_TOLERANCE",
    "call_build_tree",
    "call_cycle",
    "call_sampler_law",
    "call_verify",
    "case_config",
    "check_cycle_law",
    "check_decisions",
    "check_output_law",
    "compare_decisions",
    "config_dict",
    "continued_outputs",
    "counterexample_payload",
    "decision_examples",
    "describe",
    "describe_instance",
    "draft_logits_fn",
    "float_instance",
    "fragile_tree",
    "impl_cycle",
    "implementation_of",
    "judged_instance",
    "law_counterexample",
    "law_head",
    "law_instance",
    "load_implementation",
    "output_law_shard",
    "per_request_counts",
    "protocol_config",
    "protocol_uniforms",
    "read_tree",
    "reference_tree",
    "replay",
    "sampler_law_difference",
    "sequence_law",
    "set_call_hook",
    "shipped",
    "statistical_cases",
    "supported_configs",
    "target_logits",
    "target_logits_fn",
    "watched",
]
