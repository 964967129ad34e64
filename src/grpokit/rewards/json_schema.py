"""The `json_schema` reward: the completion's JSON parses and validates against the row's schema.

The JSON is the last fenced block (```json ... ``` or ``` ... ```) after any
`<think>` block, or else the whole answer text. Scores: 1.0 valid; `partial_credit`
when it parses but breaks the schema (0.0 by default: a partial credit is a
bonus the policy can farm by emitting any JSON); 0.0 when it does not parse,
when there is no answer (unclosed think), when an object names a key twice
(`{"day": 1, "day": "Sunday"}`: parsers disagree on which value counts, Python's
keeps the last, so a policy could hedge; the trained demo model wrote such
objects), and for adversarial output: JSON
larger or deeper than an answer is (the bounds of grpokit.rewards.json_answer, which
reads the JSON), or whose validation runs past `timeout_s`. `None` when the
row has no schema.

Bounded time: the size and depth limits are checked before validating; every
schema keyword checks the deadline before it runs, so a recursive schema that
makes validation exponential (`anyOf` over `$ref: "#"`) stops at `timeout_s`
(no signals or threads: safe in any thread); `uniqueItems` is checked in linear
time (`_unique_items`) where jsonschema compares objects pairwise. What a
keyword's deadline cannot stop runs in a worker process that is killed
`KILL_GRACE_S` after `timeout_s` (grpokit.rewards.worker): schemas with a
regex (`pattern`, `patternProperties`: jsonschema matches them with Python's
backtracking `re` inside four keywords, `^(a|a)*$` on 40 characters runs for
minutes within one call) or with an embedded resource that names its own
`$schema` (jsonschema validates it with the stock class, without the timed
keywords), anywhere in the schema, values of const/enum/default/examples
included (a `$ref` can point into them). Schemas without either validate in
this process, at full speed.
Completions that hit the bound score 0.0 and are counted as
`rewards/json_schema/timeouts` (TRL's log_metric).

No network, no files: `$ref` resolves inside the row's schema only (and the
JSON Schema meta-schemas jsonschema ships), through a `referencing` registry
that retrieves nothing. A ref that points elsewhere (`http://...`,
`file:///...`, another file) is a dataset error: `grpokit data check` and
loading the rows for training report it (`schema_problem`), and scoring raises.

A schema that is itself invalid, or nested too deeply to check, is a dataset
bug: the reward raises (counted and reported by the registry) rather than
scoring every completion 0.

Not covered: `format` keywords (jsonschema leaves them unchecked by default).

Run: `grpokit rewards score --reward json_schema --input rows.jsonl` (rows need `schema`).
"""
from __future__ import annotations

import functools
import json
import math
import threading
import time

import referencing.jsonschema
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.validators import extend, validator_for
from jsonschema_specifications import REGISTRY as _META_SCHEMAS  # the bundled meta-schemas; retrieves nothing
from referencing.exceptions import Unresolvable

from grpokit.rewards import worker
from grpokit.rewards.json_answer import parse_answer
from grpokit.rewards.registry import describe

_VALIDATION_TIMEOUT_S = 1.0  # honest answers validate in milliseconds; a recursive anyOf schema can take exponential time
_deadline = threading.local()  # per thread: one cached validator serves every thread
_REGEX_KEYWORDS = ("pattern", "patternProperties")  # matched by jsonschema with Python's backtracking `re`
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})  # values, not schemas: a "$ref" there is data


class _TimedOut(Exception):
    """Validation ran past the deadline: the completion scores 0."""


def _timed(keyword):
    """A jsonschema keyword function that first checks this thread's deadline."""

    def check(validator, value, instance, schema):
        if time.monotonic() > getattr(_deadline, "at", math.inf):
            raise _TimedOut
        yield from keyword(validator, value, instance, schema) or ()  # a keyword may return None: no errors

    return check


