"""The decoding engines' names, and the import order for CTranslate2. Where torch's OpenMP threads have run before
ctranslate2 is imported, CTranslate2 decoded at about half its speed on 2 threads (and
faster on 1 than on 2); imported first, it kept its speed (docs/deploy.md, "Import
order"). Entry points that will decode on CTranslate2 call this before torch loads."""

from __future__ import annotations

import sys

# The engines and the int8 settings, by name: the CLI's choices and nmt.decoding's checks.
ENGINES = ("pytorch", "ctranslate2")
QUANTIZE = ("float32", "int8_float32", "int8")  # what a CPU build of CTranslate2 runs
EXPORTABLE = ("transformer",)  # the families CTranslate2 runs


def import_before_torch(engine: str) -> bool:
    """Import ctranslate2 now when `engine` is "ctranslate2" and it is installed; True when
    it is loaded ahead of torch (False: not asked, not installed, or torch came first)."""
    if engine != "ctranslate2":
        return False
    first = "torch" not in sys.modules
    try:
        import ctranslate2  # noqa: F401  optional extra: [deploy], ahead of torch on purpose
    except ImportError:
        return False  # the engine says how to install it when it is built
    return first
