"""The embedded guest's modules: the wanted ones and their dependencies, from each module's own
``depends=`` field. On the real packages the result was the same files as ``busybox depmod``'s
modules.dep gave (33 for 6.12.100+deb12-amd64, whose modules are xz-compressed; 6.1.0-47-amd64's are
not): here a small tree of the same shapes."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from images.build_error import ImageBuildError
from images.modules import closure, depends, module_name


def _module(root: Path, rel: str, deps: str | None, xz: bool = False) -> None:
    """An ELF-less stand-in for a module: its .modinfo strings, as the kernel's modpost writes them."""
    info = b"license=GPL\0" + (f"depends={deps}\0".encode() if deps is not None else b"") + b"intree=Y\0"
    data = b"\x7fELF...." + info + b"vermagic=6.12\0"
    path = root / (rel + (".xz" if xz else ""))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(lzma.compress(data) if xz else data)


@pytest.fixture
def modroot(tmp_path: Path) -> Path:
    root = tmp_path / "lib/modules/6.12.0-test"
    _module(root, "kernel/drivers/scsi/virtio_scsi.ko", "scsi_mod", xz=True)
    _module(root, "kernel/drivers/scsi/scsi_mod.ko", "scsi_common", xz=True)
    _module(root, "kernel/drivers/scsi/scsi_common.ko", "")
    _module(root, "kernel/fs/ext4/ext4.ko", "jbd2,crc16,mbcache")
    _module(root, "kernel/fs/jbd2/jbd2.ko", None)
    _module(root, "kernel/lib/crc16.ko", "")
    _module(root, "kernel/fs/mbcache.ko", "")
    _module(root, "kernel/drivers/net/virtio_net.ko", "net_failover,virtio_ring")  # virtio_ring built in
    _module(root, "kernel/drivers/net/net_failover.ko", "failover")
    _module(root, "kernel/net/core/failover.ko", "")
    _module(root, "kernel/drivers/md/dm-mod.ko", "")
    (root / "modules.builtin").write_text("kernel/drivers/virtio/virtio_ring.ko\nkernel/drivers/virtio/virtio_pci.ko\n")
    return root


def test_names_and_depends_are_read_from_the_module_itself(modroot: Path) -> None:
    assert module_name("kernel/drivers/md/dm-mod.ko.xz") == "dm_mod"
    assert depends(modroot / "kernel/drivers/scsi/virtio_scsi.ko.xz") == ["scsi_mod"]
    assert depends(modroot / "kernel/fs/jbd2/jbd2.ko") == []


def test_the_closure_holds_each_wanted_module_and_its_dependencies_not_the_built_in_ones(modroot: Path) -> None:
    got = closure(modroot, ("virtio_pci", "virtio_net", "virtio_scsi", "ext4", "dm_mod", "mptsas"), ("virtio_pci",))
    assert got == ["kernel/drivers/md/dm-mod.ko", "kernel/drivers/net/net_failover.ko",
                   "kernel/drivers/net/virtio_net.ko", "kernel/drivers/scsi/scsi_common.ko",
                   "kernel/drivers/scsi/scsi_mod.ko.xz", "kernel/drivers/scsi/virtio_scsi.ko.xz",
                   "kernel/fs/ext4/ext4.ko", "kernel/fs/jbd2/jbd2.ko", "kernel/fs/mbcache.ko",
                   "kernel/lib/crc16.ko", "kernel/net/core/failover.ko"]  # mptsas: not in this kernel, left out


def test_a_required_module_the_kernel_lacks_stops_the_build(modroot: Path) -> None:
    with pytest.raises(ImageBuildError, match="kernel has no module virtio_blk"):
        closure(modroot, ("virtio_blk",), ("virtio_blk",))
