"""The batched torch protocol and its checks, as importable before the checks moved into
rooms (CHANGELOG.md, 0.2.0). Thin re-exports of ``rheo.checks.statistics.batched`` (needs torch).
"""

from __future__ import annotations

from rheo.checks.statistics.batched import (
    BATCH,
    LARGE_BATCH,
    LARGE_CFG,
    LARGE_SECOND,
    LARGE_VOCAB,
    batched_counts,
    check_large_vocabulary,
    check_output_law_batched,
    continued_counts,
    cpu_threads,
    device_of,
    first_two_counts,
    output_counts,
    output_shard,
    read_result_batch,
)

__all__ = [
    "BATCH",
    "LARGE_BATCH",
    "LARGE_CFG",
    "LARGE_SECOND",
    "LARGE_VOCAB",
    "batched_counts",
    "check_large_vocabulary",
    "check_output_law_batched",
    "continued_counts",
    "cpu_threads",
    "device_of",
    "first_two_counts",
    "output_counts",
    "output_shard",
    "read_result_batch",
]
