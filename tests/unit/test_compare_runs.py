"""``python -m reports.compare A B``: recorded runs (results directories written by the project's
JUnit writer) with a known regression, a fix, a harness error, flaky history and two healthy runs
that must compare as "no change"."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from reports.records import Record, RunStatus, settle
from reports.store import Store
from reports.store.compare import main
from tests.unit.test_store import BLK, QD, SERIES, SUITE, healthy, write_run

TCQ_OFF = (1.0, 1.0, 1.1, 1.0)  # a tcq-off run: the host sees one request at a time whatever the guest offers


def test_two_healthy_runs_compare_as_no_change(tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path, "20261120-020000", healthy((25.1, 25.3, 24.9, 25.2)))
    b = write_run(tmp_path, "20261121-020000", healthy((25.0, 25.4, 25.1, 24.8)))
    assert main(["--store", store_url, str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "Regressions (passed -> failed): 0" in out and "Metrics moved beyond the noise" in out
    assert out.rstrip().endswith("No regression.") and "NOTE" not in out
    assert ": 0\n" in out.split("Metrics moved")[1]


def test_a_regression_is_exact_and_exits_non_zero_with_junit(tmp_path: Path, store_url: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path, "20261120-020000", healthy())
    b = write_run(tmp_path, "20261121-020000", healthy(TCQ_OFF, outcome="failed"))
    junit = tmp_path / "compare.xml"
    assert main(["--store", store_url, str(a), str(b), "--junit", str(junit)]) == 1
    out = capsys.readouterr().out
    assert f"Regressions (passed -> failed): 1\n  queue-depth[{QD}]: passed -> failed" in out
    moved = out.split("Metrics moved")[1]
    assert f"queue-depth[{QD}] qd32_host_depth: 25.15 [24.9..25.3] n=4 requests -> 1 [1..1.1] n=4 requests" in moved
    assert "worse; higher-better; decided by the rank test (p=0.0286); a regression" in moved
    assert out.rstrip().endswith("1 regression(s).")  # one configuration: its verdict and its depth
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert list(cases) == [f"queue-depth[{QD}]"]
    assert cases[f"queue-depth[{QD}]"].find("failure") is not None
    # the same two runs by id: already stored, not imported twice
    assert main(["--store", store_url, "1", "2"]) == 1
    assert len(Store(store_url).runs()) == 2


def test_fixes_errors_and_single_samples(tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = healthy(TCQ_OFF, outcome="failed")
    after = healthy()
    after[2] = Record("n", "limits", BLK, {}, "passed")
    after[1] = Record("n", "io-size", BLK, {"split_factor": 16.0}, "error", "ssh lost")
    a = write_run(tmp_path, "20261120-020000", before)
    b = write_run(tmp_path, "20261121-020000", after)
    assert main(["--store", store_url, str(a), str(b), "--junit", str(tmp_path / "j.xml")]) == 0  # no regression
    out = capsys.readouterr().out
    assert f"Fixes (failed -> passed): 2\n  limits[{BLK}]: error -> passed" not in out  # error -> passed is no fix
    assert f"Fixes (failed -> passed): 1\n  queue-depth[{QD}]: failed -> passed" in out
    assert f"Harness errors (not conformance failures): 1\n  io-size[{BLK}]: passed -> error" in out
    assert f"Other verdict changes: 1\n  limits[{BLK}]: error -> passed" in out
    # worse beyond its measured noise, in a rule that ended in ERROR: reported, not judged
    assert ("split_factor: 1 x -> 16 x (+1500%, worse; lower-better; decided by its measured minimum effect 2.0% "
            "(the rank test needs 4 repeats in each run, these have 1 and 1); not judged: the rule ended in ERROR "
            "in run 2: its numbers may be partial)") in out
    cases = {c.get("name"): c for c in ET.parse(tmp_path / "j.xml").getroot().iter("testcase")}
    assert cases[f"io-size[{BLK}]"].find("error") is not None and cases[f"io-size[{BLK}]"].find("failure") is None


def test_last_n_nights_flaky_and_fingerprints(tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    url = store_url
    store = Store(url)
    for night, outcome in enumerate(["passed", "failed", "passed", "failed"], start=20):
        store.import_dir(write_run(tmp_path, f"202611{night}-020000", healthy(outcome=outcome)))
    other = {**SUITE, "guest.kernel": "6.12.0"}
    store.import_dir(write_run(tmp_path, "20261124-020000", healthy(outcome="failed"), suite=other))
    records, status = settle([Record("n", "queue-depth", QD, started=True)], "SIGTERM")
    store.import_dir(write_run(tmp_path, "20261125-020000", records, status))
    assert main(["--store", url, "--last", "4", "4"]) == 1  # night 23 against 22, flakiness over 20..23
    out = capsys.readouterr().out
    assert out.startswith("run 3 -> 4: fingerprint unchanged (guest.kernel, fio_version)\n")
    assert "A (baseline): run 3," in out and "B: run 4," in out
    assert f"across the last 4 runs of series {SERIES}): 1\n  queue-depth[{QD}]: 3 flips" in out
    # the newest complete run, 5, on another kernel: the series follows it, the change named first
    assert main(["--store", url, "--last", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("run 4 -> 5: guest.kernel 6.1.0-28-cloud-amd64 -> 6.12.0; unchanged: fio_version\n"), out
    assert "Fingerprint changes (1 entries):" in out and "guest.kernel  6.1.0-28-cloud-amd64  6.12.0" in out
    # a run alone in its series (another fault) has no earlier run to compare with
    store.import_dir(write_run(tmp_path, "20261126-020000", healthy(), suite={**SUITE, "inject": "tcq-off"}))
    store.close()
    assert main(["--store", url, "--last", "3"]) == 2
    assert ("run 7 has no earlier complete run of its series (libvirt_local_virtio_blk_virtio_scsi_inject_tcq_off_"
            "lat5ms_embedded)") in capsys.readouterr().err
    assert main(["--store", url, "--last", "3", "--series", SERIES]) == 0  # the newest of that series: 5
    assert capsys.readouterr().out.startswith("run 4 -> 5: ")


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    url = store_url
    records, status = settle([Record("n", "queue-depth", QD, started=True)], "SIGINT")
    cut = write_run(tmp_path, "20261120-020000", records, status)
    ok = write_run(tmp_path, "20261121-020000", healthy())
    assert main(["--store", url, str(cut), str(ok)]) == 2
    assert "is incomplete (interrupted): it is never used as a baseline" in capsys.readouterr().err
    assert main(["--store", url, "1", "9"]) == 2
    assert "has no run 9" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:  # a usage error, before the store is opened
        main(["--store", url, "1", "nowhere"])
    assert usage.value.code == 2
    assert "nowhere: neither a run id in the store nor a results directory" in capsys.readouterr().err
    assert main(["--store", f"sqlite:///{tmp_path / 'no' / 'v.db'}", "1", "2"]) == 2
    assert "does not exist" in capsys.readouterr().err
    # an incomplete run may be compared, as B, for the verdicts it reached; one that reached none is no B
    assert main(["--store", url, str(ok), str(cut)]) == 2
    assert "run 1 reached no verdict (each rule an error, a skip or not run): there is nothing to compare" in \
        capsys.readouterr().err
    records, status = settle([Record("m", "io-size", QD, outcome="passed", started=True),
                              Record("n", "queue-depth", QD, started=True)], "SIGINT")
    part = write_run(tmp_path, "20261122-020000", records, status)
    assert main(["--store", url, str(ok), str(part)]) == 0
    assert "B: run 3, started 2026-11-22 02:00:00, INCOMPLETE (interrupted)" in capsys.readouterr().out


def test_tested_mode_still_prints_junit_files_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # where the default store would be created
    a = write_run(tmp_path, "a", healthy())
    b = write_run(tmp_path, "b", healthy(TCQ_OFF, outcome="failed"), RunStatus())
    assert main(["--tested", str(a / "junit.xml"), str(b / "junit.xml")]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert rows == [["*", f"verdict.queue-depth[{QD}]", "passed", "failed"],
                    ["*", f"blame.queue-depth[{QD}]", "-", "unknown"]]  # a failure's layer at fault
    assert main([str(a / "junit.xml"), str(a / "junit.xml")]) == 0  # files only: the same printer, no store
    assert "(the runs do not differ)" in capsys.readouterr().out
    assert not (tmp_path / "results").exists()  # JUnit files alone: no store opened


def test_a_regression_names_the_layer_at_fault(tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The nightly team sends the bug to whoever the failure blames: the row says it, from the stored run."""
    a = write_run(tmp_path, "20261120-020000", healthy())
    failed = healthy(TCQ_OFF, outcome="failed")
    failed[0].blame, failed[0].blame_reason = "hypervisor", "the device advertises queue depth 1 where 128 was asked"
    b = write_run(tmp_path, "20261121-020000", failed)
    assert main(["--store", store_url, str(a), str(b)]) == 1
    assert f"  queue-depth[{QD}]: passed -> failed  blame: hypervisor\n" in capsys.readouterr().out
    # side by side from the JUnit files: a row per failed case
    assert main(["--tested", str(a / "junit.xml"), str(b / "junit.xml")]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if f"blame.queue-depth[{QD}]" in line)
    assert row.startswith("*") and row.split()[-1] == "hypervisor", row
