"""measure()'s window against a fake guest and host sharing one clock: the cases a real guest
shows only by chance, on a loaded host (fio starting seconds late, fio failing or ending early).
A real window is measured in every suite run (tests/e2e)."""

from __future__ import annotations

import math
import re
import time

import pytest

from guest.tools.fio import PART_LINE as PART
from guest.tools.fio import FioJob
from measure import window
from model.errors import FioError
from model.parse.blockstats import HostBlockCounters
from tests.unit.fake_shell import DATA, FakeBackend, FakeShell, Reply, fake_disk

#: the fake disk: completions per second once fio's requests flow, each taking 5 ms (depth 4)
RATE = 800.0
SERVICE_NS = 5_000_000


class FakeGuest:
    """fio in a guest: started by the Fio tool; its first request completes ``late_s`` later, then
    RATE a second until the suite stops it or it ends by itself ``ends_s`` after starting."""

    def __init__(self, late_s: float, ends_s: float = math.inf, stdout: str = "", exit_status: int = 128) -> None:
        self.late_s, self.ends_s, self.stdout, self.exit_status = late_s, ends_s, stdout, exit_status
        self.started: float | None = None
        self.stopped: float | None = None
        self.t0 = time.monotonic()

    def _end(self) -> float:
        assert self.started is not None
        return min(self.stopped or math.inf, self.started + self.ends_s)

    def completed(self) -> int:
        if self.started is None:
            return 0
        flowing = min(time.monotonic(), self._end()) - (self.started + self.late_s)
        return int(flowing * RATE) if flowing > 0 else 0

    def running(self) -> bool:
        return self.started is not None and time.monotonic() < self._end()

    def shell(self) -> FakeShell:
        def start(_: str) -> Reply:
            self.started = time.monotonic()
            return ""

        def stop(_: str) -> Reply:
            said = ""
            if self.running():
                self.stopped = time.monotonic()
                said = "stopped\n"
            # BackgroundFio.finish's one command: the stop, the sampler's samples (none here), fio's output
            return self.exit_status, f"{said}{PART}\n{PART}\n{self.stdout}", ""

        def diskstats(_: str) -> Reply:
            n = self.completed()
            # the guest's two vCPUs: cpu0 idle a quarter of the time, cpu1 always (ticks of 10 ms)
            up = time.monotonic() - self.t0 + 100
            idle0, idle1 = int(up * 25), int(up * 100)
            return (f"{up:.2f} 50.00\n"
                    f" 254 0 vda {n} 0 {n * 8} {n * 5} 0 0 0 0 0 {n * 5} {n * 5} 0 0 0 0 0 0\n"
                    f"cpu  {int(up * 75)} 0 0 {idle0 + idle1} 0 0 0 0 0 0\n"
                    f"cpu0 {int(up * 75)} 0 0 {idle0} 0 0 0 0 0 0\ncpu1 0 0 0 {idle1} 0 0 0 0 0 0\n")

        return FakeShell(has={"fio", "usleep"}, handlers=[
            (r"^mkdir -p /run/vioconform ", lambda c: "16000\n"),
            (r"\(while \[ -e \S+ \]; do read up .*\n.*setsid sh -c", start),  # sampler and fio: one command
            (r"^\[ -e \S+\.running \]$", lambda c: (0 if self.running() else 1, "", "")),
            (r"kill -INT", stop),
            (r"^cat /proc/uptime /proc/diskstats; grep \^cpu /proc/stat$", diskstats),
            (r"^cat \S+\.out ", lambda c: (self.exit_status if not self.running() else 255, self.stdout, "")),
            (r"^rm -f \S+\.inflight\.running", lambda c: ""),
        ])


def host_of(fake: FakeGuest) -> FakeBackend:
    def counters() -> HostBlockCounters:
        n = fake.completed()
        return HostBlockCounters(n, 0, 0, n * 4096, 0, n * SERVICE_NS, 0, 0, time.monotonic_ns())

    return FakeBackend(counters)


@pytest.fixture(autouse=True)
def _short_ramp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(window, "RAMP_S", 0.2)


JOB = FioJob("qd4", iodepth=4)
SIGINT_OUTPUT = (DATA / "guest" / "fio-qd4-sigint.json").read_text()


