"""An implementation in a supervised worker process (``rheo gate --impl``).

The gate's own process never imports user code. ``session`` starts a worker (a fresh
interpreter, ``multiprocessing`` spawn), which loads the implementation and runs the job's
``runner`` (a ``module:function`` name, loaded in the worker: the gate's jobs are in
``rheo.checks.gate.supervised``), which sends back only results. Before and after every
call into the implementation the worker reports it (``watch.set_call_hook``, in shared
memory, a fraction of a microsecond per call), so the parent knows which call, on which
case, is running. Whatever the implementation does, the parent reports it as a finding on
the check that was running, in one line:

- it exits (``sys.exit``, ``os._exit``) or is killed (a segfault, the memory limit):
  *implementation exited with status 0 during verify on case V=3, policy rheo, ...*;
- a call runs longer than ``call_timeout`` (``--call-timeout``), or the whole run longer
  than ``timeout`` (``--timeout``): the worker is killed;
- it prints: its stdout and stderr go to files, never to the gate's stdout (so ``--json``
  stays one JSON object); their last lines are shown, trimmed, with a finding.

Memory is limited with ``resource.RLIMIT_AS`` (``--memory-limit``, MiB) where the platform
has it. An implementation that cannot be loaded (an import, syntax or constructor error, or
an exit while loading) raises ``LoadFailed``: bad input, exit 2.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rheo.checks import parallel
from rheo.checks.outcome import CheckResult, Progress
from rheo.checks.protocol import triton_interpreter
from rheo.checks.protocol.load import ImplLoadError, load_implementation
from rheo.checks.protocol.watch import set_call_hook

DEFAULT_CALL_TIMEOUT = 60.0  # seconds for one call into the implementation
POLL = 0.05  # seconds between the parent's looks at the worker
TAIL = 300  # characters of the worker's output shown with a finding


class LoadFailed(Exception):
    """The implementation could not be loaded; the message is one line (exit 2)."""


class BadReplay(Exception):
    """The --replay file is not one this implementation's counterexamples can be rerun from."""


class NothingMatched(Exception):
    """--only matched no check; the message lists the checks (exit 2)."""


@dataclass(frozen=True)
class Limits:
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    timeout: float | None = None  # the whole run
    memory_mb: int | None = None
    threads: int | None = 1  # torch / OpenMP / MKL threads in the worker (None: the libraries' own default)


def escape(text: str) -> str:
    """Control characters escaped, so that nothing the implementation printed drives the terminal."""
    return "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in text)


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 4 * TAIL))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    text = " | ".join(line.strip() for line in text.strip().splitlines() if line.strip())
    return escape(text if len(text) <= TAIL else "..." + text[-TAIL:])


# ---- the worker's side ----


def shared_watch(ctx: Any) -> tuple:
    """The shared memory a worker writes its call in flight to: its start time (0: none),
    the method and the case."""
    return ctx.RawValue("d", 0.0), ctx.RawArray("c", 32), ctx.RawArray("c", 512)


def call_hook(watch: tuple) -> Callable[[str, str, str], None]:
    """The worker's ``harness.set_call_hook`` hook: it writes the call in flight to
    ``watch`` (``shared_watch``). A pipe message per call would double the statistical
    checks' time; these writes cost well under a microsecond (``rheo bench gate``)."""
    started, method_buf, case_buf = watch
    last = ["", ""]

    def hook(event: str, method: str, case: str) -> None:
        if event == "call":
            if method != last[0]:
                method_buf.value, last[0] = method.encode()[:31], method
            if case != last[1]:
                case_buf.value, last[1] = case.encode()[:511], case
            started.value = time.monotonic()
        else:
            started.value = 0.0

    return hook


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def limit_threads(threads: int | None) -> None:
    """Run the implementation's numeric libraries on ``threads`` threads: set before it is
    loaded (the variables OpenMP, MKL and OpenBLAS read when they start, where the user has
    not set them) and torch's own count after. One thread is the default: the cycles of a
    statistical check are many calls on tiny tensors, where a thread pool only adds a wake-up
    per op, and on a loaded machine a wait for a core (rheo bench gate, "threads", measures it)."""
    if threads is None:
        return
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, str(threads))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)


