"""Checks of receipts that come from outside (SPEC §12.1): verify, never trust.

A receipt id is a plain hash anyone can recompute, so an imported receipt is a claim. Two
layers:

- ``receipt_problem`` — the shape, needing nothing but the receipt: capture's ref rules
  (``validator.refs``), hex shapes of ids and hashes, bounded numbers and strings, fields
  consistent with the kind and with the ref, the symbol handle recomputed, the id matching
  the fields. Publish applies it too, so whatever publish writes, import accepts.
- ``CommitSource.verify`` — the content, where the capture commit is in a trusted object
  database (a clone whose repository identity is the receipt's): the blob at the path in
  that commit's tree, the content hash, the span hashes, the fragment bytes and line range,
  and — when the receipt's extractor version is this citegraph's — the symbol re-extracted
  and compared field by field. A mismatch is a ``ReceiptMismatch``; what could not be
  checked (no such clone, commit not fetched, blob missing, another extractor version) is
  returned as a note: the receipt is kept, shape-checked but not verified by content.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from typing import Any

import pygit2

from citegraph.graph.graph_view import MAX_DEP_DEPTH, MAX_DEPS
from citegraph.graph.handles import CGS_RE, symbol_handle
from citegraph.graph.store import Home
from citegraph.indexer import gitrepo
from citegraph.indexer.blob_facts import facts_for_blob
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.extract import EXTRACTOR_VERSION, FileFacts, blake3_hex
from citegraph.indexer.languages import LANGUAGES, language_for_path
from citegraph.indexer.tokens import token_hash
from citegraph.memory.exchange.untrusted_json import lone_surrogate, shown
from citegraph.validator.capture import MAX_DEPS_JSON_BYTES
from citegraph.validator.receipt_identity import (
    BASE_FIELDS,
    KIND_FIELDS,
    RECEIPT_FIELDS,
    receipt_id_matches,
)
from citegraph.validator.refs import check_path, parse_ref
from citegraph.validator.spans import hash_bytes, line_count, line_starts, span_bytes, span_range

# Bounds of an acceptable receipt (also what makes a publish line's size bounded).
MAX_LINE = 10**7  # line numbers 1..MAX_LINE
MAX_BYTE = 2**40  # byte offsets 0..MAX_BYTE
MAX_ORDINAL = 10**6
MAX_PATH_BYTES = 4096  # UTF-8 bytes of a repository path (PATH_MAX)
MAX_NAME_BYTES = 1024  # UTF-8 bytes of a symbol name or qualified name
MAX_REF_BYTES = MAX_PATH_BYTES + 2 + MAX_NAME_BYTES  # path::Qualified.name at most
# One receipt as JSON, worst case: every variable string made of characters that JSON
# escapes as \u00XX (6 bytes for 1), plus 2 KiB for the fixed-size fields and the keys;
# ``deps`` is JSON text already (no raw control characters), so at most its quotes and
# backslashes double.
MAX_RECEIPT_JSON_BYTES = 6 * (MAX_REF_BYTES + MAX_PATH_BYTES + 2 * MAX_NAME_BYTES) + 2048 + 2 * MAX_DEPS_JSON_BYTES
PARSE_TIMEOUT_S = 10.0  # re-extraction of one blob (the indexer's default is 5 s)

HEX32 = re.compile(r"^[0-9a-f]{32}$")
OBJECT_ID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")  # SHA-1 or SHA-256 repositories
SNAPSHOT_ID = re.compile(r"^cgsnap_[0-9a-f]{32}$")
CITATION_ID = re.compile(r"^cgc_[0-9a-f]{32}$")
TOKEN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+#-]{0,31}$")  # extractor version, language, symbol kind

INT_FIELDS = {"start_line": (1, MAX_LINE), "end_line": (1, MAX_LINE), "ordinal": (0, MAX_ORDINAL),
              "start_byte": (0, MAX_BYTE), "end_byte": (0, MAX_BYTE)}
PATTERNS = {"id": CITATION_ID, "repository_id": HEX32, "snapshot_id": SNAPSHOT_ID, "commit": OBJECT_ID,
            "blob_id": OBJECT_ID, "content_hash": HEX32, "span_hash": HEX32, "first_line_hash": HEX32,
            "fragment_hash": HEX32, "body_hash": HEX32, "token_hash": HEX32, "handle": CGS_RE, "extractor_version": TOKEN,
            "language": TOKEN, "symbol_kind": TOKEN}
STRING_BYTES = {"ref": MAX_REF_BYTES, "path": MAX_PATH_BYTES, "name": MAX_NAME_BYTES,
                "qualified_name": MAX_NAME_BYTES}
OPTIONAL = {"content_hash"}  # None when the file was too large to read at capture


class ReceiptMismatch(Exception):
    """The receipt disagrees with the trusted object database (forged or corrupt)."""


class _Bad(Exception):
    pass


def receipt_problem(values: Any) -> str | None:
    """Why a receipt (as a dict from a file or the store) is not acceptable, or None."""
    try:
        _check(values)
    except _Bad as bad:
        return str(bad)
    return None


def _type_name(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _check(values: Any) -> None:
    if not isinstance(values, dict):
        raise _Bad(f"citation is {_type_name(values)}, not an object")
    unknown = sorted((k for k in values if k not in RECEIPT_FIELDS), key=str)
    if unknown:
        raise _Bad(f"citation has unknown field {shown(unknown[0])}")
    cid = values.get("id")
    if not isinstance(cid, str) or not CITATION_ID.fullmatch(cid):
        raise _Bad(f"citation id {shown(cid)} is not cgc_ + 32 lowercase hex")
    where = f"citation {cid}"
    surrogate = lone_surrogate(values)
    if surrogate:
        raise _Bad(f"{where}: {surrogate}")
    kind = values.get("kind")
    if not isinstance(kind, str) or kind not in KIND_FIELDS:
        raise _Bad(f"{where} has unknown kind {shown(kind)} (file, span or symbol)")
    wanted = set(BASE_FIELDS) | set(KIND_FIELDS[kind])
    for k in RECEIPT_FIELDS:
        v = values.get(k)
        if k == "id":
            continue
        if k == "token_hash":  # optional, span and symbol receipts; hashed into the id when present
            if v is not None:
                if kind == "file":
                    raise _Bad(f"{where}: a file citation has no token_hash (got {shown(v)})")
                if not isinstance(v, str):
                    raise _Bad(f"{where}: token_hash is {_type_name(v)}, not a string")
            continue
        if k == "deps":  # optional, symbol receipts only; hashed into the id when present
            if v is not None:
                if kind != "symbol":
                    raise _Bad(f"{where}: a {kind} citation has no deps (got {shown(v)})")
                _check_deps(where, v)
            continue
        if k not in wanted:
            if v is not None:
                raise _Bad(f"{where}: a {kind} citation has no {k} (got {shown(v)})")
            continue
        if v is None:
            if k in OPTIONAL:
                continue
            raise _Bad(f"{kind} {where} lacks {k}")
        if k == "dirty":
            if not isinstance(v, bool):
                raise _Bad(f"{where}: dirty is {_type_name(v)}, not a boolean")
        elif k in INT_FIELDS:
            if not isinstance(v, int) or isinstance(v, bool):
                raise _Bad(f"{where}: {k} is {_type_name(v)}, not an integer")
        elif not isinstance(v, str):
            raise _Bad(f"{where}: {k} is {_type_name(v)}, not a string")
        elif not v:
            raise _Bad(f"{kind} {where} lacks {k}")
    if not receipt_id_matches(values):
        raise _Bad(f"{where} does not match its fields (edited receipt)")
    for k, pattern in PATTERNS.items():
        v = values.get(k)
        if isinstance(v, str) and not pattern.fullmatch(v):
            raise _Bad(f"{where}: {k} {shown(v)} is not {_shape(k)}")
    for k, limit in STRING_BYTES.items():
        v = values.get(k)
        if isinstance(v, str) and len(v.encode("utf-8")) > limit:
            raise _Bad(f"{where}: {k} is longer than {limit} bytes")
    for k, (lo, hi) in INT_FIELDS.items():
        v = values.get(k)
        if v is not None and not lo <= v <= hi:
            raise _Bad(f"{where}: {k} {shown(v)} is out of range ({lo}..{hi})")
    if values["repository_kind"] not in ("remote", "local"):
        raise _Bad(f"{where}: repository_kind {shown(values['repository_kind'])} is not remote or local")
    _check_path(where, values["path"])
    if kind in ("span", "symbol") and values["start_line"] > values["end_line"]:
        raise _Bad(f"{where}: start_line {values['start_line']} is after end_line {values['end_line']}")
    if kind == "symbol":
        _check_symbol(where, values)
    _check_ref(where, values)


DEP_FIELDS = {"handle": str, "path": str, "qualified_name": str, "ordinal": int, "symbol_kind": str,
              "fragment_hash": str, "edge": str, "tier": str, "depth": int, "via": int}


def _check_deps(where: str, v: Any) -> None:
    """A receipt's recorded dependencies (validator/capture.py ``encode_deps``): bounded
    JSON, each entry with exactly the fields capture writes, in their shapes."""
    if not isinstance(v, str):
        raise _Bad(f"{where}: deps is {_type_name(v)}, not a string")
    if len(v.encode("utf-8", "surrogateescape")) > MAX_DEPS_JSON_BYTES:
        raise _Bad(f"{where}: deps is longer than {MAX_DEPS_JSON_BYTES} bytes")
    try:
        deps = json.loads(v)
    except ValueError:
        raise _Bad(f"{where}: deps is not JSON") from None
    if not isinstance(deps, list) or len(deps) > MAX_DEPS:
        raise _Bad(f"{where}: deps is not a list of at most {MAX_DEPS} dependencies")
    for d in deps:
        if not isinstance(d, dict) or set(d) - {"token_hash"} != set(DEP_FIELDS):
            raise _Bad(f"{where}: a dependency does not have the fields {', '.join(sorted(DEP_FIELDS))}")
        for f, t in DEP_FIELDS.items():
            if not isinstance(d[f], t) or isinstance(d[f], bool):
                raise _Bad(f"{where}: dependency {f} is {_type_name(d[f])}")
        if not CGS_RE.fullmatch(d["handle"]) or not HEX32.fullmatch(d["fragment_hash"]) or \
                not isinstance(d.get("token_hash", ""), str) or not HEX32.fullmatch(d.get("token_hash", "0" * 32)):
            raise _Bad(f"{where}: dependency {shown(d['handle'])} has a malformed handle or fragment hash")
        if not 1 <= d["depth"] <= MAX_DEP_DEPTH or not -1 <= d["via"] < MAX_DEPS:
            raise _Bad(f"{where}: dependency {d['handle']} has depth or via out of range")
        if len(d["path"].encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES or \
                len(d["qualified_name"].encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
            raise _Bad(f"{where}: dependency {d['handle']} has a path or name too long")


def _shape(k: str) -> str:
    return {"id": "cgc_ + 32 lowercase hex", "snapshot_id": "cgsnap_ + 32 lowercase hex",
            "commit": "a git object id (40 or 64 lowercase hex)", "blob_id": "a git object id (40 or 64 lowercase hex)",
            "handle": "a cgs_ handle (cgs_ + 32 lowercase hex)"}.get(
        k, "a short name" if PATTERNS[k] is TOKEN else "32 lowercase hex")


def _ref_error(err: CitegraphError, ref: str) -> str:
    prefix = f"invalid code ref {ref!r}: "
    return err.what[len(prefix):] if err.what.startswith(prefix) else err.what


def _check_path(where: str, path: str) -> None:
    try:
        check_path(path, path)
    except CitegraphError as err:
        raise _Bad(f"{where}: path {shown(path)} is not repository-relative ({_ref_error(err, path)})") from None


def _check_symbol(where: str, v: dict[str, Any]) -> None:
    if v["start_byte"] > v["end_byte"]:
        raise _Bad(f"{where}: start_byte {v['start_byte']} is after end_byte {v['end_byte']}")
    if v["extractor_version"] == EXTRACTOR_VERSION:
        expected = language_for_path(v["path"])
        if v["language"] != expected:
            raise _Bad(f"{where}: language {shown(v['language'])} is not the language of {shown(v['path'])} "
                       f"({expected or 'none: not parsed'})")
    handle = symbol_handle(v["path"], v["language"], v["symbol_kind"], v["qualified_name"], v["ordinal"])
    if handle != v["handle"]:
        raise _Bad(f"{where}: handle {v['handle']} is not the handle of {v['symbol_kind']} "
                   f"{shown(v['qualified_name'])} in {shown(v['path'])} ({handle})")


def _check_ref(where: str, v: dict[str, Any]) -> None:
    ref = v["ref"]
    try:
        p = parse_ref(ref)
    except CitegraphError as err:
        raise _Bad(f"{where}: ref {shown(ref)} is not a valid code ref ({_ref_error(err, ref)})") from None
    if p.ref != ref:
        raise _Bad(f"{where}: ref {shown(ref)} is not in its normal form {shown(p.ref)}")
    if p.kind != v["kind"]:
        raise _Bad(f"{where}: ref {shown(ref)} names a {p.kind}, the receipt a {v['kind']}")
    if p.handle is not None:
        if p.handle != v["handle"]:
            raise _Bad(f"{where}: ref {shown(ref)} names another handle than {v['handle']}")
        if p.repository_prefix is not None and p.repository_prefix != v["repository_id"][:16]:
            raise _Bad(f"{where}: ref {shown(ref)} names another repository than {v['repository_id']}")
        return
    if p.path != v["path"]:
        raise _Bad(f"{where}: ref {shown(ref)} names another path than {shown(v['path'])}")
    if p.kind == "span" and (p.start_line, p.end_line) != (v["start_line"], v["end_line"]):
        raise _Bad(f"{where}: ref {shown(ref)} names other lines than {v['start_line']}-{v['end_line']}")
    if p.kind == "symbol" and p.qualified_name != v["qualified_name"]:
        raise _Bad(f"{where}: ref {shown(ref)} names another symbol than {shown(v['qualified_name'])}")


# --- content ---------------------------------------------------------------------------------

def fragment_lines(data: bytes, start_byte: int, end_byte: int) -> tuple[int, int]:
    """The 1-based line range the extractor records for a node spanning these bytes
    (tree-sitter rows count ``\\n`` only; a node ending at a line start ends on the line
    before)."""
    start_row = data.count(b"\n", 0, start_byte)
    end_row = data.count(b"\n", 0, end_byte)
    end_col = end_byte - (data.rfind(b"\n", 0, end_byte) + 1)
    end = end_row if (end_col == 0 and end_row > start_row) else end_row + 1
    return start_row + 1, end


class CommitSource:
    """Trusted object databases by repository id: the clones named by the caller (default:
    the working directory) and the worktrees this data home has indexed. A clone counts
    only if its own identity (from its origin remote) is the receipt's repository id."""

    def __init__(self, home: Home, paths: Iterable[str | os.PathLike[str]] | None = None) -> None:
        self.home = home
        self._by_id: dict[str, list[tuple[str, pygit2.Repository]]] = {}
        self._looked_up: set[str] = set()
        self._facts: dict[tuple[str, str], FileFacts] = {}  # (blob id, language): one parse per blob
        explicit = paths is not None
        for p in (paths if explicit else ["."]):
            try:
                repo = gitrepo.open_repository(p)
            except CitegraphError:
                if explicit:
                    raise
                continue
            self._add(str(p), repo)

    def _add(self, label: str, repo: pygit2.Repository) -> None:
        rid = gitrepo.repository_identity(repo).repository_id
        known = self._by_id.setdefault(rid, [])
        if all(os.path.realpath(r.path) != os.path.realpath(repo.path) for _, r in known):
            known.append((label, repo))

    def _repos(self, repository_id: str) -> list[tuple[str, pygit2.Repository]]:
        if repository_id not in self._looked_up:
            self._looked_up.add(repository_id)
            try:  # the data home's files are not trusted: a foreign repo.json is no clone
                info = self.home.repo(repository_id).repo_info()
            except (OSError, ValueError):
                info = {}
            trees = info.get("worktrees") if isinstance(info, dict) else None
            for w in trees if isinstance(trees, list) else []:
                if isinstance(w, str) and os.path.isdir(w):
                    try:
                        self._add(w, gitrepo.open_repository(w))
                    except (CitegraphError, pygit2.GitError, OSError):
                        continue
        return self._by_id.get(repository_id, [])

    def verify(self, r: dict[str, Any]) -> str | None:
        """Recompute what the capture commit allows; None when fully verified, else a note
        saying what was not checked. Raises ReceiptMismatch on any disagreement."""
        repos = self._repos(r["repository_id"])
        if not repos:
            return f"no clone of repository {r['repository_id'][:16]}… here (pass --repo)"
        for _label, repo in repos:
            commit = _lookup(repo, r["commit"])
            if commit is not None:
                break
        else:
            return f"capture commit {r['commit'][:12]} is not in the object database (fetch it)"
        if not isinstance(commit, pygit2.Commit):
            raise ReceiptMismatch(f"commit {r['commit'][:12]} is a {type(commit).__name__.lower()}, not a commit")
        return _verify_in_commit(repo, commit, r, self._extract)

    def _extract(self, blob_id: str, language: str, data: bytes) -> FileFacts:
        key = (blob_id, language)
        if key not in self._facts:
            if len(self._facts) >= 256:
                self._facts.clear()
            self._facts[key] = facts_for_blob(language, data, PARSE_TIMEOUT_S)[1]
        return self._facts[key]


