"""Parsing of vSphere targets and config files; the password never prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypervisors.base import HypervisorError
from hypervisors.vsphere.config import PASSWORD_ENV, ConfigError, Secret, parse_target

ENV = {PASSWORD_ENV: "s3cret-pw"}


def test_url_target_with_sso_user_and_options() -> None:
    cfg = parse_target("vsphere://administrator@vsphere.local@vc.example.com:8443/deb12"
                       "?datastore=ds1&cluster=c1&insecure=yes&ip_timeout_s=90&guest_key_path=~/k", ENV)
    assert (cfg.user, cfg.host, cfg.port) == ("administrator@vsphere.local", "vc.example.com", 8443)
    assert cfg.template == "deb12"
    assert (cfg.datastore, cfg.cluster, cfg.insecure, cfg.ip_timeout_s) == ("ds1", "c1", True, 90.0)
    assert cfg.guest_key_path == Path("~/k").expanduser()
    assert cfg.password.reveal() == "s3cret-pw"
    assert cfg.label == "vsphere://administrator@vsphere.local@vc.example.com:8443/deb12"


def test_password_never_in_repr_str_or_label() -> None:
    cfg = parse_target("vsphere://u@vc/?template=t", ENV)
    for text in (repr(cfg), str(cfg), cfg.label, repr(cfg.password), str(cfg.password), f"{cfg.password}"):
        assert "s3cret-pw" not in text


def test_toml_file_with_relative_password_file(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("from-file\n")
    conf = tmp_path / "vsphere.toml"
    conf.write_text('[vsphere]\nhost = "vc"\ntemplate = "t"\npassword_file = "pw"\nesxi_ssh_port = 2222\n'
                    'insecure = true\nguest_host_key = "ssh-ed25519 AAAA"\n')
    cfg = parse_target(str(conf), {})
    assert cfg.password == Secret("from-file")
    assert (cfg.esxi_ssh_port, cfg.insecure, cfg.guest_host_key) == (2222, True, "ssh-ed25519 AAAA")


@pytest.mark.parametrize(("target", "message"), [
    ("vsphere://u:pw@vc/t", "remove the password from the URL"),
    ("vsphere://u@vc/t?password=x", "do not write the password"),
    ("vsphere://u@vc/", "template missing"),
    ("vsphere://u@vc/t?colour=red", "unknown key.*colour"),
    ("vsphere://u@vc/t?port=https", "port='https' is not a valid int"),
    ("vsphere://u@vc/t?insecure=maybe", "insecure='maybe' is not a valid bool"),
    ("/nonexistent/vioc.toml", "neither vsphere://... nor an existing config file"),
])
def test_bad_targets_say_what_to_fix(target: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_target(target, ENV)


def test_missing_password_names_both_sources() -> None:
    with pytest.raises(ConfigError, match=f"{PASSWORD_ENV}.*password_file"):
        parse_target("vsphere://u@vc/t", {})


def test_backend_from_suite_options(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from hypervisors import get_backend_class
    from hypervisors.cleanup import CleanupStack
    from hypervisors.vsphere.config import TARGET_ENV

    cls = get_backend_class("vsphere")
    monkeypatch.setenv(PASSWORD_ENV, "pw")
    backend = cls.from_options(CleanupStack(), SimpleNamespace(vcenter="vsphere://u@vc/tmpl?cluster=c"))
    assert (backend.config.template, backend.config.cluster, backend.name) == ("tmpl", "c", "vsphere")
    assert set(backend.controllers) == {"pvscsi", "lsilogic-sas", "lsilogic", "nvme"}
    monkeypatch.delenv(TARGET_ENV, raising=False)
    with pytest.raises(HypervisorError, match="needs --vcenter"):
        cls.from_options(CleanupStack(), SimpleNamespace())

