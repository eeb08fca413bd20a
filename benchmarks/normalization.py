"""How many Multi30k sentences a SentencePiece normalisation rule changes.

Hypotheses are decoded from pieces, so they come out in the rule's normal form;
references are only NFC (`nmt.data.corpora.normalise`). A reference the rule
changes is one no hypothesis can match exactly. Reads the raw files {split}.{lang}.gz
of a folder given by --raw or NMT_MULTI30K_DIR:
    python benchmarks/normalization.py [--raw DIR] [--glob 'train*.gz']
"""

from __future__ import annotations

import argparse
from pathlib import Path

from data_dirs import MULTI30K_ENV, data_dir

RULES = ("nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf")


def apply(lines: list[str], rule: str) -> list[str]:
    import sentencepiece as spm

    norm = spm.SentencePieceNormalizer(rule_name=rule)
    return [x.replace("\u2581", " ").strip() for x in norm.normalize(lines)]


def changed(lines: list[str], rule: str) -> str:
    """Lines the rule changes; for test files also the BLEU of the rule's version of the
    references against the references (a perfect system seen through the rule)."""
    out = apply(lines, rule)
    n = sum(a != b for a, b in zip(lines, out))
    return n if rule == "nfkc" else f"{n} ({bleu(out, lines):.2f})"


def bleu(hyps: list[str], refs: list[str]) -> float:
    from nmt.decoding.evaluate import bleu_chrf

    return bleu_chrf(hyps, refs)["bleu"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", type=Path, default=None,
                        help=f"the raw Multi30k folder (default: ${MULTI30K_ENV})")
    parser.add_argument("--glob", default="test*.gz", help="raw files to read, e.g. 'train*.gz'")
    args = parser.parse_args()
    holds = "the raw Multi30k files {split}.{lang}.gz, e.g. test_2016_flickr.de.gz"
    raw = data_dir(args.raw, "--raw", MULTI30K_ENV, holds)
    paths = sorted(raw.glob(args.glob))
    if not paths:
        raise SystemExit(f"error: {raw} has no {args.glob} files; --raw / {MULTI30K_ENV} must "
                         f"name a folder holding {holds}")
    from nmt.data.corpora import normalise, read_lines

    print("Lines changed by each rule (BLEU of the changed references against the originals)")
    print("| file | lines | " + " | ".join(RULES) + " |")
    print("|---|---|" + "---|" * len(RULES))
    for path in paths:
        lines = [normalise(x) for x in read_lines(path)]
        counts = " | ".join(str(changed(lines, rule)) for rule in RULES)
        print(f"| {path.name} | {len(lines):,} | {counts} |")


if __name__ == "__main__":
    main()
