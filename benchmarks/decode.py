"""Decoding on every engine (make bench-decode; docs/deploy.md): for each run, PyTorch in
float32 and what deploys it (a Transformer: CTranslate2 float32 and int8; a recurrent
family: PyTorch int8), each in its own process, one after the other, with the same
threads and batch, on the run's test split:

- sentences/s and target pieces/s (EOS counted), greedy and beam 5, after a warm-up batch;
- peak RSS of the process;
- BLEU/chrF (sacreBLEU) greedy and beam 5, and the share of greedy outputs identical to
  PyTorch float32's;
- with --guided RUN (a guided Transformer on a corpus with gold word alignments): the
  engine's links against PyTorch's (free mode, greedy, where the translations are the
  same), and the AER against the gold of both, forced on the references.

    python benchmarks/decode.py runs/bench-bleu/transformer_s1 runs/bench-bleu/bahdanau_s1 \\
        --guided runs/guided/transformer --threads 2 --batch 32

Writes <out>/results.json and <out>/decode.md, and prints the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEAMS = (1, 5)


def rows_for(family: str) -> list[tuple[str, str | None]]:
    if family == "transformer":
        return [("pytorch", None), ("pytorch", "int8"), ("ctranslate2", "float32"),
                ("ctranslate2", "int8")]
    return [("pytorch", None), ("pytorch", "int8")]


def measure(run: str, engine: str, quantize: str | None, threads: int, batch: int) -> dict:
    """One engine on one run, in this process (the caller starts a fresh one per row)."""
    import torch

    torch.set_num_threads(threads)
    import nmt
    from nmt.core.memory import peak_rss_mib
    from nmt.data.corpora import load_split
    from nmt.decoding import engines
    from nmt.decoding.api import Model
    from nmt.decoding.evaluate import bleu_chrf

    if engine == "pytorch" and quantize == "int8":  # every family, shipped or not: this
        model = nmt.load(run)                        # measurement decides which ship
        int8 = engines.PyTorchEngine(engines.quantize_int8(model.module), model.family)
        int8.quantize = "int8"
        model = Model(model.path, model.cfg, model.vocab, int8.module, model.checkpoint, int8)
    else:
        model = nmt.load(run, engine=engine, quantize=quantize)
    cfg = model.cfg
    decode = dataclasses.replace(cfg.decode, batch_size=batch)
    sources, refs = load_split(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair,
                               cfg.data.test)
    src_ids = model.vocab.encode_src(sources)
    model.engine.nbest(src_ids[:batch], decode, 1)  # warm-up: first calls allocate
    out = {"run": run, "family": cfg.model.family, "engine": engine,
           "quantize": quantize or "float32", "threads": threads, "batch": batch,
           "split": cfg.data.test, "sentences": len(src_ids)}
    for beam in BEAMS:
        start = time.perf_counter()
        nbest, _ = model.engine.nbest(src_ids, decode, beam)
        seconds = time.perf_counter() - start
        ids = [h[0][0] for h in nbest]
        hyps = [model.vocab.decode_tgt(i) for i in ids]
        scores = bleu_chrf(hyps, refs)
        out[f"beam{beam}"] = {"seconds": round(seconds, 2),
                              "sentences_per_s": round(len(ids) / seconds, 1),
                              "tokens_per_s": round(sum(len(i) + 1 for i in ids) / seconds),
                              "bleu": scores["bleu"], "chrf": scores["chrf"], "hyps": hyps}
    out["peak_mib"] = round(peak_rss_mib())
    return out


def guided(run: str, threads: int, limit: int) -> dict:
    """The guided run's links on both engines: free mode (agreement) and forced (AER)."""
    import torch

    torch.set_num_threads(threads)
    import nmt
    from nmt.align.io import load_gold
    from nmt.align.metrics import alignment_summary
    from nmt.data.corpora import load_split
    from nmt.data.pin import gold_of

    ours, theirs = nmt.load(run), nmt.load(run, engine="ctranslate2")
    cfg = ours.cfg
    sources, refs = load_split(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair,
                               cfg.data.test)
    sources, refs = sources[:limit], refs[:limit]
    a = ours.translate(sources, beam=1, alignments=True)
    b = theirs.translate(sources, beam=1, alignments=True)
    same = [(x.links, y.links) for x, y in zip(a, b) if x.text == y.text]
    links = sum(len(x) for x, _ in same)
    agree = sum(len(set(x) & set(y)) for x, y in same)
    src_ids, tgt_ids = ours.vocab.encode_src(sources), ours.vocab.encode_tgt(refs)
    forced = {"pytorch": ours.align_ids(src_ids, tgt_ids),
              "ctranslate2": ours.align_ids(src_ids, tgt_ids, weights=theirs.engine.forced_maps(
                  src_ids, tgt_ids))}
    gold_path = gold_of(cfg, cfg.data.test)
    out = {"run": run, "sentences": len(sources), "same_translation": len(same),
           "pytorch_links": links, "engine_links": sum(len(y) for _, y in same),
           "links_equal_share": round(agree / max(links, 1), 4)}
    if gold_path:
        for name, records in forced.items():
            gold = load_gold(gold_path, records, prefix=True)
            out[f"aer_{name}"] = round(alignment_summary(records, gold)["aer"], 4)
    return out