def _lookup(repo: pygit2.Repository, oid: str) -> Any:
    try:
        return repo.get(oid)
    except (ValueError, KeyError, pygit2.GitError):
        return None


def _verify_in_commit(repo: pygit2.Repository, commit: pygit2.Commit, r: dict[str, Any],
                      extract: Callable[[str, str, bytes], FileFacts]) -> str | None:
    short, path = str(commit.id)[:12], r["path"]
    try:
        entry = commit.tree[path]
    except KeyError:
        raise ReceiptMismatch(f"{shown(path)} is not a file of capture commit {short}") from None
    except (ValueError, pygit2.GitError):
        return f"the tree of capture commit {short} is not readable (partial clone)"
    mode = entry.filemode
    if mode == pygit2.GIT_FILEMODE_TREE:
        raise ReceiptMismatch(f"{shown(path)} is a directory in capture commit {short}")
    if mode == pygit2.GIT_FILEMODE_LINK:
        raise ReceiptMismatch(f"{shown(path)} is a symlink in capture commit {short} (capture refuses symlinks)")
    if mode == pygit2.GIT_FILEMODE_COMMIT:
        raise ReceiptMismatch(f"{shown(path)} is a submodule in capture commit {short}")
    if str(entry.id) != r["blob_id"]:
        raise ReceiptMismatch(f"blob_id {r['blob_id'][:12]} is not the blob at {shown(path)} in capture commit "
                              f"{short} ({str(entry.id)[:12]})")
    try:
        data = repo.odb.read(entry.id)[1]
    except (KeyError, ValueError, pygit2.GitError):
        return "the blob is not in the object database (partial clone): blob id checked, content not"
    if r.get("content_hash") is not None and blake3_hex(data) != r["content_hash"]:
        raise ReceiptMismatch(f"content_hash {r['content_hash']} is not the hash of that blob")
    if r["kind"] == "span":
        _verify_span(data, r)
    elif r["kind"] == "symbol":
        problem = _verify_symbol(data, r, extract)
        if problem is not None:
            return problem
    _verify_tokens(data, r)
    return None


