"""The tools' published ``outputSchema`` (server/mcp_schema.py, issue 22 "Lean tools"):
``structure`` never refuses what the full docs/schemas file accepts, ``compact`` accepts
exactly what its input accepts, and the real schemas keep every property and vocabulary.
Property tests draw small schemas of the keywords docs/schemas/ uses, and JSON values
from an alphabet small enough to hit their constraints both ways."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citegraph import schemas
from citegraph.server.mcp_schema import compact, output_schema, structure, union
from citegraph.server.mcp_tools import TOOLS, WORKSET_OPS

KEYS = ["a", "b", "c"]
scalars = st.one_of(st.none(), st.booleans(), st.sampled_from([0, 1, 2, -1, 1.5]),
                    st.sampled_from(["", "x", "cgm_1", "ab", "2026-12-01T18:11:42Z"]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)), max_leaves=8)

leaf_schemas = st.one_of(
    st.builds(lambda t, lo: {"type": t, "minimum": lo}, st.sampled_from(["integer", "number"]), st.sampled_from([0, 1])),
    st.builds(lambda p: {"type": "string", "pattern": p, "minLength": 1}, st.sampled_from(["^x", "^cgm_", "b$"])),
    st.builds(lambda t: {"type": t}, st.sampled_from(["string", "integer", "boolean", "null", ["string", "null"]])),
    st.builds(lambda e: {"enum": e}, st.sampled_from([["x", "ab"], [0, 1, None], ["x"]])),
    st.builds(lambda e: {"type": "string", "enum": e}, st.sampled_from([["x", "ab"], ["x"]])),
    st.builds(lambda c: {"const": c}, st.sampled_from([1, "x", None])),
    st.builds(lambda b: {"$ref": "#/$defs/d", **b}, st.sampled_from(
        [{}, {"type": "object"}, {"type": "string"}, {"additionalProperties": {"type": "integer"}},
         {"properties": {"a": {"type": "integer"}}}])),
    st.just({"type": "string", "format": "date-time"}),
)


def _object(props: dict, required: list, closed: object, cond: tuple | None) -> dict:
    out = {"type": "object", "properties": props, "required": [k for k in required if k in props]}
    if closed is not None:  # false: a closed object; a schema: the values of a map
        out["additionalProperties"] = closed
    if cond:  # a cross-field invariant: if a is `x`, b must follow this schema
        out["allOf"] = [{"if": {"properties": {"a": {"const": "x"}}}, "then": {"properties": {"b": cond[0]}}}]
    return out


schemas_ = st.recursive(leaf_schemas, lambda inner: st.one_of(
    st.builds(_object, st.dictionaries(st.sampled_from(KEYS), inner, max_size=3), st.lists(st.sampled_from(KEYS)),
              st.sampled_from([None, False, {"type": "integer"}]), st.one_of(st.none(), st.tuples(inner))),
    st.builds(lambda s, n: {"type": "array", "items": s, "maxItems": n}, inner, st.sampled_from([1, 2])),
    st.builds(lambda a, b: {"oneOf": [a, b]}, inner, inner),
    st.builds(lambda a: {"oneOf": [{"type": "null"}, a]}, inner),
    st.builds(lambda a: {"not": a}, inner),
    st.builds(lambda a, b: {"allOf": [a], **b}, inner, st.sampled_from([{}, {"type": "object"}])),
), max_leaves=6)
definitions = st.one_of(
    st.builds(lambda p: {"type": "object", "properties": p}, st.dictionaries(st.sampled_from(KEYS), leaf_schemas.filter(
        lambda d: "$ref" not in d), max_size=2)),
    schemas_.filter(lambda d: "#/$defs/d" not in json.dumps(d)))
documents = st.builds(lambda body, d: {**body, "$defs": {"d": d}}, schemas_, definitions)


def valid(schema: dict, value: object) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(value)


@settings(max_examples=300)
@given(documents, st.lists(values, min_size=1, max_size=12))
def test_structure_accepts_whatever_the_full_schema_accepts(doc, instances):
    lean = structure(doc)
    for value in instances:
        if valid(doc, value):
            assert valid(lean, value), (doc, lean, value)


@settings(max_examples=300)
@given(documents, st.lists(values, min_size=1, max_size=12))
def test_compact_accepts_exactly_what_it_was_given_accepts(doc, instances):
    lean = structure(doc)
    small = compact(lean)
    for value in instances:
        assert valid(small, value) == valid(lean, value), (lean, small, value)


def test_structure_drops_constraints_and_prose_and_keeps_the_shape():
    full = {"type": "object", "description": "x", "required": ["id"], "additionalProperties": False,
            "properties": {"id": {"type": "string", "pattern": "^cgm_"},
                           "description": {"type": "string", "description": "a property named like a keyword"},
                           "counts": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
                           "at": {"oneOf": [{"type": "null"}, {"type": "string", "format": "date-time"}]}},
            "allOf": [{"if": {"properties": {"id": {"const": "x"}}}, "then": {"required": ["at"]}}]}
    assert compact(structure(full)) == {"type": "object", "properties": {
        "id": {"type": "string"}, "description": {"type": "string"},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},  # a map's values stay typed
        "at": {"type": ["string", "null"]}}}


def test_oneof_becomes_anyof_where_dropped_constraints_made_branches_overlap():
    full = {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}]}
    assert valid(full, "abc")
    assert not valid({"oneOf": [{"type": "string"}, {"type": "string"}]}, "abc")  # what a plain drop would do
    assert structure(full) == {"anyOf": [{"type": "string"}, {"type": "string"}]}
    assert valid(structure(full), "abc")
    # `not` would turn stricter with its constraints gone: it goes as a whole
    assert structure({"type": "string", "not": {"type": "string", "pattern": "^a"}}) == {"type": "string"}


def test_compact_inlines_cheap_or_single_definitions_and_keeps_recursive_ones():
    doc = {"type": "object", "properties": {"m": {"$ref": "#/$defs/common.memory"},
                                            "n": {"$ref": "#/$defs/count"}, "o": {"$ref": "#/$defs/count"},
                                            "t": {"$ref": "#/$defs/tree"}},
           "$defs": {"common.memory": {"type": "object", "properties": {"id": {"type": "string"}}},
                     "count": {"type": "integer"},
                     "tree": {"type": "object", "properties": {"kids": {"type": "array",
                                                                        "items": {"$ref": "#/$defs/tree"}}}}}}
    assert compact(doc) == {"type": "object", "properties": {
        "m": {"type": "object", "properties": {"id": {"type": "string"}}},
        "n": {"type": "integer"}, "o": {"type": "integer"}, "t": {"$ref": "#/$defs/tree"}},
        "$defs": {"tree": {"type": "object", "properties": {"kids": {"type": "array",
                                                                     "items": {"$ref": "#/$defs/tree"}}}}}}
    # a use with its own keywords takes the definition in place only when none differs ...
    clash = {"properties": {"a": {"$ref": "#/$defs/d", "type": "string"}}, "$defs": {"d": {"type": "integer"}}}
    assert compact(clash) == clash
    # ... and none reads a keyword of the other side: here every key of the use is additional
    apart = {"$ref": "#/$defs/d", "additionalProperties": {"type": "integer"},
             "$defs": {"d": {"type": "object", "properties": {"a": {"type": "string"}}}}}
    assert not valid(apart, {"a": "x"})
    assert compact(apart) == apart
    together = {"$ref": "#/$defs/d", "$defs": {"d": {"type": "object", "properties": {"a": {"type": "string"}}}}}
    assert compact(together) == {"type": "object", "properties": {"a": {"type": "string"}}}


def test_nullable_unions_become_type_lists_only_where_null_passes_the_rest():
    assert compact({"anyOf": [{"type": "null"}, {"type": "string"}]}) == {"type": ["string", "null"]}
    enum = {"anyOf": [{"type": "null"}, {"type": "string", "enum": ["x"]}]}  # enum would refuse null
    assert compact(enum) == enum and valid(enum, None)


def test_a_shared_name_keeps_its_file_prefix():
    doc = {"properties": {"a": {"$ref": "#/$defs/x"}, "b": {"$ref": "#/$defs/common.x"}},
           "$defs": {"x": {"type": "object", "properties": {"p": {"type": "string"}, "q": {"type": "string"}}},
                     "common.x": {"type": "object", "properties": {"r": {"type": "string"}, "s": {"type": "integer"}}}}}
    out = compact({**doc, "properties": {**doc["properties"], "c": {"$ref": "#/$defs/x"},
                                         "d": {"$ref": "#/$defs/common.x"}}})
    assert set(out["$defs"]) == {"x", "common.x"}


@pytest.mark.parametrize("name", sorted({o for t in TOOLS.values() for o in t.outputs()}))
def test_every_published_schema_keeps_every_property_and_vocabulary(name):
    """What a client reads in a result — every key at every depth, and every enumerated
    value (outcomes, freshness, kinds) — is in the published schema as in the file."""
    def vocabulary(node, path="", acc=None):
        acc = set() if acc is None else acc
        if isinstance(node, dict):
            for key, sub in node.items():
                if key in ("properties", "$defs", "patternProperties"):
                    for prop, s in sub.items():
                        acc.add(("key", prop) if key == "properties" else ("def", ""))
                        vocabulary(s, path, acc)
                elif key in ("enum", "const"):
                    acc |= {("value", json.dumps(v)) for v in (sub if key == "enum" else [sub])}
                elif key not in ("if", "then", "else", "not", "description", "examples"):
                    vocabulary(sub, path, acc)
        elif isinstance(node, list):
            for sub in node:
                vocabulary(sub, path, acc)
        return acc

    published = output_schema(name)
    assert vocabulary(published) - {("def", "")} == vocabulary(schemas.bundled(name)) - {("def", "")}
    jsonschema.Draft202012Validator.check_schema(published)


def test_the_workset_tool_publishes_one_schema_for_every_op():
    names = tuple(dict.fromkeys(o for o, *_ in WORKSET_OPS.values()))
    assert TOOLS["workset"].outputs() == names
    doc = union(names)
    assert doc["anyOf"] == [{"$ref": f"#/$defs/{n}"} for n in names]
    # each op's own definitions are prefixed with its schema's name; shared ones are not
    assert all("." in k or k in names for k in doc["$defs"])
    jsonschema.Draft202012Validator.check_schema(output_schema(*names))
