"""A run that judged nothing is no pass (reports/exitcodes.py's 12): every rule SKIPPED (an image whose
kernel lacks the controller's driver, a backend that measures nothing), or a rule ``--require`` names
that ends SKIPPED, NOT RUN or is not selected. Before, both exited 0."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.runs.test_gate_plugin import _run

#: Rule tests named as the suite's rules are (``--require`` takes only those): queue-depth skips as a
#: guest without the controller's driver makes it, io-size skips as a backend that cannot measure it.
RULES = textwrap.dedent('''
    import os

    import pytest

    @pytest.mark.rule("limits")
    def test_limits(record):
        assert os.environ.get("LIMITS") != "fail", "the device advertises 1, asked 128"
        if os.environ.get("LIMITS") == "error":
            raise RuntimeError("the guest's sysfs could not be read")

    @pytest.mark.rule("queue-depth")
    @pytest.mark.parametrize("config", ["libvirt:virtio-scsi", "libvirt:virtio-blk"])
    def test_queue_depth(record, config):
        if os.environ.get("SKIP_ON", "none") in config:
            pytest.skip(f"no disk on {config}: the guest's kernel has no driver for the controller")

    @pytest.mark.rule("io-size")
    def test_io_size(record):
        pytest.skip("io-size needs exact host counts, which this backend cannot give")
''')


def _require(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """The exit code and output of a run of RULES, each run into a new results directory."""
    out = tmp_path / f"out{len(list(tmp_path.glob('out*')))}"
    proc = _run(tmp_path, "--results-dir", str(out), "--store", "none", *args, env=env, rules=RULES)
    return proc.returncode, proc.stdout + proc.stderr


def test_a_run_of_skips_alone_exits_12(tmp_path: Path) -> None:
    code, out = _require(tmp_path, "-k", "io_size or queue_depth", env={"SKIP_ON": "virtio"})
    assert code == 12, out
    assert "NO VERDICT: every rule SKIPPED: this run judged nothing" in out
    assert "exit code: 12 (nothing judged: every rule SKIPPED, or a --require rule reached no verdict)" in out


def test_skips_beside_a_verdict_pass_unless_required(tmp_path: Path) -> None:
    code, out = _require(tmp_path, env={"SKIP_ON": "virtio-blk"})
    assert code == 0 and "NO VERDICT" not in out, out
    code, out = _require(tmp_path, "--require", "limits,queue-depth", env={"SKIP_ON": "virtio-blk"})
    assert code == 12, out
    assert ("NO VERDICT: --require queue-depth: SKIPPED on libvirt:virtio-blk (no disk on libvirt:virtio-blk: the "
            "guest's kernel has no driver for the controller)") in out
    assert "--require limits" not in out and "--require queue-depth: SKIPPED on libvirt:virtio-scsi" not in out
    code, out = _require(tmp_path, "--require", "queue-depth,limits")
    assert code == 0, out  # judged on every configuration


def test_a_required_rule_not_selected_exits_12(tmp_path: Path) -> None:
    code, out = _require(tmp_path, "--require", "limits", "-k", "queue_depth")
    assert code == 12, out
    assert "NO VERDICT: --require limits: not selected, no test of it ran" in out


def test_a_failure_is_still_1_and_a_harness_error_10(tmp_path: Path) -> None:
    """The precedence (reports/exitcodes.py): a FAILED rule (1), then a harness error or a run stopped
    early (10), then 12; the terminal names the required rule without a verdict all the same."""
    code, out = _require(tmp_path, "--require", "io-size", env={"LIMITS": "fail"})
    assert code == 1 and "NO VERDICT: --require io-size: SKIPPED on default" in out, out
    code, out = _require(tmp_path, "--require", "queue-depth", "-x", env={"LIMITS": "error"})
    assert code == 10, out  # -x after the error: queue-depth never ran because the harness broke
    assert "NO VERDICT: --require queue-depth: NOT RUN on libvirt:virtio-scsi" in out


@pytest.mark.parametrize("value", ["queue_depth", "queue-depth,nosuch", ","])
def test_an_unknown_rule_is_a_usage_error_that_lists_the_rules(tmp_path: Path, value: str) -> None:
    code, out = _require(tmp_path, "--require", value)
    assert code == 4, out
    assert "argument --require:" in out and "the rules are: alignment, block-size, buffered-direct, data-integrity, direct-io, discard" in out
    assert not list(tmp_path.glob("out*"))  # before anything is created
