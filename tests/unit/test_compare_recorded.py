"""``compare`` on recorded whole runs (tests/data/runs): two healthy runs are "no change", a tcq-off
run and an io-breakup run are regressions on their rules, with the metrics that show why."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from reports.compare import main

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"
HEALTHY, HEALTHY2 = RUNS / "20261124-191142-healthy", RUNS / "20261124-191358-healthy"
SCSI, BLK = "libvirt:virtio-scsi:latency5ms", "libvirt:virtio-blk:latency5ms"


def _compare(store_url: str, tmp_path: Path, b: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, Path]:
    junit = tmp_path / "compare.xml"
    code = main(["--store", store_url, str(HEALTHY), str(b), "--junit", str(junit)])
    return code, capsys.readouterr().out, junit


def _failures(junit: Path) -> list[str]:
    return sorted(c.get("name", "") for c in ET.parse(junit).getroot().iter("testcase") if c.find("failure") is not None)


def test_two_healthy_runs_are_no_change(store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, junit = _compare(store_url, tmp_path, HEALTHY2, capsys)
    assert code == 0, out
    assert "Regressions (passed -> failed): 0" in out and "No regression." in out
    assert "Metrics moved beyond the noise" in out and out.split("Metrics moved beyond the noise")[1].split(
        "\n")[0].endswith(": 0")
    assert _failures(junit) == []


def test_tcq_off_is_a_queue_depth_regression(store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, junit = _compare(store_url, tmp_path, RUNS / "20261124-194640-tcq-off", capsys)
    assert code == 1, out
    assert f"  queue-depth[{SCSI}]: passed -> failed" in out
    assert f"queue-depth[{SCSI}] qd32_host_depth: 26 requests -> 1 requests (-96%, worse" in out
    assert f"queue-depth[{BLK}]: passed -> skipped" in out  # virtio-blk has no queue_depth: skipped, not failed
    assert _failures(junit) == [f"queue-depth[{SCSI}]"]


def test_io_breakup_is_an_io_size_regression(store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, junit = _compare(store_url, tmp_path, RUNS / "20261124-194848-io-breakup", capsys)
    assert code == 1, out
    assert f"io-size[{BLK}] split_factor: 1 x -> 16 x (+1500%, worse; lower-better" in out
    assert _failures(junit) == sorted([f"io-size[{SCSI}]", f"io-size[{BLK}]"])
