"""--baseline REF resolved against the results store before any guest; --repeats per rule; a
record's repeats folded into medians."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from reports.baseline import resolve_baseline
from reports.records import Record, RunStatus, settle
from reports.store import StoreError
from tests.unit.test_store import QD, healthy, write_run


def test_a_run_id_a_directory_and_last_resolve_to_the_stored_series(tmp_path: Path, store_url: str) -> None:
    d = write_run(tmp_path, "20261120-020000", healthy())
    by_dir = resolve_baseline(str(d), store_url, "libvirt", ("virtio-scsi", "virtio-blk"))
    assert by_dir.run.id == 1 and by_dir.source == f"run 1 ({d.resolve()})"
    qd = by_dir.for_rule("queue-depth", QD)
    assert qd is not None and qd["qd32_host_depth"].values == (25.1, 25.3, 24.9, 25.2)
    assert by_dir.for_rule("queue-depth", "libvirt:nvme:latency5ms") is None
    assert resolve_baseline("1", store_url, "libvirt", ("virtio-scsi", "virtio-blk")).run.id == 1
    assert resolve_baseline("last", store_url, "libvirt", ("virtio-scsi", "virtio-blk")).run.id == 1


def test_bad_baselines_are_refused_with_the_reason(tmp_path: Path, store_url: str) -> None:
    with pytest.raises(StoreError, match="has no run 9"):
        resolve_baseline("9", store_url, "libvirt", ("virtio-scsi",))
    with pytest.raises(StoreError, match="has no complete run of --hypervisor libvirt --controllers nvme"):
        resolve_baseline("last", store_url, "libvirt", ("nvme",))
    with pytest.raises(StoreError, match="neither a stored run id, a results directory, 'last'"):
        resolve_baseline("yesterday", store_url, "libvirt", ("nvme",))
    with pytest.raises(StoreError, match="--store none gives no store"):
        resolve_baseline("1", None, "libvirt", ("nvme",))
    records, status = settle([Record("n", "queue-depth", QD, started=True)], "SIGINT")
    cut = write_run(tmp_path, "20261121-020000", records, status)
    with pytest.raises(StoreError, match="is incomplete \\(interrupted\\): it is never used as a baseline"):
        resolve_baseline(str(cut), store_url, "libvirt", ("virtio-scsi",))
    assert RunStatus().complete


def test_repeats_per_rule() -> None:
    base = SuiteOptions("libvirt", None, "qemu:///system", "auto", ("virtio-blk",), "latency", 5.0, (1, 32), 3.0,
                        (), (), False, None, 120.0, Path("r"), Path("r/junit.xml"))
    assert [base.repeats_for(r) for r in ("queue-depth", "buffered-direct", "limits")] == [1, 2, 1]
    five = SuiteOptions(**{**base.__dict__, "repeats": 5})
    assert [five.repeats_for(r) for r in ("queue-depth", "buffered-direct", "limits")] == [5, 5, 1]


def test_a_records_repeats_fold_into_medians() -> None:
    rec = Record("n", "queue-depth", QD)
    for k, iops in enumerate((150.0, 170.0, 160.0), 1):
        rec.repeat = k
        rec.add(qd1_iops=iops, guest_driver="sd")
    rec.repeat = 0
    rec.fold_repeats()
    assert rec.properties["qd1_iops"] == 160.0 and rec.properties["qd1_iops.r2"] == 170.0
    assert rec.properties["guest_driver"] == "sd"


def test_last_finds_a_run_of_the_same_controllers_in_another_order(tmp_path: Path, store_url: str) -> None:
    """The controller list is a set: the stored run tested virtio-scsi,virtio-blk."""
    assert resolve_baseline(str(write_run(tmp_path, "20261120-020000", healthy())), store_url, "libvirt",
                            ("virtio-scsi", "virtio-blk")).run.id == 1  # imported on the way
    for order in (("virtio-blk", "virtio-scsi"), ("virtio-scsi", "virtio-blk"), (" virtio-blk", "virtio-scsi ")):
        assert resolve_baseline("last", store_url, "libvirt", order).run.id == 1
    with pytest.raises(StoreError, match="has no complete run of --hypervisor libvirt --controllers virtio-blk;"):
        resolve_baseline("last", store_url, "libvirt", ("virtio-blk",))
    with pytest.raises(StoreError, match="--controllers virtio-blk,virtio-scsi,nvme;"):
        resolve_baseline("last", store_url, "libvirt", ("virtio-blk", "virtio-scsi", "nvme"))


def test_a_series_is_the_same_whatever_the_controllers_order() -> None:
    from model.fingerprint import same_series

    fp = {"qemu.version": "7.2.0"}
    a = {"hypervisor": "libvirt", "controllers": "virtio-scsi,virtio-blk", "inject": "none"}
    assert same_series(fp, a, fp, {**a, "controllers": "virtio-blk,virtio-scsi"})
    assert not same_series(fp, a, fp, {**a, "controllers": "virtio-blk"})
    assert not same_series(fp, a, fp, {**a, "controllers": "virtio-blk,virtio-scsi,nvme"})
    assert not same_series(fp, a, fp, {"hypervisor": "libvirt", "inject": "none"})
