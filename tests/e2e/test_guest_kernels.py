"""The default suite on a second guest kernel: Debian's newest 6.12 (``--guest-kernel 6.12``), beside the
6.1 every other test runs, so that a rule that depends on one kernel's behaviour fails CI, not a user's
gate. On 6.12 the discard rule's set-back of ``discard_max_bytes`` is refused on virtio-blk and taken as
the next multiple of the granularity (docs/rules/discard.md): the rule passes and says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from images.kernels import resolve
from tests.e2e.conftest import RunSuite, SuiteRun
from tests.e2e.test_rules_guest import BOTH, CONFIGS, RULES

#: The second kernel of CI: the newest 6.12 apt has (linux-image-6.12-amd64's).
SECOND_KERNEL = "6.12"


@pytest.mark.long
def test_the_default_suite_passes_on_the_6_12_kernel(run_suite: RunSuite) -> None:
    run: SuiteRun = run_suite("--guest-kernel", SECOND_KERNEL, *BOTH, timeout=1800)
    assert run.returncode == 0, run.output[-5000:]
    kernel = resolve(SECOND_KERNEL)
    props = run.suite_properties()
    assert props["guest.kernel"] == f"{kernel.abi}-amd64", props
    outcomes = run.outcomes()
    assert set(outcomes) == {f"{r}[{c}]" for r in RULES for c in CONFIGS}, sorted(outcomes)
    # buffered-direct measures only without a --baseline: its skip; every other rule a verdict, passed
    assert {n: o for n, o in outcomes.items() if o != "passed"} == {
        f"buffered-direct[{c}]": "skipped" for c in CONFIGS}, run.output[-3000:]
    blk = SuiteRun.props(run.cases()["discard[libvirt:virtio-blk:latency5ms]"])
    assert blk["discard_granularity_bytes"] == "4096" and blk["discard_max_bytes"] == "2147483136", blk
    assert blk["beyond_max_host_requests"] == "8", blk
    assert ("set back as 2147483648: the guest's kernel refused the 2147483136 it had shown "
            "(sh: write error: Invalid argument); it shows 2147483136 again") in blk["notes"], blk
    assert run.left_behind == []


def test_a_kernel_apt_does_not_have_is_a_usage_error_listing_what_it_has(run_suite: RunSuite, tmp_path: Path) -> None:
    run: SuiteRun = run_suite("--guest-kernel", "6.13", "--controllers", "virtio-blk")
    assert run.returncode == 4, run.output
    assert "argument --guest-kernel: apt knows no kernel '6.13'. apt has these amd64 kernels: 6.1." in run.output
    assert "(e.g. 6.12-cloud); run apt-get update for newer ones" in run.output
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())
