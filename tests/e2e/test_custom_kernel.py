"""Bring your own kernel: the embedded guest built from a linux-image .deb given on the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from images.kernels import KernelUnknown, cached_deb, default_kernel, resolve
from tests.e2e.conftest import SuiteRun


@pytest.fixture(scope="module")
def kernel_deb() -> Path:
    """A real kernel package file, as a vendor would hand one over (here: Debian's own, from the
    suite's package cache: downloaded once)."""
    return cached_deb(default_kernel())


def test_suite_runs_on_a_kernel_package_file(run_suite, kernel_deb: Path) -> None:  # type: ignore[no-untyped-def]
    run: SuiteRun = run_suite("--guest-kernel-deb", str(kernel_deb), "--controllers", "virtio-blk", "-k", "queue_depth")
    assert run.returncode == 0, run.output
    assert list(run.cases()) == ["queue-depth[libvirt:virtio-blk:latency5ms]"]


def test_not_a_kernel_package(run_suite, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bogus = tmp_path / "linux-image-bogus.deb"
    bogus.write_text("not a package")
    run: SuiteRun = run_suite("--guest-kernel-deb", str(bogus), "--controllers", "virtio-blk")
    assert run.returncode == 4, run.output
    assert (f"ERROR: --guest-kernel-deb: {bogus} is not a Debian package (unexpected end of file in archive magic "
            "version number)") in run.output, run.output
    run = run_suite("--guest-kernel-deb", str(tmp_path / "missing.deb"))
    assert run.returncode == 4 and "missing.deb is not a file" in run.output, run.output


@pytest.fixture(scope="module")
def cloud_kernel_deb() -> Path:
    """Debian's cloud kernel flavour (linux-image-cloud-amd64's current package): it has no mptsas,
    ahci, megaraid_sas or sym53c8xx (checked in its 6.1.0-56 package: no such .ko, not in
    modules.builtin); nvme and ext4 are built in."""
    try:
        return cached_deb(resolve("linux-image-cloud-amd64"))
    except KernelUnknown:
        pytest.skip("apt knows no linux-image-cloud-amd64: run apt-get update")


def test_a_controller_whose_driver_the_kernel_lacks_skips_naming_the_module(run_suite, cloud_kernel_deb: Path) -> None:  # type: ignore[no-untyped-def]
    """Must 4 of "bring your own image" on a real kernel: the cloud flavour has no mptsas. Its rules
    skip and name the module; the other controller's run; the record says what was missing."""
    run: SuiteRun = run_suite("--guest-kernel-deb", str(cloud_kernel_deb), "--controllers", "virtio-scsi,mptsas1068",
                              "-k", "limits")
    assert run.returncode == 0, run.output
    outcomes = run.outcomes()
    assert outcomes == {"limits[libvirt:virtio-scsi:latency5ms]": "passed",
                        "limits[libvirt:mptsas1068:latency5ms]": "skipped"}, run.output
    props = run.suite_properties()
    kernel = props["guest.kernel"]
    assert kernel.endswith("-cloud-amd64"), props
    skipped = run.cases()["limits[libvirt:mptsas1068:latency5ms]"].find("skipped")
    assert skipped is not None and skipped.get("message", "").startswith(
        f"the guest's kernel {kernel} has no mptsas driver for mptsas1068 (not loaded, not in modules.builtin, "
        f"no mptsas.ko under /lib/modules/{kernel})"), run.output
    assert props["disk.mptsas1068.driver"] == "missing: mptsas" and props["disk.virtio-scsi.driver"] == "virtio_scsi"
    assert run.left_behind == []
