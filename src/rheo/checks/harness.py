"""Checking someone else's implementation: the ``rheo gate --impl`` protocol.

An implementation is any object (or a class constructible without arguments) with one or
both of these methods. Arrays are numpy (or anything ``numpy.asarray`` reads); ``V`` is
the vocabulary size, ``R`` the number of kept draft nodes, ``D`` the depth, ``K`` the slots.

``build_tree(draft_logits, config, temperature, u_draw) -> tree``   (docs/spec.md §1-§3)
    draft_logits: a function ``paths -> [len(paths), V]`` float64 array, the untruncated,
                  untempered draft logits (-inf = probability 0) at token paths from the
                  cycle root (the root is ``()``); call it with the nodes you expand
    config:       dict with the docs/spec.md §8 names: vocab_size, policy ("rheo" | "topk"), K, m,
                  depth, budget, beam, draft_top_k (None = no truncation), epsilon,
                  target_top_k, target_top_p, target_min_p (None = off), and temperature
                  (the same float as the argument; so that ``supports`` sees it too)
    temperature:  float >= 0 (0 = greedy)
    u_draw:       [1 + beam (D-1)] uniforms, u_draw[e] for the e-th expansion (docs/spec.md §7)
    tree:         dict (or object with these attributes), one entry per kept node:
                  tokens [R], parents [R] (-1 = the root, else an index into these arrays),
                  kinds [R] (0 lead, 1 sample, 2 fill), slots [R] (0..K-1, the slot in the
                  parent's pool), sample_probs [R, V] (the residual law r the sample was
                  drawn from, on sample rows; ignored elsewhere). Node order is free.

``verify(tree, target_logits, config, temperature, uniforms) -> result``   (docs/spec.md §0, §4)
    tree:          as above (the harness passes the reference's tree, nodes in order-key order)
    target_logits: [R+1, V] untempered, unfiltered target logits; row 0 the root, row i+1
                   node i (apply temperature and the config's filters yourself)
    uniforms:      dict: u_sample [D+1], u_det [D+1, K], u_final [D+1] (docs/spec.md §7)
    result:        dict: tokens (emitted: accepted tokens then the bonus/correction token)
                   and accepted (the accepted node indices, root to leaf)

Or, for an implementation that runs whole cycles with its own randomness (an engine's
``generate`` loop, where drafting and verification cannot be called apart):

``cycle(draft_logits, target_logits, config, temperature) -> tokens``
    draft_logits, target_logits: functions ``paths -> [len(paths), V]`` float64 arrays, the
                  untruncated, untempered logits at token paths from the cycle root
    tokens:       the emitted tokens (accepted drafts then the bonus/correction token),
                  1 to D+1 integer ids, as a sequence or a dict with "tokens"
    An implementation with ``cycle`` is judged on its cycles only: exact certification
    (its draws followed) and the output law; ``build_tree`` and ``verify`` are not called.

Or, on tensors, batches of requests at once: ``build_tree_batch`` / ``verify_batch``, the
batched torch protocol (rheo.checks.batched, where it is documented).

Optional:
- ``supports(config) -> bool``: configurations it does not implement (config as above,
  temperature included) are not drawn, and counted. ``build_tree`` or ``verify`` raising
  ``NotImplementedError`` also counts the case as unsupported, not as a failure.
- ``follows_uniforms = False``: it draws its own randomness, so decision equality is not
  run (exact certification follows its draws, ``rheo.checks.exact_impl``; the output law
  samples it).
- ``exact_tolerance``: the float tolerance of exact certification (default 1e-9 when every
  random value is compared in float64, 1e-6 with a float32 operand).
- ``implements_spec = True``: it claims to implement docs/spec.md's algorithm itself, so
  its cycle law must equal the reference's; only then is the cycle-law check run (it is not
  listed otherwise: a lossless implementation of another algorithm has another cycle law).
- ``sampler_law(logits, config, temperature) -> probs``: logits [V] (a target row as given
  to ``verify``), probs [V]: the law its engine samples from when speculation is off (its
  own temperature and filters, e.g. ties kept at the k-th place). The output law is then
  judged against this law (``judged_instance``) instead of docs/spec.md §0's, and the gate
  reports where the two differ, without failing for it. probs must be finite,
  non-negative, of length V and sum to 1 within 1e-6.

Checks (``check_decisions``, ``check_output_law``, ``check_cycle_law``):
- decision equality (shows sameness, not losslessness): Hypothesis draws small cases from
  configurations the implementation supports (``supports`` is asked first) and uniforms;
  the implementation's tree (every node's token path, kind, slot path, and the sample's
  residual law within 1e-9) and its verifier's output and accepted path (on the reference's
  tree) must equal the reference's. Decisions within 1e-9 of a threshold are set aside and
  counted (``rheo.checks.differential``). A difference is shrunk to a minimal counterexample:
  "not the specified algorithm" (it may still be lossless). Fewer compared cases than the
  stated minimum fail ("nothing is proven").
- output law (losslessness, docs/spec.md §5): the implementation's cycles (fresh uniforms
  each cycle; the reference fills in a part it does not provide), each output continued by
  exact sampling from the judged target law to length D+1, against p_T(Seq) on V^(D+1)
  (Pearson chi-square on counts, alpha split over the cases, detectable TV per case:
  "lossless within detectable TV d"). Runs on every implementation.
- cycle law (``implements_spec = True`` only): the empirical cycle law against the
  reference's exact law ("same cycle law as the reference within detectable TV d").
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import json
import math
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

from rheo.casefile import load_case
from rheo.checks import parallel
from rheo.checks.corpus import shrunk_search
from rheo.checks.decisions import MARGIN, RequestCheck, reference_cycle
from rheo.checks.goodness_of_fit import GofResult, gof
from rheo.checks.impl_cases import impl_matrix, output_law_cases
from rheo.checks.outcome import Outcome
from rheo.checks.strategies import cases, cases_from_configs, config_pool
from rheo.reference import UniformChooser, Uniforms, cycle_law, walk
from rheo.reference.generate import hashed_case
from rheo.reference.instance import Instance, Table
from rheo.reference.params import Params, Prefix
from rheo.reference.tree import LabelledTree
from rheo.reference.tree import build_tree as reference_build_tree

KINDS = {"lead": 0, "sample": 1, "fill": 2}
KIND_NAMES = {v: k for k, v in KINDS.items()}
PROB_TOLERANCE = 1e-9
SAMPLER_LAW_TOLERANCE = 1e-6  # sampler_law must sum to 1 within this
STATISTICAL_MIN_CASES = 1  # a statistical check with fewer supported cases proves nothing


# ---- calls into the implementation, watched ----

_CALL_HOOK: Callable[[str, str, str], None] | None = None  # set by rheo.checks.worker in its process


def set_call_hook(hook: Callable[[str, str, str], None] | None) -> None:
    """``hook(event, method, case)`` is called with event "call" before and "return" after
    every call into the implementation (the supervised worker reports them to the gate,
    which enforces --call-timeout and names the call and the case in a finding)."""
    global _CALL_HOOK
    _CALL_HOOK = hook


def describe(vocab_size: int, c: Params) -> str:
    """A case's configuration in one line, every key that is set: the case named in a
    finding (``describe_instance``) and in an exact certificate (``exact_impl``).

    >>> describe(3, Params.from_case({"policy": "rheo", "K": 3, "m": 1, "depth": 1, "budget": 2}))
    'V=3, policy rheo, m=1, K=3, depth 1, budget 2, T=1'
    """
    parts = [f"V={vocab_size}", f"policy {c.policy}"] + ([f"m={c.m}"] if c.policy == "rheo" else [])
    parts += [f"K={c.K}", f"depth {c.depth}", f"budget {c.budget}"]
    if c.beam not in (None, c.K):
        parts.append(f"beam {c.beam}")
    parts.append(f"T={c.temperature}")
    f = c.target_filters
    for key, value in (
        ("draft_top_k", c.draft_top_k),
        ("target_top_k", f.top_k),
        ("target_top_p", f.top_p),
        ("target_min_p", f.min_p),
    ):
        if value is not None:
            parts.append(f"{key} {value}")
    return ", ".join(parts)


def describe_instance(inst: Instance) -> str:
    """The case a call is made on, in one line (``describe``, cached on the instance)."""
    desc = inst.__dict__.get("_rheo_description")
    if desc is None:
        desc = inst.__dict__["_rheo_description"] = describe(inst.n, inst.config)
    return desc


def _watched(method: str, inst: Instance | None, fn: Callable[..., Any], *args: Any) -> Any:
    hook = _CALL_HOOK
    if hook is None:
        return fn(*args)
    hook("call", method, describe_instance(inst) if inst is not None else "")
    try:
        out = fn(*args)
    except Exception:
        hook("return", method, "")
        raise
    # not on SystemExit: the worker is about to end inside this call, and the gate says so
    hook("return", method, "")
    return out


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
        rheo.checks.batched)."""
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
    def follows_uniforms(self) -> bool:
        return not self.runs_cycles and bool(getattr(self.obj, "follows_uniforms", True))

    @property
    def implements_spec(self) -> bool:
        """It declares ``implements_spec = True``: its cycle law must equal the reference's."""
        return getattr(self.obj, "implements_spec", False) is True

    @property
    def has_sampler_law(self) -> bool:
        return callable(getattr(self.obj, "sampler_law", None))

    def supports(self, config: dict) -> bool:
        """``supports(config)``, True when absent; NotImplementedError counts as False."""
        fn = getattr(self.obj, "supports", None)
        if fn is None:
            return True
        try:
            return bool(_watched("supports", None, fn, dict(config)))
        except NotImplementedError:
            return False

    def provides(self) -> str:
        if self.runs_cycles:
            return "whole cycles"
        parts = (("tree builder", self.builds_trees), ("verifier", self.verifies))
        if not (self.builds_trees or self.verifies):
            parts = (
                ("batched tree builder", callable(getattr(self.obj, "build_tree_batch", None))),
                ("batched verifier", callable(getattr(self.obj, "verify_batch", None))),
            )
        return " and ".join(p for p, ok in parts if ok)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or "(no message)"


