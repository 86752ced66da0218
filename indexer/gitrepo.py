"""Git access: repository identity, the current worktree state, and tree inventories.

Everything committed is read from the object database (never by walking the worktree);
the worktree is read only for dirty paths, with ``git status`` semantics (``.gitignore``
respected).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import blake3
import pygit2

from citegraph.indexer import sparse
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.git_filters import GitFilters
from citegraph.indexer.paths import fs_path, stored_path
from citegraph.indexer.worktree import MODE_SYMLINK as MODE_SYMLINK
from citegraph.indexer.worktree import WorktreeReader

MODE_GITLINK = 0o160000
# libgit2 status bits that say the index differs from HEAD.
_INDEX_CHANGED = (pygit2.GIT_STATUS_INDEX_NEW | pygit2.GIT_STATUS_INDEX_MODIFIED | pygit2.GIT_STATUS_INDEX_DELETED
                  | pygit2.GIT_STATUS_INDEX_RENAMED | pygit2.GIT_STATUS_INDEX_TYPECHANGE)


@dataclass(frozen=True)
class RepoIdentity:
    repository_id: str  # 32 hex
    kind: str  # remote | local
    source: str  # the normalised URL or the git-common-dir path

    @property
    def prefix(self) -> str:
        return self.repository_id[:16]


@dataclass(frozen=True)
class InventoryEntry:
    path: str
    blob_id: str  # git object id (hex)
    mode: int
    dirty: bool = False


@dataclass(frozen=True)
class WorktreeState:
    """HEAD plus the dirty fingerprint: what the exact-current snapshot must describe."""

    head: str
    dirty_fingerprint: str | None  # None when clean
    dirty_paths: tuple[tuple[str, str | None], ...]  # (path, blob id or None if deleted)
    # Dirty paths whose content is their index entry's blob, not a worktree file: a
    # skip-worktree entry (outside the sparse set) that differs from HEAD (indexer.sparse).
    # (stored path, mode) pairs; the blob is in ``dirty_paths``.
    from_index: tuple[tuple[str, int], ...] = ()

    @property
    def dirty(self) -> bool:
        return self.dirty_fingerprint is not None


def normalise_remote_url(url: str) -> tuple[str, bool]:
    """Credential-free normalised URL and whether it names a network host."""
    u = url.strip()
    scp = re.match(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$", u)
    m = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://(?:[^@/]*@)?([^/]*)(/.*)?$", u)
    if m and m.group(1).lower() != "file":
        host, path = m.group(2).lower(), (m.group(3) or "")
        hosted = True
    elif m:  # file://
        host, path, hosted = "", m.group(3) or "", False
    elif scp and not os.path.isabs(u) and not re.match(r"^[A-Za-z]:\\", u):
        host, path, hosted = scp.group(1).lower(), "/" + scp.group(2), True
    else:
        host, path, hosted = "", u, False
    path = re.sub(r"/+", "/", path).rstrip("/")
    if path.endswith(".git"):
        path = path[:-4]
    return (f"{host}{path}" if host else path), hosted


def open_repository(path: str | os.PathLike[str]) -> pygit2.Repository:
    """Open the repository containing ``path`` or raise a one-line error."""
    p = Path(path)
    if not p.exists():
        raise CitegraphError(f"{p}: no such directory", "pass the path of a git repository", code=3)
    found = pygit2.discover_repository(str(p))
    if found is None:
        raise CitegraphError(
            f"{p}: not a git repository", "run citegraph inside a git worktree or pass its path", code=3
        )
    try:
        return pygit2.Repository(found)
    except pygit2.GitError as exc:
        raise CitegraphError(f"{p}: cannot open repository ({exc})", "check the .git directory", code=3) from exc


def repository_identity(repo: pygit2.Repository) -> RepoIdentity:
    try:
        origin = repo.remotes["origin"]
        url = origin.url
    except (KeyError, ValueError):
        url = None
    if url:
        norm, hosted = normalise_remote_url(url)
        kind = "remote" if hosted else "local"
        return RepoIdentity(blake3.blake3(norm.encode()).hexdigest(16), kind, norm)
    common = os.path.realpath(common_dir(repo))
    return RepoIdentity(blake3.blake3(common.encode()).hexdigest(16), "local", common)


def common_dir(repo: pygit2.Repository) -> str:
    """The shared git directory (a linked worktree's points home; else the git dir)."""
    # For a linked worktree, repo.path is .git/worktrees/<name>/; commondir points home.
    gitdir = Path(repo.path)
    cd = gitdir / "commondir"
    if cd.exists():
        return str((gitdir / cd.read_text().strip()).resolve())
    return str(gitdir.resolve())


def workdir(repo: pygit2.Repository) -> Path:
    if repo.is_bare or repo.workdir is None:
        raise CitegraphError(
            f"{repo.path}: bare repository has no worktree",
            "index a commit with --rev REV, or run in a checkout",
            code=2,
        )
    return Path(repo.workdir)


def head_commit(repo: pygit2.Repository) -> str:
    if repo.head_is_unborn:
        raise CitegraphError(
            f"{repo.workdir or repo.path}: repository has no commits yet",
            "commit something first, then run citegraph index",
            code=3,
        )
    return str(repo.head.target)


def resolve_rev(repo: pygit2.Repository, rev: str) -> str:
    try:
        obj = repo.revparse_single(rev)
        commit = obj.peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError) as exc:
        raise CitegraphError(
            f"{rev}: not a commit in this repository", "pass a branch, tag or commit id", code=2
        ) from exc
    return str(commit.id)


