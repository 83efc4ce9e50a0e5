"""A rule's own guest tools: a rule that cannot run without a program the guest lacks skips,
with the reason (which program, how to get it). A tool missing anywhere else (fio inside a
measurement) stays an ERROR: the harness could not do what every rule needs."""

from __future__ import annotations

from typing import TypeVar

import pytest

from guest.tools.tool import GuestTool, ToolMissing
from measure.disk import GuestDisk

T = TypeVar("T", bound=GuestTool)


def needed(disk: GuestDisk, tool: type[T], rule: str) -> T:
    """``disk.tool(tool)``, or skip the rule: "alignment cannot run on this guest: fdisk is missing ..."."""
    try:
        return disk.tool(tool)
    except ToolMissing as e:
        pytest.skip(f"{rule} cannot run on this guest: {e}")
