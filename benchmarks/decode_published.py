"""The three ways to decode a published Transformer (docs/deploy.md, "Publish a model"),
side by side on one test split: nmt on PyTorch, CTranslate2 on the folder's `ctranslate2/`
export, and transformers' MarianMTModel.generate. Greedy and beam 5, 2 threads, batch 32;
sentences per second, BLEU and whether the greedy outputs are the same text.

    python benchmarks/decode_published.py MODEL_DIR --src test.de --ref test.en [--limit 1000]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import sacrebleu
import torch

from nmt.core.machine import cpu_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--ref", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sources = args.src.read_text(encoding="utf-8").splitlines()[:args.limit]
    refs = args.ref.read_text(encoding="utf-8").splitlines()[:args.limit]
    rows, greedy = [], {}
    for name, decode in ways(args.model, args.threads):
        for beam in (1, 5):
            tick = time.perf_counter()
            hyps = decode(sources, beam)
            seconds = time.perf_counter() - tick
            bleu = sacrebleu.corpus_bleu(hyps, [refs]).score
            rows.append((name, beam, len(sources) / seconds, bleu))
            if beam == 1:
                greedy[name] = hyps
    print(f"{args.model} on {cpu_model()}, {args.threads} "
          f"threads, {len(sources)} sentences")
    print("| engine | beam | sentences/s | BLEU |\n|---|---|---|---|")
    for name, beam, speed, bleu in rows:
        print(f"| {name} | {beam} | {speed:.1f} | {bleu:.2f} |")
    first = greedy["nmt (PyTorch)"]
    for name, hyps in greedy.items():
        same = sum(a == b for a, b in zip(first, hyps))
        print(f"greedy text equal to nmt's: {name}: {same}/{len(first)}")
    for alpha, same, total in beam_agreement(args.model, sources):
        print(f"beam 5, length penalty alpha {alpha} (ours GNMT's ((5+|y|)/6)^alpha, "
              f"transformers' |y|^alpha): the same text for {same}/{total}")


def beam_agreement(model: Path, sources: list[str]):
    """Beam 5 in both, at alpha 0 (no length penalty in either: defined alike) and 1."""
    import dataclasses

    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import nmt
    from nmt.decoding.translate import translate_ids

    ours = nmt.load(model)
    tokenizer = AutoTokenizer.from_pretrained(model)
    hf = AutoModelForSeq2SeqLM.from_pretrained(model).eval()
    src_ids = ours.vocab.encode_src(sources)
    for alpha in (0.0, 1.0):
        cfg = dataclasses.replace(ours.cfg.decode, length_penalty=alpha)
        mine = translate_ids(ours.module, ours.vocab, src_ids, cfg, beam=5)
        theirs = []
        for start in range(0, len(sources), 32):
            batch = tokenizer(sources[start:start + 32], return_tensors="pt", padding=True)
            with torch.no_grad():
                ids = hf.generate(**batch, num_beams=5, length_penalty=alpha, max_length=256)
            theirs += tokenizer.batch_decode(ids, skip_special_tokens=True)
        yield alpha, sum(a == b for a, b in zip(mine, theirs)), len(sources)


def ways(model: Path, threads: int):
    import nmt

    ours = nmt.load(model)
    yield "nmt (PyTorch)", lambda src, beam: [t.text for t in ours.translate(src, beam=beam)]
    if (model / "ctranslate2" / "model.bin").is_file():
        import ctranslate2

        translator = ctranslate2.Translator(str(model / "ctranslate2"), intra_threads=threads)

        def ct2(src, beam):
            pieces = [ours.vocab.src_pieces(ids) for ids in ours.vocab.encode_src(src)]
            out = translator.translate_batch(pieces, beam_size=beam, max_batch_size=32,
                                             max_decoding_length=256)
            return [ours.vocab.tgt.decode_pieces(r.hypotheses[0]) for r in out]

        yield "CTranslate2", ct2
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    hf = AutoModelForSeq2SeqLM.from_pretrained(model).eval()

    def generate(src, beam):
        out = []
        for start in range(0, len(src), 32):
            batch = tokenizer(src[start:start + 32], return_tensors="pt", padding=True)
            with torch.no_grad():
                ids = hf.generate(**batch, num_beams=beam, max_length=256)
            out += tokenizer.batch_decode(ids, skip_special_tokens=True)
        return out

    yield "transformers", generate


if __name__ == "__main__":
    main()
