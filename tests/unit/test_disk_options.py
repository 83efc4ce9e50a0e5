"""--disk and --profile on the command line: usage errors (exit 4) before any guest, and the
configuration they give (each controller's settings, the test id); fixtures/options_disk.py."""

from __future__ import annotations

import pytest

from tests.unit.suite_options import errors, run_suite_options

pytest_plugins = ["pytester"]

#: A test that prints each controller's settings and its test id (no guest).
SHOW_DISKS = '''
from fixtures.state import OPTIONS_KEY

def test_show_disks(pytestconfig):
    o = pytestconfig.stash[OPTIONS_KEY]
    for c in o.controllers:
        print("CONFIG", c, o.configuration(c), o.settings_for(c).pairs())
'''


def _configs(pytester: pytest.Pytester, *args: str) -> list[str]:
    pytester.makepyfile(test_disks=SHOW_DISKS)
    result = run_suite_options(pytester, *args)
    assert result.ret == 0, errors(result)
    return [line[line.index("CONFIG") + 7:] for line in result.stdout.lines if "CONFIG " in line]


@pytest.mark.parametrize(("args", "said"), [
    (("--disk", "cachemode=none"), "--disk cachemode=none: no setting 'cachemode'; the keys are cache, aio"),
    (("--disk", "cache=fast"), "cache takes writeback, none, writethrough, directsync, unsafe"),
    (("--disk", "iops=0"), "iops takes a whole number above 0"),
    (("--disk", "cache=writeback,aio=native"), "aio=native needs cache=none or cache=directsync"),
    (("--disk", "iothread=on", "--controllers", "ahci"), ("iothread=on: disk 0 (ahci:latency5ms) is on ahci, which "
                                                          "QEMU never runs in an iothread")),
    (("--disk", "wwn=5000c50015ea7100", "--controllers", "virtio-blk"), "whose device has no WWN"),
    (("--disk", "format=qcow2"), "is the null-co latency disk, which has no image to format"),
    (("--profile", "esxi"), "esxi: no such profile; the profiles are nova, proxmox, kubevirt, ovirt, virt-install"),
    (("--profile", "nova,kubevirt"), "both put their disk on virtio-blk"),
    (("--profile", "proxmox", "--controllers", "virtio-scsi"), "give --profile or --controllers, not both"),
    (("--profile", "nova"), "format=qcow2: disk 0 (virtio-blk:latency5ms) is the null-co latency disk"),
])
def test_bad_disk_settings_are_usage_errors_before_any_guest(pytester: pytest.Pytester, args: tuple[str, ...],
                                                             said: str) -> None:
    result = run_suite_options(pytester, *args)
    assert result.ret == 4, errors(result)
    assert said in errors(result) and "Traceback" not in errors(result), errors(result)


def test_no_disk_option_leaves_the_ids_as_they_were(pytester: pytest.Pytester) -> None:
    assert _configs(pytester, "--controllers", "virtio-scsi,virtio-blk") == [
        "virtio-scsi libvirt:virtio-scsi:latency5ms ()", "virtio-blk libvirt:virtio-blk:latency5ms ()"]


def test_disk_settings_are_every_controllers_and_in_its_id(pytester: pytest.Pytester) -> None:
    assert _configs(pytester, "--controllers", "virtio-scsi", "--disk", "cache=none,aio=native") == [
        "virtio-scsi libvirt:virtio-scsi:latency5ms:aio=native,cache=none (('aio', 'native'), ('cache', 'none'))"]


def test_each_profile_is_one_configuration_and_disk_goes_over_it(pytester: pytest.Pytester) -> None:
    lines = _configs(pytester, "--profile", "ovirt,kubevirt", "--disk", "cache=directsync")
    assert lines == [
        ("virtio-scsi libvirt:virtio-scsi:latency5ms:aio=threads,cache=directsync,discard=ignore,format=raw,"
        "iothread=on (('aio', 'threads'), ('cache', 'directsync'), ('discard', 'ignore'), ('format', 'raw'), "
        "('iothread', 'on'))"),
        ("virtio-blk libvirt:virtio-blk:latency5ms:aio=threads,cache=directsync,discard=unmap,format=raw "
        "(('aio', 'threads'), ('cache', 'directsync'), ('discard', 'unmap'), ('format', 'raw'))")]
