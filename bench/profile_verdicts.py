"""The default rules under each platform profile: a table of verdicts, profile by rule.

    python -m bench.profile_verdicts                          # the embedded guest, every profile and none
    python -m bench.profile_verdicts --guests embedded,test-image   # also the project's cloud-init test image
    python -m bench.profile_verdicts --profiles nova,proxmox  # some profiles only

Each profile is one run of the suite (``--profile P``: the profile's bus and its disk settings, one
configuration); "none" is the same run without a profile (``--controllers virtio-scsi,virtio-blk``),
the reference. A profile whose format is qcow2 (nova, virt-install) needs a disk with an image to
format, so it runs with ``--disk-backing file`` and is compared with "none (file)", the reference run
with that backing; the others keep the suite's default disk (the null-co latency disk). Prints a line per run as it ends, then the table: a row per rule, a column per
profile and guest, each cell the verdict (PASS, FAIL, SKIP, ERROR; several configurations joined by
"/"). Exits 1 when a profile failed or errored a rule that passed without a profile on the same
guest, 0 otherwise. Writes only under a new temporary directory, which it names.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bench.suite_run import run_suite_at
from model.profiles import PROFILES, ProfileError, parse_profiles

SHORT = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP", "error": "ERROR"}
#: A JUnit test case's name: the rule, then the configuration in brackets.
CASE = re.compile(r"(?P<rule>[^\[]+)\[(?P<config>.*)\]")


def verdicts(outcomes: dict[str, str]) -> dict[str, str]:
    """{rule: its verdicts, joined by "/" in configuration order} of one run's test cases."""
    by_rule: dict[str, list[str]] = defaultdict(list)
    for name, outcome in sorted(outcomes.items()):
        m = CASE.fullmatch(name)
        by_rule[m["rule"] if m else name].append(SHORT.get(outcome, outcome.upper()))
    return {rule: "/".join(v) for rule, v in by_rule.items()}


def table(columns: dict[str, dict[str, str]]) -> str:
    """A Markdown table: a row per rule, a column per run."""
    rules = sorted({r for col in columns.values() for r in col})
    head = ["rule", *columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join([r, *(columns[c].get(r, "-") for c in columns)]) + " |" for r in rules]
    return "\n".join(lines)


def regressions(columns: dict[str, dict[str, str]], references: dict[str, str]) -> list[str]:
    """'column: rule' for each rule a profile's column failed or errored where its reference column
    (``references``: column -> the column of the run without a profile) passed."""
    out = []
    for col, ref in references.items():
        reference = columns.get(ref, {})
        out += [f"{col}: {rule}" for rule, v in columns.get(col, {}).items()
                if reference.get(rule, "").startswith("PASS") and ("FAIL" in v or "ERROR" in v)]
    return out


def plan(names: list[str], guest: str) -> list[tuple[str, list[str], str]]:
    """(column, the suite's arguments, its reference column or "") of each run on ``guest``, the
    references first."""
    file_backed = [n for n in names if PROFILES[n].settings.format == "qcow2"]
    runs = [(f"none, {guest}", ["--controllers", "virtio-scsi,virtio-blk"], "")]
    if file_backed:
        runs.append((f"none (file), {guest}", ["--controllers", "virtio-scsi,virtio-blk", "--disk-backing", "file"], ""))
    for n in names:
        if n in file_backed:
            runs.append((f"{n} (file), {guest}", ["--profile", n, "--disk-backing", "file"], f"none (file), {guest}"))
        else:
            runs.append((f"{n}, {guest}", ["--profile", n], f"none, {guest}"))
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.profile_verdicts", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profiles", default=",".join(PROFILES),
                    help=f"the profiles, comma-separated (default: all: {','.join(PROFILES)})")
    ap.add_argument("--guests", default="embedded",
                    help="embedded, test-image or both, comma-separated (default: embedded); the test image is the "
                         "project's cloud-init Debian 12 image, built first if not cached")
    args = ap.parse_args(argv)
    wanted = [g.strip() for g in args.guests.split(",") if g.strip()]
    if not wanted or set(wanted) - {"embedded", "test-image"}:
        ap.error(f"--guests {args.guests}: give embedded, test-image or both")
    try:
        names = [p.name for p in parse_profiles(args.profiles)]
    except ProfileError as e:
        ap.error(str(e))
    guests: dict[str, list[str]] = {"embedded": []} if "embedded" in wanted else {}
    if "test-image" in wanted:
        from bench.testimage import ensure_test_image

        guests["test image"] = ["--image", str(ensure_test_image(lambda m: print(m, file=sys.stderr)).path)]
    work = Path(tempfile.mkdtemp(prefix="vioconform-bench-profiles-"))
    print(f"results under {work}", flush=True)
    columns: dict[str, dict[str, str]] = {}
    references: dict[str, str] = {}
    for guest, guest_args in guests.items():
        for i, (col, which, ref) in enumerate(plan(names, guest)):
            if ref:
                references[col] = ref
            t0 = time.monotonic()
            run = run_suite_at(work / f"{guest.replace(' ', '-')}-{i}", "-q", *which, *guest_args, "--store", "none",
                               timeout=None)
            took = time.monotonic() - t0
            if not run.junit.exists():
                print(run.output[-3000:], file=sys.stderr)
                print(f"{col}: no JUnit file (exit {run.returncode})", flush=True)
                columns[col] = {}
                continue
            got = verdicts(run.outcomes())
            columns[col] = got
            counts = {s: sum(v.split("/").count(s) for v in got.values()) for s in SHORT.values()}
            print(f"{col}: {took:.0f} s, exit {run.returncode}, "
                  + ", ".join(f"{n} {s}" for s, n in counts.items() if n), flush=True)
    print()
    print(table(columns))
    bad = regressions(columns, references)
    for r in bad:
        print(f"regression: {r}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
