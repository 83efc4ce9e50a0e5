"""Parsing of vSphere targets and config files; the password never prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypervisors.vsphere.config import TARGET_EXAMPLE, ConfigError, parse_target
from images.cloudinit import DEFAULT_GUEST_USER
from model.errors import HypervisorError
from model.secret import PASSWORD_ENV, Secret, scrub
from tests.vsphere.frames import ROOT, shown_locals


@pytest.fixture
def password(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(PASSWORD_ENV, "s3cret-pw")
    return "s3cret-pw"


@pytest.fixture
def no_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PASSWORD_ENV, raising=False)


def test_url_target_with_sso_user_and_options(password: str) -> None:
    cfg = parse_target("vsphere://administrator@vsphere.local@vc.example.com:8443/deb12"
                       "?datastore=ds1&cluster=c1&insecure=yes&ip_timeout_s=90&guest_key_path=~/k"
                       "&guest_prep=rpctool&guest_host_key=ssh-ed25519%20AAAA")
    assert (cfg.user, cfg.host, cfg.port) == ("administrator@vsphere.local", "vc.example.com", 8443)
    assert cfg.template == "deb12"
    assert (cfg.datastore, cfg.cluster, cfg.insecure, cfg.ip_timeout_s) == ("ds1", "c1", True, 90.0)
    assert cfg.guest_key_path == Path("~/k").expanduser()
    assert cfg.password.reveal() == "s3cret-pw"
    assert cfg.label == "vsphere://administrator@vsphere.local@vc.example.com:8443/deb12"


def test_password_never_in_repr_str_or_label(password: str) -> None:
    cfg = parse_target("vsphere://u@vc/?template=t")
    for text in (repr(cfg), str(cfg), cfg.label, repr(cfg.password), str(cfg.password), f"{cfg.password}"):
        assert "s3cret-pw" not in text


def test_toml_file_with_relative_password_file(tmp_path: Path, no_password: None) -> None:
    (tmp_path / "pw").write_text("from-file\n")
    conf = tmp_path / "vsphere.toml"
    conf.write_text('[vsphere]\nhost = "vc"\ntemplate = "t"\npassword_file = "pw"\nesxi_ssh_port = 2222\n'
                    'insecure = true\nguest_prep = "rpctool"\nguest_host_key = "ssh-ed25519 AAAA"\n')
    cfg = parse_target(str(conf))
    assert cfg.password == Secret("from-file")
    assert (cfg.esxi_ssh_port, cfg.insecure, cfg.guest_host_key) == (2222, True, "ssh-ed25519 AAAA")
    assert (cfg.guest_prep, cfg.login_user) == ("rpctool", "root")


def test_cloud_init_is_the_default_template_preparation(password: str) -> None:
    cfg = parse_target("vsphere://u@vc/t")
    assert (cfg.guest_prep, cfg.login_user, cfg.guest_host_key, cfg.guest_key_path) == \
        ("cloud-init", DEFAULT_GUEST_USER, "", None)
    assert parse_target("vsphere://u@vc/t?guest_user=qa").login_user == "qa"
    rpctool = parse_target("vsphere://u@vc/t?guest_prep=rpctool&guest_host_key=ssh-ed25519%20AAAA&guest_user=admin")
    assert (rpctool.login_user, rpctool.guest_host_key) == ("admin", "ssh-ed25519 AAAA")


@pytest.mark.parametrize(("query", "message"), [
    ("guest_prep=ansible", "guest_prep='ansible' is not one of cloud-init, rpctool"),
    ("guest_host_key=ssh-ed25519%20AAAA", 'guest_host_key is for guest_prep = "rpctool" only.*remove it'),
    ("guest_key_path=~/k&guest_host_key=x", 'guest_host_key and guest_key_path are for guest_prep = "rpctool"'),
    ("guest_user=root", "guest_user='root' cannot be the user cloud-init creates.*rpctool"),
    ("guest_user=Bad%20Name", "guest_user='Bad Name' cannot be the user cloud-init creates"),
    ("guest_prep=rpctool", 'guest_prep = "rpctool" needs guest_host_key.*ssh-keyscan'),
])
def test_guest_access_errors_come_before_the_password(query: str, message: str, no_password: None) -> None:
    """One line naming the key and the fix, before the password is looked for (none is set here)."""
    with pytest.raises(ConfigError, match=message) as info:
        parse_target(f"vsphere://u@vc/t?{query}")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("target", "message"), [
    ("vsphere://u:pw@vc/t", "remove the password from the URL"),
    ("vsphere://u@vc/t?password=typed-in-url", "do not write the password"),
    ("vsphere://u@vc/", "template missing"),
    ("vsphere://u@vc/t?colour=red", "unknown key.*colour"),
    ("vsphere://u@vc/t?port=https", "port='https' is not a valid int"),
    ("vsphere://u@vc/t?insecure=maybe", "insecure='maybe' is not a valid bool"),
    ("/nonexistent/vioc.toml", "neither vsphere://... nor an existing config file"),
])
def test_bad_targets_say_what_to_fix(target: str, message: str, password: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_target(target)


def test_missing_password_names_both_sources(no_password: None) -> None:
    with pytest.raises(ConfigError, match=f"{PASSWORD_ENV}.*password_file"):
        parse_target("vsphere://u@vc/t")


def test_backend_from_suite_options(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from hypervisors import get_backend_class
    from hypervisors.cleanup import CleanupStack
    from hypervisors.vsphere.config import TARGET_ENV

    cls = get_backend_class("vsphere")
    monkeypatch.setenv(PASSWORD_ENV, "pw-from-env")
    backend = cls.from_options(CleanupStack(), SimpleNamespace(vcenter="vsphere://u@vc/tmpl?cluster=c"))
    assert (backend.config.template, backend.config.cluster, backend.name) == ("tmpl", "c", "vsphere")
    assert set(backend.controllers) == {"pvscsi", "lsilogic-sas", "lsilogic", "nvme"}
    monkeypatch.delenv(TARGET_ENV, raising=False)
    with pytest.raises(HypervisorError, match="needs --vcenter"):
        cls.from_options(CleanupStack(), SimpleNamespace(vcenter=None))



def test_malformed_target_is_reported_before_the_missing_password(no_password: None) -> None:
    """The issue's target: what is wrong with it, all at once, with the README's example."""
    with pytest.raises(ConfigError) as info:
        parse_target("vsphere://user@/?datastore")
    assert str(info.value) == (f"vsphere config: host and template missing; datastore= has no value "
                               f"(example: {TARGET_EXAMPLE})")


def test_the_error_example_is_the_readmes() -> None:
    assert TARGET_EXAMPLE == "vsphere://USER@VCENTER/TEMPLATE?datastore=ds1&cluster=c1"
    assert f"`{TARGET_EXAMPLE}`" in (ROOT / "README.md").read_text()


def _pw_file(tmp_path: Path, content: bytes | None) -> str:
    pw = tmp_path / "pw"
    if content is not None:
        pw.write_bytes(content)
    conf = tmp_path / "vsphere.toml"
    conf.write_text('[vsphere]\nhost = "vc"\ntemplate = "t"\npassword_file = "pw"\n')
    return str(conf)


@pytest.mark.parametrize("target", [
    "vsphere://user@/?datastore", "vsphere://u@vc/t?port=https", "vsphere://u@vc/t?colour=red",
    "vsphere://u@vc/t?password_file=/nonexistent/pw", "vsphere://u@vc/t?password_file=/",
])
def test_no_failing_frame_holds_the_environment_or_the_password(target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``pytest -l`` would print of a target error: neither the environment nor the password."""
    if "password_file" in target:
        monkeypatch.delenv(PASSWORD_ENV, raising=False)
        monkeypatch.setenv("SOME_OTHER_VARIABLE", "env-marker-2f9c")
    else:
        monkeypatch.setenv(PASSWORD_ENV, "env-marker-2f9c")
    with pytest.raises(ConfigError) as info:
        parse_target(target)
    shown = shown_locals(info.value)
    assert shown and "env-marker-2f9c" not in shown and PASSWORD_ENV not in shown, shown


