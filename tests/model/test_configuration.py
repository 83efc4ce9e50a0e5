"""The configuration object: its ``str()`` is the test id of today, ``parse`` reads every id form back,
its JSON form round-trips, and a malformed id or JSON gets a clear error."""

from __future__ import annotations

import json

import pytest

from model.configuration import Configuration, ConfigurationError
from model.disks import suite_disks

#: Every id form, with the configuration it names.
IDS = {
    "libvirt:virtio-scsi:latency5ms": Configuration("libvirt", "virtio-scsi", None, "latency", 5.0),
    "libvirt:virtio-blk:latency0.5ms": Configuration("libvirt", "virtio-blk", None, "latency", 0.5),
    "libvirt:mptsas1068:latency1e-06ms": Configuration("libvirt", "mptsas1068", None, "latency", 1e-06),
    "libvirt:nvme:file": Configuration("libvirt", "nvme", None, "file"),
    "vsphere:pvscsi": Configuration("vsphere", "pvscsi"),
    "vsphere:lsilogic-sas": Configuration("vsphere", "lsilogic-sas"),
    "kvm7-libvirt:virtio-scsi:latency5ms": Configuration("libvirt", "virtio-scsi", "kvm7", "latency", 5.0),
    "kvm-7.example-libvirt:virtio-blk:file": Configuration("libvirt", "virtio-blk", "kvm-7.example", "file"),
    "kvm8:2222-libvirt:virtio-scsi:latency5ms": Configuration("libvirt", "virtio-scsi", "kvm8:2222", "latency", 5.0),
    "libvirt:virtio-scsi:latency5ms:aio=native,cache=none":
        Configuration("libvirt", "virtio-scsi", None, "latency", 5.0, (("aio", "native"), ("cache", "none"))),
    "kvm7-libvirt:virtio-blk:file:iothreads=2": Configuration("libvirt", "virtio-blk", "kvm7", "file", None,
                                                              (("iothreads", "2"),)),
    "vsphere:pvscsi:cache=none": Configuration("vsphere", "pvscsi", disk_settings=(("cache", "none"),)),
}


@pytest.mark.parametrize("test_id", IDS)
def test_every_id_form_round_trips(test_id: str) -> None:
    config = Configuration.parse(test_id)
    assert config == IDS[test_id]
    assert str(config) == test_id
    assert Configuration.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_the_ids_of_today_are_the_disks_labels() -> None:
    """No setting: the id is what the suite named its tests before the object (``DiskSpec.label``)."""
    for spec in suite_disks(["virtio-scsi", "virtio-blk"], "latency", 5.0)[::2]:
        assert str(Configuration.of_disk("libvirt", spec)) == f"libvirt:{spec.label}"
        assert str(Configuration.of_disk("libvirt", spec, host="kvm7")) == f"kvm7-libvirt:{spec.label}"
    spec = suite_disks(["nvme"], "file")[0]
    assert str(Configuration.of_disk("libvirt", spec)) == "libvirt:nvme:file"
    assert str(Configuration.of_disk("vsphere", None, "pvscsi")) == "vsphere:pvscsi"


@pytest.mark.parametrize(("test_id", "why"), [
    ("", "no controller after the backend"),
    ("libvirt", "no controller after the backend"),
    ("libvirt:", "no controller after the backend"),
    ("Libvirt:virtio-scsi", "backend 'Libvirt' is not a lower-case word"),
    ("libvirt:virtio-scsi:latency-5ms", "latency_ms -5.0 is not above 0"),
    ("libvirt:virtio-scsi:latency..ms", "holds no number of milliseconds"),
    ("libvirt:virtio-scsi:latency5ms:cache", "'libvirt:virtio-scsi:latency5ms' before the controller 'cache'"),
    ("-libvirt:nvme", "an empty host name"),
    ("libvirt:virtio-scsi:latency5ms:cache=", "its settings are key=value pairs"),
    ("libvirt:virtio-scsi:latency5ms:cache=none,aio=native", "are not sorted by key"),
    ("kvm 7-libvirt:virtio-scsi:file", "host 'kvm 7'"),
])
def test_a_malformed_id_says_what_is_wrong(test_id: str, why: str) -> None:
    with pytest.raises(ConfigurationError) as e:
        Configuration.parse(test_id)
    assert why in str(e.value)
    assert f"{test_id!r} is not a test id" in str(e.value) and "libvirt:virtio-scsi:latency5ms" in str(e.value)


@pytest.mark.parametrize(("data", "why"), [
    ({"controller": "pvscsi"}, "'backend' must be text"),
    ({"backend": "vsphere", "controller": "pvscsi", "colour": "red"}, "no field 'colour'"),
    ({"backend": "libvirt", "controller": "nvme", "backing": "latency", "latency_ms": "5"}, "must be a number"),
    ({"backend": "libvirt", "controller": "nvme", "backing": "latency"}, "only a latency) disk has a latency_ms"),
    ({"backend": "libvirt", "controller": "nvme", "disk_settings": [["cache"]]}, "list of [key, value] texts"),
    ({"backend": "libvirt", "controller": "nvme", "disk_settings": [["cache", "a:b"]]}, "disk setting cache=a:b"),
])
def test_a_malformed_dict_says_which_field(data: dict[str, object], why: str) -> None:
    with pytest.raises(ConfigurationError) as e:
        Configuration.from_dict(data)
    assert why in str(e.value)


def test_it_is_frozen_and_hashable() -> None:
    config = Configuration.parse("libvirt:virtio-scsi:latency5ms")
    with pytest.raises(AttributeError):
        config.controller = "nvme"  # type: ignore[misc]
    assert {config: 1}[Configuration.parse("libvirt:virtio-scsi:latency5ms")] == 1
