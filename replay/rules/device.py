"""What the replay's QEMU says a disk's device is, asked as the run asked its QEMU: the QOM properties
the run read of each disk (configuration.json's ``disks[].qom_reads``), read again with QMP ``qom-get``
when the guest asks (host action ``qom``), taken as the run took them (``model.advertised``). A rule
whose fault is in QEMU itself (an ``--emulator`` that gives the device other than its command line
says) is judged on the replay's QEMU's answer: the bundle's emulator fails it as in the run, another
QEMU (``--qemu``) is asked afresh.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence

from model.advertised import Advertised, QomRead, QomValue, advertised_from_qom
from replay.qemu import CannotTest
from replay.qmp import Qmp, QmpError
from replay.rules import Replayed

#: The host action's name: ``host qom <serial> <path> <property> ...``.
QOM = "qom"


def disk_entries(config: Mapping[str, object], rule: str) -> list[dict[str, object]]:
    """Each disk of the rule test (configuration.json's ``disks``) with the QOM reads of its device."""
    entries = config.get("disks")
    if not isinstance(entries, list) or not entries:
        raise CannotTest(f"the bundle's configuration.json has no disks (a bundle of an older run): the replay "
                         f"cannot judge {rule} from it")
    for d in entries:
        if not isinstance(d, dict) or not isinstance(d.get("qom_reads"), list):
            raise CannotTest(f"the bundle's configuration.json names a disk without the QOM properties of its device "
                             f"(a bundle of an older run, or not of libvirt): the replay cannot ask QEMU of it: {d}")
    return [d for d in entries if isinstance(d, dict)]


def reads_of(entry: Mapping[str, object], props: Sequence[str] = ()) -> list[QomRead]:
    """The disk's QOM reads (only those of ``props`` where given)."""
    raw = entry.get("qom_reads")
    reads = [QomRead(**r) for r in raw if isinstance(r, dict)] if isinstance(raw, list) else []
    return [r for r in reads if not props or r.prop in props]


def ask(serial: str, reads: Sequence[QomRead]) -> str:
    """The guest's line that asks the host for the reads of disk ``serial``."""
    return shlex.join(["host", QOM, serial, *(w for r in reads for w in (r.path, r.prop))])


def qom_action(qmp: Qmp, args: Sequence[str]) -> str:
    """``<serial> <path> <property>...``: each property's value (``qom-get``) as JSON, with QEMU's version
    and the reads QEMU refused (no such device or property): ``{"version", "values", "refused"}``."""
    v = qmp.execute("query-version").get("return", {}).get("qemu", {})
    values: list[QomValue] = []
    refused: dict[int, str] = {}
    words = list(args[1:])
    for k in range(0, len(words) - 1, 2):
        try:
            values.append(qmp.execute("qom-get", {"path": words[k], "property": words[k + 1]}).get("return"))
        except QmpError as e:
            values.append(None)
            refused[k // 2] = str(e)
    return json.dumps({"version": f"{v.get('major', '?')}.{v.get('minor', '?')}.{v.get('micro', '?')}",
                       "values": values, "refused": refused}, separators=(",", ":"))


def advertised(r: Replayed, serial: str, reads: Sequence[QomRead]) -> Advertised:
    """What the replay's QEMU said of the device of disk ``serial`` (its answer to ``ask``)."""
    call = next((c for c in r.host_calls if c.name == QOM and c.args[:1] == (serial,)), None)
    if call is None or call.error:
        raise CannotTest(f"QEMU was not asked of the device of disk {serial}: "
                         f"{call.error if call else 'the guest never asked'}")
    try:
        said = json.loads(call.answer)
        values, refused = said["values"], {int(k): v for k, v in said["refused"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CannotTest(f"QEMU's answer of the device of disk {serial} could not be read: {call.answer!r}") from e
    answers = {(rd.path, rd.prop): values[k] for k, rd in enumerate(reads) if k < len(values) and k not in refused}
    unknown = [(rd.path, rd.prop) for k, rd in enumerate(reads) if k in refused]
    return advertised_from_qom(reads, answers, f"QEMU {said['version']}, QMP qom-get", unknown)
