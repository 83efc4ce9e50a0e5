"""error-propagation's parsers and verdict on runs recorded in the embedded guest (QEMU 7.2 TCG, Debian 6.1
kernel; tests/data/README.md): the healthy virtio-scsi and virtio-blk runs, and virtio-scsi under
``--inject swallow-errors``; the host's counts are the ones query-blockstats gave over those runs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from guest.tools.error_propagation import ErrorPath
from model.error_injection import ErrorPolicy, InjectedRange
from model.errors import ParseError
from model.parse.blockstats import HostRequestOutcomes, parse_qmp_outcomes
from model.parse.fio_errors import parse_fio_error_run
from model.parse.kernel_io_errors import RATELIMIT_BURST, io_error, window_after
from model.rules import blame
from model.rules.error_propagation import (
    FIRST_SECTOR,
    RANGE_SECTORS,
    WORKLOAD,
    HealRun,
    PhaseRun,
    attempts_for,
    bound_for,
    injected,
    judge_error_propagation,
    kernel_error_sectors,
    not_fired,
)

DATA = Path(__file__).parent.parent / "data" / "guest"
#: The two requests that touch sectors 2116-2131: the 5th and 6th of 16, 4 KiB every 8 KiB from 1 MiB.
FAILING = (1081344, 1089536)


def _phase(name: str, kind: str, device: str, host: HostRequestOutcomes, target: str = "", fio_s: float = 0.9,
           ended: bool = True) -> PhaseRun:
    base = DATA / f"{name}-{kind}"
    fio = parse_fio_error_run(Path(f"{base}.fio.json").read_text(), Path(f"{base}.fio.stderr").read_text(), kind)
    mark, log = ErrorPath.split_log(Path(f"{base}.kernel-log").read_text())
    return PhaseRun(injected("read" if kind == "read" else "write"), device, target or f"/dev/{device}",
                    fio if ended else None, host, window_after(log, mark), fio_s)


def _outcomes(kind: str, completed: int, failed: int) -> HostRequestOutcomes:
    return HostRequestOutcomes(completed, 0, failed, 0) if kind == "read" else HostRequestOutcomes(0, completed, 0, failed)


def _scsi(kind: str, **kw: object) -> PhaseRun:
    # recorded: virtio-scsi, 14 completed and 12 failed at the host each way (2 failures x 6 attempts)
    return _phase("errprop-virtio-scsi", kind, "sdb", _outcomes(kind, 14, 12), **kw)  # type: ignore[arg-type]


#: What QEMU answered for a device whose reads it answers as done although the suite configured ``report``.
IGNORING = ErrorPolicy("ua-vioc-dut03", {"rerror": "report", "werror": "report"}, {"rerror": "ignore", "werror": "report"},
                       ("rerror",), "QMP qom-get /machine/peripheral/ua-vioc-dut03")
HEALED = HealRun(errors=0, host_failures=0, requests=32)  # recorded: both controllers, 0 and 0
SCSI_BOUND = bound_for(30.0, None)


def test_the_range_and_the_requests_it_touches() -> None:
    assert (FIRST_SECTOR, RANGE_SECTORS) == (2116, 16)
    assert WORKLOAD.touching(injected("read")) == FAILING
    assert kernel_error_sectors(WORKLOAD, "write") == (2112, 2135)  # the lines say 2112 and 2128
    r = InjectedRange(8, 8, "read")
    assert r.touches(0, 4608) and r.touches(8 * 512, 512) and r.touches(15 * 512, 4096)
    assert not r.touches(0, 4096) and not r.touches(16 * 512, 4096) and not r.touches(8 * 512, 0)
    with pytest.raises(ValueError, match="at least one sector"):
        InjectedRange(0, 0, "write")


def test_fio_error_run_reads_every_failure() -> None:
    base = DATA / "errprop-virtio-scsi-read"
    run = parse_fio_error_run(Path(f"{base}.fio.json").read_text(), Path(f"{base}.fio.stderr").read_text(), "read")
    assert (run.issued, run.errors, run.first_error) == (16, 2, 5)
    assert sorted(f.offset_bytes for f in run.failed) == list(FAILING)
    assert {(f.ddir, f.length_bytes, f.message) for f in run.failed} == {("read", 4096, "Input/output error")}


def test_an_errno_fio_does_not_go_on_past_stops_it() -> None:
    """Recorded on NVMe before the suite told fio to go on past every block errno: QEMU's Unrecovered
    Read Error is ENODATA in the guest, which fio's continue_on_error takes as fatal (its list: EIO,
    EILSEQ). fio stopped after 8 of 16 requests and counted no error."""
    base = DATA / "errprop-nvme-enodata-read"
    run = parse_fio_error_run(Path(f"{base}.fio.json").read_text(), Path(f"{base}.fio.stderr").read_text(), "read")
    assert (run.issued, run.errors, len(run.failed), run.failed[0].message) == (8, 0, 2, "No data available")
    phase = PhaseRun(injected("read"), "nvme1n1", "/dev/nvme1n1", run, _outcomes("read", 6, 12),
                     _scsi("read").kernel, 0.48)
    v = judge_error_propagation(WORKLOAD, [phase], HEALED, attempts_for("nvme", 5), bound_for(None, 30000))
    assert v.problems[0] == "reads: fio got an answer for 8 of its 16 requests (it stopped after: No data available)"
    counted = dataclasses.replace(phase, fio=dataclasses.replace(run, issued=16))
    v = judge_error_propagation(WORKLOAD, [counted], HEALED, attempts_for("nvme", 5), bound_for(None, 30000))
    assert v.problems[0] == "reads: fio counted 0 failures for the 2 failed requests it printed"


def test_fio_error_run_without_continue_on_error_is_a_parse_error() -> None:
    text = (Path(__file__).parent.parent / "data" / "fio-randread-qd32.json").read_text()
    with pytest.raises(ParseError, match="continue_on_error"):
        parse_fio_error_run(text, "", "read")


def test_kernel_error_lines_of_every_form() -> None:
    e = io_error("[   17.988774] I/O error, dev sdb, sector 2112 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2")
    assert e is not None and (e.device, e.sector, e.op, e.status, e.seconds) == ("sdb", 2112, "READ", "I/O", 17.988774)
    old = io_error("[  5.1] blk_update_request: I/O error, dev vdb, sector 2048 op 0x1:(WRITE) flags 0x800")
    assert old is not None and (old.device, old.sector, old.op, old.status) == ("vdb", 2048, "WRITE", "I/O")
    medium = io_error("[ 1.0] critical medium error, dev nvme0n1, sector 2112 op 0x0:(READ) flags 0x0")
    assert medium is not None and medium.status == "critical medium"
    oldest = io_error("end_request: I/O error, dev sdb, sector 63")
    assert oldest is not None and (oldest.sector, oldest.op, oldest.seconds) == (63, "", None)
    assert io_error("[ 1.0] sd 0:0:1:0: [sdb] tag#252 Sense Key : Aborted Command [current]") is None


def test_kernel_window_after_the_mark_and_the_lines_before_it() -> None:
    mark, log = ErrorPath.split_log((DATA / "errprop-virtio-scsi-read.kernel-log").read_text())
    w = window_after(log, mark)
    assert [(e.device, e.sector, e.op) for e in w.errors] == [("sdb", 2112, "READ"), ("sdb", 2128, "READ")]
    # the virtio-blk run's four lines 2.8-4.7 s before count against the kernel's rate limit
    assert w.printed_before == 4
    assert window_after(log, "").errors[0].device == "vdb"  # an empty log's mark: everything
    gone = window_after(log, "[   16.000000] a line the log lost")  # wrapped: the lines stamped later
    assert len(gone.errors) == 2


def test_a_window_whose_lines_the_rate_limit_dropped_counts_from_the_mark() -> None:
    """Recorded with --repeats 10 on virtio-scsi (repeat 3's writes): the kernel had printed 10 error lines
    in the 3.3 s before, and printed none of the window's two."""
    stamps = ("6.951085", "6.956093", "7.500941", "7.501965", "8.426473", "8.427037", "9.210127", "9.212455",
              "10.265998", "10.271105")
    log = [f"[{t:>12}] I/O error, dev sdb, sector {2112 + 16 * (i % 2)} op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2"
           for i, t in enumerate(stamps)]
    w = window_after("\n".join(log) + "\n", log[-1])
    assert (w.errors, w.printed_before) == ((), 10)
    limited = dataclasses.replace(_scsi("write"), kernel=w)
    v = judge_error_propagation(WORKLOAD, [limited], HEALED, attempts_for("sd"), SCSI_BOUND)
    assert v.passed and "it had printed 10 such lines in the 5 s before" in v.notes[0], v.explain()


def test_host_outcomes_from_query_blockstats() -> None:
    reply = {"return": [{"device": "", "qdev": "ua-vioc-dut03", "stats": {
        "rd_operations": 17, "wr_operations": 14, "flush_operations": 0, "rd_bytes": 69632, "wr_bytes": 57344,
        "rd_total_time_ns": 1, "wr_total_time_ns": 1, "flush_total_time_ns": 0, "failed_rd_operations": 12,
        "failed_wr_operations": 0, "account_failed": True}}]}
    now = parse_qmp_outcomes(json.dumps(reply), "dut03")
    assert now == HostRequestOutcomes(17, 14, 12, 0)
    assert now.since(HostRequestOutcomes(3, 0, 0, 0)) == HostRequestOutcomes(14, 14, 12, 0)
    with pytest.raises(ParseError, match="backwards"):
        HostRequestOutcomes(0, 0, 0, 0).since(now)
    del reply["return"][0]["stats"]["failed_rd_operations"]  # type: ignore[attr-defined]
    with pytest.raises(ParseError, match="does not count failed requests"):
        parse_qmp_outcomes(reply, "dut03")


def test_healthy_virtio_scsi_passes_with_sd_retries() -> None:
    v = judge_error_propagation(WORKLOAD, [_scsi("read"), _scsi("write")], HEALED, attempts_for("sd"), SCSI_BOUND)
    assert v.passed, v.explain()
    assert v.properties["read_host_failures"] == 12 and v.properties["attempts_per_request"] == 6
    assert v.properties["write_kernel_errors"] == 2 and v.properties["injected_first_sector"] == 2116


def test_healthy_virtio_blk_passes_with_no_retry() -> None:
    phases = [_phase("errprop-virtio-blk", k, "vdb", _outcomes(k, 14, 2)) for k in ("read", "write")]
    bound = bound_for(None, None)
    assert bound.seconds == 30.0 and "no timeout of its own" in bound.source
    v = judge_error_propagation(WORKLOAD, phases, HEALED, attempts_for("virtio_blk"), bound)
    assert v.passed, v.explain()


def test_the_swallowing_mirror_fails_the_rule() -> None:
    # recorded under --inject swallow-errors: the host failed 12 reads (completed 8: the mirror read the
    # rest from its RAM disk) and 12 writes, fio saw none fail
    mirror = "/dev/mapper/vioc-swallow"
    phases = [_phase("errprop-swallow-virtio-scsi", "read", "sdb", _outcomes("read", 8, 12), target=mirror),
              _phase("errprop-swallow-virtio-scsi", "write", "sdb", _outcomes("write", 14, 12), target=mirror)]
    v = judge_error_propagation(WORKLOAD, phases, HEALED, attempts_for("sd"), SCSI_BOUND)
    assert not v.passed
    assert len(v.problems) == 2, v.problems  # one per direction: the host's counts follow from it (notes)
    assert "the host failed 12 requests and the application saw 0 fail" in v.problems[0]
    assert f"{mirror} over sdb) swallowed the error" in v.problems[0] and "never read" in v.problems[0]
    assert "never wrote" in v.problems[1]
    assert v.hint is not None and v.hint.layer == "guest configuration"


def test_a_driver_that_swallows_is_blamed() -> None:
    read = _scsi("read")
    assert read.fio is not None
    swallowed = dataclasses.replace(read, fio=dataclasses.replace(read.fio, errors=0, failed=()))
    v = judge_error_propagation(WORKLOAD, [swallowed], HEALED, attempts_for("sd"), SCSI_BOUND)
    assert "the guest's driver or block layer of sdb swallowed" in v.problems[0]
    assert v.hint is not None and v.hint.layer == "guest driver"


def test_a_failure_outside_the_range_fails_the_rule() -> None:
    read = _scsi("read")
    assert read.fio is not None
    extra = dataclasses.replace(read.fio.failed[0], offset_bytes=1097728)
    wider = dataclasses.replace(read, fio=dataclasses.replace(read.fio, errors=3, failed=(*read.fio.failed, extra)))
    v = judge_error_propagation(WORKLOAD, [wider], HEALED, attempts_for("sd"), SCSI_BOUND)
    assert any("do not touch the failing range" in p and "1097728 (sector 2144)" in p for p in v.problems)


def test_retries_other_than_documented_fail_and_an_unknown_driver_is_a_note() -> None:
    twice = dataclasses.replace(_scsi("read"), host=_outcomes("read", 14, 24))
    v = judge_error_propagation(WORKLOAD, [twice], HEALED, attempts_for("sd"), SCSI_BOUND)
    assert v.problems == (("reads: the host failed 24 requests for the 2 failures the application saw; expected 12 "
                          f"(6 attempts each: {attempts_for('sd').source})"),)  # type: ignore[union-attr]
    v = judge_error_propagation(WORKLOAD, [twice], HEALED, attempts_for("mptsas"), SCSI_BOUND)
    assert v.passed and "knows no retry count" in v.notes[0]
    nvme = attempts_for("nvme", nvme_max_retries=5)  # recorded: 12 host failures for 2 each way on NVMe
    assert nvme is not None and nvme.per_request == 6 and "max_retries = 5" in nvme.source
    assert attempts_for("nvme") is None  # nvme_core's parameter not read


def test_completions_are_one_for_one() -> None:
    v = judge_error_propagation(WORKLOAD, [dataclasses.replace(_scsi("read"), host=_outcomes("read", 13, 12))],
                                HEALED, attempts_for("sd"), SCSI_BOUND)
    assert v.problems == ("reads: the application saw 14 complete, the host completed 13: expected one for one",)


def test_an_unlogged_failure_fails_unless_the_rate_limit_explains_it() -> None:
    read = _scsi("read")
    one = dataclasses.replace(read.kernel, errors=read.kernel.errors[:1])
    v = judge_error_propagation(WORKLOAD, [dataclasses.replace(read, kernel=one)], HEALED, attempts_for("sd"),
                                SCSI_BOUND)
    assert v.problems[0].startswith("reads: the kernel logged no error for the failed requests at 1089536")
    limited = dataclasses.replace(one, printed_before=RATELIMIT_BURST - 1)
    v = judge_error_propagation(WORKLOAD, [dataclasses.replace(read, kernel=limited)], HEALED, attempts_for("sd"),
                                SCSI_BOUND)
    assert v.passed and "prints at most 10" in v.notes[0]


def test_a_slow_or_hung_error_path_fails() -> None:
    v = judge_error_propagation(WORKLOAD, [_scsi("read", fio_s=31.0)], HEALED, attempts_for("sd"), SCSI_BOUND)
    assert "more than 30 s (the disk's SCSI command timeout, device/timeout = 30 s)" in v.problems[0]
    v = judge_error_propagation(WORKLOAD, [_scsi("read", fio_s=31.0, ended=False)], None, attempts_for("sd"),
                                SCSI_BOUND)
    assert v.problems == (("reads: fio had not finished 31 s after it started (bound 30 s: the disk's SCSI command "
                          "timeout, device/timeout = 30 s): the guest waited on a failed request instead of reporting it"),)
    assert "not checked" in v.notes[0]
    assert bound_for(None, 45000).seconds == 45.0


def test_a_disk_that_stays_failed_fails() -> None:
    v = judge_error_propagation(WORKLOAD, [_scsi("read")], HealRun(2, 12, 32), attempts_for("sd"), SCSI_BOUND)
    assert v.problems == (("after the range healed, 2 requests failed in the guest and 12 at the host: the disk does "
                          "not work again"),)


def test_an_injection_that_never_fired_has_no_verdict() -> None:
    assert not_fired(_scsi("read")) is None
    missed = dataclasses.replace(_scsi("read"), host=_outcomes("read", 16, 0))
    why = not_fired(missed)
    assert why is not None and "the host failed no request while reads of sectors 2116-2131 of sdb failed" in why


def test_a_hypervisor_that_answers_failed_requests_as_done_fails_the_rule_blamed_on_it() -> None:
    """The suite configured ``report``; QEMU says ``ignore`` (a build whose devices answer a failed request
    as done): the hypervisor under test failed. Before, an ERROR asking whether the domain was changed."""
    v = judge_error_propagation(WORKLOAD, [], None, attempts_for("sd"), SCSI_BOUND, policy=IGNORING)
    assert not v.passed and v.rule == "error-propagation"
    assert v.problems[0].startswith("device ua-vioc-dut03 keeps failed requests from the guest: rerror=ignore (QMP "
                                    "qom-get /machine/peripheral/ua-vioc-dut03) where the suite configured rerror=report.")
    assert v.record_properties() == {"policy_rerror": "ignore", "policy_werror": "report"}
    b = blame("error-propagation", [], v.hint)
    assert b.layer == "hypervisor" and "rerror=ignore" in b.reason
