"""The run hands its own data to the results store (reports/run_data.py): the JUnit file is written from
the same ``BuiltRun``, and what the store is handed equals what ``python -m reports.store import`` reads
back from that JUnit file, for every rule's real verdicts and for the edges of the JUnit format (an
interrupted run, a rule never run, line breaks, tabs and characters XML cannot hold); so the two paths
cannot drift. No registered secret reaches the JUnit file or the store by either path."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from model import secret
from reports.junit import write_run_junit
from reports.records import Record, settle
from reports.run_data import BuiltRun, build_run
from reports.store import RUN_ID_KEY, Store, read_results_dir, store_run
from tests.unit.rule_records import verdicts

CONFIG = "libvirt:virtio-scsi:latency5ms"
STARTED = dt.datetime(2026, 12, 7, 15, 4, 5, 678, tzinfo=dt.timezone(dt.timedelta(hours=1)))
SUITE = {"hypervisor": "libvirt", "controllers": "virtio-scsi", "inject": "none", RUN_ID_KEY: "b5c3e1e0-uid",
         "options": '{"depths": [1, 32], "stall_s": 30.0, "surprise_removal": false}',
         "guest.kernel": "6.1.0-28-amd64", "note": "two\nlines\tand\r\na tab"}
SECRET = "Zq9-h4nd0ver-pw"


def _every_rule() -> list[Record]:
    """A record of each verdict every rule's judge gives on the recorded inputs, failed where it failed."""
    out = []
    for rule, judged in sorted(verdicts().items()):
        for i, v in enumerate(judged):
            r = Record(f"suites/test_{rule}.py::t[{CONFIG}{i}]", rule, f"{CONFIG}{i}", {"own": 1.5, "said": "x y"},
                       "passed" if v.passed else "failed", v.explain(), duration_s=0.1 + i / 7, started=True,
                       verdict=v, blame="" if v.passed else "guest driver", blame_reason="" if v.passed else "why")
            out.append(r)
    return out


def _edges() -> list[Record]:
    return [Record("suites/test_limits.py::t[c]", "limits", "c", {}, "error", "guest lost\nthe console said so",
                   details="Traceback...\nGuestDied", duration_s=2.25, started=True),
            Record("suites/test_alignment.py::t[d]", "alignment", "d", {}, "skipped", "no trace\tevents: nvme",
                   started=True),
            Record("suites/test_discard.py::t[e]", "discard", "e", {"odd": "a\x01b\x7fc\nd\te"}, "failed", "",
                   started=True),
            Record("suites/test_resize.py::t[f]", "resize", "f", started=True),  # cut short: an error
            Record("suites/test_hotplug.py::t[g]", "hotplug", "g")]  # never started: not run


def _written(tmp_path: Path, run: BuiltRun) -> Path:
    directory = tmp_path / "results" / "20261207-150405"
    directory.mkdir(parents=True)
    write_run_junit(run, directory / "junit.xml", results_dir=directory)
    return directory


@pytest.mark.parametrize("interrupted_by", ["", "SIGTERM"])
def test_what_the_store_is_handed_is_what_its_junit_file_reads_back(tmp_path: Path, interrupted_by: str) -> None:
    records, status = settle(_every_rule() + _edges(), interrupted_by)
    run = build_run(records, SUITE, status, STARTED, "ci-7")
    directory = _written(tmp_path, run)
    handed = run.run_data(directory)
    assert handed == read_results_dir(directory)
    assert handed.complete is False and len(handed.verdicts) == len(records) > 30
    assert {o for o, _ in handed.verdicts.values()} == {"passed", "failed", "error", "skipped", "not run"}
    assert handed.verdicts[("discard", "e")] == ("failed", "FAIL: no message recorded")
    assert handed.properties[("discard", "e", "odd")] == "abc\nd\te"
    assert handed.fingerprint["note"] == "two lines and a tab"
    assert (handed.started, handed.started_from, handed.host) == (dt.datetime(2026, 12, 7, 14, 4, 5), "timestamp",
                                                                  "ci-7")


def test_a_complete_run_is_stored_as_the_junit_file_would_store_it(tmp_path: Path, store_url: str) -> None:
    records, status = settle(_every_rule(), "")
    run = build_run(records, SUITE, status, STARTED, "ci-7")
    directory = _written(tmp_path, run)
    run_id, new = store_run(store_url, run.run_data(directory))
    assert new and store_run(store_url, lambda: read_results_dir(directory)) == (run_id, False)  # the same run
    store = Store(store_url)
    try:
        stored = store.run(run_id)
        assert stored.complete and stored.source == str(directory.resolve()) and stored.host == "ci-7"
        assert store.verdicts(run_id) == {k: o for k, (o, _) in read_results_dir(directory).verdicts.items()}
    finally:
        store.close()


def test_no_secret_reaches_the_junit_file_or_the_store_by_either_path(tmp_path: Path) -> None:
    secret.register(SECRET)
    try:
        records, status = settle([
            Record("suites/test_io_size.py::t[a]", "io-size", "a", {"url": f"qemu+ssh://root:{SECRET}@h/system"},
                   "failed", f"FAIL: {SECRET} in the message", details=f"at {SECRET}", started=True, blame="unknown",
                   blame_reason=f"because {SECRET}"),
            Record("suites/test_limits.py::t[b]", "limits", "b", {}, "skipped", f"not {SECRET}", started=True)],
            f"SIGTERM {SECRET}")
        run = build_run(records, {**SUITE, "libvirt.uri": f"qemu+tcp://root:{SECRET}@h/system"}, status, STARTED)
        directory = _written(tmp_path, run)
        handed, read = run.run_data(directory), read_results_dir(directory)
        assert handed == read
        junit = (directory / "junit.xml").read_text()
        assert SECRET not in junit and SECRET not in repr(handed) and junit.count("***") >= 7
        for name, data in (("handed", handed), ("read", read)):
            db = tmp_path / f"{name}.db"
            store_run(f"sqlite:///{db}", data)
            assert SECRET.encode() not in db.read_bytes() and b"***" in db.read_bytes()
    finally:
        secret._LIVE.discard(SECRET)
