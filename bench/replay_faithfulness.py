"""The replay's faithfulness (docs/reproducer.md, docs/benchmarks.md): for each rule the replay judges,
a run with the rule's fault and a healthy run with ``--reproducer all``; each bundle handed over as a
vendor gets it (its ``.tar.gz`` alone, unpacked in another directory) and replayed with an empty
environment; a table of the run's verdict against the replay's, with the number of replays behind it.

    python -m bench.replay_faithfulness                                   # every rule, virtio-scsi, 1 replay
    python -m bench.replay_faithfulness --rules io-size,direct-io --controllers virtio-scsi,virtio-blk --replays 3

One faulted run per controller applies every fault the controller can carry at once (each fails its
own rule and leaves the others' verdicts alone), one healthy run writes every bundle: two suite runs
per controller whatever the number of rules, and a third first where a rule needs a baseline to reach a
verdict (buffered-direct: a healthy run saves one, ``--save-baseline``, and both runs compare with it). Prints the table (markdown) and exits 1 where a replay
disagreed with its run's verdict. Where both failed, it also counts the replays whose ``FAIL:`` lines
are the run's, figures and disk names aside (a judge that words its bar after a figure, as queue-depth
does after the guest's aqu-sz, may say the same failure in other words).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.suite_run import SuiteRun, run_suite_at
from model.faults import FAULTS
from model.rules import opt_in
from replay.rules import RULES

#: The fault that fails each rule (model/faults.py).
FAULT_OF = {f.rule: f.name for f in FAULTS.values()}
#: Faults a controller cannot carry: its disks' tests would skip (model/faults.py's cannot_apply:
#: virtio-blk has no queue depth to set and, in Linux 6.1, no command timeout (no queue/io_timeout)),
#: or the rule's own skip (virtio-blk has no resize notice a device property withholds, suites/test_resize.py).
CANNOT_CARRY = {"virtio-blk": {"tcq-off", "short-timeout", "param-change-off"}}
#: Rules whose test reaches a verdict only against a baseline (model/rules/buffered_direct.py's NO_BASELINE):
#: their runs here compare with a file a healthy run saved first (``--baseline FILE``), which their bundles carry.
NEEDS_BASELINE = {"buffered-direct"}
#: A replay boots the embedded guest and runs the rule's jobs: 30-100 s under TCG here; the bound is
#: for a replay that never ends, not a speed goal.
REPLAY_TIMEOUT_S = 900
#: The replay's exit code for each of the run's outcomes.
EXIT_OF = {"passed": 0, "failed": 1}


def replay(bundle: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``./replay ARGS`` as a receiver runs it: from ``cwd``, with an empty environment."""
    return subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", str(bundle / "replay"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=REPLAY_TIMEOUT_S, check=False)


def handed_over(run: SuiteRun, case: str, to: Path) -> Path:
    """The case's bundle as a receiver gets it: its .tar.gz alone, unpacked in ``to``."""
    path = Path(SuiteRun.props(run.cases()[case])["reproducer"])
    to.mkdir(parents=True)
    with tarfile.open(path.with_name(path.name + ".tar.gz")) as tar:
        tar.extractall(to)
    return to / path.name


def failures(text: str) -> set[str]:
    """The ``FAIL:`` lines of a verdict with every number replaced by ``N``, every disk name by ``DISK``
    and every run of spaces by one: the same failure in the same words, whatever the figures (a
    replay's 100 syncs against the run's 99, a kernel line's time stamp) and the disk's name (a SCSI
    HBA's two disks are probed in either order at a boot), every disk file by its name alone (the replay's
    copy is in its output directory) and every run id (data-integrity's, fresh in each run) by ``ID``."""
    def same(line: str) -> str:
        line = re.sub(r"\brun [0-9a-f]{8}\b", "run ID", re.sub(r"\S*/([\w.-]+\.img)\b", r"\1", line.strip()))
        return re.sub(r"\s+", " ", re.sub(r"\d+(\.\d+)?", "N", re.sub(r"\b(sd|vd)[a-z]+\b", "DISK", line)))
    return {same(line) for line in text.splitlines() if line.strip().startswith("FAIL:")}


def case_name(rule: str, controller: str) -> str:
    return f"{rule}[libvirt:{controller}:latency5ms]"


def selection(rules: list[str]) -> list[str]:
    """The suite's arguments that run ``rules``: ``-k``, and ``--with-rules`` for those outside the default
    suite (write-cache, throttle...: without it the run deselects them)."""
    chosen = [r for r in rules if opt_in(r)]
    return ["-k", " or ".join(r.replace("-", "_") for r in rules), *(["--with-rules", ",".join(chosen)] if chosen else [])]


