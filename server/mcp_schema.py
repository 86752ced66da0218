"""The ``outputSchema`` a tool publishes: the *structure* of its docs/schemas/ file, small.

``tools/list`` is read into every agent's context before any work (issue 22: ≤ 30 KB for
all tools). The schema files in docs/schemas/ stay the one source and the full contract —
the CLI's ``--json``, the tests and people read them. A tool publishes their structure:

- ``structure`` keeps what says what a result looks like (``type``, ``properties``,
  ``items``, a map's value schema, ``enum``/``const``, ``$ref``/``$defs`` and the
  composition keywords) and drops value constraints (``pattern``, ``format``, bounds),
  which keys are always present (``required``), closed objects
  (``additionalProperties``/``unevaluatedProperties`` false), cross-field invariants
  (``if``/``then``/``else``, ``not``) and the prose: 33.1 KB → 28.4 KB for all tools with
  ``required`` alone (docs/mcp.md "Lean tools" weighs each). The result is never
  stricter: every instance the full schema accepts, it accepts (``oneOf`` becomes
  ``anyOf``, whose branches may overlap once their constraints are gone).
- ``compact`` then rewrites it to an equivalent, shorter document: local definitions named
  without their file prefix, a definition copied into its uses where that is shorter, and
  ``anyOf [null, {type: T, …}]`` as ``{type: [T, null], …}``.

Every result is still validated against the full schema (tests/test_mcp_schemas.py), so
what is dropped here is checked where it is defined. Pure functions over plain data.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

from citegraph import schemas

STRUCTURE = frozenset({"type", "properties", "additionalProperties", "patternProperties", "items", "enum", "const",
                       "$ref", "$defs", "allOf", "anyOf", "oneOf"})
"""The keywords a published output schema keeps; every other one is dropped (and
``additionalProperties`` only where it is a schema: the values of a map)."""
_NAMED = frozenset({"properties", "$defs", "patternProperties"})  # their keys are names, never keywords
_IN_PLACE = ("allOf", "anyOf", "oneOf")
_REF = "#/$defs/"
_ONLY_FOR = {
    "string": {"pattern", "format", "minLength", "maxLength"},
    "integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "object": {"properties", "required", "additionalProperties", "patternProperties", "minProperties",
               "maxProperties", "propertyNames", "dependentRequired"},
    "array": {"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains"},
    "boolean": set(),
}
"""Keywords that constrain only instances of that type (JSON Schema 2020-12)."""


def output_schema(*names: str) -> dict[str, Any]:
    """What a tool publishes as ``outputSchema`` for results of schema ``names`` (several:
    a tool whose ``op`` chooses the result, as ``workset``). A private copy: callers may
    change it."""
    return copy.deepcopy(_published(names))


@cache
def _published(names: tuple[str, ...]) -> dict[str, Any]:
    """Computed once a process (~0.1 s for every tool), not at each ``tools/list``."""
    return compact(structure(union(names) if len(names) > 1 else schemas.bundled(names[0])))


def union(names: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """One self-contained object schema accepting a result of any of ``names``: each
    bundled schema becomes a definition, its own definitions prefixed with its name (the
    definitions it took from other files keep theirs: they are the same everywhere)."""
    defs: dict[str, Any] = {}
    for name in names:
        doc = schemas.bundled(name)
        own = {k: f"{name}.{k}" for k in doc.get("$defs", {}) if "." not in k}
        doc = _renamed(doc, own)
        for key, body in doc.pop("$defs", {}).items():
            defs[own.get(key, key)] = body
        defs[name] = {k: v for k, v in doc.items() if k not in ("$schema", "$id")}
    return {"type": "object", "anyOf": [{"$ref": _REF + n} for n in names], "$defs": defs}


def structure(schema: Any) -> Any:
    """``schema`` without value constraints, conditionals and prose (see the module doc);
    accepts at least what ``schema`` accepts."""
    if isinstance(schema, list):
        return [structure(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _NAMED:
            out[key] = {name: structure(sub) for name, sub in value.items()}
        elif key in ("enum", "const"):
            out[key] = copy.deepcopy(value)  # values, never schemas
        elif key == "oneOf" and "anyOf" in schema:  # both: the oneOf's anyOf is one more conjunct
            out["allOf"] = [*out.get("allOf", []), {"anyOf": structure(value)}]
        elif key == "allOf":
            out["allOf"] = [*structure(value), *out.get("allOf", [])]
        elif key == "additionalProperties" and not isinstance(value, dict):
            continue  # closed objects: a guarantee no client reads
        elif key in STRUCTURE:
            out["anyOf" if key == "oneOf" else key] = structure(value)
    for key in _IN_PLACE:  # members left without a constraint constrain nothing
        if key in out:
            members = [m for m in out[key] if m != {}]
            if key == "allOf" and not members:
                del out[key]
            elif key == "anyOf" and len(members) < len(out[key]):
                del out[key]  # one branch accepts anything: so does the anyOf
            else:
                out[key] = members
    return out


def compact(schema: dict[str, Any]) -> dict[str, Any]:
    """An equivalent, shorter ``schema`` (see the module doc)."""
    doc = copy.deepcopy(schema)
    defs = doc.get("$defs", {})
    short: dict[str, str] = {}
    for key in defs:
        name = key.rsplit(".", 1)[-1]
        short[key] = key if name in short.values() or (name != key and name in defs) else name
    doc = _renamed(doc, short)
    while _inline_one(doc):
        pass
    if not doc.get("$defs"):
        doc.pop("$defs", None)
    return _nullable(doc)


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def _renamed(node: Any, names: dict[str, str]) -> Any:
    """``node`` with ``$defs`` keys and local ``$ref``s renamed by ``names``."""
    if isinstance(node, list):
        return [_renamed(x, names) for x in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "$defs":
            out[key] = {names.get(k, k): _renamed(v, names) for k, v in value.items()}
        elif key == "$ref" and isinstance(value, str) and value.startswith(_REF):
            out[key] = _REF + names.get(value[len(_REF):], value[len(_REF):])
        else:
            out[key] = _renamed(value, names)
    return out


def _refs_to(node: Any, name: str, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("$ref") == _REF + name:
            found.append(node)
        for value in node.values():
            _refs_to(value, name, found)
    elif isinstance(node, list):
        for value in node:
            _refs_to(value, name, found)
    return found


_DEPENDS = {"additionalProperties": {"properties", "patternProperties"}, "items": {"prefixItems"},
            "then": {"if"}, "else": {"if"}, "minContains": {"contains"}, "maxContains": {"contains"}}
"""Keywords whose meaning depends on others beside them (JSON Schema 2020-12)."""


def _mergeable(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether one schema holding the keywords of ``a`` and ``b`` means ``a`` and ``b``:
    no keyword differs, and none reads a keyword that only the other side holds."""
    if any(k in a and a[k] != v for k, v in b.items()):
        return False
    for x, y in ((a, b), (b, a)):
        for key in x:
            if key in ("unevaluatedProperties", "unevaluatedItems") and set(y) - set(x):
                return False
            if _DEPENDS.get(key, set()) & (set(y) - set(x)):
                return False
    return True


