"""No password given in a URL reaches any output of a suite run (``python -m pytest suites``).

Each case runs the suite as a user does, with passwords in ``--libvirt-uri``, ``--hosts``' ``uri``
and ``--store`` (userinfo and ``?password=``), against targets that fail before any guest: a libvirt
daemon at 127.0.0.1:1 (closed), a ``known_hosts=`` file that does not exist, a PostgreSQL server at
127.0.0.1:1. stdout, stderr and every file the run writes (results directory, JUnit file,
report.html, log file, store) are searched for each password, as written and percent-decoded.
Needs libvirt-python importable (the tox test environment has it); no libvirtd is asked.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("libvirt")

#: An address where nothing listens: every connection is refused at once.
CLOSED = "127.0.0.1:1"
#: Cases: (name, arguments with {p1}, {p2}, {p3} for passwords and {tmp} for the test's directory,
#: the exit code (or the codes it may be), a fragment of the output). {hosts} is an inventory file made from HOSTS.
CASES = {
    "pool-stored": (["--hosts", "{hosts}", "--store", "sqlite:///{tmp}/out/x.db?password={p3}",
                     "-o", "log_cli=true", "--log-file", "{tmp}/out/log.txt", "--log-file-level", "DEBUG"], 10,
                    "stored:    run 1 in sqlite:///{tmp}/out/x.db?password=***"),
    "libvirt-unreachable": (["--libvirt-uri", f"qemu+tcp://root:{{p1}}@{CLOSED}/system"], 4,
                            f"cannot connect to libvirt at 'qemu+tcp://root:***@{CLOSED}/system'"),
    "known-hosts-missing": (["--libvirt-uri", f"qemu+ssh://root:{{p2}}@{CLOSED}/system?known_hosts={{tmp}}/none"],
                            4, (f"--libvirt-uri qemu+ssh://root:***@{CLOSED}/system?known_hosts={{tmp}}/none: "
                               "known_hosts={tmp}/none does not exist")),
    "listed-twice": (["--libvirt-uri", f"qemu+ssh://root:{{p1}}@{CLOSED}/system"] * 2, 4,
                     f"qemu+ssh://root:***@{CLOSED}/system is listed twice"),
    "listed-twice-hosts": (["--hosts", "{twice}"], 4, f"qemu+ssh://root:***@{CLOSED}/system is listed twice"),
    "store-unreachable": (["--store", f"postgresql://vc:{{p1}}@{CLOSED}/vioconform?password={{p3}}&connect_timeout=5"],
                          4, (f"store postgresql://vc:***@{CLOSED}/vioconform?password=***&connect_timeout=5 cannot "
                             "be opened")),
    # secret query keys SQLAlchemy decodes (pass%77ord is password) and libpq's sslpassword
    "store-secret-keys": (["--store", f"postgresql://vc@{CLOSED}/vioconform?pass%77ord={{p3}}&sslpassword={{p2}}"], 4,
                          f"store postgresql://vc@{CLOSED}/vioconform?pass%77ord=***&sslpassword=*** cannot be opened"),
    "uri-password-with-at": (["--libvirt-uri", f"qemu+ssh://root:{{p1}}@{{p2}}@{CLOSED}/system"], 4,
                             "percent-encode each '@' in it as %40"),
    "store-password-with-at": (["--store", f"postgresql://vc:{{p1}}@{{p2}}@{CLOSED}/vioconform"], 4,
                               "PGPASSWORD or ~/.pgpass"),
    # an option crashing the configuration (exit 3: INTERNALERROR, every frame's locals shown) or refused (4)
    "port-out-of-range": (["-l", "--full-trace", "--libvirt-uri", "qemu+ssh://root:{p1}@127.0.0.1:99999/system",
                           "--store", "sqlite:///{tmp}/out/x.db?password={p3}"], (3, 4), "99999"),
    # --co runs the checks before any guest too
    "collect-only": (["--co", "--libvirt-uri", f"qemu+ssh://root:{{p1}}@{CLOSED}/system",
                      "--store", "sqlite:///{tmp}/out/x.db?password={p3}"], 4,
                     f"libvirt host root@{CLOSED} is unreachable"),
}
HOSTS = f'''
[[host]]
name = "tcp"
uri = "qemu+tcp://root:{{p1}}@{CLOSED}/system"
[[host]]
name = "ssh"
uri = "qemu+ssh://root:{{p2}}@{CLOSED}/system?known_hosts={{tmp}}/none"
'''
TWICE = f'[[host]]\nuri = "qemu+ssh://root:{{p1}}@{CLOSED}/system"\n' * 2


@pytest.mark.parametrize(("args", "code", "said"), CASES.values(), ids=CASES.keys())
def test_no_url_password_in_any_output(tmp_path: Path, args: list[str], code: int | tuple[int, ...],
                                       said: str) -> None:
    # p1 with characters that are percent-encoded or special in URLs and TOML: '%21' is '!'
    words = {"p1": f"pw1-{secrets.token_hex(6)}%21", "p2": f"pw2-{secrets.token_hex(6)}", "p3": f"pw3-{secrets.token_hex(6)}"}
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    out.mkdir()
    fill = {**words, "tmp": str(tmp_path), "hosts": str(inputs / "hosts.toml"), "twice": str(inputs / "twice.toml")}
    (inputs / "hosts.toml").write_text(HOSTS.format(**fill))
    (inputs / "twice.toml").write_text(TWICE.format(**fill))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider", "-k", "queue_depth",
         "--controllers", "virtio-blk", "--results-dir", str(out / "results"),
         *(["--store", f"sqlite:///{out}/default.db"] if "--store" not in args else []),
         *(a.format(**fill) for a in args)],
        check=False, cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "400"})
    output = run.stdout + run.stderr
    assert run.returncode in (code if isinstance(code, tuple) else (code,)), output
    assert said.format(**fill) in output, output
    written = [p for p in tmp_path.rglob("*") if p.is_file() and inputs not in p.parents]
    if code == 10:
        assert written, "the run wrote nothing"
    passwords = {v for w in words.values() for v in (w, unquote(w))}
    for name, text in [("stdout", run.stdout), ("stderr", run.stderr)] + \
            [(str(p), p.read_bytes().decode(errors="replace")) for p in written]:
        for password in passwords:
            assert password not in text, f"{password} in {name}:\n{text}"
