"""One name per concept: a module's name says its role, and pytest never mistakes a module for a test.

- pytest collects ``test_*.py`` and ``*_test.py`` (its default ``python_files``): outside the
  project's tests and the suite's ``suites/test_<rule>.py``, no module may match either, or a
  ``pytest DIR`` would collect it (a ``per_test.py`` matches ``*_test.py``);
- a module name used in more than one package of the product names one concept in each: a rule (the
  rule's part in each layer: ``guest/tools/discard.py``, ``hypervisors/libvirt/discard.py``,
  ``model/rules/discard.py``), or a part every backend has (:data:`BACKEND_PARTS`), or one of
  :data:`SHARED`, each with what it is in both places.
"""

from __future__ import annotations

import fnmatch
from collections import defaultdict
from pathlib import Path

from model.rules import RULE_MODULES

ROOT = Path(__file__).resolve().parents[2]
#: The product's packages (what a user runs), not its tests.
PRODUCT = ("model", "transport", "guest", "images", "replay", "hypervisors", "measure", "fixtures", "suites", "reports",
           "bench")
#: pytest's default ``python_files``.
PYTEST_FILES = ("test_*.py", "*_test.py")
#: The same part in every backend package (hypervisors/<backend>/).
BACKEND_PARTS = frozenset({"backend", "controllers", "record", "leftovers"})
#: Names that mean one thing in each place they are used.
SHARED = {
    "disks": "the suite's disks: as data (model/disks.py) and as fixtures (fixtures/disks.py)",
    "kernels": "the guest kernels apt has: their cache (images/) and their benchmark (bench/)",
    "compare": "python -m reports.compare, the command the docs name (reports/), and its code (reports/store/)",
    "trend": "python -m reports.trend, the command the docs name (reports/), and its code (reports/store/)",
    "defaults": "what a backend declares without its SDK: the contract (hypervisors/) and each backend's own",
    "bisect": "a bisect: its arithmetic (model/bisect.py) and python -m reports.bisect, which runs its steps",
    "disk_settings": "--disk's settings: as data (model/) and as each backend sets them up",
    "qmp": "QEMU's monitor: the libvirt backend's, through libvirt (hypervisors/libvirt/), and the replay's, on a unix socket (replay/)",
    "__init__": "a package",
    "__main__": "a package's command",
}


def product_modules() -> list[Path]:
    return [p for top in PRODUCT for p in sorted((ROOT / top).rglob("*.py"))]


def test_no_product_module_looks_like_a_test_to_pytest() -> None:
    bad = [str(p.relative_to(ROOT)) for p in product_modules()
           if any(fnmatch.fnmatch(p.name, pattern) for pattern in PYTEST_FILES)
           and not (p.parent == ROOT / "suites" and p.name.startswith("test_"))]
    assert not bad, f"modules pytest would collect as tests ({', '.join(PYTEST_FILES)}): rename them:\n" + \
        "\n".join(bad)


def test_a_module_name_in_several_packages_names_one_concept() -> None:
    rules = {m.RULE.replace("-", "_") for m in RULE_MODULES}
    where: dict[str, list[str]] = defaultdict(list)
    for path in product_modules():
        if path.parent == ROOT / "suites" and path.name.startswith("test_"):
            continue
        where[path.stem].append(str(path.relative_to(ROOT)))
    bad = [f"{name}: {', '.join(paths)}" for name, paths in sorted(where.items())
           if len(paths) > 1 and name not in rules and name not in BACKEND_PARTS and name not in SHARED]
    assert not bad, "one module name for several things (name each after its role, or after the rule it " \
                    "serves):\n" + "\n".join(bad)