def _import_module(spec: str, name: str):
    try:
        return importlib.import_module(name)
    except SyntaxError as e:
        raise ImplLoadError(f"--impl {spec}: {e.filename}:{e.lineno}: syntax error: {e.msg}") from None
    except ImportError as e:
        raise ImplLoadError(
            f"--impl: cannot import module {name!r} ({_one_line(e)}); run rheo from the folder that holds "
            "it, give its file (path/to/file.py:OBJECT), or install its package"
        ) from None
    except Exception as e:  # the module itself raised while it was imported
        raise ImplLoadError(f"--impl {spec}: importing {name} raised {type(e).__name__}: {_one_line(e)}") from None


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
                f"--impl {spec}: importing {mod_name} raised {type(e).__name__}: {_one_line(e)}"
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
                f"--impl {spec}: constructing {attr} raised {type(e).__name__}: {_one_line(e)}"
            ) from None
    impl = Implementation(obj, spec)
    if not (impl.per_request or impl.batched):
        raise ImplLoadError(
            f"--impl: {spec} has none of build_tree, verify, cycle, build_tree_batch, verify_batch (see docs/gate.md, "
            '"Checking another implementation", for the protocol)'
        )
    return impl


# ---- what the implementation is given ----


def protocol_config(inst: Instance) -> dict:
    """The config dict the implementation receives: ``Params.to_protocol`` plus
    "temperature" (a float, the same as the ``temperature`` argument)."""
    return config_dict(inst.config, inst.n)


def config_dict(params: Params, vocab_size: int) -> dict:
    return {**params.to_protocol(vocab_size), "temperature": params.temperature.value}


def case_config(case: dict) -> dict:
    """The config dict of a case dict (with or without tables), as the implementation gets it."""
    params = Params.from_case({k: case[k] for k in Params.CASE_KEYS if k in case})
    return config_dict(params, case["vocab_size"])


