"""The `nmt serve` page in the browser the explorer tests use (tests/browser.py: Debian's
chromium driven by Playwright, no browser download): open the served page, ask a sentence,
photograph the answer. Used by tests/test_serve.py and scripts/serve_screenshot.py."""

from __future__ import annotations

from pathlib import Path

from tests.browser import open_page, save_panels


def open_url(url: str, width: int = 1400, height: int = 900):
    """(page, errors): the served page at `url`, once its run list is loaded
    (tests/browser.py's `open_page`)."""
    return open_page(url, width, height, ready="body[data-ready='1']")


def ask(page, source: str, target: str = "", beam: str = "", n_best: str = "1",
        method: str = "attention") -> None:
    """Fill the form, send it and wait until every panel of the answer is drawn."""
    page.fill("#source", source)
    page.fill("#target", target)
    page.fill("#beam", beam)
    page.fill("#n-best", n_best)
    page.eval_on_selector("#method", "(e, v) => { e.value = v; }", method)  # no re-align
    page.evaluate("() => { document.getElementById('panels').replaceChildren(); }")
    page.click("#go")
    page.wait_for_selector("#panels .panel")
    page.wait_for_function("() => !document.getElementById('go').disabled")


def screenshot(page, path: Path, panel: int = 0, word: int = 1) -> Path:
    """Point at target word `word` of panel `panel` and save the form and the panels."""
    page.hover(f'.panel[data-panel="{panel}"] th.tgt[data-row="{word}"]')
    return save_panels(page, path)
