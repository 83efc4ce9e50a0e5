"""The host actions of stall-tolerance's and error-propagation's replays against a stand-in for QEMU's
monitor (a unix socket that answers as QEMU 7.2 does, with the block graph and counters of a libvirt
disk): the commands each sends and in what order, the hold released on time by its timer whatever the
guest does, the injection undone by the heal. (The real replays run them against QEMU: docs/benchmarks.md.)"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from replay.qmp import Qmp, QmpError
from replay.rules import error_propagation as errprop
from replay.rules import stall_tolerance as stall
from tests.unit.fake_monitor import fake_monitor

Answer = Callable[[dict[str, Any]], object]


def _stats(ops: int, failed: int = 0) -> dict[str, object]:
    return {"rd_operations": ops, "wr_operations": 0, "flush_operations": 0, "rd_bytes": ops * 4096, "wr_bytes": 0,
            "rd_total_time_ns": 0, "wr_total_time_ns": 0, "flush_total_time_ns": 0,
            "failed_rd_operations": failed, "failed_wr_operations": 0}


@pytest.fixture
def monitor(tmp_path: Path) -> Iterator[tuple[Qmp, list[dict[str, Any]], dict[str, Answer]]]:
    """A monitor whose answer to each command comes from ``answers`` (by command; ``{}`` otherwise)."""
    answers: dict[str, Answer] = {}

    def answer(m: dict[str, Any]) -> list[bytes]:
        return [json.dumps({"return": answers[m["execute"]](m) if m["execute"] in answers else {}}).encode()]

    with fake_monitor(tmp_path / "qmp.sock", answer) as got:
        qmp = Qmp(tmp_path / "qmp.sock")
        yield qmp, got, answers
        qmp.close()


def test_the_hold_throttles_the_disk_and_its_timer_releases_it_on_time(
        monitor: tuple[Qmp, list[dict[str, Any]], dict[str, Answer]]) -> None:
    qmp, got, answers = monitor
    ops = [0]
    throttled = [False]

    def blockstats(m: dict[str, Any]) -> object:
        ops[0] += 0 if throttled[0] else 1  # fio's requests complete until the hold
        return [{"device": "", "qdev": "ua-vioc-dut01", "stats": _stats(ops[0])}]

    def throttle(m: dict[str, Any]) -> object:
        throttled[0] = m["arguments"]["bps"] == 1
        return {}

    answers.update({"query-blockstats": blockstats, "block_set_io_throttle": throttle,
                    "query-block": lambda m: [{"qdev": "ua-vioc-dut01", "inserted": {"bps": 0}}]})
    assert stall.flowing(qmp, ["ua-vioc-dut01"]) == "flowing"
    assert stall.hold(qmp, ["ua-vioc-dut01", "virtio-scsi", "0.5"]) == "held"
    assert stall.ping(qmp, []) == "held" and stall.probe(qmp, ["8"]) == "held"
    time.sleep(0.6)  # no probe comes: the timer releases the disk all the same
    assert stall.ping(qmp, []) == "released"
    figures = dict(w.split("=") for w in stall.events(qmp, ["ua-vioc-dut01"]).split())
    assert 0.5 <= (int(figures["sent_ns"]) - int(figures["t0_ns"])) / 1e9 < 1.5
    assert figures["release_ops"] == figures["held_from_ops"]
    assert figures["events"] == "virtio_scsi_tmf_req,scsi_req_cancel,virtio_set_status"
    commands = [(m["execute"], m.get("arguments", {})) for m in got if m["execute"] != "query-blockstats"]
    limits = [a["bps"] for c, a in commands if c == "block_set_io_throttle"]
    traced = [(a["name"], a["enable"]) for c, a in commands if c == "trace-event-set-state"]
    assert limits == [1, 0] and [a["id"] for c, a in commands if c == "block_set_io_throttle"] == ["ua-vioc-dut01"] * 2
    assert traced == [(e, True) for e in figures["events"].split(",")] + [(e, False) for e in figures["events"].split(",")]


def test_a_disk_throttled_before_the_hold_is_not_held(monitor: tuple[Qmp, list[dict[str, Any]], dict[str, Answer]]) -> None:
    qmp, got, answers = monitor
    answers["query-block"] = lambda m: [{"qdev": "/machine/peripheral/ua-vioc-dut03/virtio-backend",
                                         "inserted": {"iops": 100}}]
    with pytest.raises(QmpError, match="throttled already"):
        stall.hold(qmp, ["ua-vioc-dut03", "virtio-blk", "1"])
    assert not [m for m in got if m["execute"] == "block_set_io_throttle"]


GRAPH = {"nodes": [{"id": 1, "name": "ua-vioc-dut01"}, {"id": 2, "name": "libvirt-2-format"},
                   {"id": 3, "name": "libvirt-2-storage"}],
         "edges": [{"parent": 1, "child": 2, "name": "root"}, {"parent": 2, "child": 3, "name": "file"}]}


def test_an_injection_goes_under_the_format_node_and_the_heal_takes_it_away(
        monitor: tuple[Qmp, list[dict[str, Any]], dict[str, Answer]]) -> None:
    qmp, got, answers = monitor
    answers.update({"x-debug-query-block-graph": lambda m: GRAPH, "qom-get": lambda m: "report",
                    "query-named-block-nodes": lambda m: [{"node-name": "libvirt-2-format", "drv": "raw"}],
                    "query-blockstats": lambda m: [{"device": "", "qdev": "ua-vioc-dut01", "stats": _stats(14, 12)}]})
    options = {"read-only": False, "discard": "unmap", "driver": "raw"}
    assert errprop.inject(qmp, ["ua-vioc-dut01", "read", "2116", "16", json.dumps(options)]) == "injected"
    assert errprop.outcomes(qmp, ["ua-vioc-dut01", "errprop-read-after"]) == \
        "reads=14 writes=0 failed_reads=12 failed_writes=0"
    assert errprop.heal(qmp, ["ua-vioc-dut01"]) == "healed" and errprop.heal(qmp, ["ua-vioc-dut01"]) == "healed"
    changes = [(m["execute"], m.get("arguments", {})) for m in got
               if m["execute"] in ("blockdev-add", "blockdev-reopen", "blockdev-del")]
    node = "vioc-errinj-ua-vioc-dut01-read"
    (add, added), (reopen, placed), (back, restored), (delete, deleted) = changes
    assert (add, added["driver"], added["image"], added["node-name"]) == ("blockdev-add", "blkdebug", "libvirt-2-storage", node)
    assert [r["sector"] for r in added["inject-error"]] == list(range(2116, 2132))
    assert {r["iotype"] for r in added["inject-error"]} == {"read"} and {r["errno"] for r in added["inject-error"]} == {5}
    assert placed["options"] == [{**options, "node-name": "libvirt-2-format", "file": node}]
    assert restored["options"] == [{**options, "node-name": "libvirt-2-format", "file": "libvirt-2-storage"}]
    assert (reopen, back, delete, deleted) == ("blockdev-reopen", "blockdev-reopen", "blockdev-del", {"node-name": node})


def test_a_device_that_keeps_errors_from_the_guest_gets_no_injection(
        monitor: tuple[Qmp, list[dict[str, Any]], dict[str, Answer]]) -> None:
    qmp, got, answers = monitor
    answers["qom-get"] = lambda m: "ignore" if m["arguments"]["property"] == "rerror" else "report"
    assert errprop.inject(qmp, ["ua-vioc-dut01", "read", "2116", "16", "{}"]) == "policy rerror=ignore werror=report"
    assert not [m for m in got if m["execute"].startswith("blockdev")]
