"""``citegraph check --base REV [--head REV]``: which memories a change makes stale (SPEC §20).

1. Resolve both revisions to commits and make sure both commit snapshots are ready (built
   from the object database if needed — ``notify`` says so: the CLI prints it on stderr).
2. The tree diff (O(diff)) and the changed paths' rows of both snapshots give the diff's
   keys (``validator.diff_scope.touched_keys``).
3. The memory store is asked, in SQL, only for memories with a citation matching a key;
   each of their citations of this repository is kept when ``diff_scope.scope_reason``
   says the diff can change its verdict. Everything else is *untouched*: counted, not
   validated.
4. The kept citations go through the one pipeline (validator/pipeline.py — the same tables
   as ``validate``) against the base and the head snapshots; a citation whose verdict
   differs (``diff_scope.change_kind``) is a finding, located at the head-side lines of the
   change that broke it (a file-level location on the base path for a deletion).

Exit codes (docs/ci.md): 0 nothing reaches ``--fail-on``; 1 a finding does (``stale``:
a changed or deleted citation; ``unknown``: also an unknown one); 2 the check itself is
unknown — a revision cannot be read or indexed — or a usage error; 3 environment error.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import blake3
import pyarrow as pa

from citegraph.graph.current import LendingSource
from citegraph.graph.snapshot_builder import build_snapshot, resolve_target
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home
from citegraph.indexer import gitrepo
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.lifecycle.store import MEMORY_COLS, RECEIPT_FIELDS, Memory, MemoryStore
from citegraph.validator import diff_scope, pipeline
from citegraph.validator.model import CHANGE_TEXT, Advisory, Observation, Receipt
from citegraph.validator.next_steps import next_step

# one SARIF rule per outcome, and one for the advisory on an exact citation (SPEC §21)
RULES = ("changed", "deleted", "relocated", "unknown", "dependency-changed")
LEVEL = {"changed": "error", "deleted": "error", "relocated": "warning", "unknown": "note",
         "dependency-changed": "warning"}
FAIL_ON = {"stale": {"changed", "deleted"}, "unknown": {"changed", "deleted", "unknown"}}
EXIT_CLEAN, EXIT_FINDING, EXIT_UNKNOWN = 0, 1, 2
MAX_QUOTE = 200  # characters of memory text quoted in a finding's message



@dataclass
class Side:
    rev: str
    commit: str | None = None
    snapshot_id: str | None = None
    indexed_now: bool = False  # built by this check

    def to_json(self) -> dict[str, Any]:
        return {"rev": self.rev, "commit": self.commit, "snapshot_id": self.snapshot_id,
                "indexed_now": self.indexed_now}


@dataclass
class Finding:
    """One citation whose verdict the diff changed (or, in ``unchanged``/``resolved``, one
    that was re-validated with another result)."""

    rule: str  # changed | deleted | relocated | unknown (head outcome)
    memory: dict[str, Any]  # id, project, topic, kind, text
    citation: Receipt
    base: Observation
    head: Observation
    scope: str  # diff_scope.ScopeReason
    location: dict[str, Any] | None = None  # path, start_line, end_line, side (head|base), file_level
    next_step: str | None = None
    advisory: Advisory | None = None  # rule dependency-changed: the dependency and what happened

    @property
    def level(self) -> str:
        if self.rule == "changed" and self.head.change == "cosmetic":
            return "note"  # comments/formatting only (SPEC §6.3a): the code did not change
        return LEVEL.get(self.rule, "note")

    @property
    def fingerprint(self) -> str:
        """Stable across re-runs and line moves: the memory, the citation and the rule."""
        return blake3.blake3(f"citegraph-finding-v1\0{self.memory['id']}\0{self.citation.id}\0{self.rule}"
                             .encode()).hexdigest(16)

    def message(self) -> str:
        m, r = self.memory, self.citation
        quoted = quote(m["text"])
        topic = f"{m['project']}/{m['topic']}"
        ref = r.ref
        h = self.head
        if self.rule == "changed":
            succ = h.observed and h.observed.handle and h.observed.handle != r.handle
            what = (f"its citation {ref} no longer exists as cited; its successor is {where(h)}" if succ
                    else f"this change edited its citation {ref}: {CHANGE_TEXT[h.change]} (the code's tokens are "
                    "unchanged; citegraph refresh --accept cosmetic moves the citation)" if h.change in CHANGE_TEXT
                    else f"this change edited the code of its citation {ref}")
            return f"Memory {quoted} (topic {topic}) is stale: {what}."
        if self.rule == "deleted":
            return f"Memory {quoted} (topic {topic}) is stale: this change deleted the code of its citation {ref}."
        if self.rule == "dependency-changed" and self.advisory is not None:
            a = self.advisory
            now = f"; it is now at {a.now.path}#L{a.now.start_line}-L{a.now.end_line}" \
                if a.now and a.change != "deleted" else ""
            return (f"Memory {quoted} (topic {topic}): its citation {ref} is unchanged, but {a.locator}, which it "
                    f"{'inherits from' if a.edge == 'inherits' else a.edge.rstrip('s') + 's'}, was {a.change} in this "
                    f"change{now} (the memory stays fresh; check that the claim still holds).")
        if self.rule == "relocated":
            return (f"Memory {quoted} (topic {topic}): its citation {ref} moved to {where(h)} in this change "
                    "(the claim stays fresh; refresh the link with citegraph refresh --accept relocated).")
        return (f"Memory {quoted} (topic {topic}): its citation {ref} cannot be checked after this change "
                f"({h.reason}){' — ' + self.next_step if self.next_step else ''}.")

    def to_json(self) -> dict[str, Any]:
        r = self.citation
        return {"rule": f"citegraph/{self.rule}", "level": self.level, "message": self.message(),
                "fingerprint": self.fingerprint, "scope": self.scope,
                "memory": dict(self.memory),
                "citation": {"id": r.id, "ref": r.ref, "kind": r.kind, "path": r.path, "handle": r.handle},
                "base": self.base.to_dict(), "head": self.head.to_dict(),
                "location": self.location, "next_step": self.next_step,
                **({"advisory": self.advisory.to_dict()} if self.advisory is not None else {})}


@dataclass
class CheckReport:
    repo_path: str
    base: Side
    head: Side
    fail_on: str = "stale"
    status: str = "clean"  # clean | findings | unknown
    reason: str | None = None  # why the check itself is unknown
    next_step: str | None = None
    repository: dict[str, Any] = field(default_factory=dict)  # id, kind, source
    diff: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    unchanged: list[Finding] = field(default_factory=list)  # re-validated, same verdict (not exact)
    resolved: list[Finding] = field(default_factory=list)  # re-validated, now exact
    counts: dict[str, int] = field(default_factory=dict)

    def exit_code(self) -> int:
        if self.status == "unknown":
            return EXIT_UNKNOWN
        return EXIT_FINDING if any(f.rule in FAIL_ON[self.fail_on] for f in self.findings) else EXIT_CLEAN

    def summary(self) -> dict[str, int]:
        by_rule = {k: sum(1 for f in self.findings if f.rule == k) for k in RULES}
        return {"findings": len(self.findings), "stale": by_rule["changed"] + by_rule["deleted"], **by_rule,
                "unchanged": len(self.unchanged), "resolved": len(self.resolved), **self.counts}

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "next_step": self.next_step,
                "exit_code": self.exit_code(), "fail_on": self.fail_on, "repository": self.repository,
                "base": self.base.to_json(), "head": self.head.to_json(), "diff": self.diff,
                "summary": self.summary(), "findings": [f.to_json() for f in self.findings],
                "unchanged": [f.to_json() for f in self.unchanged],
                "resolved": [f.to_json() for f in self.resolved]}


def quote(text: str, cap: int = MAX_QUOTE) -> str:
    """Memory text as data: one line, cut, in double quotes with quotes and controls escaped."""
    one = " ".join(text.split())
    if len(one) > cap:
        one = one[:cap - 1] + "…"
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else ("\\" + c if c in '"\\' else " ")
                         for c in one) + '"'


def where(o: Observation) -> str:
    if not o.observed:
        return "?"
    ob = o.observed
    return ob.path + (f"#L{ob.start_line}-L{ob.end_line}" if ob.start_line else "")


# --- the check ----------------------------------------------------------------------------------


def run_check(home: Home, *, base: str, head: str = "HEAD", repo_path: str | os.PathLike[str] = ".",
              project: str | None = None, fail_on: str = "stale",
              notify: Callable[[str], None] | None = None, dependency_depth: int = 1) -> CheckReport:
    """Check the memories of ``project`` (all when None) against the change ``base..head``
    of the repository at ``repo_path``. Raises ``CitegraphError`` for a path that is not a
    repository (3), a bad ``fail_on`` or an unreadable ``head`` (2); an unreadable or
    unindexable base gives a report with status ``unknown`` (exit 2)."""
    if fail_on not in FAIL_ON:
        raise CitegraphError(f"--fail-on {fail_on!r} is not one of {', '.join(FAIL_ON)}", "pass stale or unknown")
    say = notify or (lambda _m: None)
    repo = gitrepo.open_repository(repo_path)
    identity = gitrepo.repository_identity(repo)
    rep = CheckReport(os.fspath(repo_path), Side(base), Side(head), fail_on,
                      repository={"id": identity.repository_id, "kind": identity.kind, "source": identity.source})
    rep.head.commit = gitrepo.resolve_rev(repo, head)  # raises (2): nothing to check against
    try:
        rep.base.commit = gitrepo.resolve_rev(repo, base)
    except CitegraphError:
        return _unknown(rep, "base-unavailable",
                        f"base {base!r} is not a commit in this repository's object database",
                        "fetch it (git fetch origin <base>; in GitHub Actions: actions/checkout with fetch-depth: 0)")
    for side, name in ((rep.base, "base"), (rep.head, "head")):
        problem = _ensure_snapshot(home, repo_path, side, name, say)
        if problem:
            return _unknown(rep, f"{name}-unindexable", problem,
                            f"run citegraph index --rev {side.commit} to see why, fix it, then check again")
    rs = home.repo(identity.repository_id)
    with contextlib.ExitStack() as held:
        try:
            bsnap = held.enter_context(Snapshot.open(rs, rep.base.snapshot_id, repo))
            hsnap = held.enter_context(Snapshot.open(rs, rep.head.snapshot_id, repo))
            changes = diff_scope.tree_changes(repo, rep.base.commit, rep.head.commit)
            rep.diff = {"paths": len(changes), **{k: sum(1 for c in changes if c.status == k)
                                                   for k in ("added", "deleted", "modified")}}
            paths = [c.path for c in changes]
            bside, hside = diff_scope.side_rows(bsnap, paths), diff_scope.side_rows(hsnap, paths)
            with MemoryStore.open(home, read_only=True) as ms:
                mems, counts, touched = _affected_memories(ms, repo, hsnap, identity.repository_id, project,
                                                           changes, bside, hside)
        except CitegraphError as err:
            return _unknown(rep, "snapshot-unreadable", err.what, err.todo or "run the check again")
        rep.counts = counts
        items, scopes = [], {}
        for m in mems:
            kept = []
            for r in m.citations:
                if r.repository_id != identity.repository_id:
                    continue
                reason = diff_scope.scope_reason(r, touched)
                if reason is None and dependency_depth > 0 and diff_scope.dependency_touched(r, touched):
                    reason = diff_scope.ScopeReason.DEPENDENCY_CHANGED
                if reason is not None:
                    kept.append(r)
                    scopes[(m.id, r.id)] = str(reason)
            if kept:
                items.append(pipeline.MemoryInput(m.id, kept))
        rep.counts["affected_citations"] = len(scopes)
        rep.counts["untouched_citations"] = counts["citations"] - len(scopes)
        if items:
            # Both sides validate through the snapshots opened above (not opened again).
            lend = LendingSource([bsnap, hsnap])
            sides = [pipeline.validate(home, items, pipeline.Scope.for_paths([os.fspath(repo_path)], at=commit,
                                                                             source=lend),
                                       dependency_depth=dependency_depth)
                     for commit in (rep.base.commit, rep.head.commit)]
            _classify(rep, repo, mems, items, scopes, sides[0], sides[1], {c.path: c for c in changes})
    rep.status = "findings" if rep.findings else "clean"
    return rep


def _unknown(rep: CheckReport, reason: str, what: str, todo: str) -> CheckReport:
    rep.status, rep.reason, rep.next_step = "unknown", f"{reason}: {what}", todo
    return rep


def _ensure_snapshot(home: Home, repo_path: str | os.PathLike[str], side: Side, name: str,
                     say: Callable[[str], None]) -> str | None:
    """Make the commit snapshot of ``side`` ready; the problem, or None."""
    assert side.commit is not None
    try:
        t = resolve_target(repo_path, side.commit)
        side.snapshot_id = t.snapshot_id
        entry = home.repo(t.identity.repository_id).entry(t.snapshot_id)
        if entry and entry.get("state") == "ready":
            return None
        say(f"citegraph: indexing {name} {side.commit[:12]} ({side.rev}) from the object database …")
        res = build_snapshot(repo_path, home, rev=side.commit)
        side.indexed_now = not res.reused
        side.snapshot_id = res.snapshot_id
        return None if res.state == "ready" else f"the {name} snapshot is {res.state}"
    except CitegraphError as err:
        return err.what
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror or exc}"


_CURRENT = """
SELECT c.* FROM citations c JOIN memories m ON m.id = c.memory_id AND m.revision = c.revision
WHERE m.status = 'active' AND c.repository_id = $rid {project}
"""


def _affected_memories(ms: MemoryStore, repo: Any, hsnap: Snapshot, rid: str, project: str | None,
                       changes: list[diff_scope.PathChange], bside: diff_scope.SideRows,
                       hside: diff_scope.SideRows) -> tuple[list[Memory], dict[str, int], diff_scope.Touched]:
    """The memories with a citation the diff may touch, with only those citations, asked of
    the store by the diff's keys (the SQL pre-selects; ``scope_reason`` decides per citation)."""
    params: dict[str, Any] = {"rid": rid}
    cur = _CURRENT.format(project="AND m.project = $project" if project else "")
    if project:
        params["project"] = project
    con = ms.con
    n_cit, n_mem = con.execute(f"SELECT count(*), count(DISTINCT memory_id) FROM ({cur})", params).fetchone()
    counts = {"memories": int(n_mem), "citations": int(n_cit)}
    # Facts the scoping rules need beyond the diff: span paths cited but gone (their file is
    # in neither snapshot), and cited names found in changed non-indexed files.
    spans = con.execute(f"SELECT DISTINCT path, commit FROM ({cur}) WHERE kind = 'span'", params).fetchall()
    span_paths = sorted({p for p, _ in spans})
    gone = sorted(set(span_paths) - diff_scope.present_paths(hsnap, span_paths)) if changes else []
    gone_set = set(gone)
    captures = diff_scope.new_since_capture(repo, sorted({c for p, c in spans if p in gone_set and c}), changes)
    uncovered = diff_scope.uncovered_blobs(bside, hside)
    hits: set[tuple[str, str]] = set()
    if uncovered:
        names = con.execute(f"SELECT DISTINCT language, name FROM ({cur}) WHERE kind = 'symbol' "
                            "AND list_contains($langs, language)", {**params, "langs": sorted(uncovered)}).fetchall()
        hits = diff_scope.names_in_blobs(repo, uncovered, names)
    touched = diff_scope.touched_keys(changes, bside, hside, uncovered_names=hits, gone_span_paths=gone,
                                      captures_before_change=captures)
    keys: list[tuple[str, str]] = []
    cols = ", ".join(("memory_id", "position", *RECEIPT_FIELDS))
    if touched.everything is not None:
        rows = con.execute(f"SELECT {cols} FROM ({cur}) ORDER BY memory_id, position", params).fetchall()
    else:
        keys = [("path", p) for p in touched.paths] + [("blob", b) for b in touched.blobs]
        keys += [("frag", f) for f in touched.fragments] + [("body", b) for b in touched.bodies]
        keys += [("qname", "\0".join(q)) for q in touched.qnames] + [("gone", p) for p in touched.gone_span_paths]
        keys += [("name", "\0".join(h)) for h in touched.uncovered_names]
        if not keys:
            return [], counts, touched
        # the current citations among the matching row ids (as ``cur`` says "current")
        by_ids = _CURRENT.format(project=("AND m.project = $project " if project else "")
                                 + "AND c.rowid IN (SELECT unnest($ids::BIGINT[]))")
        rows = _rows_matching(con, keys, f"SELECT {cols} FROM ({by_ids}) ORDER BY memory_id, position", params)
    if not rows:
        return [], counts, touched
    ids = sorted({r[0] for r in rows})
    con.register("_check_ids", pa.table({"id": ids}))
    try:
        mems = [Memory(*row) for row in con.execute(
            f"SELECT {', '.join(MEMORY_COLS)} FROM memories WHERE id IN (SELECT id FROM _check_ids) ORDER BY id")
            .fetchall()]
    finally:
        con.unregister("_check_ids")
    by_id = {m.id: m for m in mems}
    for row in rows:
        by_id[row[0]].citations.append(Receipt(**dict(zip(RECEIPT_FIELDS, row[2:], strict=True))))
    return mems, counts, touched


