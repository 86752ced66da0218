"""What a build (or a read) is about: the repository, its identity, the commit or the
worktree state, the index configuration, and the snapshot id all of them determine."""

from __future__ import annotations

import os
from dataclasses import dataclass

import blake3
import pygit2

from citegraph.graph.schema import SNAPSHOT_SCHEMA_VERSION
from citegraph.indexer import gitrepo
from citegraph.indexer.config import CONFIG_FILE, IndexConfig, parse_config
from citegraph.indexer.extract import EXTRACTOR_VERSION


def snapshot_id_for(repository_id: str, commit: str, dirty_fingerprint: str | None,
                    config: IndexConfig) -> str:
    return snapshot_id_of(repository_id, commit, dirty_fingerprint, config.fingerprint())


def snapshot_id_of(repository_id: str, commit: str, dirty_fingerprint: str | None, config_fingerprint: str) -> str:
    """The snapshot id of a state under this citegraph's extractor and schema versions, from
    the configuration's fingerprint (a checkpoint's catalog fields carry it)."""
    h = blake3.blake3()
    parts = ("overlay" if dirty_fingerprint else "commit", repository_id, commit,
             dirty_fingerprint or "", EXTRACTOR_VERSION, config_fingerprint, str(SNAPSHOT_SCHEMA_VERSION))
    for p in parts:
        h.update(p.encode() + b"\0")
    return "cgsnap_" + h.hexdigest(16)


@dataclass
class BuildTarget:
    """What a build is about to describe."""

    repo: pygit2.Repository
    identity: gitrepo.RepoIdentity
    commit: str
    state: gitrepo.WorktreeState | None
    config: IndexConfig
    snapshot_id: str

    @property
    def dirty(self) -> bool:
        return bool(self.state and self.state.dirty)


def resolve_target(repo_path: str | os.PathLike[str], rev: str | None = None,
                   state: gitrepo.WorktreeState | None = None,
                   skip_dirs: tuple[str | os.PathLike[str], ...] = (),
                   repo: pygit2.Repository | None = None) -> BuildTarget:
    """What a build (or a read) is about: the commit of ``rev``, or the worktree's state —
    scanned now, or ``state`` as the resident service already knows it. ``skip_dirs``:
    absolute directories that are no part of the scanned state (the data home, when it
    lies in the worktree: ``gitrepo.dirs_inside``). ``repo``: the repository of
    ``repo_path`` opened already (the service keeps one per worktree: ``LiveRepo``)."""
    if repo is None:
        repo = gitrepo.open_repository(repo_path)
    identity = gitrepo.repository_identity(repo)
    if rev is not None:
        commit = gitrepo.resolve_rev(repo, rev)
        state = None
    else:
        root = gitrepo.workdir(repo)
        if state is None:
            state = gitrepo.worktree_state(repo, gitrepo.dirs_inside(root, skip_dirs))
        commit = state.head
    config = parse_config(gitrepo.commit_tree_file(repo, commit, CONFIG_FILE), CONFIG_FILE)
    fp = state.dirty_fingerprint if state else None
    return BuildTarget(repo, identity, commit, state, config,
                       snapshot_id_for(identity.repository_id, commit, fp, config))
