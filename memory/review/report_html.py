"""The memory report as one self-contained HTML file (no network, no CDN: inline CSS, SVG and
script; a Content-Security-Policy that forbids every load). Every piece of text from the
store or the repository — memory text, topics, paths, code — is HTML-escaped; memory text
is shown quoted, as data."""

from __future__ import annotations

import html
from typing import Any

from citegraph.memory.review.report import FRESHNESS
from citegraph.validator.model import CHANGE_TEXT, OUTCOMES

COLOURS = {"fresh": "#2e7d32", "stale": "#c62828", "unknown": "#8d6e00", "exact": "#2e7d32",
           "relocated": "#1565c0", "changed": "#c62828", "deleted": "#6a1b9a"}
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#1b1b1b;background:#fafafa}
header{padding:16px 24px;background:#fff;border-bottom:1px solid #ddd}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:24px 0 8px}
main{padding:0 24px 40px}.muted{color:#666}
.filters{display:flex;gap:12px;flex-wrap:wrap;align-items:end;margin:16px 0;padding:12px;background:#fff;
 border:1px solid #ddd;border-radius:6px}
.filters label{display:flex;flex-direction:column;font-size:12px;color:#444;gap:2px}
.memory{background:#fff;border:1px solid #ddd;border-left:5px solid #999;border-radius:6px;margin:10px 0;padding:10px 14px}
.memory.stale{border-left-color:#c62828}.memory.unknown{border-left-color:#8d6e00}.memory.fresh{border-left-color:#2e7d32}
.memory .text{font-size:15px;margin:4px 0 8px;white-space:pre-wrap;word-break:break-word}
.badge{display:inline-block;padding:0 6px;border-radius:10px;color:#fff;font-size:12px;margin-right:4px}
table.cites{border-collapse:collapse;width:100%;font-size:13px}
table.cites td,table.cites th{border-top:1px solid #eee;padding:4px 6px;text-align:left;vertical-align:top}
code{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;word-break:break-all}
table.diff{border-collapse:collapse;width:100%;font:12px/1.4 ui-monospace,monospace;margin:6px 0}
table.diff td{padding:0 6px;white-space:pre-wrap;word-break:break-all;vertical-align:top;width:50%}
table.diff th{font:600 12px system-ui,sans-serif;text-align:left;padding:2px 6px;background:#f0f0f0}
td.del{background:#fde7e7}td.ins{background:#e6f4e6}td.chg{background:#fff6d6}
[hidden]{display:none!important}
"""

SCRIPT = """
(function () {
  var project = document.getElementById('f-project'), outcome = document.getElementById('f-outcome'),
      path = document.getElementById('f-path'), count = document.getElementById('f-count');
  var memories = Array.prototype.slice.call(document.querySelectorAll('.memory'));
  function apply() {
    var p = project.value, o = outcome.value, q = path.value.trim().toLowerCase(), shown = 0;
    memories.forEach(function (m) {
      var ok = !p || m.getAttribute('data-project') === p;
      var rows = Array.prototype.slice.call(m.querySelectorAll('tr.citation'));
      var any = false;
      rows.forEach(function (r) {
        var hit = (!o || r.getAttribute('data-outcome') === o) &&
                  (!q || r.getAttribute('data-path').toLowerCase().indexOf(q) !== -1);
        r.hidden = !hit;
        var d = r.nextElementSibling;
        if (d && d.classList.contains('diffrow')) { d.hidden = !hit; }
        any = any || hit;
      });
      if ((o || q) && !any) { ok = false; }
      m.hidden = !ok;
      if (ok) { shown += 1; }
    });
    document.querySelectorAll('section.group').forEach(function (g) {
      g.hidden = !g.querySelector('.memory:not([hidden])');
    });
    count.textContent = shown + ' of ' + memories.length + ' memories shown';
  }
  [project, outcome].forEach(function (el) { el.addEventListener('change', apply); });
  path.addEventListener('input', apply);
  apply();
})();
"""


def esc(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def chart(counts: dict[str, dict[str, int]]) -> str:
    """Two horizontal bar groups (memories by freshness, citations by outcome) as inline SVG."""
    rows = [("Memories", k, v) for k, v in counts["freshness"].items()] + \
           [("Citations", k, v) for k, v in counts["outcome"].items()]
    top = max([v for _, _, v in rows] + [1])
    bar_h, gap, label_w, width = 18, 6, 150, 560
    y, parts = 0, []
    last_group = None
    for group, key, value in rows:
        if group != last_group:
            y += 8 if last_group else 0
            parts.append(f'<text x="0" y="{y + 13}" font-weight="600" font-size="13">{esc(group)}</text>')
            y += bar_h + gap
            last_group = group
        w = 0 if value == 0 else max(2, round((width - label_w - 60) * value / top))
        parts.append(f'<text x="12" y="{y + 13}" font-size="12">{esc(key)}</text>'
                     f'<rect x="{label_w}" y="{y}" width="{w}" height="{bar_h}" rx="3" '
                     f'fill="{COLOURS.get(key, "#777")}"><title>{esc(group)} {esc(key)}: {value}</title></rect>'
                     f'<text x="{label_w + w + 6}" y="{y + 13}" font-size="12" class="count" '
                     f'data-key="{esc(group.lower())}-{esc(key)}">{value}</text>')
        y += bar_h + gap
    return (f'<svg id="chart" role="img" aria-label="Memories by freshness and citations by outcome" '
            f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" viewBox="0 0 {width} {y}">'
            + "".join(parts) + "</svg>")


def _link(text: str, url: str | None) -> str:
    body = f"<code>{esc(text)}</code>"
    return f'<a href="{esc(url)}" rel="noreferrer">{body}</a>' if url else body


def _diff(rows: list[dict[str, Any]]) -> str:
    cls = {"equal": ("", ""), "replace": ("chg", "chg"), "delete": ("del", ""), "insert": ("", "ins")}
    out = ['<table class="diff"><tr><th>cited (at capture)</th><th>current</th></tr>']
    for row in rows:
        left, right = cls[row["tag"]]
        n = max(len(row["old"]), len(row["new"]))
        for i in range(n):
            a = row["old"][i] if i < len(row["old"]) else ""
            b = row["new"][i] if i < len(row["new"]) else ""
            la = left if i < len(row["old"]) else ""
            lb = right if i < len(row["new"]) else ""
            out.append(f'<tr><td class="{la}">{esc(a)}</td><td class="{lb}">{esc(b)}</td></tr>')
        if row.get("cut"):
            out.append('<tr><td colspan="2" class="muted">… diff cut</td></tr>')
    out.append("</table>")
    return "".join(out)


def _memory(m: dict[str, Any]) -> str:
    badge = f'<span class="badge" style="background:{COLOURS[m["freshness"]]}">{esc(m["freshness"])}</span>'
    status = f'<span class="muted">{esc(m["status"] or "no citations")}' + \
        (f" — {esc(m['reason'])}" if m.get("reason") else "") + "</span>"
    rows = []
    for c in m["citations"]:
        ob = c.get("observed")
        where = ""
        if ob:
            loc = ob["path"] + (f"#L{ob['start_line']}-L{ob['end_line']}" if ob.get("start_line") else "")
            where = _link(loc, c.get("observed_link"))
        reason = f' <span class="muted">({esc(c["reason"])})</span>' if c.get("reason") else ""
        if c.get("change"):
            reason = f' <span class="muted">({esc(CHANGE_TEXT.get(c["change"], c["change"]))})</span>'
        rows.append(f'<tr class="citation" data-outcome="{esc(c["outcome"])}" data-path="{esc(c["path"])}">'
                    f'<td><span class="badge" style="background:{COLOURS[c["outcome"]]}">{esc(c["outcome"])}</span>'
                    f'{reason}</td><td>{esc(c["kind"])}</td><td>{_link(c.get("locator") or c["ref"], c.get("link"))}</td>'
                    f'<td>{where}</td></tr>')
        if c.get("diff"):
            rows.append(f'<tr class="diffrow"><td colspan="4">{_diff(c["diff"])}</td></tr>')
    table = ('<table class="cites"><tr><th>outcome</th><th>kind</th><th>cited</th><th>observed now</th></tr>'
             + "".join(rows) + "</table>") if rows else '<p class="muted">no citations</p>'
    warnings = "".join(f'<div class="muted">{esc(w)}</div>' for w in m.get("warnings", []))
    return (f'<article class="memory {esc(m["freshness"])}" id="{esc(m["id"])}" data-project="{esc(m["project"])}">'
            f'<div>{badge}<code>{esc(m["id"])}</code> · <b>{esc(m["project"])}</b>/{esc(m["topic"])} · '
            f'{esc(m["kind"])} · {status}</div>'
            f'<blockquote class="text">“{esc(m["text"])}”</blockquote>{warnings}{table}</article>')


def render(data: dict[str, Any]) -> str:
    projects = sorted({m["project"] for m in data["memories"]})
    options = "".join(f'<option value="{esc(p)}">{esc(p)}</option>' for p in projects)
    outs = "".join(f'<option value="{o}">{o}</option>' for o in OUTCOMES)
    repos = "".join(f'<li><code>{esc(r["path"])}</code> {esc(r["kind"])} <code>{esc(r["source"])}</code> at '
                    f'<code>{esc(r["commit"][:12])}</code>{"" if r["exact_current"] else " (no ready snapshot)"}</li>'
                    for r in data["repositories"])
    groups = []
    for fresh in FRESHNESS:
        ms = [m for m in data["memories"] if m["freshness"] == fresh]
        if ms:
            groups.append(f'<section class="group" id="group-{fresh}"><h2>{fresh} ({len(ms)})</h2>'
                          + "".join(_memory(m) for m in ms) + "</section>")
    body = "".join(groups) or '<p class="muted">No memories.</p>'
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>citegraph memory report</title><style>{CSS}</style></head>
<body><header><h1>citegraph memory report</h1>
<div class="muted">Generated {esc(data["generated_at"])}{" at " + esc(data["at"]) if data.get("at") else ""}
 · {len(data["memories"])} memories · memory text is quoted as data</div><ul>{repos}</ul></header>
<main>{chart(data["counts"])}
<div class="filters">
<label>project<select id="f-project"><option value="">all</option>{options}</select></label>
<label>outcome<select id="f-outcome"><option value="">all</option>{outs}</select></label>
<label>path contains<input id="f-path" type="search" placeholder="src/…"></label>
<span id="f-count" class="muted"></span></div>
{body}</main><script>{SCRIPT}</script></body></html>
"""
