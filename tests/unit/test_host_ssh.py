"""One pinned host key and one ~/.ssh/config for both SSH connections to a remote libvirt host
(hypervisors/libvirt/hostlink.py): the suite's paramiko connection resolves a host alias as ``ssh``
does, and libvirt's ``ssh`` transport is given a ``command=`` that checks the URI's ``known_hosts=``.
Also what a libvirt connection error says (preflight.open_error), from libvirt's real messages.

Pure, or real sockets on 127.0.0.1 (a closed port for a jump host that is down); the SSH servers
and libvirt for real are in tests/e2e/test_remote_libvirt.py.
"""

from __future__ import annotations

import os
import pwd
import socket
import subprocess
import time
from pathlib import Path

import paramiko
import pytest

from tests.libvirt_python import REASON

pytest.importorskip("libvirt", reason=REASON)

from hypervisors.libvirt import FALLBACK_URI, default_uri
from hypervisors.libvirt.host_checks import open_error
from hypervisors.libvirt.hostlink import (
    WRAPPER_DIR,
    HostAddress,
    HostLink,
    HostLinkError,
    home_dir,
    libvirt_uri,
    wrapper_script,
)
from tests.unit.suite_options import opts_line, run_suite_options

pytest_plugins = ["pytester"]

#: How long a bad address may take to be reported here: no server is waited for (a closed port
#: refuses at once, a missing file is seen before any connection); start-up slack on a loaded host.
PROMPT_S = 5.0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _address(uri: str, config: str, tmp_path: Path) -> HostAddress:
    path = tmp_path / "config"
    path.write_text(config)
    return HostAddress.from_uri(uri, paramiko.SSHConfig.from_path(str(path)), path)


# -- ~/.ssh/config ---------------------------------------------------------------------------
def test_a_host_alias_resolves_as_ssh_resolves_it(tmp_path: Path) -> None:
    key = tmp_path / "id_kvm"
    key.write_text("not read here")
    known = tmp_path / "kvm_known_hosts"
    address = _address("qemu+ssh://kvm7/system", f"Host kvm7\n  HostName 10.1.2.3\n  Port 2222\n  User vc\n"
                                                 f"  IdentityFile {key}\n  IdentityFile {tmp_path / 'absent'}\n"
                                                 f"  UserKnownHostsFile {known}\n", tmp_path)
    assert (address.name, address.user, address.host, address.port) == ("kvm7", "vc", "10.1.2.3", 2222)
    assert address.key_files == (key,)  # ssh skips an IdentityFile that does not exist
    assert address.known_hosts_files[0] == known and address.checked_against == str(known)
    assert address.host_id == "[10.1.2.3]:2222" and address.jumps == ()


def test_the_uri_wins_over_the_config(tmp_path: Path) -> None:
    """libvirt passes -l, -p and -i to ssh when the URI names them, and ssh takes those first."""
    keyfile = tmp_path / "k"
    address = _address(f"qemu+ssh://root@kvm7:22/system?keyfile={keyfile}&known_hosts={tmp_path / 'kh'}",
                       "Host kvm7\n  HostName 10.1.2.3\n  Port 2222\n  User vc\n", tmp_path)
    assert (address.user, address.host, address.port) == ("root", "10.1.2.3", 22)
    assert address.keyfile == keyfile and not address.agent
    assert address.checked_against == f"known_hosts {tmp_path / 'kh'}"


def test_without_a_user_anywhere_it_is_the_login_name(tmp_path: Path) -> None:
    address = _address("qemu+ssh://elsewhere.example/system", "Host kvm7\n  User vc\n", tmp_path)
    assert address.user == pwd.getpwuid(os.getuid()).pw_name
    assert (address.host, address.port) == ("elsewhere.example", 22)
    assert address.checked_against == "~/.ssh/known_hosts"


def test_proxyjump_hops_come_in_the_order_ssh_takes_them(tmp_path: Path) -> None:
    """``ProxyJump a,b``: ``a`` first (after ``a``'s own ProxyJump, ``c``), then ``b``, then the host."""
    address = _address("qemu+ssh://inner/system",
                       "Host inner\n  HostName 10.0.0.9\n  ProxyJump a,vc@b:2200\n"
                       "Host a\n  HostName 192.0.2.1\n  User ja\n  ProxyJump c\n"
                       "Host c\n  HostName 192.0.2.3\n  Port 2022\n", tmp_path)
    assert [(h.name, h.user, h.host, h.port) for h in address.jumps] == [
        ("c", pwd.getpwuid(os.getuid()).pw_name, "192.0.2.3", 2022), ("a", "ja", "192.0.2.1", 22),
        ("vc@b:2200", "vc", "b", 2200)]


