"""The worked examples in docstrings are run, so they cannot drift from the code.

Every module of the package whose source holds a ``>>>`` example is found and run (a new
module's examples are covered without being listed); a module that imports torch or
transformers skips without them."""

import doctest
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"rheo": ROOT / "src" / "rheo", "rheo.reference": ROOT / "reference", "rheo.fastpath": ROOT / "fastpath"}
OPTIONAL = ("torch", "transformers")


def _modules() -> dict[str, tuple[str, ...]]:
    """module name -> the optional packages its source imports, for every module with examples."""
    out = {}
    for package, folder in FOLDERS.items():
        for path in sorted(folder.rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if ">>> " not in text:
                continue
            parts = [p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__"]
            needs = tuple(p for p in OPTIONAL if re.search(rf"^\s*(import|from) {p}\b", text, re.M))
            out[".".join([package, *parts])] = needs
    return out


MODULES = _modules()


def test_the_examples_are_found():
    assert {"rheo.reference.numbers", "rheo.reference.estimate", "rheo.progress", "rheo.checks.protocol.watch"} <= set(
        MODULES
    )
    assert "rheo.fastpath.laws" in MODULES


@pytest.mark.parametrize("name", sorted(MODULES))
def test_docstring_examples(name):
    for package in MODULES[name]:
        pytest.importorskip(package)
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
