"""Copy the repository into a folder as the installed package is laid out (a real copy).

setuptools' package-dir mapping puts reference/, fastpath/ and cases/ under ``rheo``
(pyproject.toml); tools that read files by path (mutmut names a module by its file's
path, and rewrites the files it mutates) need that layout on disk. ``.ci/typecheck`` does
the same for mypy with symlinks; this copies, so that the copy can be changed freely.

    python bench/mapped_tree.py DEST     # DEST/src/rheo/{reference,fastpath,cases}, tests, docs, ...

With ``PYTHONPATH=DEST/src`` the copy's ``rheo`` is imported before an editable install's
(setuptools' editable finder comes after the path finder).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAPPING = {"reference": "src/rheo/reference", "fastpath": "src/rheo/fastpath", "cases": "src/rheo/cases"}
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".hypothesis", ".pytest_cache")


def tracked_and_untracked(root: Path) -> list[str]:
    """The working tree's files that git does not ignore (committed or not)."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [p for p in out.split("\0") if p and (root / p).is_file()]


def build(dest: Path, root: Path = ROOT) -> Path:
    """Copy ``root``'s working tree to ``dest`` and the mapped folders under dest/src/rheo."""
    dest.mkdir(parents=True, exist_ok=True)
    for rel in tracked_and_untracked(root):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)
    for folder, inside in MAPPING.items():
        shutil.copytree(root / folder, dest / inside, ignore=IGNORE, dirs_exist_ok=True)
    return dest


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python bench/mapped_tree.py DEST")
    print(build(Path(sys.argv[1]).resolve()))
