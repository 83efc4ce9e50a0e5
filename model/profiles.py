"""Platform profiles: the bus and the disk settings each platform gives a VM's disk by default,
read from the platform's own source (``--profile NAME``; docs/profiles.md has the tables).

Each profile encodes what the platform does for a file-backed image disk on a local filesystem
that supports O_DIRECT, the case the suite's disks are; where the platform decides by the
storage (block device, preallocation, storage type) the docstring says which branch was taken.
A setting the suite sets on its own (``cache='none' io='native' discard='unmap'`` on a file
disk) is spelled out wherever the platform differs from it, so that nothing of the suite's own
choice is left in a profile's configuration.
"""

from __future__ import annotations

from dataclasses import dataclass

from model.disk_settings import DiskSettings


class ProfileError(ValueError):
    """A ``--profile`` value that names no profile, or one given twice."""


@dataclass(frozen=True)
class Profile:
    """One platform's disk: ``controller`` (a libvirt controller name of the suite, e.g.
    ``virtio-blk``), its ``settings``, and ``sources``: (repository, path) of the files read."""

    name: str
    platform: str
    controller: str
    settings: DiskSettings
    sources: tuple[tuple[str, str], ...]


NOVA = Profile(
    "nova", "OpenStack Nova (libvirt driver)", "virtio-blk",
    DiskSettings(cache="none", aio="threads", discard="ignore", format="qcow2"),
    (("openstack/nova", "nova/virt/libvirt/driver.py"), ("openstack/nova", "nova/virt/libvirt/imagebackend.py"),
     ("openstack/nova", "nova/virt/libvirt/blockinfo.py")))
"""OpenStack Nova's libvirt driver, an image-backed instance disk.

- bus virtio-blk: blockinfo.py's default disk bus for kvm/qemu (virtio-scsi only when the image
  asks with ``hw_scsi_model``);
- cache none: driver.py's ``disk_cachemode`` ("none" where the instances directory supports
  O_DIRECT, else "writeback"; the issue's table says so too);
- aio threads: imagebackend.py leaves ``driver_io`` unset (libvirt's default, threads) unless
  ``preallocate_images=space``, which sets native;
- discard ignore: imagebackend.py takes ``[libvirt]hw_disk_discard``, unset by default (libvirt's
  ignore);
- detect_zeroes off (never set), format qcow2 (the Qcow2 image backend, ``use_cow_images``
  defaults to true);
- iothread: driver.py gives the domain one iothread (``_get_guest_iothread``) but pins no disk
  to it, so the disks run in QEMU's main loop: not encoded (``iothread`` off).
"""

PROXMOX = Profile(
    "proxmox", "Proxmox VE", "virtio-scsi",
    DiskSettings(cache="none", aio="io_uring", iothread="on", discard="ignore", detect_zeroes="on"),
    (("proxmox/qemu-server", "src/PVE/QemuServer/Drive.pm"), ("proxmox/qemu-server", "src/PVE/QemuServer/Blockdev.pm"),
     ("proxmox/pve-manager", "www/manager6/qemu/OSDefaults.js"), ("proxmox/pve-manager", "www/manager6/qemu/HDEdit.js")))
"""Proxmox VE, a disk made in its web interface on directory storage.

- bus scsi on ``virtio-scsi-single`` (OSDefaults.js' ``scsihw``): one virtio-scsi HBA per disk;
  the suite's virtio-scsi HBA carries the disk under test and the scratch disk together;
- cache none: Drive.pm's ``drive_uses_cache_direct`` (no cache given: O_DIRECT, flushes kept);
- aio io_uring: Drive.pm's ``aio_cmdline_option`` (io_uring unless the storage is LVM, CIFS or
  krbd without O_DIRECT);
- iothread on: HDEdit.js ticks "IO thread" for a SCSI disk on virtio-scsi-single and for virtio;
- discard ignore (the "Discard" box is unticked; Blockdev.pm: ``unmap`` only with ``discard=on``);
- detect_zeroes on: Drive.pm's ``detect_zeroes_cmdline_option`` ("on" without discard, "unmap" with);
- format: qcow2 on directory storage, raw on LVM or ZFS; the suite's raw file is kept (``format``
  not set), the storage-dependent choice is the user's: ``--disk format=qcow2``.
"""

