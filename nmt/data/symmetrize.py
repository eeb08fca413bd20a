"""Symmetrising two directional word alignments (Och & Ney 2003; Koehn et al. 2003).

Both inputs are sets of ``(i, j)`` links in the *forward* order (source word i, target
word j): `forward` from the source->target model, `backward` from the target->source
model with its links already flipped (`flip_links`). The heuristics are Moses' (Koehn's
pseudo-code, statmt.org/moses "Word Alignment"):

- intersection: F ∩ B (high precision); union: F ∪ B (high recall);
- grow-diag: start from F ∩ B; repeatedly add a link of F ∪ B that neighbours a link
  already in the alignment (8-neighbourhood: left, right, up, down and the diagonals)
  when its source word *or* its target word is still unaligned, until nothing is added;
- grow-diag-final: grow-diag, then FINAL(F), FINAL(B): add any remaining link whose
  source *or* target word is still unaligned;
- grow-diag-final-and: the same, but FINAL adds a link only when its source word *and*
  its target word are both unaligned.

Iteration order follows the pseudo-code (target word j outer, source word i inner,
neighbours in `NEIGHBOURS` order; a link added in a pass can seed more in that pass),
so results are deterministic.

One soft heuristic works on the two directions' *matrices* instead of their links:

- agreement (Liang et al. 2006, "alignment by agreement", posterior decoding): link
  (i, j) when the geometric mean of the two directions' weights, sqrt(F[j, i] B[j, i]),
  is at least a threshold. A pair both models put mass on survives; many-to-one pairs
  ("in front of" -> one word) survive too, which argmax-based links cannot give.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from nmt.core.errors import NMTError
from nmt.data.links import Link

# The agreement threshold, chosen on validation gold (synthetic validation and the
# Hansards development prefix): docs/experiments/2026-11-30-choosing-the-defaults.md.
DEFAULT_AGREEMENT = 0.2
# (d_target, d_source) offsets, in the pseudo-code's order: edges first, then diagonals
NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def flip_links(links: Iterable[Link]) -> set[Link]:
    """Links of the reverse direction, (target, source), into the forward (source, target)."""
    return {(j, i) for i, j in links}


class _Alignment:
    """A growing link set that knows which source and target words are aligned."""

    def __init__(self, links: Iterable[Link]):
        self.links: set[Link] = set()
        self.src: set[int] = set()
        self.tgt: set[int] = set()
        for link in links:
            self.add(link)

    def add(self, link: Link) -> None:
        self.links.add(link)
        self.src.add(link[0])
        self.tgt.add(link[1])

    def either_free(self, link: Link) -> bool:
        return link[0] not in self.src or link[1] not in self.tgt

    def both_free(self, link: Link) -> bool:
        return link[0] not in self.src and link[1] not in self.tgt


def _cells(src_len: int, tgt_len: int):
    """Every (i, j) in the pseudo-code's order: target word outer, source word inner."""
    return ((i, j) for j in range(tgt_len) for i in range(src_len))


def grow_diag(alignment: _Alignment, union: set[Link], src_len: int, tgt_len: int) -> None:
    """GROW-DIAG: add neighbours from `union` with an unaligned word until none is added."""
    added = True
    while added:
        added = False
        for i, j in _cells(src_len, tgt_len):
            if (i, j) not in alignment.links:
                continue
            for dj, di in NEIGHBOURS:
                new = (i + di, j + dj)
                if new in union and new not in alignment.links and alignment.either_free(new):
                    alignment.add(new)
                    added = True


def final(alignment: _Alignment, links: set[Link], src_len: int, tgt_len: int,
          both: bool) -> None:
    """FINAL(a) (`both`: FINAL-AND): add links of `links` whose words are unaligned."""
    for cell in _cells(src_len, tgt_len):
        if cell in links and cell not in alignment.links and (
                alignment.both_free(cell) if both else alignment.either_free(cell)):
            alignment.add(cell)


def _grow(final_and: bool | None) -> Callable[[set[Link], set[Link], int, int], set[Link]]:
    """grow-diag, then (unless `final_and` is None) FINAL(F), FINAL(B); FINAL-AND when
    `final_and`."""
    def heuristic(f: set[Link], b: set[Link], src_len: int, tgt_len: int) -> set[Link]:
        alignment = _Alignment(f & b)
        grow_diag(alignment, f | b, src_len, tgt_len)
        if final_and is not None:
            final(alignment, f, src_len, tgt_len, final_and)
            final(alignment, b, src_len, tgt_len, final_and)
        return alignment.links
    return heuristic


# The symmetrisation heuristics on two directions' links, by name: the one list of them
# (the config, the CLI, the server and the page take their names from here).
HEURISTICS: dict[str, Callable[[set[Link], set[Link], int, int], set[Link]]] = {
    "intersection": lambda f, b, src_len, tgt_len: f & b,
    "union": lambda f, b, src_len, tgt_len: f | b,
    "grow-diag": _grow(None),
    "grow-diag-final": _grow(False),
    "grow-diag-final-and": _grow(True),
}
DEFAULT_HEURISTIC = "grow-diag-final-and"  # Koehn et al. 2003's choice, Moses' default


def symmetrize(forward: Iterable[Link], backward: Iterable[Link], src_len: int,
               tgt_len: int, heuristic: str = DEFAULT_HEURISTIC) -> set[Link]:
    """One sentence's symmetrised links (source, target) from the two directions' links,
    both in forward order; `src_len`/`tgt_len` are the sentence's lengths in words."""
    if heuristic not in HEURISTICS:
        raise NMTError(f"unknown symmetrisation {heuristic!r}; use one of {', '.join(HEURISTICS)}")
    f, b = set(forward), set(backward)
    outside = [(i, j) for i, j in f | b if not (0 <= i < src_len and 0 <= j < tgt_len)]
    if outside:
        raise NMTError(f"link {outside[0]} is outside a {src_len} x {tgt_len} sentence pair")
    return HEURISTICS[heuristic](f, b, src_len, tgt_len)


def agreement(forward, backward, threshold: float = DEFAULT_AGREEMENT) -> tuple[Any, set[Link]]:
    """The geometric mean of two (T, S) word maps in forward order (rows of `forward` and
    columns of `backward` sum to one) and its links (source i, target j) at >= threshold."""
    import numpy as np  # start-up: the CLI lists the heuristics from here without numpy

    if not 0 < threshold <= 1:
        raise NMTError(f"--agreement-threshold {threshold}: use a value in (0, 1]")
    f, b = np.asarray(forward, dtype=np.float64), np.asarray(backward, dtype=np.float64)
    if f.shape != b.shape:
        raise ValueError(f"the two directions' maps differ in shape: {f.shape} and {b.shape}")
    mean = np.sqrt(np.clip(f, 0, None) * np.clip(b, 0, None))
    tgt, src = np.nonzero(mean >= threshold)
    return mean, {(int(i), int(j)) for j, i in zip(tgt, src)}


# The soft heuristics, on the two directions' maps rather than their links, by name.
SOFT: dict[str, Callable[..., tuple[Any, set[Link]]]] = {"agreement": agreement}
AGREEMENT = next(iter(SOFT))
SYMMETRIZATIONS = (*HEURISTICS, *SOFT)  # every name `--symmetrize` accepts
