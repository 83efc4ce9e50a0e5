"""error-propagation on real guests (QEMU 7.2 with blkdebug injected through QMP, the embedded Debian 6.1
guest): the healthy guest passes on virtio-scsi and virtio-blk, ``--inject swallow-errors`` fails it on
both, and neither leaves a blkdebug node, a device-mapper table or a RAM disk behind."""

from __future__ import annotations

from tests.e2e.conftest import SuiteRun

BOTH = ("--controllers", "virtio-scsi,virtio-blk", "-k", "error_propagation")
CASES = ("error-propagation[libvirt:virtio-scsi:latency5ms]", "error-propagation[libvirt:virtio-blk:latency5ms]")


def test_the_healthy_guest_passes_with_the_errors_on_three_sides(run_suite) -> None:  # type: ignore[no-untyped-def]
    run: SuiteRun = run_suite(*BOTH)
    assert run.returncode == 0, run.output
    assert run.outcomes() == dict.fromkeys(CASES, "passed"), run.output
    scsi, blk = (SuiteRun.props(run.cases()[c]) for c in CASES)
    for props, host_failures in ((scsi, "12"), (blk, "2")):  # sd retries each failed request 5 times; virtio_blk never
        for kind in ("read", "write"):
            assert (props[f"{kind}_expected_failures"], props[f"{kind}_guest_failures"], props[f"{kind}_kernel_errors"],
                    props[f"{kind}_host_completed"]) == ("2", "2", "2", "14"), props
            assert props[f"{kind}_host_failures"] == host_failures, props
        assert (props["heal_errors"], props["heal_host_failures"]) == ("0", "0"), props
        assert props["injected_first_sector"] == "2116" and props["injected_sectors"] == "16", props
    assert run.left_behind == []


def test_a_mirror_that_swallows_errors_fails_it(run_suite) -> None:  # type: ignore[no-untyped-def]
    run: SuiteRun = run_suite(*BOTH, "--inject", "swallow-errors")
    assert run.returncode == 1, run.output
    assert run.outcomes() == dict.fromkeys(CASES, "failed"), run.output
    for case in CASES:
        text = SuiteRun.failure_text(run.cases()[case])
        assert "FAIL: reads: the host failed" in text and "FAIL: writes: the host failed" in text, text
        assert "(/dev/mapper/vioc-swallow over" in text and "swallowed the error" in text, text
        assert "blame: guest configuration" in text, text
        props = SuiteRun.props(run.cases()[case])
        assert props["read_guest_failures"] == "0" and int(props["read_host_failures"]) > 0, props
        assert props["fio_target"] == "/dev/mapper/vioc-swallow" and props["heal_errors"] == "0", props
    assert run.left_behind == []
