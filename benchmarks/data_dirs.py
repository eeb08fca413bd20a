"""Where the benchmarks find data that is not in the checkout: a command-line option,
else an environment variable; never a path beside the checkout. A folder that is not
given, does not exist or lacks its files ends the benchmark with one line saying which
option and variable name it and what it must hold."""

from __future__ import annotations

import os
import sys
from pathlib import Path

MULTI30K_ENV = "NMT_MULTI30K_DIR"  # the raw Multi30k files: {split}.{lang}.gz
ALIGN_GOLD_ENV = "NMT_ALIGN_GOLD_DIR"  # hansards.en-fr and hansards.en-fr.gold
ALIGN_GOLD_FILES = ("hansards.en-fr", "hansards.en-fr.gold")


def data_dir(given: Path | None, option: str, env: str, holds: str,
             files: tuple[str, ...] = (), also: str = "") -> Path:
    """`given` (the option's value) or `$env`, checked to be a folder with `files`."""
    where = f"pass {option} DIR or set {env}=DIR"
    if given is None and os.environ.get(env):
        given = Path(os.environ[env])
    if given is None:
        sys.exit(f"error: no data folder: {where} (a folder holding {holds}){also}")
    if not given.is_dir():
        sys.exit(f"error: {given}: no such folder; {where} (a folder holding {holds})")
    missing = [name for name in files if not (given / name).is_file()]
    if missing:
        sys.exit(f"error: {given} has no {', '.join(missing)}; {where} "
                 f"(a folder holding {holds})")
    return given


def align_gold_dir(given: Path | None, also: str = "") -> Path:
    """The Hansards en-fr gold folder (`--gold-dir` / NMT_ALIGN_GOLD_DIR)."""
    return data_dir(given, "--gold-dir", ALIGN_GOLD_ENV,
                    "hansards.en-fr and hansards.en-fr.gold", ALIGN_GOLD_FILES, also)


def gold_dir_option(parser) -> None:
    parser.add_argument("--gold-dir", type=Path, default=None,
                        help=f"folder with hansards.en-fr and hansards.en-fr.gold "
                             f"(default: ${ALIGN_GOLD_ENV})")
