"""error-propagation on real guests (QEMU 7.2 with blkdebug injected through QMP, the embedded Debian 6.1
guest): the healthy guest passes on virtio-scsi and virtio-blk, ``--inject swallow-errors`` fails it on
both, and neither leaves a blkdebug node, a device-mapper table or a RAM disk behind; a QEMU that answers
failed reads as done fails it, blamed on the hypervisor."""

from __future__ import annotations

from pathlib import Path

from bench.suite_run import run_suite_at
from tests.e2e.conftest import SuiteRun, qemu_wrapper

BOTH = ("--controllers", "virtio-scsi,virtio-blk", "-k", "error_propagation")
CASES = ("error-propagation[libvirt:virtio-scsi:latency5ms]", "error-propagation[libvirt:virtio-blk:latency5ms]")


def healthy_figures(run: SuiteRun) -> None:
    """The healthy guest's errors on three sides, in a run of the default suite (tests/e2e/test_rules_guest.py)."""
    assert {c: run.outcomes()[c] for c in CASES} == dict.fromkeys(CASES, "passed"), run.output[-3000:]
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


#: libvirt's -device arguments as a QEMU build that answers failed reads as done would take them: the
#: suite's ``rerror=report`` becomes ``ignore`` (compact JSON from libvirt's own disks, spaced from the suite's).
IGNORE_READ_ERRORS = (('"rerror":"report"', '"rerror":"ignore"'), ('"rerror": "report"', '"rerror": "ignore"'))


def test_a_qemu_that_answers_failed_reads_as_done_fails_it_blamed_on_the_hypervisor(tmp_path: Path) -> None:
    """Before, an ERROR asking "was the domain changed?" (exit 10): the suite configured ``report`` and
    QEMU said ``ignore``, which is the hypervisor under test failing."""
    with qemu_wrapper("qemu-ignoring-read-errors", rewrite=IGNORE_READ_ERRORS) as emulator:
        run = run_suite_at(tmp_path / "r", "--controllers", "virtio-blk", "-k", "error_propagation",
                           "--emulator", str(emulator))
    assert run.returncode == 1, run.output[-4000:]
    case = run.cases()[CASES[1]]
    text = SuiteRun.failure_text(case)
    assert "FAIL: device ua-vioc-dut01 keeps failed requests from the guest: rerror=ignore (QMP qom-get " in text, text
    assert "where the suite configured rerror=report" in text and "blame: hypervisor: " in text, text
    assert "was the domain changed" not in run.output
    props = SuiteRun.props(case)
    assert (props["policy_rerror"], props["policy_werror"], props["blame"]) == ("ignore", "report", "hypervisor"), props
    assert run.left_behind == []
