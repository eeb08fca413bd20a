"""Data at scale: import, SentencePiece, encoding and the start of training on generated
corpora of 100k, 1M and 5M pairs (`make bench-data`; docs/benchmarks.md).

Each corpus is Multi30k de-en's training pairs recombined: pair k joins two pairs drawn
with a seeded generator, so the text is real and nearly every pair is new (the import's
duplicate filter counts the rest). It is written under --work, imported with
`nmt data import`, and deleted with everything made from it at the end of its size. Every
stage runs in its own process; its peak RSS is that process's own (wait4's rusage), the
largest of its worker processes where it has them:

- import: `nmt data import NAME --files` (pairs/s over the generated pairs);
- sentencepiece: `prepare_vocab` of the bench's config (a bounded, streamed sample);
- encode: the training split's store (`nmt.data.store.encode_split`), and beside it, in the
  same run, SentencePiece's own batched `encode` of the same lines (chunks of 10,000, its
  own threads): the limit our encoding is measured against;
- first step: `nmt train` on the encoded corpus, seconds from the command to its first
  step's line in metrics.jsonl (fp32: no precision probe);
- training RSS: `nmt train` to step 50 (and 500 for 1M pairs), RSS from its metrics, and
  the process's peak;
- ranks: on the 1M corpus, `torchrun --nproc_per_node 2` (gloo) to step 50, each rank's
  peak RSS and PSS read from /proc while it runs, beside the one process's peak.

Needs Multi30k de-en imported (`make multi30k`). Prints a markdown table, writes
OUT/data_scale.json and OUT/data_scale.png (RSS and time against corpus size).

Usage: python benchmarks/data_scale.py [--sizes 100000 1000000 5000000] [--work DIR]
       [--out reports/bench-data] [--long-steps 500 --long-size 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
CONFIG = ROOT / "configs" / "multi30k" / "bahdanau.yaml"
SMALL = ["model.emb_size=128", "model.hidden_size=128", "train.precision=fp32",
         "train.threads=2", "train.valid_every=100000", "train.max_minutes=0"]


def run(cmd: list[str], env: dict | None = None) -> dict:
    """Run a stage in its own process: wall seconds, peak RSS (MiB), its output."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})}, cwd=ROOT)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    if proc.returncode:
        sys.exit(f"data_scale: {' '.join(cmd[:4])} failed ({proc.returncode}):\n{out[-2000:]}")
    return {"seconds": seconds, "rss_mib": usage.ru_maxrss / 1024, "out": out}


def generate(source: Path, size: int, folder: Path, seed: int = 1) -> None:
    """`size` pairs, each two Multi30k training pairs joined (seeded)."""
    de = (source / "train.de").read_text(encoding="utf-8").splitlines()
    en = (source / "train.en").read_text(encoding="utf-8").splitlines()
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "gen.de", "w", encoding="utf-8") as fde, \
            open(folder / "gen.en", "w", encoding="utf-8") as fen:
        for _ in range(size):
            i, j = rng.randrange(len(de)), rng.randrange(len(de))
            fde.write(f"{de[i]} {de[j]}\n")
            fen.write(f"{en[i]} {en[j]}\n")


STAGE = """
import json, sys, time
from pathlib import Path


def main():
    from nmt.models.checks import load_config
    from nmt.data.subwords import Vocab, prepare_vocab
    cfg = load_config(sys.argv[1], sys.argv[3:])
    what = sys.argv[2]
    vocab_dir = prepare_vocab(cfg)
    if what == "encode":
        from nmt.data.store import encode_split
        start = time.perf_counter()
        src, tgt = encode_split(cfg, vocab_dir, cfg.data.train)
        print(json.dumps({"pairs": len(src), "encode_s": time.perf_counter() - start}))
    elif what == "spm":
        from nmt.data.corpora import split_paths
        vocab = Vocab.from_dir(vocab_dir)
        paths = split_paths(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair,
                            cfg.data.train)
        start, n = time.perf_counter(), 0
        for path, model in zip(paths, (vocab.src, vocab.tgt)):
            with open(path, encoding="utf-8") as handle:
                chunk = []
                for line in handle:
                    chunk.append(line.rstrip("\\n"))
                    if len(chunk) == 10000:
                        model.encode(chunk)
                        n, chunk = n + len(chunk), []
                if chunk:
                    model.encode(chunk)
                    n += len(chunk)
        print(json.dumps({"lines": n, "spm_s": time.perf_counter() - start}))


if __name__ == "__main__":  # the store's encoding workers are spawned
    main()
"""