def machine() -> str:
    sys.path.insert(0, str(ROOT / "scripts"))
    from demo_table import machine as name

    return name()


def child(args: list[str]) -> dict:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"bench-decode: {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def table(results: list[dict], guide: dict | None, machine_name: str, threads: int,
          batch: int) -> str:
    lines = [f"Decoding on {machine_name}, {threads} threads, batch {batch}; "
             "ratios against PyTorch float32 of the same run.", "",
             "| run | engine | greedy sent/s | beam 5 sent/s | beam 5 tok/s | beam-5 ratio "
             "| BLEU greedy | BLEU beam 5 | chrF beam 5 | same greedy output | peak MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    base = {}
    for r in results:
        key = r["run"]
        if r["engine"] == "pytorch" and r["quantize"] == "float32":
            base[key] = r
        ref = base[key]
        same = sum(a == b for a, b in zip(r["beam1"]["hyps"], ref["beam1"]["hyps"]))
        r["same_greedy_share"] = round(same / max(len(ref["beam1"]["hyps"]), 1), 4)
        r["beam5_ratio"] = round(r["beam5"]["sentences_per_s"] / ref["beam5"]["sentences_per_s"], 2)
        r["bleu_change"] = round(r["beam5"]["bleu"] - ref["beam5"]["bleu"], 2)
        label = r["engine"] + ("" if r["quantize"] == "float32" else f" {r['quantize']}")
        if r["engine"] == "ctranslate2" and r["quantize"] == "float32":
            label = "ctranslate2 float32"
        lines.append(
            f"| {Path(key).name} ({r['family']}) | {label} | {r['beam1']['sentences_per_s']} "
            f"| {r['beam5']['sentences_per_s']} | {r['beam5']['tokens_per_s']:,} "
            f"| {r['beam5_ratio']:.2f}x | {r['beam1']['bleu']:.2f} | {r['beam5']['bleu']:.2f} "
            f"| {r['beam5']['chrf']:.2f} | {100 * r['same_greedy_share']:.1f} % "
            f"| {r['peak_mib']:,} |")
    if guide:
        lines += ["", f"Guided run {guide['run']} ({guide['sentences']} test sentences, "
                  "greedy): the engine's links equal PyTorch's on "
                  f"{100 * guide['links_equal_share']:.2f} % of PyTorch's "
                  f"{guide['pytorch_links']:,} links ({guide['same_translation']} sentences "
                  "translated alike)"
                  + (f"; AER forced on the references against the gold: PyTorch "
                     f"{guide['aer_pytorch']:.4f}, CTranslate2 {guide['aer_ctranslate2']:.4f}."
                     if "aer_pytorch" in guide else ".")]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*")
    parser.add_argument("--guided", help="a guided Transformer run on a corpus with gold")
    parser.add_argument("--guided-sentences", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-decode")
    parser.add_argument("--one", nargs=3, metavar=("RUN", "ENGINE", "QUANTIZE"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--one-guided", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run, engine, quantize = args.one
        print(json.dumps(measure(run, engine, None if quantize == "float32" else quantize,
                                 args.threads, args.batch)))
        return
    if args.one_guided:
        print(json.dumps(guided(args.one_guided, args.threads, args.guided_sentences)))
        return
    if not args.runs and not args.guided:
        parser.error("give at least one run (or --guided RUN)")
    from nmt.models.checks import load_config

    common = ["--threads", str(args.threads), "--batch", str(args.batch)]
    results = []
    for run in args.runs:
        family = load_config(Path(run) / "config.yaml").model.family
        for engine, quantize in rows_for(family):
            print(f"bench-decode: {run} on {engine} {quantize or 'float32'}", file=sys.stderr)
            results.append(child(["--one", run, engine, quantize or "float32", *common]))
    guide = child(["--one-guided", args.guided, "--guided-sentences",
                   str(args.guided_sentences), *common]) if args.guided else None
    text = table(results, guide, machine(), args.threads, args.batch)
    args.out.mkdir(parents=True, exist_ok=True)
    for r in results:
        for beam in BEAMS:
            r[f"beam{beam}"].pop("hyps")
    (args.out / "results.json").write_text(json.dumps(
        {"machine": machine(), "results": results, "guided": guide}, indent=2) + "\n")
    (args.out / "decode.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
