"""discard on real guests (QEMU 7.2, the embedded Debian 6.1 guest, the scratch disk's file opened with
discard=unmap): the healthy guest passes on virtio-scsi and virtio-blk with every range's bytes at the
host's file and its blocks given back, fstrim's too, and its write-zeroes taken as such by the host;
``--inject discard-off`` fails it on both, the fstrim part with it, while limits and data-integrity pass,
and the failure's bundle replays to the same failure."""

from __future__ import annotations

from pathlib import Path

from bench.replay_faithfulness import failures, handed_over, replay
from tests.e2e.conftest import SuiteRun

BOTH = ("--controllers", "virtio-scsi,virtio-blk")
CASES = ("discard[libvirt:virtio-scsi:latency5ms]", "discard[libvirt:virtio-blk:latency5ms]")
#: Each range's length: what the host's file must count (model/rules/discard.py's RANGES).
LENGTHS = {"aligned": "1048576", "unaligned": "1051136", "beyond_max": "2097152"}


def healthy_figures(run: SuiteRun) -> None:
    """The healthy guest's discard figures, in a run of the default suite (tests/e2e/test_rules_guest.py)."""
    assert {c: run.outcomes()[c] for c in CASES} == dict.fromkeys(CASES, "passed"), run.output[-3000:]
    scsi, blk = (SuiteRun.props(run.cases()[c]) for c in CASES)
    for props in (scsi, blk):
        assert props["discard_advertised"] == "1", props
        for name, length in LENGTHS.items():
            assert props[f"{name}_guest_discarded"] == "1" and props[f"{name}_host_bytes"] == length, props
            assert int(props[f"{name}_allocated_after_bytes"]) <= 8192, props
        assert props["beyond_max_host_requests"] == "8", props
    assert scsi["aligned_device_bytes"] == "1048576" and blk["aligned_device_bytes"] == "0"  # 7.2's virtio-blk
    for props in (scsi, blk):
        # fstrim: all the filesystem's free space, the deleted file's 8 MiB among it, and those 8 MiB given back
        trimmed = int(props["fstrim_guest_trimmed_bytes"])
        assert props["fstrim_guest_ok"] == "1" and int(props["fstrim_host_bytes"]) == trimmed >= 8 << 20, props
        drop = int(props["fstrim_allocated_before_bytes"]) - int(props["fstrim_allocated_after_bytes"])
        assert 8 << 20 <= drop <= (8 << 20) + 8192, props
        # write-zeroes: advertised by both, one 1 MiB write-zeroes at the host, the range reads back as zeroes
        assert props["zeroes_advertised"] == "1" and props["zeroes_guest_zeroed"] == "1", props
        assert (props["zeroes_host_zero_bytes"], props["zeroes_host_data_bytes"]) == ("1048576", "0"), props
        assert props["zeroes_guest_nonzero_bytes"] == "0", props
    assert run.left_behind == []


def test_discard_off_fails_it_and_nothing_else(run_suite, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Also the replay: the virtio-scsi failure's bundle, handed over alone, replays to exit 1 with the run's
    FAIL lines (its host side read through host actions: the device's counters, the allocation of the
    replay's own copy of the disk's file)."""
    run: SuiteRun = run_suite(*BOTH, "-k", "discard or limits or data_integrity", "--inject", "discard-off")
    assert run.returncode == 1, run.output
    outcomes = run.outcomes()
    assert {c: outcomes[c] for c in CASES} == dict.fromkeys(CASES, "failed"), run.output
    assert [c for c, o in outcomes.items() if c not in CASES and o != "passed"] == [], outcomes
    for case in CASES:
        text = SuiteRun.failure_text(run.cases()[case])
        assert "the guest's discard_max_bytes is 0: the guest passes no discard on" in text, text
        assert "blame: guest configuration" in text, text
        assert "fstrim failed (fstrim: FITRIM: Operation not supported) although the device advertises discard" \
            in text, text
        props = SuiteRun.props(run.cases()[case])
        assert props["aligned_host_requests"] == "0" and props["aligned_allocated_after_bytes"] == "1048576", props
        assert (props["fstrim_guest_ok"], props["fstrim_host_bytes"]) == ("0", "0"), props
        assert props["zeroes_guest_zeroed"] == "1", props  # write-zeroes does not depend on discard_max_bytes
    assert run.left_behind == []
    done = replay(handed_over(run, CASES[0], tmp_path / "vendor"), tmp_path, "--out", str(tmp_path / "replayed"))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    said = failures(SuiteRun.failure_text(run.cases()[CASES[0]]))
    assert said and failures(done.stdout) == said, (said, done.stdout[-3000:])
    assert "replay: 1 of 1 repeat(s) FAILED" in done.stdout
