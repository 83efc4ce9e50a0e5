"""A string that never prints itself, and the registry of every such value this process holds.

``Secret`` keeps a credential out of reprs, f-strings and tracebacks' locals (it prints ``***``);
``reveal()`` gives the value to the one call that needs it (the vCenter login). Every Secret's
value is registered when it is made, and ``scrub(text)`` replaces each registered value with
``***``: fixtures/redact.py runs every test report, captured output and log record through it, so
a value that slips past ``Secret`` (a library's frame holding the revealed string, an exception
that quotes it) still never reaches the terminal, a JUnit file or the HTML report.

Values are registered whatever their length: a one-character password masks every such
character in the reports, which is ugly but shows nothing.

URLs (``--libvirt-uri``, ``--hosts``' ``uri``, ``--store``) may carry a password too: in their
userinfo (``qemu+ssh://root:PASSWORD@host/system``, ``postgresql://u:PASSWORD@db/vioconform``)
or in a query parameter (``?password=...``, libpq's ``sslpassword``, ``passwd``, ``pass``: every key
:func:`secret_param` names, read percent-decoded as SQLAlchemy reads it, so ``?pass%77ord=`` is
``password`` too). ``redact_url`` is the one form in which the suite prints any such URL (errors,
log lines, the "stored:" line, the store's messages); ``register_url`` registers the passwords
themselves, so ``scrub`` masks them wherever else they turn up. A password holding an unencoded
``@`` (``u:ret@Xyz@host``) cannot be told from the host reliably: ``password_holds_at`` finds it,
and the options refuse it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from urllib.parse import unquote, unquote_plus

MASK = "***"

#: The vCenter password's environment variable: the vSphere backend reads it, and fixtures/redact.py
#: masks its value at any length (a short password is still a credential).
PASSWORD_ENV = "VIOCONFORM_VCENTER_PASSWORD"

#: Environment variables whose values are credentials wherever they come from (``AWS_SECRET_ACCESS_KEY``,
#: ``GITHUB_TOKEN``, ``VIOCONFORM_VCENTER_PASSWORD``): their values are registered at start-up.
CREDENTIAL_NAME = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|CREDENTIAL|PRIVATE_KEY", re.IGNORECASE)
#: Shorter values of such variables are flags (``..._TOKEN_FILE=1``), not credentials: masking every
#: "1" would wreck the numbers in the reports. Values a ``Secret`` holds are registered at any length.
MIN_ENV_CREDENTIAL_CHARS = 8

#: Query keys whose value is a credential, as a word in the key: libpq's ``password`` and
#: ``sslpassword`` (the client key's passphrase; the two parameters its connection-option table
#: marks as secret, "*"), ``passwd`` and ``pass`` (MySQL drivers, other tools), and any key naming a
#: passphrase, secret, token, credential or private or API key (PostgreSQL 18's ``oauth_client_secret``).
SECRET_PARAM_WORDS = re.compile(r"^(pass|pwd)$|password|passwd|passphrase|secret|token|credential|private_?key|"
                                r"api_?key", re.IGNORECASE)
#: Keys that name a file holding the credential (libpq's ``passfile``, a vSphere target's
#: ``password_file``): a path, shown as given.
FILE_PARAM = re.compile(r"file$", re.IGNORECASE)
#: ``?key=VALUE``: the key as written (it may be percent-encoded: ``pass%77ord``); the value runs to
#: the next ``&name=`` (or ``;name=``, or ``?name=``: a second ``?`` may start what a reader takes as
#: another parameter) or the URL's end, so a value holding an unencoded ``&`` or ``#`` is masked
#: whole rather than cut at it.
_QUERY_PARAM = re.compile(r"([?&;])([\w.%+\-]+)=(.*?)(?=[?&;][\w.%+\-]+=|$)", re.DOTALL)


def secret_param(key: str) -> bool:
    """Whether a URL query key, as written, holds a credential: percent-decoded (and ``+`` read as a
    space) as SQLAlchemy's URL parser and libpq read it, then matched by :data:`SECRET_PARAM_WORDS`
    unless it names a file. ``pass%77ord`` and ``sslpassword`` do; ``sslkey`` (a path) does not."""
    name = unquote_plus(key).strip()
    return bool(SECRET_PARAM_WORDS.search(name)) and not FILE_PARAM.search(name)


_LIVE: set[str] = set()


class Secret:
    """A string that never prints itself; ``reveal()`` gives the value to the one call that needs it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value
        register(value)

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def register(value: str) -> None:
    """Mask ``value`` in every report from now on (and its escaped form, as ``repr`` prints it)."""
    if value:
        _LIVE.add(value)
        escaped = repr(value)[1:-1]
        if escaped != value:
            _LIVE.add(escaped)


