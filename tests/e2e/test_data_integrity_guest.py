"""data-integrity through real guests where the other e2e files do not take it: a guest without
device-mapper under lba-shift (a skip that names the module, never a pass or an error). The healthy
guest and the fault on virtio-scsi and virtio-blk are in test_rules_guest.py; a remote host's backing
file, read over SFTP, in test_remote_libvirt.py."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import SuiteRun, run_suite_at

CONFIG = "libvirt:virtio-blk:latency5ms"


def test_lba_shift_without_device_mapper_skips_naming_the_module(tmp_path: Path) -> None:
    # The embedded guest ships dm_mod unloaded: without its file, modprobe finds none.
    run: SuiteRun = run_suite_at(tmp_path / "results", "--controllers", "virtio-blk", "-k", "data_integrity",
                                 "--inject", "lba-shift", "--guest-setup", "rm -rf /lib/modules/*/kernel/drivers/md")
    assert run.returncode == 12, run.output  # its one rule SKIPPED: the run judged nothing (reports/exitcodes.py)
    skipped = run.cases()[f"data-integrity[{CONFIG}]"].find("skipped")
    assert skipped is not None, run.output[-3000:]
    message = skipped.get("message", "")
    assert message.startswith("data-integrity with --inject lba-shift cannot run on this guest: the guest's kernel has "
                              "no device-mapper (module dm_mod is not loaded, not built in, and modprobe said:"), message
    assert run.left_behind == []
