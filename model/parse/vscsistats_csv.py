"""Parse ESXi ``vscsiStats -p <histo> -c`` (CSV) output into HistogramSets, one per virtual disk.

This is the vSphere side of the exact host-observed depth: vscsiStats counts, per virtual
disk, the outstanding I/Os at each arrival, I/O lengths, seek distances, latency and
interarrival time. Its counts accumulate from ``-s`` until ``-r``/``-x``: subtract two
snapshots with HistogramSet.minus.

Accepted title lines (the first is the CSV form, the second the plain-text form)::

    Histogram: IO lengths of commands,virtual machine worldGroupID,2099979,virtual disk handleID,8194 (scsi0:0)
    Histogram: IO lengths of commands for virtual machine worldGroupID : 2099979,
        virtual disk handleID : 8194 (scsi0:0) {      (one line)

Each is followed by ``min,N`` ``max,N`` ``mean,N`` ``count,N``, ``Frequency,Histogram Bucket Limit``
and ``<count>,<limit>`` rows, the last repeating the previous limit for the overflow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from model.errors import ParseError
from model.parse.histogram import TITLE_TO_KIND, Histogram, HistogramSet

_TITLE = re.compile(
    r"^Histogram:\s*(?P<title>.+?)\s*(?:(?:"
    r",\s*virtual machine worldGroupID\s*,\s*(?P<w>\d+)\s*,\s*virtual disk handleID\s*,\s*(?P<h>\d+)"
    r"|\s+for virtual machine worldGroupID\s*:\s*(?P<w2>\d+)\s*,\s*virtual disk handleID\s*:\s*(?P<h2>\d+))"
    r"\s*(?:\((?P<label>[^)]*)\))?)?\s*\{?\s*$")
_SUMMARY_KEYS = ("min", "max", "mean", "count")
_HEADER = "frequency,histogram bucket limit"


@dataclass
class _Section:
    """One histogram being read: its title line and the lines under it."""

    title: str
    disk: tuple[int | None, int | None, str]
    lineno: int
    summary: dict[str, float] = field(default_factory=dict)
    rows: list[tuple[int, int]] = field(default_factory=list)
    header_seen: bool = False


def _number(text: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ParseError(f"{where}: {text!r} is not a number") from None


def _to_histogram(sec: _Section, source: str) -> Histogram | None:
    where = f"{source} line {sec.lineno} ({sec.title!r})"
    kind_dir = TITLE_TO_KIND.get(sec.title)
    if kind_dir is None:
        return None
    missing = [k for k in _SUMMARY_KEYS if k not in sec.summary]
    if missing or not sec.header_seen:
        raise ParseError(f"{where}: incomplete histogram (missing {missing or 'the Frequency header'}); "
                         "was the output cut short?")
    if len(sec.rows) < 2 or sec.rows[-1][1] != sec.rows[-2][1]:
        raise ParseError(f"{where}: the last row must repeat the previous bucket limit (the overflow row); "
                         f"got rows {sec.rows[-3:]}")
    limits = tuple(limit for _, limit in sec.rows[:-1])
    counts = tuple(n for n, _ in sec.rows)
    s = sec.summary
    empty = s["count"] == 0  # vscsiStats's min/max of an empty histogram mean nothing
    try:
        return Histogram(kind_dir[0], kind_dir[1], limits, counts, None if empty else int(s["min"]),
                         None if empty else int(s["max"]), s["mean"], int(s["count"]))
    except ParseError as exc:
        raise ParseError(f"{where}: {exc}") from None


def parse_vscsistats_csv(text: str, source: str = "vscsiStats output", strict: bool = False) -> list[HistogramSet]:
    """Every histogram in ``text``, grouped by (worldGroupID, handleID, disk label), in input order.

    Histograms with a title this model does not know are skipped, unless ``strict``
    (then they are a ParseError naming the title). Blank lines and lines before the first
    ``Histogram:`` are ignored. The plain-text ``{ ... }`` form is not parsed, only its title.
    """
    sections: list[_Section] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("Histogram:"):
            m = _TITLE.match(line)
            if m is None:
                raise ParseError(f"{source} line {lineno}: unrecognised title line {line!r}")
            wgid, hid = m.group("w") or m.group("w2"), m.group("h") or m.group("h2")
            disk = (int(wgid) if wgid else None, int(hid) if hid else None, (m.group("label") or "").strip())
            sections.append(_Section(m.group("title"), disk, lineno))
            continue
        if not sections:
            continue
        sec = sections[-1]
        where = f"{source} line {lineno}"
        if line.lower().replace(" ,", ",") == _HEADER:
            sec.header_seen = True
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2:
            raise ParseError(f"{where}: expected two comma-separated fields, got {line!r}")
        if not sec.header_seen:
            if parts[0] not in _SUMMARY_KEYS:
                raise ParseError(f"{where}: expected one of {_SUMMARY_KEYS} before the Frequency header, got {line!r}")
            sec.summary[parts[0]] = _number(parts[1], f"{where} {parts[0]}")
            continue
        count, limit = _number(parts[0], f"{where} frequency"), _number(parts[1], f"{where} bucket limit")
        sec.rows.append((int(count), int(limit)))

    sets: dict[tuple[int | None, int | None, str], list[Histogram]] = {}
    for sec in sections:
        hist = _to_histogram(sec, source)
        if hist is None:
            if strict:
                raise ParseError(f"{source} line {sec.lineno}: unknown histogram title {sec.title!r}; "
                                 f"known titles are {sorted(TITLE_TO_KIND)}")
            continue
        sets.setdefault(sec.disk, []).append(hist)
    if not sets:
        raise ParseError(f"{source}: no vscsiStats histograms found (expected lines starting 'Histogram:'; "
                         f"was vscsiStats run with -p and -c, and was collection started with -s?)")
    return [HistogramSet(tuple(hists), w, h, label) for (w, h, label), hists in sets.items()]
