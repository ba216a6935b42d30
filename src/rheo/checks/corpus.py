"""The negative controls and the counterexample corpus, as importable before the checks
moved into rooms (CHANGELOG.md, 0.2.0). Thin re-exports of ``rheo.checks.cases.corpus``.
"""

from __future__ import annotations

from rheo.checks.cases.corpus import (
    CONTROLS,
    CONTROLS_BY_NAME,
    SEARCH_SETTINGS,
    Control,
    compact_vocab,
    corpus_entry,
    find_counterexample,
    lossy,
    paper_example_entry,
    refresh,
    shrunk_search,
)

__all__ = [
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
]

if __name__ == "__main__":  # python -m rheo.checks.corpus [FOLDER], as before
    import sys

    refresh(sys.argv[1] if len(sys.argv) > 1 else "cases")
