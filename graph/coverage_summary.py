"""The per-language coverage summary of a snapshot (SPEC §3, §16): counts of indexed,
partial and skipped files, plus why files are not indexed — partial files by the construct
of their first error, skipped files by reason — only where there are such files.

A delta build updates its base's summary by subtracting the file rows it hides and adding
its own, which gives the clean build's summary (tests/test_incremental.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

STATUSES = ("indexed", "partial", "skipped")
BREAKDOWN = {"partial": "partial_causes", "skipped": "skipped_reasons"}

Summary = dict[str, dict[str, Any]]


def _count(cov: Summary, language: str | None, status: str, reason: str | None, n: int) -> None:
    c = cov.setdefault(language or "other", dict.fromkeys(STATUSES, 0))
    c[status] = c.get(status, 0) + n
    key = BREAKDOWN.get(status)
    if key:
        why = c.setdefault(key, {})
        why[reason or "unknown"] = why.get(reason or "unknown", 0) + n


def _tidy(cov: Summary) -> Summary:
    out = {}
    for lang, c in sorted(cov.items()):
        counts: dict[str, Any] = {k: c.get(k, 0) for k in STATUSES}
        if not any(counts.values()):
            continue
        for status, key in BREAKDOWN.items():
            why = {r: n for r, n in sorted((c.get(key) or {}).items(), key=lambda kv: (-kv[1], kv[0])) if n}
            if counts[status] and why:
                counts[key] = why
        out[lang] = counts
    return out


def summarize(rows: Iterable[tuple[str | None, str, str | None]]) -> Summary:
    """The summary of file rows given as (language, status, reason)."""
    cov: Summary = {}
    for language, status, reason in rows:
        _count(cov, language, status, reason, 1)
    return _tidy(cov)


def merge(base: Summary, hidden: Iterable[tuple[str | None, str, str | None]], own: Summary) -> Summary:
    """``base`` without the ``hidden`` rows (language, status, reason), plus ``own``."""
    cov: Summary = {lang: {k: (dict(v) if isinstance(v, dict) else v) for k, v in c.items()}
                    for lang, c in base.items()}
    for language, status, reason in hidden:
        _count(cov, language, status, reason, -1)
    for lang, c in own.items():
        for status in STATUSES:
            key = BREAKDOWN.get(status)
            if key and c.get(key):
                for reason, n in c[key].items():
                    _count(cov, lang, status, reason, n)
            elif c.get(status):
                _count(cov, lang, status, None, c[status])
    return _tidy(cov)


def split(summary: Summary) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, dict[str, int]]]]:
    """The counts (the catalog entry's ``coverage``, SPEC §16 keys, integers only) and the
    breakdown (its ``coverage_causes``), stored apart."""
    counts = {lang: {k: c.get(k, 0) for k in STATUSES} for lang, c in summary.items()}
    causes = {lang: {key: dict(c[key]) for key in BREAKDOWN.values() if c.get(key)}
              for lang, c in summary.items()}
    return counts, {lang: c for lang, c in causes.items() if c}


def join(counts: Any, causes: Any) -> Summary:
    """The summary again; the catalog is untrusted, so a malformed breakdown is dropped."""
    out: Summary = {lang: dict(c) for lang, c in (counts or {}).items() if isinstance(c, dict)}
    if not isinstance(causes, dict):
        return out
    for lang, c in causes.items():
        if lang not in out or not isinstance(c, dict):
            continue
        for key in BREAKDOWN.values():
            why = c.get(key)
            if isinstance(why, dict) and all(isinstance(r, str) and isinstance(n, int)
                                             and not isinstance(n, bool) for r, n in why.items()):
                out[lang][key] = dict(why)
    return out
