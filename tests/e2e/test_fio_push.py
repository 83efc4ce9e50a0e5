"""fio without a network: the static fio built from Debian's source package, pushed into a real guest.

The embedded guest's SSH server is dropbear without sftp-server, so the copy goes through the
``cat`` fallback here; SFTP is covered against an in-process SSH server (tests/unit/test_ssh_put_file.py).
"""

from __future__ import annotations

import re
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest

from guest.tools.fio import Fio, FioJob
from guest.tools.fio_push import FIO_BIN_DIR, FioBinary
from guest.tools.tool import GuestTools
from images.fio_static import StaticFio, ensure_static_fio
from measure.disk import GuestDisk
from measure.standalone import standalone_guest
from model.parse.fio_json import parse_fio_run
from model.types import DiskSpec
from tests.e2e.conftest import RunSuite
from transport.ssh import GuestCopyError, SshTransport


@pytest.fixture(scope="module")
def static_fio() -> StaticFio:
    return ensure_static_fio(print)  # built once (about 90 s here), then cached


def test_the_static_fio_is_static_and_runs(static_fio: StaticFio) -> None:
    assert "statically linked" in subprocess.run(["file", str(static_fio.path)], capture_output=True, text=True,
                                                 check=True).stdout
    ldd = subprocess.run(["ldd", str(static_fio.path)], capture_output=True, text=True, check=False)
    assert "not a dynamic executable" in ldd.stdout + ldd.stderr, ldd
    said = subprocess.run([str(static_fio.path), "--version"], capture_output=True, text=True, check=True).stdout
    assert said.strip() == static_fio.version and re.fullmatch(r"fio-\d+\.\d+\S*", static_fio.version)
    again = ensure_static_fio()
    assert again.path == static_fio.path and again.sha256 == static_fio.sha256 and again.build_seconds == 0.0


@pytest.fixture(scope="module")
def guest_disk() -> Iterator[GuestDisk]:
    with standalone_guest([DiskSpec("virtio-blk", 0)], "vioconform-fiopush-test") as (_, disks):
        yield disks[0]


def test_the_static_fio_pushed_by_cat_runs_a_job(static_fio: StaticFio, guest_disk: GuestDisk) -> None:
    shell = guest_disk.tools.shell
    assert isinstance(shell, SshTransport)
    tools = GuestTools(shell, "vioconform-fiopush-test", fio_binary=lambda: static_fio.path, push_fio=True)
    t0 = time.monotonic()
    fio = tools.get(Fio)
    print(f"push and check: {time.monotonic() - t0:.1f} s ({tools.get(FioBinary).push_summary})")
    ident = fio.identity()
    assert ident.origin == f"pushed: {static_fio.sha256[:12]}" and ident.version == static_fio.version
    assert ident.path == f"{FIO_BIN_DIR}/fio"
    summary = tools.get(FioBinary).push_summary
    assert summary is not None and summary.startswith("cat, "), summary
    mounts = shell.run(f"grep ' {FIO_BIN_DIR} ' /proc/mounts; stat -c '%u %a' {FIO_BIN_DIR} {FIO_BIN_DIR}/fio").stdout
    assert re.search(rf"^vioconform-bin {FIO_BIN_DIR} tmpfs rw,nosuid,nodev,", mounts, re.MULTILINE), mounts
    assert "noexec" not in mounts and mounts.splitlines()[-2:] == ["0 755", "0 755"], mounts
    out = fio.run(FioJob("pushed", rw="randread", iodepth=4, runtime_s=2), guest_disk.device_path)
    assert out.status == 0, out.stderr
    result = parse_fio_run(out.stdout, out.stderr, out.status, "pushed fio on vda")
    assert result.fio_version == static_fio.version and result.jobs[0].read.io_count > 0
    # a second push (another session's leftover tmpfs) replaces the binary in place
    again = GuestTools(shell, "g", fio_binary=lambda: static_fio.path, push_fio=True).get(Fio)
    assert again.identity() == ident


def test_a_copy_that_cannot_be_written_names_the_cause(static_fio: StaticFio, guest_disk: GuestDisk) -> None:
    shell = guest_disk.tools.shell
    assert isinstance(shell, SshTransport)
    with pytest.raises(GuestCopyError, match=r"^cannot copy \S+ to the guest's /nonexistent/fio as root \(no SFTP: "
                                             r".*; through `cat`\): `cat > /nonexistent/fio && chmod 755 "
                                             r"/nonexistent/fio` exited 1: .*nonexistent"):
        shell.put_file(static_fio.path, "/nonexistent/fio", 0o755)


def suite_properties(junit: str) -> dict[str, str]:
    root = ET.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    props = suite.find("properties")
    return {} if props is None else {p.get("name", ""): p.get("value", "") for p in props}


def test_a_guest_without_fio_gets_the_static_one_and_the_record_says_so(run_suite: RunSuite,
                                                                      static_fio: StaticFio) -> None:
    run = run_suite("--controllers", "virtio-blk", "--guest-setup", "rm -f /usr/bin/fio", "-k", "queue_depth")
    assert run.returncode == 0, run.output[-3000:]
    assert list(run.outcomes().values()) == ["passed"], run.output[-3000:]
    props = suite_properties(str(run.junit))
    assert props["fio_version"] == static_fio.version, props
    assert props["fio_origin"] == f"pushed: {static_fio.sha256[:12]}", props
    tested = (run.results / "report.html").read_text().split('<section id="tested">')[1].split("</section>")[0]
    assert f"<td>fio_origin</td><td>pushed: {static_fio.sha256[:12]}</td>" in tested
    assert run.left_behind == []

