"""Comments and docstrings of product code say what the code does and why, not its history.

A constant keeps its derivation beside it (what was measured, how, the spread, the formula); a dated
measurement, a former value ("15 s (30 s until then)"), an old timing ("was 30 s") or an anecdote
("seen twice in about fifteen runs") goes to the commit message, or with its date to
docs/benchmarks.md, the page for dated figures. This test reads every comment and docstring of the
product code (everything but tests/ and docs/) and lists each such phrase as ``file:line``.

Python files are read with ``tokenize`` (comments) and ``ast`` (docstrings, and every other string
that stands alone as a statement, such as an attribute's docstring); shell, Go and configuration
files by their ``#`` or ``//`` comments. Code is never read: a date format string or an example log
line in a string literal is not a comment.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The product code: every folder and top-level file but tests/ and docs/ (README.md is documentation).
PRODUCT_DIRS = ("model", "transport", "guest", "hypervisors", "measure", "fixtures", "suites", "reports",
                "bench", "scripts", "tools")
PRODUCT_FILES = ("conftest.py", "tox.ini", "pyproject.toml", ".ci/run")

#: Suffixes whose comments start with ``#``, and with ``//``; a file without a suffix is read as
#: shell when its first line is a ``#!`` line (images/init, .ci/run).
HASH_COMMENT_SUFFIXES = (".sh", ".ini", ".toml", ".cfg")
SLASH_COMMENT_SUFFIXES = (".go",)

#: Each phrase that narrates history, and the pattern that finds it (case-insensitive).
HISTORY: dict[str, re.Pattern[str]] = {
    # 2026-11-24; not a timestamp in an example log line ("2026-11-23T14:28:06", "... 14:26:13")
    "a date": re.compile(r"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b(?![T ]\d\d:\d\d)"),
    "until <then/date>": re.compile(r"\buntil (?:then|recently|(?:19|20)\d\d|yesterday|today|last)\b",
                                    re.IGNORECASE),
    # "(was 3 s)", "(previously 30)"; not a question such as "(was collection started with -s?)"
    "a former value in parentheses": re.compile(r"\((?:was|previously|formerly|before:?)\s+(?:about\s+|~)?\d",
                                                re.IGNORECASE),
    "was/were <duration>": re.compile(r"\b(?:was|were|used to be)\s+(?:about\s+|~)?\d+(?:\.\d+)?"
                                      r"(?:\s*-\s*\d+(?:\.\d+)?)?\s*(?:s|ms|us|µs|min|minutes?|seconds?)\b",
                                      re.IGNORECASE),
    "seen N times": re.compile(r"\bseen\s+(?:once|twice|thrice|\w+\s+times)\b|"
                               r"\b(?:once|twice|thrice|\d+\s+times)\s+in\s+(?:about\s+)?\d+\b", re.IGNORECASE),
    "seen here / in CI": re.compile(r"\bseen\s+(?:here|in\s+CI|on\s+(?:a|one|the)\s+CI)\b", re.IGNORECASE),
    "today / yesterday": re.compile(r"\b(?:today|yesterday)\b", re.IGNORECASE),
    "an old timing": re.compile(r"\bwent from\s+\d|\binstead of\s+\d+(?:\.\d+)?(?:\s*-\s*\d+(?:\.\d+)?)?\s*"
                                r"(?:s|ms|min)\b|\bsince\s+(?:19|20)\d\d\b", re.IGNORECASE),
}


def product_files(root: Path = ROOT) -> Iterator[Path]:
    """Every file of the product code whose comments this test reads, in a stable order."""
    for name in PRODUCT_FILES:
        if (root / name).is_file():
            yield root / name
    for folder in PRODUCT_DIRS:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and readable_kind(path) is not None:
                yield path


def readable_kind(path: Path) -> str | None:
    """How the file's comments are read: "python", "hash", "slash", or None (not read)."""
    if path.suffix == ".py":
        return "python"
    if path.suffix in HASH_COMMENT_SUFFIXES:
        return "hash"
    if path.suffix in SLASH_COMMENT_SUFFIXES:
        return "slash"
    if not path.suffix:
        with path.open("rb") as f:
            if f.read(2) == b"#!":
                return "hash"
    return None


