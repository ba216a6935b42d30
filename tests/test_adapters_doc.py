"""docs/adapters.md's templates run: the chain adapter, copied from the page as it stands,
is certified lossless exactly on the smoke cases it supports."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

from rheo.checks.exact.check import check_exact
from rheo.checks.gate.coverage import supported_cases
from rheo.checks.protocol.load import load_implementation

PAGE = Path(__file__).resolve().parents[1] / "docs" / "adapters.md"


def test_the_chain_adapter_on_the_page_is_lossless(tmp_path):
    block = next(b for b in re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S) if "class ChainAdapter" in b)
    (tmp_path / "chain_adapter.py").write_text(block)
    impl = load_implementation(f"{tmp_path / 'chain_adapter.py'}:ChainAdapter")
    outcome = check_exact(impl, supported_cases(impl, "exact", "smoke").cases)
    assert outcome.verdict == "pass" and outcome.detail.startswith("lossless (exact) on 8 cases"), outcome.detail


def test_the_page_is_linked_first_from_the_readme_and_the_help():
    readme = (PAGE.parents[1] / "README.md").read_text()
    assert "docs/adapters.md" in readme.split("## Quick start")[1].split("**Sampling parameters.**")[0]
    import subprocess
    import sys

    code = "from rheo.cli import main; main(['gate', '--help'])"
    helped = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert "docs/adapters.md" in helped.split("decision equality same decisions")[0]
