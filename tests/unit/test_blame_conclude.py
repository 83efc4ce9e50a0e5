"""A failing rule names the layer at fault (model/blame.py) in its last line and in its record,
from the settings of the disks it was given (suites.assertions.conclude)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.outcomes import RuleFailure
from model.blame import Trail
from model.judging.verdict import RuleVerdict
from reports.records import Record
from suites.assertions import conclude

CMD_PER_LUN_1 = Trail("dut disk sda", "queue_depth", "queue depth", 128, 1, 1, 1,
                      "cmd_per_lun 1 of /machine/peripheral/ua-vioc-virtio-scsi/virtio-backend")


def test_a_failure_names_its_layer_and_keeps_it_in_the_record() -> None:
    rec = Record("n", "queue-depth", "c")
    verdict = RuleVerdict("queue-depth", ("device queue depth: 128",), ("the host saw 1.0 in flight",))
    with pytest.raises(RuleFailure) as e:
        conclude(verdict, rec, "c", Path("raw"), [CMD_PER_LUN_1])
    assert rec.blame == "hypervisor" and rec.blame_reason.startswith("dut disk sda: the device advertises queue depth 1")
    lines = str(e.value).splitlines()
    assert lines[2] == "FAIL: the host saw 1.0 in flight"
    assert lines[3] == ("blame: hypervisor: dut disk sda: the device advertises queue depth 1 (cmd_per_lun 1 of "
                        "/machine/peripheral/ua-vioc-virtio-scsi/virtio-backend) where the suite asked for 128")
    assert lines[-1] == "raw data: raw"


def test_a_pass_blames_no_one() -> None:
    rec = Record("n", "queue-depth", "c")
    conclude(RuleVerdict("queue-depth", ("ok",), ()), rec, "c", Path("raw"), [CMD_PER_LUN_1])
    assert (rec.blame, rec.blame_reason) == ("", "")
