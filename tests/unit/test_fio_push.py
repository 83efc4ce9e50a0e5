"""Which fio a guest runs, against a scripted shell: the image's own, or the suite's static fio
pushed into a tmpfs of its own; the commands of the push, and each way it can fail.
A real push (into the embedded guest, through dropbear's `cat`) runs in tests/e2e/test_fio_push.py."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from guest.tools.fio import Fio, FioJob
from guest.tools.fio_push import FIO_BIN_DIR, FioBinary, FioIdentity, FioPushError
from guest.tools.tool import GuestTools, ToolMissing
from images.build_error import ImageBuildError
from tests.unit.fake_shell import FakeShell, Reply

PUSHED = f"{FIO_BIN_DIR}/fio"


@pytest.fixture
def static_fio(tmp_path: Path) -> Path:
    path = tmp_path / "fio"
    path.write_bytes(b"\x7fELF static fio " * 1000)  # 16,000 bytes
    return path


def guest_without_fio(static: Path, sha: str | None = None, version: Reply = "fio-3.33\n",
                      has: set[str] | None = None) -> FakeShell:
    """A guest that takes the push: its tmpfs, then the copy's checksum (``sha``: as sent) and version."""
    digest = sha if sha is not None else hashlib.sha256(static.read_bytes()).hexdigest()
    return FakeShell(has=has or set(), handlers=[
        (r"mount -t tmpfs", lambda c: ""),
        (r"^chown 0:0 ", lambda c: f"{digest}  {PUSHED}\n"),
        (rf"^{PUSHED} --version$", lambda c: version),
    ])


def test_a_guest_without_fio_gets_the_static_one_in_a_tmpfs_of_its_own(static_fio: Path) -> None:
    shell = guest_without_fio(static_fio)
    built: list[int] = []

    def build() -> Path:
        built.append(1)
        return static_fio

    tools = GuestTools(shell, "vioconform-7", fio_binary=build)
    fio = tools.get(Fio)
    sha = hashlib.sha256(static_fio.read_bytes()).hexdigest()
    assert fio.identity() == FioIdentity("fio-3.33", f"pushed: {sha[:12]}", PUSHED)
    assert fio.identity().properties() == {"fio_version": "fio-3.33", "fio_origin": f"pushed: {sha[:12]}"}
    assert built == [1]
    lookup, tmpfs, put, check, version = shell.commands
    assert lookup == "command -v fio || true"
    # sized to the binary (16,000 bytes: 4 pages) plus 256 KiB; exec, unlike /run on systemd distributions
    assert f"mount -t tmpfs -o size=272k,mode=0700,nosuid,nodev,exec vioconform-bin {FIO_BIN_DIR}" in tmpfs
    # handed to the login user for the copy (the copy runs as that user, the commands through sudo)
    assert f'chown "${{SUDO_UID:-$(id -u)}}:${{SUDO_GID:-$(id -g)}}" {FIO_BIN_DIR}' in tmpfs
    assert put == f"<put {static_fio} {PUSHED} 755>"
    assert shell.files[PUSHED] == (static_fio.read_bytes(), 0o755)
    # root's again before it runs as root
    assert check.startswith(f"chown 0:0 {FIO_BIN_DIR} {PUSHED} && chmod 0755 {FIO_BIN_DIR} {PUSHED} && ")
    assert f"sha256sum {PUSHED}" in check
    assert version == f"{PUSHED} --version"
    # every fio run calls it by its path; forget() keeps it (no second push)
    tools.forget()
    shell.handlers.append((re.compile(rf"^{PUSHED} --name=qd1 "), lambda c: "{}"))
    out = tools.get(Fio).run(FioJob("qd1", runtime_s=1), "/dev/vda")
    assert out.exit_status == 0 and shell.commands[-1].startswith(f"{PUSHED} --name=qd1 --filename=/dev/vda ")
    assert built == [1] and len(shell.files) == 1