def baseline_args(rules: list[str], controller: str, work: Path) -> list[str]:
    """``--baseline FILE`` where a rule of ``rules`` reaches a verdict only against a baseline (buffered-direct
    measures only without one: no verdict, no bundle): FILE saved first by a healthy run of those rules
    (``--save-baseline``); none for other rules."""
    needing = [r for r in rules if r in NEEDS_BASELINE]
    if not needing:
        return []
    base = work / f"{controller}-baseline.json"
    run_suite_at(work / f"{controller}-save-baseline", "--controllers", controller, *selection(needing),
                 "--save-baseline", str(base), timeout=None)
    if not base.is_file():
        raise SystemExit(f"the healthy run on {controller} saved no baseline ({base}) for {', '.join(needing)}")
    return ["--baseline", str(base)]


def suite_runs(rules: list[str], controller: str, work: Path) -> tuple[SuiteRun, SuiteRun]:
    """The faulted run (every rule's fault the controller carries) and the healthy run with every bundle,
    both against the same baseline where a rule needs one."""
    select = selection(rules)
    faults = [FAULT_OF[r] for r in rules if FAULT_OF.get(r) and FAULT_OF[r] not in CANNOT_CARRY.get(controller, ())]
    base = baseline_args(rules, controller, work)
    faulty = run_suite_at(work / f"{controller}-faults", "--controllers", controller, *select,
                          *(a for f in faults for a in ("--inject", f)), *base, timeout=None)
    healthy = run_suite_at(work / f"{controller}-healthy", "--controllers", controller, *select,
                           "--reproducer", "all", *base, timeout=None)
    return faulty, healthy


@dataclass
class Cell:
    """One bundle's row: the run's outcome, each replay's exit code, whether each said the run's failures."""

    rule: str
    controller: str
    fault: str
    run: str
    exits: list[int]
    same_words: list[bool]

    @property
    def agrees(self) -> bool:
        """Every replay reached the run's verdict (its exit code)."""
        return bool(self.exits) and all(code == EXIT_OF.get(self.run) for code in self.exits)

    def row(self) -> str:
        said = ", ".join(str(c) for c in self.exits) or "none"
        words = "-" if self.run != "failed" else f"{sum(self.same_words)} of {len(self.same_words)}"
        return (f"| {self.rule} | {self.controller} | {self.fault or 'healthy (`--reproducer all`)'} | "
                f"{self.run.upper()} | {said} | {words} | {len(self.exits)} |")


def replay_case(run: SuiteRun, rule: str, controller: str, fault: str, replays: int, work: Path) -> Cell:
    """Each replay of the case's bundle, from a copy in ``work``."""
    case = case_name(rule, controller)
    outcome = run.outcomes().get(case, "missing")
    cell = Cell(rule, controller, fault, outcome, [], [])
    if outcome not in EXIT_OF:
        return cell
    bundle = handed_over(run, case, work / "vendor")
    said = failures(SuiteRun.failure_text(run.cases()[case]))
    for k in range(1, replays + 1):
        done = replay(bundle, work, "--out", str(work / f"out{k}"))
        cell.exits.append(done.returncode)
        cell.same_words.append(failures(done.stdout) == said)
        print(f"{case} {fault or 'healthy'}: replay {k}: exit {done.returncode}", file=sys.stderr)
    return cell


def _load() -> float:
    return os.getloadavg()[0]


TABLE_HEAD = ("| rule | controller | bundle of the run | run | replay's exit codes | replays with the run's FAIL lines "
              "(figures aside) | replays |\n|---|---|---|---|---|---|---|")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.replay_faithfulness", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rules", default=",".join(sorted(RULES)), help="the rules (default: every rule the replay judges)")
    ap.add_argument("--controllers", default="virtio-scsi", help="comma-separated (default virtio-scsi)")
    ap.add_argument("--replays", type=int, default=1, help="replays of each bundle (default 1)")
    args = ap.parse_args(argv)
    rules = [r for r in args.rules.split(",") if r]
    unknown = [r for r in rules if r not in RULES]
    if unknown:
        ap.error(f"the replay does not judge {', '.join(unknown)}; it judges {', '.join(sorted(RULES))}")
    work = Path(tempfile.mkdtemp(prefix="vioconform-bench-replay-"))
    began, load = time.strftime("%Y-%m-%d %H:%M %Z"), [_load()]
    cells = []
    for controller in args.controllers.split(","):
        faulty, healthy = suite_runs(rules, controller, work)
        for rule in rules:
            fault = FAULT_OF.get(rule, "")
            if fault and fault not in CANNOT_CARRY.get(controller, ()):
                cells.append(replay_case(faulty, rule, controller, fault, args.replays, work / f"{controller}-{rule}-f"))
            cells.append(replay_case(healthy, rule, controller, "", args.replays, work / f"{controller}-{rule}-h"))
            load.append(_load())
    print(TABLE_HEAD)
    for cell in cells:
        print(cell.row())
    disagree = [c for c in cells if not c.agrees]
    for c in disagree:
        print(f"DISAGREES: {c.rule} on {c.controller} ({c.fault or 'healthy'}): run {c.run}, replays {c.exits}",
              file=sys.stderr)
    print(f"measured from {began} to {time.strftime('%H:%M %Z')}, 1-minute load average {min(load):.1f}-{max(load):.1f} "
          f"on {os.cpu_count()} cores; work directory: {work}", file=sys.stderr)
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
