"""A fio run that goes on past I/O errors (``--continue_on_error=all --error_dump=1``): how many
requests it issued, how many failed, and which ones.

fio counts the failed requests in its JSON (``total_err``, printed with continue_on_error) and, with
``error_dump``, prints each on stderr (fio 3.x, ``io_u.c``)::

    fio: io_u error on file /dev/sdb: Input/output error: read offset=1081344, buflen=4096

``total_ios`` of a direction counts every request fio issued and got an answer for, the failed
ones included (measured: 16 reads, 2 of them failed: ``total_ios`` 16, ``io_bytes`` 14 x 4096).

Example::

    run = parse_fio_error_run(stdout, stderr, "read")
    run.errors, [f.offset_bytes for f in run.failed]  # 2, [1081344, 1089536]
"""

from __future__ import annotations

import errno
import json
import re
from dataclasses import dataclass

from model.errors import ParseError
from model.parse.fio_json import fio_messages, parse_fio_json

#: The errnos Linux turns a failed block request into (block/blk-core.c, blk_errors: BLK_STS_IOERR EIO,
#: MEDIUM ENODATA, TARGET EREMOTEIO, NEXUS EBADE, TRANSPORT ENOLINK, TIMEOUT ETIMEDOUT, NOSPC ENOSPC,
#: PROTECTION EILSEQ, RESOURCE ENOMEM, DEV_RESOURCE EBUSY, NOTSUPP EOPNOTSUPP): a job with
#: ``continue_on_error`` goes on past each (fio's own list is EIO and EILSEQ). Numbers, Linux's: fio 3.33
#: knows the names of errnos up to ERANGE only.
CONTINUE_ON = tuple(str(e) for e in (errno.EIO, errno.ENODATA, errno.EREMOTEIO, errno.EBADE, errno.ENOLINK,
                                     errno.ETIMEDOUT, errno.ENOSPC, errno.EILSEQ, errno.ENOMEM, errno.EBUSY,
                                     errno.EOPNOTSUPP))

_FAILED = re.compile(r"fio: io_u error on file (?P<file>\S+?): (?P<message>.+): (?P<ddir>[a-z]+) "
                     r"offset=(?P<offset>\d+), buflen=(?P<length>\d+)")


@dataclass(frozen=True)
class FailedIo:
    """One request fio saw fail."""

    ddir: str  # "read", "write"
    offset_bytes: int
    length_bytes: int
    message: str  # "Input/output error"


@dataclass(frozen=True)
class FioErrorRun:
    """What one fio job with continue_on_error saw."""

    issued: int  # requests of the direction that got an answer, failed ones included
    errors: int  # fio's total_err
    first_error: int  # the first failure's errno (0: none)
    failed: tuple[FailedIo, ...]  # each failure fio printed (error_dump)
    said: str  # what fio printed besides its JSON


def parse_fio_error_run(stdout: str, stderr: str, ddir: str, source: str = "fio") -> FioErrorRun:
    """The run's counts in direction ``ddir`` ("read" or "write") and its failed requests. ParseError
    where fio printed no JSON or no ``total_err`` (it was not run with continue_on_error)."""
    result = parse_fio_json(stdout, source)
    if len(result.jobs) != 1:
        raise ParseError(f"{source}: expected one job, got {len(result.jobs)}")
    job = result.jobs[0]
    start = 0 if stdout.startswith("{") else stdout.find("\n{") + 1
    # the job object again, for the two fields FioJob does not carry
    raw = json.JSONDecoder().raw_decode(stdout, start)[0]["jobs"][0]
    total_err, first_error = raw.get("total_err"), raw.get("first_error", 0)
    if not isinstance(total_err, int) or not isinstance(first_error, int):
        raise ParseError(f"{source}.jobs[0]: no integer total_err (got {total_err!r}): was fio run with "
                         "--continue_on_error?")
    direction = job.read if ddir == "read" else job.write
    failed = tuple(FailedIo(m.group("ddir"), int(m.group("offset")), int(m.group("length")), m.group("message"))
                   for m in _FAILED.finditer(stderr + "\n" + stdout))
    return FioErrorRun(direction.io_count, total_err, first_error, failed, fio_messages(stdout, stderr))
