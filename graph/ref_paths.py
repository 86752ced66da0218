"""Ref paths as people and agents write them, normalised to the repository-relative form
(SPEC §19) BEFORE the strict rules of SPEC §5 apply (validator/refs.py ``check_path``).

Accepted spellings of the path part of a ref (``PATH``, ``PATH#L10-L24``,
``PATH::Qualified.name``):

- repository-relative, as before: ``src/click/core.py``;
- relative to the caller's directory when that directory is inside the repository (like
  git): from ``src/click``, ``core.py`` is ``src/click/core.py``. When no such file exists
  there but the repository-relative one does, the repository-relative one is taken, so a
  ref written from the root keeps meaning what it meant;
- ``./x`` and leading ``../``: strictly relative to the caller's directory (the repository
  root when the caller is outside it); a ``..`` that climbs above the root is an error;
- an absolute path inside the worktree;
- a GitHub (or GitLab) blob URL or permalink of the same repository (matched against the
  ``origin`` identity): ``https://github.com/OWNER/REPO/blob/<rev>/path#L10-L20`` is
  ``path#L10-L20``; ``#L10`` is ``#L10``; column suffixes (``L10C3``) are dropped; the
  revision names where the link was made, not what is cited — the receipt is taken from
  the exact-current snapshot like any other ref.

Only the leading part is rewritten: ``a//b``, ``a/./b`` and ``a/../b`` stay as written and
are refused by §5 with its own message, so the rules stay strict about what a ref may be.
This is the one normalisation, used by capture (remember, refresh), cited, brief, symbols
and find --path; the MCP server and the service reach it through those same calls.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from citegraph.indexer import gitrepo
from citegraph.indexer.errors import CitegraphError

BLOB_URL_RE = re.compile(
    r"^(?P<base>https?://[^/]+/[^/]+/[^/]+?)(?:\.git)?(?:/-)?/blob/(?P<rev>[^/]+)/(?P<path>[^?#]+)"
    r"(?:\?[^#]*)?(?:#(?P<frag>.*))?$")
LINES_RE = re.compile(r"^L(?P<start>[0-9]+)(?:C[0-9]+)?(?:-L?(?P<end>[0-9]+)(?:C[0-9]+)?)?$")
HANDLE_PREFIXES = ("cgs_", "cgr_")


def bad_path(ref: str, why: str, todo: str) -> CitegraphError:
    return CitegraphError(f"invalid code ref {ref!r}: {why}", todo, code=2, kind="invalid-ref")


@dataclass(frozen=True)
class RefPaths:
    """What normalisation needs to know about the repository and the caller."""

    root: Path  # the worktree root (as git reports it)
    cwd: Path | None  # the caller's directory (absolute), or None: refs are repository-relative
    origin: str | None  # the normalised origin identity ("github.com/owner/repo"), or None

    @classmethod
    def for_repo(cls, repo: object, cwd: str | os.PathLike[str] | None) -> RefPaths:
        ident = gitrepo.repository_identity(repo)  # type: ignore[arg-type]
        root = gitrepo.workdir(repo)  # type: ignore[arg-type]
        return cls(Path(os.path.abspath(root)), Path(os.path.abspath(cwd)) if cwd is not None else None,
                   ident.source if ident.kind == "remote" else None)

    @classmethod
    def at(cls, repo_path: str | os.PathLike[str], cwd: str | os.PathLike[str] | None) -> RefPaths:
        return cls.for_repo(gitrepo.open_repository(repo_path), cwd)

    def inside(self, path: Path) -> str | None:
        """``path`` (absolute) relative to the root, or None when it lies outside. Both the
        root as written and its real path count (``/tmp`` vs ``/private/tmp``)."""
        for root in dict.fromkeys((self.root, Path(os.path.realpath(self.root)))):
            try:
                return path.relative_to(root).as_posix()
            except ValueError:
                continue
        real = Path(os.path.realpath(path.parent)) / path.name if path.name else Path(os.path.realpath(path))
        if real != path:
            return self.inside(real)
        return None

    def subdir(self) -> str | None:
        """The caller's directory relative to the root ('' at the root), or None outside."""
        if self.cwd is None:
            return None
        rel = self.inside(self.cwd) if self.cwd != self.root else ""
        return "" if rel == "." else rel


