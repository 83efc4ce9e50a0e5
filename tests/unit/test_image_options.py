"""--image and its companions: defaults, and the usage errors (exit 4) for what cannot work."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fixtures.options import SuiteOptions
from fixtures.options_guest import (
    EMBEDDED_BOOT_TIMEOUT_S,
    EMBEDDED_MEMORY_MIB,
    IMAGE_BOOT_TIMEOUT_S,
    IMAGE_MEMORY_MIB,
)

pytest_plugins = ["pytester"]

CONFTEST = 'pytest_plugins = ["fixtures.options", "fixtures.session"]\n'
#: A test that prints the parsed options (no guest: it does not take the guest fixture).
SHOW = '''
from fixtures.state import OPTIONS_KEY

def test_show(pytestconfig):
    o = pytestconfig.stash[OPTIONS_KEY]
    print("OPTS", o.image, o.firmware, o.guest_memory_mib, o.guest_vcpus, o.boot_timeout_s, o.guest_user,
          o.guest_host_key)
'''


def keypair(directory: Path) -> tuple[Path, str]:
    key = Ed25519PrivateKey.generate()
    path = directory / "id_test"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                       serialization.NoEncryption()))
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return path, pub


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_show=SHOW)
    return pytester.runpytest("-p", "no:cacheprovider", "-s", "--results-dir", str(pytester.path / "results"), *args)


def opts_line(result: pytest.RunResult) -> str:
    return next(line[line.index("OPTS"):] for line in result.stdout.lines if "OPTS" in line)


def test_defaults_for_the_embedded_guest_and_for_an_image(pytester: pytest.Pytester) -> None:
    result = run(pytester)
    assert result.ret == 0, result.stdout.str()
    assert opts_line(result) == f"OPTS None bios {EMBEDDED_MEMORY_MIB} 2 {EMBEDDED_BOOT_TIMEOUT_S} None None"
    image = pytester.path / "disk.qcow2"
    result = run(pytester, "--image", str(image), "--firmware", "uefi")
    assert opts_line(result) == f"OPTS {image} uefi {IMAGE_MEMORY_MIB} 2 {IMAGE_BOOT_TIMEOUT_S} None None"
    result = run(pytester, "--image", str(image), "--guest-memory", "2048", "--guest-vcpus", "4", "--boot-timeout", "90")
    assert opts_line(result) == f"OPTS {image} bios 2048 4 90.0 None None"


def test_a_login_takes_all_three_and_an_image(pytester: pytest.Pytester) -> None:
    key, pub = keypair(pytester.path)
    host = pytester.path / "host.pub"
    host.write_text(pub + "\n")
    result = run(pytester, "--image", "x.raw", "--guest-user", "qa", "--guest-key", str(key))
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--guest-user, --guest-key needs --guest-host-key too*"])
    result = run(pytester, "--guest-user", "qa", "--guest-key", str(key), "--guest-host-key", str(host))
    assert result.ret == 4
    result.stderr.fnmatch_lines([("*--guest-user, --guest-key, --guest-host-key log in to a --image guest; "
                                 "give --image PATH too*")])
    result = run(pytester, "--image", "x.raw", "--guest-user", "qa", "--guest-key", str(key), "--guest-host-key",
                 str(host))
    assert result.ret == 0, result.stderr.str()
    # The file's line, without its comment, is what is pinned; a line works as well as a file.
    assert opts_line(result).endswith(f"qa {' '.join(pub.split()[:2])}")
    result = run(pytester, "--image", "x.raw", "--guest-user", "qa", "--guest-key", str(key), "--guest-host-key",
                 pub)
    assert result.ret == 0 and opts_line(result).endswith(f"qa {' '.join(pub.split()[:2])}")


def test_bad_keys_and_firmware_without_image_are_usage_errors(pytester: pytest.Pytester) -> None:
    notes = pytester.path / "notes.txt"
    notes.write_text("hello\n")
    result = run(pytester, "--image", "x.raw", "--guest-key", str(notes))
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"*{notes} is not a private key the suite can read*"])
    result = run(pytester, "--image", "x.raw", "--guest-host-key", str(notes))
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"*{notes} holds no SSH public key line*"])
    result = run(pytester, "--image", "x.raw", "--guest-host-key", "ssh-ed25519 AAAAnotbase64!")
    assert result.ret == 4
    result = run(pytester, "--firmware", "uefi")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--firmware applies to --image*"])
    result = run(pytester, "--image", "x.raw", "--hypervisor", "vsphere")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--image boots a file under libvirt*"])


def test_help_names_the_image_options(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--help")
    out = result.stdout.str()
    for option in ("--image", "--firmware", "--guest-memory", "--guest-vcpus", "--guest-user", "--guest-key",
                   "--guest-host-key"):
        assert option in out, option


def test_suite_options_defaults_are_the_embedded_guest() -> None:
    o = SuiteOptions.__dataclass_fields__
    assert o["image"].default is None and o["firmware"].default == "bios"
