"""The import graph of the project's code points one way: no module cycles, no upward package edges.

Every module's imports are read with ``ast`` (nothing is imported, so the check needs no libvirt or
pyVmomi). Imports inside ``if TYPE_CHECKING:`` blocks and inside functions count like any other:
an annotation that names a class of a higher layer is a dependency on that layer all the same,
and a cycle hidden behind ``TYPE_CHECKING`` still means two modules cannot be read one without
the other. Narrow Protocols in the lower layer take their place (``hypervisors.base.BackendOptions``,
``hypervisors.libvirt.trace.QmpChannel``, ``transport.ssh.SshTarget``).

The layers, lowest first: a module may import its own package and the packages listed
below its own, never a sibling or a higher one::

    model                       pure data: parse/ (foreign formats), rules/ (the rules), judging/ (the verdict
                                machinery they share), across/ (across runs)
    transport                   SSH to a guest
    images                      what the host builds for a guest and caches: the embedded image, the static fio
    guest                       the programs run in the guest (guest/tools/)
    hypervisors                 the backends
    measure                     one measured window, a guest outside pytest
    fixtures                    the pytest plugin: options, hooks, fixtures
    suites                      the rules
    bench, conftest             entry points that wire the rest together

Inside ``model``, the parsers (``model.parse``) import nothing of the project but ``model.errors``
and each other: reading a format never depends on how it is judged.
The sub-packages of every package and its modules import one another one way too: no cycle between
them, even where no module cycle closes (``model.across`` reads the rule modules' declarations, so the
rules import nothing of it; ``reports.store`` reads ``reports.results``, which imports nothing of the
store); and the backends (``hypervisors.libvirt``, ``hypervisors.vsphere``) import nothing of each other.

``bench`` may import anything but a test: no ``suites.test_*`` module and nothing of ``tests``. What
a benchmark and a test share lives in a module both may import (``suites/queue_depth_points.py``,
``bench/sshserver.py``).

``reports`` (typed records, JUnit, HTML, charts, the results directory, the store) reads typed
records only: it imports ``model`` and nothing else, and only ``fixtures``, ``suites`` and the
entry points import it. ``model`` and ``reports`` import no pytest either: every hook of the suite
is in ``fixtures``, so both are read and tested without a pytest session.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The chain of layers, lowest first: each may import every one before it.
CHAIN = ("model", "transport", "images", "guest", "hypervisors", "measure", "fixtures", "suites")
#: Package (or module) -> the packages it may import besides itself. The longest matching name wins,
#: so a module can sit above its package. ``None``: an entry point, which may import anything.
MAY_IMPORT: dict[str, frozenset[str] | None] = {
    **{name: frozenset(CHAIN[:i]) for i, name in enumerate(CHAIN)},
    "fixtures": frozenset(CHAIN[:CHAIN.index("fixtures")]) | {"reports", "replay"},
    "suites": frozenset(CHAIN[:CHAIN.index("suites")]) | {"reports"},
    "reports": frozenset({"model"}),
    "replay": frozenset({"model"}),
    "bench": None, "conftest": None,
}
#: Packages that import no pytest (nor its internals or pluggy): the plugin is fixtures/.
PYTEST_FREE = ("model", "reports", "replay")
PYTEST_MODULES = ("pytest", "_pytest", "pluggy")
#: The project's own tests import whatever they test: checked for cycles only by not being listed.
SOURCES = ("model", "transport", "reports", "replay", "images", "guest", "hypervisors", "measure", "fixtures", "suites", "bench",
           "conftest.py")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for top in SOURCES:
        path = ROOT / top
        for file in [path] if path.suffix == ".py" else sorted(path.rglob("*.py")):
            found[module_name(file)] = file
    return found


def imported(tree: ast.AST, importer: str, is_package: bool) -> Iterator[tuple[str, int]]:
    """Every name an ``import`` statement of the module brings in, with its line."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the importer's package
                base = importer.split(".")
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield module, node.lineno
            for alias in node.names:  # ``from pkg import submodule``
                yield f"{module}.{alias.name}", node.lineno


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {project module it imports: line of the import}."""
    modules = project_modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        edges: dict[str, int] = {}
        for target, line in imported(ast.parse(path.read_text(), str(path)), name, path.name == "__init__.py"):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                edges.setdefault(target, line)
        graph[name] = edges
    return graph


def place(module: str) -> str:
    """The entry of MAY_IMPORT that places ``module`` (its package, or the module itself)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in MAY_IMPORT:
            return key
    raise AssertionError(f"module {module} is in no layer: add its package to MAY_IMPORT in {__file__}")


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def upward_edges(graph: dict[str, dict[str, int]]) -> list[str]:
    """Imports of a package the importer's layer may not import, as ``a -> b at line N``."""
    bad = []
    for importer, edges in sorted(graph.items()):
        home = place(importer)
        allowed = MAY_IMPORT[home]
        if allowed is None:
            continue
        for target, line in sorted(edges.items()):
            where = place(target)
            if where != home and where.split(".")[0] != home.split(".")[0] and where not in allowed:
                bad.append(f"{importer} ({home}) imports {target} ({where}) at line {line}; "
                           f"{home} may import {', '.join(sorted(allowed)) or 'nothing of the project'}")
    return bad


