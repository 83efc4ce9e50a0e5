"""The host set-up tox runs first (scripts/tox-prepare.sh, scripts/setup-host.sh): the suite's
Debian packages for ``tox -e suite``, the tests' only for ``tox -e test``; nothing on the host for
``tox -e suite -- --help``; one line on a machine without apt. Run with stand-ins for apt-get,
dpkg-query and pip that record their calls (nothing is installed)."""

from __future__ import annotations

import configparser
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
BASH = "/bin/bash"

#: Packages only the project's tests need: never installed for the suite alone.
TEST_ONLY = {"chromium", "postgresql", "debootstrap", "grub-pc-bin", "grub-efi-amd64-bin", "openssh-server"}
#: Packages the suite cannot run without.
SUITE_NEEDS = {"qemu-system-x86", "libvirt-daemon-system", "libvirt-dev", "busybox-static", "dropbear-bin",
               "libaio-dev", "build-essential"}

STAND_INS = {
    # nothing is installed; every call is recorded
    "dpkg-query": 'echo "dpkg-query $*" >> "$CALLS"; exit 1\n',
    "apt-get": 'echo "apt-get $*" >> "$CALLS"\n',
    # root, so that the script gets as far as installing
    "id": 'echo 0\n',
    # /dev/kvm already has Debian's mode: the script leaves it alone
    "stat": 'echo 660\n',
    # tox's environment's python: pip's arguments and the requirements it was given
    "python": 'echo "python $*" >> "$CALLS"\n'
              'for a in "$@"; do [ -f "$a" ] && sed "s/^/  req: /" "$a" >> "$CALLS"; done; exit 0\n',
}


def stand_ins(tmp_path: Path, only: tuple[str, ...] | None = None) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in STAND_INS.items():
        if only is None or name in only:
            (bin_dir / name).write_text("#!/bin/sh\n" + body)
            (bin_dir / name).chmod(0o755)
    return bin_dir


def run(script: str, *args: str, path: str, calls: Path, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BASH, str(SCRIPTS / script), *args], capture_output=True, text=True, timeout=60,
                          check=False, env={"PATH": path, "CALLS": str(calls), "HOME": str(calls.parent),
                                            "VIOCONFORM_SKIP_LIBVIRTD": "1", **(env or {})})


def installed(calls: Path) -> set[str]:
    """The packages ``apt-get install`` was asked for."""
    out: set[str] = set()
    for line in calls.read_text().splitlines() if calls.exists() else []:
        if line.startswith("apt-get ") and " install " in line:
            out |= {w for w in line.split()[1:] if not w.startswith("-") and w != "install"}
    return out


def test_the_suite_installs_the_suite_set_and_the_tests_theirs(tmp_path: Path) -> None:
    path = f"{stand_ins(tmp_path)}:/usr/bin:/bin"
    calls = tmp_path / "suite.calls"
    done = run("setup-host.sh", path=path, calls=calls)
    assert done.returncode == 0, done.stderr
    suite = installed(calls)
    assert suite >= SUITE_NEEDS and not suite & TEST_ONLY, suite
    calls = tmp_path / "test.calls"
    done = run("setup-host.sh", "--tests", path=path, calls=calls)
    assert done.returncode == 0, done.stderr
    assert installed(calls) >= SUITE_NEEDS | TEST_ONLY


def test_help_installs_nothing_on_the_host(tmp_path: Path) -> None:
    """``tox -e suite -- --help``: no Debian package, no daemon; pip gets every requirement but
    libvirt-python (it builds against libvirt-dev, which a help does not install)."""
    path = f"{stand_ins(tmp_path)}:/usr/bin:/bin"
    for args in (["--help"], ["-h"], ["--controllers", "virtio-blk", "--help"], ["--version"]):
        calls = tmp_path / "help.calls"
        calls.unlink(missing_ok=True)
        done = run("tox-prepare.sh", "suite", *args, path=path, calls=calls)
        assert done.returncode == 0, done.stderr
        said = calls.read_text()
        assert "apt-get" not in said and "dpkg-query" not in said, said
        assert "python -m pip install" in said and "req: pytest==" in said and "libvirt" not in said, said
    calls = tmp_path / "run.calls"
    done = run("tox-prepare.sh", "suite", "--controllers", "virtio-blk", path=path, calls=calls)
    assert done.returncode == 0, done.stderr
    assert installed(calls) >= SUITE_NEEDS and "req: libvirt-python==" in calls.read_text()


