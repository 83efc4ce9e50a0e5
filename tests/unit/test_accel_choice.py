"""With KVM present the same code runs the guests under it: the accelerator choice (hypervisors/libvirt/
accel.py) takes KVM wherever its probe boots a guest and libvirt offers it, and the domain is then of
type ``kvm`` with the host's CPU; TCG only where KVM is refused, does not boot, or ``--accel tcg``."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("libvirt")  # accel asks libvirt's own error class (tox -e unit has no libvirt-python)

from hypervisors.libvirt import accel
from hypervisors.libvirt.accel import ProbeResult


class FakeConn:
    """The four questions accel asks of a libvirt connection."""

    def __init__(self, offers_kvm: bool = True) -> None:
        self.offers_kvm = offers_kvm

    def getDomainCapabilities(self, *_args: object) -> str:
        if not self.offers_kvm:
            import libvirt

            raise libvirt.libvirtError("invalid argument: KVM is not supported by '/usr/bin/qemu-system-x86_64'")
        return "<domainCapabilities/>"

    def getHostname(self) -> str:
        return "host"

    def getLibVersion(self) -> int:
        return 9000000

    def getVersion(self) -> int:
        return 7002000


@pytest.fixture(autouse=True)
def own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_kvm_is_chosen_where_its_probe_boots_and_asked_once() -> None:
    probes = []

    def probe() -> ProbeResult:
        probes.append(1)
        return ProbeResult(True)

    for _ in range(2):
        assert accel.choose("qemu:///system", FakeConn(), "auto", probe) == "kvm"
    assert accel.choose("qemu:///system", FakeConn(), "kvm", probe) == "kvm"
    assert probes == [1]  # the answer is cached per host


def test_tcg_where_kvm_does_not_boot_is_refused_or_not_asked_for() -> None:
    def no_boot() -> ProbeResult:
        return ProbeResult(False, "failed to set MSR 0x10a")

    assert accel.choose("qemu:///system", FakeConn(), "auto", no_boot) == "qemu"
    assert accel.choose("qemu:///session", FakeConn(offers_kvm=False), "auto", no_boot) == "qemu"

    def never() -> ProbeResult:
        raise AssertionError("--accel tcg probes nothing")

    assert accel.choose("qemu:///other", FakeConn(), "tcg", never) == "qemu"


def test_a_kvm_domain_has_the_hosts_cpu_and_a_tcg_one_has_none(tmp_path: Path) -> None:
    from hypervisors.base import GuestRequest
    from hypervisors.libvirt.backend import LibvirtBackend
    from model.types import DiskSpec

    request = GuestRequest("vioconform-xmlcheck", (DiskSpec("virtio-blk", 0),), tmp_path, "AAAA")
    backend = LibvirtBackend.__new__(LibvirtBackend)
    for domain_type, cpu in (("kvm", True), ("qemu", False)):
        xml = LibvirtBackend.domain_xml(backend, request.name, domain_type, tmp_path, tmp_path / "vmlinuz",
                                        tmp_path / "initrd", "console=ttyS0", request, 2222)
        assert xml.count(f"<domain type='{domain_type}'") == 1
        assert ("<cpu mode='host-passthrough'/>" in xml) == cpu
