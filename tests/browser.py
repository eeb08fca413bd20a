"""The browser the explorer tests (and the README screenshot) use: Debian's chromium, driven by
Playwright for Python (no browser download). Without either, the browser tests skip."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ENABLE = ("browser tests need Debian's chromium and Playwright: apt-get install -y chromium && "
          ".venv/bin/pip install -e '.[dev]'")


def chromium() -> str | None:
    """Path of the system chromium, if there is one."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def open_page(html: Path | str, width: int = 1400, height: int = 900,
              ready: str = "#panels .panel") -> Iterator[tuple]:
    """(page, errors): the page loaded from `html` (a file, or an http URL such as a served
    page), once `ready` matches; `errors` collects console errors and uncaught exceptions.
    Skips the calling test when no browser can be started."""
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
            url = str(html)
            page.goto(url if url.startswith("http") else Path(html).resolve().as_uri())
            page.wait_for_selector(ready)
            yield page, errors
        finally:
            browser.close()


def screenshot(page, path: Path, sentence: int = 0, word: int = 1) -> Path:
    """Show sentence position `sentence`, point at its target word `word` in the first panel
    and save the part of the page with the panels as a PNG."""
    page.select_option("#sentence-list", str(sentence))
    page.hover(f'.panel[data-panel="0"] th.tgt[data-row="{word}"]')
    return save_panels(page, path)


def save_panels(page, path: Path) -> Path:
    """Save the part of the page down to the panels' bottom as a PNG."""
    box = page.evaluate("""() => { const r = document.getElementById('panels').getBoundingClientRect();
        return {width: Math.ceil(Math.max(r.right, document.body.scrollWidth)) + 16,
                height: Math.ceil(r.bottom + window.scrollY) + 16}; }""")
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), clip={"x": 0, "y": 0, **box}, full_page=True)
    return path