def _identity(value: object) -> object:
    """A hashable form with JSON Schema's equality: 1 == 1.0, true != 1, objects compare by content."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, dict):
        return ("object", frozenset((k, _identity(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("array", tuple(_identity(v) for v in value))
    return ("value", value)  # numbers (1 == 1.0 hash alike), strings, null


def _unique_items(validator, unique, instance, schema):
    # jsonschema's own check compares objects pairwise (20k objects: minutes); hashing is linear.
    # Recursion in _identity is bounded by json_answer._MAX_JSON_DEPTH, checked before validation.
    if unique and validator.is_type(instance, "array") and len({_identity(v) for v in instance}) < len(instance):
        yield ValidationError("array has non-unique elements")


def _walk(schema: object):
    """(node, is_schema) for every dict of a schema, iteratively; values under const/enum/default/examples are data."""
    stack = [(schema, True)]
    while stack:
        node, is_schema = stack.pop()
        if isinstance(node, dict):
            yield node, is_schema
            stack.extend((v, is_schema and k not in _DATA_KEYWORDS) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, is_schema) for v in node)


def _outside_refs(schema: object, cls) -> list[str]:
    """The `$ref`s of a schema that do not resolve inside it (or to a bundled meta-schema): nothing is fetched."""
    spec = referencing.jsonschema.specification_with(cls.META_SCHEMA.get("$schema", ""),
                                                      default=referencing.jsonschema.DRAFT202012)
    root = spec.create_resource(schema)
    bad, stack = [], [(schema, _META_SCHEMAS.resolver_with_root(root), True)]
    while stack:  # the base URI changes under an embedded `$id`, so each node carries its resolver
        node, resolver, is_schema = stack.pop()
        if isinstance(node, list):
            stack.extend((v, resolver, is_schema) for v in node)
            continue
        if not isinstance(node, dict):
            continue
        if is_schema and node is not schema:
            try:
                if isinstance(spec.id_of(node), str):
                    resolver = resolver.in_subresource(spec.create_resource(node))
            except (AttributeError, TypeError):  # an "id" that is a property's schema, not a string
                pass
        ref = node.get("$ref") if is_schema else None
        if isinstance(ref, str):
            try:
                resolver.lookup(ref)
            except Unresolvable:
                bad.append(ref)
        stack.extend((v, resolver, is_schema and k not in _DATA_KEYWORDS) for k, v in node.items())
    return bad


def _needs_worker(schema: object) -> bool:
    """What the keyword deadline cannot stop: a regex keyword, or an embedded resource with its own `$schema`,
    anywhere in the schema. Under const/enum/default/examples too: those values are data to the walk of $refs, but
    a `$ref` can point into them (`{"$ref": "#/default", "default": {"pattern": ...}}`) and jsonschema then
    validates them as a schema."""
    for node, _ in _walk(schema):
        if any(k in node for k in _REGEX_KEYWORDS) or ("$schema" in node and node is not schema):
            return True
    return False


@functools.lru_cache(maxsize=1024)
def _validator(schema_json: str):
    """(validator, runs in the worker) for a row's schema; ValueError for a schema that is a dataset bug."""
    schema = json.loads(schema_json)
    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as e:
        raise ValueError(f"the row's schema is not a valid JSON Schema: {e.message}") from None
    except RecursionError:
        raise ValueError("the row's schema is nested too deeply to check against its meta-schema") from None
    outside = _outside_refs(schema, cls)
    if outside:
        raise ValueError(_outside_message(outside[0]))
    keywords = {name: _timed(fn) for name, fn in cls.VALIDATORS.items()}
    keywords["uniqueItems"] = _timed(_unique_items)
    in_worker = _needs_worker(schema)
    if isinstance(schema, dict):
        # jsonschema re-picks the validator class from "$schema" whenever a $ref reaches the root ("#"),
        # which would swap the timed keywords for the stock ones; the class is already chosen from it.
        schema = {k: v for k, v in schema.items() if k != "$schema"}
    return extend(cls, keywords)(schema, registry=_META_SCHEMAS), in_worker


def _outside_message(ref: str) -> str:
    return (f"the row's schema refers to {ref!r}, which is not inside it: json_schema resolves $ref within the row's "
            "schema only (no network, no files); inline the referenced schema under $defs and point $ref at "
            "'#/$defs/NAME'")


def schema_problem(schema: object) -> str | None:
    """A `$ref` of a row's `schema` that points outside it (a server, a file), or None: for data checks. Other
    problems of a schema are the reward's to report when it scores (the column may serve another reward)."""
    try:
        key = _schema_key(schema)
        if key is None:
            return None
        value = json.loads(key)
        outside = _outside_refs(value, validator_for(value))
    except (ValueError, TypeError, AttributeError, RecursionError, Unresolvable):
        return None
    return _outside_message(outside[0]) if outside else None


def schema_error(schema: object) -> str | None:
    """Everything json_schema would refuse in a row's `schema` (not JSON, not an object, invalid against its
    meta-schema, nested too deeply, a `$ref` outside it), or None: for the rows of a JSON task, whose every row
    this reward scores (`grpokit data check --task json`)."""
    try:
        key = _schema_key(schema)
        if key is None:
            return "the row has no schema"
        _validator(key)
    except ValueError as e:
        return str(e)
    return None


