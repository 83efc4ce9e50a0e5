"""bench.profile_verdicts' table: verdicts per rule, and a profile that fails what passed without one."""

from __future__ import annotations

import pytest

from bench.profile_verdicts import main, plan, regressions, table, verdicts


def test_verdicts_join_a_rules_configurations_in_order() -> None:
    got = verdicts({"queue-depth[libvirt:virtio-scsi:latency5ms]": "passed",
                    "queue-depth[libvirt:virtio-blk:latency5ms]": "failed",
                    "discard[libvirt:virtio-blk:latency5ms]": "skipped"})
    assert got == {"queue-depth": "FAIL/PASS", "discard": "SKIP"}


def test_a_profile_failing_what_passed_without_one_is_a_regression() -> None:
    cols = {"none, embedded": {"queue-depth": "PASS/PASS", "discard": "SKIP"},
            "nova, embedded": {"queue-depth": "FAIL", "discard": "FAIL"},
            "proxmox, embedded": {"queue-depth": "PASS", "discard": "ERROR"}}
    refs = {"nova, embedded": "none, embedded", "proxmox, embedded": "none, embedded"}
    assert regressions(cols, refs) == ["nova, embedded: queue-depth"]
    text = table(cols)
    assert text.splitlines()[0] == "| rule | none, embedded | nova, embedded | proxmox, embedded |"
    assert "| discard | SKIP | FAIL | ERROR |" in text


def test_an_unknown_profile_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--profiles", "nova,vmware"])
    assert e.value.code == 2 and "vmware: no such profile" in capsys.readouterr().err


def test_a_qcow2_profile_runs_on_a_file_and_is_compared_with_a_file_backed_run() -> None:
    runs = plan(["nova", "proxmox"], "embedded")
    assert [(c, r) for c, _, r in runs] == [
        ("none, embedded", ""), ("none (file), embedded", ""),
        ("nova (file), embedded", "none (file), embedded"), ("proxmox, embedded", "none, embedded")]
    assert runs[2][1] == ["--profile", "nova", "--disk-backing", "file"]
    assert [c for c, _, _ in plan(["proxmox"], "embedded")] == ["none, embedded", "proxmox, embedded"]


def test_an_unknown_guest_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--guests", "embedded,windows"])
    assert e.value.code == 2 and "give embedded, test-image or both" in capsys.readouterr().err
