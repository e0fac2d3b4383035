"""README.md and docs/ stay a manual: a short README that opens with the two set-up commands,
no history outside CHANGELOG.md (dates, issue numbers, commit hashes), figures dated only on
the one line that heads their table, and links and repo paths in code spans that lead to files
and headings that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
MANUAL = [README, *DOCS]

MAX_README_LINES = 155
DATE = re.compile(r"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b")
ISSUE = re.compile(r"\bissues? #?\d+|(?<![\w&/])#\d+\b", re.IGNORECASE)
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
# a table's heading line: the command in backticks first, then its date (and the machine)
TABLE_HEADING = re.compile(r"^`[^`]+`.*\b(?:19|20)\d\d-[01]\d-[0-3]\d\b")


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code spans."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    headings = re.findall(r"^#{1,6} (.+)$", FENCE.sub("", path.read_text()), re.MULTILINE)
    return {_slug(h) for h in headings}


def test_readme_is_a_short_manual() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines (at most {MAX_README_LINES}): move detail into docs/"
    )


def test_readme_opens_with_the_two_commands() -> None:
    lines = [line for line in README.read_text().splitlines() if line.strip()]
    assert lines[0].startswith("# "), "README.md starts with its title"
    assert lines[1].startswith("```"), "the set-up commands come right after the title"
    commands = [line.split("#")[0].strip() for line in lines[2:4]]
    assert commands == ["make serve", "make test"], commands


def test_the_first_run_says_how_long_it_installs_and_shows_it() -> None:
    """A new user's `make serve` spent minutes installing before the first answer, silently:
    the README's first paragraph says how long, and the install names each package (pip without
    -q) instead of printing nothing."""
    text = README.read_text()
    first = text[text.index("```", text.index("```") + 3) + 3 :].strip().split("\n\n")[0]
    assert re.search(r"\d+(\.\d+)? minutes of installing", first), first
    make = (REPO / "Makefile").read_text()
    install = [ln for ln in make.splitlines() if "pip install" in ln and "-e '.[dev]'" in ln]
    assert install and all(" -q " not in line for line in install), install


@pytest.mark.parametrize("pattern", [DATE, ISSUE, COMMIT], ids=["date", "issue", "commit"])
def test_readme_holds_no_history(pattern: re.Pattern[str]) -> None:
    found = pattern.findall(README.read_text())
    assert not found, f"README.md describes smct as it is; history goes to CHANGELOG.md: {found}"


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_docs_hold_no_history(doc: Path) -> None:
    text = doc.read_text()
    for pattern in (ISSUE, COMMIT):
        found = pattern.findall(text)
        assert not found, f"{_rel(doc)}: history goes to CHANGELOG.md: {found}"
    for number, line in enumerate(text.splitlines(), 1):
        if DATE.search(line):
            assert TABLE_HEADING.match(line) and len(DATE.findall(line)) == 1, (
                f"{_rel(doc)}:{number}: a date only heads a table of figures, on one line that "
                f"names the command first: {line!r}"
            )


def test_every_performance_table_names_its_command_and_date() -> None:
    lines = (REPO / "docs" / "performance.md").read_text().splitlines()
    starts = [i for i, line in enumerate(lines)
              if line.startswith("|") and (i == 0 or not lines[i - 1].startswith("|"))]
    assert starts
    for i in starts:
        heading = next(line for line in reversed(lines[:i]) if line.strip())
        assert TABLE_HEADING.match(heading), (
            f"docs/performance.md:{i + 1}: the table is headed by one line naming the command, "
            f"the date and the machine, not {heading!r}"
        )


@pytest.mark.parametrize("doc", MANUAL, ids=_rel)
def test_relative_links_lead_somewhere(doc: Path) -> None:
    broken = []
    for target in LINK.findall(_prose(doc.read_text())):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        name, _, anchor = target.partition("#")
        path = (doc.parent / name).resolve() if name else doc
        if not path.exists():
            broken.append(target)
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(target)
    assert not broken, f"{_rel(doc)} links to files or headings that do not exist: {broken}"


SPAN = re.compile(r"`([^`\n]+)`")
REPO_PATH = re.compile(r"^[\w-]+(?:/[\w.-]+)+/?$")  # model/x.py, docs/, model/x.NAME
FILE_KINDS = (".py", ".md", ".sh", ".toml", ".yml", ".yaml", ".json", ".txt", ".csv", ".npz")


@pytest.mark.parametrize("doc", MANUAL, ids=_rel)
def test_repo_paths_in_code_spans_exist(doc: Path) -> None:
    """A file or folder of the repository named in a code span exists; `module/path.NAME`
    (a module and a name in it) names a module that holds NAME."""
    missing = []
    for span in SPAN.findall(FENCE.sub("", doc.read_text())):
        if not REPO_PATH.match(span) or not (REPO / span.split("/")[0]).is_dir():
            continue
        if (REPO / span).exists():
            continue
        if span.endswith("/") or span.endswith(FILE_KINDS):
            missing.append(span)
        elif "." in span.rsplit("/", 1)[-1]:
            module, name = span.split(".", 1)
            source = REPO / f"{module}.py"
            if not source.is_file() or name.split(".")[0] not in source.read_text():
                missing.append(span)
        elif not (REPO / f"{span}.py").exists():
            missing.append(span)
    assert not missing, f"{_rel(doc)} names paths that are not in the repository: {missing}"
