"""A series is the job, the fingerprint is what changed: recorded runs of one series on two QEMU
builds compare with ``--last 2``, the build change named first and the regression found; runs of
two series are never silently mixed; ``--series`` names a series or is refused at once; a store of
the previous schema is read, its runs in their default series, and upgraded by the first write;
two runs of one series stored at once are both stored."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import sqlalchemy as sa

from reports import store
from reports.store import Store, StoreError, compare, read_results_dir, trend
from tests.unit.suite_options import CONFTEST, errors
from tests.unit.test_compare_runs import TCQ_OFF
from tests.unit.test_store import QD, SERIES, SUITE, healthy, write_run

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"
#: Two QEMU builds of one nightly job: the host's QEMU, then a copy of a newer build behind a wrapper.
OLD_QEMU = {**SUITE, "series": "qemu_nightly", "qemu.version": "7.2.22", "qemu.emulator": "/usr/bin/qemu-system-x86_64"}
NEW_QEMU = {**OLD_QEMU, "qemu.version": "8.0.0", "qemu.emulator": "/opt/qemu-8.0/bin/qemu-system-x86_64"}


def test_two_runs_of_one_series_on_two_qemu_builds_compare_with_last_2(tmp_path: Path, store_url: str,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's "Done when": the build change first, then the regression the new build brought."""
    s = Store(store_url)
    s.import_dir(write_run(tmp_path, "20261120-020000", healthy(), suite=OLD_QEMU))
    s.import_dir(write_run(tmp_path, "20261121-020000", healthy(TCQ_OFF, outcome="failed"), suite=NEW_QEMU))
    s.close()
    junit = tmp_path / "compare.xml"
    assert compare.main(["--store", store_url, "--last", "2", "--junit", str(junit)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("run 1 -> 2: qemu.version 7.2.22 -> 8.0.0; qemu.emulator /usr/bin/qemu-system-x86_64 -> "
                        "/opt/qemu-8.0/bin/qemu-system-x86_64; unchanged: guest.kernel, fio_version"), lines
    assert lines[1].startswith("A (baseline): run 1,") and lines[3] == f"JUnit: {junit}"
    out = "\n".join(lines)
    assert f"Regressions (passed -> failed): 1\n  queue-depth[{QD}]: passed -> failed" in out
    assert "qd32_host_depth: 25.15 [24.9..25.3] n=4 requests -> 1 [1..1.1] n=4 requests" in out
    assert "across the last 2 runs of series qemu_nightly" in out and out.endswith("1 regression(s).")
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["series"] == "qemu_nightly" and props["changed"] == lines[0] and "mixed_series" not in props


def test_runs_of_two_series_are_compared_only_after_saying_so(tmp_path: Path, store_url: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path, "20261120-020000", healthy(), suite=OLD_QEMU)
    b = write_run(tmp_path, "20261121-020000", healthy(), suite={**OLD_QEMU, "series": "image_gate"})
    assert compare.main(["--store", store_url, str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("DIFFERENT SERIES: run 1 is of series qemu_nightly, run 2 of series image_gate; compared "
                          "as asked, but they are two jobs, not one job on two builds\n"
                          "run 1 -> 2: fingerprint unchanged"), out
    # --last never crosses: each is alone in its series
    assert compare.main(["--store", store_url, "--last", "2"]) == 2
    assert "run 2 has no earlier complete run of its series (image_gate)" in capsys.readouterr().err
    assert compare.main(["--store", store_url, "--last", "2", "--series", "nope"]) == 2
    assert "has no complete run of series nope; its series: image_gate, qemu_nightly" in capsys.readouterr().err


def test_the_trend_follows_the_series_across_builds_and_marks_the_change(tmp_path: Path, store_url: str,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    s = Store(store_url)
    for night, suite in ((20, OLD_QEMU), (21, OLD_QEMU), (22, NEW_QEMU), (23, NEW_QEMU)):
        s.import_dir(write_run(tmp_path, f"202611{night}-020000", healthy(), suite=suite))
    s.import_dir(write_run(tmp_path, "20261124-020000", healthy(), suite={**OLD_QEMU, "series": "image_gate"}))
    s.close()
    page = tmp_path / "trend.html"
    assert trend.main(["--store", store_url, "--series", "qemu_nightly", "-o", str(page)]) == 0
    assert "4 run(s) of series qemu_nightly, up to run 4" in capsys.readouterr().out
    text = page.read_text()
    changed = text.split('<ul id="changes">')[1].split("</ul>")[0]
    assert changed == ("<li>run 2 -&gt; 3: qemu.version 7.2.22 -&gt; 8.0.0; qemu.emulator /usr/bin/qemu-system-x86_64 "
                       "-&gt; /opt/qemu-8.0/bin/qemu-system-x86_64; unchanged: guest.kernel, fio_version</li>")
    assert text.index("What changed") < text.index("Verdicts")
    svgs = [ET.fromstring("<svg" + part.split("</svg>")[0] + "</svg>") for part in text.split("<svg")[1:]]
    legends = [["".join(t.itertext()).strip() for t in svg.iter(f"{SVG}text")] for svg in svgs]
    assert svgs and all("fingerprint changed" in texts for texts in legends)  # the grid and every metric
    # the newest run is of another series: shown alone, never mixed in
    assert trend.main(["--store", store_url, "-o", str(page)]) == 0
    assert "1 run(s) of series image_gate" in capsys.readouterr().out
    assert "nothing: the 1 run(s) share one fingerprint" in page.read_text()


def test_series_names_that_cannot_be_are_usage_errors_of_the_commands(store_url: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    for main, args in ((compare.main, ["--last", "2"]), (trend.main, [])):
        with pytest.raises(SystemExit) as e:
            main(["--store", store_url, *args, "--series", "qemu/nightly"])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert "--series: 'qemu/nightly': it holds '/'; a series name is letters, digits and underscores" in err
    with pytest.raises(SystemExit):
        compare.main(["--store", store_url, "1", "2", "--series", "qemu_nightly"])
    assert "--series picks the newest run of a series for --last N" in capsys.readouterr().err


def test_a_results_directory_with_a_bad_series_is_not_stored(tmp_path: Path, store_url: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    d = write_run(tmp_path, "20261120-020000", healthy(), suite={**SUITE, "series": "../../etc"})
    with pytest.raises(StoreError, match=r"its series '\.\./\.\./etc' cannot name a series \(it holds '\.', '/'"):
        read_results_dir(d)
    assert store.main(["--store", store_url, "import", str(d)]) == 2
    assert "nothing was stored" in capsys.readouterr().err
    s = Store(store_url)
    assert s.runs() == []
    s.close()
    assert read_results_dir(write_run(tmp_path, "old", healthy())).series == SERIES  # no property: the default


def _version_2_store(path: Path, *run_dirs: Path) -> None:
    """A store as vioconform wrote it before series (schema version 2), holding these runs."""
    s = Store(f"sqlite:///{path}")
    for d in run_dirs:
        s.import_dir(d)
    s.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX ix_runs_series")
        conn.execute("ALTER TABLE runs DROP COLUMN series")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")


def test_a_store_of_the_previous_schema_is_read_in_default_series_and_upgraded_by_a_write(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "v2.db"
    kernel = {**SUITE, "guest.kernel": "6.12.0"}
    _version_2_store(db, write_run(tmp_path, "20261120-020000", healthy()),
                     write_run(tmp_path, "20261121-020000", healthy(TCQ_OFF, outcome="failed"), suite=kernel),
                     write_run(tmp_path, "20261122-020000", healthy(), suite={**SUITE, "inject": "tcq-off"}))
    before = db.read_bytes()
    url = f"sqlite:///{db}"
    assert store.main(["--store", url, "list"]) == 0
    assert [line.split("\t")[5] for line in capsys.readouterr().out.splitlines()] == [
        SERIES, SERIES, "libvirt_local_virtio_blk_virtio_scsi_inject_tcq_off_lat5ms_embedded"]
    assert compare.main(["--store", url, "--last", "2", "2"]) == 1  # across the kernel change
    assert capsys.readouterr().out.startswith("run 1 -> 2: guest.kernel 6.1.0-28-cloud-amd64 -> 6.12.0")
    assert trend.main(["--store", url, "--run", "2", "-o", str(tmp_path / "t.html")]) == 0
    assert f"2 run(s) of series {SERIES}" in capsys.readouterr().out
    assert db.read_bytes() == before  # read, not altered
    new = write_run(tmp_path, "20261123-020000", healthy(), suite={**SUITE, "series": "qemu_nightly"})
    assert store.main(["--store", url, "import", str(new)]) == 0
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == (str(store.SCHEMA_VERSION),)
        assert conn.execute("SELECT id, series FROM runs ORDER BY id").fetchall() == [
            (1, SERIES), (2, SERIES), (3, "libvirt_local_virtio_blk_virtio_scsi_inject_tcq_off_lat5ms_embedded"),
            (4, "qemu_nightly")]
        assert "ix_runs_series" in {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}


_STORE_RUN = """
import sys
from pathlib import Path
from reports.store import store_results
print("ready", flush=True)
sys.stdin.readline()
print(store_results(sys.argv[1], Path(sys.argv[2]))[0], flush=True)
"""


def store_at_once(url: str, dirs: list[Path]) -> list[subprocess.CompletedProcess[str]]:
    """One process per results directory, each storing its run into ``url`` at the same instant (each
    waits, its imports done, for the line that starts them all); their results."""
    procs = [subprocess.Popen([sys.executable, "-c", _STORE_RUN, url, str(d)], cwd=ROOT, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for d in dirs]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline() == "ready\n"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        done = []
        for p in procs:
            out, _ = p.communicate(timeout=120)
            done.append(subprocess.CompletedProcess(p.args, p.returncode, out))
        return done
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()


def test_two_runs_of_one_series_stored_at_once_are_both_stored(tmp_path: Path, store_url: str) -> None:
    dirs = [write_run(tmp_path, f"2026112{n}-020000", healthy(), suite={**OLD_QEMU, "vioconform_run_id": f"run-{n}"})
            for n in (0, 1)]
    done = store_at_once(store_url, dirs)
    assert all(d.returncode == 0 for d in done), [d.stdout for d in done]
    assert sorted(int(d.stdout.split()[-1]) for d in done) == [1, 2]
    s = Store(store_url)
    try:
        assert [(r.series, r.run_uid) for r in s.series_runs("qemu_nightly")] == [("qemu_nightly", "run-0"),
                                                                                  ("qemu_nightly", "run-1")]
    finally:
        s.close()


def test_two_runs_of_one_series_stored_at_once_into_a_store_of_the_previous_schema(tmp_path: Path) -> None:
    """Both upgrade it: one does, the other finds it done; both runs stored."""
    db = tmp_path / "v2.db"
    _version_2_store(db, write_run(tmp_path, "20261119-020000", healthy()))
    dirs = [write_run(tmp_path, f"2026112{n}-020000", healthy(), suite={**SUITE, "vioconform_run_id": f"run-{n}"})
            for n in (0, 1)]
    done = store_at_once(f"sqlite:///{db}", dirs)
    assert all(d.returncode == 0 for d in done), [d.stdout for d in done]
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        assert {tuple(r) for r in conn.execute(sa.text("SELECT run_uid, series FROM runs"))} == {
            (None, SERIES), ("run-0", SERIES), ("run-1", SERIES)}
    engine.dispose()


SHOW_SERIES = '''
from fixtures.run_properties import run_properties
from fixtures.state import OPTIONS_KEY

def test_show(pytestconfig):
    print("SERIES", pytestconfig.stash[OPTIONS_KEY].series, run_properties(pytestconfig)["series"])
'''


def _series_of(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_show=SHOW_SERIES)
    return pytester.runpytest("-p", "no:cacheprovider", "-s", "--results-dir", str(pytester.path / "res"),
                              "--store", f"sqlite:///{pytester.path / 'x.db'}", *args)


def _shown(result: pytest.RunResult) -> list[str]:
    return next(line[line.index("SERIES"):] for line in result.stdout.lines if "SERIES" in line).split()[1:]


def test_the_run_records_its_series_given_or_derived(pytester: pytest.Pytester) -> None:
    assert _shown(_series_of(pytester)) == [SERIES, SERIES]
    assert _shown(_series_of(pytester, "--controllers", "virtio-blk,virtio-scsi", "--inject", "tcq-off")) == [
        "libvirt_local_virtio_blk_virtio_scsi_inject_tcq_off_lat5ms_embedded"] * 2
    assert _shown(_series_of(pytester, "--series", "qemu_nightly", "--emulator", "/usr/bin/qemu-system-x86_64")) == [
        "qemu_nightly"] * 2
    assert _shown(_series_of(pytester, "--hypervisor", "vsphere", "--vcenter",
                             "vsphere://admin@vc1.example.com/rhel9?datastore=ds1")) == [
        "vsphere_vc1_example_com_lsilogic_sas_pvscsi_lat5ms_rhel9"] * 2


@pytest.mark.parametrize("name", ["qemu/nightly", "a b", "x;drop", "7nights", "nächtlich", "n" * 121])
def test_a_series_name_that_cannot_be_is_a_usage_error_before_anything(pytester: pytest.Pytester, name: str) -> None:
    result = _series_of(pytester, "--series", name)
    assert result.ret == 4, errors(result)
    assert f"argument --series: {name!r}: it " in errors(result) and "INTERNALERROR" not in errors(result)
    assert not (pytester.path / "res").exists() and not (pytester.path / "x.db").exists()


def test_the_recorded_options_keep_what_the_default_series_is_made_of() -> None:
    """A run's options JSON (fixtures/options.py recorded) holds every input of the default series a
    store derives for a run without one, so the derivation from stored options is the run's own."""
    from fixtures.options import SuiteOptions
    from model.across.series import default_series, stored_series

    opts = SuiteOptions("libvirt", None, "qemu:///system", "auto", ("virtio-scsi", "virtio-blk"), "file", 2.5,
                        2.0, ("tcq-off",), (), None, 120.0, Path("r"), Path("r/j.xml"),
                        image=Path("/srv/images/debian-12.qcow2"))
    stored = {"hypervisor": "libvirt", "controllers": ",".join(opts.controllers), "inject": ",".join(opts.inject),
              **{k: v if isinstance(v, str) else json.dumps(v) for k, v in opts.recorded().items()
                 if k not in ("controllers", "inject")}}
    assert stored_series(stored, {}) == default_series(opts.series_inputs()) == opts.series == \
        "libvirt_local_virtio_blk_virtio_scsi_inject_tcq_off_file_debian_12"


def test_a_user_image_whose_name_is_not_ascii_is_not_the_embedded_guests_series() -> None:
    """``--image 日本語.raw`` (and ``--image embedded.qcow2``) name series of their own: ``--baseline
    last`` and ``compare --last`` never judge them against the embedded guest's runs."""
    from fixtures.options import SuiteOptions

    def series(image: Path | None) -> str:
        return SuiteOptions("libvirt", None, "qemu:///system", "auto", ("virtio-scsi",), "latency", 5.0, 2.0,
                            (), (), None, 120.0, Path("r"), Path("r/j.xml"), image=image).series

    names = {series(None), series(Path("/srv/日本語.raw")), series(Path("/srv/中文.raw")),
             series(Path("/srv/embedded.qcow2"))}
    assert len(names) == 4, names