def _inline_one(doc: dict[str, Any]) -> bool:
    """Copy one definition into its uses where that is no longer than keeping it; False
    when none is. A use with other keywords beside ``$ref`` takes the definition's
    keywords in place (the same constraints, applied at the same place) when no keyword
    differs; a recursive definition stays."""
    defs = doc.get("$defs", {})
    for name, body in defs.items():
        if _refs_to(body, name, []) or "$defs" in body:
            continue
        uses = _refs_to(doc, name, [])
        if not all(_mergeable({k: v for k, v in use.items() if k != "$ref"}, body) for use in uses):
            continue
        ref = _size({"$ref": _REF + name})
        if len(uses) * _size(body) <= _size(body) + _size(name) + 2 + len(uses) * ref:
            del defs[name]
            for use in uses:
                del use["$ref"]
                use.update(copy.deepcopy(body))
            return True
    return False


def _nullable(node: Any) -> Any:
    """``anyOf [{type: null}, {type: T, …}]`` as ``{type: [T, null], …}`` when the other
    branch holds only keywords that constrain instances of type T (null passes them)."""
    if isinstance(node, list):
        return [_nullable(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _nullable(v) for k, v in node.items()}
    branches = out.get("anyOf")
    if len(out) == 1 and isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches:
        other = branches[1] if branches[0] == {"type": "null"} else branches[0]
        kind = other.get("type")
        if isinstance(kind, str) and kind != "null" and set(other) - {"type"} <= _ONLY_FOR.get(kind, set()):
            return {**other, "type": [kind, "null"]}
    return out
