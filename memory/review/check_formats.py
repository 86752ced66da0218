"""Renderings of a ``CheckReport`` (memory/review/check.py): text, Markdown for a pull-request
comment (bounded, counts first) and SARIF 2.1.0 for GitHub code scanning (docs/ci.md).

Memory text is data everywhere: quoted and escaped (``check.quote``), in Markdown through
memory/escape.py (``md_text``: controls visible, HTML and punctuation escaped, mentions
neutralised; ``md_code``: a code span a backtick cannot close), so a memory or a path can
never render as a heading, a link, an image, HTML or a mention.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any
from urllib.parse import quote as url_quote

from citegraph.memory.escape import md_code, md_text
from citegraph.memory.review.check import LEVEL, RULES, CheckReport, Finding, quote

MAX_MARKDOWN_CHARS = 60_000  # a GitHub comment holds 65,536; leave room for a bot's wrapper
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
KNOWN_HOSTS = ("github.com", "gitlab.com", "bitbucket.org", "codeberg.org")

RULE_TEXT = {
    "changed": ("Cited code changed",
                "A memory is stale: the code one of its citations names was edited (or replaced by a "
                "successor) in this change.",
                "The memory's claim was made about code this change edited. Read the memory and the new "
                "code: if the claim still holds, remember it again with fresh citations (citegraph remember "
                "--topic … --code-ref …); otherwise archive or rewrite it."),
    "deleted": ("Cited code deleted",
                "A memory is stale: the code one of its citations names was deleted in this change.",
                "The code behind the memory's claim is gone. Archive the memory (citegraph archive ID) or "
                "rewrite it with citations to where the behaviour lives now."),
    "relocated": ("Cited code moved",
                  "A citation's exact code moved to another place in this change; the memory stays fresh "
                  "but its link is stale.",
                  "The cited bytes still exist, elsewhere. Accept the new location with citegraph refresh "
                  "ID --accept relocated (history keeps the old receipt)."),
    "unknown": ("Citation cannot be checked",
                "After this change a citation can no longer be judged exactly (ambiguous copies, "
                "incomplete coverage, …): citegraph will not guess.",
                "The message names the reason and the next step. An unknown never counts as fresh."),
    "dependency-changed": ("Dependency of cited code changed",
                           "A citation's code is unchanged, but code it calls, references or inherits from "
                           "(recorded at capture) was changed, deleted or moved in this change.",
                           "The memory stays fresh: its cited bytes are exact. Its meaning may not be — read the "
                           "dependency at this location and check that the claim still holds (an advisory, "
                           "never a verdict; docs/graph.md)."),
}
PROBLEM_SEVERITY = {"error": "error", "warning": "warning", "note": "recommendation"}


def version() -> str:
    try:
        return metadata.version("citegraph")
    except metadata.PackageNotFoundError:
        return "0"


# --- text -----------------------------------------------------------------------------------------


def to_text(rep: CheckReport) -> str:
    lines = [headline(rep)]
    if rep.status == "unknown":
        lines.append(f"  {rep.reason} — {rep.next_step}")
    for f in rep.findings:
        loc = f.location or {}
        lines.append(f"{f.level:7} {loc.get('path', '?')}:{loc.get('start_line', 1)}  {f.rule:9} "
                     f"{f.citation.ref}  memory {f.memory['id']} {quote(f.memory['text'], 80)}")
        if f.next_step:
            lines.append(f"        next step: {f.next_step}")
    for name, group in (("already not exact at base (unchanged)", rep.unchanged), ("now exact again", rep.resolved)):
        if group:
            lines.append(f"{name}: " + ", ".join(f"{f.citation.ref} ({f.base.outcome}→{f.head.outcome})"
                                                 for f in group[:20]) + (" …" if len(group) > 20 else ""))
    return "\n".join(lines) + "\n"


def headline(rep: CheckReport) -> str:
    s = rep.summary()
    b, h = (rep.base.commit or rep.base.rev)[:12], (rep.head.commit or rep.head.rev)[:12]
    if rep.status == "unknown":
        return f"citegraph check {b}..{h}: UNKNOWN — the change could not be checked (exit 2)"
    return (f"citegraph check {b}..{h}: {s['stale']} stale, {s['relocated']} relocated, {s['unknown']} unknown "
            f"— {s.get('affected_citations', 0)} of {s.get('citations', 0)} citation(s) re-validated, "
            f"{s.get('untouched_citations', 0)} untouched; {rep.diff.get('paths', 0)} path(s) changed "
            f"(exit {rep.exit_code()}, --fail-on {rep.fail_on})")


# --- Markdown -------------------------------------------------------------------------------------

def _md_finding(f: Finding) -> str:
    loc = f.location or {}
    place = f"{loc.get('path', '?')}" + ("" if loc.get("file_level") else f"#L{loc.get('start_line')}")
    text = " ".join(f.memory["text"].split())
    if len(text) > 200:
        text = text[:199] + "…"
    was = f.base.outcome + (f" ({f.base.reason})" if f.base.reason else "")
    now = f.head.outcome + (f" ({f.head.reason})" if f.head.reason else "")
    line = (f"- **{f.rule}** at {md_code(place)} — memory {md_code(f.memory['id'])} "
            f"({md_code(f.memory['project'] + '/' + f.memory['topic'])}): “{md_text(text)}” — citation "
            f"{md_code(f.citation.ref)}: {was} → {now}")
    if f.next_step:
        line += f"; next: {md_text(f.next_step)}"
    return line


def to_markdown(rep: CheckReport, limit: int = MAX_MARKDOWN_CHARS) -> str:
    """A pull-request comment: the counts first, then each finding, never over ``limit``
    characters (the findings that do not fit are counted, not cut mid-line)."""
    s = rep.summary()
    b, h = (rep.base.commit or rep.base.rev)[:12], (rep.head.commit or rep.head.rev)[:12]
    out = []
    if rep.status == "unknown":
        out.append(f"### citegraph check: unknown — this change could not be checked\n\n"
                   f"{md_text(rep.reason or '')}. Next step: {md_text(rep.next_step or '')}.\n")
    else:
        icon = "❌" if s["stale"] else ("⚠️" if s["findings"] else "✅")
        out.append(f"### {icon} citegraph check: {s['stale']} stale, {s['relocated']} relocated, "
                   f"{s['unknown']} unknown\n")
        out.append(f"{md_code(b)} → {md_code(h)} · {rep.diff.get('paths', 0)} path(s) changed · "
                   f"{s.get('affected_citations', 0)} of {s.get('citations', 0)} citation(s) re-validated, "
                   f"{s.get('untouched_citations', 0)} untouched · exit {rep.exit_code()} "
                   f"(--fail-on {rep.fail_on})\n")
        out.append("| finding | level | count |\n|---|---|---|")
        for rule in RULES:
            out.append(f"| {rule} | {LEVEL[rule]} | {s[rule]} |")
        out.append(f"| unchanged (already not exact at base) | — | {s['unchanged']} |")
        out.append(f"| resolved (exact again) | — | {s['resolved']} |\n")
    tail = f"\n_Memory text is quoted as data. Generated by citegraph {version()}._\n"
    body = "\n".join(out) + "\n"
    items = [_md_finding(f) for f in rep.findings]

    def more(n: int) -> str:
        return f"\n_… {n} more finding(s) not shown; see the SARIF or JSON output._\n"

    reserve = len(more(len(items))) + len(tail)
    shown = 0
    for item in items:
        if len(body) + len(item) + 1 + reserve > limit:
            break
        body += item + "\n"
        shown += 1
    if shown < len(items):
        body += more(len(items) - shown)
    return body + tail


# --- SARIF 2.1.0 ------------------------------------------------------------------------------------


def _rule(rule: str) -> dict[str, Any]:
    name, short, full = RULE_TEXT[rule]
    level = LEVEL[rule]
    return {"id": f"citegraph/{rule}", "name": name.replace(" ", ""),
            "shortDescription": {"text": name}, "fullDescription": {"text": short},
            "help": {"text": full, "markdown": full},
            "defaultConfiguration": {"level": level},
            "properties": {"tags": ["memory", "citation", rule], "precision": "very-high",
                           "problem.severity": PROBLEM_SEVERITY[level]}}


def _result(f: Finding) -> dict[str, Any]:
    loc = f.location or {"path": f.citation.path, "start_line": 1, "end_line": 1, "file_level": True,
                         "side": "head", "end_column": 1}
    region = {"startLine": loc["start_line"], "startColumn": 1, "endLine": loc["end_line"],
              "endColumn": max(1, loc.get("end_column", 1))}
    fp = f.fingerprint
    return {
        "ruleId": f"citegraph/{f.rule}", "ruleIndex": RULES.index(f.rule), "level": f.level,
        "message": {"text": f.message()},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": url_quote(loc["path"], safe="/")},
                                            "region": region}}],
        "partialFingerprints": {"primaryLocationLineHash": f"{fp}:1", "citegraphFinding/v1": fp},
        "properties": {"memoryId": f.memory["id"], "project": f.memory["project"], "topic": f.memory["topic"],
                       "citationId": f.citation.id, "ref": f.citation.ref, "scope": f.scope,
                       "baseOutcome": f.base.outcome, "headOutcome": f.head.outcome,
                       "reason": f.head.reason, "side": loc["side"], "fileLevel": bool(loc.get("file_level"))},
    }


def to_sarif(rep: CheckReport) -> dict[str, Any]:
    """One run, one rule per outcome, one result per finding (a citation whose verdict the
    change altered), at the head-side lines of that change."""
    ok = rep.status != "unknown"
    invocation: dict[str, Any] = {"executionSuccessful": ok, "exitCode": rep.exit_code()}
    if not ok:
        invocation["toolExecutionNotifications"] = [
            {"level": "error", "message": {"text": f"{rep.reason} — {rep.next_step}"}}]
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "citegraph", "version": version(), "semanticVersion": version(),
                            "rules": [_rule(r) for r in RULES]}},
        "automationDetails": {"id": "citegraph/check/"},
        "invocations": [invocation],
        "results": [_result(f) for f in rep.findings],
        "columnKind": "unicodeCodePoints",
        "properties": {"status": rep.status, "base": rep.base.commit, "head": rep.head.commit,
                       "summary": rep.summary()},
    }
    src = rep.repository.get("source", "")
    if rep.repository.get("kind") == "remote" and src.split("/", 1)[0] in KNOWN_HOSTS and rep.head.commit:
        run["versionControlProvenance"] = [{"repositoryUri": f"https://{src}", "revisionId": rep.head.commit}]
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
