"""Every pointer from the code to the docs holds: a docs page that exists, and the heading it names.

The code points readers (and users: help texts, the generated recipe reference) at `docs/PAGE.md`, optionally
with the heading in quotes (`docs/measurements.md "Evaluation batching"`) or as an anchor (`docs/x.md#slug`);
the README only as `README.md "Heading"`. A page renamed or a heading reworded fails here, not in a reader's hands.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "grpokit"
# Where "README" names a file grpokit writes, not this project's README (the Hub model card).
WRITES_A_README = {"export/hub.py"}

POINTER = re.compile(r"(?P<page>docs/[\w/-]+\.md|README\.md)(?:#(?P<anchor>[\w-]+))?"
                     r"(?:,?\s*(?P<q>[\"'])(?P<heading>[^\"\n]{3,120}?)(?P=q))?")


def _sources():
    return sorted(p for p in SRC.rglob("*.py") if "datasets" not in p.relative_to(SRC).parts)


def _joined(text: str) -> str:
    """Comment and docstring lines joined, so a heading quoted across a line break reads as one."""
    return re.sub(r"\s*\n\s*(?:#\s*)?", " ", text)


def _headings(page: Path) -> list[str]:
    return [m.group(1).replace("`", "").strip() for m in re.finditer(r"^#{1,6}\s+(.+?)\s*$", page.read_text(),
                                                                      re.MULTILINE)]


def _slug(heading: str) -> str:  # MkDocs' (Python-Markdown toc) slugify
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", heading.lower())).strip("-")


def _pointers():
    for path in _sources():
        rel = str(path.relative_to(SRC))
        for m in POINTER.finditer(_joined(path.read_text(encoding="utf-8"))):
            yield rel, m.group("page"), m.group("anchor"), m.group("heading")


POINTERS = list(_pointers())


def test_the_code_points_at_the_docs():
    assert len(POINTERS) > 10  # the scan finds them: a broken pattern would make every other test vacuous


@pytest.mark.parametrize("where,page,anchor,heading", POINTERS,
                         ids=[f"{w}->{p}{'#' + a if a else ''}" for w, p, a, _ in POINTERS])
def test_each_pointer_names_a_page_and_heading_that_exist(where, page, anchor, heading):
    target = REPO / page
    assert target.is_file(), f"{where} points at {page}, which does not exist"
    headings = _headings(target)
    if heading and heading[0].isupper():  # a quoted heading (a lower-case quote is prose, not a heading)
        heading = heading.replace("`", "")
        assert heading in headings, f"{where}: {page} has no heading {heading!r} (it has {headings})"
    if anchor:
        assert anchor in {_slug(h) for h in headings}, f"{where}: {page} has no heading with anchor #{anchor}"


def test_no_pointer_to_the_readme_without_a_heading():
    loose = []
    for path in _sources():
        rel = str(path.relative_to(SRC))
        if rel in WRITES_A_README:
            continue
        text = _joined(path.read_text(encoding="utf-8"))
        for m in re.finditer(r"README", text):
            after = POINTER.match(text, m.start())
            if not (after and after.group("page") == "README.md" and after.group("heading")):
                loose.append(f"{rel}: ...{text[max(0, m.start() - 40):m.end() + 40]}...")
    assert not loose, "point at a docs page (docs/PAGE.md \"Heading\") or README.md \"Heading\":\n" + "\n".join(loose)
