"""The import rules of the package, read from the source (nothing is imported):

- no import cycle among the project's modules;
- arrows run one way: the reference imports nothing of ours; the fastpath imports only the
  reference's types (``params``, ``numbers``); ``rheo.testing`` and ``rheo.integrations``
  import neither the checks, the benchmarks nor the CLI; nothing outside ``rheo.cli``
  imports the CLI; ``rheo.checks.outcome`` is a leaf;
- project imports sit at module level; an import inside a function is allowed only for a
  module that needs torch or transformers (it imports them at module level, itself or
  through its own imports), so that the package works without the extras.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# import package -> folder (pyproject.toml's package-dir)
FOLDERS = {"rheo": "src/rheo", "rheo.reference": "reference", "rheo.fastpath": "fastpath", "rheo.cases": "cases"}
OPTIONAL = ("torch", "transformers")

# room -> rooms it may import (a room is a module-name prefix; the longest prefix wins).
# The rooms of rheo.checks (their __init__ docstrings say what lives there) run one way:
# cases and protocol at the bottom, then exact, differential and statistics side by side
# (none imports another), then the gate at the top.
CHECKS_BASE = {"rheo.checks.outcome", "rheo.checks.parallel", "rheo.progress"}
ALLOWED = {
    "rheo.reference": {"rheo.reference"},
    "rheo.fastpath": {"rheo.fastpath", "rheo.reference.params", "rheo.reference.numbers"},
    "rheo.casefile": {"rheo.reference"},
    "rheo.progress": set(),  # progress lines for long work: a leaf every room may use
    "rheo.testing": {"rheo.testing", "rheo.fastpath", "rheo.reference", "rheo.progress"},
    "rheo.integrations": {"rheo.integrations", "rheo.testing", "rheo.fastpath", "rheo.reference", "rheo.progress"},
    "rheo.checks.outcome": set(),
    "rheo.checks.parallel": set(),
    "rheo.checks.cases": {"rheo.checks.cases", "rheo.casefile", "rheo.reference"},
    "rheo.checks.protocol": {"rheo.checks.protocol", "rheo.casefile", "rheo.reference", *CHECKS_BASE},
    "rheo.checks.exact": {
        "rheo.checks.exact",
        "rheo.checks.protocol",
        "rheo.checks.cases",
        "rheo.reference",
        *CHECKS_BASE,
    },
    "rheo.checks.differential": {
        "rheo.checks.differential",
        "rheo.checks.protocol",
        "rheo.checks.cases",
        "rheo.reference",
        "rheo.fastpath",
        "rheo.testing",
        *CHECKS_BASE,
    },
    "rheo.checks.statistics": {
        "rheo.checks.statistics",
        "rheo.checks.protocol",
        "rheo.checks.cases",
        "rheo.casefile",
        "rheo.reference",
        "rheo.fastpath",
        "rheo.testing",
        "rheo.integrations",
        *CHECKS_BASE,
    },
    "rheo.checks": {  # the gate room, and the thin re-exports kept for old import paths
        "rheo.checks",
        "rheo.progress",
        "rheo.casefile",
        "rheo.reference",
        "rheo.fastpath",
        "rheo.testing",
        "rheo.integrations",
    },
    "rheo.bench.targets": set(),  # the benchmarks' targets and their verdicts per device: a leaf
    "rheo.bench": {
        "rheo.bench",
        "rheo.reference",
        "rheo.fastpath",
        "rheo.testing",
        "rheo.integrations",
        "rheo.checks",
        "rheo.progress",
    },
    "rheo.cli": {
        "rheo.cli",
        "rheo.progress",
        "rheo",
        "rheo.casefile",
        "rheo.reference",
        "rheo.fastpath",
        "rheo.checks",
        "rheo.bench",
        "rheo.integrations",
    },
    "rheo.cases": set(),
    "rheo": set(),  # src/rheo/__init__.py: the version and a map, nothing more
}
MAX_LINES = 650  # "no module of ours is over about 600 lines": a reader finds one concern per file


def _module_files() -> dict[str, Path]:
    out = {}
    for package, folder in FOLDERS.items():
        base = ROOT / folder
        for path in base.rglob("*.py"):
            rel = path.relative_to(base).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([package, *parts])
            if any(name == p or name.startswith(p + ".") for p in FOLDERS if p != package and p.startswith(package)):
                continue  # a folder mapped to another package (none inside src/rheo/ today)
            out[name] = path
    return out


MODULES = _module_files()


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    targets = []
    for alias in node.names:
        sub = f"{prefix}.{alias.name}"
        targets.append(sub if sub in MODULES else prefix)
    return targets


def _imports(name: str) -> list[tuple[str, bool, int]]:
    """(imported name, at module level?, line) for every import in module ``name``."""
    path = MODULES[name]
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    out = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                out.extend((a.name, top, child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                out.extend((t, top, child.lineno) for t in _resolve(name, is_package, child))
            visit(child, inner)

    visit(tree, True)
    return out


IMPORTS = {name: _imports(name) for name in MODULES}


def _ours(target: str) -> str | None:
    """The project module an import names (a package's __init__ for a name inside it)."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def _room(name: str) -> str:
    return max((r for r in ALLOWED if name == r or name.startswith(r + ".")), key=len)


def _needs_optional() -> set[str]:
    """Modules that import torch or transformers at module level, themselves or through
    the project modules they import at module level."""
    direct = {n for n, imps in IMPORTS.items() if any(t.split(".")[0] in OPTIONAL for t, top, _ in imps if top)}
    needs = set(direct)
    changed = True
    while changed:
        changed = False
        for n, imps in IMPORTS.items():
            if n not in needs and any(_ours(t) in needs for t, top, _ in imps if top):
                needs.add(n)
                changed = True
    return needs


def test_the_rules_see_every_module():
    assert len(MODULES) > 40 and "rheo.reference.params" in MODULES and "rheo.checks.gate" in MODULES
    unplaced = [n for n in MODULES if not any(n == r or n.startswith(r + ".") for r in ALLOWED)]
    assert not unplaced


def test_no_import_cycle():
    graph = {n: {_ours(t) for t, _, _ in imps} - {None, n} for n, imps in IMPORTS.items()}
    # a package's __init__ that only re-exports its own modules is not a cycle with them
    for n in graph:
        graph[n] = {t for t in graph[n] if not (MODULES[t].name == "__init__.py" and n.startswith(t + "."))}
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for t in sorted(graph[n]):
            if state.get(t) == 1:
                return stack[stack.index(t) :] + [t]
            if t not in state and (cycle := dfs(t)):
                return cycle
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            cycle = dfs(n)
            assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_arrows_run_one_way(name):
    room = _room(name)
    bad = []
    for target, _, line in IMPORTS[name]:
        ours = _ours(target)
        if ours is None:
            continue
        if not any(ours == r or ours.startswith(r + ".") for r in ALLOWED[room] | {name}):
            bad.append(
                f"{MODULES[name].relative_to(ROOT)}:{line} imports {ours} ({room} may import "
                f"{sorted(ALLOWED[room]) or 'nothing of ours'})"
            )
    assert not bad, "\n".join(bad)


def test_no_module_is_over_the_size_limit():
    """Modules stay small enough to read as one concern (the rooms were split to get here)."""
    big = {
        str(path.relative_to(ROOT)): n
        for path in set(MODULES.values())
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not big, f"modules over {MAX_LINES} lines; split them by concern: {big}"


def test_every_package_folder_is_packaged():
    """pyproject.toml lists every folder of the package (setuptools installs only those)."""
    tomllib = pytest.importorskip("tomllib")

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {name for name, path in MODULES.items() if path.name == "__init__.py"}
    assert folders == listed, f"missing from pyproject.toml: {folders - listed}; listed but absent: {listed - folders}"


def test_project_imports_sit_at_module_level():
    needs = _needs_optional()
    bad = [
        f"{MODULES[n].relative_to(ROOT)}:{line} imports {_ours(t)} inside a function"
        for n, imps in IMPORTS.items()
        for t, top, line in imps
        if not top and _ours(t) is not None and _ours(t) not in needs
    ]
    assert not bad, "move these imports to the top of their module:\n" + "\n".join(bad)


def test_the_optional_set_is_not_vacuous():
    """The exemption covers the torch modules and not the exact engine or the gate."""
    needs = _needs_optional()
    assert {"rheo.fastpath", "rheo.checks.statistics.sampling", "rheo.testing"} <= needs
    assert not needs & {
        "rheo.reference",
        "rheo.checks.gate",
        "rheo.checks.harness",
        "rheo.checks.protocol.calls",
        "rheo.casefile",
        "rheo.cli",
    }


# ---- the rules can fail: each check fires on a planted violation ----


def test_a_planted_cycle_is_caught(monkeypatch):
    planted = {**IMPORTS, "rheo.checks.outcome": [*IMPORTS["rheo.checks.outcome"], ("rheo.checks.gate", True, 1)]}
    monkeypatch.setitem(globals(), "IMPORTS", planted)
    with pytest.raises(AssertionError, match="import cycle"):
        test_no_import_cycle()


def test_a_planted_forbidden_arrow_is_caught(monkeypatch):
    planted = {**IMPORTS, "rheo.reference.tree": [*IMPORTS["rheo.reference.tree"], ("rheo.casefile", True, 1)]}
    monkeypatch.setitem(globals(), "IMPORTS", planted)
    with pytest.raises(AssertionError, match="imports rheo.casefile"):
        test_arrows_run_one_way("rheo.reference.tree")


def test_a_planted_lazy_import_is_caught(monkeypatch):
    planted = {**IMPORTS, "rheo.checks.gate": [*IMPORTS["rheo.checks.gate"], ("rheo.casefile", False, 1)]}
    monkeypatch.setitem(globals(), "IMPORTS", planted)
    with pytest.raises(AssertionError, match="inside a function"):
        test_project_imports_sit_at_module_level()
