"""A series' name: the default derived from what the job asks for (never from what it found), and
the names a series may have."""

from __future__ import annotations

import hashlib

import pytest

from model.across.fingerprint import change_line, changes
from model.across.series import (
    LOCAL_HOST,
    MAX_SERIES_CHARS,
    UNKNOWN_TEMPLATE,
    UNKNOWN_VCENTER,
    SeriesInputs,
    default_series,
    image_name,
    series_problem,
    stored_inputs,
    stored_series,
)

JOB = SeriesInputs("libvirt", ("local",), ("virtio-scsi", "virtio-blk"), (), "latency", 5.0, "embedded")


def _job(**given: object) -> SeriesInputs:
    return SeriesInputs(**{**JOB.__dict__, **given})


def test_the_default_is_the_job_and_sets_are_sets() -> None:
    assert default_series(JOB) == "libvirt_local_virtio_blk_virtio_scsi_lat5ms_embedded"
    assert default_series(_job(controllers=("virtio-blk", " virtio-scsi "))) == default_series(JOB)
    assert default_series(_job(hosts=("kvm8", "kvm7"))) == default_series(_job(hosts=("kvm7", "kvm8"))) == \
        "libvirt_kvm7_kvm8_virtio_blk_virtio_scsi_lat5ms_embedded"
    assert default_series(_job(faults=("tcq-off", "io-breakup"))) == \
        "libvirt_local_virtio_blk_virtio_scsi_inject_io_breakup_tcq_off_lat5ms_embedded"
    assert default_series(_job(disk_latency_ms=0.5)) == "libvirt_local_virtio_blk_virtio_scsi_lat0p5ms_embedded"
    assert default_series(_job(disk_backing="file")) == "libvirt_local_virtio_blk_virtio_scsi_file_embedded"
    assert default_series(_job(image_name="Debian-12.genericcloud")) == \
        "libvirt_local_virtio_blk_virtio_scsi_lat5ms_debian_12_genericcloud"
    assert default_series(_job(hypervisor="vsphere", hosts=("vc1.example.com",), controllers=("pvscsi",),
                               image_name="rhel9-template")) == "vsphere_vc1_example_com_pvscsi_lat5ms_rhel9_template"
    every = {default_series(_job(**{k: v})) for k, v in [("hosts", ("kvm7",)), ("controllers", ("nvme",)),
                                                         ("faults", ("tcq-off",)), ("disk_latency_ms", 1.0),
                                                         ("disk_backing", "file"), ("image_name", "x")]}
    assert len(every) == 6 and default_series(JOB) not in every  # each input names another job


def test_disk_settings_name_another_series_and_none_keep_the_old_names() -> None:
    asked = _job(disk_settings='{"virtio-scsi": {"aio": "native", "cache": "none"}}')
    assert default_series(asked) == "libvirt_local_virtio_blk_virtio_scsi_lat5ms_set_" + hashlib.sha256(
        asked.disk_settings.encode()).hexdigest()[:8] + "_embedded"
    assert default_series(_job(disk_settings='{"virtio-scsi": {"cache": "none"}}')) != default_series(asked)
    assert default_series(_job(disk_settings="")) == default_series(JOB)


def test_the_image_is_named_never_hashed() -> None:
    assert image_name(None) == image_name("embedded:3f2a9c") == image_name("embedded:77b1e0") == "embedded"
    assert image_name("/srv/images/debian-12-genericcloud-amd64.qcow2") == \
        image_name("/other/debian-12-genericcloud-amd64.raw") == "debian_12_genericcloud_amd64"


def test_images_whose_names_reduce_to_the_same_text_are_different_series() -> None:
    """A name the reduction loses information of (not ASCII, capitals, dots, underscores, or the
    embedded guest's own ``embedded``) carries a hash of the name: no two image names share a series,
    and no user image shares the embedded guest's."""
    names = ["/srv/日本語.raw", "/srv/中文.raw", "/srv/ü.qcow2", "/srv/u.qcow2", "/srv/embedded.qcow2",
             "/srv/Embedded.qcow2", "/srv/my-image.qcow2", "/srv/my_image.qcow2", "/srv/my.image.qcow2",
             "/srv/My-Image.qcow2", "/srv/ubuntu-22.04.img", "/srv/ubuntu-22-04.img", "/srv/.qcow2"]
    series = [default_series(_job(image_name=image_name(n))) for n in names]
    assert len(set(series)) == len(names), dict(zip(names, series, strict=True))
    assert default_series(JOB) not in series and all(series_problem(s) is None for s in series)
    assert image_name("/srv/日本語.raw") == image_name("/elsewhere/日本語.qcow2")  # the name is the job
    assert image_name("/srv/日本語.raw").startswith("image_")
    assert image_name("/srv/Debian-12.genericcloud.qcow2").startswith("debian_12_genericcloud_")


