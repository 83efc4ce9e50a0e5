"""The results store: results directories written by the project's own JUnit writer, imported,
read back; bad stores refused with one line and nothing stored lost."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import sqlalchemy as sa

from reports.junit import write_junit
from reports.records import Record, RunStatus, settle
from reports.store import Store, StoreError, main, read_results_dir
from reports.store.schema import meta_table

QD = "libvirt:virtio-scsi:latency5ms"
BLK = "libvirt:virtio-blk:latency5ms"
SUITE = {"hypervisor": "libvirt", "controllers": "virtio-scsi,virtio-blk", "inject": "none",
         "guest.kernel": "6.1.0-28-cloud-amd64", "fio_version": "fio-3.33"}
#: The default series of SUITE's runs (model/across/series.py): no series property, no options JSON
SERIES = "libvirt_local_virtio_blk_virtio_scsi_lat5ms_embedded"


def write_run(parent: Path, name: str, records: list[Record], status: RunStatus | None = None,
              suite: dict[str, str] | None = None) -> Path:
    """A results directory as a run leaves it: ``parent/name/junit.xml`` by reports.junit.write_junit,
    with the run's start (a name such as ``20261120-020000`` read as UTC) as its timestamp."""
    d = parent / name
    d.mkdir(parents=True)
    try:
        started: dt.datetime | None = dt.datetime.strptime(name[:15], "%Y%m%d-%H%M%S").replace(tzinfo=dt.UTC)
    except ValueError:
        started = None
    write_junit(records, d / "junit.xml", suite_properties=SUITE if suite is None else suite,
                status=status or RunStatus(), started=started, hostname="ci-7")
    return d


def healthy(qd32: tuple[float, ...] = (25.1, 25.3, 24.9, 25.2), outcome: str = "passed") -> list[Record]:
    qd = {f"qd32_host_depth.r{i}": v for i, v in enumerate(qd32, 1)}
    return [Record("suites/test_queue_depth.py::t[a]", "queue-depth", QD,
                   {**qd, "qd32_iops": 6400.0, "qd32_host_source": "bpftrace", "mystery_number": 3},
                   outcome, "" if outcome == "passed" else "host saw 1.0"),  # type: ignore[arg-type]
            Record("suites/test_io_size.py::t[b]", "io-size", BLK, {"split_factor": 1.0}, "passed"),
            Record("suites/test_limits.py::t[c]", "limits", BLK, {}, "error", "guest lost"),
            Record("suites/test_alignment.py::t[d]", "alignment", BLK, {}, "skipped", "no trace")]


def test_a_results_directory_round_trips(tmp_path: Path, store_url: str) -> None:
    d = write_run(tmp_path, "20261120-020000", healthy())
    store = Store(store_url)
    run_id, new = store.import_dir(d)
    assert new
    run = store.run(run_id)
    assert run.complete and run.source == str(d.resolve()) and str(run.started) == "2026-11-20 02:00:00"
    assert run.options == {"hypervisor": "libvirt", "controllers": "virtio-scsi,virtio-blk", "inject": "none"}
    assert run.fingerprint == {"guest.kernel": "6.1.0-28-cloud-amd64", "fio_version": "fio-3.33"}
    assert store.verdicts(run_id) == {("queue-depth", QD): "passed", ("io-size", BLK): "passed",
                                      ("limits", BLK): "error", ("alignment", BLK): "skipped"}
    series = store.series(run_id)
    assert series[("queue-depth", QD, "qd32_host_depth")].values == (25.1, 25.3, 24.9, 25.2)  # every sample, in order
    assert series[("queue-depth", QD, "qd32_iops")].unit == "IO/s"
    assert series[("io-size", BLK, "split_factor")].direction == "lower-better"
    assert ("queue-depth", QD, "qd32_host_source") not in series  # text: stored, but not a series
    assert store.unknown_metrics(run_id) == ["mystery_number"]
    assert store.counts(run_id) == {"verdicts": 4, "metrics": 5, "samples": 8}
    with store.engine.connect() as conn:
        text = conn.execute(sa.text("SELECT s.text FROM samples s JOIN metrics m ON s.metric_id = m.id "
                                    "WHERE m.name = 'qd32_host_source'")).scalar_one()
    assert text == "bpftrace"
    assert store.import_dir(d) == (run_id, False)  # imported again: the same run, nothing added
    assert store.counts(run_id)["samples"] == 8 and len(store.runs()) == 1


def test_an_interrupted_run_is_stored_incomplete_with_not_run_apart_from_skips(tmp_path: Path) -> None:
    records, status = settle([Record("n1", "multi-queue", BLK, {}, "passed", started=True),
                              Record("n2", "queue-depth", BLK, {"qd1_iops": 150.0}, started=True),
                              Record("n3", "io-size", BLK)], "SIGINT")
    run = read_results_dir(write_run(tmp_path, "20261121-020000", records, status))
    assert not run.complete
    assert {k: o for k, (o, _) in run.verdicts.items()} == {("multi-queue", BLK): "passed",
                                                            ("queue-depth", BLK): "error", ("io-size", BLK): "not run"}
    assert "interrupted_by" not in run.fingerprint and ("run", "incomplete") not in run.verdicts


def test_bad_directories_are_named_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"no junit\.xml in it"):
        read_results_dir(tmp_path)
    (tmp_path / "junit.xml").write_text("<testsuite")
    with pytest.raises(StoreError, match="not readable XML"):
        read_results_dir(tmp_path)


def test_a_store_of_a_newer_schema_is_refused_and_left_alone(tmp_path: Path, store_url: str) -> None:
    url = store_url
    store = Store(url)
    store.import_dir(write_run(tmp_path, "r1", healthy()))
    with store.engine.begin() as conn:
        conn.execute(meta_table.update().where(meta_table.c.key == "schema_version").values(value="99"))
    store.close()
    with pytest.raises(StoreError, match=r"schema version 99, written by a newer vioconform .* Nothing in it was changed"):
        Store(url)
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT value FROM meta")).scalar_one() == "99"
        assert conn.execute(sa.text("SELECT count(*) FROM runs")).scalar_one() == 1
    engine.dispose()


def test_unusable_store_urls_are_one_clear_line(tmp_path: Path, store_url: str) -> None:
    with pytest.raises(StoreError, match="does not exist; create it or give another --store"):
        Store(f"sqlite:///{tmp_path / 'missing' / 'v.db'}")
    with pytest.raises(StoreError, match="SQLAlchemy URL such as"):
        Store("nonsense://")
    with pytest.raises(StoreError, match="has no run 7; list its runs"):
        Store(store_url).run(7)


def test_import_command(tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    url = store_url
    d = write_run(tmp_path, "20261120-020000", healthy())
    assert main(["--store", url, "import", str(d), str(tmp_path / "nothing")]) == 2
    out, err = capsys.readouterr()
    assert f"{d}: run 1: 4 verdicts, 5 metrics, 8 samples; stored as parameters, not in model/across/metrics.py: " \
           "mystery_number" in out
    assert "nothing: no junit.xml in it" in err
    assert main(["--store", url, "import", str(d)]) == 0
    assert "already stored as run 1 (not changed)" in capsys.readouterr().out
    assert main(["--store", url, "list"]) == 0
    assert capsys.readouterr().out.split("\t")[:3] == ["1", "2026-11-20 02:00:00", "complete"]
