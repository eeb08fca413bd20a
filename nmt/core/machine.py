"""The machine a figure was measured on: the first CPU's /proc/cpuinfo fields (Linux)."""

from __future__ import annotations

import contextlib
import platform
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


def cpu_fields(path: Path = CPUINFO) -> dict[str, str]:
    """The first CPU's fields ("model name", "flags", ...); empty where there is no file."""
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError, UnicodeDecodeError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_model(path: Path = CPUINFO) -> str:
    """The CPU's model name, else what the platform module says."""
    return cpu_fields(path).get("model name") or platform.processor() or platform.machine()
