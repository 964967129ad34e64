"""Render the Go text/template subset Ollama prompt templates use, in Python, with Ollama's data model.

    from grpokit.export.gotemplate import render
    render('{{ range .Messages }}{{ .Role }}: {{ .Content }}\\n{{ end }}', {"Messages": [...]})

`grpokit export` proves on the files it wrote that Ollama's TEMPLATE gives the
prompt training saw; Ollama itself (Go) does not run here, so this module
executes the TEMPLATE the way Go's text/template does for the constructs
Ollama templates use:

- text and actions, `{{-` / `-}}` trimming (all adjacent whitespace), comments;
- `if` / `else if` / `else`, `range` (lists; maps in sorted key order, as Go
  does; `$i, $v :=` or `$v :=`; `else` when empty), `with`;
- `$x := ...` and `$x = ...` (assignment reaches the enclosing scope, as in
  Go >= 1.11), `$` (the root), field chains `.A.B`, `$x.A`, `(...)`;
- functions `eq ne lt le gt ge and or not len index json` (json is Ollama's:
  Go's `json.Marshal`, compact, map keys sorted, `<>&` escaped) and literals.

Truth is Go's: false, 0, nil, "" and empty lists/maps are false. Printing a
list or map raises (Ollama's structs print through their own String methods,
which grpokit's templates never rely on). Unsupported syntax raises ValueError.
Not covered: pipelines with `|`, `template`/`define`/`block`, printf.
"""
from __future__ import annotations

import json
import math
import re
from decimal import Decimal

_ACTION = re.compile(r"\{\{(-[ \t\r\n])?(.*?)([ \t\r\n]-)?\}\}", re.S)
_TOKEN = re.compile(r'\s*(:=|=|\(|\)|"(?:[^"\\]|\\.)*"|`[^`]*`|,|[^\s()=,]+)')
_WS = " \t\r\n"


class PropertyType(list):
    """Ollama's api.PropertyType: a list of JSON types that marshals to a plain string when it holds one."""


def go_json(v) -> str:
    """Go's json.Marshal for the values an Ollama template sees (encoding/json's escaping and float format)."""
    if isinstance(v, PropertyType) and len(v) == 1:
        v = v[0]
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):  # Go: plain digits in [1e-6, 1e21), else exponent form with e-7 not e-07
        if not math.isfinite(v):
            raise ValueError(f"json: unsupported value {v}")
        if v == 0 or 1e-6 <= abs(v) < 1e21:
            return str(int(v)) if v.is_integer() else format(Decimal(repr(v)), "f")
        return re.sub(r"e-0(\d)$", r"e-\1", repr(v))
    if isinstance(v, str):
        s = json.dumps(v, ensure_ascii=False)
        for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                        ("\u2029", "\\u2029")):
            s = s.replace(ch, esc)
        return s
    if isinstance(v, dict):
        return "{" + ",".join(f"{go_json(str(k))}:{go_json(v[k])}" for k in sorted(v)) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(go_json(x) for x in v) + "]"
    raise ValueError(f"json: cannot marshal {type(v).__name__}")


def _truth(v) -> bool:
    """Go's truth: false, 0, nil and empty strings, lists and maps are false; anything else (a struct) true."""
    if v is None or isinstance(v, bool):
        return bool(v)
    if isinstance(v, (int, float)):
        return v != 0
    return len(v) > 0 if hasattr(v, "__len__") else True


def _print(v) -> str:
    if v is None:
        return "<no value>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (str, int)):
        return str(v)
    if isinstance(v, float):
        return go_json(v)
    raise ValueError(f"printing a {type(v).__name__} in a template is not supported here; use json")


def _eq(a, *bs):
    return any(a == b for b in bs)


FUNCS = {
    "eq": _eq, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b, "not": lambda a: not _truth(a), "len": len,
    "json": go_json, "index": lambda c, *ks: _index(c, ks),
    "and": None, "or": None,  # short-circuit (Go >= 1.18): handled in _Exec.call
}


def _index(c, keys):
    for k in keys:
        c = c.get(k) if isinstance(c, dict) else c[k]
    return c


# ---------------------------------------------------------------- parsing
def _lex(text: str) -> list[tuple[str, str]]:
    out, pos, trim_next = [], 0, False
    for m in _ACTION.finditer(text):
        lit = text[pos:m.start()]
        lit = lit.lstrip(_WS) if trim_next else lit
        out.append(("text", lit.rstrip(_WS) if m.group(1) else lit))
        body = m.group(2).strip()
        if not (body.startswith("/*") and body.endswith("*/")):
            out.append(("action", body))
        pos, trim_next = m.end(), bool(m.group(3))
    out.append(("text", text[pos:].lstrip(_WS) if trim_next else text[pos:]))
    return out


def _parse(tokens, i=0, stop=("end",)):
    """A list of nodes up to one of `stop` (returned with the index of the stopping action)."""
    nodes = []
    while i < len(tokens):
        kind, val = tokens[i]
        word = val.split(None, 1)[0] if kind == "action" and val else ""
        if kind == "text":
            nodes.append(("text", val))
        elif word in ("end", "else"):
            if word not in stop and not (word == "else" and "else" in stop):
                raise ValueError(f"unexpected {{{{ {val} }}}}")
            return nodes, i, val
        elif word == "if":
            node, i = _parse_if(tokens, i, val)
            nodes.append(node)
        elif word in ("range", "with"):
            body, i, how = _parse(tokens, i + 1, ("end", "else"))
            alt = []
            if how == "else":
                alt, i, _ = _parse(tokens, i + 1, ("end",))
            elif how != "end":
                raise ValueError(f"unsupported {{{{ {how} }}}} in a {word}")
            nodes.append((word, val[len(word):].strip(), body, alt))
        elif word in ("template", "define", "block"):
            raise ValueError(f"unsupported Go template action {{{{ {val} }}}}")
        else:
            nodes.append(("action", val))
        i += 1
    if stop != ("eof",):
        raise ValueError("unclosed {{ if/range/with }} in template")
    return nodes, i, ""