def _k(kind: str) -> str:
    return f"(SELECT v FROM _check_keys WHERE k = '{kind}')"


# The citation rows a key matches (a memory's other citations are untouched), by row id:
# first the narrow key columns are filtered (hash semi-joins against the diff's keys; the
# dependency records are searched only in the rows that have them), then only the matching
# rows are read whole and kept when their memory is active at that revision. Reading the
# current citations whole first cost ≈ 100 ms at 40k citations on ruff; this ≈ 40.
_MATCHING = (f"""SELECT rowid FROM citations c WHERE repository_id = $rid AND (
    path IN {_k('path')}
    OR (kind <> 'symbol' AND blob_id IN {_k('blob')})
    OR (kind = 'span' AND path IN {_k('gone')})
    OR (kind = 'symbol' AND (fragment_hash IN {_k('frag')} OR body_hash IN {_k('body')}
        OR concat_ws(chr(0), language, symbol_kind, qualified_name) IN {_k('qname')}
        OR concat_ws(chr(0), language, name) IN {_k('name')})))""",
             """SELECT rowid FROM citations c WHERE repository_id = $rid AND kind = 'symbol' AND deps IS NOT NULL
    AND EXISTS (SELECT 1 FROM _check_keys k WHERE k.k IN ('path', 'frag') AND contains(c.deps, '"' || k.v || '"'))""")


