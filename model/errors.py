"""Errors raised by the data model's parsers."""

from __future__ import annotations


class ParseError(ValueError):
    """Raised when recorded or live tool output cannot be understood.

    The message names the source (file, tool or field) and what was wrong with it,
    so a user can tell whether the tool, its version or the collection step is at fault.
    """
