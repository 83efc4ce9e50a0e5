"""Backend knowledge lives in its backend: each backend declares its defaults in an SDK-free module,
the options read them (``--help`` needs neither libvirt-python nor pyVmomi), no code in fixtures/ or
model/across/series.py branches on a backend's name, and the run's configurations (the test ids) are
built once from the options."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from hypervisors import BACKENDS, DEFAULTS, BackendUnavailable, backend_defaults, controller_names
from hypervisors.libvirt.inventory import HostSpec
from model.configuration import Configuration

ROOT = Path(__file__).resolve().parents[2]
#: Where no backend's name may decide anything: the plugin and the series of stored runs.
NO_BRANCHES = (*sorted((ROOT / "fixtures").glob("*.py")), ROOT / "model" / "across" / "series.py")


def test_every_backend_declares_its_defaults() -> None:
    assert list(DEFAULTS) == list(BACKENDS)
    for name, d in DEFAULTS.items():
        assert d.name == name and backend_defaults(name) is d
        try:
            offered = controller_names(name)
        except BackendUnavailable:  # vSphere's table needs pyvmomi's type library
            continue
        assert set(d.controllers) <= set(offered), f"{name} defaults to controllers it does not offer"
    with pytest.raises(BackendUnavailable, match="unknown hypervisor backend 'xen'"):
        backend_defaults("xen")


def test_the_options_need_no_backend_sdk() -> None:
    """The option group and its defaults load with libvirt and pyVmomi made unimportable."""
    code = ("import sys\nsys.modules['libvirt'] = None\nsys.modules['pyVmomi'] = None\n"
            "from _pytest.config.argparsing import Parser\nfrom fixtures import options\n"
            "p = Parser(_ispytest=True)\noptions.pytest_addoption(p)\n"
            "print(sorted(m for m in sys.modules if m.startswith(('hypervisors.libvirt.', 'hypervisors.vsphere.'))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "backend" not in done.stdout, done.stdout  # no backend module (and so no SDK) was imported


def _name_branches(path: Path) -> list[str]:
    """Comparisons of anything with a backend's name (``opts.hypervisor == "libvirt"``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            names = [c.value for c in (node.left, *node.comparators) if isinstance(c, ast.Constant)]
            if any(n in BACKENDS for n in names):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_backend_name_branch_outside_hypervisors() -> None:
    found = [b for path in NO_BRANCHES for b in _name_branches(path)]
    assert not found, "ask the backend's defaults (hypervisors/defaults.py) instead:\n" + "\n".join(found)


def _options(hypervisor: str = "libvirt", controllers: tuple[str, ...] = ("virtio-scsi", "virtio-blk"),
             **given: object) -> SuiteOptions:
    base = SuiteOptions(hypervisor, None, "qemu:///system", "auto", controllers, "latency", 5.0, 2.0,
                        (), (), None, 120.0, Path("r"), Path("r/junit.xml"))
    return dataclasses.replace(base, **given)  # type: ignore[arg-type]


def _ids(opts: SuiteOptions) -> list[str]:
    return [str(config) for _, config in opts.configurations]


def test_the_test_ids_are_the_configurations() -> None:
    """The ids of today, built in one place: one libvirt host, a pool, a file disk, vSphere."""
    assert _ids(_options()) == ["libvirt:virtio-scsi:latency5ms", "libvirt:virtio-blk:latency5ms"]
    pool = (HostSpec("kvm7", "qemu+ssh://root@kvm7/system"), HostSpec("kvm8", "qemu+ssh://root@kvm8/system"))
    assert _ids(_options(controllers=("virtio-scsi",), hosts=pool)) == [
        "kvm7-libvirt:virtio-scsi:latency5ms", "kvm8-libvirt:virtio-scsi:latency5ms"]
    assert _ids(_options(controllers=("nvme",), disk_backing="file")) == ["libvirt:nvme:file"]
    assert _ids(_options("vsphere", ("pvscsi", "lsilogic-sas"))) == ["vsphere:pvscsi", "vsphere:lsilogic-sas"]
    pooled = _options(controllers=("virtio-scsi",), hosts=pool)
    assert pooled.configuration("virtio-scsi", pool[1]) == Configuration.parse("kvm8-libvirt:virtio-scsi:latency5ms")
    assert pooled.disk_spec("virtio-scsi", "scratch").backing == "file"


def test_a_backend_off_the_libvirt_hosts_keeps_its_options() -> None:
    """vSphere's guests do not run on --libvirt-uri's hosts: no pool, and its options are its own."""
    pool = (HostSpec("kvm7", "qemu+ssh://root@kvm7/system"), HostSpec("kvm8", "qemu+ssh://root@kvm8/system"))
    opts = _options("vsphere", ("pvscsi",), hosts=pool)
    assert not opts.pool and opts.for_host(pool[1]) is opts
    assert _options(hosts=pool).for_host(pool[1]).libvirt_uri == pool[1].uri
