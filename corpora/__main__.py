"""``python -m citegraph.corpora run [--category C] [--case NAME] [--json]`` — run the labeled
corpus and check the SPEC §13 gates (exit 1 when a gate fails, 2 on a malformed case).

``python -m citegraph.corpora show CASE`` prints a case's initial files with line numbers
and the symbols each yields (what an author needs to write span and symbol refs).
``python -m citegraph.corpora list`` lists the cases.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from citegraph.corpora.case import CATEGORIES, CaseError, Selection, load_cases


def _cmd_run(args: argparse.Namespace) -> int:
    from citegraph.corpora.report import gates, render, to_json
    from citegraph.corpora.runner import run_cases

    cases = Selection(args.category or [], args.case or [])(load_cases())
    if not cases:
        print("no case matches the selection", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    progress = None
    if not args.json and sys.stderr.isatty():
        done = [0]

        def progress(r):  # type: ignore[no-untyped-def]
            done[0] += 1
            print(f"\r{done[0]}/{len(cases)} {r.case:<50}", end="", file=sys.stderr, flush=True)

    results = run_cases(cases, jobs=args.jobs, keep=args.keep, on_done=progress, service=args.service)
    if progress:
        print("\r" + " " * 60 + "\r", end="", file=sys.stderr)
    seconds = time.perf_counter() - t0
    gate_list = gates(results)
    if args.json:
        print(json.dumps(to_json(results, gate_list, seconds), indent=2, sort_keys=True))
    else:
        print(render(results, gate_list, seconds, verbose=args.verbose))
        if args.timings:
            for r in sorted(results, key=lambda r: -r.seconds)[:15]:
                print(f"  {r.seconds:6.2f} s  {r.case}")
        for r in results:
            if r.error:
                print(f"\ncase {r.case} failed to run:\n{r.error}", file=sys.stderr)
    return 0 if all(g.passed for g in gate_list) else 1


def _cmd_list(args: argparse.Namespace) -> int:
    for c in Selection(args.category or [], [])(load_cases()):
        n = sum(1 for lab in c.labels() if lab[2] is not None)
        print(f"{c.name:<48}{c.category:<22}{c.language:<12}{n:>3} citation labels")
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from citegraph.corpora.runner import content_bytes
    from citegraph.indexer.extract import extract
    from citegraph.indexer.languages import language_for_path

    cases = Selection([], [args.case])(load_cases())
    if not cases:
        print(f"no case {args.case}", file=sys.stderr)
        return 2
    for case in cases:
        print(f"# {case.name} ({case.category}, {case.language})")
        for path, value in case.data.get("files", {}).items():
            data = content_bytes(value)
            print(f"\n== {path} ({len(data)} bytes)")
            for n, line in enumerate(data.decode("utf-8", "replace").split("\n"), 1):
                if line or n < data.count(b"\n") + 1:
                    print(f"{n:4} | {line}")
            lang = language_for_path(path)
            if lang:
                facts = extract(lang, data)
                print(f"-- {lang}: {facts.status}")
                for s in facts.symbols:
                    print(f"   {s.kind:<10} {path}::{s.qualified_name}  L{s.start_line}-L{s.end_line}"
                          + (f"  (ordinal {s.ordinal})" if s.ordinal else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    from citegraph.corpora.runner import default_jobs

    ap = argparse.ArgumentParser(prog="python -m citegraph.corpora", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="run the corpus and check the gates")
    run.add_argument("--category", action="append", choices=CATEGORIES, help="only this category (repeatable)")
    run.add_argument("--case", action="append", help="only cases matching this name or glob (repeatable)")
    run.add_argument("--json", action="store_true", help="machine-readable results")
    run.add_argument("--jobs", type=int, default=default_jobs(), help="cases run in parallel (default %(default)s)")
    run.add_argument("--verbose", action="store_true", help="list every failing item of a gate")
    run.add_argument("--timings", action="store_true", help="print the slowest cases")
    run.add_argument("--keep", action="store_true", help="keep the temporary directories (debugging)")
    run.add_argument("--service", action="store_true",
                     help="read every repository through a resident service (its watcher and fence) instead "
                          "of a one-shot scan; labels and gates are the same")
    lst = sub.add_parser("list", help="list the cases")
    lst.add_argument("--category", action="append", choices=CATEGORIES)
    show = sub.add_parser("show", help="print a case's files with line numbers and symbols")
    show.add_argument("case")
    args = ap.parse_args(argv)
    try:
        return {"run": _cmd_run, "list": _cmd_list, "show": _cmd_show}[args.cmd](args)
    except CaseError as exc:
        print(f"corpus: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
