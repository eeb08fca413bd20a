"""SentencePiece's trainer against the size of its sample: for each byte bound, the lines
and bytes `nmt.data.subwords.training_sample` feeds it, its seconds and peak RSS (its own
process), and the pieces per line of the trained model on the validation split
(docs/experiments/2026-12-05-sentencepiece-sample.md).

FOLDER is an imported corpus's pair folder (train.SRC/train.TGT, val.SRC/val.TGT); one
joint unigram model of --vocab pieces per bound, as the Multi30k recipes train.

Usage: python benchmarks/sentencepiece_sample.py FOLDER --pair de-en
       [--caps 16 32 64 128 256] [--vocab 4000]
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one(folder: Path, langs: list[str], cap_mib: int, vocab: int) -> dict:
    import sentencepiece as spm

    sys.path.insert(0, str(ROOT))
    from nmt.data.subwords import training_sample

    files = [folder / f"train.{lang}" for lang in langs]
    fed = [0, 0]

    def lines():
        for line in training_sample(files, sentences=10**9, size=cap_mib << 20):
            fed[0], fed[1] = fed[0] + 1, fed[1] + len(line.encode()) + 1
            yield line

    model, start = io.BytesIO(), time.perf_counter()
    spm.SentencePieceTrainer.train(
        sentence_iterator=lines(), model_writer=model, vocab_size=vocab, model_type="unigram",
        character_coverage=1.0, pad_id=0, unk_id=1, bos_id=2, eos_id=3,
        hard_vocab_limit=False, input_sentence_size=10**9, shuffle_input_sentence=True,
        minloglevel=2, num_threads=2)
    seconds = time.perf_counter() - start
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    val = [line.rstrip("\n") for lang in langs
           for line in open(folder / f"val.{lang}", encoding="utf-8")]
    return {"cap_mib": cap_mib, "lines": fed[0], "mib": fed[1] / 2**20, "seconds": seconds,
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "val_pieces_per_line": sum(map(len, sp.encode(val))) / len(val)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--pair", default="de-en")
    parser.add_argument("--caps", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    parser.add_argument("--vocab", type=int, default=4000)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child's bound
    args = parser.parse_args()
    langs = args.pair.split("-")
    if not all((args.folder / f"{s}.{lang}").is_file() for s in ("train", "val")
               for lang in langs):
        sys.exit(f"sentencepiece_sample: {args.folder} has no train/val .{langs[0]} and "
                 f".{langs[1]} files: pass an imported corpus's pair folder")
    if args.one:
        print(json.dumps(one(args.folder, langs, args.one, args.vocab)))
        return
    print("| bound MiB | lines | MiB fed | seconds | peak RSS MiB | val pieces/line |")
    print("|---|---|---|---|---|---|")
    for cap in args.caps:  # each in its own process: its peak is its own
        out = subprocess.run([sys.executable, __file__, str(args.folder), "--pair", args.pair,
                              "--vocab", str(args.vocab), "--one", str(cap)],
                             capture_output=True, text=True, check=True).stdout
        r = json.loads(out.splitlines()[-1])
        print(f"| {cap} | {r['lines']:,} | {r['mib']:.0f} | {r['seconds']:.1f} | "
              f"{r['peak_mib']:.0f} | {r['val_pieces_per_line']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
