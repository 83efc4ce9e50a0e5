"""``suites.assertions.judge_rule``: a suite's one call that judges its rule, with the repeats and the raw
directory the rule declares (model/rules/<rule>.py's DEFAULT_REPEATS and REPEATABLE, --repeats)."""

from __future__ import annotations

from pathlib import Path

from fixtures.options import SuiteOptions
from model.judging.verdict import RuleVerdict
from reports.records import Record
from suites.assertions import judge_rule, raw_dir_for
from tests.unit.fake_shell import FakeShell, fake_disk

QUIET = "VIOCONFORM-KLOG source=dmesg\nVIOCONFORM-KLOG mark=found\n<6>[  311.000000] smpboot: CPU 1 is now offline\n"


def _options(results: Path, repeats: int | None = None) -> SuiteOptions:
    base = SuiteOptions("libvirt", None, "qemu:///system", "auto", ("virtio-blk",), "latency", 5.0, 3.0,
                        (), (), None, 120.0, results, results / "junit.xml")
    return SuiteOptions(**{**base.__dict__, "repeats": repeats})


def _judged(rule: str, options: SuiteOptions, own_dir: bool = True) -> list[Path]:
    """The raw directories ``judge_rule`` gave each repeat of a passing ``rule``."""
    disk = fake_disk(FakeShell(handlers=[(r"> /dev/kmsg$", lambda _c: ""), (r"VIOCONFORM-KLOG", lambda _c: QUIET)]))
    record = Record("n", rule, disk.config_id)
    seen: list[Path] = []

    def once(raw: Path) -> RuleVerdict:
        seen.append(raw)
        return RuleVerdict(rule, ("measured",), ())

    judge_rule(record, options, once, exact=True, baseline=None, disks=(disk,), own_dir=own_dir)
    assert record.verdict is not None and record.verdict.passed
    return seen


def test_the_rule_declares_its_repeats_and_its_folder(tmp_path: Path) -> None:
    raw = raw_dir_for(tmp_path, "fake:virtio-blk")
    assert _judged("direct-io", _options(tmp_path)) == [raw / "direct-io"]
    assert _judged("buffered-direct", _options(tmp_path)) == [raw / "buffered-direct" / "r1",
                                                               raw / "buffered-direct" / "r2"]
    assert _judged("queue-depth", _options(tmp_path, repeats=3), own_dir=False) == [raw / "r1", raw / "r2", raw / "r3"]


def test_a_rule_that_is_not_repeatable_runs_once_whatever_repeats_says(tmp_path: Path) -> None:
    assert _judged("limits", _options(tmp_path, repeats=5), own_dir=False) == [raw_dir_for(tmp_path, "fake:virtio-blk")]
