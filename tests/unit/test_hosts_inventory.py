"""The libvirt hosts of a run: repeated --libvirt-uri and the TOML inventory (hypervisors/libvirt/inventory.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypervisors.libvirt.inventory import HostSpec, InventoryError, default_name, hosts_from_uris, load_inventory


def test_names_come_from_the_uris() -> None:
    assert default_name("qemu:///system") == "local"
    assert default_name("qemu+ssh://root@kvm7.example/system") == "kvm7.example"
    assert default_name("qemu+ssh://root@127.0.0.1:2222/system?keyfile=/k") == "127.0.0.1:2222"
    assert hosts_from_uris(["qemu:///system", "qemu+ssh://root@kvm7/system"]) == (
        HostSpec("local", "qemu:///system"), HostSpec("kvm7", "qemu+ssh://root@kvm7/system"))


def test_the_same_host_twice_is_refused() -> None:
    with pytest.raises(InventoryError, match="is listed twice"):
        hosts_from_uris(["qemu+ssh://kvm7/system", "qemu+ssh://kvm7/system"])
    with pytest.raises(InventoryError, match="two hosts are named 'kvm7'"):
        hosts_from_uris(["qemu+ssh://kvm7/system", "qemu+ssh://root@kvm7/system"])


def test_an_inventory_gives_each_host_its_settings(tmp_path: Path) -> None:
    inv = tmp_path / "hosts.toml"
    inv.write_text('[[host]]\nname = "kvm7"\nuri = "qemu+ssh://root@kvm7.example/system"\n'
                   'host_dir = "/srv/vioc"\nemulator = "/opt/qemu/bin/qemu-system-x86_64"\nmachine = "q35"\n\n'
                   '[[host]]\nuri = "qemu:///system"\n')
    assert load_inventory(inv) == (
        HostSpec("kvm7", "qemu+ssh://root@kvm7.example/system", "/srv/vioc",
                 Path("/opt/qemu/bin/qemu-system-x86_64"), "q35"),
        HostSpec("local", "qemu:///system"))


@pytest.mark.parametrize(("text", "said"), [
    ("[[host]\n", "not TOML: "),
    ("", "no [[host]] tables; each libvirt host is one"),
    ('hosts = 1\n[[host]]\nuri = "qemu:///system"\n', "unknown key(s) hosts; only [[host]] tables"),
    ('[[host]]\nname = "a"\n', "host 1: no uri; e.g. uri = "),
    ('[[host]]\nuri = "qemu:///system"\nport = 22\n', "host 1: unknown key(s) port; known: name, uri"),
    ('[[host]]\nuri = "qemu:///system"\nmachine = 35\n', "host 1: machine must be text (in quotes)"),
    ('[[host]]\nuri = "qemu:///system"\nname = "kvm 7"\n', "host 1: name 'kvm 7': letters, digits"),
    ('[[host]]\nuri = "qemu:///system"\n[[host]]\nuri = "qemu:///session"\n', "two hosts are named 'local'"),
])
def test_a_bad_inventory_names_the_file_and_entry(tmp_path: Path, text: str, said: str) -> None:
    inv = tmp_path / "hosts.toml"
    inv.write_text(text)
    with pytest.raises(InventoryError) as e:
        load_inventory(inv)
    assert str(e.value).startswith(f"--hosts {inv}: ") and said in str(e.value), str(e.value)


def test_a_missing_inventory_is_said_so(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match=r"cannot read it: No such file or directory"):
        load_inventory(tmp_path / "nope.toml")


def test_a_pools_fingerprint_is_per_host() -> None:
    from model.across.fingerprint import change_line, differences, fingerprint

    a = {"kvm7:qemu.version": "7.2.22", "kvm8:qemu.version": "9.2.0", "kvm7:disk.sda": "x", "guest.kernel": "6.1"}
    b = {**a, "kvm8:qemu.version": "9.2.1"}
    assert fingerprint(a) == {"guest.kernel": "6.1", "kvm7:qemu.version": "7.2.22", "kvm8:qemu.version": "9.2.0"}
    assert change_line(1, 2, a, b) == "run 1 -> 2: kvm8:qemu.version 9.2.0 -> 9.2.1; unchanged: guest.kernel, kvm7:qemu.version"
    assert differences(a, b)[0] == [("kvm8:qemu.version", "9.2.0", "9.2.1")]


def test_the_kvm_probe_cache_knows_a_remote_host_by_name_not_by_how_it_is_reached() -> None:
    from hypervisors.libvirt.accel import cache_uri

    assert cache_uri("qemu:///system") == "qemu:///system"
    assert cache_uri("qemu+ssh://root@127.0.0.1:4242/system?keyfile=/k&known_hosts=/h") == \
        "qemu+ssh://root@127.0.0.1/system" == cache_uri("qemu+ssh://root@127.0.0.1:2222/system")
