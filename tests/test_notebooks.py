"""The notebooks: each reviewed ``py:percent`` source and its ``.ipynb`` hold the same cells,
and the committed ``.ipynb`` is executed (outputs present, no errors). CI also executes every
``.ipynb`` afresh (``--nbmake`` in the pytest options), so a notebook cannot rot."""

from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext")
import nbformat  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SOURCES = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def test_every_notebook_topic_is_there():
    names = {p.stem for p in SOURCES}
    assert {"01_paper_abc_example", "02_lemma1_threshold", "03_wrong_verifiers", "04_acceptance"} <= names


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_pair_holds_the_same_cells_and_is_executed(source):
    paired = source.with_suffix(".ipynb")
    assert paired.exists(), f"run: python notebooks/execute.py {source.name}"
    py, nb = jupytext.read(source), nbformat.read(paired, as_version=4)
    assert [(c.cell_type, c.source.strip()) for c in py.cells] == [(c.cell_type, c.source.strip()) for c in nb.cells], (
        f"{paired.name} is out of date with {source.name}: run python notebooks/execute.py {source.name}"
    )
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), "not executed"
    assert not any(o.get("output_type") == "error" for c in code for o in c.outputs)
    assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs), "no plot"
