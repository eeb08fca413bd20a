"""`nmt lab all`'s report: report.md beside the figures, and a self-contained report.html
(PNG figures embedded as base64, SVG inline) that opens without the folder."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from nmt.lab.base import Result, fmt_cell

TITLE = "nmt lab: the attention essays' claims, run and checked"
INTRO = ("Each experiment states a claim, measures it with the project's own attention code "
         "(plain torch only where the essay's example is deliberately bare), draws a figure "
         "and checks the property; the check's numbers are in the verdict line. "
         "Re-run one with `nmt lab run NAME`.")


def _sections(results: list[Result], seconds: dict[str, float]) -> list[dict]:
    """One dict per experiment with everything both renderings need."""
    from nmt.lab.registry import EXPERIMENTS

    return [{"name": r.name, "claim": EXPERIMENTS[r.name].claim,
             "not_shown": EXPERIMENTS[r.name].not_shown, "result": r,
             "seconds": seconds.get(r.name, 0.0)} for r in results]


def render_markdown(sections: list[dict]) -> str:
    lines = [f"# {TITLE}", "", INTRO, "", "| experiment | verdict | seconds | claim |",
             "|---|---|---|---|"]
    lines += [f"| [{s['name']}](#{s['name']}) | {s['result'].verdict} | {s['seconds']:.1f} | "
              f"{s['claim']} |" for s in sections]
    for s in sections:
        r: Result = s["result"]
        lines += ["", f"## {s['name']}", "", f"**Claim.** {s['claim']}", "",
                  f"**{r.verdict}.** {r.check}", ""]
        if r.headers:
            lines.append("| " + " | ".join(r.headers) + " |")
            lines.append("|" + "---|" * len(r.headers))
            lines += ["| " + " | ".join(fmt_cell(c).replace("|", "\\|") for c in row) + " |"
                      for row in r.rows]
            lines.append("")
        lines += [f"![{s['name']}]({p.name})" for p in r.figures]
        lines += [f"- {note}" for note in r.notes]
        lines += ["", f"*What it does not show:* {s['not_shown']}"]
    return "\n".join(lines) + "\n"


def _inline(text: str) -> str:
    return re.sub(r"`([^`]*)`", r"<code>\1</code>", html.escape(text))


def _embed(path: Path) -> str:
    if path.suffix == ".svg":
        svg = path.read_text(encoding="utf-8")
        return "<figure>" + svg[svg.index("<svg"):] + "</figure>"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<figure><img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}"></figure>'


def render_html(sections: list[dict]) -> str:
    body = [f"<h1>{html.escape(TITLE)}</h1>", f"<p>{_inline(INTRO)}</p>", "<table><thead><tr>"
            "<th>experiment</th><th>verdict</th><th>seconds</th><th>claim</th></tr></thead><tbody>"]
    body += [f'<tr><td><a href="#{s["name"]}">{s["name"]}</a></td><td class="{s["result"].verdict}">'
             f'{s["result"].verdict}</td><td>{s["seconds"]:.1f}</td><td>{_inline(s["claim"])}</td></tr>'
             for s in sections]
    body.append("</tbody></table>")
    for s in sections:
        r: Result = s["result"]
        body += [f'<h2 id="{s["name"]}">{s["name"]}</h2>',
                 f"<p><b>Claim.</b> {_inline(s['claim'])}</p>",
                 f'<p><b class="{r.verdict}">{r.verdict}.</b> {_inline(r.check)}</p>']
        if r.headers:
            head = "".join(f"<th>{html.escape(h)}</th>" for h in r.headers)
            rows = "".join("<tr>" + "".join(f"<td>{html.escape(fmt_cell(c))}</td>" for c in row)
                           + "</tr>" for row in r.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        body += [_embed(p) for p in r.figures]
        if r.notes:
            body.append("<ul>" + "".join(f"<li>{_inline(n)}</li>" for n in r.notes) + "</ul>")
        body.append(f"<p><i>What it does not show:</i> {_inline(s['not_shown'])}</p>")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;line-height:1.4}"
             "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;"
             "padding:3px 8px}td{text-align:right}td:first-child{text-align:left}"
             "img,svg{max-width:100%;height:auto}.PASS{color:#137333}.FAIL{color:#c5221f}"
             ".SKIPPED{color:#777}")
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(TITLE)}'
            f"</title><style>{style}</style></head><body>\n" + "\n".join(body)
            + "\n</body></html>\n")


def write_report(results: list[Result], out: Path, seconds: dict[str, float]) -> Path:
    """Write out/report.md and out/report.html; return the Markdown path."""
    sections = _sections(results, seconds)
    md = out / "report.md"
    md.write_text(render_markdown(sections), encoding="utf-8")
    (out / "report.html").write_text(render_html(sections), encoding="utf-8")
    return md
