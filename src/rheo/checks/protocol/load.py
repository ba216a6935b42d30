"""Loading an implementation: ``--impl package.module:object`` or ``path/to/file.py:object``
(a class is constructed without arguments), and ``Implementation``, which says what the
loaded object provides (``build_tree``, ``verify``, ``cycle``, ``generate``, the batched entry
points)
and answers ``supports``. Anything that does not give an implementation raises
``ImplLoadError`` with one line saying what to give instead.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rheo.checks import parallel
from rheo.checks.protocol.watch import watched
from rheo.reference.numbers import FILTER_COMPOSITIONS
from rheo.reference.sampling import PARAMETERS

# the settings of RheoSampling's tree a design with its own rules may declare it does not take
OWN_DESIGN = ("policy", "K", "m", "beam", "budget")


class ImplLoadError(ValueError):
    """--impl names nothing usable; the message says what to give instead."""


@dataclass
class Implementation:
    """A loaded implementation and what it provides."""

    obj: Any  # the user's object: its methods are found by name
    name: str

    @property
    def builds_trees(self) -> bool:
        return callable(getattr(self.obj, "build_tree", None))

    @property
    def verifies(self) -> bool:
        return callable(getattr(self.obj, "verify", None))

    @property
    def batched(self) -> bool:
        """It has ``build_tree_batch`` or ``verify_batch`` (the batched torch protocol,
        rheo.checks.statistics.batched)."""
        return any(callable(getattr(self.obj, m, None)) for m in ("build_tree_batch", "verify_batch"))

    @property
    def per_request(self) -> bool:
        """It has a per-request entry point: ``build_tree``, ``verify`` or ``cycle``."""
        return self.builds_trees or self.verifies or self.runs_cycles

    @property
    def runs_cycles(self) -> bool:
        """It has ``cycle``: whole cycles (draft, verify, emit) with its own randomness."""
        return callable(getattr(self.obj, "cycle", None))

    @property
    def runs_generations(self) -> bool:
        """It has ``generate``: whole generations of ``n_tokens`` tokens, its state carried
        from cycle to cycle (rheo.checks.protocol.generation)."""
        return callable(getattr(self.obj, "generate", None))

    @property
    def follows_uniforms(self) -> bool:
        return not self.runs_cycles and bool(getattr(self.obj, "follows_uniforms", True))

    @property
    def implements_spec(self) -> bool:
        """It declares ``implements_spec = True``: its cycle law must equal the reference's."""
        return getattr(self.obj, "implements_spec", False) is True

    @property
    def has_sampler_law(self) -> bool:
        return callable(getattr(self.obj, "sampler_law", None))

    @property
    def sampler_law_takes_history(self) -> bool:
        """``sampler_law(logits, config, temperature, history)``: its signature takes a
        fourth positional argument (or ``*args``), given the position's history
        (docs/spec.md §9); the three-argument form is called as before."""
        fn = getattr(self.obj, "sampler_law", None)
        try:
            params = list(inspect.signature(fn).parameters.values())  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return len(positional) >= 4 or any(p.kind == p.VAR_POSITIONAL for p in params)

    def _declared(self, attr: str, allowed: tuple[str, ...], what: str, not_one: str) -> frozenset[str]:
        """The names the implementation declares in ``attr`` (none when absent), each one of
        ``allowed``; anything else is a load error that names the attribute and the choices."""
        raw = getattr(self.obj, attr, None)
        if raw is None:
            return frozenset()
        if isinstance(raw, str) or not isinstance(raw, Iterable):
            raise ImplLoadError(f"{attr} must be a set of {what} ({', '.join(allowed)}), got {raw!r}")
        names = frozenset(str(x) for x in raw)
        unknown = sorted(names - set(allowed))
        if unknown:
            raise ImplLoadError(
                f"{attr} names {', '.join(map(repr, unknown))}: {not_one}; the names are {', '.join(allowed)}"
            )
        return names

    @property
    def sampling_parameters(self) -> frozenset[str]:
        """The sampling parameters it declares it implements (``sampling_parameters``,
        docs/spec.md §9): only cases with these are drawn for it; none when absent."""
        return self._declared(
            "sampling_parameters", PARAMETERS, "parameter names", "not a sampling parameter (docs/spec.md §9)"
        )

    @property
    def own_design(self) -> frozenset[str]:
        """The settings its own design does not take (``own_design``, e.g. ``("policy", "m",
        "beam")`` for a tree with its own rules): coverage reports them as not applying instead
        of as limits; the cases still carry them (docs/adapters.md)."""
        return self._declared("own_design", OWN_DESIGN, "setting names", "not a setting a design can leave out")

    @property
    def filter_composition(self) -> str:
        """How its engine composes top-k and top-p without drafts (``filter_composition``:
        "top_k_first", docs/spec.md §0's and the default, or "joint"); the target law it is
        judged against follows it (``rheo.checks.protocol.judged``)."""
        raw = getattr(self.obj, "filter_composition", None)
        if raw is None:
            return FILTER_COMPOSITIONS[0]
        if raw not in FILTER_COMPOSITIONS:
            raise ImplLoadError(f"filter_composition must be one of {', '.join(FILTER_COMPOSITIONS)}, got {raw!r}")
        return str(raw)

    def supports(self, config: dict) -> bool:
        """``supports(config)``, True when absent; NotImplementedError counts as False."""
        fn = getattr(self.obj, "supports", None)
        if fn is None:
            return True
        try:
            return bool(watched("supports", None, fn, dict(config)))
        except NotImplementedError:
            return False

    def provides(self) -> str:
        what = self._provides_cycles()
        if self.runs_generations:
            return f"{what} and whole generations" if what else "whole generations"
        return what

    def _provides_cycles(self) -> str:
        if self.runs_cycles:
            return "whole cycles"
        parts = (("tree builder", self.builds_trees), ("verifier", self.verifies))
        if not (self.builds_trees or self.verifies):
            parts = (
                ("batched tree builder", callable(getattr(self.obj, "build_tree_batch", None))),
                ("batched verifier", callable(getattr(self.obj, "verify_batch", None))),
            )
        return " and ".join(p for p, ok in parts if ok)


