"""The case matrix of ``rheo gate --impl`` and ``--cases DIR``, as importable before the
checks moved into rooms (CHANGELOG.md, 0.2.0). Thin re-exports of ``rheo.checks.cases.matrix``.
"""

from __future__ import annotations

from rheo.checks.cases.matrix import (
    FEATURED,
    FILTERS,
    LEVELS,
    ROTATIONS,
    SHAPES,
    TEMPERATURES,
    case_name,
    filter_boundaries,
    impl_matrix,
    make_case,
    output_law_cases,
    read_case_dir,
)

__all__ = [
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
]
