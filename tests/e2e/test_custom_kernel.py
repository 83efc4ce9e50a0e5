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