def python_comments(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment, docstring and lone string statement of a Python module."""
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for offset, line in enumerate(node.value.value.splitlines()):
                yield node.lineno + offset, line


#: Where a comment starts on a line: at its start, or after white space (``${#x}`` and URLs' ``//``
#: are no comments).
HASH_COMMENT = re.compile(r"(?:^|\s)(#.*)$")
SLASH_COMMENT = re.compile(r"(?:^|\s)(//.*)$")


def line_comments(source: str, kind: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every ``#`` (``kind`` "hash") or ``//`` ("slash") comment."""
    pattern = HASH_COMMENT if kind == "hash" else SLASH_COMMENT
    for number, line in enumerate(source.splitlines(), 1):
        found = pattern.search(line)
        if found:
            yield number, found.group(1)


def comments_of(path: Path) -> Iterator[tuple[int, str]]:
    source = path.read_text(encoding="utf-8")
    kind = readable_kind(path)
    if kind == "python":
        yield from python_comments(source)
    elif kind is not None:
        yield from line_comments(source, kind)


def history_in(text: str) -> list[str]:
    """The names of the history phrases ``text`` holds (empty: none)."""
    return [name for name, pattern in HISTORY.items() if pattern.search(text)]


#: A comment's marker and the white space after it: ``#:``, ``#``, ``//``.
COMMENT_MARK = re.compile(r"^\s*(?:#:?|//)?\s*")


def blocks(lines: list[tuple[int, str]]) -> Iterator[list[tuple[int, str]]]:
    """Runs of comment lines on consecutive source lines: a phrase may wrap onto the next line."""
    run: list[tuple[int, str]] = []
    for number, text in sorted(set(lines)):
        if run and number != run[-1][0] + 1:
            yield run
            run = []
        run.append((number, text))
    if run:
        yield run


def block_hits(run: list[tuple[int, str]]) -> Iterator[tuple[int, str, str]]:
    """(line, phrase, that line's text) for each history phrase in a run of comment lines, the
    line being the one where the phrase starts."""
    joined, starts = "", []
    for number, text in run:
        starts.append((len(joined), number, text))
        joined += COMMENT_MARK.sub("", text, count=1) + " "
    for name, pattern in HISTORY.items():
        for found in pattern.finditer(joined):
            _, number, text = max(start for start in starts if start[0] <= found.start())
            yield number, name, text


def history_hits(root: Path = ROOT) -> list[str]:
    """``file:line: phrase: text`` for each comment line of the product code that narrates history."""
    hits: list[tuple[str, int, str]] = []
    for path in product_files(root):
        relative = path.relative_to(root)
        for run in blocks(list(comments_of(path))):
            hits.extend((str(relative), number, f"{name}: {text.strip()}") for number, name, text in block_hits(run))
    return [f"{file}:{number}: {what}" for file, number, what in sorted(set(hits))]


def test_no_history_in_product_comments() -> None:
    hits = history_hits()
    assert not hits, ("comments and docstrings of product code narrate history (move dated figures to "
                      "docs/benchmarks.md, the rest to the commit message; keep each constant's "
                      "derivation):\n" + "\n".join(hits))


@pytest.mark.parametrize("text", [
    "# 15 s (30 s until then): 7x KVM's time",
    "#: hangs rather than fails (seen on this machine's nested KVM on 2026-11-25: no marker)",
    "the window (was 3 s)",
    "the ramp was 1 s, now 0.5 s",
    "a start-up hang was seen twice in about 15 pool runs",
    "Seen once in 11 pushes into the embedded guest under load",
    "no work and the run never ends (seen here)",
    "soft lockup in dropbearkey, seen once in CI",
    "measured today on the CI host",
    "the boot to init went from 1.73-1.85 s to 1.38-1.52 s",
    "That test took 42.2-42.4 s instead of 44.9-46.3 s",
])
def test_history_is_found(text: str) -> None:
    assert history_in(text), text


@pytest.mark.parametrize("text", [
    '# "2026-11-23T14:28:06.713888Z qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69"',
    '#: "2026-11-23 14:26:13.156+0000: starting up libvirt version: 9.0.0, package: ..."',
    "``trend-<series>-20261123.html``; results/20240501-101500-4242",
    "strftime('%Y-%m-%d') names the day",
    "QEMU 7.2.19, fio-3.33, libvirt 9.0.0, pytest-xdist 3.8, Linux 4.18 (RHEL 8)",
    "at depth 32 the host depth's CV was 2.9 % (24-26 of 32)",
    "the host's load average was 5-8",
    "``outcome`` stays None until a phase of the test decides it",
    '"hypervisor" where cmd_per_lun was 1 and 128 was asked',
    "(was collection started with -s?)",
    "Did tonight's QEMU change what the guest's storage sees, compared with last night's?",
    "cloud-init 22.4 since it gives no key; QEMU (since 4.0) loads such an ELF",
    "a failure they cached has no cause, so it counts as not probed",
])
def test_legitimate_text_is_not_flagged(text: str) -> None:
    assert not history_in(text), history_in(text)


def test_hits_name_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "x.py").write_text('"""Doc."""\n\nX = 15  # s (30 s until then)\n'
                                             'def f() -> None:\n    """Measured today."""\n')
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "s.sh").write_text("#!/bin/sh\necho '# 2026-11-24 is not a comment here' # but this, 2026-11-24\n")
    (tmp_path / "model" / "y.py").write_text("# the boot went\n# from 1.8 s to 1.4 s\n")
    assert history_hits(tmp_path) == [
        "model/x.py:3: until <then/date>: # s (30 s until then)",
        "model/x.py:5: today / yesterday: Measured today.",
        "model/y.py:1: an old timing: # the boot went",
        "scripts/s.sh:2: a date: # but this, 2026-11-24",
    ]
