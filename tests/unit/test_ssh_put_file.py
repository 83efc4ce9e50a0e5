"""SshTransport.put_file against an SSH server in this process (paramiko's server side): over SFTP
where the server has it (OpenSSH, what cloud images run), through ``cat`` where it has not (dropbear
without sftp-server, the embedded guest: tests/e2e/test_fio_push.py copies into a real one)."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paramiko
import pytest
from paramiko.common import AUTH_SUCCESSFUL, OPEN_SUCCEEDED
from paramiko.sftp import SFTP_OK

from model.types import SshEndpoint
from transport.ssh import GuestCopyError, SshTransport, generate_run_key


class Files(paramiko.SFTPServerInterface):
    """An SFTP server's file side on this host's files: what ``put`` and ``chmod`` need."""

    def open(self, path: str, flags: int, attr: paramiko.SFTPAttributes) -> Any:
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as e:
            return paramiko.SFTPServer.convert_errno(e.errno or 0)
        handle = paramiko.SFTPHandle(flags)
        handle.filename = path  # type: ignore[attr-defined]
        handle.writefile = handle.readfile = os.fdopen(fd, "r+b" if flags & os.O_RDWR else  # type: ignore[attr-defined]
                                                      "wb" if flags & os.O_WRONLY else "rb")
        return handle

    def stat(self, path: str) -> Any:
        try:
            return paramiko.SFTPAttributes.from_stat(os.stat(path))
        except OSError as e:
            return paramiko.SFTPServer.convert_errno(e.errno or 0)

    lstat = stat

    def chattr(self, path: str, attr: paramiko.SFTPAttributes) -> int:
        if attr.st_mode is not None:
            os.chmod(path, attr.st_mode)
        return SFTP_OK


class Server(paramiko.ServerInterface):
    """Takes any key; runs exec requests with this host's /bin/sh, the channel as the command's stdin.
    ``drop``: a subsystem request closes the whole connection (as a guest's dropbear once did after
    its failed sftp subsystem)."""

    def __init__(self, transport: paramiko.Transport, drop: bool) -> None:
        self.transport = transport
        self.drop = drop

    def check_channel_subsystem_request(self, channel: paramiko.Channel, name: str) -> bool:
        if self.drop:
            threading.Thread(target=self.transport.close, daemon=True).start()
            return False
        return bool(super().check_channel_subsystem_request(channel, name))

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        return AUTH_SUCCESSFUL

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return OPEN_SUCCEEDED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        def run() -> None:
            data = bytearray()
            while block := channel.recv(32768):
                data += block
            proc = subprocess.run(["sh", "-c", command.decode()], input=bytes(data), capture_output=True, check=False)
            out, err = proc.stdout, proc.stderr
            channel.sendall(out)
            channel.sendall_stderr(err)
            channel.send_exit_status(proc.returncode)
            channel.close()

        threading.Thread(target=run, daemon=True).start()
        return True


@pytest.fixture(params=["sftp", "cat", "cat-after-drop"])
def transport(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SshTransport]:
    """An SshTransport to an SSH server in a thread: with an SFTP subsystem (``sftp``) or without (``cat``).
    The login is root's (the copy runs as the login user whoever it is; a non-root login would have
    the transport check its sudo first, which is not what this tests)."""
    host_key = paramiko.RSAKey.generate(2048)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    servers: list[paramiko.Transport] = []

    def serve() -> None:
        for n in range(2):  # a second connection: the transport's own after a drop
            try:
                conn, _ = listener.accept()
            except OSError:  # closed at the end of the test
                return
            t = paramiko.Transport(conn)
            t.add_server_key(host_key)
            if request.param == "sftp":
                t.set_subsystem_handler("sftp", paramiko.SFTPServer, Files)
            servers.append(t)
            t.start_server(server=Server(t, drop=request.param == "cat-after-drop" and n == 0))

    threading.Thread(target=serve, daemon=True).start()
    key_path, _ = generate_run_key(tmp_path)
    endpoint = SshEndpoint("127.0.0.1", listener.getsockname()[1], "root", key_path,
                           f"{host_key.get_name()} {host_key.get_base64()}")
    ssh = SshTransport(endpoint, connect_timeout_s=20)
    ssh.way = request.param.split("-")[0]  # type: ignore[attr-defined]
    yield ssh
    ssh.close()
    for t in servers:
        t.close()
    listener.close()


def test_a_file_arrives_whole_with_its_mode(transport: SshTransport, tmp_path: Path) -> None:
    local = tmp_path / "fio"
    local.write_bytes(os.urandom(300_000))  # several 32 KiB blocks and a partial one
    remote = tmp_path / "guest-fio"
    assert transport.put_file(local, str(remote), 0o755) == transport.way  # type: ignore[attr-defined]
    assert remote.read_bytes() == local.read_bytes()
    assert remote.stat().st_mode & 0o777 == 0o755


def test_a_file_that_cannot_be_written_is_one_clear_error(transport: SshTransport, tmp_path: Path) -> None:
    local = tmp_path / "fio"
    local.write_bytes(b"x" * 100_000)
    remote = tmp_path / "no-such-dir" / "fio"
    way = transport.way  # type: ignore[attr-defined]
    expected = (r"over SFTP as root: No such file" if way == "sftp" else
                r"as root \(no SFTP: .*; through `cat`\): `cat > \S+ && chmod 755 \S+` exited \d+: .*"
                r"(No such file or directory|nonexistent directory|Directory nonexistent)")
    with pytest.raises(GuestCopyError, match=rf"^cannot copy {local} to the guest's {remote} {expected}") as e:
        transport.put_file(local, str(remote), 0o755)
    assert "\n" not in str(e.value) and not remote.exists()
