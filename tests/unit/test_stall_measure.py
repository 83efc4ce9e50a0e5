"""What measure/stall_tolerance.py makes of fio's output after a stall and how long it waits: an I/O error fio
reports is the rule's to judge (a verdict), never a harness error; output without results is fio's
own error; the wait after the release grows with the guest's error handling only past its timeout."""

from __future__ import annotations

from pathlib import Path

import pytest

from guest.tools.fio import FioJob, FioOutput
from measure.stall_tolerance import DRAIN_S, _fio_outcome, drain_bound_s
from model.errors import FioError
from model.parse.fio_json import FIO_STOPPED_EXIT

#: Recorded: fio's output after the default 2 s hold of the virtio-scsi scratch disk (stopped by the
#: suite: "fio: terminating on signal 2" before the JSON, exit 128).
RECORDED = Path(__file__).parents[1] / "data" / "guest" / "stall-fio-virtio-scsi.json"
JOB = FioJob("stall", rw="randrw", iodepth=8)


def test_the_held_requests_wait_is_fios_slowest_request(tmp_path: Path) -> None:
    out = FioOutput(RECORDED.read_text(), "", FIO_STOPPED_EXIT, stopped=True)
    result, error = _fio_outcome(out, JOB, "sda", tmp_path, "vioc-stall-sda")
    j = result.jobs[0]
    assert error == ""
    assert j.read.io_count + j.write.io_count == 52
    assert max(j.read.clat_max_us, j.write.clat_max_us) == pytest.approx(2016920.29, abs=0.01)
    assert (tmp_path / "vioc-stall-sda.fio.json").read_text() == out.stdout  # kept as raw data


def test_an_io_error_in_the_stall_is_the_rules_to_judge(tmp_path: Path) -> None:
    text = RECORDED.read_text().replace('"error" : 0,', '"error" : 5,', 1)
    out = FioOutput("fio: pid=1, err=5/file:io_u.c:1889, func=io_u error, error=Input/output error\n" + text, "", 1)
    _, error = _fio_outcome(out, JOB, "sda", None, "t")
    assert error == ("error 5 (EIO: Input/output error); fio said: fio: pid=1, err=5/file:io_u.c:1889, func=io_u error, "
                     "error=Input/output error")


def test_output_without_results_is_fios_own_error() -> None:
    with pytest.raises(FioError, match="fio exited with status 1 and printed no results"):
        _fio_outcome(FioOutput("", "fio: failed to open /dev/sda", 1), JOB, "sda", None, "t")


def test_the_drain_bound_adds_the_guests_error_handling_only_past_its_timeout() -> None:
    assert drain_bound_s(2.0, 30.0) == drain_bound_s(2.0, None) == DRAIN_S
    assert drain_bound_s(8.0, 2.0) == DRAIN_S + 4.0
