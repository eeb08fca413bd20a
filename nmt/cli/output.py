"""Formatting for the terminal: translations as text lines or JSON lines."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TextIO

from nmt.data.links import format_pharaoh


def write_translations(chunks: Iterable[list], out: TextIO, n_best: int = 1,
                       fmt: str = "text", alignments: bool = False) -> None:
    """Write `nmt.decoding.api.Translation`s chunk by chunk, flushed after every chunk.

    text: one line per sentence (`text`, or `text<TAB>links` with `alignments`), or with
    n_best > 1 `n_best` lines `text<TAB>score[<TAB>links]` per sentence, padded with empty
    ones; links are word-level Pharaoh `source-target`, 0-based. jsonl: one JSON object
    per input line (text, score, pieces, links when asked, n_best on every line when
    n_best > 1).
    """

    for chunk in chunks:
        for t in chunk:
            if fmt == "jsonl":
                out.write(json.dumps(t.as_dict(n_best > 1), ensure_ascii=False) + "\n")
                continue
            hyps = t.hypotheses if n_best > 1 else t.hypotheses[:1]
            for h in hyps + [None] * (n_best - len(hyps)):
                fields = [h.text if h else ""]
                if n_best > 1:
                    fields.append(f"{h.score:.4f}" if h else "0.0000")
                if alignments:
                    fields.append(format_pharaoh(h.links) if h else "")
                out.write("\t".join(fields) + "\n")
        out.flush()
