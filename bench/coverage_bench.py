"""Share of `partial` files per language on a real repository's tree (grammar gaps).

    python -m citegraph.bench.coverage_bench GIT_DIR [--rev REV] [--json] [--top N]

Reads every blob of REV (default HEAD) from the object database (no checkout), applies
the indexer's language map and default size cap, extracts each supported file and prints
per language: files, partial, partial share, the share of the partial files' bytes that
their damage regions cover (and how many are damaged whole), and the most common causes
(the `reason` a partial file records: the grammar node type around its first error, or a
named construct).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter

import pygit2

from citegraph.indexer.blob_facts import facts_for_blob
from citegraph.indexer.extract import EXTRACTOR_VERSION
from citegraph.indexer.languages import language_for_path
from citegraph.validator import decisions

MAX_BYTES = 1 << 20


def walk(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str = ""):
    for e in tree:
        path = prefix + e.name
        if e.filemode == pygit2.GIT_FILEMODE_TREE:
            yield from walk(repo, repo[e.id], path + "/")
        elif e.filemode in (pygit2.GIT_FILEMODE_BLOB, pygit2.GIT_FILEMODE_BLOB_EXECUTABLE):
            yield path, e.id


def measure(git_dir: str, rev: str = "HEAD", names: int = 0) -> dict:
    repo = pygit2.Repository(git_dir)
    tree = repo.revparse_single(rev).peel(pygit2.Tree)
    stats: dict[str, dict] = {}
    partial_files: dict[str, list[tuple[bytes, list[tuple[int, int]]]]] = {}
    symbol_names: dict[str, set[str]] = {}
    t0 = time.perf_counter()
    for path, oid in walk(repo, tree):
        lang = language_for_path(path)
        if lang is None:
            continue
        try:
            data = repo.odb.read(oid)[1]
        except (KeyError, ValueError, pygit2.GitError):
            continue
        if len(data) > MAX_BYTES:
            continue
        _, facts = facts_for_blob(lang, data, 5.0)
        s = stats.setdefault(lang, {"files": 0, "indexed": 0, "partial": 0, "skipped": 0,
                                    "causes": Counter(), "examples": [], "partial_bytes": 0,
                                    "damage_bytes": 0, "whole_file": 0})
        s["files"] += 1
        s[facts.status] += 1
        symbol_names.setdefault(lang, set()).update(x.name for x in facts.symbols if x.name)
        if facts.status == "partial":
            if names:
                partial_files.setdefault(lang, []).append(
                    (data, [(d.start_byte, d.end_byte) for d in facts.damage]))
            s["causes"][facts.reason or "?"] += 1
            s["partial_bytes"] += len(data)
            s["damage_bytes"] += sum(d.end_byte - d.start_byte for d in facts.damage)
            s["whole_file"] += [(d.start_byte, d.end_byte) for d in facts.damage] == [(0, len(data))]
            if len(s["examples"]) < 5:
                s["examples"].append(path)
    out = {"repository": git_dir, "rev": str(tree.id), "extractor": EXTRACTOR_VERSION,
           "seconds": round(time.perf_counter() - t0, 1), "languages": {}}
    for lang, s in sorted(stats.items()):
        parsed = s["indexed"] + s["partial"]
        out["languages"][lang] = {
            "files": s["files"], "indexed": s["indexed"], "partial": s["partial"], "skipped": s["skipped"],
            "partial_share": round(s["partial"] / parsed, 4) if parsed else 0.0,
            # how much of the partial files' bytes the damage regions cover (SPEC §6.4
            # refinement: outside them a partial file can clear a citation), and how many
            # partial files are damaged whole (a structural error: the byte search decides)
            "damage_share": round(s["damage_bytes"] / s["partial_bytes"], 4) if s["partial_bytes"] else 0.0,
            "whole_file_damage": s["whole_file"],
            "causes": dict(s["causes"].most_common()), "examples": s["examples"],
        }
    if names:
        for lang, files in partial_files.items():
            out["languages"][lang]["citable_names"] = _citable(sorted(symbol_names[lang]), files, names)
    return out


def _citable(all_names: list[str], files: list[tuple[bytes, list[tuple[int, int]]]], n: int) -> dict:
    """For up to ``n`` symbol names of the language (evenly spread), how many a citation
    could prove absent or unique past the partial files: by the byte search alone (the
    name in no partial file) and with the damage regions (no occurrence touching one; the
    fragment and body needles of a real citation can only refuse more)."""
    step = max(1, len(all_names) // n)
    sample = all_names[::step][:n]
    by_search = by_regions = 0
    for name in sample:
        needle = name.encode("utf-8", "surrogateescape")
        search = all(needle not in data for data, _ in files)
        regions = search or all(
            not decisions.touches_any(tuple(_occurrences(data, needle)), tuple(dmg)) for data, dmg in files)
        by_search += search
        by_regions += regions
    return {"sampled": len(sample), "cleared_by_byte_search": by_search, "cleared_with_regions": by_regions}


def _occurrences(data: bytes, needle: bytes):
    i = data.find(needle)
    while i >= 0:
        yield i, i + len(needle)
        i = data.find(needle, i + 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("git_dir")
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--names", type=int, default=0,
                    help="also sample N symbol names: how many the partial files let a citation clear")
    a = ap.parse_args(argv)
    res = measure(a.git_dir, a.rev, a.names)
    if a.json:
        json.dump(res, sys.stdout, indent=1)
        print()
        return 0
    print(f"{res['repository']} @ {res['rev'][:12]} ({res['extractor']}, {res['seconds']} s)")
    for lang, s in res["languages"].items():
        causes = "; ".join(f"{c} ×{n}" for c, n in list(s["causes"].items())[: a.top])
        print(f"  {lang:11} files={s['files']:6} partial={s['partial']:5} "
              f"share={100 * s['partial_share']:6.2f}%  damaged bytes={100 * s['damage_share']:6.2f}% "
              f"whole-file={s['whole_file_damage']}  {causes}")
        if "citable_names" in s:
            c = s["citable_names"]
            print(f"  {'':11} names cleared past the partial files: byte search {c['cleared_by_byte_search']}"
                  f"/{c['sampled']}, with damage regions {c['cleared_with_regions']}/{c['sampled']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