def test_background_fio_runs_the_pushed_binary(static_fio: Path) -> None:
    shell = guest_without_fio(static_fio)
    shell.handlers.append((re.compile(r"setsid sh -c"), lambda c: ""))
    tools = GuestTools(shell, "g", fio_binary=lambda: static_fio)
    tools.get(Fio).start(FioJob("qd32", iodepth=32), "/dev/sdb", "/run/vioconform", "qd32")
    assert f"setsid sh -c '{PUSHED} --name=qd32 " in shell.commands[-1]


def test_push_fio_pushes_even_into_an_image_with_fio(static_fio: Path) -> None:
    shell = guest_without_fio(static_fio, has={"fio"})
    fio = GuestTools(shell, "g", fio_binary=lambda: static_fio, push_fio=True).get(Fio)
    assert fio.identity().pushed and fio.identity().path == PUSHED
    assert not any(c.startswith("command -v fio") for c in shell.commands)


def test_an_image_with_fio_needs_no_static_build() -> None:
    shell = FakeShell(has={"fio"})
    fio = GuestTools(shell, "g", fio_binary=lambda: pytest.fail("built for nothing")).get(Fio)
    assert fio.identity() == FioIdentity("fio-3.33", "image", "/usr/bin/fio")
    assert not fio.identity().pushed


def test_without_fio_and_nothing_to_push_fio_is_missing() -> None:
    with pytest.raises(ToolMissing, match=r"^fio is missing in guest g \(`command -v` found no fio; the fio tool "
                                          r"runs fio\): install fio in the guest image, or let the suite push"):
        GuestTools(FakeShell(), "g").get(Fio)


def test_a_failed_build_is_not_tried_again_for_every_disk() -> None:
    calls: list[int] = []

    def failing_build() -> Path:
        calls.append(1)
        raise ImageBuildError("downloading fio's source package 3.33-3 failed (exit 100): E: no mirror")

    tools = GuestTools(FakeShell(), "g", fio_binary=failing_build)
    for _ in range(3):
        with pytest.raises(ImageBuildError, match="no mirror"):
            tools.get(Fio)
    assert calls == [1]
    assert isinstance(tools.get(FioBinary), FioBinary)


def test_a_damaged_copy_is_an_error(static_fio: Path) -> None:
    shell = guest_without_fio(static_fio, sha="0" * 64)
    with pytest.raises(FioPushError, match=rf"^the fio pushed into guest g arrived damaged: {PUSHED} has SHA-256 "
                                           r"0{64}, sent [0-9a-f]{64}$"):
        GuestTools(shell, "g", fio_binary=lambda: static_fio).get(Fio)


def test_without_sha256sum_the_size_is_checked(static_fio: Path) -> None:
    shell = guest_without_fio(static_fio, sha="16000")
    assert GuestTools(shell, "g", fio_binary=lambda: static_fio).get(Fio).identity().pushed
    short = guest_without_fio(static_fio, sha="8192")
    with pytest.raises(FioPushError, match=r"has size 8192, sent 16000$"):
        GuestTools(short, "g", fio_binary=lambda: static_fio).get(Fio)


def test_a_pushed_fio_that_does_not_run_says_why(static_fio: Path) -> None:
    shell = guest_without_fio(static_fio, version=(126, "", "sh: /run/vioconform-bin/fio: Permission denied\n"))
    with pytest.raises(FioPushError, match=rf"^the pushed static fio at {PUSHED} does not run in guest g "
                                           rf"\(`{PUSHED} --version` exited 126: sh: {PUSHED}: Permission denied\)$"):
        GuestTools(shell, "g", fio_binary=lambda: static_fio).get(Fio)


def test_a_shell_that_cannot_copy_files_is_named(static_fio: Path) -> None:
    class RunOnly:
        def __init__(self) -> None:
            self.inner = FakeShell()

        def run(self, command: str, check: bool = True, timeout_s: float = 300.0):  # type: ignore[no-untyped-def]
            return self.inner.run(command, check, timeout_s)

    with pytest.raises(FioPushError, match="its shell cannot copy files"):
        GuestTools(RunOnly(), "g", fio_binary=lambda: static_fio).get(Fio)
