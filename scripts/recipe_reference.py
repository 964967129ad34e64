"""Write docs/recipes/reference.md from the recipe schema: every section and field, its type, default and help.

    .venv/bin/python scripts/recipe_reference.py           # rewrite the page
    .venv/bin/python scripts/recipe_reference.py --check   # exit 1 when the page is stale (tests run this)

The schema's field descriptions (grpokit.recipe.schema and the section modules beside it) are the one source:
the page is never edited by hand, and a field without a description is refused here (so a test fails).
"""
from __future__ import annotations

import sys
import types
import typing
from pathlib import Path

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "recipes" / "reference.md"
sys.path.insert(0, str(ROOT / "src"))

from grpokit.recipe import Recipe  # noqa: E402 - after the path: runs from a checkout without an install

HEADER = """# Recipe schema reference

Generated from the recipe schema (`src/grpokit/recipe/schema.py` and the section modules beside it) by
`scripts/recipe_reference.py`; do not edit by hand. Every section refuses unknown keys (with "did you mean")
and non-finite numbers. How the sections fit together: [Recipes](index.md).
"""


def _models(annotation) -> list[type[BaseModel]]:
    """The section models inside an annotation (`X`, `X | None`, `list[X]`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models(a)]


def type_name(annotation) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(type_name(a) for a in typing.get_args(annotation))
    if origin in (list, tuple):
        return f"list of {type_name(typing.get_args(annotation)[0])}"
    if origin is dict:
        return "mapping"
    if annotation is type(None):
        return "`null`"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    return f"`{getattr(annotation, '__name__', str(annotation))}`"


def default_text(field) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()
        if isinstance(value, BaseModel):
            return "(section defaults)"
        return f"`{value!r}`" if value else ("`{}`" if isinstance(value, dict) else "`[]`")
    value = field.default
    if value is PydanticUndefined:
        return "required"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def cell(text: str) -> str:
    """One table cell: one line, pipes escaped, `<think>` and `builtin:<path>` shown rather than read as HTML."""
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def render() -> str:
    out = [HEADER]
    missing: list[str] = []
    seen: set[type] = set()

    def section(model: type[BaseModel], path: str, level: int) -> None:
        if model in seen and path != "recipe":
            return
        seen.add(model)
        title = "The top level" if path == "recipe" else f"`{path}`"
        out.append(f"\n{'#' * level} {title}\n")
        doc = (model.__doc__ or "").strip()
        if doc and not doc.startswith(model.__name__ + "("):
            out.append(cell(doc.split("\n\n")[0]) + "\n")
        out.append("| field | type | default | description |\n|---|---|---|---|")
        nested = []
        for name, field in model.model_fields.items():
            if field.exclude:  # not part of the YAML (the recipe's own bookkeeping)
                continue
            where = name if path == "recipe" else f"{path}.{name}"
            if not field.description:
                missing.append(f"{model.__name__}.{name}")
            out.append(f"| `{name}` | {type_name(field.annotation)} | {default_text(field)} | "
                       f"{cell(field.description or '')} |")
            nested += [(m, where + ("[]" if typing.get_origin(field.annotation) is list else "")) for m in
                       _models(field.annotation)]
        for m, where in nested:
            section(m, where, 2 if path == "recipe" else level + 1)

    section(Recipe, "recipe", 2)
    if missing:
        raise SystemExit("fields without a description (add `description=` to each): " + ", ".join(missing))
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not PAGE.is_file() or PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE.relative_to(ROOT)} is stale: run `python scripts/recipe_reference.py`", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
