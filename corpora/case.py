"""Corpus cases: one TOML file per scenario under ``corpora/cases/`` (format: docs/corpus.md).

A case is plain data. This module loads it, checks its shape (so a typo fails loudly
instead of silently producing no labels) and parses labels. Execution is in runner.py.
"""

from __future__ import annotations

import copy
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CASES_DIR = Path(__file__).parent / "cases"

OUTCOMES = ("exact", "relocated", "changed", "deleted", "unknown")
FRESHNESS = ("fresh", "stale", "unknown")

# The categories of SPEC §13, in its order.
CATEGORIES = (
    "unchanged",            # unchanged evidence across later commits
    "unrelated-edit",       # unrelated edits in the same file
    "body-change",
    "signature-change",
    "move",
    "rename",
    "move-and-edit",
    "deletion",
    "path-reuse",
    "duplicate-relocation",  # duplicated relocation candidates
    "dirty-overlay",
    "stale-snapshot",
    "racing",
    "incomplete-coverage",   # parse errors, skipped files
    "incomplete-workset",
    "collision",             # cross-repository and cross-worktree
    "crlf-unicode",
    "extractor-version",
    "legacy",
    "hostile-filesystem",    # symlinked directories, FIFOs, undecodable names, damaged snapshots
    # SPEC §18 (the agent loop)
    "refresh",               # reviewed re-anchoring of moved citations; refused cases
    "overload",              # several same-name definitions: ordinals, the implementation by default
    # SPEC §21 (the graph at work)
    "dependency-change",     # exact citations whose recorded callee/base changed: advisories, never verdicts
    # issue 20 (hostile inputs, round two)
    "hostile-config",        # a committed .citegraph.toml that is hostile: one clear error or a correct index
    "git-filters",           # eol=crlf, core.autocrlf, ident, an external filter driver: git's stored form
    # issue 23 (fewer false alarms)
    "cosmetic",              # comments/formatting only: changed + cosmetic; never for a real change
)

# Step operations and the keys each accepts (besides ``op`` and ``repo``).
STEP_KEYS: dict[str, set[str]] = {
    "index": {"rev", "expect_error"},  # expect_error: words the one error line must hold
    "capture": {"memory", "refs", "text", "expect_error", "race"},
    "legacy": {"memory", "source_commit", "text"},
    "commit": {"message", "tag"},
    "write": {"path", "content", "crlf", "repeat", "encoding"},
    "symlink": {"path", "target", "files"},
    "mkfifo": {"path"},
    "damage": {"what", "which"},
    "edit": {"path", "content", "replace", "prepend", "append", "crlf"},
    "mv": {"src", "dst"},
    "cp": {"src", "dst"},
    "rm": {"path"},
    "restore": {"path"},
    "checkout": {"rev", "create"},
    "branch": {"name", "rev"},
    "tag": {"name", "rev"},
    "new-repo": {"name", "remote", "files"},
    "clone": {"name", "source", "remote"},
    "worktree": {"name", "rev", "branch", "detach"},
    "extractor": {"version", "fragments"},
    "git": {"args"},
    "validate": {"memories", "scope", "at", "race", "expect", "name", "expect_error"},
    "refresh": {"memory", "memories", "accept", "dry_run", "expect", "expect_error"},
}

LABEL_RE = re.compile(
    r"^\s*(?P<outcome>[a-z]+)(?:/(?P<reason>[a-z-]+))?(?:\s+(?P<change>cosmetic))?"
    r"(?:\s*@\s*(?P<path>[^#]+?)(?:#L(?P<start>\d+)-L(?P<end>\d+))?)?\s*$")


class CaseError(Exception):
    """A malformed case file (an authoring error, never a validator result)."""


@dataclass(frozen=True)
class Label:
    """An expected citation outcome: ``outcome[/reason][ cosmetic][ @ path[#La-Lb]]``.

    A reason is checked only when given; so is the observed location. The change detail is
    always checked: ``changed cosmetic`` expects comments/formatting only (SPEC §6.3a), a
    plain ``changed`` expects a real change (no detail)."""

    outcome: str
    reason: str | None = None
    path: str | None = None
    start_line: int | None = None
    end_line: int | None = None
    change: str | None = None

    @classmethod
    def parse(cls, text: str) -> Label:
        m = LABEL_RE.match(text)
        if not m or m.group("outcome") not in OUTCOMES or (m.group("change") and m.group("outcome") != "changed"):
            raise CaseError(f"bad label {text!r}: expected outcome[/reason][ cosmetic][ @ path[#La-Lb]] "
                            f"with outcome in {OUTCOMES} (cosmetic only after changed)")
        start = int(m.group("start")) if m.group("start") else None
        end = int(m.group("end")) if m.group("end") else None
        return cls(m.group("outcome"), m.group("reason"), m.group("path"), start, end, m.group("change"))

    def __str__(self) -> str:
        s = self.outcome + (f"/{self.reason}" if self.reason else "") + (f" {self.change}" if self.change else "")
        if self.path:
            s += f" @ {self.path}" + (f"#L{self.start_line}-L{self.end_line}" if self.start_line else "")
        return s


ADVISORY_RE = re.compile(r"^\s*(?P<change>changed|deleted|relocated)\s+(?P<locator>\S+)"
                         r"(?:\s*@\s*(?P<path>\S+))?\s*$")


