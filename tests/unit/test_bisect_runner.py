"""python -m reports.bisect without a guest: its input checked before any step, the suite's JUnit file
read as a step's verdict, and whole bisects driven through a stand-in bundle whose replay runs the
"build" it is given (a script whose exit code and output are the verdict a real replay would give),
over a builds file and over the commits of a git repository."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from model.bisect import Verdict
from model.secret import register_url
from reports.bisect import main, read_row, recorded_command
from reports.bisect_steps import SuiteStep, candidate_option, replay_counts, suite_verdict

ROOT = Path(__file__).resolve().parents[2]
#: The stand-in replay: runs the --qemu it is given with the --repeats it got; exit code and output are theirs.
REPLAY = """#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in --qemu) q=$2; shift 2;; --repeats) n=$2; shift 2;; --out) o=$2; shift 2;;
*) echo "unknown $1"; exit 2;; esac; done
mkdir "$o" || exit 125
exec "$q" "${n:-1}"
"""
GOOD = '#!/bin/sh\necho "0 of $1 repeats failed"\nexit 0\n'
BAD = '#!/bin/sh\necho "$1 of $1 repeats failed"\nexit 1\n'
UNTESTABLE = "#!/bin/sh\necho 'the guest did not boot'\nexit 125\n"
#: Fails one repeat in every run: less often than BAD, so never a culprit.
FLAKY = '#!/bin/sh\necho "1 of $1 repeats failed"\nexit 1\n'


def script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    script(tmp_path / "bundle" / "replay", REPLAY)
    return tmp_path / "bundle"


def row_of(tmp_path: Path, *kinds: str) -> Path:
    paths = [script(tmp_path / "builds" / f"qemu-{i}", kind) for i, kind in enumerate(kinds)]
    listing = tmp_path / "builds.txt"
    listing.write_text("# good first\n" + "".join(f"{p}\n" for p in paths) + "\n")
    return listing


def bisect_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reports.bisect", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)


def test_a_bundle_bisect_names_the_first_bad_build_and_writes_its_records(tmp_path: Path, bundle: Path) -> None:
    builds = row_of(tmp_path, GOOD, GOOD, GOOD, BAD, BAD, BAD)
    out = tmp_path / "out"
    done = bisect_cli("--builds", str(builds), "--rule", "queue_depth", "--bundle", str(bundle), "--repeats", "3",
                      "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    first_bad, last_good = tmp_path / "builds" / "qemu-3", tmp_path / "builds" / "qemu-2"
    assert f"first bad build: {first_bad}" in lines and f"last good build: {last_good}" in lines
    assert f"step 1 (bad end) {tmp_path / 'builds' / 'qemu-5'}: bad: failed 3 of 3: the bar a step must reach to be " \
        "bad" in done.stdout
    assert f"step 2 (good end) {tmp_path / 'builds' / 'qemu-0'}: good: passed: 0 of 3 repeats failed" in done.stdout
    case = ET.parse(out / "junit.xml").getroot().find("testcase")
    assert case is not None and case.get("name") == "bisect[queue-depth]" and case.find("failure") is None
    props = {p.get("name", ""): p.get("value", "") for p in case.iterfind("properties/property")}
    assert props["first_bad"] == str(first_bad) and props["finding"] == "found"
    page = (out / "bisect.html").read_text()
    assert f"first bad build: {first_bad}" in page and "<td>confirm</td>" in page
    steps = sorted(p.name for p in (out / "steps").iterdir())
    assert len(steps) == int(props["steps"]) and all((out / "steps" / s / "replay").is_dir() for s in steps)


def test_a_skip_beside_the_culprit_cannot_decide_and_says_why(tmp_path: Path, bundle: Path) -> None:
    builds = row_of(tmp_path, GOOD, GOOD, UNTESTABLE, BAD, BAD)
    done = bisect_cli("--builds", str(builds), "--rule", "limits", "--bundle", str(bundle), "--out", str(tmp_path / "o"))
    assert done.returncode == 3, done.stdout + done.stderr
    b = tmp_path / "builds"
    assert f"suspects: {b / 'qemu-2'}, {b / 'qemu-3'}" in done.stdout
    assert "the replay exited 125 (cannot test" in done.stdout
    case = ET.parse(tmp_path / "o" / "junit.xml").getroot().find("testcase")
    assert case is not None and case.find("error") is not None


def test_a_good_end_that_fails_exits_1(tmp_path: Path, bundle: Path) -> None:
    done = bisect_cli("--builds", str(row_of(tmp_path, BAD, GOOD, BAD)), "--rule", "limits", "--bundle", str(bundle),
                      "--out", str(tmp_path / "o"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "good end fails: the good end" in done.stdout and "first bad build" not in done.stdout


@pytest.mark.parametrize(("kinds", "code", "said"), [
    ((GOOD, GOOD, FLAKY, GOOD, BAD, BAD), 0, "first bad build: {b}/qemu-4"),
    ((GOOD, GOOD, GOOD, FLAKY, BAD, BAD), 3, "suspects: {b}/qemu-3, {b}/qemu-4"),
])
def test_a_flaky_build_is_gone_around_or_left_open(tmp_path: Path, bundle: Path, kinds: tuple[str, ...], code: int,
                                                   said: str) -> None:
    done = bisect_cli("--builds", str(row_of(tmp_path, *kinds)), "--rule", "queue-depth", "--bundle", str(bundle),
                      "--repeats", "3", "--out", str(tmp_path / "o"))
    assert done.returncode == code, done.stdout + done.stderr
    assert said.format(b=tmp_path / "builds") in done.stdout.splitlines()
    assert "flaky: failed 1 of 3, less often than the bad end (3 of 3): flaky, gone around" in done.stdout


def test_a_kernels_file_takes_package_files_and_versions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deb = tmp_path / "linux-image-6.1.0-47-amd64_6.1.170-3_amd64.deb"
    deb.write_bytes(b"!<arch>\n")
    listing = tmp_path / "k.txt"
    listing.write_text(f"{deb}\n6.12\n")
    assert read_row(listing, "--kernels", kernels=True) == [str(deb), "6.12"]
    listing.write_text(f"{tmp_path / 'missing.deb'}\n6.12\n")
    assert main(["--kernels", str(listing), "--rule", "limits"]) == 2
    assert f"--kernels {listing} line 1: {tmp_path / 'missing.deb'}: no such package file" in capsys.readouterr().err


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_a_source_tree_is_bisected_commit_by_commit_and_a_broken_build_is_skipped(tmp_path: Path,
                                                                                  bundle: Path) -> None:
    repo = tmp_path / "src"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.org")
    git(repo, "config", "user.name", "t")
    commits = []
    for n, (kind, builds) in enumerate([(GOOD, True), (GOOD, True), (GOOD, False), (GOOD, True), (BAD, True),
                                        (BAD, True)]):
        script(repo / "qemu.sh", kind)
        (repo / "Makefile.sh").write_text("mkdir -p build && cp qemu.sh build/qemu-system-x86_64\n" if builds
                                          else "echo 'syntax error'; exit 2\n")
        git(repo, "add", "-A")
        git(repo, "commit", "--allow-empty", "-qm", f"commit {n}")
        commits.append(git(repo, "rev-parse", "HEAD"))
    done = bisect_cli("--git", str(repo), "--good", commits[0], "--bad", "main", "--build", "sh Makefile.sh",
                      "--rule", "limits", "--bundle", str(bundle), "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"first bad commit: {commits[4]}" in done.stdout and f"last good commit: {commits[3]}" in done.stdout
    assert git(repo, "worktree", "list").count("\n") == 0  # every step's worktree removed
    skipped = [line for line in done.stdout.splitlines() if ": skipped: " in line]
    assert skipped and all(commits[2] in line and "the build exited 2" in line for line in skipped), skipped


@pytest.mark.parametrize(("args", "said"), [
    (("--rule", "no_such"), "--rule no_such: no such rule; the rules are queue-depth,"),
    (("--rule", "limits", "--", "-k", "io_size"), "-k after --: the bisect sets -k, --emulator"),
    (("--rule", "limits", "--", "--store=sqlite:///x.db"), "--store=sqlite:///x.db after --"),
    (("--rule", "limits", "--repeats", "0"), "--repeats 0: give 1 or more"),
    (("--rule", "limits", "--good", "HEAD"), "--good, --bad and --build go with --git REPO"),
])
def test_bad_options_are_refused_before_any_step(tmp_path: Path, args: tuple[str, ...], said: str) -> None:
    builds = row_of(tmp_path, GOOD, BAD)
    out = tmp_path / "o"
    assert main(["--builds", str(builds), "--out", str(out), *args]) == 2
    assert not out.exists()


def test_bad_rows_are_refused_with_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    listing = tmp_path / "b.txt"
    listing.write_text("/usr/bin/true\n/nonexistent/qemu\n")
    assert main(["--builds", str(listing), "--rule", "limits", "--out", str(tmp_path / "o")]) == 2
    assert f"--builds {listing} line 2: /nonexistent/qemu: not an executable file" in capsys.readouterr().err
    listing.write_text("/usr/bin/true\n")
    assert main(["--builds", str(listing), "--rule", "limits"]) == 2
    assert "lists 1 candidate(s); a bisect needs two or more" in capsys.readouterr().err
    listing.write_text("/usr/bin/true\n/usr/bin/true\n")
    assert main(["--builds", str(listing), "--rule", "limits"]) == 2
    assert "lists /usr/bin/true more than once" in capsys.readouterr().err
    assert main(["--builds", str(tmp_path / "missing"), "--rule", "limits"]) == 2
    assert "no such file; give a file listing one QEMU build a line" in capsys.readouterr().err


def test_a_bundle_without_replay_and_a_bundle_with_kernels_are_refused(tmp_path: Path, bundle: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    builds = row_of(tmp_path, GOOD, BAD)
    assert main(["--builds", str(builds), "--rule", "limits", "--bundle", str(tmp_path)]) == 2
    assert "no executable replay in it" in capsys.readouterr().err
    kernels = tmp_path / "k.txt"
    kernels.write_text("6.1\n6.12\n")
    assert main(["--kernels", str(kernels), "--rule", "limits", "--bundle", str(bundle)]) == 2
    assert "--bundle replays one guest kernel" in capsys.readouterr().err


CASE = ('<testcase classname="vioconform.queue-depth" name="queue-depth[libvirt:virtio-scsi:latency5ms]">'
        '<properties><property name="repeats" value="3"/><property name="repeats_passed" value="{passed}"/>'
        '</properties>{body}</testcase>')


def junit(tmp_path: Path, *cases: str) -> Path:
    path = tmp_path / "junit.xml"
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite name="vioconform">{"".join(cases)}'
                    '<testcase classname="vioconform.limits" name="limits[libvirt:virtio-scsi:latency5ms]">'
                    '<failure message="FAIL: other rule"/></testcase></testsuite></testsuites>')
    return path


def test_the_suite_steps_verdict_is_its_rules_cases_with_their_repeats(tmp_path: Path) -> None:
    failed = suite_verdict(junit(tmp_path, CASE.format(passed=1, body='<failure message="FAIL: x"/>')),
                           "queue-depth", 1)
    assert (failed.verdict, failed.failed, failed.repeats) == (Verdict.FAIL, 2, 3)
    passed = suite_verdict(junit(tmp_path, CASE.format(passed=3, body="")), "queue-depth", 1)
    assert (passed.verdict, passed.failed, passed.repeats) == (Verdict.PASS, 0, 3)
    errored = suite_verdict(junit(tmp_path, CASE.format(passed=0, body='<error message="guest did not boot"/>')),
                            "queue-depth", 10)
    assert errored.verdict is Verdict.SKIP and errored.note == "queue-depth reached no verdict (error; the suite exited 10)"
    missing = suite_verdict(tmp_path / "nothing.xml", "queue-depth", 4)
    assert missing.verdict is Verdict.SKIP and missing.note.startswith("the suite exited 4 and wrote no readable JUnit")
    # limits: no repeats properties (it reads settings once): its one verdict counts
    one = suite_verdict(junit(tmp_path), "limits", 1)
    assert (one.verdict, one.failed, one.repeats) == (Verdict.FAIL, 1, 1)


def test_the_suite_step_runs_the_rule_on_the_candidate_in_its_own_series() -> None:
    stored = SuiteStep("queue-depth", ("--controllers", "virtio-scsi"), 3, "sqlite:///s.db", "bisect_queue_depth")
    cmd = stored.command("/opt/q/qemu", Path("/r"))
    assert cmd[1:] == ["-m", "pytest", "suites", "-p", "no:cacheprovider", "-k", "queue_depth", "--emulator",
                       "/opt/q/qemu", "--results-dir", "/r", "--store", "sqlite:///s.db", "--series",
                       "bisect_queue_depth", "--repeats", "3", "--controllers", "virtio-scsi"]
    assert "--store" in (c := SuiteStep("limits").command("/q", Path("/r"))) and c[c.index("--store") + 1] == "none"
    assert candidate_option("/k/linux-image-6.12.deb", kernels=True) == ["--guest-kernel-deb", "/k/linux-image-6.12.deb"]
    assert candidate_option("6.12", kernels=True) == ["--guest-kernel", "6.12"]


def test_a_replays_counts_are_read_from_what_it_says() -> None:
    assert replay_counts("repeat 1 ...\n2 of 5 repeats failed\n", 1) == (2, 5)
    # the bundle's replay's own last line (replay/main.py)
    assert replay_counts("replay: 1 of 3 repeat(s) FAILED: PASSED (exit 0)\n", 0) == (1, 3)
    assert replay_counts("FAILED\n", 1) == (1, 1)
    assert replay_counts("PASSED\n", 0) == (0, 1)


@pytest.mark.parametrize(("kind", "code", "said"), [(GOOD, 0, "pass (0 of 1 repeat failed)"),
                                                    (BAD, 1, "fail (1 of 1 repeat failed)"),
                                                    (UNTESTABLE, 125, "skip (cannot test (the replay exited 125")])
def test_one_step_exits_as_git_bisect_run_reads_it(tmp_path: Path, bundle: Path, kind: str, code: int,
                                                  said: str) -> None:
    build = script(tmp_path / "build" / "qemu-system-x86_64", kind)
    done = bisect_cli("--one", str(build), "--rule", "limits", "--bundle", str(bundle), "--out", str(tmp_path / "o"))
    assert done.returncode == code, done.stdout + done.stderr
    assert done.stdout.startswith(f"{build}: {said}"), done.stdout


def test_one_step_with_bad_input_stops_git_bisect(tmp_path: Path, bundle: Path) -> None:
    """128, not 2: git bisect run takes 1-127 (but 125) for a bad commit and stops on 128 and above."""
    done = bisect_cli("--one", str(tmp_path / "none"), "--rule", "limits", "--bundle", str(bundle))
    assert done.returncode == 128 and "--one " in done.stderr and "not an executable file" in done.stderr
    assert bisect_cli("--one", "/usr/bin/true", "--rule", "nope").returncode == 128


def test_a_store_password_is_never_in_the_recorded_command() -> None:
    url = "postgresql://bisector:pa55-w0rd-long@db.example/vioconform"
    register_url(url)
    shown = " ".join(recorded_command(["--builds", "b.txt", "--store", url, "--", "--controllers", "virtio-scsi"]))
    assert "pa55-w0rd-long" not in shown and "postgresql://bisector:***@db.example/vioconform" in shown
