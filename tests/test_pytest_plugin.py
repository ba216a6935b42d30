"""The ``rheo_checker`` fixture as docs/gate.md shows it: ``examples/test_with_rheo_checker.py``
is a user's test file, run here by pytest in a subprocess from the repository root (the
fixture comes from the installed plugin's entry point, nothing is imported for it)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = "examples/test_with_rheo_checker.py"


def _pytest(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", EXAMPLE, "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_the_documented_is_caught_test_passes():
    """The planted bug is caught by exact certification through the fixture (the lossless
    half is the same run as tests/test_harness.py's loop-implementation test)."""
    r = _pytest("-k", "planted_bug")
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr


@pytest.mark.extended
def test_the_whole_documented_example_passes():
    r = _pytest()
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout + r.stderr
