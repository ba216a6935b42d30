"""Every import path users were shown before the checks moved into rooms keeps working
(CHANGELOG.md, 0.2.0): the old modules re-export every public name they had, the pytest
plugin is registered, the replay lines saved in counterexample files run, and every
``--impl rheo.integrations.transformers_assisted:<Class>`` string names a class.

The name lists are frozen from the modules as they were (commit 79988ba), so a re-export
dropped by a later change fails here, naming it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NEEDS_TORCH = {"rheo.checks.batched", "rheo.checks.differential", "rheo.integrations.tree_formats"}
NEEDS_TRANSFORMERS = {"rheo.integrations.transformers_assisted"}

OLD_NAMES = {
    "rheo.checks.harness": (
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
    ),
    "rheo.checks.exact_impl": (
        "CUT_WIDTH",
        "Certificate",
        "ESCAPES",
        "MAX_RUNS",
        "PROBES",
        "SEARCH_POOL",
        "TOLERANCE",
        "certify_implementation",
        "check_exact",
        "counterexample",
        "describe_case",
        "exact_case",
        "handed_law",
        "replay_exact",
        "search_strategy",
    ),
    "rheo.checks.impl_cases": (
        "FEATURED",
        "FILTERS",
        "LEVELS",
        "ROTATIONS",
        "SHAPES",
        "TEMPERATURES",
        "case_name",
        "filter_boundaries",
        "impl_matrix",
        "make_case",
        "output_law_cases",
        "read_case_dir",
    ),
    "rheo.checks.corpus": (
        "CONTROLS",
        "CONTROLS_BY_NAME",
        "Control",
        "SEARCH_SETTINGS",
        "compact_vocab",
        "corpus_entry",
        "find_counterexample",
        "lossy",
        "paper_example_entry",
        "refresh",
        "shrunk_search",
    ),
    "rheo.checks.gate": (
        "INSTALL_TORCH",
        "MATRIX_FAMILIES",
        "NOTHING_CHECKED",
        "REAL_POLICIES",
        "REAL_PROMPT",
        "REAL_SECOND",
        "REAL_TESTS_PER_POLICY",
        "REAL_TREE",
        "control_check",
        "corpus_dir",
        "exact_matrix_check",
        "fast_calibration_check",
        "fast_cycle_law_check",
        "fast_decisions_check",
        "fast_ties_check",
        "gate_checks",
        "gate_verdict",
        "impl_checks",
        "junit_xml",
        "matrix_cases",
        "matrix_instance",
        "paper_example_check",
        "real_model_check",
        "render",
        "run_checks",
        "summary",
    ),
    "rheo.checks.pytest_plugin": (
        "RheoChecker",
        "rheo_checker",
    ),
    "rheo.integrations.tree_formats": (
        "EagleTree",
        "KIND_NAMES",
        "SAMPLE",
        "SGLangTree",
        "draft_tree_to_eagle",
        "draft_tree_to_protocol",
        "draft_tree_to_sglang",
        "eagle_result_to_protocol",
        "eagle_to_draft_tree",
        "eagle_to_protocol",
        "gather_paths",
        "protocol_rows",
        "protocol_to_draft_tree",
        "protocol_to_eagle",
        "protocol_to_sglang",
        "sglang_result_to_protocol",
        "sglang_to_draft_tree",
        "sglang_to_protocol",
    ),
    "rheo.integrations.transformers_assisted": (
        "AssistedCandidateGenerator",
        "AssistedCandidateGeneratorDifferentTokenizers",
        "Built",
        "CODE_LIMIT",
        "Codec",
        "DFlashTokenCandidateGenerator",
        "DTYPE",
        "EarlyExitCandidateGenerator",
        "FLOOR",
        "Gemma4AssistantTableForCausalLM",
        "Gemma4TableForCausalLM",
        "GenerateCycle",
        "Logits",
        "MTPCandidateGenerator",
        "PROCESSORS",
        "Processors",
        "PromptLookupCandidateGenerator",
        "SelectHead",
        "SinglePositionMultiTokenCandidateGenerator",
        "SpeculativeSampling",
        "State",
        "StopAfter",
        "TRANSFORMERS_CHECKED",
        "TableAssistantOutput",
        "TableConfig",
        "TableDFlashAssistant",
        "TableDecoder",
        "TableHead",
        "TableLM",
        "TableLMOutput",
        "TableLayer",
        "TableLinearHeadLM",
        "TableNorm",
        "TablePreTrainedModel",
        "Tables",
        "UniversalSpeculativeDecodingGenerator",
        "WordTokenizer",
        "chain_length",
        "generation_kwargs",
        "identity_ids",
        "is_chain",
        "one_thread",
    ),
    "rheo.checks.batched": (
        "BATCH",
        "LARGE_BATCH",
        "LARGE_CFG",
        "LARGE_SECOND",
        "LARGE_VOCAB",
        "batched_counts",
        "check_large_vocabulary",
        "check_output_law_batched",
        "continued_counts",
        "cpu_threads",
        "device_of",
        "first_two_counts",
        "output_counts",
        "output_shard",
        "read_result_batch",
    ),
    "rheo.checks.differential": (
        "TEMPERATURES",
        "check_designed_ties",
        "check_example",
        "compare",
        "compare_batch",
        "designed_ties",
        "fast_configs",
        "fast_examples",
    ),
}


@pytest.mark.parametrize("module", sorted(OLD_NAMES))
def test_old_import_paths_keep_every_public_name(module):
    if module in NEEDS_TORCH | NEEDS_TRANSFORMERS:
        pytest.importorskip("torch")
    if module in NEEDS_TRANSFORMERS:
        pytest.importorskip("transformers")
    mod = importlib.import_module(module)
    missing = [name for name in OLD_NAMES[module] if not hasattr(mod, name)]
    assert not missing, f"{module} no longer provides {missing}"


def test_a_dropped_re_export_is_caught(monkeypatch):
    """The check above can fail: a name removed from a re-export is reported."""
    import rheo.checks.harness as harness

    monkeypatch.delattr(harness, "check_output_law")
    with pytest.raises(AssertionError, match="check_output_law"):
        test_old_import_paths_keep_every_public_name("rheo.checks.harness")


def test_the_pytest_plugin_entry_point_loads_the_fixture():
    [entry] = [e for e in importlib.metadata.entry_points(group="pytest11") if e.name == "rheo"]
    plugin = entry.load()
    assert callable(getattr(plugin, "rheo_checker", None))
    old = importlib.import_module("rheo.checks.pytest_plugin")  # `-p rheo.checks.pytest_plugin` still works
    assert old.RheoChecker is plugin.RheoChecker


def test_saved_replay_lines_name_importable_functions():
    """Counterexample files saved by earlier versions name functions by dotted path."""
    pytest.importorskip("torch")
    from rheo.checks.differential import check_example

    assert callable(check_example)


def test_every_documented_transformers_adapter_resolves():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    ta = importlib.import_module("rheo.integrations.transformers_assisted")
    texts = [p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]]
    shown = {m for t in texts for m in re.findall(r"rheo\.integrations\.transformers_assisted:(\w+)", t)}
    assert len(shown) >= 8
    assert not [c for c in sorted(shown) if not isinstance(getattr(ta, c, None), type)]
