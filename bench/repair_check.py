"""Do the TypeScript pre-parse repairs change anything the grammar's own tree was sure of?

    python -m citegraph.bench.repair_check GIT_DIR [--rev REV]

For every TypeScript/TSX blob of REV whose plain parse has errors: the symbols extracted
with the repairs (indexer/preparse.py) against those extracted from the grammar's own
tree, compared outside that tree's damage regions (where issue 15 says its facts are those
of an error-free parse). A symbol that differs there is checked against its declaration
parsed alone (an error-free file): the repaired answer should be that one.
"""

from __future__ import annotations

import argparse
import sys

import pygit2

from citegraph.bench.coverage_bench import MAX_BYTES, walk
from citegraph.indexer.extract import extract, parse
from citegraph.indexer.languages import language_for_path
from citegraph.validator import decisions


def _key(s) -> tuple:
    return (s.kind, s.qualified_name, s.ordinal, s.start_byte, s.end_byte, s.fragment_hash, s.body_hash)


def check(git_dir: str, rev: str = "HEAD") -> dict:
    repo = pygit2.Repository(git_dir)
    tree = repo.revparse_single(rev).peel(pygit2.Tree)
    out = {"files_with_errors": 0, "now_indexed": 0, "symbols_compared": 0, "files_differing": 0,
           "differing": 0, "differing_equal_alone": 0, "examples": []}
    for path, oid in walk(repo, tree):
        lang = language_for_path(path)
        if lang not in ("typescript", "tsx"):
            continue
        data = repo.odb.read(oid)[1]
        if len(data) > MAX_BYTES or not parse(lang, data, 5.0).root_node.has_error:
            continue
        out["files_with_errors"] += 1
        raw, new = extract(lang, data, repair=False), extract(lang, data)
        out["now_indexed"] += new.status == "indexed"
        regions = tuple((d.start_byte, d.end_byte) for d in raw.damage)

        def clear(s) -> bool:
            return not decisions.touches_any(((s.start_byte, s.end_byte),), regions)  # noqa: B023

        before = {_key(s) for s in raw.symbols if clear(s)}
        after = {_key(s) for s in new.symbols if clear(s)}
        out["symbols_compared"] += len(before)
        if before == after:
            continue
        out["files_differing"] += 1
        for k in after - before:
            out["differing"] += 1
            alone = extract(lang, b"export const " + data[k[3]:k[4]] + b"\n")
            same = alone.status == "indexed" and any((s.kind, s.qualified_name) == k[:2] for s in alone.symbols)
            out["differing_equal_alone"] += same
            if len(out["examples"]) < 5:
                out["examples"].append(f"{path}: {k[1]} {k[0]} (grammar's tree: "
                                       f"{sorted(b[0] for b in before - after if b[1] == k[1])})")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("git_dir")
    ap.add_argument("--rev", default="HEAD")
    a = ap.parse_args(argv)
    r = check(a.git_dir, a.rev)
    print(f"{a.git_dir}: {r['files_with_errors']} TS/TSX files with parse errors, {r['now_indexed']} indexed "
          f"with the repairs; {r['symbols_compared']} symbols outside the damage regions compared, "
          f"{r['differing']} differ in {r['files_differing']} files, {r['differing_equal_alone']} of them "
          f"equal to the declaration parsed alone")
    for e in r["examples"]:
        print("  ", e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