KUBEVIRT = Profile(
    "kubevirt", "KubeVirt (amd64)", "virtio-blk",
    DiskSettings(cache="none", aio="threads", discard="unmap", format="raw"),
    (("kubevirt/kubevirt", "pkg/virt-launcher/virtwrap/converter/converter.go"),
     ("kubevirt/kubevirt", "pkg/virt-launcher/virtwrap/converter/storage/volume.go"),
     ("kubevirt/kubevirt", "pkg/defaults/amd64.go")))
"""KubeVirt on amd64, a filesystem PVC's disk.img with ``bus: virtio``.

- bus virtio-blk as the VM's manifest names it; a disk without a bus is SATA on amd64
  (pkg/defaults/amd64.go), which this profile does not encode;
- cache none: converter.go's cache choice (none where the backing supports O_DIRECT, else
  writethrough);
- aio threads: converter.go's ``SetOptimalIOMode`` sets native only on a block device or a
  preallocated image; a sparse image gets nothing (QEMU's threads);
- discard unmap: volume.go's ``setDiskDriver`` for volumes not listed to ignore discard;
- detect_zeroes off, format raw, no iothread unless the VM asks (``ioThreadsPolicy``).
"""

_OVIRT_BUILDERS = "backend/manager/modules/vdsbroker/src/main/java/org/ovirt/engine/core/vdsbroker/builder/vminfo"

OVIRT = Profile(
    "ovirt", "oVirt", "virtio-scsi",
    DiskSettings(cache="none", aio="threads", iothread="on", discard="ignore", format="raw"),
    (("oVirt/ovirt-engine", f"{_OVIRT_BUILDERS}/LibvirtVmXmlBuilder.java"),
     ("oVirt/ovirt-engine", f"{_OVIRT_BUILDERS}/VmInfoBuildUtils.java")))
"""oVirt, an image disk on a file storage domain (NFS), VirtIO-SCSI interface.

- bus virtio-scsi (virtio-blk where the disk's interface is VirtIO);
- cache none: LibvirtVmXmlBuilder.java's ``writeDiskDriver`` (writethrough only for a transient disk);
- aio threads: ``shouldUseNativeIO`` is false for a file disk (native on block domains and LUNs);
- iothread on: the VM has one iothread by default (VmBase's ``numOfIoThreads = 1``) and the
  virtio-scsi controller, or the virtio-blk disk, is pinned to it;
- discard ignore (``unmap`` only with the disk's "pass discard"), detect_zeroes off (never set);
- format raw (a preallocated or thin raw volume; qcow2 for a thin disk with snapshots).
"""

VIRT_INSTALL = Profile(
    "virt-install", "virt-install (virt-manager)", "virtio-blk",
    DiskSettings(cache="writeback", aio="threads", discard="unmap", format="qcow2"),
    (("virt-manager/virt-manager", "virtinst/devices/disk.py"),))
"""virt-install, a new disk in the default directory pool.

- bus virtio (disk.py's default bus where the OS supports it);
- cache and aio: left to libvirt (QEMU's writeback and threads) on a file; disk.py sets none and
  native only for a block device. The issue's table says "default": that default is writeback,
  spelled out here because the suite's own default is none;
- discard unmap: disk.py sets it for a sparse volume it creates (allocation 0);
- format qcow2: the directory pool's default volume format; detect_zeroes off, no iothread.
"""

PROFILES: dict[str, Profile] = {p.name: p for p in (NOVA, PROXMOX, KUBEVIRT, OVIRT, VIRT_INSTALL)}


def parse_profiles(text: str) -> tuple[Profile, ...]:
    """``NAME[,NAME...]`` as profiles, in the order given; ProfileError names an unknown or repeated one."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ProfileError(f"--profile is empty; the profiles are {', '.join(PROFILES)}")
    unknown = [n for n in names if n not in PROFILES]
    if unknown:
        raise ProfileError(f"--profile {', '.join(unknown)}: no such profile; the profiles are {', '.join(PROFILES)}")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ProfileError(f"--profile names {', '.join(twice)} more than once: each profile is one configuration")
    return tuple(PROFILES[n] for n in names)
