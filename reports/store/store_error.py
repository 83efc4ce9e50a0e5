"""What goes wrong with a store: :class:`StoreError`, whose message names the cause and the remedy."""

from __future__ import annotations

from model.secret import scrub


class StoreError(Exception):
    """A store or a run that cannot be used; the message names the cause and the remedy."""



def first_line(e: BaseException) -> str:
    """The error's first line, any registered password in it masked (a driver may quote its DSN)."""
    return scrub(str(getattr(e, "orig", None) or e).splitlines()[0])

