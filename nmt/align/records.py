"""One sentence pair's alignment: its attention weights, word matrix and links."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nmt.data.links import Link


@dataclass(eq=False)
class AlignmentRecord:
    """Attention of one sentence pair. ``weights`` (L, H, T, S) float32 has one row per entry of
    ``tgt_tokens`` and one column per entry of ``src_tokens`` (EOS included if it has a column);
    ``word_weights`` (T_word, S_word) matches ``tgt_words`` x ``src_words``; ``links`` are
    word-level (source, target) pairs; RNN families use L = H = 1."""

    index: int
    src_tokens: list[str]
    tgt_tokens: list[str]
    weights: np.ndarray
    src_words: list[str]
    tgt_words: list[str]
    word_weights: np.ndarray
    links: list[Link] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    # Gold words of another tokenisation (nmt.align.spans): {"src": [...], "tgt": [...]},
    # for each piece but EOS the words it covers; None: "▁" starts a word.
    word_of: dict[str, list[list[int]]] | None = None

    def __post_init__(self) -> None:
        self.weights = np.asarray(self.weights, dtype=np.float32)
        self.word_weights = np.asarray(self.word_weights, dtype=np.float32)
        self.links = [(int(i), int(j)) for i, j in self.links]
        shape = (len(self.tgt_tokens), len(self.src_tokens))
        if self.weights.ndim != 4 or self.weights.shape[2:] != shape:
            raise ValueError(f"record {self.index}: weights {self.weights.shape} != (L, H, T, S)")
        if self.word_weights.shape != (len(self.tgt_words), len(self.src_words)):
            raise ValueError(f"record {self.index}: word_weights shape {self.word_weights.shape} "
                             f"!= ({len(self.tgt_words)}, {len(self.src_words)})")
