"""The page `nmt serve` answers at /: nmt explore's skeleton, CSS and renderer (explorer.js)
inline, plus a form and serve.js, which asks the JSON API and hands each answer to the
renderer (`window.nmtExplorer.show`). Nothing is fetched from elsewhere."""

from __future__ import annotations

from importlib.resources import files

from nmt.explore.page import asset, skeleton
from nmt.serve.runs import MAX_BEAM, MAX_CHARS

CAVEAT = ("Attention is not explanation: these matrices show where each model looked while "
          "it translated, not why it chose its words (Jain & Wallace 2019; Wiegreffe & "
          "Pinter 2019). Saliency is one more view of the same models, not the answer.")


def own(name: str) -> str:
    return (files("nmt.serve") / name).read_text(encoding="utf-8")


def form() -> str:
    return (
        "<form id=\"ask\" autocomplete=\"off\">"
        "<label class=\"wide\">source <textarea id=\"source\" rows=\"2\" "
        f"maxlength=\"{MAX_CHARS}\" placeholder=\"a sentence in the runs' source language\">"
        "</textarea></label>"
        "<label class=\"wide\">target <input id=\"target\" type=\"text\" "
        f"maxlength=\"{MAX_CHARS}\" placeholder=\"optional: every run aligned on these "
        "words (forced mode); empty: each run on its own translation\"></label>"
        "<div class=\"row\">"
        f"<label>beam <input id=\"beam\" type=\"number\" min=\"1\" max=\"{MAX_BEAM}\" "
        "placeholder=\"run's\"></label>"
        f"<label>n-best <input id=\"n-best\" type=\"number\" min=\"1\" max=\"{MAX_BEAM}\" "
        "value=\"1\"></label>"
        "<label>method <select id=\"method\"><option value=\"attention\">attention</option>"
        "<option value=\"saliency\">saliency</option></select></label>"
        "<label id=\"sym-box\" hidden>symmetrised <select id=\"symmetrize\">"
        "<option value=\"\">off</option><option value=\"agreement\">agreement</option>"
        "<option value=\"grow-diag-final-and\">grow-diag-final-and</option>"
        "<option value=\"intersection\">intersection</option></select></label>"
        "<button id=\"go\" type=\"submit\">translate</button></div></form>\n"
        "<p id=\"message\" role=\"status\" aria-live=\"polite\"></p>\n"
    )


def render_page() -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>nmt serve</title><style>{asset('explorer.css')}{own('serve.css')}</style>"
        "</head><body>\n"
        "<header><h1>nmt serve</h1>"
        f"<p id=\"caveat\">{CAVEAT}</p><p id=\"runs-line\"></p></header>\n"
        f"{form()}<p id=\"summary\"></p>\n{skeleton(picker=False)}"
        f"<script>{asset('explorer.js')}</script>\n<script>{own('serve.js')}</script>\n"
        "</body></html>\n"
    )
