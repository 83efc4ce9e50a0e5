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
    # guest_prep = "rpctool"        # a template without cloud-init: see VSphereConfig
    # guest_host_key = "ssh-ed25519 AAAA..."

The password comes from ``VIOCONFORM_VCENTER_PASSWORD`` or from ``password_file``; it is held in a
``Secret`` (model/secret.py) whose ``repr``/``str`` print ``***``, so it cannot reach logs, reports or
JUnit by accident; its value is registered, and fixtures/redact.py masks it in every report as well.
Neither the environment nor the raw value is ever held in a frame that can fail: a traceback's
locals (``pytest -l``) cannot show them. The password is looked up last, once the rest of the
target is valid, so a malformed target is reported as malformed.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from images.cloudinit import DEFAULT_GUEST_USER
from model.errors import HypervisorError
from model.secret import PASSWORD_ENV, Secret, register

#: The target (URL or config file) when no --vcenter / --target is given.
TARGET_ENV = "VIOCONFORM_VSPHERE_TARGET"
#: The URL form as the README's vCenter recipe shows it; every error about a target quotes this one.
TARGET_EXAMPLE = "vsphere://USER@VCENTER/TEMPLATE?datastore=ds1&cluster=c1"
#: How a clone learns the run's key and which SSH host key it presents (``guest_prep``); the first is the default.
GUEST_PREPS = ("cloud-init", "rpctool")
#: A login name cloud-init can create (what useradd accepts on every distribution, at most 32 characters).
_USER_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")


class ConfigError(HypervisorError):
    """The vSphere target or config file is wrong; the message says which key and how to fix it."""


@dataclass(frozen=True)
class VSphereConfig:
    """Everything the vSphere backend needs, parsed once.

    ``guest_prep`` says how the template is prepared, which decides how a clone learns the run's
    key, who logs in and which SSH host key is pinned:

    - ``"cloud-init"`` (the default): cloud-init's VMware datasource reads the ``guestinfo.userdata``
      and ``guestinfo.metadata`` the backend sets on each clone before power-on. The user-data makes
      ``guest_user`` (default ``vioconform``, a passwordless sudoer the suite uses through
      ``sudo -n``) trust the run key, and installs an SSH host key the suite generated for this
      clone, which is then the pinned key: known before the clone boots, no trust on first use.
      ``guest_host_key`` and ``guest_key_path`` do not apply (an error names them).
    - ``"rpctool"``: the template's boot script reads ``guestinfo.vioconform.authorized_key`` with
      ``vmware-rpctool`` into root's ``authorized_keys`` (or root already trusts ``guest_key_path``,
      a private key given here); ``guest_user`` defaults to ``root``. Clones keep the template's
      host key: ``guest_host_key`` pins it and is required.

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
    guest_prep: str = GUEST_PREPS[0]
    guest_user: str = ""
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

    def __post_init__(self) -> None:
        """The guest access checks hold however the config was made (a target, a file, or in code)."""
        problem = guest_access_problem(self.guest_prep, self.guest_user, bool(self.guest_host_key),
                                       self.guest_key_path is not None)
        if problem:
            raise ConfigError(problem)

    @property
    def login_user(self) -> str:
        """Who the suite logs in as: ``guest_user``, else cloud-init's user or root (``rpctool``)."""
        return login_user(self.guest_prep, self.guest_user)

    @property
    def label(self) -> str:
        """The test id: ``vsphere://user@host:port/template`` (no password)."""
        return f"vsphere://{self.user}@{self.host}:{self.port}/{self.template}"


def login_user(guest_prep: str, guest_user: str) -> str:
    return guest_user or (DEFAULT_GUEST_USER if guest_prep == "cloud-init" else "root")


def guest_access_problem(guest_prep: str, guest_user: str, has_host_key: bool, has_key_path: bool) -> str | None:
    """What is wrong with the guest access settings, as one line, or None."""
    if guest_prep not in GUEST_PREPS:
        return f"vsphere config: guest_prep={guest_prep!r} is not one of {', '.join(GUEST_PREPS)}"
    if guest_prep == "rpctool":
        if not has_host_key:
            return ("vsphere config: guest_prep = \"rpctool\" needs guest_host_key, the SSH host key line every "
                    "clone of the template presents (ssh-keyscan -t ed25519 <a clone>)")
        return None
    misplaced = [k for k, given in (("guest_host_key", has_host_key), ("guest_key_path", has_key_path)) if given]
    if misplaced:
        return (f"vsphere config: {' and '.join(misplaced)} {'are' if len(misplaced) > 1 else 'is'} for "
                f"guest_prep = \"rpctool\" only; with cloud-init (the default) each clone trusts the run key and "
                f"gets a host key the suite generates: remove {'them' if len(misplaced) > 1 else 'it'}, "
                f"or set guest_prep = \"rpctool\"")
    user = login_user(guest_prep, guest_user)
    if not _USER_NAME.fullmatch(user) or user == "root":
        return (f"vsphere config: guest_user={guest_user!r} cannot be the user cloud-init creates: give a non-root "
                f"login name such as {DEFAULT_GUEST_USER!r} (for root, use guest_prep = \"rpctool\")")
    return None


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