def _rows_matching(con: Any, keys: list[tuple[str, str]], by_ids: str, params: dict[str, Any]) -> list[tuple]:
    """The rows of ``by_ids`` for the row ids of the citations ``keys`` match."""
    con.register("_check_keys", pa.table({"k": pa.array([k for k, _ in keys], pa.string()),
                                          "v": pa.array([v for _, v in keys], pa.string())}))
    con.execute("BEGIN TRANSACTION")  # one view of the table: the row ids of both reads agree
    try:
        ids = sorted({i for q in _MATCHING for (i,) in con.execute(q, {"rid": params["rid"]}).fetchall()})
        return con.execute(by_ids, {**params, "ids": ids}).fetchall() if ids else []
    finally:
        con.execute("ROLLBACK")  # a read: nothing to commit
        con.unregister("_check_keys")


def _classify(rep: CheckReport, repo: Any, mems: list[Memory], items: list[pipeline.MemoryInput],
              scopes: dict[tuple[str, str], str], at_base: pipeline.ValidationReport,
              at_head: pipeline.ValidationReport, changes: dict[str, diff_scope.PathChange]) -> None:
    by_id = {m.id: m for m in mems}
    base_obs = {(v.memory_id, o.citation_id): o for v in at_base.verdicts for o in v.observations}
    hunks: dict[str, list[diff_scope.Hunk]] = {}
    lines = diff_scope.LineLengths(repo)
    for v in at_head.verdicts:
        m = by_id[v.memory_id]
        receipts = {r.id: r for r in m.citations}
        memory = {"id": m.id, "project": m.project, "topic": m.topic, "kind": m.kind, "text": m.text}
        for h in v.observations:
            b = base_obs[(m.id, h.citation_id)]
            kind = diff_scope.change_kind(b, h)
            if kind == "unchanged" and h.outcome == "exact":
                r = receipts[h.citation_id]
                before = {(a.handle, a.change, a.now) for a in b.advisories}
                for a in h.advisories:  # new in this change: a warning at the dependency's change
                    if (a.handle, a.change, a.now) not in before:
                        f = Finding("dependency-changed", memory, r, b, h, scopes[(m.id, r.id)], advisory=a)
                        f.location = _dependency_location(a, changes, rep.base.commit or "",
                                                          rep.head.commit or "", lines)
                        rep.findings.append(f)
                continue
            r = receipts[h.citation_id]
            f = Finding(h.outcome, memory, r, b, h, scopes[(m.id, r.id)])
            if kind == "finding":
                f.location = _location(repo, f, changes, hunks, rep.base.commit or "", rep.head.commit or "", lines)
                f.next_step = next_step(h.reason, command="check") if h.outcome == "unknown" else None
                rep.findings.append(f)
            else:
                (rep.resolved if kind == "resolved" else rep.unchanged).append(f)
    order = {k: i for i, k in enumerate(RULES)}
    rep.findings.sort(key=lambda f: (order[f.rule], f.location["path"] if f.location else "",
                                     f.location["start_line"] if f.location else 0, f.memory["id"], f.citation.id))