def _schema_key(schema: object) -> str | None:
    """A row's `schema` (dict, or JSON text) as canonical JSON text for the validator cache."""
    if schema is None or schema == "":
        return None
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise ValueError(f"the row's schema is not valid JSON: {e}") from None
    if not isinstance(schema, (dict, bool)):
        raise ValueError(f"the row's schema must be a JSON object, got {type(schema).__name__}")
    return json.dumps(schema, sort_keys=True)


def check_json(
    completion: str, schema: object, partial_credit: float = 0.0, timeout_s: float = _VALIDATION_TIMEOUT_S
) -> tuple[float | None, str, list[str]]:
    """(reward, reason, first schema errors) for one completion.

    Reasons: valid | schema_mismatch | not_json | duplicate_key | unclosed_think | too_large | too_deep | timeout |
    out_of_memory | no_schema.
    """
    key = _schema_key(schema)
    if key is None:
        return None, "no_schema", []
    _, in_worker = _validator(key)
    if not in_worker:
        return check_in_worker(completion, key, partial_credit, timeout_s)
    try:
        reward, reason, errors = worker.call("json_schema", (completion, key, partial_credit, timeout_s),
                                             timeout_s + worker.KILL_GRACE_S)
    except worker.WorkerTimeout:
        return 0.0, "timeout", []
    except worker.WorkerDied:
        return 0.0, "out_of_memory", []  # past the worker's address-space limit (or a crash in C)
    except worker.TaskError as e:
        raise ValueError(str(e)) from None  # the schema's own problems: a dataset bug, as in this process
    return reward, reason, list(errors)


def check_in_worker(completion: str, key: str, partial_credit: float, timeout_s: float) -> tuple[float, str, list]:
    """`check_json` on a canonical schema text, in this process (the worker's task, and the fast path)."""
    validator, _ = _validator(key)
    value, problem = parse_answer(completion)
    if problem:
        return 0.0, problem, []
    _deadline.at = time.monotonic() + timeout_s
    try:
        errors = [e.message for _, e in zip(range(3), validator.iter_errors(value))]
    except _TimedOut:
        return 0.0, "timeout", []
    except RecursionError:  # a schema whose keywords nest deeply enough to exhaust the stack within the depth bound
        return 0.0, "too_deep", []
    except Unresolvable as e:  # a ref reached only now (dynamic): still nothing fetched
        raise ValueError(f"the row's schema has a $ref that does not resolve inside it: {e}") from None
    finally:
        _deadline.at = math.inf
    if errors:
        return partial_credit, "schema_mismatch", errors
    return 1.0, "valid", []


@describe(
    description="1.0 when the completion (or its last fenced JSON block) parses and validates against the row's "
    "JSON Schema; partial_credit when it parses but does not validate; 0.0 otherwise; null without a schema.",
    columns=("schema",),
    params={
        "partial_credit": "score for JSON that parses but breaks the schema (default 0.0)",
        "timeout_s": f"seconds one validation may run before it scores 0.0 (default {_VALIDATION_TIMEOUT_S})",
    },
)
def get_json_schema_reward(partial_credit: float = 0.0, timeout_s: float = _VALIDATION_TIMEOUT_S):
    r"""The `json_schema` scorer: 1.0 for JSON that validates against the row's schema, `partial_credit` for JSON
    that does not, 0.0 for no JSON.

    Example:

    >>> from grpokit.rewards.json_schema import get_json_schema_reward
    >>> schema = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
    >>> score = get_json_schema_reward(partial_credit=0.2)
    >>> score(['```json\n{"name": "Ada"}\n```', '{"name": 7}', "Ada"], schema=[schema] * 3)
    [1.0, 0.2, 0.0]
    """
    if not 0.0 <= partial_credit <= 1.0:
        raise ValueError(f"partial_credit must be between 0 and 1, got {partial_credit}")
    if not 0.0 < timeout_s < math.inf:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s}")

    def score(completions: list[str], schema: list, log_metric=None, **_columns) -> list[float | None]:
        verdicts = [check_json(c, s, partial_credit, timeout_s) for c, s in zip(completions, schema)]
        if log_metric is not None:  # the completions that hit the time bound (scored 0), counted
            log_metric("rewards/json_schema/timeouts", float(sum(reason == "timeout" for _, reason, _ in verdicts)))
        return [reward for reward, _, _ in verdicts]

    def explain(completion: str, schema: object = None, **_row) -> dict:
        reward, reason, errors = check_json(completion, schema, partial_credit, timeout_s)
        return {"reward": reward, "reason": reason, **({"errors": errors} if errors else {})}

    score.explain = explain
    return score
