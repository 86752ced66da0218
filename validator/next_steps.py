"""What to do about an ``unknown`` (SPEC §19: a next step for every unknown).

One mapping from reason code to next step, pure, used by ``validate`` (text and the
``next_step`` field of each JSON observation), ``brief``, ``check`` and, through the same
data, the MCP tools — so the wording is the same everywhere. ``at``: the ``--at REV`` the
validation ran against (a missing snapshot of a commit is built with ``index --rev``, not
by the service); ``command``: the command to run again after a transient failure.
"""

from __future__ import annotations

from citegraph.validator.decisions import Reason

_STEPS: dict[str, str] = {
    Reason.NOT_CURRENT: "run `citegraph index` (or start `citegraph serve`), then {again}",
    Reason.RACING: "the repository changed while it was read: {again}",
    Reason.SNAPSHOT_UNREADABLE: "the snapshot could not be read: run `citegraph index` to rebuild it, then {again}",
    Reason.EXTRACTOR_MISMATCH: "captured by another extractor version and the original blob is gone: "
                               "re-cite it (`citegraph remember … --code-ref`)",
    Reason.AMBIGUOUS_RELOCATION: "the cited code now exists in several places: re-cite the one meant "
                                 "(`citegraph remember … --code-ref`)",
    Reason.AMBIGUOUS_SUCCESSOR: "several definitions could succeed the cited one: re-cite the one meant",
    Reason.INCOMPLETE_COVERAGE: "a file of the cited language could not be parsed fully "
                                "(`citegraph status` lists it): fix the file or re-cite",
    Reason.OUT_OF_SCOPE: "its repository is not in scope: pass `--repo PATH` of a clone of it",
    Reason.REPOSITORY_AMBIGUOUS: "several clones of its repository are in scope in different states: "
                                 "pass one `--repo PATH`",
    Reason.MEMBER_MISSING: "a workset member is missing or unprepared: run `citegraph workset prepare NAME`",
    Reason.LIMIT: "not checked (over the bound): validate it alone (`citegraph validate --memory ID`)",
    Reason.FILTER_DRIVER: "the file is uncommitted and git stores it through a filter driver citegraph never "
                          "runs: commit it (or `git add` it), run `citegraph index`, then {again}",
    Reason.INVALID_CITATION: "the stored receipt is malformed: re-cite it (`citegraph remember … --code-ref`)",
}

# Memories without citations (SPEC §6.5): judged by their source commit.
_LEGACY_STEPS: dict[str, str] = {
    "no-basis": "it cites no code: re-capture it with `--code-ref` so it can be checked",
    "source-commit-behind": "its source commit is behind HEAD: check the claim, then re-capture it with `--code-ref`",
    "source-commit-gone": "its source commit is not in this repository: re-capture it with `--code-ref`",
    "source-commit-not-ancestor": "its source commit is not an ancestor of HEAD: re-capture it with `--code-ref`",
    "dirty-worktree": "the worktree is dirty: commit or stash, or re-capture it with `--code-ref`",
}


def next_step(reason: str | None, *, at: str | None = None, command: str = "validate",
              service: bool = False, indexing_s: float | None = None) -> str | None:
    """The next step for an unknown with ``reason`` (None when there is nothing to do or
    the reason is not an unknown's). Several reasons (comma-separated) give the first
    one's step. ``service``: the state was read through the resident service, which builds
    every change itself — never advise running ``index`` or starting ``serve`` then;
    ``indexing_s``: the service was still indexing the state read, for this long."""
    if not reason:
        return None
    first = reason.split(",", 1)[0].strip()
    if at and first == Reason.NOT_CURRENT:
        return f"commit {at} is not indexed: run `citegraph index --rev {at}`, then {_again(command)}"
    if first == Reason.RACING and indexing_s is not None:
        return still_indexing(indexing_s) + f": {_again(command)} in a moment"
    if service and first == Reason.NOT_CURRENT:
        return ("the running citegraph service has not built this state (`citegraph status` and the "
                f"service log say why), then {_again(command)}")
    if service and first == Reason.FILTER_DRIVER:  # the service indexes the commit itself
        return ("the file is uncommitted and git stores it through a filter driver citegraph never "
                f"runs: commit it (or `git add` it), then {_again(command)}")
    step = _STEPS.get(first) or _LEGACY_STEPS.get(first)
    return step.format(again=_again(command)) if step else None


def still_indexing(seconds: float) -> str:
    """What a read past its bound says while the service builds the state it read."""
    return f"the citegraph service is still indexing this repository's latest change ({seconds:.1f}s so far)"


def _again(command: str) -> str:
    return f"run `citegraph {command}` again" if command != "check" else "run the check again"
