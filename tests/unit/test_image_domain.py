"""A user's image as libvirt boots it: firmware (SeaBIOS on the serial console, or OVMF with a
per-run variable store), the boot disk and the seed as QEMU devices at their own PCI slots, first
in the boot order, and the files made in the run directory. The whole domain is checked by libvirt
itself in tests/e2e/test_image_boot.py (no libvirt here)."""

from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hypervisors.base import GuestLogin, GuestRequest, ImageRequest
from hypervisors.libvirt import imageboot
from hypervisors.libvirt.controllers import FIRST_DISK_PCI_SLOT, NET_PCI_SLOT, disk_devices
from images.cloudinit import DEFAULT_GUEST_USER
from images.seed import read_seed
from images.user import inspect_image
from model.errors import HypervisorError
from model.types import DiskSpec
from transport.ssh import generate_run_key


def fake_ovmf(directory: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory.mkdir()
    (directory / imageboot.OVMF_CODE).write_bytes(b"code")
    (directory / imageboot.OVMF_VARS).write_bytes(b"vars")
    monkeypatch.setenv(imageboot.OVMF_DIR_ENV, str(directory))
    return directory


def test_bios_boots_the_images_own_bootloader() -> None:
    os_el = ET.fromstring(imageboot.os_xml("bios", None))
    assert os_el.find("kernel") is None and os_el.find("initrd") is None
    assert os_el.find("type").get("machine") == "pc"  # type: ignore[union-attr]
    assert os_el.find("bios").get("useserial") == "yes"  # type: ignore[union-attr]  # SeaBIOS on the console
    assert os_el.find("boot") is None  # the boot disk's bootindex decides


def test_uefi_uses_ovmf_with_a_per_run_variable_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ovmf = fake_ovmf(tmp_path / "OVMF", monkeypatch)
    os_el = ET.fromstring(imageboot.os_xml("uefi", tmp_path / "run" / "OVMF_VARS.fd"))
    loader = os_el.find("loader")
    assert loader is not None and loader.text == str(ovmf / "OVMF_CODE_4M.fd")
    assert (loader.get("readonly"), loader.get("type")) == ("yes", "pflash")
    assert os_el.findtext("nvram") == str(tmp_path / "run" / "OVMF_VARS.fd")


def test_uefi_without_ovmf_names_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv(imageboot.OVMF_DIR_ENV, str(tmp_path / "empty"))
    with pytest.raises(HypervisorError) as e:
        imageboot.ovmf_files()
    said = str(e.value)
    assert said.startswith(f"--firmware uefi needs OVMF, and {tmp_path / 'empty' / 'OVMF_CODE_4M.fd'}, ")
    assert "install Debian's ovmf package" in said and "\n" not in said


def devices(args: list[str]) -> dict[str, dict[str, object]]:
    pairs = zip(args[::2], args[1::2], strict=True)
    parsed = [(flag, json.loads(value)) for flag, value in pairs]
    return {str(v.get("id", v.get("node-name"))): v for _, v in parsed}


def test_boot_disk_and_seed_sit_on_virtio_blk_at_their_own_slots(tmp_path: Path) -> None:
    files = imageboot.BootFiles(tmp_path / "overlay.qcow2", tmp_path / "seed.iso", None, "vioconform",
                                tmp_path / "id_ed25519", "ssh-ed25519 AAAA")
    d = devices(imageboot.qemu_args(files))
    boot, seed = d["ua-vioc-boot"], d["ua-vioc-seed"]
    assert boot == {"driver": "virtio-blk-pci", "drive": "vioc-boot", "id": "ua-vioc-boot", "serial": "vioc-boot",
                    "bus": "pci.0", "addr": "0xf", "bootindex": 1}
    assert seed["serial"] == "vioc-seed" and seed["addr"] == "0x10" and "bootindex" not in seed
    assert d["vioc-seed"]["read-only"] is True
    assert d["vioc-boot"]["driver"] == "qcow2"
    assert d["vioc-boot"]["file"] == {"driver": "file", "filename": str(tmp_path / "overlay.qcow2"),
                                      "cache": {"direct": False, "no-flush": True}}
    slots = {imageboot.BOOT_PCI_SLOT, imageboot.SEED_PCI_SLOT}
    assert max(slots) < NET_PCI_SLOT < FIRST_DISK_PCI_SLOT and len(slots) == 2
    no_seed = devices(imageboot.qemu_args(imageboot.BootFiles(files.overlay, None, None, "qa", files.key_path, "k")))
    assert set(no_seed) == {"vioc-boot", "ua-vioc-boot"}


def test_the_throwaway_overlay_ends_the_guests_flushes_at_qemu(tmp_path: Path) -> None:
    """The boot overlay goes with the run, so a guest flush has nothing to keep: both of its nodes
    are opened with cache.no-flush (cache=unsafe), each flush not a host fdatasync the guest waits
    for. The user's image under it is read-only, and the seed keeps QEMU's defaults."""
    files = imageboot.BootFiles(tmp_path / "overlay.qcow2", tmp_path / "seed.iso", None, "vioconform",
                                tmp_path / "id_ed25519", "ssh-ed25519 AAAA")
    d = devices(imageboot.qemu_args(files))
    overlay = d["vioc-boot"]
    for node in (overlay, overlay["file"]):
        assert node["cache"] == {"direct": False, "no-flush": True}, node  # type: ignore[index]
    assert "cache" not in d["vioc-seed"] and "cache" not in d["vioc-seed"]["file"]  # type: ignore[operator]


def test_the_disks_under_test_boot_after_the_image(tmp_path: Path) -> None:
    """libvirt 9.0 would give the first <disk> bootindex 1, which the image's disk has."""
    specs = [DiskSpec("virtio-blk", 0, backing="file"), DiskSpec("virtio-scsi", 1, backing="file")]
    xml, _ = disk_devices(specs, tmp_path, first_boot_order=2)
    orders = [ET.fromstring(x).find("boot") for x in xml if x.startswith("<disk")]
    assert [o.get("order") for o in orders if o is not None] == ["2", "3"]
    xml, _ = disk_devices(specs, tmp_path)
    assert all(ET.fromstring(x).find("boot") is None for x in xml if x.startswith("<disk"))


@pytest.mark.skipif(shutil.which("qemu-img") is None, reason="qemu-img (Debian's qemu-utils) is not installed")
@pytest.mark.skipif(os.geteuid() != 0, reason="the files are handed to QEMU's user (chown): needs root")
def test_prepare_makes_overlay_seed_and_variables_in_the_run_dir(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    fake_ovmf(tmp_path / "OVMF", monkeypatch)
    image = tmp_path / "disk.raw"
    with open(image, "wb") as f:
        f.truncate(1024**2)
        f.seek(510)
        f.write(b"\x55\xaa")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    key_path, pub = generate_run_key(run_dir)
    info = inspect_image(image)
    request = GuestRequest("vioconform-1", (), run_dir, pub, image=ImageRequest(info, "uefi"))
    assert request.image is not None
    files = imageboot.prepare(request, request.image, key_path)
    assert files.overlay == run_dir / "overlay.qcow2" and files.nvram == run_dir / "OVMF_VARS.fd"
    assert Path(files.nvram).read_bytes() == b"vars"
    assert files.endpoint_user == DEFAULT_GUEST_USER and files.key_path == key_path
    assert files.seed is not None
    seed = read_seed(Path(files.seed))
    assert seed["label"] == "cidata"
    user_data = json.loads(seed["user-data"].removeprefix("#cloud-config\n"))
    assert user_data["ssh_authorized_keys"] == [f"ssh-ed25519 {pub} vioconform-run"]
    assert user_data["ssh_keys"]["ed25519_public"] == files.host_key  # the key the suite pins
    login = GuestLogin("qa", tmp_path / "qa_key", "ssh-ed25519 AAAAimage")
    files = imageboot.prepare(request, ImageRequest(info, "bios", login), key_path)
    assert (files.seed, files.nvram, files.endpoint_user, files.key_path, files.host_key) == \
        (None, None, "qa", tmp_path / "qa_key", "ssh-ed25519 AAAAimage")