def last_json(out: str) -> dict:
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


def train_cmd(sets: list[str], steps: int, runs: Path, name: str) -> list[str]:
    cmd = ["-m", "nmt", "train", "-c", str(CONFIG), "--no-evaluate",
           "--set", f"train.max_steps={steps}", "--set", f"runs_dir={runs}",
           "--set", f"name={name}"]
    for s in sets:
        cmd += ["--set", s]
    return cmd


def train_rss(sets: list[str], steps: int, runs: Path, name: str) -> dict:
    stage = run([PY, *train_cmd(sets, steps, runs, name)])
    metrics = [json.loads(line) for line in (runs / name / "metrics.jsonl").read_text()
               .splitlines()]
    train = [m for m in metrics if m.get("kind") == "train" and m.get("rss_mib")]
    return {"seconds": stage["seconds"], "peak_mib": stage["rss_mib"],
            "rss_mib": train[-1]["rss_mib"] if train else None}


def first_step(sets: list[str], runs: Path) -> float:
    """Seconds from starting `nmt train` to its first step's progress line in metrics.jsonl
    (the line is written when the step ends; checkpoints after it are not counted)."""
    metrics = runs / "first" / "metrics.jsonl"
    start = time.perf_counter()
    proc = subprocess.Popen([PY, *train_cmd(sets, 1, runs, "first"), "--set",
                             "train.log_every=1"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    seconds = None
    while proc.poll() is None or seconds is None:
        if seconds is None and metrics.is_file() and '"kind": "train"' in metrics.read_text():
            seconds = time.perf_counter() - start
        elif proc.poll() is not None:
            sys.exit(f"data_scale: the first-step run failed ({proc.returncode})")
        time.sleep(0.02)
    proc.wait()
    return seconds


def _status(pid: int) -> dict:
    """A live process's peak RSS (VmHWM) and proportional set size (MiB), and its RANK."""
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                out["peak_mib"] = int(line.split()[1]) / 1024
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                out["pss_mib"] = int(line.split()[1]) / 1024
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        out["rank"] = next(int(e[5:]) for e in env if e.startswith(b"RANK="))
    except (OSError, StopIteration, ValueError):
        return {}
    return out


def ranks_rss(sets: list[str], steps: int, runs: Path) -> list[dict]:
    """`torchrun --nproc_per_node 2` (gloo, one thread each) to `steps`: each rank's peak
    RSS and largest PSS, read from /proc every 0.1 s while it runs."""
    sets = [*sets, "train.threads=1"]
    proc = subprocess.Popen([PY, "-m", "torch.distributed.run", "--standalone",
                             "--nproc_per_node", "2", *train_cmd(sets, steps, runs, "ranks")],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, text=True)
    ranks: dict[int, dict] = {}
    while proc.poll() is None:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                parent = int(Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1]
                             .split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if parent != proc.pid or not (seen := _status(int(entry.name))):
                continue
            best = ranks.setdefault(seen["rank"], {"rank": seen["rank"]})
            for key in ("peak_mib", "pss_mib"):
                best[key] = max(best.get(key, 0.0), seen.get(key, 0.0))
        time.sleep(0.1)
    if proc.returncode:
        sys.exit(f"data_scale: torchrun failed ({proc.returncode}):\n"
                 f"{proc.stderr.read()[-2000:]}")
    return [ranks[r] for r in sorted(ranks)]


def measure(size: int, args) -> dict:
    work = args.work / f"scale{size}"
    shutil.rmtree(work, ignore_errors=True)
    data_root = work / "data"
    name = f"scale{size}"
    t0 = time.perf_counter()
    generate(args.multi30k, size, work)
    row = {"pairs": size, "generate_s": time.perf_counter() - t0}
    imp = run([PY, "-m", "nmt", "data", "import", name, "--pair", "de-en", "--files",
               str(work / "gen.de"), str(work / "gen.en"), "--valid-size", "1000",
               "--test-size", "1000", "--root", str(data_root)])
    row.update(import_s=imp["seconds"], import_pairs_s=size / imp["seconds"],
               import_mib=imp["rss_mib"])
    sets = [f"data.root={data_root}", f"data.corpus={name}", *SMALL]
    script = work / "stage.py"
    script.write_text(STAGE)
    spm = run([PY, str(script), str(CONFIG), "vocab", *sets])
    row.update(spm_train_s=spm["seconds"], spm_train_mib=spm["rss_mib"])
    enc = run([PY, str(script), str(CONFIG), "encode", *sets])
    encoded = last_json(enc["out"])
    own = run([PY, str(script), str(CONFIG), "spm", *sets])
    batched = last_json(own["out"])
    # both encode both sides of the same lines: the share is their throughputs' ratio
    row.update(encode_s=encoded["encode_s"], encode_mib=enc["rss_mib"],
               train_pairs=encoded["pairs"], spm_encode_s=batched["spm_s"],
               encode_share=batched["spm_s"] / encoded["encode_s"])
    row["first_step_s"] = first_step(sets, work / "runs")
    at50 = train_rss(sets, 50, work / "runs", "s50")
    row.update(rss50_mib=at50["rss_mib"], peak50_mib=at50["peak_mib"])
    if size == args.long_size and args.long_steps:
        long = train_rss(sets, args.long_steps, work / "runs", "long")
        row.update(long_steps=args.long_steps, rss_long_mib=long["rss_mib"])
    if size == args.long_size and args.ranks:
        row["ranks"] = ranks_rss(sets, 50, work / "runs")
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(row), flush=True)
    return row


def table(rows: list[dict]) -> str:
    lines = ["| pairs | import s (pairs/s, MiB) | SentencePiece s (MiB) | encode s (MiB) | "
             "SentencePiece's own encode s (ours as a share) | first step s | RSS at step 50 "
             "MiB (peak) | RSS at the long run's end |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        long = (f"{r['rss_long_mib']:.0f} (step {r['long_steps']})"
                if r.get("rss_long_mib") else "")
        lines.append(
            f"| {r['pairs']:,} | {r['import_s']:.1f} ({r['import_pairs_s']:,.0f}, "
            f"{r['import_mib']:.0f}) | {r['spm_train_s']:.1f} ({r['spm_train_mib']:.0f}) | "
            f"{r['encode_s']:.1f} ({r['encode_mib']:.0f}) | {r['spm_encode_s']:.1f} "
            f"({r['encode_share']:.0%}) | {r['first_step_s']:.1f} | {r['rss50_mib']:.0f} "
            f"({r['peak50_mib']:.0f}) | {long} |")
    for r in rows:
        if r.get("ranks"):
            each = "; ".join(f"rank {k['rank']} peak {k['peak_mib']:.0f} MiB (PSS "
                             f"{k['pss_mib']:.0f})" for k in r["ranks"])
            lines.append(f"\ntorchrun, 2 gloo ranks to step 50 on {r['pairs']:,} pairs: {each}; "
                         f"one process: peak {r['peak50_mib']:.0f} MiB")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["pairs"] for r in rows]
    fig, (mem, sec) = plt.subplots(1, 2, figsize=(10, 3.6))
    for key, label in (("import_mib", "import"), ("spm_train_mib", "SentencePiece"),
                       ("encode_mib", "encode"), ("rss50_mib", "training, step 50")):
        mem.plot(sizes, [r[key] for r in rows], marker="o", label=label)
    for key, label in (("import_s", "import"), ("spm_train_s", "SentencePiece"),
                       ("encode_s", "encode"), ("spm_encode_s", "SentencePiece's own encode"),
                       ("first_step_s", "to the first step")):
        sec.plot(sizes, [r[key] for r in rows], marker="o", label=label)
    for ax, title in ((mem, "peak RSS (MiB)"), (sec, "seconds")):
        ax.set_xscale("log")
        ax.set_xlabel("corpus pairs")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 5_000_000])
    parser.add_argument("--multi30k", type=Path, default=ROOT / "data" / "multi30k" / "de-en")
    parser.add_argument("--work", type=Path, default=ROOT / "data" / "bench-data")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-data")
    parser.add_argument("--long-size", type=int, default=1_000_000)
    parser.add_argument("--long-steps", type=int, default=500)
    parser.add_argument("--ranks", action=argparse.BooleanOptionalAction, default=True,
                        help="torchrun with 2 gloo ranks to step 50 on the long size")
    args = parser.parse_args()
    if not (args.multi30k / "train.de").is_file():
        sys.exit(f"data_scale: {args.multi30k / 'train.de'} not found; run `make multi30k`")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [measure(size, args) for size in args.sizes]
    (args.out / "data_scale.json").write_text(json.dumps(rows, indent=1))
    plot(rows, args.out / "data_scale.png")
    print(table(rows))


if __name__ == "__main__":
    main()
