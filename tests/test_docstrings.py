"""The worked examples in docstrings are run, so they cannot drift from the code."""

import doctest
import importlib

import pytest

MODULES = [
    "rheo.reference",
    "rheo.reference.numbers",
    "rheo.reference.instance",
    "rheo.reference.generate",
    "rheo.reference.params",
    "rheo.reference.estimate",
    "rheo.progress",
    "rheo.checks.goodness_of_fit",
    "rheo.checks.parallel",
    "rheo.checks.harness",
]
TORCH_MODULES = [
    "rheo.fastpath.laws",
    "rheo.fastpath.cycle",
    "rheo.fastpath.config",
    "rheo.fastpath.inputs",
    "rheo.fastpath.uniforms",
]


@pytest.mark.parametrize("name", MODULES + TORCH_MODULES)
def test_docstring_examples(name):
    if name in TORCH_MODULES:
        pytest.importorskip("torch")
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
