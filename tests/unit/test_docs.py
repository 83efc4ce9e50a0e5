"""The README and docs/ stay true to the code: every relative link resolves (the file, and the heading
an ``#anchor`` names), every option ``--help`` lists has its entry in docs/reference.md and no option
there is unknown to the parser, every rule has its page, every ``python -m`` tool is in the reference,
and the README stays short. Each failure names the file, the line and what is wrong."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _pytest.config.argparsing import Parser

from fixtures import options
from tests.unit.test_tool_help import module_tools

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
REFERENCE = DOCS / "reference.md"
#: The README is the front page: what the tool is for, the two commands, a run, five recipes and the
#: docs' index (issue 26: "at most about 200 lines"); the rest lives in docs/.
README_MAX_LINES = 200


def doc_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def prose_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of the lines outside fenced code blocks, inline code removed."""
    fenced = False
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield n, re.sub(r"`[^`]*`", "", line)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a Markdown file (a repeated heading gets -1, -2...)."""
    seen: dict[str, int] = {}
    found = set()
    fenced = False
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or not m:
            continue
        base = slug(m.group(1))
        k = seen.get(base, 0)
        seen[base] = k + 1
        found.add(base if k == 0 else f"{base}-{k}")
    return found


LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def relative_links() -> list[tuple[Path, int, str]]:
    links = []
    for path in doc_files():
        for n, line in prose_lines(path):
            for target in LINK.findall(line):
                if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
                    links.append((path, n, target))
    return links


def broken(path: Path, target: str) -> str | None:
    """Why a relative link from ``path`` does not resolve, or None."""
    file_part, _, anchor = target.partition("#")
    dest = (path.parent / file_part).resolve() if file_part else path
    if not dest.exists():
        return f"{file_part} does not exist"
    if anchor:
        if dest.suffix != ".md":
            return f"#{anchor} points into {file_part}, which is not a Markdown file"
        if anchor not in anchors(dest):
            return f"{file_part or path.name} has no heading with the anchor #{anchor}"
    return None


def test_every_relative_link_resolves() -> None:
    links = relative_links()
    assert len(links) > 50, "the link scanner found almost no links: is it still reading the docs?"
    bad = [f"{p.relative_to(ROOT)}:{n}: ({t}): {why}" for p, n, t in links if (why := broken(p, t))]
    assert not bad, "links that do not resolve:\n" + "\n".join(bad)


def test_the_link_checker_sees_a_missing_page_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Title\n\n## Some `code` here, and more\n")
    page = tmp_path / "b.md"
    page.write_text("see [a](a.md), [a's part](a.md#some-code-here-and-more), [none](c.md), [bad](a.md#nope)\n"
                    "```\n[not a link](nowhere.md)\n```\n")
    found = [t for _, line in prose_lines(page) for t in LINK.findall(line)]
    assert found == ["a.md", "a.md#some-code-here-and-more", "c.md", "a.md#nope"]
    assert broken(page, "a.md") is None and broken(page, "a.md#some-code-here-and-more") is None
    assert broken(page, "c.md") == "c.md does not exist"
    assert broken(page, "a.md#nope") == "a.md has no heading with the anchor #nope"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(README.parent / t.partition("#")[0]).resolve() for p, _, t in relative_links() if p == README}
    missing = [str(p.relative_to(ROOT)) for p in sorted(DOCS.rglob("*.md")) if p.resolve() not in linked]
    assert not missing, f"docs pages the README's documentation list does not name: {missing}"


def test_the_readme_stays_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, (f"README.md has {lines} lines (at most {README_MAX_LINES}): move the detail into "
                                       "docs/ and link to it")


# --- options ---------------------------------------------------------------------------------------

def suite_options() -> set[str]:
    """The long names of the "vioconform" group, from the suite's own parser."""
    parser = Parser(_ispytest=True)
    options.pytest_addoption(parser)
    return {name for a in parser.getgroup("vioconform").options for name in a.names() if name.startswith("--")}


def option_table_entries(header: str) -> list[tuple[int, str]]:
    """(line, option) for every ``--option`` in the first cell of reference.md's tables whose first
    column is ``header`` ("option": the suite's; "pytest option": pytest's own)."""
    found = []
    in_table = False
    for n, line in enumerate(REFERENCE.read_text().splitlines(), 1):
        if not line.startswith("|"):
            in_table = False
            continue
        first = line.split("|")[1].strip()
        if not in_table:
            in_table = first == header
            continue
        found += [(n, opt) for opt in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", first)]
    return found


@pytest.fixture(scope="module")
def help_text() -> str:
    """``python -m pytest suites --help``, as a user runs it."""
    done = subprocess.run([sys.executable, "-m", "pytest", "suites", "--help"], cwd=ROOT, text=True,
                          capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_option_help_lists_is_in_the_reference(help_text: str) -> None:
    group = help_text[help_text.index("vioconform: storage conformance"):]
    group = group[:group.index("\n\n")]
    listed = set(re.findall(r"^  (--[a-z][a-z0-9-]*)", group, re.MULTILINE))
    assert listed == suite_options(), "the help's vioconform group and the parser differ"
    documented = {opt for _, opt in option_table_entries("option")}
    missing = sorted(listed - documented)
    assert not missing, f"options --help lists that docs/reference.md's option tables do not: {missing}"


def test_no_option_in_the_reference_is_unknown() -> None:
    known = suite_options()
    unknown = [f"docs/reference.md:{n}: {opt}" for n, opt in option_table_entries("option") if opt not in known]
    assert not unknown, "options in the reference's option tables that the parser does not know (removed?):\n" + \
        "\n".join(unknown)


def test_no_pytest_option_in_the_reference_is_unknown(help_text: str) -> None:
    known = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", help_text))
    entries = option_table_entries("pytest option")
    assert entries, "the reference has no table of pytest's options"
    unknown = [f"docs/reference.md:{n}: {opt}" for n, opt in entries if opt not in known]
    assert not unknown, "pytest options in the reference that pytest --help does not list:\n" + "\n".join(unknown)


# --- rules and tools ------------------------------------------------------------------------------

def rules() -> set[str]:
    """Every rule: the suites' ``@pytest.mark.rule(...)`` markers and model/rules' ``RULE``."""
    marked = {m for p in (ROOT / "suites").glob("test_*.py")
              for m in re.findall(r"@pytest\.mark\.rule\(\"([^\"]+)\"\)", p.read_text())}
    judged = {m for p in (ROOT / "model" / "rules").glob("*.py")
              for m in re.findall(r"^RULE = \"([^\"]+)\"", p.read_text(), re.MULTILINE)}
    assert marked == judged, f"suites' rule markers {sorted(marked)} and model/rules' RULEs {sorted(judged)} differ"
    return marked


def test_every_rule_has_its_page_and_every_page_its_rule() -> None:
    found = rules()
    assert len(found) >= 7
    pages = {p.stem for p in (DOCS / "rules").glob("*.md")}
    assert not found - pages, f"rules without a page docs/rules/<rule>.md: {sorted(found - pages)}"
    assert not pages - found, f"pages under docs/rules/ for no rule: {sorted(pages - found)}"


@pytest.mark.parametrize("module", module_tools())
def test_every_tool_is_in_the_reference(module: str) -> None:
    assert f"python -m {module}" in REFERENCE.read_text(), (
        f"python -m {module} is not in docs/reference.md's command-line tools")
