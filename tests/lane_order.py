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

#: Seconds a work unit took in the lane (a shared module: all its tests and its fixture; a single test:
#: its set-up and call), keyed by module path or by node id without its parameters. Rounded.
UNIT_SECONDS = {
    "tests/e2e/test_rules_guest.py": 420,
    "tests/e2e/test_image_boot.py::test_healthy_image_passes_the_rules_and_is_left_unchanged": 295,
    "tests/e2e/test_reproducer.py::test_a_failure_of_the_qemu_under_test_replays_on_it_and_passes_on_a_healthy_qemu":
        220,
    "tests/e2e/test_controllers.py": 210,
    "tests/e2e/test_reproducer.py::test_each_rules_bundle_replays_to_the_runs_verdict_anywhere": 176,
    "tests/e2e/test_guest_kernels.py::test_the_default_suite_passes_on_the_6_12_kernel": 137,
    "tests/e2e/test_remote_libvirt.py::test_your_own_image_boots_by_uefi_on_a_remote_host_and_tcq_off_fails_there":
        130,
    "tests/e2e/test_bisect.py::test_a_row_of_builds_is_bisected_to_the_first_broken_one": 93,
    "tests/e2e/test_baseline_last.py::test_a_run_of_errors_is_no_baseline_and_a_missing_one_is_an_error": 92,
    "tests/e2e/test_image_boot.py::test_a_guest_with_another_host_key_is_refused_with_the_remedy": 91,
    "tests/e2e/test_repeats_baseline.py": 80,
    "tests/e2e/test_opt_in_healthy.py": 70,
    "tests/e2e/test_host_pool.py::test_two_hosts_on_two_workers_merge_into_one_run": 59,
    "tests/e2e/test_series_builds.py::test_one_series_on_two_qemu_builds_compares_with_last_2": 58,
    "tests/e2e/test_stall_guest.py::test_a_stall_that_stops_qemu_is_reported_and_ends_the_guest": 57,
    "tests/e2e/test_host_pool.py::test_a_killed_worker_leaves_nothing_on_either_host": 53,
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