def _child(
    conn: Any, job: dict, out_path: str, err_path: str, memory_mb: int | None, watch: tuple, threads: int | None = 1
) -> None:
    for fd, path in ((1, out_path), (2, err_path)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    if memory_mb:
        try:
            import resource

            limit = memory_mb * 2**20
            resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
        except (ImportError, ValueError, OSError):
            pass
    os.chdir(job["cwd"])
    if job.get("ray"):  # the pieces of work go to the gate's Ray cluster (rheo gate --ray)
        parallel.use(parallel.RayTasks(job["ray"]))

    hook = call_hook(watch)
    limit_threads(threads)
    try:
        triton_interpreter.patch()  # TRITON_INTERPRET=1: autotuned kernels and integer masks run
    except ValueError as e:  # RHEO_TRITON_CONFIG out of range or not a number
        conn.send(("load_error", str(e)))
        return
    try:
        impl = load_implementation(job["spec"])
    except ImplLoadError as e:
        conn.send(("load_error", str(e)))
        return
    limit_threads(threads)  # torch, if loading the implementation imported it
    conn.send(("loaded", impl.provides()))
    set_call_hook(hook)
    module, _, name = job["runner"].partition(":")
    runner = getattr(importlib.import_module(module), name)
    try:
        runner(conn, impl, job)
    except Exception as e:  # a bug of rheo's own: reported with its traceback, as a failed check
        conn.send(("error", f"{type(e).__name__}: {e}", traceback.format_exc()))
        return
    conn.send(("done",))


# ---- the parent's side ----


@dataclass
class _Session:
    names: list[str] | None = None
    provides: str = ""
    current: int | None = None
    finding: str | None = None  # why the worker stopped early
    replay: tuple | None = None


def _exit_words(code: int | None) -> str:
    if code is None:
        return "stopped"
    if code < 0:
        try:
            return f"was killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def session(job: dict, limits: Limits, deadline: float | None, results: dict, progress: Progress | None) -> _Session:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    folder = tempfile.mkdtemp(prefix="rheo-worker-")
    out_path, err_path = os.path.join(folder, "stdout"), os.path.join(folder, "stderr")
    # the call in flight: its start (time.monotonic, 0 = none), method and case, written by the worker
    watch = shared_watch(ctx)
    proc = ctx.Process(
        target=_child, args=(child, job, out_path, err_path, limits.memory_mb, watch, limits.threads), daemon=True
    )
    proc.start()
    child.close()
    s = _Session()

    def stop(why: str) -> _Session:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        output = "; ".join(f"its {n}: {t}" for n, t in (("stdout", _tail(out_path)), ("stderr", _tail(err_path))) if t)
        s.finding = why + (f" ({output})" if output else "")
        return s

    def where() -> str:
        if watch[0].value:  # a call in flight (a read racing its return says "between calls": harmless)
            method, case = (escape(b.value.decode("utf-8", "replace")) for b in watch[1:])
            return f"during {method}" + (f" on case {case}" if case else "")
        if s.names is None:
            return "while it was being loaded"
        return "between calls"

    while True:
        now = time.monotonic()
        started = watch[0].value  # read once: the worker may set it to 0 between two reads
        if started and now - started > limits.call_timeout:
            return stop(f"implementation did not return within {limits.call_timeout:g} s {where()} (--call-timeout)")
        if deadline is not None and now > deadline:
            return stop(f"the whole run reached its --timeout {where()}")
        try:
            ready = parent.poll(POLL)
            msg = parent.recv() if ready else None
        except (EOFError, OSError):
            proc.join(5)
            return stop(f"implementation {_exit_words(proc.exitcode)} {where()}")
        if msg is None:
            if not proc.is_alive():
                proc.join(5)
                return stop(f"implementation {_exit_words(proc.exitcode)} {where()}")
            continue
        kind = msg[0]
        if kind == "loaded":
            s.provides = msg[1]
        elif kind == "load_error":
            proc.join(5)
            raise LoadFailed(msg[1])
        elif kind == "nothing_matched":
            proc.join(5)
            raise NothingMatched("; ".join(msg[1]))
        elif kind == "checks":
            s.names = msg[1]
        elif kind == "progress":  # a line from inside a check (rheo.progress.Meter)
            if progress:
                progress(escape(msg[1]))
        elif kind == "start":
            s.current = msg[1]
            if progress and s.names:
                progress(f"[{msg[1] + 1}/{len(s.names)}] {s.names[msg[1]]} ...")
        elif kind == "result":
            results[msg[1]] = CheckResult(**msg[2])
            if progress:
                progress(f"      {msg[2]['verdict']} ({msg[2]['seconds']:.1f} s)")
            s.current = None
        elif kind == "replay":
            s.replay = msg[1:]
        elif kind == "bad_replay":
            proc.join(5)
            raise BadReplay(msg[1])
        elif kind == "error":
            return stop(f"the check crashed: {msg[1]}")
        elif kind == "done":
            proc.join(5)
            return s
