"""The `nmt serve` page in the browser the explorer tests use (tests/browser.py: Debian's
chromium driven by Playwright, no browser download): open the served page, ask a sentence,
photograph the answer. Used by tests/test_serve.py and scripts/serve_screenshot.py."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.browser import ENABLE, chromium


@contextmanager
def open_url(url: str, width: int = 1400, height: int = 900) -> Iterator[tuple]:
    """(page, errors): the served page at `url`, its run list loaded; `errors` collects
    console errors and uncaught exceptions. Skips the calling test without a browser."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(ENABLE)
    exe = chromium()
    if exe is None:
        pytest.skip(ENABLE)
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(url)
            page.wait_for_selector("body[data-ready='1']")
            yield page, errors
        finally:
            browser.close()


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
    box = page.evaluate("""() => { const r = document.getElementById('panels').getBoundingClientRect();
        return {width: Math.ceil(Math.max(r.right, document.body.scrollWidth)) + 16,
                height: Math.ceil(r.bottom + window.scrollY) + 16}; }""")
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), clip={"x": 0, "y": 0, **box}, full_page=True)
    return path
