"""Repository identity continuity (SPEC §18, docs/identity.md).

A repository's id hashes its ``origin`` URL (SPEC §2). When a clone's ``origin`` changes
(a host migration, a rename), every receipt captured before carries the old id, and
without help would be ``unknown/out-of-scope`` in that very clone. So the catalog entry of
a repository (``repos/<id>/repo.json``) keeps an **identity history**: the former ids of
the same repository, each with its source URL (or path), kind, when and how it was
recorded. Validation routes a citation of a former id to the scope member whose identity
lists it (graph/current.py ``CurrentState.former_ids``; validator/pipeline.py), where no
member carries that id itself. Content is still checked byte for byte: the history only
says *where* to look, never *what* is true.

The history grows in two ways:

- automatically, at build time (``note_clone``): each clone is remembered by its git
  common directory in ``<home>/clones/<key>.json`` with the identity it had and a commit
  it held. When the same clone shows up under another identity *and still holds that
  commit*, its origin changed: the old identity joins the new one's history. (A different
  repository cloned to the same path does not hold the commit and is not linked.) Homes
  made before clone records existed are matched by the worktree paths the repositories'
  catalog entries listed then (indexed once, ``clones/legacy.json``) and one of their
  snapshots' commits;
- explicitly, ``citegraph repo move OLD_URL NEW_URL`` (``record_move``): for a move made
  elsewhere (another machine, a fresh clone of the new URL).

The data home is untrusted (SPEC §12.1): malformed records or entries are ignored.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

import blake3
import pygit2

from citegraph.graph.store import Home, RepoStore, atomic_write_json
from citegraph.indexer import gitrepo

HEX32 = re.compile(r"^[0-9a-f]{32}$")
MAX_HISTORY = 64


def identity_for_url(url: str) -> gitrepo.RepoIdentity:
    """The identity a clone whose ``origin`` is ``url`` has (SPEC §2)."""
    norm, hosted = gitrepo.normalise_remote_url(url)
    return gitrepo.RepoIdentity(blake3.blake3(norm.encode()).hexdigest(16), "remote" if hosted else "local", norm)


def history(rs: RepoStore) -> list[dict[str, Any]]:
    """The identity history of a repository's catalog entry (well-formed entries only)."""
    try:
        info = rs.repo_info()
    except (OSError, ValueError, RecursionError):
        return []
    raw = info.get("identity_history") if isinstance(info, dict) else None
    if not isinstance(raw, list):
        return []
    return [e for e in raw[:MAX_HISTORY] if isinstance(e, dict) and isinstance(e.get("repository_id"), str)
            and HEX32.match(e["repository_id"]) and e["repository_id"] != rs.repository_id]


def former_ids(home: Home, repository_id: str) -> tuple[str, ...]:
    """The former ids of ``repository_id`` (its identity history), oldest first."""
    return tuple(dict.fromkeys(e["repository_id"] for e in history(home.repo(repository_id))))


def _add(home: Home, new: gitrepo.RepoIdentity, old: dict[str, Any], how: str) -> list[dict[str, Any]]:
    """Put ``old`` (and the history it had itself) into ``new``'s history; the entries added."""
    rs = home.repo(new.repository_id)
    have = history(rs)
    known = {e["repository_id"] for e in have}
    entries = [{"repository_id": e["repository_id"], "source": e.get("source"), "kind": e.get("kind"),
                "how": e.get("how", how), "recorded_at": e.get("recorded_at")}
               for e in history(home.repo(old["repository_id"]))]
    entries.append({"repository_id": old["repository_id"], "source": old.get("source"), "kind": old.get("kind"),
                    "how": how, "recorded_at": time.time()})
    added = [e for e in entries if e["repository_id"] not in known and e["repository_id"] != new.repository_id]
    for e in added:
        known.add(e["repository_id"])
    if added:
        rs.write_repo_info({"repository_id": new.repository_id, "kind": new.kind, "source": new.source,
                            "identity_history": (have + added)[-MAX_HISTORY:]})
    return added


