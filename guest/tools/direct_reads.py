"""Single O_DIRECT reads of a disk, each a byte offset and length, made by one fio run whose jobs are
the reads (psync: one read(2) each): the block-size rule asks whether the guest refuses reads below
the disk's logical block. One fio for all of them: each fio start costs most of a second under TCG.

Not ``dd iflag=direct``: busybox's dd read 256 bytes of a 512-byte-sector disk with it where the
kernel refuses them (it retries without O_DIRECT), so its success says nothing of the guest's refusal.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from guest.tools.fio import FioOutput
from guest.tools.fio_push import FioBinary
from guest.tools.tool import GuestShell, GuestTool, GuestTools
from model.rules.block_size import direct_reads_args


class DirectReads(GuestTool):
    name = "direct-reads"
    install_hint = FioBinary.install_hint

    def __init__(self, shell: GuestShell, tools: GuestTools) -> None:
        super().__init__(shell, tools)
        self.binary = tools.get(FioBinary)

    def read(self, device: str, reads: Sequence[tuple[str, int, int]]) -> FioOutput:
        """One fio run on ``device`` with a job per (name, offset, length) of ``reads``; fio's JSON
        has each job's ``error`` (22, EINVAL, where the kernel refused the read)."""
        ran = self._run(shlex.join([self.binary.path, *direct_reads_args(device, reads)]), check=False, timeout_s=120)
        return FioOutput(ran.stdout, ran.stderr, ran.exit_status)
