"""Triton kernels under Triton's interpreter (``TRITON_INTERPRET=1``, the way a CPU runs them),
as the gate judges them: two gaps between the interpreter and the compiled kernel, closed.

- **Autotuned kernels.** ``@triton.autotune`` with several configs benchmarks them on the
  first call, through the active GPU driver; under the interpreter there is none ("0 active
  drivers ([]). There should only be one."). ``patch()`` makes the autotuner pick one config
  without benchmarking: the first that its own pruning keeps, or the one at index
  ``RHEO_TRITON_CONFIG`` (an integer) where set. Every config computes the same function (that
  is what autotuning assumes), so the law judged is the kernel's whichever is picked.
- **Integer load and store masks.** The compiled kernel reads an integer mask as true where
  nonzero; the interpreter refuses it ("mask has unsupported dtype"). ``patch()`` hands the
  interpreter ``mask != 0``.

``patch()`` is idempotent and changes nothing when ``TRITON_INTERPRET`` is not ``1`` (a
compiled kernel needs neither). The gate's worker calls it before loading an implementation
when ``TRITON_INTERPRET=1`` and Triton is installed; call it yourself where your own tests run
kernels under the interpreter. Tested in tests/test_triton_interpreter.py (with Triton
installed: the engines' venv, .ci/engines).
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

CONFIG_VARIABLE = "RHEO_TRITON_CONFIG"
_PATCHED: list[bool] = []


def interpreting() -> bool:
    """Triton's interpreter is asked for and Triton is installed."""
    return os.environ.get("TRITON_INTERPRET") == "1" and importlib.util.find_spec("triton") is not None


def _config_index() -> int:
    raw = os.environ.get(CONFIG_VARIABLE, "0")
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{CONFIG_VARIABLE} must be an integer (the autotune config to run), got {raw!r}") from None


def patch() -> bool:
    """Close both gaps under the interpreter (True when patched, now or before; False when
    ``TRITON_INTERPRET`` is not ``1`` or Triton is not installed)."""
    if _PATCHED:
        return True
    if not interpreting():
        return False
    import numpy as np

    tl = importlib.import_module("triton.language")  # by name: Triton is an engine's dependency, not ours
    autotuner = importlib.import_module("triton.runtime.autotuner")
    interpreter = importlib.import_module("triton.runtime.interpreter")

    prune = autotuner.Autotuner.prune_configs
    index = _config_index()

    def one_config(self: Any, kwargs: dict) -> list:
        configs = prune(self, kwargs)
        if not 0 <= index < len(configs):
            raise ValueError(
                f"{CONFIG_VARIABLE}={index}: this kernel has {len(configs)} autotune configs (0 to {len(configs) - 1})"
            )
        return [configs[index]]

    autotuner.Autotuner.prune_configs = one_config

    builder = interpreter.InterpreterBuilder
    load, store = builder.create_masked_load, builder.create_masked_store

    def boolean(mask: Any) -> Any:
        if mask.data.dtype == np.bool_:
            return mask
        return interpreter.TensorHandle(mask.data != 0, tl.int1)

    def masked_load(self: Any, ptrs: Any, mask: Any, other: Any, cache_policy: Any, is_volatile: Any) -> Any:
        return load(self, ptrs, boolean(mask), other, cache_policy, is_volatile)

    def masked_store(self: Any, ptrs: Any, value: Any, mask: Any, cache_policy: Any) -> Any:
        return store(self, ptrs, value, boolean(mask), cache_policy)

    builder.create_masked_load = masked_load
    builder.create_masked_store = masked_store
    _PATCHED.append(True)
    return True
