"""Bring your own kernel: the embedded guest built from a linux-image .deb given on the command line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from guest.image.build import _kernel_package
from tests.e2e.conftest import SuiteRun


@pytest.fixture(scope="module")
def kernel_deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real kernel package file, as a vendor would hand one over (here: Debian's own)."""
    d = tmp_path_factory.mktemp("deb")
    d.chmod(0o755)  # apt downloads as the _apt user
    pkg, _ = _kernel_package()
    subprocess.run(["apt-get", "download", "-q", pkg], cwd=d, check=True, capture_output=True)
    return next(d.glob("linux-image-*.deb"))


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
def cloud_kernel_deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Debian's cloud kernel flavour (linux-image-cloud-amd64's current package): it has no mptsas,
    ahci, megaraid_sas or sym53c8xx (checked in its 6.1.0-56 package: no such .ko, not in
    modules.builtin); nvme and ext4 are built in."""
    d = tmp_path_factory.mktemp("cloud-deb")
    d.chmod(0o755)
    deps = subprocess.run(["apt-cache", "depends", "linux-image-cloud-amd64"], check=True, capture_output=True,
                          text=True).stdout
    pkg = next((w for w in deps.split() if w.startswith("linux-image-") and w.endswith("-cloud-amd64")
                and w != "linux-image-cloud-amd64"), None)
    if pkg is None:
        pytest.skip("apt knows no linux-image-cloud-amd64: run apt-get update")
    subprocess.run(["apt-get", "download", "-q", pkg], cwd=d, check=True, capture_output=True)
    return next(d.glob("linux-image-*.deb"))


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
