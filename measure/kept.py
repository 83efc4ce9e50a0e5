"""The next rule sees the disk as it was: every rule's disks are read before the rule
(``Sysfs.settings``: the block-layer and SCSI settings in ``guest.tools.sysfs.KEPT_SETTINGS``; after a
disk's first rule, what the previous rule left is known: ``GuestDisk.kept``) and again after it, whatever happened (a verdict, a failure, an error, a skip), and each setting the rule left
changed is set back (``Sysfs.restore``, which takes what the kernel will take where it refuses the value it
showed) and logged. A rule that changes a setting for a while sets it back itself (``Sysfs.changed``);
this is the net under it, so that one rule's error cannot change the disk under the rules after it.

Example::

    with kept_settings([disk, scratch]) as restored:
        run_the_rule()
    restored  # the Restored of each setting that had to be set back
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from guest.tools.sysfs import KEPT_SETTINGS, SCHEDULER, Restored, SettingNotRestored, Sysfs, shown
from model.errors import GuestDied
from transport.ssh import GuestCommandError

if TYPE_CHECKING:
    from measure.disk import GuestDisk

log = logging.getLogger("vioconform.kept")


@contextmanager
def kept_settings(disks: Sequence[GuestDisk]) -> Iterator[list[Restored]]:
    """Read ``disks``' settings, run the block, then set back what it left changed (logged at warning:
    the rule should have). Where the block raised, a failure to read or set back is logged and the
    block's exception goes on; where it did not, SettingNotRestored or the guest's error is raised."""
    # what the last rule left (set back where it had to be): nothing between rules changes a setting,
    # so only a disk's first rule reads them first (a guest command each: about 0.1 s under TCG)
    before = {d.kernel_name: d.kept if d.kept is not None else d.tool(Sysfs).settings(d.kernel_name) for d in disks}
    restored: list[Restored] = []
    failed = False
    try:
        yield restored
    except BaseException:
        failed = True
        raise
    finally:
        for d in disks:
            d.kept = None  # unknown until read back as it was
            try:
                restored.extend(_set_back(d, before[d.kernel_name]))
                d.kept = before[d.kernel_name]
            # a guest that died in the rule raises GuestDiedEarlier here: after a failed block its own
            # exception is kept, or the rule's ERROR would read "not run: the guest died earlier"
            except (GuestCommandError, SettingNotRestored, OSError, GuestDied) as e:
                if not failed:
                    raise
                log.warning("%s: could not check or set back its settings after the rule: %s", d.label,
                            str(e).splitlines()[0])
        if restored:
            log.warning("the rule left settings changed; set back: %s", "; ".join(
                f"/sys/block/{r.disk}/{r.setting} to {r.was}" + (f" ({r.note()})" if r.note() else "") for r in restored))


def _set_back(disk: GuestDisk, before: dict[str, str]) -> list[Restored]:
    """Each kept setting, in KEPT_SETTINGS' order, that shows another value than ``before``, set back."""
    sysfs = disk.tool(Sysfs)
    after = sysfs.settings(disk.kernel_name)
    out = []
    for setting in KEPT_SETTINGS:
        if setting not in before or setting not in after or shown(setting, before[setting]) == shown(setting, after[setting]):
            continue
        out.append(sysfs.restore(disk.kernel_name, setting, shown(setting, before[setting]), after))
        if setting == SCHEDULER:  # choosing a scheduler resets nr_requests and wbt_lat_usec: read them again
            after = sysfs.settings(disk.kernel_name)
    return out
