"""The decoding engines and their int8 settings, by name (docs/deploy.md)."""

from __future__ import annotations

# The engines and the int8 settings, by name: the CLI's choices and nmt.decoding's checks.
ENGINES = ("pytorch", "ctranslate2")
QUANTIZE = ("float32", "int8_float32", "int8")  # what a CPU build of CTranslate2 runs
EXPORTABLE = ("transformer",)  # the families CTranslate2 runs
# The most steps (EOS included) any search takes, whatever decode.max_len_ratio and
# decode.max_len_offset ask: the rows of the exported Transformer's position table
# (nmt.decoding.export.POSITIONS), so both engines hold every sentence to one limit.
MAX_STEPS = 2048