def register_environment(always: Collection[str] = ()) -> None:
    """Register the values of credential-named environment variables (see ``CREDENTIAL_NAME``),
    and of the variables named in ``always`` at any length.

    Reads each value where it is used and keeps none: no frame here holds the environment.
    """
    for name in [n for n in os.environ if n in always or CREDENTIAL_NAME.search(n)]:
        if name in always or len(os.environ[name]) >= MIN_ENV_CREDENTIAL_CHARS:
            register(os.environ[name])


def any_registered() -> bool:
    return bool(_LIVE)


def has_secret(text: str) -> bool:
    return any(value in text for value in _LIVE)


def scrub(text: str) -> str:
    """``text`` with every registered value replaced by ``***`` (longest first, so a value that
    contains another is masked whole)."""
    for value in sorted(_LIVE, key=len, reverse=True):
        if value in text:
            text = text.replace(value, MASK)
    return text


def _userinfo(url: str) -> tuple[str, str, str] | None:
    """(``scheme://``, the userinfo, ``@host...``), or None for a URL with no userinfo.

    Read as SQLAlchemy reads a URL, which is more than RFC 3986 allows: the password may hold
    ``/``, ``?`` and ``#`` unencoded (``postgresql://u:p/w@db/x`` logs in with ``p/w``), and ``@``
    (which no parser can place for sure). So the userinfo runs to the last ``@`` that is either
    before the first ``?`` or ``#`` after the first ``@`` (``u:p@s/w@db``), or reached from the
    first ``@`` without a ``/`` (``u:p@s?w@db``); a query value such as ``keyfile=/home/a@b/key``
    is not part of it. A "user name" holding ``/``, ``?`` or ``#`` is a path or query holding ``@``
    (``sqlite:////data/a@b.db``): no userinfo.
    """
    head, sep, after = url.partition("://")
    first_at = after.find("@")
    if not sep or first_at < 0:
        return None
    query = min((i for i in (after.find("?", first_at), after.find("#", first_at)) if i >= 0), default=len(after))
    path = after.find("/", first_at)
    cut = max(after.rfind("@", 0, query), after.rfind("@", 0, path if path >= 0 else len(after)))
    userinfo = after[:cut]
    if any(c in userinfo.partition(":")[0] for c in "/?#"):
        return None
    return head + sep, userinfo, after[cut:]


def redact_url(url: str) -> str:
    """``url`` as the suite prints it: the userinfo's password and every secret query parameter
    (:func:`secret_param`) as ``***`` (``qemu+ssh://root:***@kvm7/system``); the rest as given."""
    parts = _userinfo(url)
    if parts is not None and ":" in parts[1]:
        head, userinfo, rest = parts
        url = f"{head}{userinfo.partition(':')[0]}:{MASK}{rest}"
    return _QUERY_PARAM.sub(lambda m: f"{m.group(1)}{m.group(2)}={MASK}" if secret_param(m.group(2)) else m.group(0),
                            url)


def url_passwords(url: str) -> list[str]:
    """The passwords ``url`` holds (userinfo, secret query parameters), as written and percent-decoded
    (a query value also with ``+`` as a space, as SQLAlchemy reads it)."""
    parts = _userinfo(url)
    found = [parts[1].partition(":")[2]] if parts is not None and ":" in parts[1] else []
    found += [m.group(3) for m in _QUERY_PARAM.finditer(url) if secret_param(m.group(2))]
    return [v for value in found if value for v in dict.fromkeys((value, unquote(value), unquote_plus(value)))]


def register_url(url: str) -> None:
    """Register the passwords ``url`` holds (see ``url_passwords``): ``scrub`` masks them from now on."""
    for value in url_passwords(url):
        register(value)


def password_holds_at(url: str) -> bool:
    """Whether the userinfo's password holds an unencoded ``@`` (``u:ret@Xyz@host``): more than
    one ``@`` after the user name, where no parser can tell the password's end from the host."""
    parts = _userinfo(url)
    return parts is not None and "@" in parts[1].partition(":")[2]