def pytest_imports(modules: dict[str, Path]) -> list[str]:
    """Imports of pytest in a module of PYTEST_FREE, as ``module imports pytest at line N``."""
    bad = []
    for name, path in sorted(modules.items()):
        if name.split(".")[0] not in PYTEST_FREE:
            continue
        for target, line in imported(ast.parse(path.read_text(), str(path)), name, path.name == "__init__.py"):
            if target.split(".")[0] in PYTEST_MODULES:
                bad.append(f"{name} imports {target} at line {line}")
                break
    return bad


def test_no_import_cycle_between_modules() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles (each a set of modules that import each other):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_packages_import_only_lower_layers() -> None:
    bad = upward_edges(import_graph())
    assert not bad, "imports against the layering (model <- transport <- images <- guest <- hypervisors <- measure <- " \
                    "fixtures <- suites; reports imports model only):\n" + "\n".join(bad)


def test_model_and_reports_import_no_pytest() -> None:
    bad = pytest_imports(project_modules())
    assert not bad, f"pytest is imported where it has no place ({', '.join(PYTEST_FREE)}: the plugin is " \
                    "fixtures/):\n" + "\n".join(bad)


def test_parsers_import_only_model_errors_and_each_other() -> None:
    graph = import_graph()
    bad = [f"{importer} imports {target} at line {line}" for importer, edges in sorted(graph.items())
           if importer.startswith("model.parse") for target, line in sorted(edges.items())
           if not (target == "model.errors" or target.startswith("model.parse"))]
    assert not bad, "a parser (model/parse/) imports beyond model.errors and the other parsers:\n" + "\n".join(bad)


# The checker itself, on small graphs: it must see what it is meant to see.
def test_checker_finds_a_cycle_hidden_behind_type_checking(tmp_path: Path) -> None:
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from hypervisors.x import B\n")
    assert ("hypervisors.x", 3) in list(imported(tree, "hypervisors.y", False))
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]


def test_checker_resolves_relative_imports() -> None:
    tree = ast.parse("from . import trace\nfrom ..base import Guest\n")
    names = [n for n, _ in imported(tree, "hypervisors.libvirt.backend", False)]
    assert "hypervisors.libvirt.trace" in names and "hypervisors.base" in names


@pytest.mark.parametrize(("importer", "target", "allowed"), [
    ("hypervisors.base", "model.types", True),
    ("hypervisors.libvirt.record", "reports.cli", False),  # reports is not below hypervisors
    ("hypervisors.libvirt.backend", "fixtures.options", False),  # a higher layer
    ("measure.window", "hypervisors.base", True),
    ("reports.html", "hypervisors.vsphere.config", False),
    ("transport.ssh", "hypervisors.base", False),
    ("guest.tools.fio_push", "images.fio_static", True),  # a guest tool pushes what the host built
    ("images.build", "guest.tools.fio", False),  # the host's build runs nothing in a guest
    ("hypervisors.libvirt.imageboot", "images.seed", True),
    ("reports.junit", "fixtures.session", False),  # reports reads typed records: the plugin is above it
    ("fixtures.session", "reports.results", True),
    ("hypervisors.libvirt.accel", "hypervisors.libvirt.backend", True),  # inside a package: cycles decide
])
def test_checker_places_edges(importer: str, target: str, allowed: bool) -> None:
    assert (upward_edges({importer: {target: 1}}) == []) is allowed


