"""Real git repositories for the corpus: every mutation is a git CLI operation."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Corpus", "GIT_AUTHOR_EMAIL": "corpus@example.com",
    "GIT_COMMITTER_NAME": "Corpus", "GIT_COMMITTER_EMAIL": "corpus@example.com",
    "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C",
}


class GitError(RuntimeError):
    pass


class Git:
    """One worktree (a main checkout, a clone or a linked worktree)."""

    _dates = 0  # deterministic, strictly increasing commit dates across the process

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def init(cls, root: Path, remote: str | None = None) -> Git:
        root.mkdir(parents=True, exist_ok=True)
        g = cls(root)
        g.git("init", "-q", "-b", "main")
        g.git("config", "core.autocrlf", "false")
        g.git("config", "core.quotepath", "false")
        if remote:
            g.git("remote", "add", "origin", remote)
        return g

    def git(self, *args: str, check: bool = True) -> str:
        Git._dates += 1
        stamp = f"{1_700_000_000 + Git._dates} +0000"
        env = {**os.environ, **GIT_ENV, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        res = subprocess.run(["git", *args], cwd=self.root, env=env, capture_output=True)
        if check and res.returncode != 0:
            raise GitError(f"git {' '.join(args)} failed in {self.root}: "
                           f"{res.stderr.decode('utf-8', 'replace').strip()}")
        return res.stdout.decode("utf-8", "surrogateescape").strip()

    # --- worktree edits ------------------------------------------------------------------

    def write(self, path: str, data: bytes) -> None:
        full = self.root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(data)

    def read(self, path: str) -> bytes:
        return (self.root / path).read_bytes()

    def exists(self, path: str) -> bool:
        return (self.root / path).exists()

    def delete(self, path: str) -> None:
        full = self.root / path
        if full.is_dir() and not full.is_symlink():
            import shutil

            shutil.rmtree(full)
        else:
            full.unlink()

    def commit(self, message: str = "change") -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def rev(self, rev: str) -> str:
        return self.git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")

    def has_path_at(self, rev: str, path: str) -> bool:
        return subprocess.run(["git", "cat-file", "-e", f"{rev}:{path}"], cwd=self.root,
                              env={**os.environ, **GIT_ENV}, capture_output=True).returncode == 0

    def common_dir(self) -> str:
        return os.path.realpath(self.root / self.git("rev-parse", "--git-common-dir"))

    def origin(self) -> str | None:
        url = self.git("config", "--get", "remote.origin.url", check=False)
        return url or None

    def worktree_key(self) -> str | None:
        """None when clean; else a digest of every dirty path's current content — the
        runner's own notion of "which dirty state", independent of citegraph's code."""
        out = subprocess.run(["git", "status", "--porcelain=v1", "-z", "--untracked-files=all"],
                             cwd=self.root, env={**os.environ, **GIT_ENV}, capture_output=True,
                             check=True).stdout
        if not out:
            return None
        fields = out.split(b"\0")
        paths: set[bytes] = set()
        i = 0
        while i < len(fields):
            entry = fields[i]
            i += 1
            if len(entry) < 4:
                continue
            xy, p = entry[:2], entry[3:]
            paths.add(p)
            if b"R" in xy or b"C" in xy:
                paths.add(fields[i])
                i += 1
        h = hashlib.sha256()
        for p in sorted(paths):
            h.update(p + b"\0" + self.content_digest(os.fsdecode(p)).encode() + b"\n")
        return h.hexdigest()

    def real_kind(self, path: str) -> str:
        """What git would see at ``path``: ``file``, ``symlink``, ``other`` (FIFO, device…)
        or ``absent`` — a symlink or a non-directory in any ancestor makes it absent. The
        runner's own check (lstat per component), independent of citegraph's reader."""
        cur = self.root
        parts = path.split("/")
        for part in parts[:-1]:
            cur = cur / part
            try:
                st = os.lstat(cur)
            except OSError:
                return "absent"
            if not stat.S_ISDIR(st.st_mode):
                return "absent"
        try:
            st = os.lstat(cur / parts[-1])
        except OSError:
            return "absent"
        if stat.S_ISLNK(st.st_mode):
            return "symlink"
        return "file" if stat.S_ISREG(st.st_mode) else "other"

    def real_path(self, stored: str) -> str:
        """A path as citegraph reports it (docs/security.md: ``\\xNN`` for a byte that is
        not UTF-8, ``\\\\`` for a backslash) as a filesystem string — decoded here
        from the documented rule, not with citegraph's own function."""
        if "\\" not in stored:
            return stored
        out = bytearray()
        i = 0
        while i < len(stored):
            if stored.startswith("\\\\", i):
                out += b"\\"
                i += 2
            elif stored.startswith("\\x", i):
                out.append(int(stored[i + 2:i + 4], 16))
                i += 4
            else:
                out += stored[i].encode("utf-8")
                i += 1
        return os.fsdecode(bytes(out))

    def content_digest(self, path: str) -> str:
        kind = self.real_kind(path)
        full = self.root / path
        if kind == "file":
            return hashlib.sha256(full.read_bytes()).hexdigest()
        if kind == "symlink":
            return "link:" + os.readlink(full)
        return kind


def normalise_url(url: str) -> str:
    """The runner's own (simple) notion of "same remote": scheme, user, case of the host
    and a ``.git`` suffix do not matter."""
    u = url.strip()
    if "://" in u:
        u = u.split("://", 1)[1]
    if "@" in u.split("/", 1)[0]:
        u = u.split("@", 1)[1]
    first = u.split("/", 1)[0]
    if ":" in first:  # scp-like host:path (or host:port): one separator either way
        u = u.replace(":", "/", 1)
    host, _, rest = u.partition("/")
    rest = rest.rstrip("/")
    if rest.endswith(".git"):
        rest = rest[:-4]
    return f"{host.lower()}/{rest}"