def _password_from_env() -> Secret | None:
    """$PASSWORD_ENV, already wrapped: no frame that can fail ever holds the environment or the raw value."""
    return Secret(os.environ[PASSWORD_ENV]) if os.environ.get(PASSWORD_ENV) else None


def _password_from_file(path: Path) -> Secret:
    """The password file's content (stripped), already wrapped; an error names the file, never its content.

    The error is raised outside the ``except`` blocks: no chained exception keeps the bytes read.
    """
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a FIFO's read would wait for a writer for ever
            raise ConfigError(f"vsphere config: password_file {path} is not a regular file (a FIFO, a device or "
                              "a directory); give a file that holds the password")
        return Secret(path.read_bytes().decode().strip())
    except OSError as e:
        reason = e.strerror or type(e).__name__
    except UnicodeDecodeError:
        reason = "not UTF-8 text"
    raise ConfigError(f"vsphere config: cannot read password_file {path}: {reason}")


def _read_password(password_file: object) -> Secret:
    from_env = _password_from_env()
    if from_env is not None:
        return from_env
    if password_file:
        return _password_from_file(Path(str(password_file)).expanduser())
    raise ConfigError(f"no vCenter password: set {PASSWORD_ENV} or give password_file=PATH "
                      f"in the target or config file")


def _problems(values: dict[str, Any]) -> list[str]:
    """What is missing or empty in a target, all at once (``vsphere://user@/?datastore``: no host, no template, an empty datastore)."""
    missing = [k for k in ("host", "template") if not str(values.get(k, "")).strip()]
    empty = [k for k, v in values.items()
             if k not in missing and isinstance(v, str) and not v.strip() and _kind(k) != "bool"]
    out = [f"{' and '.join(missing)} missing"] if missing else []
    return out + [f"{k}= has no value" for k in empty]


def _kind(key: str) -> object:
    return _FIELDS[key].type if key in _FIELDS else "str"


def _build(values: dict[str, Any]) -> VSphereConfig:
    """Check the target's keys first, the password last: a malformed target is reported as such."""
    unknown = sorted(set(values) - set(_FIELDS) - _EXTRA_KEYS - {"password"})
    if unknown:
        raise ConfigError(f"vsphere config: unknown key(s) {', '.join(unknown)}; "
                          f"known: {', '.join(sorted(set(_FIELDS) - {'password'} | _EXTRA_KEYS))}")
    if "password" in values:
        register(str(values["password"]))  # it was typed into a file or URL: mask it wherever it could show
        raise ConfigError(f"vsphere config: do not write the password into the target or config file; "
                          f"set {PASSWORD_ENV} or use password_file=PATH")
    problems = _problems(values)
    if problems:
        raise ConfigError(f"vsphere config: {'; '.join(problems)} (example: {TARGET_EXAMPLE})")
    password_file = values.pop("password_file", None)
    typed = {k: _convert(k, v) for k, v in values.items()}
    access = guest_access_problem(str(typed.get("guest_prep", GUEST_PREPS[0])), str(typed.get("guest_user", "")),
                                  bool(typed.get("guest_host_key")), typed.get("guest_key_path") is not None)
    if access:
        raise ConfigError(access)
    return VSphereConfig(password=_read_password(password_file), **typed)


def parse_target(target: str) -> VSphereConfig:
    """Parse ``vsphere://user@host[:port][/template]?key=value&...`` or a TOML config file path.

    The password comes from $PASSWORD_ENV or the ``password_file`` key, looked up after the rest is valid.
    """
    if not target.startswith("vsphere://"):
        path = Path(target).expanduser()
        if not path.is_file():
            # a mistyped URL may carry user:password@: name only what cannot
            shown = f"{target!r} " if "@" not in target else ""
            raise ConfigError(f"vsphere target {shown}is neither vsphere://... nor an existing config file "
                              f"(example: {TARGET_EXAMPLE})")
        return parse_config_file(path)
    try:
        parts = urlsplit(target)
        in_url = parts.password
    except ValueError as e:
        raise ConfigError(f"vsphere target is not a valid URL ({e}); example: {TARGET_EXAMPLE}") from None
    if in_url is not None:
        register(unquote(in_url))
        register(in_url)
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
    return _build(values)


def parse_config_file(path: Path) -> VSphereConfig:
    """Read the ``[vsphere]`` table of a TOML file."""
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
    return _build(values)
