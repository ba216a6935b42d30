"""Where the gate's independent pieces of work run: in this process, one after another
(``Serial``, the default), or as Ray tasks (``RayTasks``, ``rheo gate --ray [ADDRESS]``).

The pieces are the exact-matrix instances, the exact-certification cases and the
statistical shards. Each piece is a top-level function of plain arguments whose result
depends only on them (a statistical shard carries its own seed, ``shard_seed``), so the
merged verdicts are the same wherever the pieces ran. An implementation given by name
(``--impl MODULE:OBJECT``) is loaded in each Ray worker by that name
(``rheo.checks.protocol.load.implementation_of``).

>>> Serial().map(pow, [(2, 3), (3, 2)])
[8, 9]
>>> shard_seed(0, 1, 2) == shard_seed(0, 1, 2) != shard_seed(0, 1, 3)
True
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

SHARD_CYCLES = 20_000  # per-request statistical cycles per shard (the quick profile: one shard per case)
SHARD_CYCLES_BATCHED = 1_000_000  # batched statistical cycles per shard


Done = Callable[[int], None] | None  # told the index of each piece as it finishes


class Serial:
    """Every piece in this process, in order."""

    description = "serial"

    def map(self, fn: Callable[..., Any], calls: Sequence[tuple], done: Done = None) -> list[Any]:
        out = []
        for i, args in enumerate(calls):
            out.append(fn(*args))
            if done is not None:
                done(i)
        return out

    def close(self) -> None:
        pass


class RayTasks:
    """Every piece a Ray task on the cluster at ``address`` ("local" or None: a local
    instance started here). Results come back in order."""

    def __init__(self, address: str | None) -> None:
        import ray  # the "ray" extra

        self.ray = ray
        if not ray.is_initialized():
            local = address is None or address in ("", "local")
            if address is not None and not local:
                _answers(address)
            ray.init(
                address=None if local else address,
                include_dashboard=False,
                logging_level=logging.ERROR,
                log_to_driver=False,
                ignore_reinit_error=True,
                runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([os.getcwd(), *sys.path])}},
            )
            self.started = local  # a local instance started here is shut down by ``close``
        else:
            self.started = False
        self.address = ray.get_runtime_context().gcs_address  # the worker process joins the same cluster
        self.description = f"Ray ({address or 'local'}, {int(ray.cluster_resources().get('CPU', 0))} CPUs)"
        self._remote: dict[Callable[..., Any], Any] = {}

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()

    def map(self, fn: Callable[..., Any], calls: Sequence[tuple], done: Done = None) -> list[Any]:
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._remote[fn] = self.ray.remote(fn)
        refs = [remote.remote(*args) for args in calls]
        if done is not None:  # as they finish, in any order
            index = {ref: i for i, ref in enumerate(refs)}
            pending = list(refs)
            while pending:
                ready, pending = self.ray.wait(pending, num_returns=1)
                done(index[ready[0]])
        return list(self.ray.get(refs))


def _answers(address: str, seconds: float = 5.0) -> None:
    """Raise ConnectionError when nothing accepts a connection at ``address`` (host:port,
    or ray://host:port) within ``seconds``: Ray itself would retry for minutes."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto" and other forms: Ray's own resolution
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=seconds).close()
    except OSError as e:
        raise ConnectionError(f"nothing answers at {host}:{port} ({e.strerror or e})") from None


_CURRENT: Serial | RayTasks = Serial()


def current() -> Serial | RayTasks:
    return _CURRENT


def use(executor: Serial | RayTasks) -> None:
    """Run the gate's pieces with ``executor`` from now on (the CLI and the worker set it)."""
    global _CURRENT
    _CURRENT = executor


_TICK: Callable[[int], None] | None = None


@contextmanager
def ticking(fn: Callable[[int], None] | None) -> Iterator[None]:
    """While inside, ``tick(n)`` calls ``fn(n)``: a piece of work running in this process
    tells a progress meter how far it got (a piece run as a Ray task has no ticker; its
    progress is counted when it finishes, through ``map``'s ``done``)."""
    global _TICK
    saved, _TICK = _TICK, fn
    try:
        yield
    finally:
        _TICK = saved


def tick(n: int) -> None:
    """``n`` more units of the current piece are done (see ``ticking``); a no-op elsewhere."""
    if _TICK is not None:
        _TICK(n)


def shard_seed(seed: int, case: int, shard: int) -> int:
    """The seed of one statistical shard, derived from the check's seed, the case's index
    and the shard's index (numpy's SeedSequence: independent streams)."""
    return int(np.random.SeedSequence([seed, case, shard]).generate_state(1, dtype=np.uint64)[0] >> 1)


def shards(cycles: int, per_shard: int) -> list[int]:
    """``cycles`` split into shards of at most ``per_shard`` (the last one smaller)."""
    full, rest = divmod(cycles, per_shard)
    return [per_shard] * full + ([rest] if rest else [])
