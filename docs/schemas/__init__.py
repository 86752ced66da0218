"""``citegraph.schemas``: the machine-readable output contract (SPEC §16, §19).

The JSON Schema files next to this module (``docs/schemas/*.schema.json``) are the one
source: the CLI's ``--json`` outputs, the MCP tools' ``outputSchema``s and the tests all
read them through this loader, and the documentation is the files themselves. Shared
shapes (a timestamp, a validated citation, a stored receipt, the MCP error object) live
once in ``common.schema.json`` and are referenced from the others by a standard
cross-file ``$ref``; :func:`bundled` inlines those for consumers that need one
self-contained document (an MCP client resolves ``$ref`` only within the schema).

This package is the lowest layer: it imports nothing from citegraph, so every layer may
use it. It also holds the output edge's one conversion (:func:`to_output`): stores keep
times as epoch floats; every JSON output shows them as ISO 8601 UTC strings.
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
from functools import cache
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parent
BASE_URI = "https://citegraph.dev/schemas/"
SUFFIX = ".schema.json"


def names() -> list[str]:
    """Every schema, by name (the file name without ``.schema.json``)."""
    return sorted(p.name[: -len(SUFFIX)] for p in SCHEMA_DIR.glob(f"*{SUFFIX}"))


@cache
def _load(name: str) -> dict[str, Any]:
    path = SCHEMA_DIR / f"{name}{SUFFIX}"
    if not path.is_file():
        raise KeyError(f"no JSON Schema named {name!r} in {SCHEMA_DIR}")
    return json.loads(path.read_text(encoding="utf-8"))


def load(name: str) -> dict[str, Any]:
    """The schema file ``name`` as written (a private copy: callers may change it)."""
    return copy.deepcopy(_load(name))


def _split(ref: str, owner: str) -> tuple[str, str]:
    """(schema name, fragment) of a ``$ref`` found in schema ``owner``."""
    file, _, frag = ref.partition("#")
    if file.startswith(BASE_URI):
        file = file[len(BASE_URI):]
    if not file:
        return owner, frag
    if not file.endswith(SUFFIX) or "/" in file:
        raise ValueError(f"{owner}: $ref {ref!r} does not name a schema of docs/schemas/")
    return file[: -len(SUFFIX)], frag


@cache
def _bundled(name: str) -> dict[str, Any]:
    root = copy.deepcopy(_load(name))
    defs = root.setdefault("$defs", {})

    def rewrite(node: Any, owner: str) -> Any:
        if isinstance(node, list):
            return [rewrite(x, owner) for x in node]
        if not isinstance(node, dict):
            return node
        out = {k: rewrite(v, owner) for k, v in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str):
            target, frag = _split(ref, owner)
            if target == name:
                out["$ref"] = "#" + frag
            else:
                if not frag.startswith("/$defs/") or "/" in frag[len("/$defs/"):]:
                    raise ValueError(f"{owner}: $ref {ref!r} must point at a top-level $defs entry")
                key = f"{target}.{frag[len('/$defs/'):]}"
                out["$ref"] = f"#/$defs/{key}"
                if key not in defs:
                    defs[key] = {}  # reserved first: a recursive definition ends here
                    defs[key] = rewrite(_load(target)["$defs"][frag[len("/$defs/"):]], target)
        return out

    body = {k: v for k, v in root.items() if k != "$defs"}
    body = rewrite(body, name)
    own = {k: rewrite(v, name) for k, v in list(defs.items()) if "." not in k}
    defs.update(own)
    body["$defs"] = defs
    if not defs:
        del body["$defs"]
    return body


def bundled(name: str) -> dict[str, Any]:
    """Schema ``name`` as one self-contained document: every ``$ref`` into another file
    is copied into ``$defs`` (as ``<file>.<def>``) and pointed at locally. The MCP
    ``outputSchema`` of a tool is this."""
    return copy.deepcopy(_bundled(name))


def part(name: str, definition: str) -> dict[str, Any]:
    """The self-contained schema of one ``$defs`` entry of ``name`` (e.g. one line of
    ``validate --format jsonl``)."""
    whole = bundled(name)
    return {"$schema": whole.get("$schema"), "$defs": whole.get("$defs", {}), "$ref": f"#/$defs/{definition}"}


def validator(name: str, definition: str | None = None) -> Any:
    """A Draft 2020-12 validator of schema ``name`` (or of one of its definitions), with
    format checking (timestamps are ``date-time``). Needs the ``jsonschema`` package
    (a test dependency)."""
    import jsonschema

    schema = part(name, definition) if definition else bundled(name)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


# --- the output edge: times ------------------------------------------------------------------

TIME_KEY_SUFFIX = "_at"
"""Keys holding a time in every JSON output (``created_at``, ``published_at``, …)."""


def iso_time(t: float | int) -> str:
    """An epoch time as ISO 8601 / RFC 3339 in UTC, to the second: ``2026-12-01T18:11:42Z``."""
    return _dt.datetime.fromtimestamp(float(t), _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _is_time(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value \
        and abs(value) < 253402300800  # before year 10000


def to_output(data: Any) -> Any:
    """``data`` with every number under a key ending in ``_at`` as :func:`iso_time` (a
    new structure; ``data`` is not changed). Stores and library calls keep epoch floats;
    the CLI's ``--json``, the MCP results and the service's JSON log call this once,
    where they write."""
    if isinstance(data, dict):
        return {k: (iso_time(v) if isinstance(k, str) and k.endswith(TIME_KEY_SUFFIX) and _is_time(v)
                    else to_output(v)) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [to_output(v) for v in data]
    return data
