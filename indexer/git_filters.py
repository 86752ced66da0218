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
``working-tree-encoding`` (re-encoding, which libgit2 lacks) is treated the same way.
"""

from __future__ import annotations

import pygit2
from pygit2.enums import FilterMode

# A file larger than this with a conversion to apply is hashed byte for byte (it would
# have to be held whole in memory); it can then read as changed, never as a false exact.
MAX_FILTERED_BYTES = 256 << 20


class GitFilters:
    """The clean conversion of one repository's paths (see the module docstring)."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self._repo = repo

    def _filter_list(self, path: str) -> pygit2.filter.FilterList | None:
        try:
            fl = self._repo.load_filter_list(path, FilterMode.TO_ODB)
        except (pygit2.GitError, ValueError, UnicodeError):
            return None
        return fl if fl is not None and len(fl) else None

    def converts(self, path: str) -> bool:
        """Does git's clean conversion (as libgit2 applies it) touch ``path`` at all?"""
        return self._filter_list(path) is not None

    def to_odb(self, path: str, data: bytes) -> bytes:
        """``data`` (the worktree's bytes at ``path``) as git would store them; unchanged
        when no conversion applies or libgit2 refuses one (``core.safecrlf``)."""
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