def split_ref(ref: str) -> tuple[str, str]:
    """(path part, rest): ``a.py::X`` → (``a.py``, ``::X``); ``a.py#L2`` → (``a.py``, ``#L2``)."""
    if "::" in ref:
        path, _, rest = ref.partition("::")
        return path, "::" + rest
    m = re.match(r"^(?P<path>.+?)(?P<rest>#L[0-9].*)$", ref)
    if m:
        return m.group("path"), m.group("rest")
    return ref, ""


def normalize_ref(ref: str, ctx: RefPaths | None) -> str:
    """The repository-relative spelling of ``ref`` (unchanged when already one, when it is
    a handle, or when ``ctx`` is None). Raises ``invalid-ref`` for an absolute path
    outside the repository, a URL of another repository, or a ``..`` above the root."""
    if not isinstance(ref, str) or ctx is None or ref.startswith(HANDLE_PREFIXES) or ref != ref.strip():
        return ref  # §5 reports malformed refs with its own messages
    if re.match(r"^https?://", ref):
        return from_url(ref, ctx)
    path, rest = split_ref(ref)
    return normalize_path(path, ctx, ref) + rest


def normalize_path(path: str, ctx: RefPaths, ref: str | None = None) -> str:
    """The repository-relative form of one path (see the module docstring)."""
    ref = path if ref is None else ref
    if not path or "\\" in path or "\0" in path:
        return path
    if path.startswith("/"):
        rel = ctx.inside(Path(path))
        if rel is None:
            raise bad_path(ref, f"{path} is outside the repository {ctx.root}",
                           "cite a file inside this repository (or run in the repository the file belongs to)")
        return rel if rel != "." else ""
    sub = ctx.subdir()
    if path.startswith(("./", "../")) or path in (".", ".."):
        return _climb(ref, sub or "", path)
    if sub:  # cwd-relative inside a subdirectory, falling back to the repository-relative path
        mine = f"{sub}/{path}"
        if os.path.lexists(ctx.root / mine) or not os.path.lexists(ctx.root / path):
            return mine
    return path


def _climb(ref: str, base: str, path: str) -> str:
    """Resolve the leading ``./`` and ``../`` segments of ``path`` against ``base`` (a
    repository-relative directory); the rest of the path is kept as written."""
    parts = [p for p in base.split("/") if p]
    segs = path.split("/")
    i = 0
    while i < len(segs) and segs[i] in (".", ".."):
        if segs[i] == "..":
            if not parts:
                raise bad_path(ref, f"{path} climbs above the repository root",
                               "cite a file inside this repository")
            parts.pop()
        i += 1
    return "/".join(parts + segs[i:])


def from_url(ref: str, ctx: RefPaths) -> str:
    """``https://github.com/OWNER/REPO/blob/REV/PATH#L10-L20`` → ``PATH#L10-L20``, when
    OWNER/REPO is this repository's origin."""
    m = BLOB_URL_RE.match(ref)
    if not m:
        raise bad_path(ref, "a URL ref must be a blob link: https://github.com/OWNER/REPO/blob/REV/PATH[#L10-L20]",
                       "copy the link from the file view (or its permalink), or cite a repository-relative path")
    theirs = gitrepo.normalise_remote_url(m.group("base"))[0]
    if ctx.origin is None or theirs.lower() != ctx.origin.lower():
        ours = ctx.origin or "no remote origin"
        raise bad_path(ref, f"the link is to {theirs}, not this repository ({ours})",
                       "cite code of the repository you are in (or run in a clone of the linked one)")
    path = unquote(urlsplit("x://h/" + m.group("path")).path[1:])
    frag = m.group("frag")
    if not frag:
        return path
    lines = LINES_RE.match(frag)
    if not lines:
        raise bad_path(ref, f"#{frag} is not a line anchor (#L10 or #L10-L20)", "link lines, or drop the anchor")
    end = lines.group("end")
    return f"{path}#L{lines.group('start')}" + (f"-L{end}" if end else "")


def normalize_refs(refs: list[str], ctx: RefPaths | None, notes: list[str] | None = None) -> list[str]:
    """Each ref normalised; every rewrite told in ``notes`` (so a user sees what was cited)."""
    out = []
    for r in refs:
        n = normalize_ref(r, ctx)
        if n != r and notes is not None:
            notes.append(f"ref {r!r} taken as {n!r}")
        out.append(n)
    return out
