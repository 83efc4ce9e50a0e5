"""``--baseline last`` on real guests: a run in which no rule reached a verdict is stored incomplete
and passed over; a rule the baseline runs never judged is an ERROR, never a plain pass. (That ``last``
also searches the older complete runs for such a rule is tests/unit/test_baseline_resolve.py's.)"""

from __future__ import annotations

from model.across.contention import WAIT_MAX_PCT
from tests.e2e.conftest import SuiteRun

BLK = "libvirt:virtio-blk:latency5ms"
ARGS = ("--controllers", "virtio-blk")


def test_a_run_of_errors_is_no_baseline_and_a_missing_one_is_an_error(run_suite) -> None:  # type: ignore[no-untyped-def]
    first: SuiteRun = run_suite(*ARGS, "-k", "queue_depth")
    assert first.returncode == 0 and "stored:    run 1 in" in first.output, first.output[-3000:]
    # every rule an ERROR (a --guest-setup command that fails): stored, but incomplete
    broken: SuiteRun = run_suite(*ARGS, "-k", "queue_depth", "--guest-setup", "false")
    assert broken.returncode == 10, broken.output[-3000:]  # harness errors, no rule failed (reports/exitcodes.py)
    assert "RUN INCOMPLETE: no rule reached a verdict (1 rule test ended in ERROR" in broken.output
    assert "stored:    run 2 in" in broken.output
    assert broken.suite_properties()["complete"] == "false"
    # One run for both checks (one boot): queue-depth is compared with run 1, not with the run of errors
    # (its verdict is the measurements' to decide); io-size has a verdict in no stored run, so its own verdict
    # is kept and the run is not a pass.
    again: SuiteRun = run_suite(*ARGS, "-k", "queue_depth or io_size", "--baseline", "last")
    outcome = again.outcomes()[f"queue-depth[{BLK}]"]
    # io-size's comparison asked for was not made: an error (10), or 1 where queue-depth's comparison failed it
    assert again.returncode == (1 if outcome == "failed" else 10), again.output[-3000:]
    props = SuiteRun.props(again.cases()[f"queue-depth[{BLK}]"])
    assert props["baseline_source"] == f"run 1 ({first.results.resolve()})", props
    assert int(props["baseline_metrics_compared"]) > 10, props
    # judged, or (a busy host: its vCPUs waited beyond WAIT_MAX_PCT) an error that says so, never a plain pass
    if outcome == "error":
        assert float(props["host_vcpu_wait_pct"]) > WAIT_MAX_PCT or float(
            SuiteRun.props(first.cases()[f"queue-depth[{BLK}]"])["host_vcpu_wait_pct"]) > WAIT_MAX_PCT, props
        assert "could be judged" in again.output and "run it on a quieter host" in again.output, again.output[-3000:]
    else:
        assert outcome in ("passed", "failed"), again.output[-3000:]
    case = again.cases()[f"io-size[{BLK}]"]
    error = case.find("error")
    assert error is not None, again.output[-3000:]
    assert error.get("message", "").startswith(
        f"BaselineMissing: no baseline for io-size on {BLK} in run 1 ({first.results.resolve()}): it did not run "
        f"io-size on {BLK}. The rule itself passed"), error.get("message")
    assert "split_factor" in SuiteRun.props(case)  # its numbers are kept
    assert all(not r.left_behind for r in (first, broken, again))