def test_password_file_errors_name_the_file_not_its_content(tmp_path: Path, no_password: None) -> None:
    with pytest.raises(ConfigError, match=r"cannot read password_file .*/pw: No such file"):
        parse_target(_pw_file(tmp_path, None))
    with pytest.raises(ConfigError, match=r"cannot read password_file .*/pw: not UTF-8 text") as info:
        parse_target(_pw_file(tmp_path, b"\xffbytes-of-the-password-7d1e"))
    assert "bytes-of-the-password-7d1e" not in str(info.value) + shown_locals(info.value)
    assert info.value.__context__ is None


def test_a_password_written_into_the_target_is_masked_from_then_on(password: str) -> None:
    for target, typed in [("vsphere://u:typed-pw-41c7@vc/t", "typed-pw-41c7"),
                          ("vsphere://u@vc/t?password=typed-pw-93ab", "typed-pw-93ab")]:
        with pytest.raises(ConfigError) as info:
            parse_target(target)
        assert typed not in str(info.value)
        assert scrub(f"<{typed}>") == "<***>"


def test_bad_target_is_a_one_line_error_before_any_guest(no_password: None) -> None:
    """The backend's check before any guest starts: one line, which the session makes a usage error (exit 4)."""
    from types import SimpleNamespace

    from hypervisors.vsphere.backend import VSphereBackend

    for vcenter, message in [("vsphere://user@/?datastore", "host and template missing"),
                             ("vsphere://u@vc/t", "no vCenter password"), (None, "needs --vcenter")]:
        with pytest.raises(ConfigError) as info:
            VSphereBackend.validate_options(SimpleNamespace(vcenter=vcenter))
        text = str(info.value)
        assert message in text and "\n" not in text, text
    assert TARGET_EXAMPLE in text
