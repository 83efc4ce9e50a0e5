"""The suite's commands in the README and docs/ are ``./vioconform ...``: what tox runs with the arguments
untouched and the exit code kept (tests/e2e/test_readme_commands.py runs each one through Debian's tox).
None is ``tox -e suite -- ARGS``: Debian's tox 3.28 reads ``{disk}`` in ARGS as a substitution of its own
(``ConfigError: substitution key 'disk' not found``) and turns every non-zero exit code into 1."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WRAPPER = "./vioconform"
#: The pages whose commands a user copies: the README and every page under docs/.
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
_FENCE = re.compile(r"^```(\w*)\s*$")
_INLINE = re.compile(r"`(\./vioconform[^`]*)`")


def shell_lines(page: Path) -> list[tuple[int, str]]:
    """(line number, command) of every line of the page's ``sh`` code blocks, continuation lines (``\\``)
    joined into the line they continue."""
    found: list[tuple[int, str]] = []
    language: str | None = None
    pending: tuple[int, str] | None = None
    for n, line in enumerate(page.read_text().splitlines(), 1):
        fence = _FENCE.match(line)
        if fence:
            language = None if language is not None else fence.group(1)
            continue
        if language != "sh":
            continue
        start, text = pending if pending else (n, "")
        text += line.strip()
        if text.endswith("\\"):
            pending = (start, text[:-1].rstrip() + " ")
            continue
        pending = None
        found.append((start, text))
    return found


def recipes() -> list[tuple[str, str]]:
    """(where, command) of every ``./vioconform`` command of the README and docs/, in code blocks and inline
    code, each command once."""
    seen: dict[str, str] = {}
    for page in PAGES:
        where = page.relative_to(ROOT)
        for n, text in shell_lines(page):
            if text.startswith(WRAPPER + " ") or text == WRAPPER:
                seen.setdefault(text, f"{where}:{n}")
        for n, line in enumerate(page.read_text().splitlines(), 1):
            for m in _INLINE.finditer(line):
                if m.group(1).startswith(WRAPPER + " ") and "[OPTIONS]" not in m.group(1):  # not a placeholder
                    seen.setdefault(m.group(1), f"{where}:{n}")
    return [(where, text) for text, where in seen.items()]


def test_no_page_runs_the_suite_through_tox_with_arguments() -> None:
    through_tox = [f"{page.relative_to(ROOT)}:{n}: {text}" for page in PAGES for n, text in shell_lines(page)
                   if re.search(r"\btox -e suite\b", text)]
    assert not through_tox, "use ./vioconform ARGS (tox 3 substitutes {...} and exits 1 on any failure):\n" + \
        "\n".join(through_tox)


def test_the_recipes_are_found_and_the_wrapper_is_executable() -> None:
    found = {text: where for where, text in recipes()}
    braces = found.get("./vioconform --guest-setup 'echo 2 > /sys/block/{disk}/device/queue_depth'", "")
    assert braces.startswith("README.md:"), found
    assert any(text.startswith("./vioconform --hypervisor vsphere --controllers") and "--vcenter" in text
               for text in found), found  # a continued line, joined
    assert "./vioconform --help          # every option, in the \"vioconform\" group" in found
    assert os.access(ROOT / "vioconform", os.X_OK)
    assert (ROOT / "vioconform").read_text().startswith("#!/usr/bin/env bash\n")