def dirs_inside(root: str | os.PathLike[str], dirs: tuple[str | os.PathLike[str], ...]) -> tuple[str, ...]:
    """The worktree-relative paths (``/``-separated) of those of ``dirs`` that lie inside
    the worktree ``root`` (both resolved), e.g. a data home kept in the repository. Their
    content is citegraph's own, changing under every build: never part of a worktree's
    state (the service does not watch it, and the one-shot scan skips it the same way)."""
    base = os.path.realpath(root)
    out = []
    for d in dirs:
        full = os.path.realpath(d)
        if full != base and full.startswith(base.rstrip(os.sep) + os.sep):
            out.append(os.path.relpath(full, base).replace(os.sep, "/"))
    return tuple(out)


def under_any(path: str, prefixes: tuple[str, ...]) -> bool:
    """``path`` (worktree-relative) is one of ``prefixes`` or lies below one."""
    return any(path == p or path.startswith(p + "/") for p in prefixes)


def worktree_state(repo: pygit2.Repository, skip: tuple[str, ...] = ()) -> WorktreeState:
    """HEAD and the dirty fingerprint (blake3 over sorted (path, content hash)).

    ``git status`` semantics (libgit2) name the dirty paths; their content is read only
    through the worktree reader (never following a symlink, never opening a FIFO or a
    device, nothing outside the worktree). Paths are stored paths (indexer.paths). A path
    outside a sparse checkout (skip-worktree) is neither dirty nor deleted: git takes its
    worktree content to be the index's blob (indexer.sparse). A sparse index, which libgit2
    cannot read, is read by ``git status`` itself. ``skip``: worktree-relative directories
    that are not part of the state (``dirs_inside``: a data home in the worktree)."""
    head = head_commit(repo)
    root = workdir(repo)
    try:
        status = repo.status(untracked_files="all", ignored=False)
        flags = sparse.IndexFlags(repo)
    except pygit2.GitError as exc:
        if not sparse.is_sparse_index_error(exc):
            raise
        return _state_by_git(repo, head, root, skip)
    dirty: list[tuple[str, str | None]] = []
    from_index: list[tuple[str, int]] = []
    filters = GitFilters(repo)
    with WorktreeReader(root, filters=filters) as reader:
        for path, f in status.items():
            if f & pygit2.GIT_STATUS_IGNORED or f == pygit2.GIT_STATUS_CURRENT:
                continue
            if skip and under_any(path, skip):
                continue
            found = reader.read(path)
            if f == pygit2.GIT_STATUS_WT_MODIFIED and filters.converts(path) \
                    and _index_entry(repo, path) == (found.blob_id, found.mode):
                continue  # in git's stored form the index's own blob (a conversion libgit2 lacks)
            if f != pygit2.GIT_STATUS_WT_NEW:
                skipped = flags.worktree_is_index(path, found.exists)
                if skipped is not None:
                    if f & _INDEX_CHANGED:  # staged outside the sparse set: the index's blob
                        dirty.append((stored_path(path), skipped[0]))
                        from_index.append((stored_path(path), skipped[1]))
                    continue
            dirty.append((stored_path(path), found.blob_id))
        if flags.clears_present:
            # libgit2 reports no skip-worktree file that is present; git compares it (the
            # module docstring of indexer.sparse). One read per entry outside the sparse
            # set (an absent directory costs one failed open for all its files).
            for path, blob, mode in flags.skip_worktree_entries():
                if path in status:
                    continue
                found = reader.read(path)
                if found.exists and (found.blob_id, found.mode) != (blob, mode):
                    dirty.append((stored_path(path), found.blob_id))
    return state_from_dirty(head, dirty, from_index)