@dataclass(frozen=True)
class AdvisoryLabel:
    """An expected dependency-changed advisory: ``change locator[ @ path]`` — what happened
    to the dependency recorded as ``locator`` (``path::Qualified.name`` at capture) and,
    optionally, the path where it is now. An empty list expects none (SPEC §21)."""

    change: str
    locator: str
    path: str | None = None

    @classmethod
    def parse(cls, text: str) -> AdvisoryLabel:
        m = ADVISORY_RE.match(text) if isinstance(text, str) else None
        if not m:
            raise CaseError(f"bad advisory label {text!r}: expected changed|deleted|relocated LOCATOR[ @ path]")
        return cls(m["change"], m["locator"], m["path"])

    def matches(self, change: str, locator: str, path: str | None) -> bool:
        return (self.change, self.locator) == (change, locator) and self.path in (None, path)


@dataclass(frozen=True)
class FreshLabel:
    freshness: str
    reason: str | None = None

    @classmethod
    def parse(cls, text: str) -> FreshLabel:
        head, _, reason = text.strip().partition("/")
        if head not in FRESHNESS:
            raise CaseError(f"bad freshness {text!r}: expected one of {FRESHNESS}[/reason]")
        return cls(head, reason or None)

    def __str__(self) -> str:
        return self.freshness + (f"/{self.reason}" if self.reason else "")


@dataclass
class Case:
    name: str
    path: Path | None
    data: dict[str, Any]

    @property
    def category(self) -> str:
        return self.data["category"]

    @property
    def language(self) -> str:
        return self.data["language"]

    @property
    def steps(self) -> list[dict[str, Any]]:
        return self.data.get("steps", [])

    def copy(self) -> Case:
        return Case(self.name, self.path, copy.deepcopy(self.data))

    def labels(self) -> list[tuple[int, str, str | None, str]]:
        """Every label: (step index, memory, ref or None for the memory's freshness, text)."""
        out = []
        for i, step in enumerate(self.steps):
            if step["op"] != "validate":
                continue
            for mem, exp in step.get("expect", {}).items():
                if "freshness" in exp:
                    out.append((i, mem, None, exp["freshness"]))
                for ref, text in exp.get("citations", {}).items():
                    out.append((i, mem, ref, text))
        return out

    def set_label(self, step: int, memory: str, ref: str | None, text: str) -> None:
        exp = self.data["steps"][step]["expect"][memory]
        if ref is None:
            exp["freshness"] = text
        else:
            exp["citations"][ref] = text


def _check_steps(name: str, steps: list[Any], where: str) -> None:
    for i, step in enumerate(steps):
        if not isinstance(step, dict) or "op" not in step:
            raise CaseError(f"{name}: {where}[{i}] needs an op")
        op = step["op"]
        if op not in STEP_KEYS:
            raise CaseError(f"{name}: {where}[{i}]: unknown op {op!r} (known: {sorted(STEP_KEYS)})")
        extra = set(step) - STEP_KEYS[op] - {"op", "repo"}
        if extra:
            raise CaseError(f"{name}: {where}[{i}] ({op}): unknown keys {sorted(extra)}")
        if "race" in step:
            _check_steps(name, step["race"], f"{where}[{i}].race")
        if op == "validate":
            for mem, exp in step.get("expect", {}).items():
                bad = set(exp) - {"freshness", "citations", "advisories"}
                if bad:
                    raise CaseError(f"{name}: {where}[{i}] expect.{mem}: unknown keys {sorted(bad)}")
                if "freshness" in exp:
                    FreshLabel.parse(exp["freshness"])
                for text in exp.get("citations", {}).values():
                    Label.parse(text)
                for ref, texts in exp.get("advisories", {}).items():
                    if not isinstance(texts, list):
                        raise CaseError(f"{name}: {where}[{i}] expect.{mem}.advisories.{ref}: a list of labels")
                    for text in texts:
                        AdvisoryLabel.parse(text)
        if op == "capture" and not isinstance(step.get("refs", []), list):
            raise CaseError(f"{name}: {where}[{i}]: refs must be a list")


def check_case(case: Case) -> Case:
    d = case.data
    for key in ("category", "language"):
        if key not in d:
            raise CaseError(f"{case.name}: missing {key}")
    if d["category"] not in CATEGORIES:
        raise CaseError(f"{case.name}: unknown category {d['category']!r} (known: {', '.join(CATEGORIES)})")
    extra = set(d) - {"category", "language", "description", "files", "remote", "steps"}
    if extra:
        raise CaseError(f"{case.name}: unknown top-level keys {sorted(extra)}")
    _check_steps(case.name, d.get("steps", []), "steps")
    if not case.labels():
        raise CaseError(f"{case.name}: no labels (add a validate step with expect)")
    return case


def load_case(path: Path) -> Case:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise CaseError(f"{path.name}: invalid TOML ({exc})") from exc
    return check_case(Case(path.stem, path, data))


def load_cases(directory: Path = CASES_DIR) -> list[Case]:
    return [load_case(p) for p in sorted(directory.glob("*.toml"))]


@dataclass
class Selection:
    categories: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # fnmatch patterns

    def __call__(self, cases: list[Case]) -> list[Case]:
        import fnmatch

        out = cases
        if self.categories:
            out = [c for c in out if c.category in self.categories]
        if self.names:
            out = [c for c in out if any(fnmatch.fnmatchcase(c.name, n) for n in self.names)]
        return out
