"""``mypy --strict`` checks every product folder: pyproject.toml's ``[tool.mypy] files`` names each one.

A folder missing from the list is checked only through what imports it, and not at all where
nothing listed does (a module run as ``python -m``, a new package). Every top-level folder of the
repository that holds Python code must be listed, or be one this test names as not product code.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Top-level folders with Python files that mypy does not check (none): a folder added here is a
#: decision, not an accident.
NOT_CHECKED: frozenset[str] = frozenset()


def python_folders(root: Path = ROOT) -> set[str]:
    """Top-level folders (not hidden, not caches) holding a ``.py`` file at any depth."""
    return {d.name for d in root.iterdir()
            if d.is_dir() and not d.name.startswith((".", "__")) and any(d.rglob("*.py"))}


def test_mypy_checks_every_python_folder() -> None:
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    listed = set(mypy["files"])
    missing = sorted(python_folders() - listed - NOT_CHECKED)
    assert not missing, f"pyproject.toml [tool.mypy] files leaves out {missing}: add them (mypy --strict at 0)"
    assert "conftest.py" in listed
