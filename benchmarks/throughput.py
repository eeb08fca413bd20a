"""Throughput at fixed shapes on Multi30k de-en: parameters, training target tokens/s,
decoding sentences/s (greedy and beam 5, batch 64) and peak memory, per family.

Each family runs in its own process (clean peak memory), one after the other, so the
figures are side by side in one run on the same machine. Needs the corpus:
    nmt data download multi30k --pair de-en --from ../shared/corpora/multi30k
Usage: python benchmarks/throughput.py [--families transformer bahdanau] [--steps 30]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ["transformer", "bahdanau", "luong_general", "luong_local_p", "fixed_context"]


def measure(family: str, steps: int, sentences: int, threads: int, runs_dir: Path) -> dict:
    import torch

    from nmt.config import load_config
    from nmt.data.batching import iterate_batches, token_batches
    from nmt.data.subwords import Vocab, encode_split, prepare_vocab
    from nmt.models import build_model
    from nmt.train import loss_fn
    from nmt.translate import translate_ids

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cfg = load_config(ROOT / "configs" / "multi30k" / f"{family}.yaml")
    vocab_dir = prepare_vocab(cfg)
    vocab = Vocab.from_dir(vocab_dir)
    src, tgt = encode_split(cfg, vocab_dir, cfg.data.train)
    model = build_model(cfg.model, vocab.src_size, vocab.tgt_size, vocab.joint)
    params = sum(p.numel() for p in model.parameters())
    optim = torch.optim.Adam(model.parameters(), lr=1e-4)
    lengths = [(len(s), len(t)) for s, t in zip(src, tgt)]
    batches = token_batches(lengths, cfg.train.batch_tokens, seed=1)[: steps + 3]
    model.train()
    tokens, seconds = 0, 0.0
    for i, batch in enumerate(iterate_batches(src, tgt, batches)):
        tick = time.perf_counter()
        loss = loss_fn(model, batch, cfg.train.label_smoothing)
        (loss / batch.n_tokens).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        optim.zero_grad(set_to_none=True)
        if i >= 3:  # the first steps warm up allocators and kernels
            seconds += time.perf_counter() - tick
            tokens += batch.n_tokens
    test_src, _ = encode_split(cfg, vocab_dir, cfg.data.test)
    test_src = test_src[:sentences]
    trained = runs_dir / family
    if (trained / "checkpoints").is_dir():  # decode with a trained model: realistic lengths
        from nmt.rundir import load_run

        _, vocab, model, _ = load_run(trained)
    model.eval()
    decode = {}
    for beam in (1, 5):
        tick = time.perf_counter()
        translate_ids(model, vocab, test_src, cfg.decode, beam=beam)
        decode[beam] = len(test_src) / (time.perf_counter() - tick)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"family": family, "params": params, "train_tok_s": tokens / seconds,
            "decoded_by": "trained" if (trained / "checkpoints").is_dir() else "untrained",
            "greedy_sent_s": decode[1], "beam5_sent_s": decode[5], "peak_mib": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=FAMILIES)
    parser.add_argument("--steps", type=int, default=30, help="timed training steps")
    parser.add_argument("--sentences", type=int, default=256, help="test sentences decoded")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=Path, default=ROOT / "runs",
                        help="decode with runs/<family> when trained (untrained models stop "
                             "at random lengths, which makes decoding speed meaningless)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.steps, args.sentences, args.threads,
                                 args.runs)))
        return
    print("| family | parameters | train tgt tok/s | greedy sent/s | beam-5 sent/s | peak MiB "
          "| decoded by |")
    print("|---|---|---|---|---|---|---|")
    for family in args.families:
        out = subprocess.run([sys.executable, __file__, "--one", family, "--steps",
                              str(args.steps), "--sentences", str(args.sentences),
                              "--threads", str(args.threads), "--runs", str(args.runs)],
                             capture_output=True, text=True, cwd=ROOT, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {family} | {r['params'] / 1e6:.1f} M | {r['train_tok_s']:,.0f} | "
              f"{r['greedy_sent_s']:.1f} | {r['beam5_sent_s']:.1f} | {r['peak_mib']:,.0f} | "
              f"{r['decoded_by']} model |",
              flush=True)


if __name__ == "__main__":
    main()
