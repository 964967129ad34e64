"""Reading a recipe file: bytes -> text -> YAML -> dict, and `--set` overrides, with every failure as a Problem.

PyYAML's `safe_load` keeps the last of two equal keys silently (a second `train:` section replaces the
first), so recipes are read with `StrictLoader`, which records every duplicate with both lines. Reading is
bounded: a file past `MAX_RECIPE_BYTES`, nesting past `MAX_DEPTH` and aliases that expand past `MAX_NODES`
values ("billion laughs") are refused with the line, before they can take minutes or gigabytes. A file
that is not UTF-8 text, YAML that does not parse and a `--set` value that is not YAML become
`GrpokitError`s naming the file (or the `--set`), the line and the fix; never a traceback.

Not covered here: what the keys mean (grpokit.recipe) and whether their values make sense
(grpokit.recipe.checks).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from grpokit.errors import GrpokitError, Problem

_MERGE_TAG = "tag:yaml.org,2002:merge"
# Bounds on what a recipe file may make the reader do; real recipes sit far below each of them.
MAX_RECIPE_BYTES = 1 << 20  # recipes are a few KB; PyYAML (pure Python) takes seconds per MB and a 50 MB file minutes
MAX_DEPTH = 50  # recipes nest 3-5 levels (model.init_kwargs.quantization_config); PyYAML's composer recurses ~3
# Python frames per level, so 50k levels would end in a RecursionError instead of a line number
MAX_NODES = 200_000  # values after every alias is expanded: a recipe has hundreds; nested aliases ("billion
# laughs") expand to billions, which validation, `recipe check`'s printout and every copy would walk one by one


class _Refused(Exception):
    """The reader stopped at a bound: (line, what)."""

    def __init__(self, line: int, what: str):
        super().__init__(what)
        self.line, self.what = line, what


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that records duplicate mapping keys (`duplicates`: key, first line, repeated line) and stops at
    `MAX_DEPTH` levels of nesting, before its recursive composer gets there."""

    def __init__(self, stream):
        super().__init__(stream)
        self.duplicates: list[tuple[str, int, int]] = []
        self._depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(self.peek_event().start_mark.line + 1, f"nested more than {MAX_DEPTH} levels deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        seen: dict[tuple[str, str], int] = {}
        for key_node, _ in node.value:
            # `<<: *anchor` merges are meant to be overridden; only keys written twice are mistakes.
            if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = (key_node.tag, key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                self.duplicates.append((key_node.value, seen[key], line))
            else:
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _expanded_size(root) -> int:
    """How many values the composed YAML holds once every alias is expanded (counted once per node, so linear
    in the file); past `MAX_NODES`, or a node that contains itself (`&a [*a]`), it is refused."""
    size: dict[int, int] = {}
    first_over = None  # the smallest value past the bound: its line is the one to show
    open_nodes: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        children = ([n for kv in node.value for n in kv] if isinstance(node, yaml.MappingNode) else
                    list(node.value) if isinstance(node, yaml.SequenceNode) else [])
        if done:
            open_nodes.discard(id(node))
            size[id(node)] = min(1 + sum(size[id(c)] for c in children), MAX_NODES + 1)
            if size[id(node)] > MAX_NODES:
                first_over = first_over or node
            continue
        if id(node) in size:
            continue
        if id(node) in open_nodes:
            raise _Refused(node.start_mark.line + 1, "an alias refers to the value that contains it (a recursive alias)")
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)
    if first_over is not None:
        raise _Refused(first_over.start_mark.line + 1, f"expands to more than {MAX_NODES:,} values once its aliases "
                       "(*name) are replaced by what they name (nested aliases grow exponentially)")
    return size[id(root)]


_CONTROL_NAMES = {0: "NUL", 7: "BEL", 8: "backspace", 0x1B: "escape", 0x7F: "DEL"}


def parse_yaml(text: str, where: str) -> Any:
    """YAML text -> Python value; syntax errors, duplicate keys, nesting past `MAX_DEPTH` and aliases that expand
    past `MAX_NODES` values raise GrpokitError with the line."""
    try:
        loader = StrictLoader(text)  # the reader refuses a control byte (NUL, BEL, ...) here, before parsing
    except yaml.reader.ReaderError as e:
        line = text[: e.position].count("\n") + 1
        raise GrpokitError([Problem(f"{where}:{line}", f"holds the control character U+{e.character:04X} "
                                    f"({_CONTROL_NAMES.get(e.character, 'a control character')}), which YAML does "
                                    "not allow in a file", "remove it; inside a double-quoted string it can be "
                                    f"written as \\x{e.character:02x} if you mean it" if e.character < 256 else
                                    "remove it")]) from None
    try:
        node = loader.get_single_node()
        if node is not None:
            _expanded_size(node)
        value = loader.construct_document(node) if node is not None else None
    except _Refused as e:
        raise GrpokitError([Problem(f"{where}:{e.line}", e.what, "write the values out plainly: a recipe needs "
                                    "neither deep nesting nor aliases of aliases")]) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f"{where}:{mark.line + 1}" if mark else where
        raise GrpokitError([Problem(at, f"not valid YAML: {getattr(e, 'problem', None) or e}",
                                    "fix the indentation / quoting on that line")]) from None
    finally:
        loader.dispose()
    if loader.duplicates:
        raise GrpokitError([
            Problem(f"{where}:{line} {key}", f"duplicate key '{key}' (first at line {first}); YAML would keep "
                    "only this one and silently drop the first", f"merge the two '{key}' entries into one")
            for key, first, line in loader.duplicates
        ], title=f"{where}: {len(loader.duplicates)} duplicate key(s)")
    return value


def read_recipe_text(path: Path) -> str:
    """The recipe file as text; a missing, unreadable or non-UTF-8 file is a Problem."""
    if not path.is_file():
        raise GrpokitError([Problem(str(path), "recipe file not found", "check the path; examples live in recipes/")])
    try:
        size = path.stat().st_size
        if size > MAX_RECIPE_BYTES:
            raise GrpokitError([Problem(str(path), f"is {size / 2**20:.1f} MiB; a recipe is a few KB (the limit is "
                                        f"{MAX_RECIPE_BYTES >> 20} MiB)", "a recipe holds settings: keep rows and long "
                                        "texts in the data file, and check that this is the right file")])
        data = path.read_bytes()
    except OSError as e:
        raise GrpokitError([Problem(str(path), f"cannot read the recipe: {e.strerror or e}",
                                    "check the file's permissions")]) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise GrpokitError([Problem(f"{path}:{line}", f"not a UTF-8 text file (byte 0x{data[e.start]:02x} at "
                                    f"offset {e.start})", "a recipe is a YAML text file saved as UTF-8; check that "
                                    "this is the right file")]) from None


def line_map(text: str) -> dict[tuple, int]:
    """Map each key path in the YAML to its 1-based line, for error messages."""
    lines: dict[tuple, int] = {}

    def walk(node, path):
        if len(lines) > MAX_NODES:  # aliases of aliases: the lines of their first copies are enough
            return
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = (*path, k.value)
                lines[key] = k.start_mark.line + 1
                walk(v, key)
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                lines[(*path, i)] = v.start_mark.line + 1
                walk(v, (*path, i))

    try:
        loader = StrictLoader(text)  # bounded like parse_yaml: this also runs on text nobody has screened
    except yaml.YAMLError:  # a control byte: parse_yaml says where
        return lines
    try:
        walk(loader.get_single_node(), ())
    except (yaml.YAMLError, _Refused, RecursionError):
        pass
    finally:
        loader.dispose()
    return lines


def apply_override(raw: dict, assignment: str) -> None:
    """`section.key=value` (value parsed as YAML) into the raw recipe dict; list items by index (rewards.0.weight)."""
    where = f"--set {assignment}"
    if "=" not in assignment:
        raise GrpokitError([Problem(where, "expected section.key=value", "e.g. --set train.learning_rate=2e-5")])
    dotted, value = assignment.split("=", 1)
    keys = dotted.strip().split(".")
    if not all(keys):
        raise GrpokitError([Problem(where, f"'{dotted}' is not a dotted key path",
                                    "name the field as section.key, e.g. --set train.max_steps=20")])
    parsed = parse_yaml(value, where) if value.strip() else None
    node: Any = raw
    for depth, k in enumerate(keys):
        last = depth == len(keys) - 1
        if isinstance(node, list):
            if not k.isdigit() or int(k) >= len(node):
                raise GrpokitError([Problem(where, f"'{'.'.join(keys[:depth])}' is a list of {len(node)} item(s); "
                                            f"'{k}' is not one of its indexes", f"use an index from 0 to {len(node) - 1}")])
            k = int(k)
            if last:
                node[k] = parsed
            else:
                if not isinstance(node[k], (dict, list)):
                    node[k] = {}
                node = node[k]
            continue
        if last:
            node[k] = parsed
        else:
            if not isinstance(node.get(k), (dict, list)):
                node[k] = {}
            node = node[k]
