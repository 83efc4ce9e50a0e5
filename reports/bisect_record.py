"""A bisect's records: its lines on the terminal, one HTML page and a JUnit file with one case.

The JUnit case ``bisect[<rule>]`` passes when the first bad candidate was found (its properties
``first_bad`` and ``last_good``, and each step's verdict and counts as ``step.K``); it fails when the ends
contradict each other (the good end fails, the bad end passes) and is an error when the bisect cannot
decide: a CI job that reads only test cases sees a bisect that named nothing as not green.
Both files are written atomically into the bisect's own new directory (reports/results.py), every
registered secret (a store URL's password) masked.
"""

from __future__ import annotations

import html
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from model.bisect import Finding, Outcome, Step
from model.secret import scrub
from reports.results import write_atomic

#: The files a bisect writes in its directory, beside ``steps/``.
PAGE_NAME = "bisect.html"
JUNIT_NAME = "junit.xml"


def step_line(number: int, step: Step) -> str:
    """``step 3 (bisect) /opt/q3/qemu: bad: failed 3 of 3, as often as the bad end (3 of 3)``."""
    note = f" [{step.result.note}]" if step.result.note and step.call.value != "skipped" else ""
    return f"step {number} ({step.phase.value}) {step.candidate}: {step.call.value}: {step.why}{note}"


def result_lines(outcome: Outcome, what: str = "build") -> list[str]:
    """The last lines: ``first bad build: PATH`` and ``last good build: PATH`` when found, else the
    finding and its reason (``cannot decide: ...``)."""
    if outcome.finding is Finding.FOUND:
        return [outcome.reason, f"first bad {what}: {outcome.first_bad}", f"last good {what}: {outcome.last_good}"]
    lines = [f"{outcome.finding.value}: {outcome.reason}"]
    if outcome.suspects:
        lines.append(f"suspects: {', '.join(outcome.suspects)}")
    return lines


def junit_text(outcome: Outcome, rule: str, what: str = "build") -> str:
    """The JUnit document: one test suite ``vioconform-bisect`` with the one case of the module's docstring."""
    suite = ET.Element("testsuite", {"name": "vioconform-bisect", "tests": "1",
                                     "failures": str(int(outcome.finding in (Finding.GOOD_END_FAILS,
                                                                             Finding.BAD_END_PASSES))),
                                     "errors": str(int(outcome.finding is Finding.CANNOT_DECIDE))})
    case = ET.SubElement(suite, "testcase", {"name": f"bisect[{rule}]", "classname": "vioconform.bisect"})
    props = ET.SubElement(case, "properties")
    values = {"finding": outcome.finding.value, "steps": str(len(outcome.steps)),
              **({"first_bad": outcome.first_bad or "", "last_good": outcome.last_good or ""}
                 if outcome.finding is Finding.FOUND else {}),
              **({"suspects": ",".join(outcome.suspects)} if outcome.suspects else {}),
              **{f"step.{k}": f"{s.candidate}: {s.call.value} ({s.result.counts})"
                 for k, s in enumerate(outcome.steps, 1)}}
    for name, value in values.items():
        ET.SubElement(props, "property", {"name": name, "value": value})
    text = "\n".join([*(step_line(k, s) for k, s in enumerate(outcome.steps, 1)), *result_lines(outcome, what)])
    if outcome.finding in (Finding.GOOD_END_FAILS, Finding.BAD_END_PASSES):
        ET.SubElement(case, "failure", {"message": f"{outcome.finding.value}: {outcome.reason}"}).text = text
    elif outcome.finding is Finding.CANNOT_DECIDE:
        ET.SubElement(case, "error", {"message": f"cannot decide: {outcome.reason}"}).text = text
    ET.SubElement(case, "system-out").text = text
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


def page_html(outcome: Outcome, rule: str, command: Sequence[str], step_dirs: Sequence[str],
              what: str = "build") -> str:
    """One page: the finding, the command, then each step (its candidate, phase, call, counts, why and
    where its output is)."""
    e = html.escape
    rows = "\n".join(
        f"<tr><td>{k}</td><td>{e(s.phase.value)}</td><td><code>{e(s.candidate)}</code></td>"
        f"<td>{e(s.call.value)}</td><td>{e(s.result.counts)}</td><td>{e(s.why)}</td>"
        f"<td><a href=\"{e(d)}/\">{e(d)}</a></td></tr>"
        for k, (s, d) in enumerate(zip(outcome.steps, step_dirs, strict=True), 1))
    found = "".join(f"<p>{e(line)}</p>\n" for line in result_lines(outcome, what))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>bisect of {e(rule)}: {e(outcome.finding.value)}</title>
<style>body{{font-family:sans-serif;max-width:70em;margin:1em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #888;padding:.2em .5em;text-align:left;vertical-align:top}}</style></head>
<body><h1>bisect of {e(rule)}: {e(outcome.finding.value)}</h1>
{found}<p>command: <code>{e(" ".join(command))}</code></p>
<table><caption>every step, in the order it ran</caption>
<tr><th>step</th><th>phase</th><th>{e(what)}</th><th>call</th><th>counts</th><th>why</th><th>output</th></tr>
{rows}
</table></body></html>
"""


def write_records(out: Path, outcome: Outcome, rule: str, command: Sequence[str], step_dirs: Sequence[str],
                  what: str = "build") -> list[Path]:
    """Write the page and the JUnit file into ``out`` (atomically); the paths written."""
    return [write_atomic(out / PAGE_NAME, scrub(page_html(outcome, rule, command, step_dirs, what))),
            write_atomic(out / JUNIT_NAME, scrub(junit_text(outcome, rule, what)))]
