"""Capture: resolve code refs against the exact-current ready snapshot into receipts.

Capture never starts indexing, is atomic (one bad ref fails all), and detects races by
reading the repository state once before resolving and checking once after it (through a
``StateSource``, graph/current.py).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from citegraph.graph import graph_view
from citegraph.graph.current import CurrentState, ScanSource, StateSource
from citegraph.graph.ref_paths import RefPaths, normalize_refs
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home
from citegraph.graph.symbol_search import close_paths, close_symbols, search
from citegraph.indexer import gitrepo
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.extract import EXTRACTOR_VERSION
from citegraph.indexer.git_filters import GitFilters
from citegraph.indexer.languages import language_for_path
from citegraph.indexer.overloads import overload_stubs
from citegraph.indexer.paths import fs_path
from citegraph.indexer.tokens import token_hash
from citegraph.validator.decisions import Reason
from citegraph.validator.evidence import symbol_token_hashes
from citegraph.validator.model import Receipt
from citegraph.validator.next_steps import still_indexing
from citegraph.validator.receipt_identity import receipt_id
from citegraph.validator.refs import ParsedRef, bad_ref, parse_refs, same_evidence_note
from citegraph.validator.spans import hash_bytes, line_count, line_starts, span_bytes, span_range

# Bound of a receipt's recorded dependencies as JSON (16 of them take ~4 KiB usually).
MAX_DEPS_JSON_BYTES = 16 * 1024


def receipt_evidence(r: Receipt) -> tuple:
    """What a receipt cites: two receipts with the same key are the same evidence."""
    if r.kind == "symbol":
        return ("symbol", r.handle)
    if r.kind == "span":
        return ("span", r.path, r.start_line, r.end_line)
    return ("file", r.path)


def not_current_error(cur: CurrentState) -> CitegraphError:
    """Nothing to capture against. Through the service, never "run index/serve": it is
    still indexing this state (racing, retry in a moment) or its build failed."""
    state = cur.snapshot_state_text()
    what = "dirty worktree" if cur.dirty else f"commit {cur.head[:12]}"
    if cur.indexing_s is not None:
        return CitegraphError(f"{still_indexing(cur.indexing_s)}; nothing was stored", "retry in a moment",
                              code=1, retryable=True, kind=str(Reason.RACING))
    todo = ("the running citegraph service has not built it (`citegraph status` and the service log say why); "
            "retry" if cur.service else
            "run `citegraph index`, or keep `citegraph serve` running (it builds every change), then retry")
    return CitegraphError(f"no exact-current snapshot for {what} (snapshot {state}); nothing was stored", todo,
                          code=1, retryable=True, kind=str(Reason.NOT_CURRENT))


def capture(home: Home, repo_path: str | os.PathLike[str], refs: list[str],
            notes: list[str] | None = None, source: StateSource | None = None,
            cwd: str | os.PathLike[str] | None = None) -> list[Receipt]:
    """Resolve ``refs`` into receipts; raise CitegraphError (nothing stored) on any problem.
    Refs naming the same evidence (``a.py#L2`` and ``a.py#L2-L2``; a locator and the
    handle it resolves to) are stored once; each collapse is told in ``notes``.
    ``source``: where the repository state is read (default: a git-status scan). Paths
    are first normalised (graph/ref_paths.py) relative to ``cwd`` (default ``repo_path``):
    cwd-relative, ``./``, absolute inside the worktree, blob URLs of this repository."""
    if not refs:
        return []
    source = source or ScanSource()
    cur = source.read(repo_path, home)
    ctx = RefPaths.for_repo(cur.repo, cwd if cwd is not None else repo_path) if cur.repo.workdir else None
    parsed = parse_refs(normalize_refs(refs, ctx, notes), notes)
    receipts = capture_at(cur, parsed, notes)
    if source.moved(cur):
        raise CitegraphError("the repository changed while the refs were being resolved; nothing was stored",
                             "retry the command", code=1, retryable=True, kind=str(Reason.RACING))
    return receipts


def capture_at(cur: CurrentState, parsed: list[ParsedRef], notes: list[str] | None = None) -> list[Receipt]:
    """Resolve parsed refs against the exact-current snapshot of the state ``cur`` (read
    by the caller, who also checks that it did not move). Raises as ``capture`` does."""
    if not cur.exact_current:
        raise not_current_error(cur)
    with Snapshot.open(cur.store, cur.snapshot_id, cur.repo) as snap:
        known = Prefetched.read(snap, parsed)
        resolved = with_dependencies(snap, [_resolve(p, cur, snap, known) for p in parsed])
    receipts: list[Receipt] = []
    kept: dict[tuple, Receipt] = {}
    for r in resolved:
        first = kept.setdefault(receipt_evidence(r), r)
        if first is r:
            receipts.append(r)
        elif notes is not None:
            notes.append(same_evidence_note(r.ref, first.ref))
    return receipts


@dataclass
class Prefetched:
    """The rows a batch of refs reads, each kind in one query (a point read per ref cost a
    `remember` of 8 symbols on ruff ≈ 80 ms of symbols scans): the files' rows by path, and
    the symbols of each file a symbol locator names."""

    files: dict[str, dict]
    symbols: dict[str, list[dict]]

    @classmethod
    def read(cls, snap: Snapshot, parsed: list[ParsedRef]) -> Prefetched:
        return cls(snap.files_at([p.path for p in parsed if p.path]),
                   snap.symbols_at([p.path for p in parsed if p.kind == "symbol" and not p.handle and p.path]))


def _base(p: ParsedRef, cur: CurrentState, row: dict) -> dict:
    return {
        "ref": p.ref, "kind": p.kind, "repository_id": cur.identity.repository_id,
        "repository_kind": cur.identity.kind, "snapshot_id": cur.snapshot_id, "commit": cur.head,
        "dirty": bool(row["dirty"]), "extractor_version": EXTRACTOR_VERSION, "path": row["path"],
        "blob_id": row["blob_id"], "content_hash": row["content_hash"],
    }


def _file_row(p: ParsedRef, path: str, cur: CurrentState, snap: Snapshot,
              known: Prefetched | None = None) -> dict:
    """The file row a ref names, checked citable. ``known``: the rows a batch of refs read
    together (a row read here is added)."""
    row = known.files.get(path) if known is not None else None
    if row is None:
        row = snap.file(path)
        if row is not None and known is not None:
            known.files[path] = row
    if row is None:
        near = suggest_paths(snap, path)
        hint = f"; closest: {', '.join(near)}" if near else ""
        raise bad_ref(p.ref, f"{path} is not in the current snapshot of this repository{hint}",
                      "check the path (repository-relative, tracked or untracked but not ignored)")
    if row["mode"] == gitrepo.MODE_SYMLINK or row["reason"] == "symlink":
        raise bad_ref(p.ref, f"{path} is a symlink; its target may lie outside the repository",
                      "cite the file the link points to")
    if row["reason"] == "submodule":
        raise bad_ref(p.ref, f"{path} is a submodule", "cite files inside the submodule's own repository")
    if row["reason"] == "not-regular":
        raise bad_ref(p.ref, f"{path} is not a regular file (a FIFO, socket or device)", "cite a regular file")
    _check_inside(p, path, cur)
    if row["dirty"] and cur.repo.workdir:
        driver = GitFilters(cur.repo).external_driver(fs_path(path))
        if driver is not None:  # its stored form is unknowable (docs/outcomes.md, "Which bytes are hashed")
            raise bad_ref(p.ref, f"{path} is uncommitted and git stores it through the filter driver '{driver}' "
                          "(.gitattributes), which citegraph never runs",
                          "commit it (or `git add` it), run `citegraph index`, then cite it")
    return row


def _check_inside(p: ParsedRef, path: str, cur: CurrentState) -> None:
    """Reject a path that resolves outside the worktree through a symlinked directory."""
    if not cur.repo.workdir:
        return
    root = Path(cur.repo.workdir).resolve()
    full = Path(os.path.realpath(root / path))
    try:
        full.relative_to(root)
    except ValueError:
        raise bad_ref(p.ref, f"{path} resolves outside the repository", "cite a file inside it") from None


def _resolve(p: ParsedRef, cur: CurrentState, snap: Snapshot, known: Prefetched | None = None) -> Receipt:
    if p.kind == "symbol":
        return _resolve_symbol(p, cur, snap, known)
    assert p.path is not None
    row = _file_row(p, p.path, cur, snap, known)
    fields = _base(p, cur, row)
    if p.kind == "span":
        data = snap.blob_bytes(row["blob_id"])
        if data is None:
            raise bad_ref(p.ref, f"the content of {p.path} is not readable (missing blob)",
                          "cite another file or fetch the missing objects")
        n = line_count(data)
        assert p.start_line is not None and p.end_line is not None
        if p.end_line > n:
            raise bad_ref(p.ref, f"{p.path} has {n} lines", "cite lines inside the file")
        starts = line_starts(data)
        fields.update(
            start_line=p.start_line, end_line=p.end_line,
            span_hash=hash_bytes(span_bytes(data, p.start_line, p.end_line, starts)),
            first_line_hash=hash_bytes(span_bytes(data, p.start_line, p.start_line, starts)),
            token_hash=token_hash(language_for_path(p.path), data, *span_range(data, p.start_line, p.end_line, starts)))
    fields["id"] = receipt_id(fields)
    return Receipt(**fields)


def _candidates(rows: list[dict]) -> str:
    shown = [f"{r['handle']} {r['kind']} {r['path']}::{r['qualified_name']}"
             f"{'[' + str(r['ordinal']) + ']' if r.get('ordinal') else ''} L{r['start_line']}-{r['end_line']}"
             for r in rows[:10]]
    more = f" (+{len(rows) - 10} more)" if len(rows) > 10 else ""
    return "; ".join(shown) + more


def suggest_symbols(snap: Snapshot, qname: str, in_file: list[dict], path: str) -> str:
    """What a ref naming no symbol most likely meant: the names of the file closest to
    ``qname`` (graph/symbol_search.py, by closeness, never file order), and where else the
    name is defined. The one suggestion wording for every command that resolves refs."""
    near = close_symbols(qname, in_file)
    elsewhere = [r for r in search(snap, qname, limit=4) if r["path"] != path
                 and r["match"] in ("exact", "qualified-suffix")][:3]
    parts = []
    if near:
        parts.append(f"closest: {_candidates(near)}")
    if elsewhere:
        parts.append("defined elsewhere: " + "; ".join(f"{r['path']}::{r['qualified_name']}" for r in elsewhere))
    if not parts:
        parts.append("the file has no symbols" if not in_file else "no similar name in the file")
    return "; ".join(parts)


def suggest_paths(snap: Snapshot, path: str) -> list[str]:
    """Indexed files whose path is closest to ``path`` (same file name anywhere, or a close
    spelling in the same directory), best first."""
    base = path.rsplit("/", 1)[-1]
    parent = path.rsplit("/", 1)[0] if "/" in path else ""
    rows = snap.query("SELECT path FROM files WHERE path = $b OR ends_with(path, '/' || $b) "
                      "OR ($d = '' AND NOT contains(path, '/')) OR starts_with(path, $d || '/') LIMIT 5000",
                      {"b": base, "d": parent})
    return close_paths(path, [r[0] for r in rows])


def pick_overload(stubs: list[bool]) -> int | None:
    """Among several definitions of one name, the index of the implementation when every
    other one is a typing overload stub (SPEC §18), else None (the ref is ambiguous)."""
    impls = [i for i, stub in enumerate(stubs) if not stub]
    if len(impls) == 1 and len(stubs) > 1:
        return impls[0]
    return None


def find_symbol(p: ParsedRef, cur: CurrentState, snap: Snapshot, known: Prefetched | None = None) -> dict:
    """The snapshot's symbol row a symbol ref names (a handle, or a locator with an
    optional ordinal; the implementation when the other definitions of the name are
    typing overload stubs); raises ``invalid-ref`` listing candidates otherwise."""
    if p.handle:
        if p.repository_prefix and p.repository_prefix not in cur.identity_prefixes():
            raise bad_ref(p.ref, f"the cgr_ handle belongs to repository {p.repository_prefix}…, "
                          f"not this one ({cur.identity.prefix}…)", "run the command in that repository")
        sym = snap.symbol(p.handle)
        if sym is None:
            raise bad_ref(p.ref, "no symbol with this handle in the current snapshot",
                          "find the current handle with `citegraph find NAME`")
    else:
        assert p.path is not None and p.qualified_name is not None
        frow = _file_row(p, p.path, cur, snap, known)
        in_file = known.symbols[p.path] if known is not None and p.path in known.symbols else snap.symbols_in(p.path)
        matches = [s for s in in_file if s["qualified_name"] == p.qualified_name]
        if p.ordinal is not None:
            named = [s for s in matches if s["ordinal"] == p.ordinal or (p.ordinal == 1 and len(matches) == 1)]
            if len(named) != 1:
                listing = _candidates(matches) if matches else "none with that name"
                raise bad_ref(p.ref, f"{len(named)} definitions of {p.qualified_name} have ordinal {p.ordinal} "
                              f"in {p.path}; candidates: {listing}",
                              "use an ordinal from the candidates, or a cgs_ handle")
            matches = named
        elif len(matches) > 1:
            data = snap.blob_bytes(frow["blob_id"])
            stubs = overload_stubs(matches[0]["language"], data, [(s["start_byte"], s["end_byte"]) for s in matches]) \
                if data is not None else [False] * len(matches)
            at = pick_overload(stubs)
            if at is not None:
                matches = [matches[at]]
        if len(matches) != 1:
            if matches:
                forms = ", ".join(f"{p.path}::{p.qualified_name}[{s['ordinal']}]" for s in matches[:10]
                                  if s.get("ordinal"))
                raise bad_ref(p.ref, f"{len(matches)} symbols match: {_candidates(matches)}",
                              f"name one by its ordinal ({p.path}::{p.qualified_name}[N]"
                              + (f": {forms}" if forms else "") + ") or its cgs_ handle")
            if not in_file and frow.get("status") == "skipped":
                raise bad_ref(p.ref, f"no symbol {p.qualified_name} in {p.path}: the file was {skipped_why(frow)}, "
                              "so none of its symbols is indexed",
                              f"cite lines ({p.path}#L1-L9) or the whole file ({p.path}) instead"
                              + ("; or raise max_file_bytes in .citegraph.toml (docs/config.md)"
                                 if frow.get("reason") == "too-large" else ""))
            raise bad_ref(p.ref, f"no symbol {p.qualified_name} in {p.path}; "
                          + suggest_symbols(snap, p.qualified_name, in_file, p.path),
                          "use one of the candidates' qualified names or handles")
        sym = matches[0]
    return sym


SKIP_WORDS = {"too-large": "too large", "binary": "binary", "minified": "minified", "excluded": "excluded by "
              ".citegraph.toml", "parse-timeout": "not parsed in time", "missing-blob": "missing from the object "
              "database", "undecodable-path": "named by a path that is not UTF-8"}


def skipped_why(row: dict) -> str:
    """``skipped: too large (754 bytes)``: why the indexer kept no symbols of a file."""
    reason = str(row.get("reason") or "unknown")
    words = SKIP_WORDS.get(reason, reason)
    size = f" ({row['size']} bytes)" if reason == "too-large" and row.get("size") else ""
    return f"skipped: {words}{size}"


def _resolve_symbol(p: ParsedRef, cur: CurrentState, snap: Snapshot, known: Prefetched | None = None) -> Receipt:
    sym = find_symbol(p, cur, snap, known)
    row = _file_row(p, sym["path"], cur, snap, known)
    fields = _base(p, cur, row)
    fields.update(
        start_line=sym["start_line"], end_line=sym["end_line"], handle=sym["handle"],
        language=sym["language"], symbol_kind=sym["kind"], name=sym["name"],
        qualified_name=sym["qualified_name"], ordinal=sym["ordinal"], start_byte=sym["start_byte"],
        end_byte=sym["end_byte"], fragment_hash=sym["fragment_hash"], body_hash=sym["body_hash"])
    fields["token_hash"] = None  # with_dependencies records it, one query for every cited symbol
    fields["id"] = receipt_id(fields)
    return Receipt(**fields)


def respell(r: Receipt, ref: str) -> Receipt:
    """The same receipt under another spelling of its ref (a refresh keeps the user's form:
    a locator stays a locator); the citation id is recomputed from the fields."""
    fields = r.to_dict()
    fields["ref"] = ref
    fields["id"] = receipt_id(fields)
    return Receipt(**fields)


def resolve_each(cur: CurrentState, parsed: list[ParsedRef]) -> list[Receipt | None]:
    """Each parsed ref resolved alone against the exact-current snapshot of ``cur`` (one
    that does not resolve is None, not a failed batch); the caller checks ``moved``."""
    if not cur.exact_current:
        raise not_current_error(cur)
    out: list[Receipt | None] = []
    with Snapshot.open(cur.store, cur.snapshot_id, cur.repo) as snap:
        known = Prefetched.read(snap, parsed)
        for p in parsed:
            try:
                out.append(_resolve(p, cur, snap, known))
            except CitegraphError:
                out.append(None)
        done = iter(with_dependencies(snap, [r for r in out if r is not None]))
        out = [None if r is None else next(done) for r in out]
    return out


def with_dependencies(snap: Snapshot, receipts: list[Receipt]) -> list[Receipt]:
    """Symbol receipts (as ``_resolve`` made them) completed: each one's token-sequence hash
    and its resolved dependencies (``deps``; at most ``graph_view.MAX_DEPS``, breadth first
    to depth ``MAX_DEP_DEPTH``) recorded, the id recomputed — one query per dependency level
    and one for every token hash of the batch (a query per cited symbol cost capture ≈ 6 ms
    each). A symbol without dependencies keeps ``deps`` None."""
    handles = [r.handle for r in receipts if r.kind == "symbol" and r.handle]
    if not handles:
        return receipts
    records = graph_view.dependency_records(snap, handles)
    tokens = symbol_token_hashes(snap, handles + [d["handle"] for deps in records.values() for d in deps])
    for deps in records.values():
        for d in deps:
            if tokens.get(d["handle"]):
                d["token_hash"] = tokens[d["handle"]]  # a cosmetic change of it raises no advisory
    out = []
    for r in receipts:
        if r.kind == "symbol" and r.handle:
            fields = r.to_dict()
            fields["token_hash"] = tokens.get(r.handle)
            deps = records.get(r.handle)
            if deps:
                fields["deps"] = encode_deps(deps)
            fields["id"] = receipt_id(fields)
            r = Receipt(**fields)
        out.append(r)
    return out


def encode_deps(deps: list[dict]) -> str:
    """Compact, canonical JSON (the receipt id hashes it), cut to ``MAX_DEPS_JSON_BYTES``."""
    deps = list(deps)
    while True:
        text = json.dumps(deps, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        if len(text.encode("utf-8", "surrogateescape")) <= MAX_DEPS_JSON_BYTES or not deps:
            return text
        deps.pop()
