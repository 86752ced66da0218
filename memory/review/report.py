"""``citegraph report``: memory health for people (SPEC §20) — the data behind the page.

Every selected memory is validated through the one pipeline (``api.validate_stored``: the
same verdicts as ``validate``); for each citation the report keeps the outcome, reason and
observed location, a link to the code host when the repository identity is a known remote,
and for a ``changed`` citation the cited bytes (read from the object database at the
capture commit's blob) beside the current bytes (the snapshot the verdict was made
against) as a line diff (difflib). Rendering: memory/review/report_html.py (one self-contained
HTML file) and ``to_markdown`` here.
"""

from __future__ import annotations

import difflib
import os
import time
from typing import Any
from urllib.parse import quote as url_quote

import pygit2

from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.memory import api
from citegraph.memory.lifecycle.store import MemoryStore
from citegraph.validator.model import OUTCOMES, Receipt
from citegraph.validator.pipeline import Scope, ScopeMember

FRESHNESS = ("stale", "unknown", "fresh")  # the order of the page's groups
MAX_DIFF_BYTES = 64 << 10  # per side of one diff
MAX_ALIGN_LINES = 20_000  # files longer than this are not aligned (a span keeps its numbers)
MAX_DIFF_ROWS = 400
MAX_LINE = 400  # characters of one shown line

HOSTS = {  # normalised remote host → blob URL of (repo path, commit, file path, start, end)
    "github.com": "https://github.com{repo}/blob/{commit}/{path}{lines}",
    "gitlab.com": "https://gitlab.com{repo}/-/blob/{commit}/{path}{lines}",
    "bitbucket.org": "https://bitbucket.org{repo}/src/{commit}/{path}{lines}",
    "codeberg.org": "https://codeberg.org{repo}/src/commit/{commit}/{path}{lines}",
}
LINE_ANCHOR = {"github.com": "#L{s}-L{e}", "gitlab.com": "#L{s}-{e}", "bitbucket.org": "#lines-{s}:{e}",
               "codeberg.org": "#L{s}-L{e}"}


def code_link(source: str, kind: str, commit: str | None, path: str, start: int | None = None,
              end: int | None = None) -> str | None:
    """A link to ``path`` at ``commit`` on the code host of a remote identity, or None."""
    if kind != "remote" or not commit or "/" not in source:
        return None
    host, _, rest = source.partition("/")
    if host not in HOSTS:
        return None
    lines = LINE_ANCHOR[host].format(s=start, e=end or start) if start else ""
    return HOSTS[host].format(repo="/" + rest, commit=commit, path=url_quote(path, safe="/"), lines=lines)