def test_pip_compiles_no_module_ahead_of_its_import(tmp_path: Path) -> None:
    """pip byte-compiles every module of every package it installs unless told not to: about 9 s of the
    20 s of CPU a fresh environment's install takes here, mostly for modules no process imports. Each
    process compiles what it imports instead (into tox.ini's PYTHONPYCACHEPREFIX, once)."""
    path = f"{stand_ins(tmp_path)}:/usr/bin:/bin"
    for args in ((), ("--help",)):  # pip_install (the suite's and the tests' sets alike), and the help's own
        calls = tmp_path / f"{len(args)}.calls"
        done = run("tox-prepare.sh", "suite", *args, path=path, calls=calls)
        assert done.returncode == 0, done.stderr
        pips = [line for line in calls.read_text().splitlines() if line.startswith("python -m pip install")]
        assert pips and all(" --no-compile " in line for line in pips), pips


def test_pip_runs_again_only_when_the_requirements_change(tmp_path: Path) -> None:
    """The stamp in tox's environment skips pip's several-second check on every ./vioconform; outside a
    virtual environment nothing is written (the stand-in python has no sys.prefix)."""
    path = f"{stand_ins(tmp_path)}:/usr/bin:/bin"
    venv = tmp_path / "venv"
    venv.mkdir()
    pip_calls = []
    for _ in range(2):
        calls = tmp_path / "run.calls"
        calls.unlink(missing_ok=True)
        done = run("tox-prepare.sh", "suite", path=path, calls=calls, env={"VIRTUAL_ENV": str(venv)})
        assert done.returncode == 0, done.stderr
        pip_calls.append(calls.read_text().count("python -m pip install"))
        for args in (["--help"],):
            calls.unlink()
            assert run("tox-prepare.sh", "suite", *args, path=path, calls=calls,
                       env={"VIRTUAL_ENV": str(venv)}).returncode == 0
            pip_calls.append(calls.read_text().count("python -m pip install"))
    assert pip_calls == [1, 0, 0, 0], pip_calls
    assert [p.name for p in venv.iterdir()] == [".vioconform-requirements"]
    done = run("tox-prepare.sh", "suite", path=path, calls=tmp_path / "bare.calls", env={"VIRTUAL_ENV": ""})
    assert done.returncode == 0 and not Path("/.vioconform-requirements").exists()


def test_a_machine_without_apt_gets_one_line_and_the_way_around(tmp_path: Path) -> None:
    path = str(stand_ins(tmp_path, only=("id", "stat")))  # no apt-get, no dpkg-query
    done = run("setup-host.sh", path=path, calls=tmp_path / "calls")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "no apt" in lines[0] and "VIOCONFORM_SKIP_HOST_SETUP=1" in lines[0], done.stderr
    assert "qemu" in lines[0].lower() and "libvirt" in lines[0], lines[0]
    done = run("setup-host.sh", path=path, calls=tmp_path / "calls", env={"VIOCONFORM_SKIP_HOST_SETUP": "1"})
    assert done.returncode == 0 and not (tmp_path / "calls").exists(), done.stderr


def test_tox_ini_reads_the_same_under_tox_3_and_tox_4() -> None:
    """Debian 12's tox is 3.28: it splits passenv on spaces, tox 4 on commas; one name per line
    suits both (a comma list passed nothing under tox 3: not even CI or XDG_CACHE_HOME)."""
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(ROOT / "tox.ini")
    for section in ini.sections():
        for key in ("passenv", "pass_env"):
            for line in ini[section].get(key, "").splitlines():
                name = line.split("#", 1)[0].strip()
                assert "," not in name and " " not in name, f"[{section}] {key}: {line!r}: one name per line"
        assert "whitelist_externals" not in ini[section], "allowlist_externals (tox >= 3.18)"


def test_ci_runs_the_test_command() -> None:
    last = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert last.endswith("tox -e test") and "pip install" not in last, last
