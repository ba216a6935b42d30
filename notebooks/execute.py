"""Rebuild the executed notebooks from their reviewed sources.

    python notebooks/execute.py            # every notebooks/NN_*.py -> NN_*.ipynb, executed

The ``py:percent`` files are the sources (jupytext pairs them with the ``.ipynb``); this
runs each one top to bottom in a fresh kernel (nbclient) and saves the outputs, so the
committed ``.ipynb`` shows what the current code prints. CI executes the ``.ipynb`` again
(``pytest --nbmake``) and ``tests/test_notebooks.py`` checks that each pair holds the
same cells.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent


def build(source: Path) -> Path:
    nb = jupytext.read(source)
    nb.metadata["jupytext"] = {"formats": "ipynb,py:percent"}
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    target = source.with_suffix(".ipynb")
    nbformat.write(nb, target)
    return target


if __name__ == "__main__":
    names = sys.argv[1:] or sorted(str(p) for p in HERE.glob("[0-9][0-9]_*.py"))
    for name in names:
        print(f"executed {build(Path(name))}")
