"""Option values that cannot work are usage errors (exit 4) at once, before any guest starts:
a URI without a usable port or empty, a latency that is not a finite positive number, input files
that are FIFOs or devices (a read would wait for ever); ``~`` in path options is the home directory."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hypervisors.libvirt.inventory import InventoryError, hosts_from_uris, load_inventory
from tests.unit.fifo_watch import fifo_readers
from tests.unit.suite_options import errors, opts_line, run_suite_options

pytest_plugins = ["pytester"]

@pytest.mark.parametrize(("uri", "said"), [
    ("qemu+ssh://root@host:99999/system", "port '99999' of host:99999 is not a TCP port (1 to 65535)"),
    ("qemu+ssh://root@host:abc/system", "port 'abc' of host:abc is not a TCP port"),
    ("qemu+ssh://root@host:0/system", "port '0' of host:0 is not a TCP port"),
    ("qemu+ssh://root:s3cret@[::1]:70000/system", "port '70000' of [::1]:70000 is not a TCP port"),
    ("", "the URI is empty; give a libvirt URI such as qemu:///system"),
    ("  ", "the URI is empty"),
])
def test_uris_without_a_usable_port_or_empty_are_refused(uri: str, said: str, tmp_path: Path) -> None:
    with pytest.raises(InventoryError) as e:
        hosts_from_uris([uri])
    assert str(e.value).startswith("--libvirt-uri: ") and said in str(e.value) and "s3cret" not in str(e.value)
    inventory = tmp_path / "hosts.toml"
    inventory.write_text(f'[[host]]\nuri = "qemu:///system"\n[[host]]\nuri = "{uri}"\n')
    with pytest.raises(InventoryError) as e:
        load_inventory(inventory)
    assert str(e.value).startswith(f"--hosts {inventory}: host 2: ") and "s3cret" not in str(e.value)
    assert said in str(e.value) if uri.strip() else "no uri" in str(e.value) or said in str(e.value)
    hosts_from_uris(["qemu+ssh://root@host:2222/system", "qemu+tls://[::1]:16514/system", "qemu:///system"])


def test_bad_uris_and_latencies_are_usage_errors_not_tracebacks(pytester: pytest.Pytester) -> None:
    for args, said in [
        (("--libvirt-uri", "qemu+ssh://root@host:99999/system"), "port '99999' of host:99999 is not a TCP port"),
        (("--libvirt-uri", ""), "--libvirt-uri: the URI is empty"),
        (("--disk-latency-ms", "nan"), "'nan' is not a finite number"),
        (("--disk-latency-ms", "inf"), "'inf' is not a finite number"),
        (("--disk-latency-ms=-3",), "'-3' must be above 0"),
        (("--window-s=-inf",), "'-inf' is not a finite number"),
        (("--boot-timeout", "NaN"), "'NaN' is not a finite number"),
    ]:
        result = run_suite_options(pytester, *args)
        assert result.ret == 4, (args, errors(result))
        assert said in errors(result) and "INTERNALERROR" not in errors(result), (args, errors(result))


def test_a_tilde_in_path_options_is_the_home_directory(pytester: pytest.Pytester,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    home = pytester.path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    result = run_suite_options(pytester, "--results-dir=~/x", "--junit-xml=~/ci/j.xml", "--save-baseline=~/b.json",
                               "--baseline=~/runs/r1", "--emulator=~/qemu")
    assert result.ret == 0, errors(result)
    results, junit, save, baseline, emulator, _ = opts_line(result)
    assert (results, junit, save) == (str(home / "x"), str(home / "ci" / "j.xml"), str(home / "b.json"))
    assert (baseline, emulator) == (str(home / "runs" / "r1"), str(home / "qemu"))
    assert not (pytester.path / "~").exists()
    (home / "hosts.toml").write_text('[[host]]\nuri = "qemu+ssh://root@kvm7/system"\n')
    result = run_suite_options(pytester, "--hosts", "~/hosts.toml")
    assert result.ret == 0 and opts_line(result)[-1] == "qemu+ssh://root@kvm7/system", errors(result)


def _key_line() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    key = Ed25519PrivateKey.generate().public_key()
    return key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


@pytest.mark.parametrize("option", ["--hosts", "--image", "--baseline", "--guest-key", "--guest-host-key",
                                    "--guest-kernel-deb"])
def test_a_fifo_given_as_an_input_file_is_refused_at_once(pytester: pytest.Pytester, option: str) -> None:
    pipe = pytester.path / "pipe"
    os.mkfifo(pipe)
    extra = {"--guest-key": ["--image", "x.raw", "--guest-user", "u", "--guest-host-key", _key_line()],
             "--guest-host-key": ["--image", "x.raw", "--guest-user", "u"]}.get(option, [])
    with fifo_readers([pipe]) as opened:
        result = run_suite_options(pytester, option, str(pipe), *extra)
    assert opened == [], f"{option}: the FIFO was opened for reading (it would hang)"
    assert result.ret == 4, errors(result)
    assert f"{pipe} is a FIFO (named pipe), not a regular file" in errors(result), errors(result)


def test_an_inventory_that_is_a_fifo_is_never_read(tmp_path: Path) -> None:
    pipe = tmp_path / "hosts.toml"
    os.mkfifo(pipe)
    # load_inventory opens it without blocking to see what it is: a reader is released only after 10 s
    with fifo_readers([pipe], grace_s=10.0), pytest.raises(InventoryError) as e:
        load_inventory(pipe)
    assert "it is a FIFO (named pipe), not a regular file" in str(e.value)
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)


def test_stall_lengths_the_rule_cannot_use_are_usage_errors(pytester: pytest.Pytester) -> None:
    """--stall-s and --stall-hold-s above the stall-tolerance rule's bound (300 s, the longest the suite
    waits for a guest), a hold under 1 s (too few probes to show the guest ran), and none of them a number."""
    for args, said in [
        (("--stall-s", "301"), "'301' s is above 300 s, the longest the suite waits on a guest"),
        (("--stall-s", "0"), "'0' must be above 0"),
        (("--stall-s", "nan"), "'nan' is not a finite number"),
        (("--stall-hold-s", "600"), "'600' s is above 300 s"),
        (("--stall-hold-s", "0.5"), "'0.5' s is under 1 s: the guest is asked over SSH every 0.3 s"),
    ]:
        result = run_suite_options(pytester, *args)
        assert result.ret == 4, (args, errors(result))
        assert said in errors(result) and "INTERNALERROR" not in errors(result), (args, errors(result))
    ok = run_suite_options(pytester, "--stall-s", "300", "--stall-hold-s", "1")  # the bounds themselves
    assert ok.ret == 0, errors(ok)
