"""Where the vSphere backend finds vCenter, the template and the ESXi hosts: one frozen dataclass.

A target is a URL-ish string, which is also the pytest id (the password is never part of it)::

    vsphere://administrator@vsphere.local@vc.example.com/?template=deb12-vioc&datastore=ds1&cluster=c1

or the path of a TOML file with a ``[vsphere]`` table holding the same keys::

    [vsphere]
    host = "vc.example.com"
    user = "administrator@vsphere.local"
    password_file = "~/.config/vioconform/vcenter.pw"
    template = "deb12-vioc"
    datastore = "ds1"
    cluster = "c1"
    guest_host_key = "ssh-ed25519 AAAA..."

The password comes from ``VIOCONFORM_VCENTER_PASSWORD`` or from ``password_file``; it is held in a
``Secret`` whose ``repr``/``str`` print ``***``, so it cannot reach logs, reports or JUnit by accident.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from hypervisors.base import HypervisorError

PASSWORD_ENV = "VIOCONFORM_VCENTER_PASSWORD"
#: The target (URL or config file) when no --vcenter / --target is given.
TARGET_ENV = "VIOCONFORM_VSPHERE_TARGET"


class ConfigError(HypervisorError):
    """The vSphere target or config file is wrong; the message says which key and how to fix it."""


class Secret:
    """A string that never prints itself; ``reveal()`` gives the value to the one call that needs it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True)
class VSphereConfig:
    """Everything the vSphere backend needs, parsed once.

    ``guest_key_path`` is the private key the template's root trusts; when unset the run key
    (``<run_dir>/id_ed25519``) is used, which the template must then accept through the
    ``guestinfo.vioconform.authorized_key`` property the backend sets before power-on.
    ``guest_host_key`` pins the SSH host key every clone of the template presents.
    ``simulate_guest_ip`` is for the simulator only: vcsim reports a guest IP only after a
    reconfigure sets ``SET.guest.ipAddress``; real vCenter ignores the option, so leave it unset there.
    """

    host: str
    template: str
    password: Secret = field(repr=False, compare=False)
    user: str = "administrator@vsphere.local"
    port: int = 443
    datacenter: str = ""
    datastore: str = ""
    cluster: str = ""
    resource_pool: str = ""
    network: str = ""
    insecure: bool = False
    guest_user: str = "root"
    guest_key_path: Path | None = None
    guest_host_key: str = ""
    guest_ssh_port: int = 22
    esxi_user: str = "root"
    esxi_key_path: Path | None = None
    esxi_host_key: str = ""
    esxi_ssh_port: int = 22
    esxi_ssh_host: str = ""
    ip_timeout_s: float = 300.0
    connect_timeout_s: float = 20.0
    task_timeout_s: float = 600.0
    simulate_guest_ip: str = ""

    @property
    def label(self) -> str:
        """The test id: ``vsphere://user@host:port/template`` (no password)."""
        return f"vsphere://{self.user}@{self.host}:{self.port}/{self.template}"


_BOOL = {"1": True, "true": True, "yes": True, "on": True,
         "0": False, "false": False, "no": False, "off": False, "": False}
_FIELDS = {f.name: f for f in fields(VSphereConfig)}
_EXTRA_KEYS = {"password_file"}


def _convert(key: str, raw: Any) -> Any:
    """Turn a raw string/TOML value into the field's type, or raise ConfigError naming the key."""
    kind = _FIELDS[key].type
    try:
        if kind == "bool":
            return raw if isinstance(raw, bool) else _BOOL[str(raw).strip().lower()]
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
        if kind == "Path | None":
            return Path(str(raw)).expanduser()
    except (KeyError, ValueError):
        raise ConfigError(f"vsphere config: {key}={raw!r} is not a valid {kind}") from None
    return str(raw)


def _read_password(values: dict[str, Any], env: dict[str, str]) -> Secret:
    if env.get(PASSWORD_ENV):
        return Secret(env[PASSWORD_ENV])
    pw_file = values.pop("password_file", None)
    if pw_file:
        path = Path(str(pw_file)).expanduser()
        try:
            return Secret(path.read_text().strip())
        except OSError as e:
            raise ConfigError(f"vsphere config: cannot read password_file {path}: {e.strerror}") from None
    raise ConfigError(f"no vCenter password: set {PASSWORD_ENV} or give password_file=PATH "
                      f"in the target or config file")


def _build(values: dict[str, Any], env: dict[str, str]) -> VSphereConfig:
    unknown = sorted(set(values) - set(_FIELDS) - _EXTRA_KEYS - {"password"})
    if unknown:
        raise ConfigError(f"vsphere config: unknown key(s) {', '.join(unknown)}; "
                          f"known: {', '.join(sorted(set(_FIELDS) - {'password'} | _EXTRA_KEYS))}")
    if "password" in values:
        raise ConfigError(f"vsphere config: do not write the password into the target or config file; "
                          f"set {PASSWORD_ENV} or use password_file=PATH")
    password = _read_password(values, env)
    values.pop("password_file", None)
    missing = [k for k in ("host", "template") if not values.get(k)]
    if missing:
        raise ConfigError(f"vsphere config: {' and '.join(missing)} missing "
                          f"(example: vsphere://user@vcenter/?template=NAME)")
    typed = {k: _convert(k, v) for k, v in values.items()}
    return VSphereConfig(password=password, **typed)


def parse_target(target: str, env: dict[str, str] | None = None) -> VSphereConfig:
    """Parse ``vsphere://user@host[:port][/template]?key=value&...`` or a TOML config file path."""
    env = dict(os.environ) if env is None else env
    if not target.startswith("vsphere://"):
        path = Path(target).expanduser()
        if not path.is_file():
            raise ConfigError(f"vsphere target {target!r} is neither vsphere://... nor an existing config file")
        return parse_config_file(path, env)
    parts = urlsplit(target)
    if parts.password is not None:
        raise ConfigError(f"vsphere target: remove the password from the URL; set {PASSWORD_ENV} or password_file=PATH")
    values: dict[str, Any] = dict(parse_qsl(parts.query, keep_blank_values=True))
    netloc = parts.netloc
    user, _, hostport = netloc.rpartition("@")  # user names may contain '@' (administrator@vsphere.local)
    if user:
        values["user"] = unquote(user)
    host, _, port = hostport.partition(":")
    values["host"] = host
    if port:
        values["port"] = port
    if parts.path.strip("/"):
        values.setdefault("template", unquote(parts.path.strip("/")))
    return _build(values, env)


def parse_config_file(path: Path, env: dict[str, str] | None = None) -> VSphereConfig:
    """Read the ``[vsphere]`` table of a TOML file."""
    env = dict(os.environ) if env is None else env
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"vsphere config file {path}: {e}") from None
    table = data.get("vsphere")
    if not isinstance(table, dict):
        raise ConfigError(f"vsphere config file {path} has no [vsphere] table")
    values = dict(table)
    if "password_file" in values:
        pw = Path(str(values["password_file"])).expanduser()
        values["password_file"] = str(pw if pw.is_absolute() else path.parent / pw)
    return _build(values, env)
