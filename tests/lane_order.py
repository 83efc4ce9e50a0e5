"""The order in which the parallel guest lane hands out its work units: the longest first.

The lane runs 3 xdist workers on 2 cores and is bound by the CPU, so its end is the moment its last
work unit ends: a 300 s test handed out last runs on alone for minutes while the other workers idle.
Handing out the longest units first (the longest-processing-time rule) leaves the short tests for
the end, where they fill the workers evenly. pytest-xdist's own reordering sorts by the number of
tests in a unit, which puts a module of twenty quick tests before a single test of five minutes;
this module sorts by time instead.

The times are what each unit took in a clean-clone run of the lane (``--durations``; the table is
in docs/benchmarks.md, "What each guest-lane test proves"). They decide only the order: a unit
missing here is handed out after the listed ones (before the rest if it is marked ``long``), and a
time that drifted costs some balance, never a result.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

#: Seconds a work unit took in the lane (a shared module: all its tests and its fixtures; a single test:
#: its set-up and call), keyed by module path or by node id without its parameters. Rounded. From the
#: clean-clone CI run's 40 slowest phases (docs/benchmarks.md, "What each guest-lane test proves"); a
#: shared module's tests that were not among them are counted at 5-25 s each (every phase not printed
#: took under 27 s), and every unit with a phase among them is listed. A unit that took over another's
#: runs (test_rules_guest.py's replays, test_qemu_build.py) is counted from its parts' times.
UNIT_SECONDS = {
    "tests/e2e/test_rules_guest.py": 480,
    "tests/e2e/test_controllers.py": 225,
    "tests/e2e/test_qemu_build.py": 200,
    "tests/e2e/test_image_boot.py::test_healthy_image_passes_the_rules_and_is_left_unchanged": 184,
    "tests/e2e/test_guest_kernels.py::test_the_default_suite_passes_on_the_6_12_kernel": 122,
    "tests/e2e/test_remote_libvirt.py::test_your_own_image_boots_by_uefi_on_a_remote_host_and_tcq_off_fails_there": 95,
    "tests/e2e/test_bisect.py::test_a_row_of_builds_is_bisected_to_the_first_broken_one": 91,
    "tests/e2e/test_repeats_baseline.py": 90,
    "tests/e2e/test_image_boot.py::test_a_guest_with_another_host_key_is_refused_with_the_remedy": 78,
    "tests/e2e/test_host_pool.py::test_two_hosts_on_two_workers_merge_into_one_run": 63,
    "tests/e2e/test_stall_guest.py::test_a_stall_that_stops_qemu_is_reported_and_ends_the_guest": 58,
    "tests/e2e/test_host_pool.py::test_a_killed_worker_leaves_nothing_on_either_host": 58,
    "tests/e2e/test_discard.py::test_discard_off_fails_it_and_nothing_else": 51,
    "tests/e2e/test_baseline_last.py::test_a_run_of_errors_is_no_baseline_and_a_missing_one_is_an_error": 50,
    "tests/e2e/test_opt_in_healthy.py": 48,
    "tests/e2e/test_reproducer.py::test_a_tcq_off_failure_carries_its_numbers_and_replays_as_the_same_failure_anywhere":
        45,
    "tests/e2e/test_block_size.py::test_4kn_passes_and_a_device_advertising_another_physical_block_fails": 43,
    "tests/e2e/test_hypervisor_under_test.py::test_q35_carries_the_default_controllers": 41,
    "tests/e2e/test_write_cache.py::test_writethrough_passes_and_a_host_dropping_flushes_fails": 39,
    "tests/e2e/test_remote_libvirt.py::test_a_remote_host_runs_the_rules_end_to_end": 39,
    "tests/e2e/test_image_boot.py::test_an_image_that_does_not_boot_shows_its_console_soon": 38,
    "tests/e2e/test_remote_libvirt.py::test_a_killed_remote_run_is_swept_by_the_next_and_only_it": 38,
    "tests/e2e/test_guest_faults.py::test_a_guest_whose_ssh_server_stops_answering_is_reported": 37,
    "tests/e2e/test_queue_depth_guest.py::test_a_guest_capping_its_own_queue_fails_naming_the_limit": 36,
    "tests/e2e/test_remote_libvirt.py::test_a_forwarded_port_taken_on_the_host_is_retried_then_reported": 36,
    "tests/e2e/test_bisect.py::test_git_bisect_run_with_one_step_names_the_first_broken_commit": 35,
    "tests/e2e/test_custom_kernel.py": 35,
    "tests/e2e/test_hotplug.py::test_the_healthy_guest_sees_the_disk_come_and_go": 35,
    "tests/e2e/test_throttle.py::test_a_burst_at_the_host_fails": 32,
    "tests/e2e/test_blame.py::test_a_queue_depth_lowered_after_boot_is_blamed_on_the_guest_configuration": 29,
    "tests/e2e/test_worker_start.py::test_a_worker_that_never_collects_stops_the_run_and_leaves_its_stacks": 29,
    "tests/e2e/test_setup_errors.py::test_forced_kvm_where_kvm_cannot_boot": 27,
}

#: Where a unit marked ``long`` (a minute or more under CI load) but missing from UNIT_SECONDS goes.
LONG_SECONDS = 60


def without_params(nodeid: str) -> str:
    """A node id without its parameters: ``a.py::test_x[io-breakup]`` -> ``a.py::test_x``."""
    return nodeid.split("[", 1)[0]


def unit_seconds(unit: str, items: list[pytest.Item]) -> int:
    """What the work unit ``unit`` (a module path or a node id) is expected to take."""
    known = UNIT_SECONDS.get(without_params(unit))
    if known is not None:
        return known
    return LONG_SECONDS if any(item.get_closest_marker("long") for item in items) else 0


def longest_first(items: list[pytest.Item], work_unit: Callable[[str], str]) -> None:
    """Sort ``items`` in place: by their work unit's expected time, longest first; a unit's tests stay
    together and in pytest's order, and units of equal time keep pytest's order."""
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(work_unit(item.nodeid), []).append(item)
    seconds = {unit: unit_seconds(unit, members) for unit, members in units.items()}
    order = sorted(units, key=lambda unit: -seconds[unit])  # stable: equal times keep pytest's order
    items[:] = [item for unit in order for item in units[unit]]
