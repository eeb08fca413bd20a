"""The in-domain text of `make bench-align-domain`'s Hansards set: English-French segment
pairs of the Acts of the Parliament of Canada as passed, 2001 onward, from a checkout of
github.com/justicecanada/laws-lois-xml (Department of Justice Canada, Open Government
Licence - Canada). None is from the 36th Parliament, whose debates the Hansards gold holds.

Usage: python scripts/laws_corpus.py LAWS_CHECKOUT OUT_DIR   (a new folder: OUT_DIR/annual.en,
       .fr, written in a temporary folder beside it and renamed when whole)

Each English bill (`annual-statutes-lois-annuelles/en/YEAR/NAME_e.xml`) is read beside its
French one (`fr/YEAR/NAME_f.xml`). Text elements (`TEXT_TAGS`) are paired by their path from
the root, each step a tag and its count among same-tag siblings; definitions and bilingual
groups are left out (their order differs between the languages), and notes, labels and
footnotes are dropped from the text. Kept: 3 to 120 words a side, character lengths within
2.5 times of each other, the two sides different, each pair once, in file order.
"""

from __future__ import annotations

import re
import shutil
import signal
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

TEXT_TAGS = {"Text", "MarginalNote", "TitleText", "LongTitle", "ShortTitle"}
DROPPED = {"HistoricalNote", "FootnoteRef", "Footnote", "Label", "OriginatingRef"}
UNORDERED = ("Definition", "BilingualGroup")  # and every tag ending in En / Fr
WORDS, RATIO = (3, 120), 2.5


def text_of(element: ET.Element) -> str:
    """The element's text, dropped children left out (their tails kept), spaces collapsed."""
    parts: list[str] = []

    def walk(e: ET.Element) -> None:
        if e.tag in DROPPED:
            parts.append(e.tail or "")
            return
        parts.append(e.text or "")
        for child in e:
            walk(child)
        if e is not element:
            parts.append(e.tail or "")

    walk(element)
    return re.sub(r"\s+", " ", "".join(parts)).strip()


def segments(root: ET.Element) -> dict[tuple, str]:
    """Text of every paired element by its path from the root."""
    out: dict[tuple, str] = {}

    def walk(e: ET.Element, path: tuple, unordered: bool) -> None:
        seen: Counter = Counter()
        for child in e:
            if not isinstance(child.tag, str):
                continue
            seen[child.tag] += 1
            step = path + ((child.tag, seen[child.tag]),)
            skip = unordered or child.tag in UNORDERED or child.tag.endswith(("En", "Fr"))
            if child.tag in TEXT_TAGS and not skip:
                out[step] = text_of(child)
            if child.tag not in DROPPED:
                walk(child, step, skip)

    walk(root, (), False)
    return out


def parse(path: Path) -> ET.Element:
    return ET.fromstring(re.sub(rb"<!DOCTYPE[^>]*>", b"", path.read_bytes()))


def bills(checkout: Path) -> list[tuple[Path, Path]]:
    """(English, French) XML of every bill with both, in path order."""
    base = checkout / "annual-statutes-lois-annuelles"
    found = []
    for en in sorted((base / "en").glob("*/*"), key=lambda p: p.relative_to(base).as_posix()):
        m = re.fullmatch(r"(.*)_[eE]\.(xml|XML)", en.name)
        if not m:
            continue
        for name in (f"{m.group(1)}_{s}.{x}" for s in "fF" for x in ("xml", "XML")):
            fr = base / "fr" / en.parent.name / name
            if fr.is_file():
                found.append((en, fr))
    return found


def keep(en: str, fr: str) -> bool:
    (low, high), n_en, n_fr = WORDS, len(en.split()), len(fr.split())
    return (low <= n_en <= high and low <= n_fr <= high and en != fr
            and max(len(en), len(fr)) <= RATIO * min(len(en), len(fr)))


def write_pairs(pairs: list[tuple[Path, Path]], folder: Path) -> tuple[int, int]:
    """annual.en and annual.fr of the bills' kept pairs in `folder`; (pairs, unreadable bills)."""
    seen, skipped = set(), 0
    with open(folder / "annual.en", "w", encoding="utf-8") as fe, \
            open(folder / "annual.fr", "w", encoding="utf-8") as ff:
        for en_path, fr_path in pairs:
            try:
                en_segs, fr_segs = segments(parse(en_path)), segments(parse(fr_path))
            except ET.ParseError:
                skipped += 1
                continue
            for key, en in en_segs.items():
                fr = fr_segs.get(key)
                if fr is not None and keep(en, fr) and (en, fr) not in seen:
                    seen.add((en, fr))
                    fe.write(en + "\n")
                    ff.write(fr + "\n")
    return len(seen), skipped


def main(checkout: Path, out: Path) -> None:
    """Write `out` whole: both files in a temporary folder beside it, renamed to `out` in
    one step (an existing `out` with files is refused, not overwritten)."""
    pairs = bills(checkout)
    if not pairs:
        sys.exit(f"error: {checkout}: no annual-statutes-lois-annuelles/en/*/*_e.xml; pass a "
                 "checkout of github.com/justicecanada/laws-lois-xml")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        sys.exit(f"error: {out}: exists and is not an empty folder; remove it or name a new one")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        written, skipped = write_pairs(pairs, tmp)
        tmp.rename(out)  # atomic; fails if another process made `out` meanwhile
    except OSError as exc:
        sys.exit(f"error: {out}: {exc.strerror or exc}; nothing was written there")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone when renamed
    print(f"wrote {written} pairs of {len(pairs)} bills to {out}/annual.{{en,fr}}"
          + (f" ({skipped} unreadable bills left out)" if skipped else ""))


def _stop(signum, frame) -> None:
    sys.exit(128 + signum)  # SIGTERM unwinds like Ctrl-C: the temporary folder is removed


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _stop)
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    main(Path(sys.argv[1]), Path(sys.argv[2]))
