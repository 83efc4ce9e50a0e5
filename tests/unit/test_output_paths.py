"""Every file the suite writes is a regular file or a new one: a device, a FIFO, a directory, the
store's database or another file of the same run is never written over (reports/results.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from reports.results import (
    NotARegularFile,
    OutputPathError,
    ResultsDirError,
    check_outputs,
    open_results,
    write_atomic,
)
from reports.store import compare, sqlite_file, trend
from tests.unit.fifo_watch import fifo_readers
from tests.unit.suite_options import run_suite_options

pytest_plugins = ["pytester"]

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")


def null_device(where: Path) -> Path:
    """A copy of /dev/null (character device 1:3): what a hostile --junit-xml points at."""
    os.mknod(where, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return where


def fifo(where: Path) -> Path:
    os.mkfifo(where)
    return where


def special_files(tmp_path: Path) -> list[Path]:
    made = [fifo(tmp_path / "pipe"), tmp_path / "adir"]
    made[1].mkdir()
    if os.geteuid() == 0:
        made.append(null_device(tmp_path / "null"))
    return made


def is_still(path: Path, kind: str) -> bool:
    test = {"fifo": stat.S_ISFIFO, "chr": stat.S_ISCHR, "dir": stat.S_ISDIR}[kind]
    return test(os.lstat(path).st_mode)


def test_write_atomic_never_replaces_a_device_a_fifo_or_a_directory(tmp_path: Path) -> None:
    pipe = fifo(tmp_path / "pipe")
    with pytest.raises(NotARegularFile, match=r"a FIFO \(named pipe\), not a regular file: not replaced"):
        write_atomic(pipe, "<testsuites/>")
    assert is_still(pipe, "fifo")
    with pytest.raises(OSError, match="a directory"):
        write_atomic(tmp_path, "x")
    if os.geteuid() == 0:
        null = null_device(tmp_path / "null")
        with pytest.raises(NotARegularFile, match="a character device"):
            write_atomic(null, "<testsuites/>")
        assert is_still(null, "chr")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["pipe"] + (["null"] if os.geteuid() == 0 else []))
    # a regular file, and a new one, are written (a symbolic link to a device is not)
    (tmp_path / "old.xml").write_text("old")
    assert write_atomic(tmp_path / "old.xml", "new").read_text() == "new"
    assert write_atomic(tmp_path / "new.xml", "new").read_text() == "new"
    (tmp_path / "link").symlink_to(pipe)
    with pytest.raises(NotARegularFile):
        write_atomic(tmp_path / "link", "x")


@needs_root
def test_junit_xml_on_a_device_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    null = null_device(tmp_path / "null")
    with pytest.raises(ResultsDirError, match=r"--junit-xml .*null is a character device, not a regular file"):
        open_results(tmp_path / "res", null)
    assert is_still(null, "chr") and not (tmp_path / "res").exists()


def test_outputs_on_one_file_or_on_an_input_are_refused(tmp_path: Path) -> None:
    db = tmp_path / "vioconform.db"
    db.write_bytes(b"SQLite format 3\0")
    with pytest.raises(OutputPathError, match=r"--junit-xml .*vioconform.db is also --store"):
        check_outputs([("--junit-xml", db), ("--store", db)])
    with pytest.raises(OutputPathError, match=r"--junit-xml .*j.xml is also --save-baseline"):
        check_outputs([("--junit-xml", tmp_path / "j.xml"), ("--save-baseline", tmp_path / "sub" / ".." / "j.xml")])
    image = tmp_path / "disk.qcow2"
    image.write_bytes(b"QFI\xfb")
    os.link(image, tmp_path / "hardlink.qcow2")
    with pytest.raises(OutputPathError, match=r"--junit-xml .*hardlink.qcow2 is also the input --image"):
        check_outputs([("--junit-xml", tmp_path / "hardlink.qcow2")], [("--image", image)])
    check_outputs([("--junit-xml", tmp_path / "j.xml"), ("--store", db), ("--save-baseline", None)],
                  [("--image", image), ("--hosts", None)])


def test_the_store_file_of_a_url() -> None:
    assert sqlite_file("sqlite:///results/vioconform.db") == Path("results/vioconform.db")
    assert sqlite_file("sqlite:////abs/x.db") == Path("/abs/x.db")
    assert sqlite_file("sqlite://") is None and sqlite_file("sqlite:///:memory:") is None
    assert sqlite_file("postgresql://u@h/db") is None and sqlite_file("not a url") is None


def test_the_suite_refuses_a_fifo_a_directory_or_the_store_as_its_outputs(pytester: pytest.Pytester) -> None:
    for special in special_files(pytester.path):
        kind = "fifo" if special.name == "pipe" else "dir" if special.name == "adir" else "chr"
        result = run_suite_options(pytester, "--junit-xml", str(special))
        assert result.ret == 4  # (pytest itself refuses a directory: "--junitxml must be a filename")
        assert kind == "dir" or "not a regular file" in result.stderr.str(), result.stderr.str()
        assert is_still(special, kind)
        with fifo_readers([pytester.path / "pipe"], grace_s=10.0):  # a read of the FIFO fails, never hangs
            result = run_suite_options(pytester, "--save-baseline", str(special), "--store", "none")
        assert result.ret == 4 and "--save-baseline" in result.stderr.str(), result.stderr.str()
        assert is_still(special, kind)
    db = pytester.path / "runs.db"
    db.write_bytes(b"seven runs")
    result = run_suite_options(pytester, "--store", f"sqlite:///{db}", "--junit-xml", str(db))
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--junit-xml *runs.db is also --store*"])
    result = run_suite_options(pytester, "--store", f"sqlite:///{pytester.path / 'res' / 'report.html'}")
    assert result.ret == 4, result.stdout.str()
    result.stderr.fnmatch_lines(["*--store *report.html is also the results directory's report.html*"])
    assert db.read_bytes() == b"seven runs"


def test_trend_and_compare_refuse_such_outputs_with_the_usage_code(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'v.db'}"
    for special in special_files(tmp_path):
        for main, args in ((trend.main, ["-o", str(special)]), (compare.main, ["7", "7", "--junit", str(special)])):
            with pytest.raises(SystemExit) as e:
                main(["--store", url, *args])
            assert e.value.code == 2  # compare's regression code is 1: a usage error is never one
            assert "not a regular file" in capsys.readouterr().err
    store = tmp_path / "kept.db"
    store.write_bytes(b"runs")
    for main, args in ((trend.main, ["-o", str(store)]), (compare.main, ["1", "2", "--junit", str(store)])):
        with pytest.raises(SystemExit) as e:
            main(["--store", f"sqlite:///{store}", *args])
        assert e.value.code == 2 and "is also --store" in capsys.readouterr().err
    assert store.read_bytes() == b"runs" and not (tmp_path / "v.db").exists()  # refused before the store opened


@pytest.mark.parametrize(("args", "said"), [
    (["--alpha", "5"], "--alpha 5 is not a significance level; give one between 0 and 1"),
    (["--alpha", "0"], "--alpha 0 is not a significance level"),
    (["--alpha", "nan"], "--alpha nan is not a significance level"),
    (["--min-effect", "-3"], "--min-effect -3 is not a relative change; give 0 or more"),
    (["--min-effect", "inf"], "--min-effect inf is not a relative change"),
])
def test_compare_refuses_statistics_that_mean_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      args: list[str], said: str) -> None:
    with pytest.raises(SystemExit) as e:
        compare.main(["--store", f"sqlite:///{tmp_path / 'v.db'}", "1", "2", *args])
    assert e.value.code == 2 and said in capsys.readouterr().err
    assert not (tmp_path / "v.db").exists()


def test_compare_never_reads_a_fifo_as_a_junit_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pipe = fifo(tmp_path / "junit.xml")
    with fifo_readers([pipe]) as opened:
        assert compare.main(["--tested", str(pipe), str(pipe)]) == 2
    assert opened == [] and "it is a FIFO (named pipe), not a JUnit file" in capsys.readouterr().err
