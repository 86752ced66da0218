"""The identity of a receipt: ONE function over ONE field set (issue 20).

Capture, refresh (a re-spelled symbol), import and the checker used by publish and import
all call ``receipt_id``. The field set depends only on the kind — the base fields, the
kind's own fields, and ``deps`` and ``token_hash`` when recorded — never on which keys the caller's dict
happens to hold, so a receipt built from ``Receipt.to_dict()`` (every field, the other
kinds' as None) hashes to the id capture gave it.

``legacy_receipt_ids`` are the ids refresh wrote before (over every dataclass field): the
read side accepts them so that stored and published receipts stay valid; nothing writes
them any more.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import fields
from typing import Any

import blake3

from citegraph.validator.model import Receipt

BASE_FIELDS = ("ref", "kind", "repository_id", "repository_kind", "snapshot_id", "commit", "dirty",
               "extractor_version", "path", "blob_id", "content_hash")
KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "file": (),
    "span": ("start_line", "end_line", "span_hash", "first_line_hash"),
    "symbol": ("start_line", "end_line", "handle", "language", "symbol_kind", "name", "qualified_name",
               "ordinal", "start_byte", "end_byte", "fragment_hash", "body_hash"),
}
# ``deps`` (symbol dependencies, SPEC §21) and ``token_hash`` (SPEC §6.3a): hashed when set.
OPTIONAL_FIELDS = ("deps", "token_hash")
RECEIPT_FIELDS = tuple(f.name for f in fields(Receipt))


def identity_fields(values: Mapping[str, Any]) -> tuple[str, ...]:
    """The fields a receipt's id covers: base + the kind's + the optional ones set. An
    unknown kind (a hostile import) covers base + every other field that is set, so its id
    is still a function of everything it says (the checker refuses the kind anyway)."""
    kind = values.get("kind")
    own = KIND_FIELDS.get(kind) if isinstance(kind, str) else None
    if own is None:
        own = tuple(k for k in RECEIPT_FIELDS if k not in BASE_FIELDS and k not in ("id", *OPTIONAL_FIELDS)
                    and values.get(k) is not None)
    # Optional fields enter the id only when set, so every receipt stored before they
    # existed keeps its id.
    extra = tuple(k for k in OPTIONAL_FIELDS if values.get(k) is not None)
    return (*BASE_FIELDS, *own, *extra)


def _hash(values: Mapping[str, Any], keys: Iterator[str] | tuple[str, ...]) -> str:
    h = blake3.blake3()
    for k in sorted(keys):
        h.update(f"{k}={values.get(k)}\0".encode("utf-8", "surrogateescape"))
    return "cgc_" + h.hexdigest(16)


def receipt_id(values: Mapping[str, Any]) -> str:
    """The citation id: blake3 over ``identity_fields`` (``id`` itself never)."""
    return _hash(values, identity_fields(values))


def legacy_receipt_ids(values: Mapping[str, Any]) -> tuple[str, ...]:
    """Ids written before one identity existed: refresh hashed every dataclass field
    (``deps`` left out when None); the checker's third form hashed ``deps=None`` too."""
    every = tuple(k for k in RECEIPT_FIELDS if k not in ("id", "token_hash"))  # token_hash came later
    return _hash(values, tuple(k for k in every if k != "deps" or values.get(k) is not None)), _hash(values, every)


def receipt_id_matches(values: Mapping[str, Any]) -> bool:
    """Does the receipt's id match its fields? Detects an edited receipt."""
    cid = values.get("id")
    return cid == receipt_id(values) or cid in legacy_receipt_ids(values)
