"""The throttle rule's judgement (model/rules/throttle.py) on phases recorded from real guests (the
suite's ``throttle-phases.json``: QEMU 7.2 under TCG, the embedded guest, a loaded host) and on QEMU's
own ``query-block`` replies (model/parse/throttle_limits.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from model.blame import Trail
from model.errors import ParseError
from model.parse.throttle_limits import ThrottleLimits, parse_throttle
from model.rules import blame
from model.rules.throttle import RULE_IOPS, ThrottlePhase, judge_throttle, with_burst

DATA = Path(__file__).resolve().parents[1] / "data" / "throttle"
LIMIT = ThrottleLimits(iops=RULE_IOPS)


def recorded(name: str) -> list[ThrottlePhase]:
    """A run's phases as the suite kept them (``raw/<config>/throttle/throttle-phases.json``)."""
    phases = []
    for p in json.loads((DATA / f"{name}.json").read_text()):
        set_to, held = ThrottleLimits(**p.pop("set_to")), ThrottleLimits(**p.pop("held"))
        phases.append(ThrottlePhase(set_to=set_to, held=held, **p))
    return phases


def _inserted(name: str) -> dict[str, Any]:
    entry: dict[str, Any] = json.loads((DATA / name).read_text())["return"][0]
    return dict(entry["inserted"])


def test_a_limit_that_holds_lifts_and_holds_again_passes() -> None:
    v = judge_throttle(recorded("phases-virtio-blk-healthy"), LIMIT, "the rule")
    assert v.passed and not v.notes, v.explain()
    assert v.properties["throttled_held"] == "iops=200, bps=0" and v.properties["lifted_held"] == "no limit"
    assert v.properties["throttled_guest_iops"] == pytest.approx(196.0, abs=1)
    assert v.properties["lifted_over_limit"] == pytest.approx(3.4, abs=0.1)
    assert "lifted (no limit held): guest 678 IO/s" in v.explain()


def test_a_starved_guest_under_the_limit_passes_where_the_lifted_rate_rises_clear_of_it() -> None:
    v = judge_throttle(recorded("phases-virtio-blk-starved"), LIMIT, "the rule")
    assert v.passed and not v.notes, v.explain()  # 102 IO/s under the limit (a loaded host), 1644 without it


def test_a_limit_the_guest_never_reaches_passes_and_says_the_return_was_not_judged() -> None:
    throttled, lifted, again = recorded("phases-virtio-blk-starved")
    slow = dataclasses.replace(lifted, guest_ios=throttled.guest_ios, guest_s=throttled.guest_s)
    v = judge_throttle([throttled, slow, again], LIMIT, "the rule")
    assert v.passed, v.explain()
    assert v.notes == (("the limit of 200 IO/s did not bind: the guest got 102 under it and 102 without it, so "
                        "whether the rate returns when it is lifted is not judged"),)


def test_a_burst_the_host_holds_and_lets_through_fails_blamed_on_the_hypervisor() -> None:
    phases = recorded("phases-virtio-blk-healthy")
    lifted = phases[1]
    held = parse_throttle(_inserted("query-block-burst.json"), "query-block-burst.json")
    assert held == with_burst(LIMIT)
    # the throttled phase as the fault makes it: the burst held, the guest at its unthrottled rate
    burst = dataclasses.replace(lifted, name="throttled", set_to=LIMIT, held=held)
    v = judge_throttle([burst, lifted, phases[2]], LIMIT, "the rule")
    assert not v.passed and v.hint is not None and v.hint.layer == "hypervisor"
    assert v.problems[0].startswith("throttled: the suite set iops=200, bps=0 with no burst, and the host holds iops=200, "
                                    "bps=0, iops_max=20000, iops_max_length=60 (QMP query-block of vioconform-")
    assert v.problems[1].startswith("throttled: the guest got 678 IO/s under a limit of 200 IO/s (at most 230 within "
                                    "the margin of 15%); the host counted")
    assert v.problems[1].endswith(": its throttle let them through [blame: hypervisor]")


def test_the_burst_fault_as_recorded_fails_throttled_only_blamed_on_the_hypervisor() -> None:
    v = judge_throttle(recorded("phases-virtio-scsi-burst"), LIMIT, "the rule")
    assert v.hint is not None and v.hint.layer == "hypervisor"
    assert [p.split(":")[0] for p in v.problems] == ["throttled", "throttled"], v.problems
    assert v.problems[0].endswith("): a bucket that lets 1188000 I/Os through above the limit [blame: hypervisor]")
    assert v.problems[1].startswith("throttled: the guest got 2434 IO/s under a limit of 200 IO/s")
    assert not v.notes  # a limit not obeyed is not one that did not bind


def test_a_limit_left_on_after_the_lift_fails_and_names_it() -> None:
    throttled, _lifted, again = recorded("phases-virtio-blk-healthy")
    stuck = dataclasses.replace(throttled, name="lifted", set_to=ThrottleLimits())
    v = judge_throttle([throttled, stuck, again], LIMIT, "the rule")
    assert [p.rpartition(" [")[2] for p in v.problems] == ["blame: hypervisor]", "blame: hypervisor]"], v.problems
    assert v.problems[0].startswith("lifted: every limit was lifted, and the host still holds iops=200, bps=0")
    assert v.problems[1].startswith("lifted: the rate did not return when the limit was lifted: the guest got 196 IO/s")


def test_counts_the_host_does_not_share_fail_unblamed() -> None:
    throttled, lifted, again = recorded("phases-virtio-blk-healthy")
    v = judge_throttle([dataclasses.replace(throttled, host_ios=throttled.host_ios // 2), lifted, again], LIMIT, "x")
    assert len(v.problems) == 1 and v.problems[0].startswith("throttled: the guest completed 196 IO/s in the window "
                                                             "and the host counted 95"), v.problems
    assert v.problems[0].endswith("[blame: unknown]")


def test_an_io_error_while_the_limit_holds_is_the_guest_configuration_where_its_timeout_was_shortened() -> None:
    _throttled, lifted, again = recorded("phases-virtio-blk-healthy")
    failed = ThrottlePhase("throttled", LIMIT, LIMIT, "QMP query-block", fio_error="error 5 (EIO: Input/output error)")
    v = judge_throttle([failed, lifted, again], LIMIT, "the rule")
    assert v.problems == (("throttled: the guest's I/O failed while the host held iops=200, bps=0: error 5 (EIO: "
                          "Input/output error) [blame: unknown]"),)
    assert v.properties["throttled_fio_error"] == "error 5 (EIO: Input/output error)"
    shortened = Trail("dut disk vda", "io_timeout_ms", "queue/io_timeout (ms)", None, None, 30000, 100)
    assert blame("throttle", [shortened], v.hint).layer == "guest configuration"
    assert blame("throttle", [dataclasses.replace(shortened, now=30000)], v.hint).layer == "unknown"


def test_the_host_says_no_limit_after_the_lift() -> None:
    assert parse_throttle(_inserted("query-block-lifted.json"), "q").none


@pytest.mark.parametrize(("inserted", "says"), [
    ({"bps": 0}, "q: inserted has no 'iops'"),
    ({"iops": "200", "bps": 0}, "q: inserted.iops is '200', not a whole number"),
    ({"iops": 200, "bps": 0, "iops_max": -1}, "q: inserted.iops_max is -1"),
])
def test_a_reply_without_whole_limits_is_a_parse_error(inserted: dict[str, object], says: str) -> None:
    with pytest.raises(ParseError) as e:
        parse_throttle(inserted, "q")
    assert str(e.value).startswith(says)

