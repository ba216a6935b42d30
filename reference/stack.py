"""Recursion on an explicit stack, so that a case's depth is limited by memory, not by
Python's recursion limit (about 1000 frames).

A recursive function is written as a generator: ``yield f(args)`` stands for the recursive
call ``f(args)`` and evaluates to its result; ``return value`` returns as usual.
``run_stack`` runs such a generator to its value, keeping the pending calls in a list:

>>> def depth_sum(k):
...     if k == 0:
...         return 0
...     below = yield depth_sum(k - 1)
...     return k + below
>>> run_stack(depth_sum(5000))  # far deeper than Python's recursion limit
12502500
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

from .deadline import Deadline

R = TypeVar("R")
Call = Generator[Any, Any, R]  # a recursive function written as a generator (see the module docstring)


def run_stack(call: Call[R], deadline: Deadline | None = None, what: str = "steps") -> R:
    """The value of ``call``, every nested call run in turn on an explicit stack.

    The deadline, if any, is checked at each call."""
    stack: list[Call[Any]] = [call]
    value: Any = None
    calls = 0
    while True:
        try:
            inner = stack[-1].send(value)
        except StopIteration as done:
            stack.pop()
            value = done.value
            if not stack:
                return value  # type: ignore[no-any-return]  # the outermost call's value is an R
            continue
        stack.append(inner)
        value = None
        calls += 1
        if deadline is not None:
            deadline.check(calls, what)