def _logits(law) -> np.ndarray:
    p = np.array([float(x) for x in law], dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.log(p)


def draft_logits_fn(inst: Instance):
    """paths -> [len(paths), V] draft logits (the table's law, untruncated)."""

    def draft_logits(paths):
        return np.stack([_logits(inst.draft(tuple(int(t) for t in p))) for p in paths])

    return draft_logits


def target_logits(inst: Instance, paths: list) -> np.ndarray:
    """[len(paths)+1, V]: the root, then each node's token path."""
    return np.stack([_logits(inst.target(()))] + [_logits(inst.target(tuple(p))) for p in paths])


def target_logits_fn(inst: Instance):
    """paths -> [len(paths), V] target logits (the table's law, untempered, unfiltered)."""

    def target_logits(paths):
        return np.stack([_logits(inst.target(tuple(int(t) for t in p))) for p in paths])

    return target_logits


def protocol_uniforms(u: Uniforms) -> dict:
    return {
        "u_sample": np.array(u.u_sample, dtype=np.float64),
        "u_det": np.array(u.u_det, dtype=np.float64),
        "u_final": np.array(u.u_final, dtype=np.float64),
    }


def reference_tree(inst: Instance, tree) -> dict:
    """The reference's pruned tree in the protocol's format (order-key order), plus
    ``paths`` (token paths) and ``slot_paths``."""
    pruned = tree.pruned
    index = {n.slot_path: i for i, n in enumerate(pruned)}
    probs = np.zeros((len(pruned), inst.n))
    for i, n in enumerate(pruned):
        if n.kind == "sample":
            residual = inst.node_laws(n.prefix[:-1]).residual
            assert residual is not None  # a sample node's parent has a residual law
            probs[i] = [float(x) for x in residual]
    return {
        "tokens": np.array([n.token for n in pruned], dtype=np.int64),
        "parents": np.array([index.get(n.slot_path[:-1], -1) for n in pruned], dtype=np.int64),
        "kinds": np.array([KINDS[n.kind] for n in pruned], dtype=np.int64),
        "slots": np.array([n.slot_path[-1] for n in pruned], dtype=np.int64),
        "sample_probs": probs,
        "paths": [n.prefix for n in pruned],
        "slot_paths": [n.slot_path for n in pruned],
    }


class BadOutput(ValueError):
    """The implementation returned something outside the protocol."""


def _field(obj, name):
    value = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
    if value is None:
        raise BadOutput(f"missing {name!r}")
    return value


SUM_TOLERANCE = 1e-6  # a sample's residual law (sample_probs row) must sum to 1 within this


def _short(value: object, width: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _int_column(value: object, name: str) -> list[int]:
    """A 1-D array of integers (Python ints or a NumPy / torch integer dtype): floats,
    strings and booleans are refused, never converted. A [1, n] array is read as [n]."""
    a = np.asarray(value)
    if a.ndim == 2 and a.shape[0] == 1:
        a = a[0]
    if a.ndim != 1:
        raise BadOutput(f"{name} has shape {a.shape}, expected a 1-D array")
    if a.size and not (np.issubdtype(a.dtype, np.integer) and a.dtype != np.bool_):
        raise BadOutput(f"{name} must hold integers; got {a.dtype} values such as {_short(a.reshape(-1)[0])}")
    return [int(x) for x in a]


def read_tree(tree, inst: Instance) -> dict:
    """Check an implementation's tree (integer columns of one length, parents forming a
    tree, kinds and tokens in range, each sample's residual law finite, non-negative and
    summing to 1 within ``SUM_TOLERANCE``) and add token paths and slot paths."""
    cols = {name: _int_column(_field(tree, name), name) for name in ("tokens", "parents", "kinds", "slots")}
    R = len(cols["tokens"])
    if any(len(v) != R for v in cols.values()):
        raise BadOutput(f"tokens, parents, kinds and slots must have one length; got {[len(v) for v in cols.values()]}")
    raw_probs = np.asarray(_field(tree, "sample_probs"))
    if raw_probs.size and not np.issubdtype(raw_probs.dtype, np.floating):
        raise BadOutput(f"sample_probs must hold floats; got {raw_probs.dtype}")
    probs = raw_probs.astype(np.float64)
    if probs.shape != (R, inst.n):
        raise BadOutput(f"sample_probs has shape {probs.shape}, expected [R, V] = [{R}, {inst.n}]")
    for i in range(R):
        if not (-1 <= cols["parents"][i] < R) or cols["parents"][i] == i:
            raise BadOutput(f"node {i}: parent {cols['parents'][i]} is not -1 or another node's index")
        if cols["kinds"][i] not in KIND_NAMES:
            raise BadOutput(f"node {i}: kind {cols['kinds'][i]} is not 0 (lead), 1 (sample) or 2 (fill)")
        if not 0 <= cols["tokens"][i] < inst.n:
            raise BadOutput(f"node {i}: token {cols['tokens'][i]} is outside the vocabulary 0..{inst.n - 1}")
        if cols["kinds"][i] == KINDS["sample"]:
            row = probs[i]
            if not np.isfinite(row).all() or (row < 0).any() or abs(float(row.sum()) - 1) > SUM_TOLERANCE:
                raise BadOutput(
                    f"node {i}: sample_probs row {_short(np.round(row, 6).tolist(), 80)} is not a law (finite, "
                    f"non-negative, summing to 1 within {SUM_TOLERANCE:g})"
                )
    paths, slot_paths = [], []
    for i in range(R):
        path: list[int] = []
        slots: list[int] = []
        j = i
        while j != -1:
            if len(path) > R:
                raise BadOutput(f"node {i}: its parents form a cycle")
            path.append(cols["tokens"][j])
            slots.append(cols["slots"][j])
            j = cols["parents"][j]
        paths.append(tuple(reversed(path)))
        slot_paths.append(tuple(reversed(slots)))
    return {**cols, "sample_probs": probs, "paths": paths, "slot_paths": slot_paths}


def _describe_nodes(nodes) -> str:
    return (
        ", ".join(f"token path {list(path)} ({kind}, slot path {list(slots)})" for slots, path, kind in sorted(nodes))
        or "none"
    )


def _labelled(t: dict) -> set:
    return {(s, p, KIND_NAMES[k]) for s, p, k in zip(t["slot_paths"], t["paths"], t["kinds"])}


def _compare_trees(got: dict, ref: dict) -> str | None:
    a, b = _labelled(got), _labelled(ref)
    if a != b:
        return (
            f"tree: reference nodes missing from the implementation's tree: {_describe_nodes(b - a)}; "
            f"nodes the reference does not have: {_describe_nodes(a - b)}"
        )
    ref_rows = {sp: i for i, sp in enumerate(ref["slot_paths"])}
    for i, sp in enumerate(got["slot_paths"]):
        if got["kinds"][i] == KINDS["sample"]:
            j = ref_rows[sp]
            gap = float(np.max(np.abs(got["sample_probs"][i] - ref["sample_probs"][j])))
            if gap > PROB_TOLERANCE:
                return (
                    f"tree: the residual law of the sample at token path {list(got['paths'][i])} is "
                    f"{np.round(got['sample_probs'][i], 6).tolist()}, the reference's is "
                    f"{np.round(ref['sample_probs'][j], 6).tolist()} (max difference {gap:.3g})"
                )
    return None


def _read_result(res, tree: dict, n: int) -> tuple[tuple, list]:
    """(tokens, accepted) of a verifier's result, checked against the tree it was given:
    integer token ids in the vocabulary, accepted indices that walk down from the root,
    each accepted node's token emitted in turn, then exactly one bonus or correction token."""
    tokens = tuple(_int_column(_field(res, "tokens"), "tokens"))
    accepted = _int_column(_field(res, "accepted"), "accepted")
    for t in tokens:
        if not 0 <= t < n:
            raise BadOutput(f"tokens: {t} is outside the vocabulary 0..{n - 1}")
    parents, tree_tokens = [int(x) for x in tree["parents"]], [int(x) for x in tree["tokens"]]
    parent = -1
    for i in accepted:
        if not 0 <= i < len(parents) or parents[i] != parent:
            where = "the root" if parent == -1 else f"node {parent}"
            raise BadOutput(
                f"accepted: {accepted} is not a path down the tree: node {_short(i)} is not a child of {where}"
            )
        parent = i
    if len(tokens) != len(accepted) + 1:
        raise BadOutput(
            f"tokens: {list(tokens)} must be the {len(accepted)} accepted tokens then one bonus or correction token"
        )
    for k, i in enumerate(accepted):
        if tokens[k] != tree_tokens[i]:
            raise BadOutput(f"tokens: token {k} is {tokens[k]}, but the accepted node {i} holds token {tree_tokens[i]}")
    return tokens, accepted


JITTER = 1e-11  # relative; far above float64 rounding, far below the 1e-9 margin


def _jittered_law(law, sign: int) -> tuple:
    """``law`` with each distinct value scaled by 1 + sign * JITTER * h, h in [1/2, 1) a hash
    of (the whole vector, the value), renormalized. Equal values in one vector, and identical
    vectors at different nodes, move together (softmax keeps those ties exact in any float
    implementation); different values, and equal values in different vectors, move apart."""
    vec = tuple(float(x) for x in law)
    key = repr(vec).encode()
    scaled = []
    for x in vec:
        h = hashlib.blake2b(key + repr(x).encode(), digest_size=8).digest()
        scaled.append(x * (1 + sign * JITTER * (0.5 + int.from_bytes(h, "big") / 2**65)))
    total = sum(scaled)
    return tuple(x / total for x in scaled)


def _jittered_draft(inst: Instance, sign: int, prefix: tuple[int, ...]) -> tuple:
    return _jittered_law(inst.draft(prefix), sign)


def fragile_tree(inst: Instance, uniforms: Uniforms, tree) -> bool:
    """Whether T_R hinges on a score tie that float rounding may break either way, such as
    q = 1/4 against 1/2 * 1/2: exact in the reference, but a float implementation gets
    logits and its softmax rounds 1/4 and 1/2 on its own. Ties between equal probabilities
    of one vector (or of identical vectors), alone or as the same factors in another
    order (1/2 * 1/4 against 1/4 * 1/2), stay exact for any float implementation, and are
    compared. Decided by rebuilding the tree on draft laws jittered both ways."""
    for sign in (1, -1):
        draft = Table("draft", {}, fn=functools.partial(_jittered_draft, inst, sign))
        jittered = Instance(inst.n, inst.target, draft, inst.config)
        if reference_build_tree(jittered, UniformChooser(uniforms)).labelled != tree.labelled:
            return True
    return False


def call_build_tree(impl: Implementation, inst: Instance, uniforms: Uniforms) -> dict:
    """The implementation's tree for ``inst`` on these uniforms, checked (``read_tree``)."""
    raw = _watched(
        "build_tree",
        inst,
        impl.obj.build_tree,
        draft_logits_fn(inst),
        protocol_config(inst),
        inst.config.temperature.value,
        np.array(uniforms.u_draw, dtype=np.float64),
    )
    return read_tree(raw, inst)


def call_verify(impl: Implementation, inst: Instance, tree: dict, uniforms: Uniforms) -> tuple[tuple, list]:
    """(emitted tokens, accepted node indices) of the implementation's verifier on ``tree``."""
    res = _watched(
        "verify",
        inst,
        impl.obj.verify,
        {k: tree[k] for k in ("tokens", "parents", "kinds", "slots", "sample_probs")},
        target_logits(inst, tree["paths"]),
        protocol_config(inst),
        inst.config.temperature.value,
        protocol_uniforms(uniforms),
    )
    return _read_result(res, tree, inst.n)


def call_cycle(impl: Implementation, inst: Instance) -> tuple:
    """The tokens one whole cycle of the implementation emits (``cycle``), checked: integer
    ids in the vocabulary, 1 to D+1 of them."""
    res = _watched(
        "cycle",
        inst,
        impl.obj.cycle,
        draft_logits_fn(inst),
        target_logits_fn(inst),
        protocol_config(inst),
        inst.config.temperature.value,
    )
    tokens = tuple(_int_column(_field(res, "tokens") if isinstance(res, dict) else res, "tokens"))
    L = inst.seq_len
    if not 1 <= len(tokens) <= L:
        raise BadOutput(f"tokens: {_short(list(tokens))} must hold 1 to depth + 1 = {L} tokens, got {len(tokens)}")
    for t in tokens:
        if not 0 <= t < inst.n:
            raise BadOutput(f"tokens: {t} is outside the vocabulary 0..{inst.n - 1}")
    return tokens


@dataclass
class Comparison:
    """One example: the verdict and, for the counterexample file, both sides' answers."""

    check: RequestCheck
    reference: dict = field(default_factory=dict)
    implementation: dict = field(default_factory=dict)


def compare_decisions(impl: Implementation, inst: Instance, uniforms: Uniforms) -> Comparison:
    """The implementation against ``simulate_cycle`` on the same uniforms (docs/spec.md §7): its tree
    builder on the same draft logits, its verifier on the reference's tree."""
    tree, output, accepted, margin = reference_cycle(inst, uniforms)
    if margin <= MARGIN:
        return Comparison(RequestCheck("near", f"a decision within {margin:.3g} of its threshold"))
    if impl.builds_trees and fragile_tree(inst, uniforms, tree):
        return Comparison(RequestCheck("near", "a score tie that float rounding decides"))
    ref = reference_tree(inst, tree)
    acc_rows = [ref["slot_paths"].index(sp) for sp in accepted]
    out = Comparison(
        RequestCheck("equal"), reference={"tree": _tree_json(ref), "tokens": list(output), "accepted": acc_rows}
    )
    if impl.builds_trees:
        try:
            got = call_build_tree(impl, inst, uniforms)
        except NotImplementedError as e:
            return Comparison(RequestCheck("unsupported", f"build_tree raised NotImplementedError: {e}"))
        except BadOutput as e:
            out.check = RequestCheck("differs", f"build_tree returned a malformed tree: {e}")
            return out
        except Exception as e:  # the implementation crashed: that is a finding, with its message
            out.check = RequestCheck("differs", f"build_tree raised {type(e).__name__}: {e}")
            return out
        out.implementation["tree"] = _tree_json(got)
        diff = _compare_trees(got, ref)
        if diff:
            out.check = RequestCheck("differs", diff)
            return out
    if impl.verifies:
        try:
            tokens, acc = call_verify(impl, inst, ref, uniforms)
        except NotImplementedError as e:
            return Comparison(RequestCheck("unsupported", f"verify raised NotImplementedError: {e}"))
        except BadOutput as e:
            out.check = RequestCheck("differs", f"verify returned a malformed result: {e}")
            return out
        except Exception as e:
            out.check = RequestCheck("differs", f"verify raised {type(e).__name__}: {e}")
            return out
        out.implementation.update(tokens=list(tokens), accepted=acc)
        if tokens != tuple(output) or acc != acc_rows:
            out.check = RequestCheck(
                "differs",
                f"verify on the reference's tree: emitted {list(tokens)} accepting "
                f"nodes {acc}; the reference emits {list(output)} accepting {acc_rows}",
            )
    return out


def _tree_json(t: dict) -> dict:
    return {
        "tokens": [int(x) for x in t["tokens"]],
        "parents": [int(x) for x in t["parents"]],
        "kinds": [int(x) for x in t["kinds"]],
        "slots": [int(x) for x in t["slots"]],
        "paths": [list(p) for p in t["paths"]],
        "sample_probs": {
            str(i): np.round(np.asarray(t["sample_probs"][i]), 12).tolist()
            for i, k in enumerate(t["kinds"])
            if k == KINDS["sample"]
        },
    }


def impl_cycle(impl: Implementation, inst: Instance, uniforms: Uniforms) -> tuple:
    """One cycle's output with the implementation's parts (the reference fills in a part it
    does not provide). ``inst`` may be a ``judged_instance``: the reference's verifier then
    targets the implementation's sampler law. NotImplementedError passes through; a crash
    or a malformed answer raises BadOutput naming the entry point."""
    if impl.runs_cycles:
        return _guarded("cycle", call_cycle, impl, inst)
    if impl.builds_trees:
        got = _guarded("build_tree", call_build_tree, impl, inst, uniforms)
    else:
        got = reference_tree(inst, reference_build_tree(inst, UniformChooser(uniforms)))
    if impl.verifies:
        return _guarded("verify", call_verify, impl, inst, got, uniforms)[0]
    labelled = LabelledTree((s, p[-1], KIND_NAMES[k]) for s, p, k in zip(got["slot_paths"], got["paths"], got["kinds"]))
    return walk(inst, labelled, UniformChooser(uniforms))[0]


def _guarded(what: str, fn, *args):
    try:
        return fn(*args)
    except NotImplementedError:
        raise
    except BadOutput as e:
        raise BadOutput(f"{what} returned a malformed answer: {e}") from None
    except Exception as e:  # the implementation crashed: a finding, with its message
        raise BadOutput(f"{what} raised {type(e).__name__}: {_one_line(e)}") from None


# ---- the implementation's own target sampler (sampler_law) ----


def call_sampler_law(impl: Implementation, logits: np.ndarray, config: dict, temperature: float) -> tuple:
    """``sampler_law`` on one target row, checked (finite, non-negative, length V, sums to 1
    within 1e-6; BadOutput names the field otherwise) and renormalized."""
    try:
        raw = _watched(
            "sampler_law", None, impl.obj.sampler_law, np.array(logits, dtype=np.float64), dict(config), temperature
        )
        p = np.asarray(raw, dtype=np.float64)
    except NotImplementedError:
        raise
    except Exception as e:
        raise BadOutput(f"sampler_law raised {type(e).__name__}: {_one_line(e)}") from None
    V = len(logits)
    if p.shape != (V,):
        raise BadOutput(f"sampler_law returned shape {list(p.shape)}, expected [V] = [{V}]")
    bad = np.flatnonzero(~np.isfinite(p))
    if len(bad):
        raise BadOutput(f"sampler_law[{bad[0]}] is {p[bad[0]]}, not a finite number")
    bad = np.flatnonzero(p < 0)
    if len(bad):
        raise BadOutput(f"sampler_law[{bad[0]}] is {p[bad[0]]:.6g}, negative")
    total = float(p.sum())
    if abs(total - 1.0) > SAMPLER_LAW_TOLERANCE:
        raise BadOutput(f"sampler_law sums to {total!r}, not to 1 (within {SAMPLER_LAW_TOLERANCE:g})")
    return tuple(float(x) for x in p / total)


class JudgedInstance(Instance):
    """An instance whose ``target_law(prefix)`` is the implementation's ``sampler_law`` on
    the target logits at that prefix (float64). The tables (so the logits the
    implementation is given), the configuration and the draft side are the original's."""

    def __init__(self, inst: Instance, impl: Implementation) -> None:
        super().__init__(inst.n, inst.target, inst.draft, inst.config)
        self.impl = impl
        self.spec = inst  # the same instance with docs/spec.md §0's target law
        self._protocol = protocol_config(inst)

    def target_law(self, prefix: Prefix) -> tuple:  # floats, where the reference's Law may be Fractions
        law = self._target_cache.get(prefix)
        if law is None:
            logits = _logits(self._checked_law(self.target, prefix))
            try:
                law = call_sampler_law(self.impl, logits, self._protocol, self.config.temperature.value)
            except BadOutput as e:
                raise BadOutput(f"at the target prefix {list(prefix)}: {e}") from None
            self._target_cache[prefix] = law
        return law


def _in_float64(inst: Instance) -> Instance:
    if not inst.exact:
        return inst
    t, d = inst.target, inst.draft
    return Instance(
        inst.n,
        Table("target", {}, fn=lambda pre: tuple(float(x) for x in t(pre))),
        Table("draft", {}, fn=lambda pre: tuple(float(x) for x in d(pre))),
        inst.config.in_arithmetic("float64"),
    )


def judged_instance(impl: Implementation, inst: Instance) -> Instance:
    """The instance an implementation's losslessness is judged on: with ``sampler_law``, a
    float64 ``JudgedInstance`` whose target law at every prefix is
    ``sampler_law(target logits at that prefix, config, T)``; without it, ``inst`` itself
    (docs/spec.md §0's p_T)."""
    if not impl.has_sampler_law:
        return inst
    return JudgedInstance(_in_float64(inst), impl)


def sampler_law_difference(judged: Instance) -> tuple[float, Prefix] | None:
    """max |sampler law - docs/spec.md §0's law| over the prefixes of length <= depth that
    either law reaches, and the first prefix attaining it; None without sampler_law."""
    if not isinstance(judged, JudgedInstance):
        return None
    spec = judged.spec
    best: tuple[float, Prefix] = (0.0, ())
    stack: list[Prefix] = [()]
    seen: set[Prefix] = set()
    while stack:
        prefix = stack.pop()
        if prefix in seen or len(prefix) >= judged.seq_len:
            continue
        seen.add(prefix)
        a, b = judged.target_law(prefix), spec.target_law(prefix)
        gap = max(abs(float(x) - float(y)) for x, y in zip(a, b))
        if gap > best[0] or (gap == best[0] and prefix < best[1]):
            best = (gap, prefix)
        stack.extend(prefix + (x,) for x in range(judged.n) if a[x] > 0 or b[x] > 0)
    return best


# ---- counterexample files ----


def counterexample_payload(impl: Implementation, case: dict, uniforms: Uniforms, cmp: Comparison) -> dict:
    return {
        "check": "decision equality",
        "implementation": impl.name,
        "difference": cmp.check.detail,
        "case": case,
        "uniforms": {
            "u_draw": list(map(float, uniforms.u_draw)),
            "u_sample": list(map(float, uniforms.u_sample)),
            "u_det": [list(map(float, row)) for row in uniforms.u_det],
            "u_final": list(map(float, uniforms.u_final)),
        },
        "reference_answer": cmp.reference,
        "implementation_answer": cmp.implementation,
        "replay": f"rheo gate --impl {impl.name} --replay FILE",
    }


def float_instance(case: dict) -> Instance:
    """The float64 instance the harness compares on (an exact case read in float64)."""
    return load_case({**case, "arithmetic": "float64"})


class ExactTargets(Instance):
    """A float64 instance whose target law is an exact instance's, rounded once: the
    filters' boundaries (a token at exactly min_p times the largest, a top-p run of mass
    exactly p) are decided exactly, as docs/spec.md §0 says, not by float64 rounding."""

    def __init__(self, inst: Instance, exact: Instance) -> None:
        super().__init__(inst.n, inst.target, inst.draft, inst.config)
        self.exact_instance = exact

    def target_law(self, prefix: Prefix) -> tuple:  # floats, where the reference's Law may be Fractions
        law = self._target_cache.get(prefix)
        if law is None:
            law = self._target_cache[prefix] = tuple(float(x) for x in self.exact_instance.target_law(prefix))
        return law


def law_instance(case: dict) -> Instance:
    """The float64 instance the output law runs on: ``float_instance``, with the exact target
    laws (``ExactTargets``) when the case is in exact arithmetic."""
    inst = float_instance(case)
    if case.get("arithmetic", "exact") == "exact":
        return ExactTargets(inst, load_case(case))
    return inst


def replay(impl: Implementation, path: str | Path) -> Comparison:
    """Rerun the comparison saved in a counterexample file."""
    saved = json.loads(Path(path).read_text(encoding="utf-8"))
    u = saved["uniforms"]
    return compare_decisions(
        impl, float_instance(saved["case"]), Uniforms(u["u_draw"], u["u_sample"], u["u_det"], u["u_final"])
    )


# ---- the checks ----


def decision_examples(configs: list[dict] | None = None):
    """Small exact cases and a seed for the uniforms. Without ``configs``: every policy, m,
    beam, budget, T in {0, 1/3, 1/2, 1}, sparse on/off, target filters (``cases``); with
    ``configs`` (case dicts without tables): one of them, with drawn tables. Small integer
    weights, half of them with dyadic draft laws, so exact score ties are common."""
    if configs is None:
        tables = st.one_of(cases(filters=True), cases(filters=True, dyadic_draft=True))
    else:
        tables = st.one_of(cases_from_configs(configs), cases_from_configs(configs, dyadic_draft=True))
    return st.tuples(tables, st.integers(0, 2**32 - 1))


POOL_SIZE = 3000  # configurations drawn before the search; those the implementation supports are searched


def supported_configs(impl: Implementation, seed: int) -> tuple[list[dict], int]:
    """(the configurations of the decision search that ``impl.supports``, simplest first;
    how many were asked): ``POOL_SIZE`` drawn like ``cases(filters=True)`` from ``seed``,
    plus those of ``impl_matrix("deep")``."""
    matrix = [{k: v for k, v in c.items() if k not in ("name", "target", "draft")} for c in impl_matrix("deep")]
    pool = config_pool(seed, POOL_SIZE, extra=matrix)
    keep = [c for c in pool if impl.supports(case_config(c))]
    return keep, len(pool)


def check_decisions(
    impl: Implementation, examples: int, seed: int | None = 0, min_compared: int = 1, configs: list[dict] | None = None
) -> Outcome:
    """Search ``examples`` cases for a decision the implementation takes differently from the
    reference; a difference is shrunk by Hypothesis. Only configurations the implementation
    supports are drawn (``supported_configs``, or ``configs`` when given). ``seed`` None = a
    fresh random search (its seed is reported), an int = derandomized (the same search every
    run). Fewer than ``min_compared`` compared cases fail: nothing is proven."""
    if not impl.follows_uniforms:
        return Outcome(
            "skip",
            "skipped: the implementation declares follows_uniforms = False (its output law judges it)",
            data={"skipped": True},
        )
    if seed is None:
        seed = random.SystemRandom().randrange(2**32)
    if configs is None:
        configs, asked = supported_configs(impl, seed)
        # every configuration supported: draw configurations with Hypothesis itself (its
        # bias toward small budgets and boundary values finds exact score ties sooner)
        strategy = decision_examples() if len(configs) == asked else decision_examples(configs)
    else:
        configs, asked = [c for c in configs if impl.supports(case_config(c))], len(configs)
        strategy = decision_examples(configs)
    seen = {"equal": 0, "near": 0, "unsupported": 0, "differs": 0}
    data: dict[str, Any] = {
        "examples": examples,
        "seed": seed,
        **seen,
        "configurations": asked,
        "supported_configurations": len(configs),
        "minimum": min_compared,
    }
    if not configs:
        return Outcome(
            "fail",
            f"none of {asked} configurations is supported (supports(config) is False for every one): nothing is proven",
            data=data,
        )

    def run(example):
        case, useed = example
        inst = float_instance(case)
        if not impl.supports(protocol_config(inst)):  # drawn outside the pool (a full implementation's rare gap)
            return Comparison(RequestCheck("unsupported", "supports(config) is False")), None
        c = inst.config
        u = Uniforms.random(np.random.default_rng(useed), c.K, c.B, c.depth)
        return compare_decisions(impl, inst, u), u

    def differs(example):
        cmp, _ = run(example)
        seen[cmp.check.status] += 1
        return cmp.check.status == "differs"

    found, seed = shrunk_search(strategy, differs, examples, seed)
    data.update(seen, seed=seed)
    counts = (
        f"{examples} cases searched (seed {seed}): {seen['equal']} equal, {seen['near']} set aside (a decision "
        f"within 1e-9 of its threshold, or a score tie rounding decides), {seen['unsupported']} unsupported "
        f"(NotImplementedError, or supports False); {len(configs)} of {asked} configurations supported"
    )
    if found is None:
        if seen["equal"] == 0:
            return Outcome("fail", f"no example was compared ({counts}): nothing is proven", data=data)
        if seen["equal"] < min_compared:
            return Outcome(
                "fail",
                f"only {seen['equal']} cases compared, fewer than the minimum {min_compared} ({counts}): "
                "nothing is proven",
                data=data,
            )
        return Outcome(
            "pass",
            f"same decisions as the reference on {seen['equal']} cases (minimum {min_compared}; {counts})",
            data=data,
        )
    case, useed = found
    cmp, u = run(found)
    payload = counterexample_payload(impl, case, u, cmp)
    broke = cmp.check.detail.startswith(("build_tree returned a malformed", "verify returned a malformed")) or (
        cmp.check.detail.startswith(("build_tree raised", "verify raised"))
    )  # a malformed answer or a crash is not another algorithm
    head = "the implementation broke the protocol" if broke else "not the specified algorithm"
    return Outcome(
        "fail",
        f"{head}: {cmp.check.detail} (shrunk: V={case['vocab_size']}, policy {case['policy']}, "
        f"K={case['K']}, depth {case['depth']}, budget {case['budget']})",
        payload,
        data,
    )


def sequence_law(inst: Instance) -> dict[tuple, float]:
    """p_T(Seq) = prod_i p_T(Seq_i | Seq_<i) for every Seq in V^(D+1) of positive mass
    (docs/spec.md §5), with ``inst.target_law`` (a ``judged_instance``'s: its sampler law)."""
    out: dict[tuple, float] = {}
    stack: list[tuple[tuple, float]] = [((), 1.0)]
    while stack:
        prefix, pr = stack.pop()
        if len(prefix) == inst.seq_len:
            out[prefix] = pr
            continue
        law = inst.target_law(prefix)
        stack.extend((prefix + (x,), pr * float(law[x])) for x in range(inst.n) if law[x] > 0)
    return out


def continued_outputs(
    impl: Implementation, inst: Instance, cycles: int, rng: np.random.Generator, progress=None, label: str = ""
) -> Counter:
    """Counts over V^(D+1) of the implementation's cycle outputs (fresh uniforms each cycle)
    continued by exact sampling from ``inst.target_law`` (inverse CDF, docs/spec.md §7). An
    output that is empty, longer than D+1 or outside the vocabulary is counted as it is (it
    has probability 0)."""
    c, L, n = inst.config, inst.seq_len, inst.n
    cdfs: dict[tuple, np.ndarray] = {}
    counts: Counter = Counter()
    for i in range(cycles):
        seq = tuple(impl_cycle(impl, inst, Uniforms.random(rng, c.K, c.B, c.depth)))
        if 1 <= len(seq) <= L and all(0 <= t < n for t in seq):
            while len(seq) < L:
                cdf = cdfs.get(seq)
                if cdf is None:
                    cdf = cdfs[seq] = np.cumsum(np.array(inst.target_law(seq), dtype=np.float64))
                x = int(np.searchsorted(cdf, rng.random(), side="right"))
                if x >= n:  # rounding left the total below u: the last token with mass
                    x = int(np.flatnonzero(np.diff(np.concatenate([[0.0], cdf])) > 0)[-1])
                seq = seq + (x,)
        counts[seq] += 1
        if progress and (i + 1) % 5000 == 0:
            progress(f"  {label}: {i + 1}/{cycles} cycles")
    return counts


def law_counterexample(
    check: str,
    impl: Implementation,
    name: str,
    case: dict,
    judge: str,
    seed: int,
    alpha: float,
    res: GofResult,
    counts: Counter,
    law: dict,
) -> dict:
    """The counterexample file of an output-law check that rejected ``case``: the worst
    sequences (observed against p_T), the impossible ones, and the command that reruns it."""
    cycles = sum(counts.values())
    top = sorted(set(law) | set(counts), key=lambda o: -abs(counts.get(o, 0) / cycles - law.get(o, 0.0)))[:5]
    return {
        "check": check,
        "implementation": impl.name,
        "case_name": name,
        "case": case,
        "judged_against": judge,
        "cycles": cycles,
        "seed": seed,
        "alpha": alpha,
        "result": res.describe(),
        "worst_sequences": [
            {"sequence": list(o), "observed": counts.get(o, 0) / cycles, "p_T": law.get(o, 0.0)} for o in top
        ],
        "impossible_sequences": [list(o) for o in res.impossible[:5]],
        "rerun": f"rheo gate --impl {impl.name} --only '{check}' --cycles {cycles}",
    }


def law_head(cases: dict, worst: dict | None, cycles: int) -> str:
    """The first words of an output-law verdict: not lossless on the first rejected case, or
    lossless within the span of detectable TVs over ``cases`` (name -> ``_gof_json``)."""
    n = len(cases)
    tvs = sorted(c["detectable_tv"] for c in cases.values() if math.isfinite(c["detectable_tv"]))
    if worst:
        return f"not lossless on {worst['case_name']}"
    if tvs:
        span = f"{tvs[0]:.4f}" if tvs[0] == tvs[-1] else f"{tvs[0]:.4f} to {tvs[-1]:.4f}"
        return f"lossless on {n} cases, each within detectable TV {span}"
    return f"lossless on {n} cases as far as {cycles} samples each show (no TV bound: single-bin laws)"


def per_request_counts(
    impl: Implementation,
    name: str,
    case: dict,
    judged: Instance,
    cycles: int,
    seed: int,
    case_index: int,
    progress=None,
) -> Counter:
    """One case's continued outputs through the per-request protocol, in shards of
    ``parallel.SHARD_CYCLES`` cycles, each with its own seed (``output_law_shard``)."""
    calls = [
        (shipped(impl), case, n, parallel.shard_seed(seed, case_index, k))
        for k, n in enumerate(parallel.shards(cycles, parallel.SHARD_CYCLES))
    ]
    if progress:
        progress(f"  output law {name}: {cycles} cycles in {len(calls)} shards ({parallel.current().description})")
    return sum(parallel.current().map(output_law_shard, calls), Counter())


def output_law_shard(ref: Implementation | str, case: dict, cycles: int, seed: int) -> Counter:
    """One shard of the output-law check: ``cycles`` continued outputs of the implementation
    on ``case`` (``continued_outputs``), from the shard's own seed."""
    impl = implementation_of(ref)
    judged = judged_instance(impl, law_instance(case))
    return continued_outputs(impl, judged, cycles, np.random.default_rng(seed))


def _law_line(name: str, res: GofResult, shown: str, refuted: str) -> str:
    """One case's verdict: "NAME: <shown> within detectable TV d (...)" or "NAME: <refuted> (...)"."""
    if res.reject:
        return f"{name}: {refuted} ({res.describe()})"
    if res.bins < 2:
        return (
            f"{name}: {shown} as far as {res.n} samples show (one bin: only an outcome of probability 0 "
            "could reject; no TV bound)"
        )
    return (
        f"{name}: {shown} within detectable TV {res.detectable_tv:.4f} (chi2 = {res.statistic:.1f} on "
        f"{res.bins - 1} df, p = {res.p_value:.3g}, N = {res.n}, {res.merged} merged into the tail)"
    )


def _gof_json(res: GofResult) -> dict:
    return {
        "reject": res.reject,
        "p_value": res.p_value,
        "chi2": res.statistic,
        "bins": res.bins,
        "detectable_tv": res.detectable_tv,
        "impossible": [list(o) for o in res.impossible[:5]],
    }


def _supported_cases(impl: Implementation, stat_cases: list[tuple[str, dict]]):
    out: list[tuple[str, dict, Instance]] = []
    unsupported: list[tuple[str, dict, Instance]] = []
    for name, case in stat_cases:
        inst = law_instance(case)
        (out if impl.supports(protocol_config(inst)) else unsupported).append((name, case, inst))
    return out, [name for name, _, _ in unsupported]


def _named(cases_: list[dict]) -> list[tuple[str, dict]]:
    """(a unique name, the case): its "name", else "case i"; repeats get " #k"."""
    out: list[tuple[str, dict]] = []
    seen: Counter = Counter()
    for i, c in enumerate(cases_, 1):
        name = str(c.get("name") or f"case {i}")
        seen[name] += 1
        out.append((name if seen[name] == 1 else f"{name} #{seen[name]}", c))
    return out


def check_output_law(
    impl: Implementation,
    cycles: int,
    family_alpha: float = 1e-6,
    seed: int = 0,
    level: str = "quick",
    extra_cases: list[dict] | tuple = (),
    progress=None,
    min_cases: int = STATISTICAL_MIN_CASES,
    counted: Callable[..., Counter] | None = None,
    check: str = "output law",
    data_extra: dict | None = None,
) -> Outcome:
    """Losslessness, statistically (docs/spec.md §5): on ``output_law_cases(level)`` and the
    user's ``extra_cases``, ``cycles`` cycles of the implementation per case, each output
    continued by exact sampling from the judged target law (``judged_instance``: its
    sampler_law if it has one, else docs/spec.md §0's p_T) to length D+1; the counts over
    V^(D+1) against p_T(Seq) by Pearson chi-square (``gof``; ``family_alpha`` split over the
    supported cases; the detectable TV at power 0.99 per case). A rejection writes the case,
    the worst sequences (observed vs p_T) and the seed.

    ``counted(impl, name, case, judged, cycles, seed, case_index, progress)`` gives one
    case's continued counts (default ``per_request_counts``; the batched check passes its
    own, rheo.checks.batched), ``check`` names the check in counterexample files."""
    counted = counted or per_request_counts
    stat_cases = _named(output_law_cases(level) + list(extra_cases))
    supported, unsupported = _supported_cases(impl, stat_cases)
    judge = "its own sampler_law" if impl.has_sampler_law else "p_T of docs/spec.md §0"
    data: dict[str, Any] = {
        "cycles": cycles,
        "seed": seed,
        "judged_against": "sampler_law" if impl.has_sampler_law else "spec",
        "minimum": min_cases,
        "cases": {},
        "unsupported": unsupported,
        **(data_extra or {}),
    }
    if len(supported) < min_cases:
        return Outcome(
            "fail",
            f"{len(supported)} of {len(stat_cases)} cases supported, fewer than the minimum {min_cases}: "
            "nothing is proven",
            data=data,
        )
    alpha = family_alpha / len(supported)
    data["alpha"] = alpha
    lines, worst, differs, seconds = [], None, None, 0.0
    index = {name: i for i, (name, _) in enumerate(stat_cases)}
    for name, case, inst in supported:
        judged = judged_instance(impl, inst)
        t0 = time.perf_counter()
        try:
            law = sequence_law(judged)
            counts = counted(impl, name, case, judged, cycles, seed, index[name], progress)
            gap = sampler_law_difference(judged)
        except NotImplementedError:
            unsupported.append(name)
            continue
        except BadOutput as e:
            detail = f"the implementation broke the protocol on {name}: {e}"
            payload = {"check": check, "implementation": impl.name, "case_name": name, "case": case}
            return Outcome("fail", detail, {**payload, "difference": str(e), "seed": seed}, data)
        seconds += time.perf_counter() - t0
        res = gof(counts, law, alpha)
        data["cases"][name] = {**_gof_json(res), "seconds": time.perf_counter() - t0}
        lines.append(_law_line(name, res, "lossless", "NOT lossless"))
        if gap is not None and (differs is None or gap[0] > differs["max_abs_difference"]):
            differs = {"max_abs_difference": gap[0], "case": name, "prefix": list(gap[1])}
        if res.reject and worst is None:
            worst = law_counterexample(check, impl, name, case, judge, seed, alpha, res, counts, law)
    if len(data["cases"]) < min_cases:
        return Outcome(
            "fail",
            f"{len(data['cases'])} of {len(stat_cases)} cases supported, fewer than the minimum {min_cases}: "
            "nothing is proven",
            data=data,
        )
    if impl.has_sampler_law:
        data["sampler_law_differs_from_spec"] = differs
    n, head = len(data["cases"]), law_head(data["cases"], worst, cycles)
    data["cycles_per_second"] = n * cycles / seconds if seconds > 0 else None
    rate = f", {data['cycles_per_second']:,.0f} cycles per second" if data["cycles_per_second"] else ""
    rate += f" on {data['device']}" if rate and "device" in data else ""
    detail = (
        f"{head} ({cycles} cycles per case against {judge}, alpha {alpha:.2g} per case, "
        f"{n} of {len(stat_cases)} cases supported, minimum {min_cases}{rate}): " + "; ".join(lines)
    )
    if unsupported:
        detail += f"; unsupported: {', '.join(unsupported)}"
    if differs is not None:
        gap, where = differs["max_abs_difference"], f"case {differs['case']}, prefix {differs['prefix']}"
        detail += (
            f". Its sampler_law differs from docs/spec.md §0 by up to {gap:.3g} ({where}); judged against its "
            "own law, not a finding"
            if gap > 1e-12
            else f". Its sampler_law equals docs/spec.md §0's law on these cases (largest difference {gap:.1g})"
        )
    return Outcome("fail" if worst else "pass", detail, worst, data)


def statistical_cases(deep: bool = False) -> dict:
    """Fixed generated cases for the cycle-law check (exact laws known by enumeration)."""
    out = {
        "rheo_m1_fills": hashed_case(4, 1, 3, policy="rheo", K=3, m=1, budget=6, beam=2, temperature="1"),
        "rheo_m0_sparse_top_p": hashed_case(
            5,
            4,
            2,
            zero_share=2,
            policy="rheo",
            K=3,
            m=0,
            budget=5,
            beam=2,
            temperature="1/2",
            draft_top_k=4,
            target_top_p="9/10",
        ),
        "topk": hashed_case(4, 3, 3, policy="topk", K=2, budget=5, beam=2, temperature="1"),
    }
    if deep:
        out["rheo_m2_min_p"] = hashed_case(
            4, 4, 3, policy="rheo", K=3, m=2, budget=5, beam=1, temperature="1/3", target_min_p="1/20"
        )
    return out


def check_cycle_law(
    impl: Implementation,
    cycles: int,
    family_alpha: float = 1e-6,
    seed: int = 0,
    deep: bool = False,
    progress=None,
    min_cases: int = STATISTICAL_MIN_CASES,
) -> Outcome:
    """For implementations of docs/spec.md's algorithm (``implements_spec = True``): the
    empirical cycle law over ``cycles`` cycles per case against the reference's exact law
    (Pearson chi-square on counts; ``family_alpha`` split over the cases; the detectable TV
    at power 0.99 is reported per case). Equal laws show sameness; a difference shows "not
    the specified algorithm" (the output law judges losslessness)."""
    stat_cases = statistical_cases(deep)
    alpha = family_alpha / len(stat_cases)
    rng = np.random.default_rng(seed)
    lines: list[str] = []
    data: dict[str, Any] = {}
    worst: dict[str, Any] | None = None
    unsupported: list[str] = []
    for name, case in stat_cases.items():
        inst = float_instance(case)
        if not impl.supports(protocol_config(inst)):
            unsupported.append(name)
            continue
        law = {o: float(p) for o, p in cycle_law(load_case(case), "classes", count_draws=False).law.items()}
        c = inst.config
        counts: Counter = Counter()
        try:
            for i in range(cycles):
                counts[impl_cycle(impl, inst, Uniforms.random(rng, c.K, c.B, c.depth))] += 1
                if progress and (i + 1) % 5000 == 0:
                    progress(f"  cycle law {name}: {i + 1}/{cycles} cycles")
        except NotImplementedError:
            unsupported.append(name)
            continue
        except BadOutput as e:
            return Outcome("fail", f"not the specified algorithm: on {name}, {e}", data=data)
        res = gof(counts, law, alpha)
        data[name] = _gof_json(res)
        lines.append(_law_line(name, res, "same cycle law as the reference", "a different cycle law"))
        if res.reject and worst is None:
            top = sorted(law, key=lambda o: -abs(counts.get(o, 0) / cycles - law[o]))[:5]
            worst = {
                "check": "cycle law",
                "implementation": impl.name,
                "case_name": name,
                "case": case,
                "cycles": cycles,
                "seed": seed,
                "alpha": alpha,
                "result": res.describe(),
                "largest_gaps": [
                    {"output": list(o), "observed": counts.get(o, 0) / cycles, "exact": law[o]} for o in top
                ],
                "impossible_outputs": [list(o) for o in res.impossible[:5]],
            }
    if len(data) < min_cases:
        return Outcome(
            "fail",
            f"{len(data)} of {len(stat_cases)} statistical cases supported, fewer than the minimum {min_cases}: "
            "nothing is proven",
            data=data,
        )
    head = (
        f"not the specified algorithm: its cycle law differs on {worst['case_name']}"
        if worst
        else f"same cycle law as the reference on {len(data)} cases"
    )
    detail = f"{head} ({cycles} cycles per case, alpha {alpha:.2g} per case): " + "; ".join(lines)
    if unsupported:
        detail += f"; unsupported: {', '.join(unsupported)}"
    return Outcome("fail" if worst else "pass", detail, worst, data)
