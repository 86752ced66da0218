"""Real git repositories for tests: every mutation is a real git operation."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "/dev/null",
}


class GitRepo:
    """A throwaway repository driven with the git CLI."""

    def __init__(self, root: Path, remote: str | None = None) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        if remote:
            self.git("remote", "add", "origin", remote)

    def git(self, *args: str, check: bool = True) -> str:
        env = {**os.environ, **GIT_ENV}
        res = subprocess.run(["git", *args], cwd=self.root, env=env, capture_output=True, text=True)
        if check and res.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed: {res.stderr}")
        return res.stdout.strip()

    def write(self, path: str, content: str | bytes) -> Path:
        full = self.root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            content = content.encode("utf-8")
        full.write_bytes(content)
        return full

    def read(self, path: str) -> str:
        return (self.root / path).read_text(encoding="utf-8")

    def delete(self, path: str) -> None:
        (self.root / path).unlink()

    def commit(self, message: str = "change", *paths: str) -> str:
        self.git("add", "-A", *paths)
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def mv(self, src: str, dst: str) -> None:
        (self.root / dst).parent.mkdir(parents=True, exist_ok=True)
        self.git("mv", src, dst)

    def rm(self, path: str) -> None:
        self.git("rm", "-q", path)

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def checkout(self, rev: str) -> None:
        self.git("checkout", "-q", rev)
