"""A user's image (``--image``): what the suite accepts, the one-line errors for what it refuses,
and an overlay that leaves the user's file untouched. Tiny images are made here with qemu-img."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from images import user
from images.user import Reader, UserImageError, check_image, create_overlay, inspect_image

needs_qemu_img = pytest.mark.skipif(shutil.which("qemu-img") is None, reason="qemu-img (Debian's qemu-utils) is not installed")

MIB = 1024**2
#: The child that runs as nobody needs an interpreter nobody may execute (a venv under root's home
#: may not be): the system's; the checked code needs only the standard library.
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable


def qemu_img(*args: str) -> None:
    subprocess.run(["qemu-img", *args], check=True, capture_output=True)


def raw_disk(path: Path, mbr: bool = True, gpt: bool = False) -> Path:
    with open(path, "wb") as f:
        f.truncate(4 * MIB)
        if mbr:
            f.seek(510)
            f.write(b"\x55\xaa")
        if gpt:
            f.seek(512)
            f.write(b"EFI PART")
    return path


def error_of(path: Path) -> str:
    with pytest.raises(UserImageError) as e:
        check_image(path)
    text = str(e.value)
    assert "\n" not in text, text
    return text


@needs_qemu_img
def test_qcow2_and_raw_disks_are_accepted_with_their_hash(tmp_path: Path) -> None:
    qcow2 = tmp_path / "a.qcow2"
    qemu_img("create", "-q", "-f", "qcow2", str(qcow2), "64M")
    info = inspect_image(qcow2)
    assert (info.format, info.virtual_size_bytes, info.path) == ("qcow2", 64 * MIB, qcow2)
    assert info.sha256 == hashlib.sha256(qcow2.read_bytes()).hexdigest()
    for name, kwargs in (("mbr.raw", {"mbr": True}), ("gpt.img", {"mbr": False, "gpt": True})):
        info = inspect_image(raw_disk(tmp_path / name, **kwargs))
        assert (info.format, info.virtual_size_bytes) == ("raw", 4 * MIB)


@needs_qemu_img
def test_what_is_not_a_usable_image_is_one_line_naming_it(tmp_path: Path) -> None:
    assert error_of(tmp_path / "nope.qcow2") == f"--image {tmp_path / 'nope.qcow2'}: no such file"
    assert "is a directory" in error_of(tmp_path)
    text = tmp_path / "notes.txt"
    text.write_text("not a disk\n" * 100)
    assert "not a disk image (a raw file without an MBR boot signature or a GPT header)" in error_of(text)
    assert "not a disk image" in error_of(raw_disk(tmp_path / "blank.raw", mbr=False))
    vmdk = tmp_path / "a.vmdk"
    qemu_img("create", "-q", "-f", "vmdk", str(vmdk), "16M")
    said = error_of(vmdk)
    assert "format vmdk is not supported (qcow2 or raw)" in said and f"qemu-img convert -O qcow2 {vmdk}" in said


@needs_qemu_img
def test_a_truncated_qcow2_is_refused_with_qemu_img_checks_words(tmp_path: Path) -> None:
    """A qcow2 cut short (a copy that stopped at 1 MiB) has a readable header, so ``qemu-img info``
    is content; only ``qemu-img check`` sees the clusters beyond the end. Refused before boot with
    its words, not 40 s later as a missing bootloader. Leaked clusters alone are no damage."""
    image = tmp_path / "cut.qcow2"
    qemu_img("create", "-q", "-f", "qcow2", str(image), "64M")
    subprocess.run(["qemu-io", "-c", "write -P 0xab 0 8M", str(image)], check=True, capture_output=True)
    check_image(image)  # whole: accepted
    os.truncate(image, MIB)
    said = error_of(image)
    assert said.startswith(f"--image {image}: qemu-img check finds the image damaged"), said
    assert "exceeding the end of the file" in said and "errors were found on the image" in said, said
    assert "give an intact copy" in said
    with pytest.raises(UserImageError):
        inspect_image(image)


@needs_qemu_img
def test_an_image_with_a_backing_file_of_its_own_is_refused(tmp_path: Path) -> None:
    base = raw_disk(tmp_path / "base.raw")
    top = tmp_path / "top.qcow2"
    qemu_img("create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(base), str(top))
    said = error_of(top)
    assert "has a backing file of its own" in said and "flatten it first" in said


def test_an_unreadable_image_is_named(tmp_path: Path) -> None:
    """As root, file modes do not stop a read: the check then runs as user nobody, for whom the file is
    really unreadable (mode 000), in a child process."""
    if os.geteuid() != 0:
        image = raw_disk(tmp_path / "secret.raw")
        image.chmod(0)
        assert "cannot be read (Permission denied)" in error_of(image)
        return
    root = Path(__file__).resolve().parents[2]
    where = Path(tempfile.mkdtemp(prefix="vioconform-test-"))  # pytest's tmp_path is root's only (0700)
    try:
        where.chmod(0o755)
        image = raw_disk(where / "secret.raw")
        image.chmod(0)
        code = ("import sys\nfrom pathlib import Path\nfrom images.user import UserImageError, _readable\n"
                "try:\n    _readable(Path(sys.argv[1]))\nexcept UserImageError as e:\n    print(e)\n")
        try:
            done = subprocess.run([SYSTEM_PYTHON, "-c", code, str(image)], user="nobody", extra_groups=[], cwd="/",
                                  env={"PYTHONPATH": str(root)}, capture_output=True, text=True, check=False)
        except (OSError, subprocess.SubprocessError) as e:
            pytest.skip(f"cannot run a child as nobody here: {e}")
        if "Traceback" in done.stderr:
            pytest.skip(f"user nobody cannot run the suite's code from {root}: {done.stderr.splitlines()[-1]}")
        assert done.stdout.strip() == f"--image {image}: cannot be read (Permission denied); make it readable by " \
                                      "the user running the suite", (done.stdout, done.stderr)
    finally:
        shutil.rmtree(where, ignore_errors=True)


@needs_qemu_img
def test_overlay_takes_the_writes_and_the_image_is_unchanged(tmp_path: Path) -> None:
    image = raw_disk(tmp_path / "disk.raw")
    before = (image.stat().st_mtime_ns, hashlib.sha256(image.read_bytes()).hexdigest())
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    overlay = create_overlay(inspect_image(image), run_dir)
    assert overlay == run_dir / "overlay.qcow2"
    subprocess.run(["qemu-io", "-f", "qcow2", "-c", "write -P 0xab 0 1M", str(overlay)], check=True,
                   capture_output=True)
    read = subprocess.run(["qemu-io", "-f", "qcow2", "-c", "read -P 0xab 0 1M", str(overlay)], check=True,
                          capture_output=True, text=True)
    assert "read 1048576/1048576" in read.stdout
    assert (image.stat().st_mtime_ns, hashlib.sha256(image.read_bytes()).hexdigest()) == before


@needs_qemu_img
def test_no_space_for_the_overlay_names_the_directory_and_the_space(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    image = raw_disk(tmp_path / "disk.raw")
    free = shutil.disk_usage(tmp_path).free
    # A reserve above what this filesystem has free: the real statvfs answer decides.
    monkeypatch.setattr(user, "OVERLAY_RESERVE_BYTES", free + 1024**4)
    with pytest.raises(UserImageError) as e:
        create_overlay(inspect_image(image), tmp_path)
    said = str(e.value)
    assert said.startswith(f"no space for the guest's overlay in {tmp_path}: ") and "MiB needed" in said
    assert "TMPDIR" in said and not (tmp_path / "overlay.qcow2").exists()


def test_who_may_read_a_file_by_its_mode() -> None:
    st = os.stat_result((0o100640, 0, 0, 1, 1000, 50, 0, 0, 0, 0))
    assert user._file_readable_by(st, Reader(1000, 7, (7,)))  # owner
    assert user._file_readable_by(st, Reader(2000, 50, (50,)))  # group
    assert not user._file_readable_by(st, Reader(2000, 60, (60,)))  # others: no read bit


@needs_qemu_img
@pytest.mark.skipif(os.geteuid() != 0, reason="staging for another user (QEMU's) needs root")
def test_an_image_qemu_cannot_read_is_staged_read_only(tmp_path: Path) -> None:
    """QEMU runs as its own user: behind a directory it cannot enter, the image is hard-linked into
    the run directory; a file it may not read at all is copied (the user's file stays as it was)."""
    nobody = Reader.of_user("nobody")
    assert nobody is not None
    run_dir = tmp_path / "run"  # tmp_path is root's only (0700): nobody cannot enter it
    run_dir.mkdir()
    image = raw_disk(tmp_path / "disk.raw")
    image.chmod(0o644)
    overlay = create_overlay(inspect_image(image), run_dir, nobody)
    backing = json.loads(subprocess.run(["qemu-img", "info", "--output=json", str(overlay)], check=True,
                                        capture_output=True, text=True).stdout)["backing-filename"]
    assert backing == str(run_dir / "image.raw") and os.path.samefile(backing, image)
    image.chmod(0o600)
    before = (image.stat().st_mtime_ns, image.stat().st_mode, image.stat().st_uid)
    overlay = create_overlay(inspect_image(image), run_dir, nobody)
    staged = run_dir / "image.raw"
    assert not os.path.samefile(staged, image) and staged.read_bytes() == image.read_bytes()
    assert (staged.stat().st_mode & 0o777, staged.stat().st_uid) == (0o444, nobody.uid)
    assert (image.stat().st_mtime_ns, image.stat().st_mode, image.stat().st_uid) == before