def record_move(home: Home, old_url: str, new_url: str) -> dict[str, Any]:
    """``citegraph repo move OLD_URL NEW_URL``: the repository once at ``old_url`` is the one
    at ``new_url`` now; memories captured under the old identity validate in its clones."""
    old, new = identity_for_url(old_url), identity_for_url(new_url)
    added = _add(home, new, {"repository_id": old.repository_id, "source": old.source, "kind": old.kind},
                 "repo-move")
    return {"from": {"repository_id": old.repository_id, "source": old.source, "kind": old.kind},
            "to": {"repository_id": new.repository_id, "source": new.source, "kind": new.kind},
            "added": [e["repository_id"] for e in added],
            "history": [e["repository_id"] for e in history(home.repo(new.repository_id))]}


# --- clones (automatic continuity) -----------------------------------------------------------

def _clone_path(home: Home, repo: pygit2.Repository) -> tuple[str, Any]:
    common = os.path.realpath(gitrepo.common_dir(repo))
    return common, home.root / "clones" / (blake3.blake3(common.encode()).hexdigest(16) + ".json")


def _holds(repo: pygit2.Repository, commit: Any) -> bool:
    if not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{40,64}", commit):
        return False
    try:
        return isinstance(repo.get(commit), pygit2.Commit)
    except (ValueError, pygit2.GitError):
        return False


def _legacy_index(home: Home) -> dict[str, list[str]]:
    """worktree path → repository ids whose catalog entries listed it when this home got
    its first clone record (the repositories built before clone records existed). Built
    once, from every ``repo.json`` then, and kept in ``clones/legacy.json``; later clones
    always have a record, so nothing else ever needs a scan."""
    path = home.root / "clones" / "legacy.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            return {k: [x for x in v if isinstance(x, str)] for k, v in data.items() if isinstance(v, list)}
    except (OSError, ValueError, RecursionError):
        pass
    index: dict[str, list[str]] = {}
    for rid in home.repo_ids():
        if not HEX32.match(rid):
            continue
        try:
            info = home.repo(rid).repo_info()
        except (OSError, ValueError, RecursionError):
            continue
        trees = info.get("worktrees") if isinstance(info, dict) else None
        for w in trees if isinstance(trees, list) else []:
            if isinstance(w, str):
                index.setdefault(w, []).append(rid)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, index)
    return index


def _legacy_match(home: Home, repo: pygit2.Repository, identity: gitrepo.RepoIdentity) -> list[dict[str, Any]]:
    """Former identities of this clone in a home that has no clone record for it: catalog
    entries of the repositories built before clone records existed that list this
    worktree, and whose snapshots' commits this clone holds."""
    if not repo.workdir:
        return []
    index = _legacy_index(home)
    me = os.path.realpath(repo.workdir)
    out = []
    for rid in index.get(me, []):
        if rid == identity.repository_id:
            continue
        rs = home.repo(rid)
        try:
            info = rs.repo_info()
        except (OSError, ValueError, RecursionError):
            continue
        commits = [e.get("commit") for e in rs.entries()[-3:]]
        if any(_holds(repo, c) for c in commits):
            out.append({"repository_id": rid, "source": info.get("source"), "kind": info.get("kind")})
    return out


def note_clone(home: Home, repo: pygit2.Repository, identity: gitrepo.RepoIdentity, head: str) -> list[str]:
    """Remember which identity this clone has now; if it had another one before (and
    still holds the commit recorded then), add that one to the identity history. Returns
    the ids added. Called by builds; cheap when nothing changed (one small JSON read)."""
    common, path = _clone_path(home, repo)
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        rec = None
    if not isinstance(rec, dict) or rec.get("common_dir") != common:
        rec = None
    if rec is not None and rec.get("repository_id") == identity.repository_id:
        return []
    olds: list[dict[str, Any]]
    if rec is None:
        olds = _legacy_match(home, repo, identity)
    elif isinstance(rec.get("repository_id"), str) and HEX32.match(rec["repository_id"]) \
            and _holds(repo, rec.get("commit")):
        olds = [{"repository_id": rec["repository_id"], "source": rec.get("source"), "kind": rec.get("kind")}]
    else:
        olds = []
    added = []
    for old in olds:
        added += [e["repository_id"] for e in _add(home, identity, old, "origin-changed")]
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"common_dir": common, "repository_id": identity.repository_id,
                             "source": identity.source, "kind": identity.kind, "commit": head,
                             "recorded_at": time.time()})
    return added
