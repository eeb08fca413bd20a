"""`nmt serve`: a live attention playground over a fixed set of trained runs (docs/serve.md).

runs    the runs, loaded once at start, and what a request asks of them (translate, align)
        as JSON-ready dicts; the input limits
app     the FastAPI app: the JSON API (/api/..., documented at /docs), the page (/), the
        decode slots (a bounded number at once, a bounded wait)
guard   its outermost middleware: request ids, the cap on requests in flight and on the
        body, one JSON shape for every error, never a traceback
page    the page: nmt explore's renderer (explorer.js, explorer.css) plus serve.js/serve.css

FastAPI and uvicorn are optional: `pip install -e '.[serve]'`.
"""

from __future__ import annotations

import importlib.util

from nmt.core.errors import NMTError

EXTRA = "pip install -e '.[serve]'"


def require() -> None:
    """One-line NMTError unless FastAPI and uvicorn are installed."""
    missing = [name for name in ("fastapi", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        raise NMTError(f"nmt serve needs {' and '.join(missing)}, which are not installed: "
                       f"{EXTRA}")
