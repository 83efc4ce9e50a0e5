"""hotplug's surprise removal in the replay (``--surprise-removal``), after the idle add and removal, as
the run does it once the host let the first disk go: the host adds the disk again (``again``: the add's
action), the guest waits for its serial, starts the run's fio on it (model/rules/hotplug.py's surprise
workload: 4 KiB random reads at depth 4, time-based) and after ``FIO_BEFORE_REMOVAL_S`` asks the host to
remove it under fio (``pull``: ``device_del``, as the run's libvirt detach sends it: QEMU drops a SCSI
disk at once and a virtio-blk disk once the guest answers the PCI eject, whatever fio does). The guest
waits for fio to end (the run's bound, timed as the run's wait on the guest's clock) and tells the
host (``fio``), stops a fio still running as the run's finish does, prints fio's output, waits for the
disk to go and asks the host to wait for QEMU's ``DEVICE_DELETED`` (``pulled``, the gone action with the
run's bound from the request). fio's time is the host's, from its removal request to the guest's report.

The run's "the guest did not answer over SSH after the removal" has no replay: a guest that stops
answering stops its script too, so the replay's evidence is incomplete (exit 125), never that failure.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from model.errors import ParseError
from model.kernel_log_check import InjectedErrors
from model.parse.fio_json import parse_fio_json
from model.rules.hotplug import (
    FIO_BEFORE_REMOVAL_S,
    FIO_END_BOUND_S,
    GONE_BOUND_S,
    SEEN_BOUND_S,
    SURPRISE_BS_BYTES,
    SURPRISE_DEPTH,
    SURPRISE_FIO_RUNTIME_S,
    Surprise,
    first_error,
)
from replay.qemu import CannotTest, HostCall
from replay.rules.host import calls

#: The host actions of the surprise removal beside the idle add's (replay/rules/hotplug.py registers them).
AGAIN, PULL, FIO, PULLED = "again", "pull", "fio", "pulled"
#: The guest's side, run where the host let the first disk go (its ``gone`` answer in ``$ANSWER``).
#: Each line it prints starts with what it is (``sfio`` and ``sfioerr``: fio's stdout and stderr).
SCRIPT = r"""set -- $ANSWER
if [ "$1" = gone ]; then
  host again {add}
  echo "again $ANSWER"
  t0=$(up); S=
  while :; do S=$(find_disk {serial}); [ -n "$S" ] && break; past $t0 {seen_bound} && break; usleep 100000; done
  if [ -n "$S" ]; then
    echo "surprise $S"
    fio {fio} --filename=/dev/$S > /tmp/sfio.out 2> /tmp/sfio.err & F=$!
    usleep {before_us}
    host pull
    PULL=$ANSWER; echo "pull $PULL"
    t2=$(up)
    while kill -0 $F 2>/dev/null; do past $t2 {fio_wait} && break; usleep 100000; done
    if kill -0 $F 2>/dev/null; then
      echo "fio still-running"
      kill -INT $F 2>/dev/null; t3=$(up)
      while kill -0 $F 2>/dev/null; do past $t3 {stop_wait} && break; usleep 100000; done
      if kill -0 $F 2>/dev/null; then RC=255; else wait $F; RC=$?; fi
    else
      host fio ended
      wait $F; RC=$?
    fi
    echo "fio-exit $RC"
    sed 's/^/sfio /' /tmp/sfio.out; sed 's/^/sfioerr /' /tmp/sfio.err
    t4=$(up)
    while [ -e /sys/block/$S ]; do past $t4 {gone_bound} && break; usleep 100000; done
    if [ -e /sys/block/$S ]; then echo "surprise-kept"; else echo "surprise-released $(since $t4)"; fi
    set -- $PULL; host pulled $2 {host_bound}
    echo "pulled $ANSWER"
  fi
fi"""


def fio_args(size_bytes: int) -> list[str]:
    """The run's fio of the surprise removal (suites/test_hotplug.py's FioJob), the disk aside."""
    return ["--name=hotplug-surprise", "--rw=randread", f"--bs={SURPRISE_BS_BYTES}", f"--iodepth={SURPRISE_DEPTH}",
            "--numjobs=1", "--ioengine=libaio", "--direct=1", "--time_based", f"--runtime={SURPRISE_FIO_RUNTIME_S:g}s",
            "--group_reporting", "--output-format=json", f"--size={size_bytes}"]


def script(add: Sequence[str], size_bytes: int) -> str:
    """The guest's surprise removal of the disk the host adds with ``add`` (the add action's words)."""
    return (SCRIPT.replace("{add}", " ".join(shlex.quote(a) for a in add)).replace("{serial}", shlex.quote(add[1]))
            .replace("{seen_bound}", f"{SEEN_BOUND_S:g}").replace("{fio}", " ".join(fio_args(size_bytes)))
            .replace("{before_us}", str(round(FIO_BEFORE_REMOVAL_S * 1e6)))
            # the run's waits: the bound and up to 1 s more, on the guest's clock (guest/tools/fio.py's wait)
            .replace("{fio_wait}", f"{FIO_END_BOUND_S + 1:g}").replace("{stop_wait}", f"{GONE_BOUND_S + 1:g}")
            .replace("{gone_bound}", f"{GONE_BOUND_S:g}").replace("{host_bound}", f"{GONE_BOUND_S + FIO_END_BOUND_S:g}"))


def _one(r_calls: Sequence[HostCall], name: str) -> HostCall:
    found = calls(r_calls, name)
    if len(found) != 1:
        raise CannotTest(f"the guest asked the host for {name} {len(found)} times in the surprise removal, not once: "
                         "the evidence is incomplete")
    return found[0]


def surprise(said: Mapping[str, list[str]], host_calls: Sequence[HostCall]) -> Surprise | None:
    """The surprise removal from the guest's lines (by their first word) and the host's calls; None where
    the guest did not show the disk again (as the run's); CannotTest where the guest stopped short."""
    if "surprise" not in said:
        if "again" not in said:
            raise CannotTest(f"the guest did not add the disk again for the surprise removal: it said {dict(said)}")
        return None
    device = said["surprise"][0]
    if "pulled" not in said or "fio-exit" not in said:
        raise CannotTest(f"the guest did not get through the surprise removal of {device}: it said {dict(said)}")
    pulled, fio_ended = _one(host_calls, PULL), calls(host_calls, FIO)
    stdout, stderr = "\n".join(said.get("sfio", [])), "\n".join(said.get("sfioerr", []))
    reads = read_bytes = None
    try:
        read = parse_fio_json(stdout, f"fio hotplug-surprise on /dev/{device}").jobs[0].read
        reads, read_bytes = read.io_count, read.io_bytes
    except (ParseError, IndexError):
        pass  # as the run: a fio that printed no JSON counted nothing
    host = _one(host_calls, PULLED).answer.split()
    released = said.get("surprise-released", [])
    return Surprise(device, (fio_ended[0].begin_ns - pulled.begin_ns) / 1e9 if fio_ended else None,
                    int(said["fio-exit"][0]), first_error(stdout, stderr), True,
                    float(released[0]) if released else None, float(host[1]) if host[0] == "gone" else None,
                    fio_reads=reads, fio_read_bytes=read_bytes, request_bytes=SURPRISE_BS_BYTES)


def injected(said: Mapping[str, list[str]]) -> list[InjectedErrors]:
    """The read errors the removal causes are the rule's own (the whole disk), as the run tells its
    kernel-log check once the guest showed the disk again."""
    return [InjectedErrors(said["surprise"][0])] if "surprise" in said else []