def message_of(e: BaseException) -> str:
    return " ".join(str(e).split()) or "(no message)"


def _import_module(spec: str, name: str):
    try:
        return importlib.import_module(name)
    except SyntaxError as e:
        raise ImplLoadError(f"--impl {spec}: {e.filename}:{e.lineno}: syntax error: {e.msg}") from None
    except ImportError as e:
        raise ImplLoadError(
            f"--impl: cannot import module {name!r} ({message_of(e)}); run rheo from the folder that holds "
            "it, give its file (path/to/file.py:OBJECT), or install its package"
        ) from None
    except Exception as e:  # the module itself raised while it was imported
        raise ImplLoadError(f"--impl {spec}: importing {name} raised {type(e).__name__}: {message_of(e)}") from None


def _import_file(spec: str, file: str):
    """Import ``file`` from any directory: a file inside a package (folders with
    ``__init__.py``) by its dotted name from the package root (so its absolute imports of
    siblings work), a loose file by path with its folder on sys.path. The current directory
    is importable too (as with ``python -m``), so an adapter file can import the project it
    is run from."""
    path = Path(file).resolve()
    if not path.is_file():
        raise ImplLoadError(f"--impl {spec}: no such file {file}")
    parts, root = [path.stem], path.parent
    while (root / "__init__.py").is_file():
        parts.insert(0, root.name)
        root = root.parent
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    name = ".".join(parts)
    loaded = sys.modules.get(name)
    if loaded is not None:
        where = getattr(loaded, "__file__", None)
        if where and Path(where).resolve() == path:
            return loaded
        if len(parts) > 1:
            raise ImplLoadError(
                f"--impl {spec}: a different module {name!r} is already imported (from {where}); "
                "give the implementation as MODULE:OBJECT instead"
            )
        name = f"_rheo_impl_{path.stem}"  # a loose file named like a loaded module: load it aside
    if len(parts) > 1:
        return _import_module(spec, name)
    module_spec = importlib.util.spec_from_file_location(name, path)
    assert module_spec is not None and module_spec.loader is not None  # a .py file that exists
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


_LOADED: dict[str, Implementation] = {}


def implementation_of(ref: Implementation | str) -> Implementation:
    """``ref`` itself, or the implementation named ``ref`` loaded once per process (a piece
    of work run elsewhere, e.g. a Ray task, gets the name: rheo.checks.parallel)."""
    if isinstance(ref, Implementation):
        return ref
    impl = _LOADED.get(ref)
    if impl is None:
        impl = _LOADED[ref] = load_implementation(ref)
    return impl


def shipped(impl: Implementation) -> Implementation | str:
    """What a piece of work receives: the object when it runs here, its name elsewhere."""
    return impl if isinstance(parallel.current(), parallel.Serial) else impl.name


def load_implementation(spec: str) -> Implementation:
    """``package.module:object`` (the current directory is importable) or
    ``path/to/file.py:object`` (from any directory); a class is instantiated without
    arguments. Raises ImplLoadError (one line) for anything that does not give an
    implementation: a missing module or attribute, a syntax error, an exception while the
    module is imported or the object constructed."""
    if ":" not in spec:
        raise ImplLoadError(
            f"--impl: expected MODULE:OBJECT (e.g. examples.loop_impl:LoopImplementation), got {spec!r}"
        )
    mod_name, attr = spec.rsplit(":", 1)
    if mod_name.endswith(".py"):
        try:
            module = _import_file(spec, mod_name)
        except ImplLoadError:
            raise
        except SyntaxError as e:
            raise ImplLoadError(f"--impl {spec}: {e.filename}:{e.lineno}: syntax error: {e.msg}") from None
        except Exception as e:
            raise ImplLoadError(
                f"--impl {spec}: importing {mod_name} raised {type(e).__name__}: {message_of(e)}"
            ) from None
    else:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        module = _import_module(spec, mod_name)
    obj = getattr(module, attr, None)
    if obj is None:
        raise ImplLoadError(f"--impl: module {mod_name!r} has no attribute {attr!r}")
    if isinstance(obj, type):
        try:
            obj = obj()
        except Exception as e:
            raise ImplLoadError(
                f"--impl {spec}: constructing {attr} raised {type(e).__name__}: {message_of(e)}"
            ) from None
    impl = Implementation(obj, spec)
    if not (impl.per_request or impl.batched or impl.runs_generations):
        raise ImplLoadError(
            f"--impl: {spec} has none of build_tree, verify, cycle, generate, build_tree_batch, verify_batch (see "
            'docs/gate.md, "Checking another implementation", for the protocol)'
        )
    try:
        _ = impl.sampling_parameters, impl.own_design, impl.filter_composition  # checked once, here
    except ImplLoadError as e:
        raise ImplLoadError(f"--impl {spec}: {e}") from None
    return impl