def test_the_window_opens_once_fios_requests_reach_the_host() -> None:
    """A loaded host started fio 1.5 s late: a window opened a fixed ramp after the launch held no I/O
    (seen on CI: "histogram outstandingIOs/all is empty", a baseline of 0 KiB)."""
    fake = FakeGuest(late_s=1.5, stdout=SIGINT_OUTPUT)
    shell, backend = fake.shell(), host_of(fake)
    disk = fake_disk(shell, backend)
    m = window.measure(disk, JOB, 1.0, exact=False)
    assert fake.started is not None and fake.stopped is not None
    first_request = fake.started + fake.late_s
    assert m.fio_start_wait_s >= 1.4
    # both sides' window after the first request and a ramp, fio stopped only after the window
    assert m.host.requests >= 0.8 * RATE and m.guest.requests >= 0.8 * RATE, (m.host.requests, m.guest.requests)
    window_reads = backend.reads[-2:]
    assert window_reads[0] >= first_request + 0.2 and fake.stopped > window_reads[-1]
    assert fake.stopped - fake.started < 10  # stopped, not run to its end
    assert m.job.runtime_s == 0.2 + 1.0 + window.FIO_RUNTIME_MARGIN_S
    assert m.fio.jobs[0].read.io_count == 1692  # its JSON after SIGINT (exit 128) is its result
    # from fio's start on, one guest command starts the sampler and fio, one reads each end of the
    # window, one stops both and reads their output; besides them, only a look whether fio still
    # runs, each second of the wait for its first request (here 1.5 s late)
    start = next(i for i, c in enumerate(shell.commands) if "setsid sh -c" in c)
    assert "/inflight; echo $up" in shell.commands[start]
    rest = [c for c in shell.commands[start + 1:] if not re.fullmatch(r"\[ -e \S+\.running \]", c)]
    assert rest[:2] == ["cat /proc/uptime /proc/diskstats; grep ^cpu /proc/stat"] * 2 and len(rest) == 3, rest
    # the guest's CPU time over the same window, read in the same commands as its diskstats
    assert m.guest_cpu is not None and m.guest_cpu.busiest_pct == pytest.approx(75, abs=5), m.guest_cpu
    assert m.guest_cpu.per_cpu_pct[1] == pytest.approx(0, abs=5)
    assert "kill -INT" in rest[2] and ".inflight.running" in rest[2]
    assert 1 <= len(shell.commands) - start - 4 <= 2, shell.commands[start:]


def test_fio_failing_at_start_is_fios_own_error_at_once() -> None:
    """fio's io_setup refused (recorded: error 11, exit 1): its error, within a second, not a timeout."""
    fake = FakeGuest(late_s=math.inf, ends_s=0.0, stdout=(DATA / "guest" / "fio-qd65537-eagain.json").read_text(),
                     exit_status=1)
    disk = fake_disk(fake.shell(), host_of(fake))
    t0 = time.monotonic()
    with pytest.raises(FioError, match=r"fio qd4 on vda: fio failed \(job qd65537: error 11 \(EAGAIN"):
        window.measure(disk, JOB, 1.0, exact=False)
    assert time.monotonic() - t0 < 3 * window.FIO_STATE_PERIOD_S


def test_no_request_in_time_is_an_error_naming_the_cause_and_fio_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(window, "FIO_START_TIMEOUT_S", 1.0)
    fake = FakeGuest(late_s=math.inf, stdout=SIGINT_OUTPUT)
    shell = fake.shell()
    disk = fake_disk(shell, host_of(fake))
    with pytest.raises(window.WindowError, match=re.escape(
            "no request of fio qd4 reached the host on vda within 1 s of starting it, and fio still runs in the "
            "guest: the guest is too slow to start it (a loaded host?), or its I/O does not reach this disk")):
        window.measure(disk, JOB, 1.0, exact=False)
    assert fake.stopped is not None  # it must not disturb what the suite measures next
    assert any(c.startswith("rm -f ") and ".inflight.running" in c for c in shell.commands)  # nor the sampler


def test_fio_ending_before_the_window_closed_is_an_error() -> None:
    """A window that may hold fio's end is not a steady state: an error, not a measurement."""
    fake = FakeGuest(late_s=0.1, ends_s=0.8, stdout=SIGINT_OUTPUT.replace("fio: terminating on signal 2\n", ""),
                     exit_status=0)
    disk = fake_disk(fake.shell(), host_of(fake))
    with pytest.raises(window.WindowError, match="fio qd4 on vda ended before the measured window closed"):
        window.measure(disk, JOB, 1.0, exact=False)