def test_plain_image_names_keep_the_names_stored_runs_have() -> None:
    assert image_name("/srv/images/debian-12-genericcloud-amd64.qcow2") == "debian_12_genericcloud_amd64"
    assert image_name("rhel9.qcow2") == "rhel9"
    assert default_series(_job(image_name=image_name("/srv/debian-12.qcow2"))) == \
        "libvirt_local_virtio_blk_virtio_scsi_lat5ms_debian_12"


def test_a_long_derived_name_is_shortened_and_stays_unique() -> None:
    a = default_series(_job(image_name="i" * 200))
    b = default_series(_job(image_name="i" * 201))
    assert len(a) == len(b) == MAX_SERIES_CHARS and a != b and series_problem(a) is None
    assert a.startswith("libvirt_local_virtio_blk_virtio_scsi_lat5ms_iii")


@pytest.mark.parametrize(("name", "said"), [
    ("qemu/nightly", "it holds '/'"),
    ("qemu nightly", "it holds ' '"),
    ("x;DROP TABLE runs", "it holds ' ', ';'"),
    ("qemu-nightly", "it holds '-'"),
    ("nächtlich", "it holds 'ä'"),
    ("..", "it holds '.'"),
    ("", "it is empty"),
    ("7nights", "it does not start with a letter"),
    ("_x", "it does not start with a letter"),
    ("n" * (MAX_SERIES_CHARS + 1), f"it is {MAX_SERIES_CHARS + 1} characters long"),
])
def test_names_a_file_or_an_sql_identifier_cannot_hold_are_refused(name: str, said: str) -> None:
    problem = series_problem(name)
    assert problem is not None and problem.startswith(said) and "e.g. qemu_nightly" in problem


def test_good_names() -> None:
    assert all(series_problem(n) is None for n in ("qemu_nightly", "Q", "image_gate_2", "n" * MAX_SERIES_CHARS))


def test_a_run_stored_before_series_gets_its_default_from_what_it_stored() -> None:
    # the suite properties and the options JSON as reports.store keeps them (every value a string)
    options = {"hypervisor": "libvirt", "controllers": "virtio-scsi,virtio-blk", "inject": "none",
               "disk_backing": "latency", "disk_latency_ms": "5.0", "image": "null"}
    fp = {"image": "embedded:3f2a9c", "qemu.version": "7.2.22"}
    assert stored_series(options, fp) == default_series(JOB)
    assert stored_series({"hypervisor": "libvirt", "controllers": "virtio-blk,virtio-scsi", "inject": "none"}, {}) == \
        default_series(JOB)  # the oldest runs: no options JSON, the options' defaults
    assert stored_inputs({**options, "image": "/srv/img/debian-12.qcow2"}, fp).image_name == "debian_12"
    assert stored_series({**options, "image": "/srv/img/日本語.raw"}, fp) != stored_series(options, fp)
    assert stored_inputs({**options, "inject": "tcq-off"}, fp).faults == ("tcq-off",)
    pool = {"kvm7:qemu.version": "7.2.22", "kvm8:qemu.version": "9.2.0"}
    assert stored_inputs(options, pool).hosts == ("kvm7", "kvm8")
    assert stored_series(options, fp, given="qemu_nightly") == "qemu_nightly"


def test_a_vsphere_run_stored_before_series_names_an_unknown_vcenter_and_template() -> None:
    inputs = stored_inputs({"hypervisor": "vsphere", "controllers": "pvscsi", "inject": "none",
                            "image": "/srv/img/x.qcow2"}, {"vcenter.version": "8.0"})
    assert (inputs.hosts, inputs.image_name) == ((UNKNOWN_VCENTER,), UNKNOWN_TEMPLATE)
    assert stored_inputs({"hypervisor": "libvirt", "controllers": "nvme"}, {}).hosts == (LOCAL_HOST,)


def test_what_changed_names_the_build_first() -> None:
    a = {"qemu.version": "7.2.22", "guest.kernel": "6.1.0", "fio_version": "fio-3.33", "disk.sda": "x"}
    b = {**a, "qemu.version": "8.0.0", "disk.sda": "y"}
    assert changes(a, b) == ([("qemu.version", "7.2.22", "8.0.0")], ["guest.kernel", "fio_version"])
    assert change_line(41, 42, a, b) == "run 41 -> 42: qemu.version 7.2.22 -> 8.0.0; unchanged: guest.kernel, fio_version"
    assert change_line(41, 42, a, a) == "run 41 -> 42: fingerprint unchanged (qemu.version, guest.kernel, fio_version)"
    assert change_line(1, 2, a, {**a, "image.sha256": "ab"}, "v1.0", "v1.1") == \
        "run 1 -> 2: image.sha256 - -> ab; vioconform v1.0 -> v1.1; unchanged: qemu.version, guest.kernel, fio_version"
