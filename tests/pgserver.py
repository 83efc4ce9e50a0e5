"""A private PostgreSQL server for the store's tests: Debian's own binaries, a new cluster in a
temporary directory, loopback TCP on a free port, password authentication; stopped and removed
afterwards, also when a test fails.

PostgreSQL refuses to run as root, so as root (CI) the cluster belongs to the ``postgres`` user
that Debian's package creates and every server command runs through ``runuser``; as another
user it runs as that user. Nothing outside the temporary directory is touched: the package's
own cluster (``/var/lib/postgresql``) is neither used nor started.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

#: Debian's server binaries, one directory per major version (postgresql-15 on Debian 12).
BIN_ROOT = Path("/usr/lib/postgresql")
USER = "vioconform"
#: A password, so that the tests also show one never appears in what the suite prints.
PASSWORD = "pg-s3cret-for-tests"


class NoPostgres(Exception):
    """No PostgreSQL server binaries on this machine (scripts/setup-host.sh installs them)."""


@dataclass(frozen=True)
class PgServer:
    port: int
    data: Path

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{database}"


def bindir() -> Path:
    versions = sorted((p for p in BIN_ROOT.glob("*/bin") if (p / "postgres").exists()),
                      key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if not versions:
        raise NoPostgres(f"no PostgreSQL server in {BIN_ROOT}/*/bin: install Debian's postgresql package "
                         f"(scripts/setup-host.sh does)")
    return versions[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_owner(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(_as_owner(cmd), capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")


@contextlib.contextmanager
def private_postgres() -> Iterator[PgServer]:
    """A running server; its superuser ``vioconform`` logs in with :data:`PASSWORD` (scram-sha-256)."""
    bins = bindir()
    top = Path(tempfile.mkdtemp(prefix="vioconform-pg-"))
    data, sock = top / "data", top / "sock"
    sock.mkdir()
    pwfile = top / "pw"
    pwfile.write_text(PASSWORD + "\n")
    if os.geteuid() == 0:
        shutil.chown(top, "postgres", "postgres")
        shutil.chown(sock, "postgres", "postgres")
        shutil.chown(pwfile, "postgres", "postgres")
    started = False
    try:
        _run([str(bins / "initdb"), "-D", str(data), "-U", USER, "--auth=scram-sha-256", f"--pwfile={pwfile}",
              "--no-sync", "-E", "UTF8", "--locale=C"], "initdb")
        port = _free_port()
        _run([str(bins / "pg_ctl"), "-D", str(data), "-l", str(top / "server.log"), "-w", "-t", "60", "-o",
              f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off", "start"], "pg_ctl start")
        started = True
        yield PgServer(port, data)
    finally:
        if started:
            subprocess.run(_as_owner([str(bins / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
                           capture_output=True, timeout=60, check=False)
        shutil.rmtree(top, ignore_errors=True)


def create_database(server: PgServer, name: str) -> str:
    """A new, empty database on ``server``; its SQLAlchemy URL."""
    engine = sa.create_engine(server.url(), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    finally:
        engine.dispose()
    return server.url(name)