def line_diff(old: bytes, new: bytes) -> list[dict[str, Any]]:
    """Side-by-side rows ``{"tag": equal|replace|delete|insert, "old": [...], "new": [...]}``
    of two texts (difflib), bounded in rows and line length."""
    a = old.decode("utf-8", "replace").splitlines()
    b = new.decode("utf-8", "replace").splitlines()

    def cut(lines: list[str]) -> list[str]:
        return [ln if len(ln) <= MAX_LINE else ln[:MAX_LINE - 1] + "…" for ln in lines]

    rows: list[dict[str, Any]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        rows.append({"tag": tag, "old": cut(a[i1:i2]), "new": cut(b[j1:j2]), "old_start": i1 + 1,
                     "new_start": j1 + 1})
    shown, out = 0, []
    for row in rows:
        n = max(len(row["old"]), len(row["new"]))
        if shown + n > MAX_DIFF_ROWS:
            keep = max(0, MAX_DIFF_ROWS - shown)
            out.append({**row, "old": row["old"][:keep], "new": row["new"][:keep], "cut": True})
            break
        out.append(row)
        shown += n
    return out


def _read(repo: pygit2.Repository | None, blob: str | None) -> bytes | None:
    if repo is None or not blob:
        return None
    try:
        return repo.odb.read(blob)[1]
    except (KeyError, ValueError, pygit2.GitError):
        return None


def _lines(data: bytes, start: int | None, end: int | None) -> bytes:
    if not start or not end:
        return data
    return b"".join(data.splitlines(keepends=True)[start - 1:end])


def cited_and_current(r: Receipt, obs: dict[str, Any], snap: Snapshot | None,
                      repo: pygit2.Repository | None) -> tuple[bytes, bytes] | None:
    """The cited bytes and the bytes now at the same place (a changed citation), or None."""
    cited_file = _read(repo, r.blob_id)
    if cited_file is None or snap is None:
        return None
    observed = obs.get("observed") or {}
    if r.kind == "symbol":
        if r.start_byte is None or r.end_byte is None:
            return None
        cited = cited_file[r.start_byte:r.end_byte]
        row = snap.symbol(observed.get("handle") or "") if observed.get("handle") else None
        if row is None:
            return None
        now_file = snap.blob_bytes(row["blob_id"])
        current = now_file[row["start_byte"]:row["end_byte"]] if now_file is not None else None
    else:
        f = snap.file(observed.get("path") or r.path)
        now_file = snap.blob_bytes(f["blob_id"]) if f else None
        if r.kind == "span":
            cited = _lines(cited_file, r.start_line, r.end_line)
            start, end = follow_span(cited_file, now_file, r.start_line, r.end_line) if now_file is not None \
                else (r.start_line, r.end_line)
            current = _lines(now_file, start, end) if now_file is not None else None
        else:
            cited, current = cited_file, now_file
    if current is None or len(cited) > MAX_DIFF_BYTES or len(current) > MAX_DIFF_BYTES:
        return None
    return cited, current


def follow_span(old: bytes, new: bytes, start: int | None, end: int | None) -> tuple[int | None, int | None]:
    """Where the lines ``start``–``end`` of ``old`` are in ``new``, by a line alignment of
    the two files (difflib): the span's lines that survived unchanged anchor it, and the
    lines around them keep their distance. A span that moved and then changed is shown
    against its own lines, not against whatever now sits at its old line numbers (issue
    22: ``render_finish`` was shown against ``pct``). Without a surviving line: the same
    numbers."""
    if not start or not end:
        return start, end
    a, b = old.splitlines(), new.splitlines()
    if len(a) > MAX_ALIGN_LINES or len(b) > MAX_ALIGN_LINES:
        return start, end
    mapped: dict[int, int] = {}
    for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks():
        for k in range(block.size):
            if start <= block.a + k + 1 <= end:
                mapped[block.a + k + 1] = block.b + k + 1
    if not mapped:
        return start, end
    first, last = min(mapped), max(mapped)
    return max(1, mapped[first] - (first - start)), min(max(len(b), 1), mapped[last] + (end - last))


def cited_bytes(r: Receipt, repo: pygit2.Repository | None) -> bytes | None:
    """The bytes a citation captured (its symbol, span or file), or None when the blob
    is gone or too large to show."""
    data = _read(repo, r.blob_id)
    if data is None:
        return None
    if r.kind == "symbol":
        if r.start_byte is None or r.end_byte is None:
            return None
        data = data[r.start_byte:r.end_byte]
    elif r.kind == "span":
        data = _lines(data, r.start_line, r.end_line)
    return data if len(data) <= MAX_DIFF_BYTES else None


def build(home: Home, *, repo_paths: list[str] | None = None, project: str | None = None,
          at: str | None = None) -> dict[str, Any]:
    """The report's data (plain JSON-shaped): counts, memories, citations, diffs."""
    paths = api.default_scope(repo_paths)
    scope = Scope.for_paths(paths, at=at)
    for m in scope.read_all(home):
        if m.cur is None:
            err = m.exc or CitegraphError(str(m.error), "pass --repo PATH", code=3)
            raise err
    with MemoryStore.open(home) as ms:
        mems = api.select_memories(ms, None, project)
        report = api.validate_stored(home, ms, mems, scope)
    members: dict[str, ScopeMember] = {}
    for m in scope.members.values():
        if m.cur is not None:
            members.setdefault(m.cur.identity.repository_id, m)
    snaps: dict[str, Snapshot | None] = {}
    by_id = {m.id: m for m in mems}
    out_mems = []
    counts = {"freshness": dict.fromkeys(FRESHNESS, 0), "outcome": dict.fromkeys(OUTCOMES, 0)}
    try:
        for v in report.verdicts:
            mem = by_id[v.memory_id]
            data = report.memory_json(v)
            counts["freshness"][data["freshness"]] += 1
            receipts = {r.id: r for r in mem.citations}
            for c in data["citations"]:
                counts["outcome"][c["outcome"]] += 1
                r = receipts[c["id"]]
                member = members.get(r.repository_id)
                cur = member.cur if member is not None else None
                ident = cur.identity if cur is not None else None
                c["repository_id"] = r.repository_id
                c["link"] = code_link(ident.source, ident.kind, r.commit, r.path, r.start_line, r.end_line) \
                    if ident else None
                ob = c.get("observed")
                c["observed_link"] = code_link(ident.source, ident.kind, cur.head, ob["path"], ob.get("start_line"),
                                               ob.get("end_line")) if ident and cur and ob else None
                c["diff"] = None
                if c["outcome"] == "changed" and cur is not None:
                    if cur.snapshot_id not in snaps:
                        try:
                            snaps[cur.snapshot_id] = Snapshot.open(cur.store, cur.snapshot_id, cur.repo)
                        except CitegraphError:
                            snaps[cur.snapshot_id] = None
                    pair = cited_and_current(r, c, snaps[cur.snapshot_id], cur.repo)
                    if pair is not None:
                        c["diff"] = line_diff(*pair)
                elif c["outcome"] == "deleted" and cur is not None:
                    # what was deleted: the cited code against nothing (issue 22: no diff before)
                    gone = cited_bytes(r, cur.repo)
                    if gone is not None:
                        c["diff"] = line_diff(gone, b"")
            out_mems.append({**data, "project": mem.project, "topic": mem.topic, "kind": mem.kind,
                             "text": mem.text, "updated_at": mem.updated_at})
    finally:
        for s in snaps.values():
            if s is not None:
                s.close()
    repos = []
    for rid, m in members.items():
        assert m.cur is not None
        repos.append({"repository_id": rid, "path": os.path.realpath(m.path), "kind": m.cur.identity.kind,
                      "source": m.cur.identity.source, "commit": m.cur.head, "snapshot_id": m.cur.snapshot_id,
                      "exact_current": m.cur.exact_current})
    order = {f: i for i, f in enumerate(FRESHNESS)}
    out_mems.sort(key=lambda m: (order[m["freshness"]], m["project"], m["topic"], m["id"]))
    return {"generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "at": at, "project": project,
            "repositories": repos, "counts": counts, "memories": out_mems}


def to_markdown(data: dict[str, Any]) -> str:
    """The report as Markdown: counts, then the memories by freshness with their citations."""
    from citegraph.memory.escape import md_code, md_text

    out = ["# citegraph memory report", "", f"Generated {data['generated_at']}.", "",
           "| freshness | memories |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in data["counts"]["freshness"].items()]
    out += ["", "| outcome | citations |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in data["counts"]["outcome"].items()]
    for fresh in FRESHNESS:
        group = [m for m in data["memories"] if m["freshness"] == fresh]
        if not group:
            continue
        out += ["", f"## {fresh} ({len(group)})", ""]
        for m in group:
            out.append(f"- {md_code(m['id'])} ({md_code(m['project'] + '/' + m['topic'])}, {m['status'] or '-'}"
                       f"{', ' + md_text(m['reason']) if m.get('reason') else ''}): “{md_text(m['text'][:300])}”")
            for c in m["citations"]:
                ob = c.get("observed")
                loc = ""
                if ob and (ob["path"] != c["path"] or c["outcome"] == "relocated"):
                    loc = " → " + md_code(ob["path"] + (f"#L{ob['start_line']}-L{ob['end_line']}"
                                                        if ob.get("start_line") else ""))
                why = f" ({md_text(c['reason'])})" if c.get("reason") else ""
                out.append(f"  - {c['outcome']}{why}: {md_code(c.get('locator') or c['ref'])}{loc}")
    return "\n".join(out) + "\n"
