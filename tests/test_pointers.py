"""Every pointer from the code and the recipes to the docs holds: a docs page that exists, and the heading it names.

The code points readers (and users: help texts, the generated recipe reference) at `docs/PAGE.md`, optionally
with the heading in quotes (`docs/measurements.md "Evaluation batching"`) or as an anchor (`docs/x.md#slug`);
the README only as `README.md "Heading"`. A page renamed or a heading reworded fails here, not in a reader's hands.

Measured figures live in docs/measurements.md, dated there; the code and the recipes point at the heading
(never the bare page) and carry no date, so a figure cannot drift from the log in a comment no one re-reads.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "grpokit"
# Where "README" names a file grpokit writes, not this project's README (the Hub model card).
WRITES_A_README = {"export/hub.py", "run/layout.py"}  # the Hub's model card; TRL's, in a run's checkpoints/

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


def _recipes():
    return sorted((REPO / "recipes").glob("*.yaml"))


def _pointers():
    for path in _sources() + _recipes():
        rel = str(path.relative_to(SRC if SRC in path.parents else REPO))
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


NAMED = re.compile(r"(?<![\w/.])grpokit(?:\.[A-Za-z_]\w*)+")
NOT_CODE = {"grpokit.json"}  # a file grpokit writes (the export's record), not a module


def _resolves(dotted: str) -> bool:
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_module_and_name_the_code_names_exists():
    # "grpokit.demo.tables", "grpokit.training.launch.is_rank_zero": a reader sent to a module or function that is
    # not there (renamed, moved, never written) is a pointer that broke as surely as a docs heading.
    named = {m.group(0).rstrip(".") for path in _sources() for m in NAMED.finditer(path.read_text(encoding="utf-8"))}
    assert len(named) > 50
    missing = sorted(n for n in named - NOT_CODE if not _resolves(n))
    assert not missing, f"the code names modules or names that do not exist: {missing}"


def test_a_pointer_to_the_measurement_log_names_its_heading():
    bare = [f"{w}: docs/measurements.md" for w, page, anchor, heading in POINTERS
            if page == "docs/measurements.md" and not (anchor or heading)]
    assert any(w.startswith("recipes/") for w, *_ in POINTERS)  # the recipes are scanned too
    assert not bare, "name the heading of the figures (docs/measurements.md \"Heading\"):\n" + "\n".join(bare)


DATE = re.compile(r"\b20\d\d-[01]\d(?:-[0-3]\d)?\b")


def test_no_date_in_the_code_or_the_recipes():
    # A dated figure belongs to the measurement log; a date beside code ages silently (`2026-12-01` beside a constant
    # the log has since re-measured).
    dated = {path.name: DATE.findall(path.read_text(encoding="utf-8")) for path in _sources() + _recipes()}
    dated = {name: dates for name, dates in dated.items() if dates}
    assert not dated, f"move each dated fact to docs/measurements.md and point at its heading: {dated}"
