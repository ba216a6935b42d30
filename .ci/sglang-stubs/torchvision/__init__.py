"""A stand-in for torchvision in .ci/engines' SGLang venv (docs/engines.md, "SGLang").

SGLang (and transformers' processors it imports) import torchvision at module level in
multimodal helpers that its speculative modules pull in on the way; PyPI's torchvision does
not import beside the CPU torch 2.13.0 wheel. Nothing judged here calls torchvision: every
submodule (``torchvision.transforms.v2.functional``, ``torchvision.io``, ...) is made on
import, and every name in it is a placeholder that raises when called, so a call would fail
loudly rather than compute."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

__version__ = "0.0+rheo.stand-in"


class _Missing:
    """A torchvision name: raises on use."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{self._name} is a stand-in (.ci/sglang-stubs): torchvision is not installed")

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Missing(f"{self._name}.{attr}")


class _Module(types.ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Missing(f"{self.__name__}.{attr}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Every ``torchvision.*`` submodule, made on import."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _Module(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


sys.meta_path.append(_Finder())


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return _Missing(f"torchvision.{name}")