def _index_entry(repo: pygit2.Repository, path: str) -> tuple[str, int] | None:
    try:
        e = repo.index[path]
    except (KeyError, ValueError, pygit2.GitError):
        return None
    return str(e.id), int(e.mode)


def _state_by_git(repo: pygit2.Repository, head: str, root: Path, skip: tuple[str, ...] = ()) -> WorktreeState:
    """``worktree_state`` of a sparse index: the paths ``git status`` names."""
    dirty: list[tuple[str, str | None]] = []
    from_index: list[tuple[str, int]] = []
    maybe: dict[str, sparse.StatusEntry] = {}
    with WorktreeReader(root, filters=GitFilters(repo)) as reader:
        for e in sparse.git_status(str(root), repo.path):
            if skip and under_any(e.path, skip):
                continue
            found = reader.read(e.path)
            if e.tracked and e.worktree_unchanged and e.index_blob and not found.exists:
                maybe[e.path] = e  # git says "as the index" of an absent file: skip-worktree?
                continue
            dirty.append((stored_path(e.path), found.blob_id))
    skipped = sparse.git_skip_worktree(str(root), repo.path, sorted(maybe))
    for path, e in maybe.items():
        dirty.append((stored_path(path), e.index_blob if path in skipped else None))
        if path in skipped:
            from_index.append((stored_path(path), e.index_mode))
    return state_from_dirty(head, dirty, from_index)


def state_from_dirty(head: str, dirty: list[tuple[str, str | None]],
                     from_index: list[tuple[str, int]] | tuple[tuple[str, int], ...] = ()) -> WorktreeState:
    """The worktree state of HEAD plus ``dirty`` ((stored path, blob id or None) pairs);
    ``from_index`` names the dirty paths whose content is their index blob (see above)."""
    if not dirty:
        return WorktreeState(head, None, ())
    dirty = sorted(dirty)
    h = blake3.blake3()
    for path, blob in dirty:
        h.update(path.encode("utf-8") + b"\0" + (blob or "deleted").encode() + b"\n")
    return WorktreeState(head, h.hexdigest(16), tuple(dirty), tuple(sorted(from_index)))


def index_blob_content(repo: pygit2.Repository, blob: str, max_bytes: int) -> tuple[bytes | None, bool]:
    """(bytes up to ``max_bytes`` or None when larger, missing?) of a dirty path whose content
    is its index blob (``WorktreeState.from_index``): read from the object database."""
    try:
        obj = repo.odb.read(blob)
    except (KeyError, ValueError, pygit2.GitError):
        return None, True  # a partial clone that never fetched it
    data = obj[1]
    return (data if len(data) <= max_bytes else None), False


def commit_inventory(repo: pygit2.Repository, commit: str) -> tuple[list[InventoryEntry], bool]:
    """Every blob of a commit's tree (recursively), sorted by path, and whether every
    subtree could be read (a partial clone may lack some)."""
    tree = repo[commit].peel(pygit2.Tree)
    out: list[InventoryEntry] = []
    complete = True

    def walk(t: pygit2.Tree, prefix: str) -> None:
        for e in t:
            name = e.name
            path = f"{prefix}{name}"
            mode = e.filemode
            if mode == pygit2.GIT_FILEMODE_TREE:
                try:
                    sub = repo[e.id]
                except (KeyError, ValueError, pygit2.GitError):
                    nonlocal complete
                    complete = False
                    continue
                walk(sub, path + "/")
            else:
                out.append(InventoryEntry(stored_path(path), str(e.id), int(mode)))

    walk(tree, "")
    out.sort(key=lambda x: x.path)
    return out, complete


def commit_tree_file(repo: pygit2.Repository, commit: str, path: str) -> bytes | None:
    """The bytes of stored path ``path`` in ``commit``'s tree, or None."""
    try:
        tree = repo[commit].peel(pygit2.Tree)
        entry = tree[fs_path(path)]
        return repo.odb.read(entry.id)[1]
    except (KeyError, ValueError):
        return None


def commit_tree_blob_id(repo: pygit2.Repository, commit: str, path: str) -> str | None:
    """The blob id of stored path ``path`` in ``commit``'s tree, or None (no such file)."""
    try:
        entry = repo[commit].peel(pygit2.Tree)[fs_path(path)]
    except (KeyError, ValueError):
        return None
    return str(entry.id) if entry.type_str == "blob" else None
