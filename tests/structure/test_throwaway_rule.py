"""What a new rule needs: a rule made up here, in a copy of the tree, is three new files and no edit.

docs/architecture.md's "Adding a rule" says a rule is its module (``model/rules/<rule>.py``), its suite
file (``suites/test_<rule>.py``) and its page (``docs/rules/<rule>.md``). This test writes those three
for a rule named ``throwaway`` into a copy of the repository's tracked files, shows with ``git status``
that they are the only change, and that everything that lists or reads rules picks it up: the catalogue
(``model.rules``), the option list (``--require`` takes it, ``--repeats``' help names its repeats, and
the option its module declares is in ``--help``, refused with the rule's words and read by its suite file),
blame (its ``BLAME``), the store (its metric's unit and direction, its minimum effect, its host-CPU
bound metric), the suite's collection and the docs' checks. Then it takes the page and the suite file
away again, and the tests that keep the catalogue whole fail naming the rule; and the metric table's
test fails until the rule's inputs drive its judge in tests/unit/rule_records.py (a rule's tests are
its own to write), and the docs' option list until its option has a row in docs/reference.md.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NEW = ("model/rules/throwaway.py", "suites/test_throwaway.py", "docs/rules/throwaway.md")

RULE_MODULE = '''"""throwaway: a rule tests/structure/test_throwaway_rule.py makes, to show what a rule needs."""

from __future__ import annotations

from collections.abc import Mapping

from model.blame import BlameSettings
from model.judging.rule_option import RuleOption, positive_float
from model.judging.spec import HIGHER, Metrics, MetricSpec
from model.judging.verdict import RuleVerdict

RULE = "throwaway"
#: Made up: the test's numbers.
MIN_IOPS = 1.0
#: Its own option: the IO/s it asks for.
FLOOR = RuleOption("--throwaway-iops", positive_float, MIN_IOPS,
                   f"the IO/s the throwaway rule asks for (default: {MIN_IOPS:g})", "IOPS")
OPTIONS = (FLOOR,)
METRICS: Metrics = ((r"throwaway_iops", MetricSpec("IO/s", HIGHER)),)
MIN_EFFECTS: Mapping[str, float] = {"throwaway_iops": 0.25}
BLAME = BlameSettings(frozenset({"nr_requests"}))
DEFAULT_REPEATS = 3
REPEATABLE = True
HOST_CPU_BOUND: tuple[str, ...] = (r"throwaway_iops",)


def judge_throwaway(iops: float, floor: float = MIN_IOPS) -> RuleVerdict:
    """Passes at ``floor`` (``--throwaway-iops``) or more."""
    problems = () if iops >= floor else (f"{iops:g} IO/s, below {floor:g}",)
    return RuleVerdict(RULE, (f"{iops:g} IO/s",), problems, properties={"throwaway_iops": iops})
'''

SUITE = '''"""The throwaway rule (tests/structure/test_throwaway_rule.py): what a rule's suite file is."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from measure.disk import GuestDisk
from model.judging.verdict import RuleVerdict
from model.rules.throwaway import FLOOR, judge_throwaway
from reports.records import Record
from reports.store.baseline import StoredBaseline
from suites.assertions import judge_rule


@pytest.mark.rule("throwaway")
def test_throwaway(disk: GuestDisk, suite_options: SuiteOptions, record: Record,
                   stored_baseline: StoredBaseline | None) -> None:
    def once(_raw: Path) -> RuleVerdict:
        return judge_throwaway(1.0, suite_options.option(FLOOR))

    judge_rule(record, suite_options, once, exact=False, baseline=stored_baseline, disks=(disk,))
'''

PAGE = """# throwaway

**What it checks.** Nothing: tests/structure/test_throwaway_rule.py writes this page to show what a rule needs.
Code: `model/rules/throwaway.py` (the verdict), `suites/test_throwaway.py` (the measurement).
"""

#: What the copy checks of the new rule, in one process (the copy first on sys.path).
CHECKS = '''
import re, sys
from pathlib import Path
from model.rules import RULE_MODULES, blame, rule_module
from model.blame import Trail
from model.across.metrics import describe
from model.across.moves import MIN_EFFECTS
from model.across.contention import HOST_CPU_BOUND
from fixtures.options_results import DEFAULT_REPEATS, _rules
from reports.store import RunData, Store
module = rule_module("throwaway")
assert module in RULE_MODULES and module.__file__.startswith(sys.argv[1]), module.__file__
print("catalogue", [m.RULE for m in RULE_MODULES].index("throwaway"))
assert _rules("queue-depth,throwaway") == ("queue-depth", "throwaway")
assert DEFAULT_REPEATS["throwaway"] == 3
print("options ok")
from types import SimpleNamespace
from _pytest.config.argparsing import Parser
from fixtures import options
from fixtures.options import SuiteOptions
from model.rules.throwaway import FLOOR
parser = Parser(_ispytest=True)
options.pytest_addoption(parser)
given = SuiteOptions.from_config(SimpleNamespace(option=parser.parse(["--throwaway-iops", "2.5"])))
assert given.option(FLOOR) == 2.5 and given.recorded()["throwaway_iops"] == 2.5, given.rule_options
print("its option ok")
changed = Trail("dut disk sdb", "read_ahead_kb", "read-ahead", None, None, 128, 0)
assert blame("no-such-rule", [changed]).layer == "guest configuration"  # a rule no module declares: every setting
assert blame("throwaway", [changed]).layer != "guest configuration"  # its BLAME names nr_requests only
assert blame("throwaway", [Trail("dut disk sdb", "nr_requests", "nr_requests", None, None, 256, 2)]).layer == \\
    "guest configuration"
