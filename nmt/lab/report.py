"""`nmt lab all`'s report: report.md beside the figures, and a self-contained report.html
(PNG figures embedded as base64, SVG inline) that opens without the folder."""

from __future__ import annotations

from pathlib import Path

from nmt.core.document import Block, render_html, render_markdown
from nmt.core.rundir import replace_text
from nmt.lab.base import Result, fmt_cell

TITLE = "nmt lab: the attention essays' claims, run and checked"
INTRO = ("Each experiment states a claim, measures it with the project's own attention code "
         "(plain torch only where the essay's example is deliberately bare), draws a figure "
         "and checks the property; the check's numbers are in the verdict line. "
         "Re-run one with `nmt lab run NAME`.")


def _sections(results: list[Result], seconds: dict[str, float], experiments: dict
              ) -> list[dict]:
    """One dict per experiment with everything both renderings need (`experiments`: the
    registry's entries by name, each with its `claim` and what it has `not_shown`)."""

    return [{"name": r.name, "claim": experiments[r.name].claim,
             "not_shown": experiments[r.name].not_shown, "result": r,
             "seconds": seconds.get(r.name, 0.0)} for r in results]


def blocks(sections: list[dict]) -> list[Block]:
    """The report as document blocks: a summary table, then one section per experiment."""
    out: list[Block] = [("h1", TITLE), ("p", INTRO), ("table", ["experiment", "verdict", "seconds", "claim"],
                        [[s["name"], s["result"].verdict, f"{s['seconds']:.1f}", s["claim"]]
                         for s in sections])]
    for s in sections:
        r: Result = s["result"]
        out += [("h2", s["name"], s["name"]), ("p", f"Claim. {s['claim']}"),
                ("p", f"{r.verdict}. {r.check}")]
        if r.headers:
            out.append(("table", list(r.headers), [[fmt_cell(c) for c in row] for row in r.rows]))
        out += [("img", p, s["name"]) for p in r.figures]
        if r.notes:
            out.append(("list", list(r.notes)))
        out.append(("p", f"What it does not show: {s['not_shown']}"))
    return out


def write_report(results: list[Result], out: Path, seconds: dict[str, float],
                 experiments: dict) -> Path:
    """Write out/report.md and out/report.html; return the Markdown path."""
    sections = _sections(results, seconds, experiments)
    md = out / "report.md"
    replace_text(md, render_markdown(blocks(sections)))
    replace_text(out / "report.html", render_html(blocks(sections), TITLE))
    return md