def _verify_tokens(data: bytes, r: dict[str, Any]) -> None:
    """A recorded token hash is the one this citegraph computes from the blob (a forged one
    could call a real change cosmetic). Checked under the same extractor version only, as
    the symbol's facts are: another version may parse with other grammars."""
    if r.get("token_hash") is None or r["extractor_version"] != EXTRACTOR_VERSION:
        return
    if r["kind"] == "span":
        lang, (sb, eb) = language_for_path(r["path"]), span_range(data, r["start_line"], r["end_line"])
    else:
        lang, sb, eb = r["language"], r["start_byte"], r["end_byte"]
    if token_hash(lang, data, sb, eb) != r["token_hash"]:
        raise ReceiptMismatch(f"token_hash {r['token_hash']} is not the token hash of the cited code in that blob")


def _verify_span(data: bytes, r: dict[str, Any]) -> None:
    n = line_count(data)
    if r["end_line"] > n:
        raise ReceiptMismatch(f"lines {r['start_line']}-{r['end_line']} are beyond the end of the blob ({n} lines)")
    starts = line_starts(data)
    if hash_bytes(span_bytes(data, r["start_line"], r["end_line"], starts)) != r["span_hash"]:
        raise ReceiptMismatch(f"span_hash {r['span_hash']} is not the hash of lines "
                              f"{r['start_line']}-{r['end_line']} of that blob")
    if hash_bytes(span_bytes(data, r["start_line"], r["start_line"], starts)) != r["first_line_hash"]:
        raise ReceiptMismatch(f"first_line_hash {r['first_line_hash']} is not the hash of line {r['start_line']}")


