"""Parsing vscsiStats -c output: the real title spellings, both header forms, grouping, errors.

The input is written here to the format of real ``vscsiStats -p all -c`` output (no ESXi on
the test machines); its numbers are made up but consistent.
"""

from __future__ import annotations

import pytest

from model.errors import ParseError
from model.parse.histogram import HistogramKind
from model.parse.vscsistats_csv import parse_vscsistats_csv

OIO_ROWS = "551,1\n44,2\n47,4\n23,6\n13,8\n40,12\n30,16\n9,20\n8,24\n8,28\n8,32\n12,64\n0,64\n"
LAT_ROWS = "0,1\n0,10\n3,100\n4,500\n1,1000\n0,5000\n0,15000\n0,30000\n0,50000\n0,100000\n0,100000\n"


def section(title: str, disk: str, summary: str, rows: str) -> str:
    return f"Histogram: {title}{disk}\n{summary}Frequency,Histogram Bucket Limit\n{rows}"


CSV_DISK = ",virtual machine worldGroupID,2099979,virtual disk handleID,8194 (scsi0:0)"
TEXT_DISK = " for virtual machine worldGroupID : 2099979, virtual disk handleID : 8195 (scsi0:1) {"

SAMPLE = (
    "Printing histograms...\n"
    + section("number of outstanding IOs when a new IO is issued", CSV_DISK,
              "min,1\nmax,39\nmean,3\ncount,793\n", OIO_ROWS)
    + "\n"
    + section("latency of Read IOs in Microseconds (us)", CSV_DISK, "min,40\nmax,1709\nmean,178\ncount,8\n", LAT_ROWS)
    + section("distance (in LBNs) between each command from the closest of previous 16", CSV_DISK,
              "min,0\nmax,0\nmean,0\ncount,0\n", "0,-1\n0,0\n0,1\n0,1\n")
    + section("some future histogram", CSV_DISK, "min,0\nmax,0\nmean,0\ncount,0\n", "0,1\n0,1\n")
    + section("latency of Read IOs in Microseconds (us)", TEXT_DISK, "min,40\nmax,1709\nmean,178\ncount,8\n",
              LAT_ROWS)
)


def test_parse_groups_per_disk() -> None:
    first, second = parse_vscsistats_csv(SAMPLE)
    assert (first.world_group_id, first.handle_id, first.disk_label) == (2099979, 8194, "scsi0:0")
    assert (second.handle_id, second.disk_label) == (8195, "scsi0:1")
    oio = first.get(HistogramKind.OUTSTANDING_IOS)
    assert oio.count == 793 and oio.counts[0] == 551 and oio.counts[-1] == 0
    assert oio.bucket_limits == HistogramKind.OUTSTANDING_IOS.default_limits
    assert (oio.min, oio.max, oio.mean) == (1, 39, 3)
    assert oio.percentile(50) == 1  # the Solaris TCQ-off signature would look like this
    lat = second.get(HistogramKind.LATENCY_US, "read")
    assert lat.count == 8 and lat.percentile(100) == 1000
    empty = first.get(HistogramKind.SEEK_DISTANCE_PREV16)
    assert empty.count == 0 and empty.min is None  # min/max of an empty histogram mean nothing


def test_unknown_titles_skipped_unless_strict() -> None:
    assert len(parse_vscsistats_csv(SAMPLE)[0].histograms) == 3
    with pytest.raises(ParseError, match=r"line \d+: unknown histogram title 'some future histogram'"):
        parse_vscsistats_csv(SAMPLE, strict=True)


def test_errors_name_the_line() -> None:
    good = section("latency of IOs in Microseconds (us)", CSV_DISK, "min,40\nmax,1709\nmean,178\ncount,8\n", LAT_ROWS)
    with pytest.raises(ParseError, match=r"out.csv: no vscsiStats histograms found"):
        parse_vscsistats_csv("vscsiStats: no stats collected\n", source="out.csv")
    with pytest.raises(ParseError, match=r"line 1 .*last row must repeat the previous bucket limit"):
        parse_vscsistats_csv(good.rstrip("\n").rsplit("\n", 1)[0])
    with pytest.raises(ParseError, match=r"line 1 .*counts sum to 7 but count is 8"):
        parse_vscsistats_csv(good.replace("3,100", "2,100"))
    with pytest.raises(ParseError, match=r"line 4 mean: 'abc' is not a number"):
        parse_vscsistats_csv(good.replace("mean,178", "mean,abc"))
    with pytest.raises(ParseError, match=r"line 2: expected one of .*min.* got 'minimum,40'"):
        parse_vscsistats_csv(good.replace("min,40", "minimum,40"))
    with pytest.raises(ParseError, match=r"incomplete histogram \(missing \['count'\]\)"):
        parse_vscsistats_csv(good.replace("count,8\n", ""))
    with pytest.raises(ParseError, match=r"line 7: expected two comma-separated fields"):
        parse_vscsistats_csv(good.replace("0,1\n", "0;1\n", 1))