def _parse_if(tokens, i, head):
    body, i, how = _parse(tokens, i + 1, ("end", "else"))
    alt = []
    if how.startswith("else if "):
        sub, i = _parse_if(tokens, i, how[len("else "):])
        alt = [sub]
    elif how == "else":
        alt, i, _ = _parse(tokens, i + 1, ("end",))
    return ("if", head[len("if"):].strip(), body, alt), i


# ---------------------------------------------------------------- execution
class _Exec:
    def __init__(self, root):
        self.scopes = [{"$": root}]
        self.out: list[str] = []

    def lookup(self, name):
        for s in reversed(self.scopes):
            if name in s:
                return s[name]
        raise ValueError(f"undefined variable {name}")

    def assign(self, name, value):
        for s in reversed(self.scopes):
            if name in s:
                s[name] = value
                return
        raise ValueError(f"undefined variable {name}")

    def field(self, obj, chain):
        for f in [c for c in chain.split(".") if c]:
            obj = obj.get(f) if isinstance(obj, dict) else None
        return obj

    def operand(self, tok, dot):
        if tok.startswith('"'):
            return json.loads(tok)
        if tok.startswith("`"):
            return tok[1:-1]
        if tok in ("true", "false"):
            return tok == "true"
        if tok == "nil":
            return None
        if re.fullmatch(r"-?\d+", tok):
            return int(tok)
        if tok.startswith("."):
            return self.field(dot, tok)
        if tok.startswith("$"):
            name, _, chain = tok.partition(".")
            return self.field(self.lookup(name), chain)
        raise ValueError(f"unsupported Go template operand {tok!r}")

    def call(self, toks, dot):
        """Evaluate a command: a function call or a single operand; `toks` may hold (...) groups."""
        args = []
        j = 0
        while j < len(toks):
            if toks[j] == "(":
                depth, k = 1, j + 1
                while depth:
                    depth += {"(": 1, ")": -1}.get(toks[k], 0)
                    k += 1
                args.append(("val", self.call(toks[j + 1:k - 1], dot)))
                j = k
            else:
                args.append(("tok", toks[j]))
                j += 1
        if args and args[0][0] == "tok" and args[0][1] in FUNCS:
            name, rest = args[0][1], args[1:]
            vals = (lambda a: a[1] if a[0] == "val" else self.operand(a[1], dot))
            if name in ("and", "or"):
                v = None
                for a in rest:
                    v = vals(a)
                    if _truth(v) != (name == "and"):
                        return v
                return v
            return FUNCS[name](*[vals(a) for a in rest])
        if len(args) != 1:
            raise ValueError(f"unsupported Go template command {' '.join(t for _, t in args)!r}")
        return args[0][1] if args[0][0] == "val" else self.operand(args[0][1], dot)

    def pipeline(self, text, dot):
        toks = _TOKEN.findall(text)
        if len(toks) >= 2 and toks[0].startswith("$") and toks[1] in (":=", "="):
            value = self.call(toks[2:], dot)
            (self.scopes[-1].__setitem__ if toks[1] == ":=" else self.assign)(toks[0], value)
            return None, True
        if len(toks) >= 4 and toks[1] == "," and toks[3] == ":=":  # range $i, $v := pipeline
            return (toks[0], toks[2], self.call(toks[4:], dot)), False
        return self.call(toks, dot), False

    def run(self, nodes, dot):
        for node in nodes:
            kind = node[0]
            if kind == "text":
                self.out.append(node[1])
            elif kind == "action":
                value, is_decl = self.pipeline(node[1], dot)
                if not is_decl:
                    self.out.append(_print(value))
            else:
                self.scopes.append({})
                try:
                    self.control(node, dot)
                finally:
                    self.scopes.pop()

    def control(self, node, dot):
        kind, head, body, alt = node
        toks = _TOKEN.findall(head)
        names = []
        if kind == "range" and ":=" in toks:
            names = [t for t in toks[:toks.index(":=")] if t != ","]
            toks = toks[toks.index(":=") + 1:]
        value = self.call(toks, dot)
        if kind == "if":
            self.run(body if _truth(value) else alt, dot)
        elif kind == "with":
            self.run(body, value) if _truth(value) else self.run(alt, dot)
        elif not _truth(value):
            self.run(alt, dot)
        else:
            items = [(k, value[k]) for k in sorted(value)] if isinstance(value, dict) else list(enumerate(value))
            for k, v in items:
                if len(names) == 2:
                    self.scopes[-1].update({names[0]: k, names[1]: v})
                elif names:
                    self.scopes[-1][names[0]] = v
                self.run(body, v)


def render(text: str, data: dict) -> str:
    """`text` (a Go template) executed on `data` (dicts for Go structs and maps), as Ollama would."""
    nodes, _, _ = _parse(_lex(text), 0, ("eof",))
    ex = _Exec(data)
    ex.run(nodes, data)
    return "".join(ex.out)
