"""bench.trace_profile on a real ``perf script`` excerpt of QEMU with trace events on: which samples are
the log backend's (its formatting, the log line's write into a file, the thread id and timestamp of
its prefix; not the eventfd writes of QEMU's own event loop), and the interval of tracing's share."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.trace_profile import Sample, Share, parse_perf_script, share_cost

DATA = Path(__file__).parent.parent / "data" / "perf-script-qemu-traced.txt"


def test_the_recorded_profile_parses_into_its_threads_samples() -> None:
    samples = list(parse_perf_script(DATA.read_text()))
    assert len(samples) == 50
    assert {s.thread for s in samples} == {"qemu-system-x86", "CPU 0/TCG", "CPU 1/TCG"}
    assert all(s.frames for s in samples)


def test_the_trace_path_is_the_log_backends_work_and_not_the_event_loops_writes() -> None:
    samples = list(parse_perf_script(DATA.read_text()))
    assert Share.of(samples) == Share(10, 50)
    eventfd = [s for s in samples if any("eventfd_write" in f for f in s.frames)]
    assert len(eventfd) == 3 and not any(s.in_trace_path for s in eventfd)
    # the log backend's work runs in QEMU's main loop thread: the vCPU threads have none of it here
    assert {s.thread for s in samples if s.in_trace_path} == {"qemu-system-x86"}


def test_a_log_lines_write_into_a_file_is_in_the_path_through_any_filesystem() -> None:
    for fs in ("ext4_file_write_iter", "shmem_file_write_iter"):
        assert Sample("qemu-system-x86", ("copy_page", fs, "vfs_write", "__GI___libc_write")).in_trace_path
    assert not Sample("qemu-system-x86", ("eventfd_write", "vfs_write", "__GI___libc_write")).in_trace_path


def test_the_share_is_the_traced_profiles_less_the_untraced_ones_with_its_interval() -> None:
    cost = share_cost(Share(130, 9545), Share(3, 6234))
    assert cost.value_pct == pytest.approx(100 * (130 / 9545 - 3 / 6234))
    assert cost.low_pct < cost.value_pct < cost.high_pct
    assert cost.width_pct == pytest.approx(2 * 1.96 * 100 * ((130 / 9545) * (1 - 130 / 9545) / 9545
                                                            + (3 / 6234) * (1 - 3 / 6234) / 6234) ** 0.5)
    assert cost.width_pct < 1.0  # thousands of samples pin a 1 % share to a fraction of a percent


def test_a_profile_without_samples_is_refused() -> None:
    with pytest.raises(ValueError, match="no CPU time"):
        share_cost(Share(0, 0), Share(3, 6234))
