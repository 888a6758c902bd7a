"""The docs say what is, and the code's comments state facts.

README.md, docs/ and the Python sources under node/, gateway/, operator/, bench/ and tests/ name no tracker
issue ("issue 12", "issue-15", "#13 issue") and point at no "pass" of docs/performance.md; docs/performance.md
stays under 400 lines (what each `make bench` row measures, the latest table, what bounds it, how to run it);
the reference docs carry no dated decision and no "as before": dates live in docs/decisions.md alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("node", "gateway", "operator", "bench", "tests")
DECISIONS = ROOT / "docs" / "decisions.md"
PERFORMANCE = ROOT / "docs" / "performance.md"
MAX_PERFORMANCE_LINES = 400

# Files exempt while another change rewrites them (each must still name a tracker issue); none now.
PENDING: frozenset[str] = frozenset()

TRACKER_ISSUE = re.compile(r"\bissues?[ -]?#?\d+\b|#\d+ issue\b", re.IGNORECASE)
ORDINAL = (
    r"(?:\w+-)?(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
    r"|\w+teenth|\w+tieth|\d+(?:st|nd|rd|th))"
)
# "docs/performance.md, eighth pass", across a line break too; "(tenth performance pass)"
PASS_POINTER = re.compile(r"performance\.md[^)]{0,80}?\bpass\b|\bperformance pass\b")
ORDINAL_PASS = re.compile(rf"\b{ORDINAL} pass\b", re.IGNORECASE)
DATED_DECISION = re.compile(r"\bdecisions?\b[^.]{0,20}?\b\d{4}-\d{2}-\d{2}\b", re.IGNORECASE)
AS_BEFORE = re.compile(r"\bas before\b", re.IGNORECASE)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _docs() -> Iterator[Path]:
    yield ROOT / "README.md"
    yield from sorted((ROOT / "docs").glob("*.md"))


def _python_sources() -> Iterator[Path]:
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "proto" in path.parts and path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
                continue  # generated code
            if path != Path(__file__).resolve():
                yield path


def _hits(pattern: re.Pattern[str], paths: Iterator[Path]) -> list[str]:
    """`path:line: text` for every match outside the pending files."""
    found: list[str] = []
    for path in paths:
        if _rel(path) in PENDING:
            continue
        text = path.read_text(encoding="utf-8")
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{_rel(path)}:{line}: {match.group(0)!r}")
    return found


def _reference_docs() -> Iterator[Path]:
    return (path for path in _docs() if path != DECISIONS)


def test_no_tracker_issue_is_named() -> None:
    assert _hits(TRACKER_ISSUE, _docs()) + _hits(TRACKER_ISSUE, _python_sources()) == []


def test_nothing_points_at_a_pass_of_the_performance_doc() -> None:
    assert _hits(PASS_POINTER, _docs()) + _hits(PASS_POINTER, _python_sources()) == []
    assert _hits(ORDINAL_PASS, _docs()) == []  # the docs name no "eighth pass" of anything either


def test_the_performance_doc_is_short() -> None:
    lines = len(PERFORMANCE.read_text(encoding="utf-8").splitlines())
    assert lines < MAX_PERFORMANCE_LINES, f"docs/performance.md has {lines} lines; the history belongs in git"


def test_reference_docs_have_no_dated_decision_and_no_as_before() -> None:
    assert _hits(DATED_DECISION, _reference_docs()) == []
    assert _hits(AS_BEFORE, _reference_docs()) == []


def test_decisions_are_dated() -> None:
    entries = re.findall(r"(?m)^\*\*(.+?)\*\*", DECISIONS.read_text(encoding="utf-8"))
    assert entries and all(re.match(r"\d{4}-\d{2}-\d{2}\b", entry) for entry in entries)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("see issue 12 item 7", TRACKER_ISSUE),
        ("the issue-15 goals table", TRACKER_ISSUE),
        ("Issue 15: every goal", TRACKER_ISSUE),
        ("closed by #13 issue", TRACKER_ISSUE),
        ("(docs/performance.md, twenty-sixth pass)", PASS_POINTER),
        ("a tenth of a read (docs/\nperformance.md, nineteenth pass)", PASS_POINTER),
        ("Decision (tenth performance pass): the", PASS_POINTER),
        ("(docs/performance.md, fourth pass of 2026-11-26)", PASS_POINTER),
        ("**Decision (2026-11-26): libsodium first**", DATED_DECISION),
        ("(decision of\n2026-11-26)", DATED_DECISION),
        ("mapped as before", AS_BEFORE),
    ],
)
def test_the_patterns_catch_what_they_are_for(text: str, pattern: re.Pattern[str]) -> None:
    assert pattern.search(text)


@pytest.mark.parametrize(
    "text",
    ["ca.issue(name)", "a certificate issued by the CA", "skip the second pass", 'performance.md, "Reads")'],
)
def test_the_patterns_leave_ordinary_words_alone(text: str) -> None:
    assert not TRACKER_ISSUE.search(text) and not PASS_POINTER.search(text)
