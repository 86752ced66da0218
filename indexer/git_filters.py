"""Worktree bytes as git sees them: git's *clean* conversion (worktree -> object database).

With ``.gitattributes`` ``text``/``eol=crlf``, ``core.autocrlf`` or ``ident``, the bytes a
worktree file holds are not the bytes git stores: ``git add`` converts CRLF to LF and
collapses ``$Id: … $`` to ``$Id$``. citegraph compares and hashes every dirty or untracked
file in that stored form (docs/outcomes.md, "Which bytes are hashed"), so a file is dirty
exactly when git says so, and a citation captured on an uncommitted file names the blob the
next ``git commit`` records.

libgit2 applies these built-in conversions itself (``git_filter_list_load``, attributes from
the worktree then the index, the repository's configuration). It never runs an external
``filter=NAME`` driver, and neither does citegraph: ``filter.NAME.clean``/``process`` is a
command from the repository's configuration (issue 20). For such a path the stored form is
unknowable without running it, and the file is taken byte for byte — git's view with
the driver emptied (indexer/sparse.py does the same to the
``git`` it runs), so a file the driver would change reads as dirty, never as clean.
``working-tree-encoding`` (which libgit2 lacks) is applied here, as git's ``encode_to_git``
does, before libgit2's filters.
"""

from __future__ import annotations

import codecs

import pygit2
from pygit2.enums import FilterMode

# A file larger than this with a conversion to apply is hashed byte for byte (it would
# have to be held whole in memory); it can then read as changed, never as a false exact.
MAX_FILTERED_BYTES = 64 << 20


class GitFilters:
    """The clean conversion of one repository's paths (see the module docstring)."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self._repo = repo

    def external_driver(self, path: str) -> str | None:
        """The filter driver git would run on ``path`` (``filter=NAME`` with
        ``filter.NAME.clean`` or ``.process`` configured), which citegraph never runs; None
        when there is none (an unconfigured driver is no filter, for git too)."""
        try:
            name = self._repo.get_attr(path, "filter")
        except (pygit2.GitError, ValueError, UnicodeError):
            return None
        if not isinstance(name, str) or not name:
            return None
        for var in ("clean", "process"):
            try:
                value = self._repo.config[f"filter.{name}.{var}"]
            except (KeyError, ValueError, pygit2.GitError, UnicodeError):
                continue
            if value:
                return name
        return None

    def _filter_list(self, path: str) -> pygit2.filter.FilterList | None:
        try:
            fl = self._repo.load_filter_list(path, FilterMode.TO_ODB)
        except (pygit2.GitError, ValueError, UnicodeError):
            return None
        return fl if fl is not None and len(fl) else None

    def _encoding(self, path: str) -> str | None:
        """The ``working-tree-encoding`` git re-encodes ``path`` from (None: UTF-8 or unset)."""
        try:
            enc = self._repo.get_attr(path, "working-tree-encoding")
        except (pygit2.GitError, ValueError, UnicodeError):
            return None
        if not isinstance(enc, str) or not enc or enc.upper() == "UTF-8":
            return None
        return enc

    def converts(self, path: str) -> bool:
        """Does git's clean conversion touch ``path`` at all?"""
        return self._encoding(path) is not None or self._filter_list(path) is not None

    def to_odb(self, path: str, data: bytes) -> bytes:
        """``data`` (the worktree's bytes at ``path``) as git would store them: re-encoded
        to UTF-8 (``working-tree-encoding``), then libgit2's filters (eol, autocrlf, ident),
        git's order. Unchanged where git would not convert either (no conversion applies,
        ``core.safecrlf`` refuses, the bytes are not in the declared encoding)."""
        enc = self._encoding(path)
        if enc is not None:
            data = reencode_to_utf8(data, enc)
        fl = self._filter_list(path)
        if fl is None:
            return data
        from pygit2.ffi import C, ffi

        buf = ffi.new("git_buf *")
        # pygit2's FilterList.apply_to_buffer stops at the first NUL byte: the C call, whole.
        if C.git_filter_list_apply_to_buffer(buf, fl._pointer, data, len(data)) < 0:
            return data
        try:
            return bytes(ffi.buffer(buf.ptr, buf.size)) if buf.ptr != ffi.NULL else b""
        finally:
            C.git_buf_dispose(buf)


_BOMS = {"UTF-16": (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE), "UTF-32": (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)}


def reencode_to_utf8(data: bytes, enc: str) -> bytes:
    """git's ``encode_to_git``: ``data`` from ``enc`` to UTF-8, or ``data`` unchanged where
    git leaves it (empty; a UTF-16/32 file without its required BOM, a UTF-16LE/BE… one
    with a prohibited BOM; bytes not in ``enc``; an encoding Python does not know)."""
    if not data:
        return data
    name = enc.upper().replace("_", "-")
    family = name[:6] if name.startswith(("UTF-16", "UTF-32")) else None
    if family is not None:
        has_bom = data.startswith(_BOMS[family])
        if has_bom != (name == family):  # git: BOM required without endianness, prohibited with
            return data
    try:
        return data.decode(enc).encode("utf-8")
    except (LookupError, UnicodeError, ValueError):
        return data
