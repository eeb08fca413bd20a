"""Word links in files: Pharaoh lines and gold alignments (Pharaoh / talp).

A link is ``(i, j)``: source index ``i``, target index ``j``, both 0-based (files may be
1-based: ``one_based``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nmt.core.errors import NMTError

Link = tuple[int, int]


_LINK_RE = re.compile(r"^(\d+)(?:-(\d+)(?:-([SsPp]))?|[p?](\d+))$")


@dataclass(frozen=True)
class GoldAlignment:
    """Gold links of one sentence pair; ``possible`` always contains ``sure`` (S ⊆ P)."""

    sure: frozenset[Link]
    possible: frozenset[Link]

    def __post_init__(self) -> None:
        if not self.sure <= self.possible:
            raise ValueError("GoldAlignment: every sure link must also be possible (S ⊆ P)")


def _parse_link(token: str) -> tuple[int, int, bool]:
    m = _LINK_RE.match(token)  # -> (i, j, is_sure); ValueError if malformed
    if m is None:
        raise ValueError(token)
    if m.group(4) is not None:
        return int(m.group(1)), int(m.group(4)), False
    return int(m.group(1)), int(m.group(2)), m.group(3) not in ("P", "p")


def read_gold(path: Path, one_based: bool = False) -> list[GoldAlignment]:
    """Read a gold alignment file, one line per sentence pair, links separated by spaces.

    Accepted links: Pharaoh ``i-j`` (sure), talp ``ipj`` / ``i?j`` (possible) and
    ``i-j-S`` / ``i-j-P``. An empty line is a sentence with no links. With ``one_based``
    every index is shifted down by 1.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise NMTError(f"{path}: gold alignment file not found; check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise NMTError(f"{path}: cannot read gold alignments ({exc}); need a UTF-8 text file")
    shift = 1 if one_based else 0
    gold: list[GoldAlignment] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        sure: set[Link] = set()
        possible: set[Link] = set()
        for token in line.split():
            try:
                i, j, is_sure = _parse_link(token)
            except ValueError:
                raise NMTError(
                    f"{path}:{lineno}: malformed link {token!r}; expected 'i-j' (sure), "
                    "'ipj' (possible) or 'i-j-S'/'i-j-P'"
                ) from None
            i, j = i - shift, j - shift
            if i < 0 or j < 0:
                raise NMTError(
                    f"{path}:{lineno}: link {token!r} has index 0 but the file was read as "
                    "1-based; drop --one-based if the file is 0-based"
                )
            (sure if is_sure else possible).add((i, j))
        gold.append(GoldAlignment(frozenset(sure), frozenset(possible | sure)))
    return gold


def check_links_in_range(
    gold: Sequence[GoldAlignment],
    src_lens: Sequence[int],
    tgt_lens: Sequence[int],
    path: Path,
) -> None:
    """Raise NMTError if the gold file has the wrong number of lines or a link leaves its
    sentence (needs ``0 <= i < src_len`` and ``0 <= j < tgt_len``; lengths in words)."""
    if len(src_lens) != len(tgt_lens):
        raise ValueError(f"{len(src_lens)} source lengths but {len(tgt_lens)} target lengths")
    if len(gold) != len(src_lens):
        raise NMTError(
            f"{path}: gold file has {len(gold)} lines but the test set has {len(src_lens)} "
            "sentences; it needs exactly one line per sentence pair"
        )
    for lineno, (g, s_len, t_len) in enumerate(zip(gold, src_lens, tgt_lens), start=1):
        for i, j in sorted(g.possible):
            if i >= s_len or j >= t_len:
                edge = i == s_len or j == t_len
                hint = "; is the file 1-based (then add --one-based)?" if edge else ""
                raise NMTError(
                    f"{path}:{lineno}: link {i}-{j} (0-based) is outside the sentence pair with "
                    f"{s_len} source and {t_len} target words{hint}"
                )


def format_pharaoh(links: Iterable[Link]) -> str:
    """Format links as sorted, space-separated Pharaoh ``i-j`` (source-target) text."""
    return " ".join(f"{i}-{j}" for i, j in sorted(set(links)))


def parse_pharaoh(line: str) -> set[Link]:
    """Parse one line of ``i-j`` links (0-based) into a set of ``(i, j)``; NMTError if malformed."""
    links: set[Link] = set()
    for token in line.split():
        try:
            i, j, _ = _parse_link(token)
        except ValueError:
            msg = f"malformed Pharaoh link {token!r} in {line.strip()!r}; use 'i-j'"
            raise NMTError(msg) from None
        links.add((i, j))
    return links


SCAN_BLOCK = 1 << 24  # bytes PharaohFile reads at a time while finding where lines start


class PharaohFile(Sequence):
    """A Pharaoh file's links, one set per line, parsed when a line is read: the file is
    scanned once for where its lines start (8 bytes a line) and a line is read from the
    file at its offset, so a corpus's links are never held whole; every file it opens is
    closed before the call returns."""

    def __init__(self, path: Path):
        import numpy as np  # start-up: the CLI imports this module, `nmt --help` no numpy

        self.path = Path(path)
        starts, size = [np.zeros(1, np.int64)], 0
        with open(self.path, "rb") as handle:
            while block := handle.read(SCAN_BLOCK):
                ends = np.flatnonzero(np.frombuffer(block, np.uint8) == ord("\n"))
                starts.append(ends + size + 1)
                size += len(block)
        self.starts = np.concatenate(starts)
        if self.starts[-1] != size:  # a last line without its newline
            self.starts = np.append(self.starts, size)

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = range(len(self))[i]  # negative indices; IndexError past the end
        with open(self.path, "rb") as handle:  # opened per read: nothing is left open
            handle.seek(int(self.starts[i]))
            line = handle.read(int(self.starts[i + 1] - self.starts[i])).decode("utf-8")
        try:
            return parse_pharaoh(line)
        except NMTError as exc:
            raise NMTError(f"{self.path}:{i + 1}: {exc}") from None