print("blame ok")
info = describe("throwaway_iops.r2")
assert (info.name, info.unit, info.direction, info.known, info.repeat) == ("throwaway_iops", "IO/s", "higher-better",
                                                                           True, 2), info
assert MIN_EFFECTS["throwaway_iops"] == 0.25 and HOST_CPU_BOUND.fullmatch("throwaway_iops")
store = Store(f"sqlite:///{sys.argv[2]}")
run_id, _ = store.add_run(RunData({"hypervisor": "libvirt"}, verdicts={("throwaway", "c"): ("passed", "")},
                                  properties={("throwaway", "c", "throwaway_iops"): "5.0"}))
with store.connect() as conn:
    row = conn.exec_driver_sql("SELECT unit, direction, known FROM metrics WHERE name = 'throwaway_iops'").one()
assert tuple(row) == ("IO/s", "higher-better", 1), row
assert store.verdicts(run_id) == {("throwaway", "c"): "passed"}
store.close()
print("store ok")
'''


def _run(tree: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, *args], cwd=tree, capture_output=True, text=True, check=False,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree), "HOME": str(tree.parent),
                               "MPLCONFIGDIR": str(tree.parent / "mpl")}, timeout=300)
    if check:
        assert done.returncode == 0, f"{' '.join(args)} in the copy:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


def _git(tree: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args], cwd=tree, check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository's tracked files, committed in a repository of its own."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout of the project")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
    copy = tmp_path_factory.mktemp("throwaway") / "tree"
    for name in listed.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    _git(copy, "init", "-q")
    _git(copy, "add", "-A")
    _git(copy, "commit", "-q", "-m", "the tree as it is")
    for name, text in zip(NEW, (RULE_MODULE, SUITE, PAGE), strict=True):
        (copy / name).write_text(text)
    return copy


def test_a_rule_is_three_new_files(tree: Path) -> None:
    changed = sorted(line[3:] for line in _git(tree, "status", "--porcelain", "--untracked-files=all").splitlines())
    assert changed == sorted(NEW)


def test_the_catalogue_the_options_blame_and_the_store_pick_it_up(tree: Path) -> None:
    out = _run(tree, "-c", CHECKS, str(tree), str(tree.parent / "store.db")).stdout
    assert out.splitlines()[1:] == ["options ok", "its option ok", "blame ok", "store ok"], out
    helped = _run(tree, "-m", "pytest", "-p", "no:cacheprovider", "suites", "--help").stdout
    assert "throwaway 3" in " ".join(helped.split()), "--repeats' help names the rule's own repeats"
    assert "--throwaway-iops=IOPS the IO/s the throwaway rule asks for (default: 1)" in " ".join(helped.split())
    refused = _run(tree, "-m", "pytest", "-p", "no:cacheprovider", "suites", "--throwaway-iops", "0", check=False)
    assert refused.returncode == 4 and "argument --throwaway-iops: '0' must be above 0" in refused.stderr, refused
    collected = _run(tree, "-m", "pytest", "-p", "no:cacheprovider", "suites", "--collect-only", "-q",
                     "-k", "throwaway").stdout
    assert "suites/test_throwaway.py::test_throwaway[libvirt:" in collected, collected


def test_the_tests_that_keep_the_catalogue_whole_pass_with_it_and_fail_without_its_files(tree: Path) -> None:
    whole = ("tests/unit/test_docs.py::test_every_rule_has_its_page_and_every_page_its_rule",
             "tests/unit/test_rule_modules.py", "tests/unit/test_layering.py", "tests/unit/test_names.py",
             "tests/unit/test_kernel_log_watch.py::test_every_rule_test_marks_the_kernel_log",
             "tests/unit/test_help_defaults.py", "tests/unit/test_rule_own_options.py")
    # The rule's option needs its row in docs/reference.md's option table: the docs' test names it.
    listed = "tests/unit/test_docs.py::test_every_option_help_lists_is_in_the_reference"
    done = _run(tree, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rf", *whole, "tests/unit/test_metric_table.py",
                listed, check=False)
    failed = sorted(line.split(" - ")[0] for line in done.stdout.splitlines() if line.startswith("FAILED "))
    table = "FAILED tests/unit/test_metric_table.py::"
    assert "--throwaway-iops" in done.stdout, done.stdout[-4000:]
    assert failed == [f"FAILED {listed}", f"{table}test_every_declared_pattern_matches_something_its_rule_records",
                      f"{table}test_every_property_a_rule_records_has_its_own_spec[throwaway]",
                      f"{table}test_every_rule_is_driven"], done.stdout[-4000:]
    (tree / "docs/rules/throwaway.md").rename(tree.parent / "throwaway.md")
    (tree / "suites/test_throwaway.py").rename(tree.parent / "test_throwaway.py")
    try:
        missing = _run(tree, "-m", "pytest", "-p", "no:cacheprovider", "-q", *whole[:2], check=False)
    finally:
        (tree.parent / "throwaway.md").rename(tree / "docs/rules/throwaway.md")
        (tree.parent / "test_throwaway.py").rename(tree / "suites/test_throwaway.py")
    assert missing.returncode == 1, missing.stdout[-3000:]
    assert "FAILED tests/unit/test_docs.py::test_every_rule_has_its_page_and_every_page_its_rule" in missing.stdout
    assert "FAILED tests/unit/test_rule_modules.py::test_the_rule_is_two_files_and_a_page[throwaway]" in missing.stdout
