"""A string that never prints itself, and the registry of every such value this process holds.

``Secret`` keeps a credential out of reprs, f-strings and tracebacks' locals (it prints ``***``);
``reveal()`` gives the value to the one call that needs it (the vCenter login). Every Secret's
value is registered when it is made, and ``scrub(text)`` replaces each registered value with
``***``: reports/redact.py runs every test report, captured output and log record through it, so
a value that slips past ``Secret`` (a library's frame holding the revealed string, an exception
that quotes it) still never reaches the terminal, a JUnit file or the HTML report.

Values are registered whatever their length: a one-character password masks every such
character in the reports, which is ugly but shows nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection

MASK = "***"

#: The vCenter password's environment variable: the vSphere backend reads it, and reports/redact.py
#: masks its value at any length (a short password is still a credential).
PASSWORD_ENV = "VIOCONFORM_VCENTER_PASSWORD"

#: Environment variables whose values are credentials wherever they come from (``AWS_SECRET_ACCESS_KEY``,
#: ``GITHUB_TOKEN``, ``VIOCONFORM_VCENTER_PASSWORD``): their values are registered at start-up.
CREDENTIAL_NAME = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|CREDENTIAL|PRIVATE_KEY", re.IGNORECASE)
#: Shorter values of such variables are flags (``..._TOKEN_FILE=1``), not credentials: masking every
#: "1" would wreck the numbers in the reports. Values a ``Secret`` holds are registered at any length.
MIN_ENV_CREDENTIAL_CHARS = 8

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