def test_checker_finds_pytest_in_reports(tmp_path: Path) -> None:
    for name, source in {"reports.html": "import pytest\n", "reports.junit": "from _pytest.outcomes import Failed\n",
                         "model.x": "if True:\n    import pytest\n", "fixtures.outcomes": "import pytest\n"}.items():
        (tmp_path / f"{name}.py").write_text(source)
    found = pytest_imports({n: tmp_path / f"{n}.py" for n in ("reports.html", "reports.junit", "model.x",
                                                                 "fixtures.outcomes")})
    assert found == ["model.x imports pytest at line 2", "reports.html imports pytest at line 1",
                     "reports.junit imports _pytest.outcomes at line 1"]


def part(module: str) -> str:
    """The part of its package a module belongs to: its sub-package (``model.rules``, ``reports.store``,
    ``hypervisors.libvirt``), else the module itself (``model.blame``)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else module


def part_graph(graph: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """The import graph of the parts (:func:`part`) of every package, without the edges inside a part
    or between packages (the chain decides those)."""
    parts: dict[str, dict[str, int]] = {}
    for importer, edges in graph.items():
        mine = parts.setdefault(part(importer), {})
        for target, line in edges.items():
            if target.split(".")[0] == importer.split(".")[0] and part(target) != part(importer):
                mine.setdefault(part(target), line)
    return parts


def test_no_import_cycle_between_the_parts_of_a_package() -> None:
    found = cycles(part_graph(import_graph()))
    assert not found, "sub-packages of one package that import each other (move what one needs of the other " \
                      "out of it):\n" + "\n".join(" <-> ".join(c) for c in found)


def test_a_cycle_between_parts_is_found() -> None:
    graph = {"model.rules.a": {"model.across.b": 1}, "model.across.b": {"model.rules": 2}, "model.rules": {}}
    assert cycles(part_graph(graph)) == [["model.across", "model.rules"]]
    assert cycles(graph) == []  # no module cycle: only the parts close one
    store = {"reports.store.engine": {"reports.results": 1}, "reports.results": {"reports.store.read": 3}}
    assert cycles(part_graph(store)) == [["reports.results", "reports.store"]]


#: Packages whose sub-packages are alternatives, each importing nothing of another: a machine without
#: pyVmomi runs the libvirt backend.
SIBLINGS = ("hypervisors",)


def sibling_edges(graph: dict[str, dict[str, int]], siblings: set[str]) -> list[str]:
    """Imports between two sub-packages of :data:`SIBLINGS` named in ``siblings``, as ``a imports b at line N``."""
    def sibling(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if len(parts) >= 2 and parts[0] in SIBLINGS and parts[1] in siblings else None

    return [f"{importer} imports {target} at line {line}" for importer, edges in sorted(graph.items())
            for target, line in sorted(edges.items())
            if sibling(importer) and sibling(target) and sibling(importer) != sibling(target)]


def test_backends_import_nothing_of_each_other() -> None:
    backends = {p.name for top in SIBLINGS for p in (ROOT / top).iterdir() if (p / "__init__.py").is_file()}
    assert {"libvirt", "vsphere"} <= backends
    assert sibling_edges({"hypervisors.vsphere.x": {"hypervisors.libvirt.qmp": 4, "hypervisors.base": 5}},
                         backends) == ["hypervisors.vsphere.x imports hypervisors.libvirt.qmp at line 4"]
    bad = sibling_edges(import_graph(), backends)
    assert not bad, "a backend imports another (share it through hypervisors/base.py):\n" + "\n".join(bad)


def test_bench_imports_no_test_module() -> None:
    bad: list[str] = []
    for name, path in sorted(project_modules().items()):
        if name.split(".")[0] != "bench":
            continue
        for target, line in imported(ast.parse(path.read_text(), str(path)), name, path.name == "__init__.py"):
            top, _, rest = target.partition(".")
            said = bad and bad[-1].startswith(f"{name} imports ") and bad[-1].endswith(f" at line {line}")
            if not said and (top == "tests" or (top == "suites" and rest.split(".")[0].startswith("test_"))):
                bad.append(f"{name} imports {target} at line {line}")
    assert not bad, "bench imports test modules (move what it needs into a module both may import):\n" + \
        "\n".join(bad)
