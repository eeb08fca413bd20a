"""`nmt explore`: one self-contained HTML page (inline CSS, JS and data; no network)."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from nmt.core.errors import NMTError
from nmt.core.rundir import replace_text
from nmt.explore.payload import build_payload
from nmt.explore.sources import find_sources


@dataclass
class Explorer:
    """What `build_explorer` wrote."""

    path: Path
    bytes: int
    sentences: int
    panels: list[str]
    gold: Path | None
    notes: list[str]


def asset(name: str) -> str:
    return (files("nmt.explore") / name).read_text(encoding="utf-8")


def skeleton(picker: bool = True) -> str:
    """The elements explorer.js draws into (nmt serve's page has them too; without
    `picker` the sentence picker is there but hidden)."""
    hidden = "" if picker else " hidden"
    return (
        f"<nav id=\"picker\" aria-label=\"sentence picker\"{hidden}>"
        "<button id=\"prev\" title=\"previous sentence (←)\">◀</button>"
        "<button id=\"next\" title=\"next sentence (→)\">▶</button>"
        "<input id=\"search\" type=\"search\" placeholder=\"search source or target words\">"
        "<select id=\"sentence-list\" aria-label=\"sentence\"></select>"
        "<span id=\"position\"></span></nav>\n"
        "<section id=\"sentence\"></section>\n"
        "<section id=\"controls\"><label><input type=\"checkbox\" id=\"diff-on\"> difference"
        "</label> <select id=\"diff-a\" aria-label=\"panel A\"></select> − "
        "<select id=\"diff-b\" aria-label=\"panel B\"></select>"
        "<span id=\"legend\"></span><span id=\"status\" aria-live=\"polite\"></span></section>\n"
        "<main id=\"panels\"></main>\n<footer id=\"notes\"></footer>\n"
    )


def render_page(payload: dict) -> str:
    """The page: markup skeleton, the CSS and JS assets, and the data as inline JSON
    (every "<" escaped, so no sentence can close the script element)."""
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    title = html.escape(payload["title"])
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{title}</title><style>{asset('explorer.css')}</style></head><body>\n"
        f"<header><h1>{title}</h1><p id=\"summary\"></p></header>\n"
        f"{skeleton()}"
        f"<script id=\"nmt-data\" type=\"application/json\">{data}</script>\n"
        f"<script>{asset('explorer.js')}</script>\n</body></html>\n"
    )


def build_explorer(runs: list[Path], out: Path, split: str | None = None,
                   align_dirs: list[Path] = (), gold: Path | None = None,
                   one_based: bool = False, title: str | None = None) -> Explorer:
    """Write the explorer of the runs' (and align folders') record sets to `out`."""
    out = Path(out)
    if out.is_dir():
        raise NMTError(f"--out {out}: is a folder; pass a file name such as {out}/explore.html")
    sources = find_sources(list(runs), split, list(align_dirs), gold, one_based)
    title = title or f"nmt explore: {sources.split or 'alignments'}"
    payload = build_payload(sources, title)
    text = render_page(payload)
    out.parent.mkdir(parents=True, exist_ok=True)
    replace_text(out, text)
    return Explorer(path=out, bytes=out.stat().st_size, sentences=len(payload["sentences"]),
                    panels=[p["title"] for p in payload["panels"]],
                    gold=sources.gold_path if sources.gold else None, notes=sources.notes)
