"""`nmt align` and `nmt compare` (registered on the main app)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    pass
