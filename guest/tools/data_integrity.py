"""The data-integrity rule's guest side: fio writes the plan's passes with a verify header in every
sector and reads the range back verifying each (one fio run, model.rules.data_integrity.fio_args), and
device-mapper, through which the ``lba-shift`` fault makes the guest write.
"""

from __future__ import annotations

import re
import shlex

from guest.tools.fio import Fio, FioOutput
from guest.tools.sysfs import valid_disk
from guest.tools.tool import GuestTool
from model.rules.data_integrity import READBACK_JOB, Region, WritePass, fio_args

__all__ = ["READBACK_JOB", "DeviceMapper", "IntegrityWrites"]

#: The whole fio run (five passes and the read-back) takes 2.3-2.7 s in the embedded guest under
#: TCG on this 2-core machine, most of it fio's start of each job; 120 s leaves room for a host
#: loaded tenfold and still ends a hung guest's run.
TIMEOUT_S = 120.0


class IntegrityWrites(GuestTool):
    """fio, writing and reading back the data-integrity rule's range (its programs: the Fio tool's)."""

    name = "fio"

    @staticmethod
    def args(target: str, plan: tuple[WritePass, ...], region: Region, run_id: int, fio: str = "fio") -> list[str]:
        """fio's arguments: global options, then one job per pass and the read-back."""
        return fio_args(target, plan, region, run_id, fio)

    def run(self, target: str, plan: tuple[WritePass, ...], region: Region, run_id: int) -> FioOutput:
        """Write the plan to ``target`` (a device), flush, read it back verifying: fio's output as it gave it."""
        fio = self.tools.get(Fio).binary.path
        ran = self._run(shlex.join(self.args(target, plan, region, run_id, fio)), check=False, timeout_s=TIMEOUT_S)
        return FioOutput(ran.stdout, ran.stderr, ran.exit_status)


_DM_NAME = re.compile(r"[a-z][a-z0-9-]{0,63}")


class DeviceMapper(GuestTool):
    """device-mapper in the guest, through ``dmsetup``: a linear target over a disk, offset by a few
    sectors. Its device is found by name under ``/sys/block/dm-*/dm/name``, which every kernel with
    device-mapper has (the ``/dev/mapper`` link is udev's, which the embedded guest does not run)."""

    name = "device-mapper"
    programs = ("dmsetup",)
    install_hint = ("install dmsetup (Debian's and Ubuntu's dmsetup package, RHEL's device-mapper; the embedded "
                    "guest has it)")

    def missing_module(self) -> str | None:
        """None where the guest's kernel has device-mapper (loading ``dm_mod`` where it must), else why not."""
        said = self._run("grep -qw device-mapper /proc/misc 2>/dev/null || modprobe dm_mod 2>&1; "
                         "grep -qw device-mapper /proc/misc && echo vioc-dm-ok; true", check=False)
        if "vioc-dm-ok" in said.stdout.split():
            return None
        words = said.stdout.strip().splitlines()[-1:] or said.stderr.strip().splitlines()[-1:]
        return ("the guest's kernel has no device-mapper (module dm_mod is not loaded, not built in"
                + (f", and modprobe said: {words[0]}" if words else ", and modprobe found none") + ")")

    def create_linear(self, name: str, disk: str, offset_sectors: int) -> str:
        """A linear target ``name`` over ``/dev/<disk>`` from sector ``offset_sectors`` to its end;
        returns its device (``/dev/dm-0``)."""
        if not _DM_NAME.fullmatch(name):
            raise ValueError(f"not a device-mapper name of the suite's: {name!r}")
        dev = valid_disk(disk)
        out = self._run(f"s=$(cat /sys/block/{dev}/size) && "
                        f"dmsetup create {name} --table \"0 $((s - {int(offset_sectors)})) linear /dev/{dev} "
                        f"{int(offset_sectors)}\" && for d in /sys/block/dm-*; do "
                        f"[ \"$(cat $d/dm/name)\" = {name} ] && echo \"${{d##*/}}\"; done; true").stdout.split()
        if not out:
            self.remove(name, check=False)
            raise RuntimeError(f"dmsetup made {name} over /dev/{dev}, and no /sys/block/dm-*/dm/name says {name}")
        return f"/dev/{out[0]}"

    def remove(self, name: str, check: bool = True) -> None:
        """Remove the target ``name`` (``--retry``: udev may still hold it open for a moment)."""
        if not _DM_NAME.fullmatch(name):
            raise ValueError(f"not a device-mapper name of the suite's: {name!r}")
        self._run(f"dmsetup remove --retry {name}", check=check)
