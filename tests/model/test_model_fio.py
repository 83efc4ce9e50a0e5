"""fio JSON parsing, on real fio 3.33 output recorded on this project's machines."""

from __future__ import annotations

from pathlib import Path

import pytest

from model.errors import FioError, ParseError
from model.parse.fio_json import IODEPTH_LEVEL_KEYS, parse_fio_json, parse_fio_run

DATA = Path(__file__).resolve().parents[1] / "data"


def load(name: str) -> str:
    return (DATA / name).read_text()


def test_randread_qd32() -> None:
    result = parse_fio_json(load("fio-randread-qd32.json"))
    assert result.fio_version == "fio-3.33"
    (job,) = result.jobs
    assert job.name == "qd32" and job.error == 0
    assert job.read.io_count == 161788
    assert job.read.iops == pytest.approx(80853.573213)
    assert job.write.io_count == 0 and job.write.iops == 0
    assert job.sync.io_count == 0
    assert job.read.clat_mean_us == pytest.approx(390.687, abs=0.001)  # ns -> us
    assert job.read.clat_percentiles_us[99.0] == pytest.approx(823.296)
    assert job.read.avg_request_size_bytes == 4096
    assert job.iodepth_level_pct["32"] == pytest.approx(99.980839)
    assert tuple(job.iodepth_level_pct) == IODEPTH_LEVEL_KEYS
    assert result.total_iops == pytest.approx(job.read.iops)
    disk = result.disk("vda")
    assert (disk.read_ios, disk.write_ios, disk.read_ticks_ms, disk.in_queue_ms) == (142950, 10, 39545, 39550)
    assert disk.util_pct == pytest.approx(85.25641)


def test_mixed_with_fsync() -> None:
    (job,) = parse_fio_json(load("fio-randrw-fsync.json")).jobs
    assert job.read.iops == pytest.approx(36999.0005)
    assert job.write.iops > 0 and job.read.io_count > job.write.io_count  # rwmixread=70
    assert job.sync.io_count == 13304
    assert job.sync.lat_percentiles_us[50.0] == pytest.approx(362.496)
    assert job.total_iops == pytest.approx(job.read.iops + job.write.iops)
    # recorded quirk of fio 3.33: depth shares can pass 100% when fsync is on
    assert job.iodepth_level_pct["16"] == pytest.approx(112.581064)


def test_two_jobs() -> None:
    result = parse_fio_json(load("fio-two-jobs.json"), source="fio-two-jobs.json")
    assert [j.name for j in result.jobs] == ["seqread-qd4", "randwrite-qd8"]
    seq, rnd = result.job("seqread-qd4"), result.job("randwrite-qd8")
    assert seq.read.avg_request_size_bytes == 128 * 1024 and seq.write.io_count == 0
    assert rnd.write.avg_request_size_bytes == 8192 and rnd.read.io_count == 0
    assert seq.iodepth_level_pct["4"] > 99 and rnd.iodepth_level_pct["8"] > 99
    assert result.total_iops == pytest.approx(seq.read.iops + rnd.write.iops)
    with pytest.raises(ParseError, match=r"no job 'nope'.*seqread-qd4"):
        result.job("nope")
    with pytest.raises(ParseError, match=r"no disk 'vdb'.*vda"):
        result.disk("vdb")


def test_notes_before_json_are_skipped() -> None:
    text = load("fio-psync-warning.json")
    assert text.startswith("note: both iodepth")
    (job,) = parse_fio_json(text).jobs
    assert job.name == "psync-warn"
    assert job.iodepth_level_pct["1"] == 100.0


def test_errors_say_what_and_where() -> None:
    with pytest.raises(ParseError, match=r"run.log: no JSON object found.*--output-format=json"):
        parse_fio_json("fio: some failure\n", source="run.log")
    text = load("fio-randread-qd32.json")
    with pytest.raises(ParseError, match=r"invalid JSON at line \d+.*truncated"):
        parse_fio_json(text[: len(text) // 2])
    with pytest.raises(ParseError, match=r"jobs\[0\]\.read: missing key 'clat_ns'"):
        parse_fio_json(text.replace('"clat_ns"', '"clat_xx"', 1))
    with pytest.raises(ParseError, match=r"jobs\[0\]\.read\.iops: expected a number, got 'fast'"):
        parse_fio_json(text.replace('"iops" : 80853.573213', '"iops" : "fast"', 1))
    with pytest.raises(ParseError, match=r"iodepth_level: missing buckets \['32'\]"):
        parse_fio_json(text.replace('"32" : 99.980839', '"33" : 99.980839', 1))


def test_a_failed_job_is_a_fio_error_with_fios_own_words() -> None:
    # Recorded in the embedded guest: fio at depth 65537 on vda; io_setup() refuses more events
    # than fs.aio-max-nr (65536). fio exits 1, prints its error line on stdout before the JSON
    # (stderr stays empty) and a job with "error": 11 and 0 I/Os.
    text = (DATA / "guest" / "fio-qd65537-eagain.json").read_text()
    assert parse_fio_json(text).jobs[0].read.io_count == 0  # what a rule used to be handed
    with pytest.raises(FioError) as info:
        parse_fio_run(text, "", 1, source="fio qd65537 on vda")
    msg = str(info.value)
    assert msg.startswith("fio qd65537 on vda: fio failed (job qd65537: error 11 (EAGAIN: Resource temporarily "
                          "unavailable)); fio said: fio: pid=171, err=11/file:engines/libaio.c:485, "
                          "func=io_queue_init, error=Resource temporarily unavailable"), msg
    assert info.value.exit_status == 1 and not isinstance(info.value, AssertionError)


def test_fio_without_results_is_a_fio_error_showing_its_stderr() -> None:
    # Recorded: `fio --rw=bogus ...`: exit 1, the valid values on stdout, the reason on stderr.
    out, err = load("fio-bad-rw.stdout"), load("fio-bad-rw.stderr")
    with pytest.raises(FioError, match=r"fio exited with status 1 and printed no results; fio said: valid values: "
                                       r"read(.|\n)*fio: failed parsing rw=bogus$"):
        parse_fio_run(out, err, 1, source="fio x on vda")
    with pytest.raises(FioError, match=r"fio exited with status 3; fio said: .*oops"):
        parse_fio_run(load("fio-randread-qd32.json"), "oops", 3)


def test_a_good_run_parses_and_fio_saying_nothing_useful_is_a_parse_error() -> None:
    assert parse_fio_run(load("fio-psync-warning.json"), "", 0).jobs[0].name == "psync-warn"
    with pytest.raises(ParseError, match=r"no JSON object found.*fio's stderr: \(empty\)"):
        parse_fio_run("", "", 0, source="fio x on vda")