def _dependency_location(a: Advisory, changes: dict[str, diff_scope.PathChange], base_commit: str,
                         head_commit: str, lines: diff_scope.LineLengths) -> dict[str, Any]:
    """Where a dependency-changed warning points: the dependency now (head lines), or —
    deleted — its file at the head, file level (the base path when the file is gone)."""
    if a.now is not None and a.change != "deleted":
        last = max(1, len(lines.lines(head_commit, a.now.path)))
        s = min(a.now.start_line or 1, last)
        e = min(max(a.now.end_line or s, s), last)
        return {"path": a.now.path, "start_line": s, "end_line": e, "side": "head", "file_level": False,
                "end_column": lines.length(head_commit, a.now.path, e) + 1}
    path = a.locator.split("::", 1)[0]
    ch = changes.get(path)
    side = "base" if ch is not None and ch.new_blob is None else "head"
    return {"path": path, "start_line": 1, "end_line": 1, "side": side, "file_level": True, "end_column": 1}


def _location(repo: Any, f: Finding, changes: dict[str, diff_scope.PathChange],
              hunks: dict[str, list[diff_scope.Hunk]], base_commit: str, head_commit: str,
              lines: diff_scope.LineLengths) -> dict[str, Any]:
    """SARIF location of a finding: the head-side lines of the change that broke the
    citation; the new place of a relocation or successor; file-level on the base path when
    the cited file is gone."""
    r, h, b = f.citation, f.head, f.base
    ob = h.observed

    def at(path: str, start: int | None, end: int | None, side: str = "head") -> dict[str, Any]:
        commit = head_commit if side == "head" else base_commit
        last = max(1, len(lines.lines(commit, path))) if start is not None else 1
        start_line = min(start or 1, last)
        end_line = min(max(end or start or 1, start_line), last)
        end_column = lines.length(commit, path, end_line) + 1 if start is not None else 1
        return {"path": path, "start_line": start_line, "end_line": end_line, "side": side,
                "file_level": start is None, "end_column": end_column}

    if f.rule == "relocated" and ob:
        return at(ob.path, ob.start_line, ob.end_line)
    if f.rule == "changed" and ob and ob.handle and ob.handle != r.handle:  # a successor
        return at(ob.path, ob.start_line, ob.end_line)
    ch = changes.get(r.path)
    if ch is not None and ch.new_blob is not None:
        if r.path not in hunks:
            hunks[r.path] = diff_scope.line_hunks(repo, ch.old_blob, ch.new_blob)
        # the cited lines as the base saw them (where the citation was exact or moved to)
        old = b.observed if b.observed and b.observed.path == r.path and b.observed.start_line else None
        old_s, old_e = (old.start_line, old.end_line) if old else (r.start_line, r.end_line)
        if r.kind == "file":
            old_s = old_e = None
        head_s, head_e = (ob.start_line, ob.end_line) if ob and ob.path == r.path and ob.start_line else (None, None)
        region = diff_scope.head_region(hunks[r.path], old_s, old_e, head_s, head_e)
        if region is not None:
            return at(r.path, region[0], region[1])
        if head_s:
            return at(r.path, head_s, head_e)
        return at(r.path, None, None)
    if ob and ob.path:
        return at(ob.path, ob.start_line, ob.end_line)
    if ch is not None and ch.new_blob is None:  # the cited file is gone: file level, base path
        return at(r.path, None, None, side="base")
    return at(r.path, None, None, side="head")