def test_a_proxyjump_loop_is_named(tmp_path: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(HostLinkError, match=r"ProxyJump leads through more than 8 jump hosts .*is there a loop"):
        _address("qemu+ssh://a/system", "Host a\n  ProxyJump b\nHost b\n  ProxyJump a\n", tmp_path)
    assert time.monotonic() - t0 < PROMPT_S


def test_a_proxycommand_is_refused_with_the_way_out(tmp_path: Path) -> None:
    """libvirt's ssh would run it, the suite's connection cannot: the two would reach different hosts."""
    with pytest.raises(HostLinkError, match=r"gives kvm7 a ProxyCommand, .*write the jump as ProxyJump HOST"):
        _address("qemu+ssh://kvm7/system", "Host kvm7\n  ProxyCommand ssh -W %h:%p bastion\n", tmp_path)


def test_home_is_the_passwd_home_as_for_ssh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """ssh reads ~/.ssh from the passwd database's home directory, never $HOME: nor does the suite."""
    monkeypatch.setenv("HOME", str(tmp_path))
    assert home_dir() == Path(pwd.getpwuid(os.getuid()).pw_dir)
    shown = subprocess.run(["ssh", "-G", "vioconform-no-such-alias"], capture_output=True, text=True, timeout=30,
                           check=True).stdout
    assert f"userknownhostsfile {home_dir() / '.ssh' / 'known_hosts'}" in shown


# -- bad input: each one line, within seconds, before any connection ------------------------------
def test_a_known_hosts_file_that_does_not_exist(tmp_path: Path) -> None:
    uri = f"qemu+ssh://root@127.0.0.1:{_closed_port()}/system?known_hosts={tmp_path / 'none'}"
    t0 = time.monotonic()
    with pytest.raises(HostLinkError) as e:
        HostLink(HostAddress.from_uri(uri))
    assert str(e.value) == (f"--libvirt-uri {uri}: known_hosts={tmp_path / 'none'} does not exist; give the file "
                            "that holds the host's key (after checking the key's fingerprint: ssh-keyscan -p "
                            f"{HostAddress.from_uri(uri).port} 127.0.0.1 > FILE)")
    assert time.monotonic() - t0 < PROMPT_S


def test_a_keyfile_that_does_not_exist(tmp_path: Path) -> None:
    known = tmp_path / "kh"
    known.write_text("")
    uri = f"qemu+ssh://root@127.0.0.1:{_closed_port()}/system?known_hosts={known}&keyfile={tmp_path / 'nokey'}"
    with pytest.raises(HostLinkError, match=rf"keyfile={tmp_path / 'nokey'} does not exist or is not a file; give "
                                            "the private key"):
        HostLink(HostAddress.from_uri(uri))


def test_a_proxyjump_host_that_is_down(tmp_path: Path) -> None:
    """The jump host's port is closed: named as the jump host, with where it came from, at once."""
    down = _closed_port()
    address = _address("qemu+ssh://inner/system", f"Host inner\n  HostName 10.0.0.9\n  User root\n"
                                                  f"  ProxyJump root@127.0.0.1:{down}\n", tmp_path)
    t0 = time.monotonic()
    with pytest.raises(HostLinkError) as e:
        HostLink(address)
    assert str(e.value).startswith(f"ProxyJump host root@127.0.0.1:{down} (~/.ssh/config's ProxyJump "
                                   f"root@127.0.0.1:{down} for inner) is unreachable: "), e.value
    assert "Connection refused" in str(e.value) and "\n" not in str(e.value)
    assert time.monotonic() - t0 < PROMPT_S


# -- libvirt's own connection: the suite's command= ----------------------------------------------
@pytest.fixture
def wrapper_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "vioconform" / WRAPPER_DIR


def test_an_ssh_uri_with_known_hosts_gets_the_suites_command(wrapper_cache: Path, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    uri = f"qemu+ssh://root@kvm7:2222/system?keyfile=/k&known_hosts={known}"
    given = libvirt_uri(uri)
    assert given.startswith(uri + "&command=")
    wrapper = Path(given.partition("&command=")[2])
    assert wrapper.parent.parent == wrapper_cache and os.access(wrapper, os.X_OK)
    assert wrapper.read_text() == wrapper_script(known)
    assert libvirt_uri(uri) == given  # one entry per known_hosts file, made once
    assert len(list(wrapper_cache.iterdir())) == 1


def test_the_wrapper_runs_ssh_with_the_file_strictly(wrapper_cache: Path, tmp_path: Path) -> None:
    """Run as libvirt runs it, with a stand-in ``ssh`` on PATH that prints its arguments: the URI's
    file is ssh's only known_hosts, and the suite's options come before libvirt's (ssh takes the first)."""
    known = tmp_path / "a dir" / "known%hosts"
    wrapper = Path(libvirt_uri(f"qemu+ssh://h/system?known_hosts={known}&no_verify=1").partition("&command=")[2])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    (bin_dir / "ssh").chmod(0o755)
    out = subprocess.run([str(wrapper), "-p", "2222", "-o", "StrictHostKeyChecking=no", "--", "h", "sh"],
                         env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}, capture_output=True,
                         text=True, check=True, timeout=30).stdout.splitlines()
    assert out == ["-o", f'UserKnownHostsFile="{tmp_path / "a dir" / "known%%hosts"}"',
                   "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
                   "-p", "2222", "-o", "StrictHostKeyChecking=no", "--", "h", "sh"]


def test_the_real_ssh_reads_the_wrapper_options_as_meant(wrapper_cache: Path, tmp_path: Path) -> None:
    """``ssh -G`` (no connection) shows the options the wrapper's quoting gives ssh."""
    known = tmp_path / "a dir" / "known%hosts"
    wrapper = Path(libvirt_uri(f"qemu+ssh://h/system?known_hosts={known}").partition("&command=")[2])
    shown = subprocess.run([str(wrapper), "-G", "vioconform-test-host"], capture_output=True, text=True, check=True,
                           timeout=30).stdout.splitlines()
    assert f"userknownhostsfile {known}" in shown and "stricthostkeychecking true" in shown
    assert "globalknownhostsfile /dev/null" in shown and "batchmode yes" in shown


@pytest.mark.parametrize("uri", ["qemu+ssh://h/system", "qemu+ssh://h/system?known_hosts=/kh&command=/my/ssh",
                                 "qemu+libssh://h/system?known_hosts=/kh", "qemu:///system"])
def test_other_uris_go_to_libvirt_as_given(wrapper_cache: Path, uri: str) -> None:
    """No known_hosts= (ssh reads ~/.ssh/known_hosts as the suite does), a user's own command=, the libssh
    transports (they read known_hosts= themselves), a local daemon."""
    assert libvirt_uri(uri) == uri
    assert not wrapper_cache.exists()


def test_a_path_ssh_cannot_carry_is_refused() -> None:
    with pytest.raises(HostLinkError, match=r"its path holds a character ssh's options cannot carry"):
        wrapper_script(Path('/tmp/a"b'))


# -- what a libvirt connection error says ---------------------------------------------------------
URI = "qemu+ssh://root@127.0.0.1:2222/system?keyfile=/k&known_hosts=/tmp/kh"
#: libvirt's messages, as measured here against a loopback sshd and the local daemon.
SAID = {
    "unknown key": ("Cannot recv data: No ED25519 host key is known for [127.0.0.1]:2222 and you have requested "
                    "strict checking.\r\nHost key verification failed.: Connection reset by peer"),
    "changed key": ("Cannot recv data: @@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n@    WARNING: "
                    "REMOTE HOST IDENTIFICATION HAS CHANGED!     @\r\n@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@"
                    "@@@@@@\r\nIT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\r\nThe fingerprint for the "
                    "ED25519 key sent by the remote host is\nSHA256:W+gpN6CZCpSG2hFw2RnPZAI9Ct++gFCGmYHSmdactho.\r\n"
                    "Please contact your system administrator.\r\nAdd correct host key in /tmp/kh to get rid of this "
                    "message.\r\nOffending ED25519 key in /tmp/kh:1\r\nHost key for [127.0.0.1]:2222 has changed and "
                    "you have requested strict checking.\r\nHost key verification failed.: Connection reset by peer"),
    "login refused": "Cannot recv data: root@127.0.0.1: Permission denied (publickey).: Connection reset by peer",
    "unreachable": ("Cannot recv data: ssh: connect to host 127.0.0.1 port 1: Connection refused: Connection reset "
                    "by peer"),
    "unknown name": ("Cannot recv data: ssh: Could not resolve hostname nowhere.invalid: Name or service not known: "
                     "Connection reset by peer"),
    "no rights": "internal error: Unable to get system bus connection: Could not connect: No such file or directory",
    "printed": "packet 1416128879 bytes received from server too large, want 33554432",
    "no helper": "End of file while reading data: sh: 1: nc: not found: Input/output error",
}


@pytest.mark.parametrize(("case", "says"), [
    ("unknown key", ("libvirt's SSH connection did not accept 127.0.0.1's host key (No ED25519 host key is known for "
                    "[127.0.0.1]:2222): it is not in known_hosts /tmp/kh. Check the key's fingerprint, then add it "
                    "(ssh-keyscan -p 2222 127.0.0.1 >> FILE)")),
    ("changed key", ("libvirt's SSH connection refused 127.0.0.1: it presented a host key other than the one in "
                    "known_hosts /tmp/kh (it presented ED25519 SHA256:W+gpN6CZCpSG2hFw2RnPZAI9Ct++gFCGmYHSmdactho). "
                    "If the host was reinstalled, check its new key's fingerprint and replace the old one")),
    ("login refused", ("127.0.0.1 refused libvirt's SSH login as root (Cannot recv data: root@127.0.0.1: Permission "
                      "denied (publickey).: Connection reset by peer). Give the key with ?keyfile=PATH in the URI")),
    ("unreachable", ("libvirt's ssh could not reach 127.0.0.1 (Cannot recv data: ssh: connect to host 127.0.0.1 port "
                    "1: Connection refused: Connection reset by peer). Check the host name and port")),
    ("unknown name", "libvirt's ssh could not reach 127.0.0.1 (Cannot recv data: ssh: Could not resolve hostname"),
    ("no rights", ("root on 127.0.0.1 may not use libvirt's daemon (internal error: Unable to get system bus "
                  "connection: Could not connect: No such file or directory). Log in as root")),
    ("printed", ("the login on 127.0.0.1 printed text where libvirt's protocol was expected (packet 1416128879 bytes "
                "received from server too large, want 33554432; it began 'This'). root's login shell refuses logins")),
    ("no helper", "127.0.0.1 has neither virt-ssh-helper nor nc to reach libvirt's daemon with"),
])
def test_a_libvirt_connection_error_names_its_cause_and_remedy(case: str, says: str) -> None:
    message = open_error(URI, SAID[case])
    assert message.startswith(f"cannot connect to libvirt at '{URI}': {says}"), message
    assert "\n" not in message and "Is libvirtd running" not in message
    assert len(message) < 700, message


def test_a_host_key_refused_by_a_users_command_names_that_command() -> None:
    uri = "qemu+ssh://root@127.0.0.1:2222/system?known_hosts=/tmp/kh&command=/my/ssh"
    message = open_error(uri, SAID["unknown key"])
    assert "it is not in the known_hosts that the ssh of the URI's command= reads" in message
    assert message.endswith("or leave command= out: the suite then runs ssh with the URI's known_hosts=")


@pytest.mark.parametrize(("said", "says"), [
    ("Failed to connect socket to '/var/run/libvirt/libvirt-sock': No such file or directory",
     ("no libvirt daemon answers on this machine (Failed to connect socket to '/var/run/libvirt/libvirt-sock': No "
     "such file or directory). Start it (scripts/setup-host.sh starts it")),
    ("Failed to connect socket to '/var/run/libvirt/libvirt-sock': Permission denied",
     ("this user may not use libvirt's daemon (Failed to connect socket to '/var/run/libvirt/libvirt-sock': "
     "Permission denied). Run as root, or add the user to the libvirt group")),
    ("authentication unavailable: no polkit agent available to authenticate action 'org.libvirt.unix.manage'",
     "this user may not use libvirt's daemon"),
    ("some new failure", "some new failure. Is libvirtd running (scripts/setup-host.sh starts it)"),
])
def test_a_local_daemons_error_names_its_cause(said: str, says: str) -> None:
    assert open_error("qemu:///system", said).startswith(f"cannot connect to libvirt at 'qemu:///system': {says}")


# -- LIBVIRT_DEFAULT_URI ------------------------------------------------------------------------
def test_libvirt_default_uri_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIBVIRT_DEFAULT_URI", "qemu+ssh://root@kvm7/system")
    assert default_uri() == "qemu+ssh://root@kvm7/system"
    monkeypatch.setenv("LIBVIRT_DEFAULT_URI", "")
    assert default_uri() == FALLBACK_URI
    monkeypatch.delenv("LIBVIRT_DEFAULT_URI")
    assert default_uri() == FALLBACK_URI


def test_the_suite_takes_libvirt_default_uri(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unless --libvirt-uri (or --hosts) names the host."""
    monkeypatch.setenv("LIBVIRT_DEFAULT_URI", "qemu:///session")
    result = run_suite_options(pytester)
    assert result.ret == 0, result.stdout.str()
    assert opts_line(result)[-1] == "qemu:///session"
    given = run_suite_options(pytester, "--libvirt-uri", "qemu:///system", "--results-dir", str(pytester.path / "r2"))
    assert opts_line(given)[-1] == "qemu:///system"
