"""Errors injected under a disk's block node with QEMU's ``blkdebug`` filter, through QMP.

blkdebug fails requests by rule (``inject-error``: an errno, the sector a request must cover, the
request type). Its rules are fixed when its node opens and libvirt has no XML for it, so for each
injected range the injector makes a blkdebug node over the disk's file node (``blockdev-add``) and
puts it under the disk's format node (``blockdev-reopen`` of the format node with the blkdebug node
as its ``file``); healing reopens the format node on its own file node again and deletes the
blkdebug node. The device and its guest see nothing change but the errors.

What QEMU 7.2's blkdebug does with its rules (block/blkdebug.c; measured here with qemu-io and in
the suite's guests):

- a rule matches a request that covers the rule's sector (``sector`` in 512-byte sectors: the
  request's first byte at or before it, its end after it): a range is one rule per sector;
- a rule's ``event`` says when it becomes active: ``none`` is the node's open, so the rules hold
  from the reopen on, whatever events the format driver raises (``read_aio`` and ``write_aio``
  activate only the rules of that event and drop the others: a rule set of one event per node);
- ``iotype`` limits a rule to reads or to writes (default: every type, flushes included);
- the error goes back to the device, whose ``rerror``/``werror`` policy decides what the guest sees:
  ``report`` (the suite sets it on its scratch disks) hands it to the guest; ``stop`` would pause the
  VM and ``ignore`` swallow it (:meth:`BlkdebugInjector.policy` checks: a QEMU that answers otherwise
  than the suite configured is the hypervisor under test failing, ``ErrorPolicyContradicted``).

Verified on QEMU 7.2 with libvirt 9.0: blkdebug over libvirt's ``libvirt-N-storage`` node under
``libvirt-N-format`` (virtio-scsi, virtio-blk), 16 rules of ``iotype`` read: 2 reads of 16 failed in
the guest, ``failed_rd_operations`` 12 on virtio-scsi (sd retries each 5 times) and 2 on virtio-blk.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from hypervisors.base import ErrorPolicyContradicted, InjectionUnavailable
from hypervisors.libvirt.controllers import REPORT_ERRORS
from hypervisors.libvirt.qmp import DomainQmp
from model.error_injection import ErrorPolicy, InjectedRange
from model.errors import HypervisorError
from model.parse.blockstats import HostRequestOutcomes, parse_qmp_outcomes

log = logging.getLogger("vioconform.libvirt")

PERIPHERAL = "/machine/peripheral"
#: EIO, the errno every injected failure carries (Linux's; blkdebug takes the host's numbers).
EIO = 5
#: What reports an error to the guest, by device property: ``report``; ``auto`` is report for reads
#: and ``enospc`` for writes, which reports every error but ENOSPC (hw/block/block.c,
#: blkconf_apply_backend_options). Anything else (``stop``, ``ignore``) keeps the error from the guest.
REPORTING = {"rerror": ("report", "auto"), "werror": ("report", "auto", "enospc")}


@dataclass(frozen=True)
class Chain:
    """The disk's format node, the node under it and the format node's reopen options (its file aside)."""

    format_node: str
    file_node: str
    options: dict[str, Any]


@dataclass
class BlkdebugInjector:
    """Injects ranges under the disk whose QEMU device id is ``qmp.device``. ``format_options``: the
    options the format node was opened with (its ``node-name`` and ``file`` aside), which
    ``blockdev-reopen`` needs whole (an option it is not given goes back to its default)."""

    qmp: DomainQmp
    format_options: dict[str, Any]
    #: the blkdebug node, while one is in place
    node: str | None = None
    _chain: Chain | None = field(default=None, repr=False)
    _count: int = 0

    def _execute(self, command: dict[str, object]) -> Any:
        reply = self.qmp.execute(command)
        if "error" in reply:
            err = reply["error"]
            said = err.get("desc", err) if isinstance(err, dict) else err
            raise HypervisorError(f"QMP {command['execute']} on {self.qmp.domain} failed: {said}")
        return reply.get("return")

    def chain(self) -> Chain:
        """The disk's format node and its file node, from QEMU's block graph (the blkdebug node of an
        earlier injection skipped). InjectionUnavailable where the disk has no file node under a raw one."""
        if self._chain is not None:
            return self._chain
        graph = self._execute({"execute": "x-debug-query-block-graph"})
        names = {n["id"]: n["name"] for n in graph["nodes"]}
        edges = [(names[e["parent"]], e["name"], names[e["child"]]) for e in graph["edges"]]
        device = self.qmp.device
        backends = (device, f"{PERIPHERAL}/{device}/virtio-backend")
        top = next((c for p, role, c in edges if p in backends and role == "root"), None)
        if top is None:
            raise InjectionUnavailable(f"QEMU's block graph has no block node under device {device}")
        below = next((c for p, role, c in edges if p == top and role == "file"), None)
        if below is not None and below.startswith("vioc-errinj-"):
            below = next((c for p, role, c in edges if p == below and role == "image"), None)
        nodes = self._execute({"execute": "query-named-block-nodes", "arguments": {"flat": True}})
        drivers = {n["node-name"]: n.get("drv") for n in nodes}
        if below is None or drivers.get(top) != "raw":
            raise InjectionUnavailable(f"device {device}'s block node {top} is a {drivers.get(top)} node "
                                       f"{'with no file node under it' if below is None else ''}: errors can be "
                                       "injected under a raw node over a file only")
        self._chain = Chain(top, below, {**self.format_options, "node-name": top})
        return self._chain

    def policy(self) -> dict[str, str]:
        """The device's ``rerror`` and ``werror`` (qom-get), each that the device has;
        ErrorPolicyContradicted where one keeps errors from the guest: the suite configured every disk
        to report them (controllers.REPORT_ERRORS), so QEMU's answer contradicts its own configuration."""
        path = f"{PERIPHERAL}/{self.qmp.device}"
        found: dict[str, str] = {}
        for prop in REPORTING:
            reply = self.qmp.execute({"execute": "qom-get", "arguments": {"path": path, "property": prop}})
            if "error" not in reply:
                found[prop] = str(reply.get("return"))
        withheld = tuple(p for p, v in found.items() if v not in REPORTING[p])
        if withheld:
            raise ErrorPolicyContradicted(ErrorPolicy(self.qmp.device, REPORT_ERRORS, found, withheld,
                                                      f"QMP qom-get {path}"))
        return found

    def inject(self, injected: InjectedRange) -> None:
        """From now on every request of ``injected.kind`` that covers a sector of ``injected`` fails with EIO."""
        self.heal()
        chain = self.chain()
        self.policy()
        self._count += 1
        node = f"vioc-errinj-{self.qmp.device}-{self._count}"
        rules = [{"event": "none", "iotype": injected.kind, "errno": EIO, "sector": s}
                 for s in range(injected.first_sector, injected.end_sector)]
        self._execute({"execute": "blockdev-add", "arguments": {
            "driver": "blkdebug", "node-name": node, "image": chain.file_node, "inject-error": rules}})
        self.node = node
        try:
            self._execute({"execute": "blockdev-reopen", "arguments": {"options": [{**chain.options, "file": node}]}})
        except HypervisorError:
            self.heal()
            raise
        log.info("%s: %s fail with EIO (blkdebug node %s under %s)", self.qmp.device, injected.describe(), node,
                 chain.format_node)

    def heal(self) -> None:
        """The format node back on its own file node, the blkdebug node gone; nothing to do when none is in place."""
        if self.node is None:
            return
        chain = self.chain()
        self._execute({"execute": "blockdev-reopen", "arguments": {
            "options": [{**chain.options, "file": chain.file_node}]}})
        self._execute({"execute": "blockdev-del", "arguments": {"node-name": self.node}})
        log.info("%s: healed (blkdebug node %s removed)", self.qmp.device, self.node)
        self.node = None

    def outcomes(self) -> HostRequestOutcomes:
        return parse_qmp_outcomes(self.qmp.execute({"execute": "query-blockstats"}), self.qmp.device)
