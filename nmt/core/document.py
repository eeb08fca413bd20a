"""One small document model for the reports (`nmt compare`, `nmt lab all`): a list of
blocks rendered as Markdown beside the figures, or as one self-contained HTML page.

Blocks: ("h1" | "h2", text[, anchor]) | ("p", text) | ("list", items) |
("table", head, rows) | ("img", path, alt). Text may hold `code` spans.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

Block = tuple

STYLE = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto;line-height:1.4}"
         "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;"
         "padding:4px 8px}td{text-align:right}td:first-child,td:nth-child(2){text-align:left}"
         "img,svg{max-width:100%;height:auto}")


def _cells(cells: list[str]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def render_markdown(blocks: list[Block]) -> str:
    lines: list[str] = []
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2"):
            lines += ["#" * int(kind[1]) + " " + block[1], ""]
        elif kind == "p":
            lines += [block[1], ""]
        elif kind == "list":
            lines += [f"- {item}" for item in block[1]] + [""]
        elif kind == "table":
            lines += [_cells(block[1]), "|" + "|".join("---" for _ in block[1]) + "|"]
            lines += [_cells(row) for row in block[2]] + [""]
        elif kind == "img":
            lines += [f"![{block[2]}]({Path(block[1]).name})", ""]
    return "\n".join(lines)


def inline(text: str) -> str:
    """HTML-escape and turn `code` spans into <code>."""
    return re.sub(r"`([^`]*)`", r"<code>\1</code>", html.escape(text))


def embed(path: Path, alt: str) -> str:
    """A figure inlined into the page: PNG as a base64 data URI, SVG as markup."""
    path = Path(path)
    if path.suffix == ".svg":
        svg = path.read_text(encoding="utf-8")
        return "<figure>" + svg[svg.index("<svg"):] + "</figure>"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></figure>'


def _html_block(block: Block) -> str:
    kind = block[0]
    if kind in ("h1", "h2"):
        anchor = f' id="{html.escape(block[2])}"' if len(block) > 2 else ""
        return f"<{kind}{anchor}>{inline(block[1])}</{kind}>"
    if kind == "p":
        return f"<p>{inline(block[1])}</p>"
    if kind == "list":
        return "<ul>" + "".join(f"<li>{inline(i)}</li>" for i in block[1]) + "</ul>"
    if kind == "table":
        head = "".join(f"<th>{html.escape(str(h))}</th>" for h in block[1])
        rows = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row)
                       + "</tr>" for row in block[2])
        return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
    if kind == "img":
        return embed(block[1], block[2])
    raise ValueError(f"unknown block kind {kind!r}")


def render_html(blocks: list[Block], title: str) -> str:
    """A standalone page: every figure inlined, no file references."""
    body = "\n".join(_html_block(block) for block in blocks)
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}'
            f"</title><style>{STYLE}</style></head><body>\n{body}\n</body></html>\n")
