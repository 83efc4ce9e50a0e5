"""resize on real guests (QEMU 7.2's block_resize through libvirt's monitor, the embedded Debian 6.1
guest): the healthy guest sees the scratch disk grow and shrink back on virtio-scsi and virtio-blk,
told by its driver's own notice, fio running through both resizes sees no error, and ext4 over the
disk grows online into the new space."""

from __future__ import annotations

from tests.e2e.conftest import SuiteRun

BOTH = ("--controllers", "virtio-scsi,virtio-blk", "-k", "resize")
CASES = ("resize[libvirt:virtio-scsi:latency5ms]", "resize[libvirt:virtio-blk:latency5ms]")


def healthy_figures(run: SuiteRun) -> None:
    """The healthy guest's grow and shrink, in a run of the default suite (tests/e2e/test_rules_guest.py)."""
    assert {c: run.outcomes()[c] for c in CASES} == dict.fromkeys(CASES, "passed"), run.output[-3000:]
    scsi, blk = (SuiteRun.props(run.cases()[c]) for c in CASES)
    for props in (scsi, blk):
        grown = int(props["grow_host_from_bytes"]) + 64 * 1024 * 1024
        assert (int(props["grow_host_to_bytes"]), int(props["grow_guest_bytes"])) == (grown, grown), props
        assert props["shrink_guest_bytes"] == props["grow_host_from_bytes"] == props["shrink_host_to_bytes"], props
        assert float(props["grow_guest_seen_s"]) <= float(props["resize_bound_s"]), props
        assert props["fio_errors"] == "0", props
        # ext4 grown online: resize2fs to the disk's new size, statfs larger by the grow less ext4's overhead
        assert props["fs_grow_ok"] == "1" and props["fs_grow_resize2fs_bytes"] == str(grown), props
        assert 0.95 * (64 << 20) <= int(props["fs_grow_after_bytes"]) - int(props["fs_grow_before_bytes"]) <= 64 << 20
        assert float(props["fs_grow_s"]) > 0, props
    assert "config-change" in blk["grow_mechanism"] or "capacity change" in blk["grow_mechanism"], blk
    assert "sd" in scsi["grow_mechanism"] or "Capacity data" in scsi["grow_mechanism"], scsi
    assert run.left_behind == []


def test_virtio_scsi_without_its_parameter_change_event_fails_it(run_suite) -> None:  # type: ignore[no-untyped-def]
    run: SuiteRun = run_suite(*BOTH, "--inject", "param-change-off")
    assert run.returncode == 1, run.output
    assert run.outcomes() == {CASES[0]: "failed", CASES[1]: "skipped"}, run.output
    text = SuiteRun.failure_text(run.cases()[CASES[0]])
    assert "FAIL: grow: the guest still saw 1073741824 bytes 5.0 s after the host grew the disk" in text, text
    props = SuiteRun.props(run.cases()[CASES[0]])
    # sd met the unit attention and re-read nothing; the shrink back leaves the guest at the suite's size
    assert props["grow_mechanism"].startswith("a SCSI unit attention 2a/09 only"), props
    assert props["shrink_guest_bytes"] == props["grow_host_from_bytes"], props
    assert "online filesystem grow not tried: the guest never saw the disk grow" in props["notes"], props
    assert run.left_behind == []