def _verify_symbol(data: bytes, r: dict[str, Any], extract: Callable[[str, str, bytes], FileFacts]) -> str | None:
    sb, eb = r["start_byte"], r["end_byte"]
    if eb > len(data):
        raise ReceiptMismatch(f"bytes {sb}-{eb} are beyond the end of the blob ({len(data)} bytes)")
    if blake3_hex(data[sb:eb]) != r["fragment_hash"]:
        raise ReceiptMismatch(f"fragment_hash {r['fragment_hash']} is not the hash of bytes {sb}-{eb} of that blob")
    lines = fragment_lines(data, sb, eb)
    if lines != (r["start_line"], r["end_line"]):
        raise ReceiptMismatch(f"lines {r['start_line']}-{r['end_line']} are not where bytes {sb}-{eb} lie "
                              f"({lines[0]}-{lines[1]})")
    if r["extractor_version"] != EXTRACTOR_VERSION or r["language"] not in LANGUAGES:
        return (f"symbol not re-extracted: captured by extractor {r['extractor_version']}, this citegraph runs "
                f"{EXTRACTOR_VERSION} (blob, content and fragment bytes checked)")
    facts = extract(r["blob_id"], r["language"], data)
    if facts.status == "skipped" and facts.reason == "parse-timeout":
        return "symbol not re-extracted: the parse timed out (blob, content and fragment bytes checked)"
    key = (r["symbol_kind"], r["qualified_name"], r["ordinal"])
    found = [s for s in facts.symbols if (s.kind, s.qualified_name, s.ordinal) == key]
    what = f"{r['symbol_kind']} {shown(r['qualified_name'])}" + (f" #{r['ordinal']}" if r["ordinal"] else "")
    if not found:
        why = f" ({facts.reason})" if facts.status == "skipped" else ""
        raise ReceiptMismatch(f"the blob has no {what}{why}")
    s = found[0]
    for k, mine in (("name", s.name), ("start_byte", s.start_byte), ("end_byte", s.end_byte),
                    ("start_line", s.start_line), ("end_line", s.end_line),
                    ("fragment_hash", s.fragment_hash), ("body_hash", s.body_hash)):
        if r[k] != mine:
            raise ReceiptMismatch(f"{k} {shown(r[k])} is not the {k} of {what} in that blob ({shown(mine)})")
    return None
