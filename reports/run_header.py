"""The report's first lines: when the run started, how long it took, its exit code, where it ran, and
links to the rest of its results directory (the JUnit file, ``raw/``, ``logs/``), so that a reader
who opens report.html alone finds the run's record without a shell.

Example::

    RunHeader(started_s=1796618941.0, duration_s=396.5, exit_code=0,
              exit_meaning="every rule passed (skips allowed)", hosts=("ci7", "libvirt: local"),
              links=(("junit.xml", "junit.xml"), ("raw/", "raw/"), ("logs/", "logs/")))
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass
from pathlib import Path

#: The results directory's parts a report links to, when the run wrote them (beside report.html).
LINKED = ("junit.xml", "raw/", "logs/")


@dataclass(frozen=True)
class RunHeader:
    """What the first screen says of the run. ``started_s``: the Unix time it started; ``hosts``:
    where it ran, in words (this machine, the libvirt hosts or the vCenter); ``links``: (text,
    href relative to report.html)."""

    started_s: float
    duration_s: float
    exit_code: int
    exit_meaning: str
    hosts: tuple[str, ...]
    links: tuple[tuple[str, str], ...] = ()


def links_in(results_dir: Path) -> tuple[tuple[str, str], ...]:
    """The parts of ``LINKED`` the results directory holds (report.html sits in it)."""
    return tuple((name, name) for name in LINKED if (results_dir / name.rstrip("/")).exists())


def duration_text(seconds: float) -> str:
    """``396.5`` -> "6 min 36 s"; under a minute "42 s"; from an hour "1 h 02 min"."""
    s = round(max(seconds, 0.0))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def started_text(started_s: float) -> str:
    """The start in UTC, to the second: "2026-12-07 04:29:01 UTC" (one clock for every reader)."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started_s))


def header_html(h: RunHeader | None) -> str:
    """The run's facts as a definition list (empty without a header)."""
    if h is None:
        return ""
    esc = html.escape
    items = [("started", started_text(h.started_s)), ("took", duration_text(h.duration_s)),
             ("exit code", f"{h.exit_code} ({h.exit_meaning})" if h.exit_meaning else str(h.exit_code)),
             ("ran on", ", ".join(h.hosts))]
    out = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items if v)
    if h.links:
        out += "<dt>files</dt><dd>" + " · ".join(f'<a href="{esc(href)}">{esc(text)}</a>' for text, href in h.links)
        out += "</dd>"
    return f'<dl id="run">{out}</dl>'
