"""Facts the README and docs/ state about the code and the project's files, kept true by reading both:
the fault list, the suites, how many rule tests a default run has, what tox passes on, the Jenkins
recipe's JUnit step, buffered-direct's skip, the Python the tools run with, the KVM probe's cache.
Each failure names the file and what differs."""

from __future__ import annotations

import configparser
import re

from hypervisors.libvirt import accel
from hypervisors.libvirt.defaults import DEFAULTS as LIBVIRT
from model.faults import FAULTS
from model.rules import opt_in_rules
from model.rules.buffered_direct import NO_BASELINE
from tests.unit.test_docs import DOCS, README, REFERENCE, ROOT, doc_files, rules

TOX_INI = ROOT / "tox.ini"


def _section(text: str, start: str, end: str) -> str:
    return text[text.index(start):text.index(end, text.index(start))]


def test_the_readme_lists_every_fault() -> None:
    listed = re.findall(r"`([a-z-]+)`", _section(README.read_text(), "Faults (", "\n\n"))
    assert sorted(listed) == sorted(FAULTS), f"README.md's fault list {listed} is not model/faults.py's {sorted(FAULTS)}"


def test_the_references_inject_option_names_every_fault() -> None:
    row = next(line for line in REFERENCE.read_text().splitlines() if line.startswith("| `--inject FAULT`"))
    missing = [f for f in FAULTS if f"`{f}`" not in row]
    assert not missing, f"docs/reference.md's --inject row does not name {missing}"


def test_the_architecture_page_names_every_suite_module() -> None:
    layout = _section((DOCS / "architecture.md").read_text(), "suites/ ", "\nfixtures/ ")
    missing = [p.stem for p in sorted((ROOT / "suites").glob("test_*.py")) if p.stem not in layout]
    assert not missing, f"docs/architecture.md's layout does not name the suites {missing}"


def test_the_docs_count_the_default_runs_rule_tests_right() -> None:
    """A default run has every rule of the default suite on each default controller: 13 rules x 2 = 26 rule
    tests (a rule outside it, ``OPT_IN``, runs only with --with-rules)."""
    default = len(rules() - set(opt_in_rules())) * len(LIBVIRT.controllers)
    wrong = [f"{p.relative_to(ROOT)}:{n}: {m.group(0)}" for p in doc_files()
             for n, line in enumerate(p.read_text().splitlines(), 1)
             for m in re.finditer(r"\b\d+/(\d+) rule tests done|\bdefault (?:suite|run)'s (\d+) tests\b", line)
             if int(m.group(1) or m.group(2)) != default]
    assert not wrong, f"a default run has {default} rule tests; the docs say otherwise:\n" + "\n".join(wrong)


def _passenv() -> set[str]:
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(TOX_INI)
    return {v.strip() for v in ini["testenv"]["passenv"].splitlines() if v.strip() and not v.strip().startswith("#")}


def test_no_page_says_tox_drops_the_stores_password() -> None:
    """tox.ini passes PGPASSWORD and PGPASSFILE on to the suite; ci-recipes.md once said it did not."""
    assert {"PGPASSWORD", "PGPASSFILE"} <= _passenv()
    said = [f"{p.relative_to(ROOT)}:{n}" for p in doc_files() for n, line in enumerate(p.read_text().splitlines(), 1)
            if "PGPASSWORD` not among" in line or "PGPASSWORD not among" in line]
    assert not said, said


def test_every_jenkins_junit_step_keeps_the_cases_properties() -> None:
    """Without keepProperties Jenkins drops a case's properties, and with them its blame."""
    steps = [line.strip() for line in (DOCS / "ci-recipes.md").read_text().splitlines()
             if line.strip().startswith("junit ")]
    assert steps and all("keepProperties: true" in s for s in steps), steps


def test_buffered_directs_skip_names_every_baseline_and_its_page_quotes_it() -> None:
    for form in ("--baseline last", "--baseline RUN", "--save-baseline"):
        assert form in NO_BASELINE
    assert NO_BASELINE in (DOCS / "rules" / "buffered-direct.md").read_text()


def test_the_tools_python_is_the_suite_environments() -> None:
    """The reference sends a stock Debian's user to ``.tox/suite/bin/python``: the environment tox -e
    suite-setup makes for ./vioconform, as long as tox.ini does not move tox's work directory."""
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(TOX_INI)
    assert "toxworkdir" not in ini["tox"]
    assert ini["testenv:suite-setup"]["envdir"].strip() == "{toxworkdir}/suite"
    assert 'venv="$root/.tox/suite"' in (ROOT / "vioconform").read_text()
    assert ".tox/suite/bin/python -m reports.compare" in REFERENCE.read_text()


def test_the_docs_name_the_kvm_probes_cache_and_how_to_probe_again() -> None:
    for page in (DOCS / "user-guide.md", DOCS / "troubleshooting.md"):
        text = " ".join(page.read_text().split())
        assert f"$XDG_CACHE_HOME/vioconform/{accel.cache_file().name}" in text, page
        assert "remove that file" in text, page
    assert "--boot-timeout" not in accel.PROBE_REMEDY

