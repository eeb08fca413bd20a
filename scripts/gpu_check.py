"""Check an install on a machine with a GPU, in a few minutes (make gpu-check):

1. a short training of a small Transformer on the synthetic corpus, in the precision
   `train.precision: auto` picks there (its timings printed);
2. --resume to the same step: the weights equal those of the run trained straight through;
3. greedy and beam-5 decoding of the trained run (greedy repeats itself);
4. torchrun --nproc_per_node=1: an NCCL all-reduce, then `nmt train` under torchrun;
5. one `nmt serve` request on loopback.

Each step prints one line, PASS or FAIL, with its figures; the exit code is the number of
failures. Without CUDA it prints one line saying so and exits 0. Everything is written
under a temporary folder (or --work DIR); nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = 200


def config(work: Path, name: str, steps: int, precision: str = "auto"):
    from nmt.models.checks import config_from_dict

    return config_from_dict({
        "name": name, "runs_dir": str(work / "runs"),
        "data": {"root": str(work / "data"), "corpus": "synth", "pair": "src-tgt",
                 "max_len": 40},
        "vocab": {"size": 600},
        "model": {"family": "transformer", "emb_size": 128, "heads": 4, "ff_size": 256,
                  "enc_layers": 2, "dec_layers": 2, "dropout": 0.1},
        "train": {"batch_tokens": 2000, "lr": 0.002, "schedule": "inverse_sqrt",
                  "warmup": 50, "max_steps": steps, "valid_every": 100,
                  "valid_sentences": 50, "align_sentences": 0, "precision": precision},
        "decode": {"beam": 5},
    })


def report(name: str, ok: bool, detail: str) -> bool:
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}", flush=True)
    return ok


def train_and_resume(work: Path) -> list[bool]:
    import torch

    from nmt.training.trainer import Trainer

    tick = time.perf_counter()
    straight = Trainer(config(work, "straight", STEPS), quiet=True)
    chosen = straight.chosen
    straight.fit()
    results = [report("train", True, f"{STEPS} steps in {time.perf_counter() - tick:.0f} s, "
                      f"{chosen['precision']} ({chosen['source']}"
                      + (f": {chosen['timings']}" if "timings" in chosen else "") + ")")]
    half = Trainer(config(work, "halves", STEPS // 2, chosen["precision"]), quiet=True)
    half.fit()
    resumed = Trainer(config(work, "halves", STEPS, chosen["precision"]), resume=True,
                      quiet=True)
    resumed.fit()
    a, b = straight.model.state_dict(), resumed.model.state_dict()
    diff = max(float((a[k].float() - b[k].float()).abs().max()) for k in a)
    results.append(report("resume", diff <= 1e-4, f"{STEPS // 2} + {STEPS // 2} steps against "
                          f"{STEPS} straight: largest weight difference {diff:.2e} (GPU "
                          "kernels are not bitwise deterministic; 1e-4 allowed)"))
    del torch
    return results


def decode(work: Path) -> bool:
    import nmt

    model = nmt.load(work / "runs" / "straight")
    sources = (work / "data" / "synth" / "src-tgt" / "test.src").read_text().splitlines()[:64]
    tick = time.perf_counter()
    greedy = [t.text for t in model.translate(sources, beam=1)]
    seconds_greedy = time.perf_counter() - tick
    tick = time.perf_counter()
    beam = [t.text for t in model.translate(sources, beam=5)]
    seconds_beam = time.perf_counter() - tick
    again = [t.text for t in model.translate(sources, beam=1)]
    ok = greedy == again and len(beam) == len(greedy) == len(sources)
    return report("decode", ok, f"{len(sources)} sentences: greedy {seconds_greedy:.1f} s, "
                  f"beam 5 {seconds_beam:.1f} s; greedy repeatable: {greedy == again}")


def nccl_probe() -> None:
    """Run under torchrun: join an NCCL group and all-reduce a CUDA tensor."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    value = torch.ones(4, device="cuda") * (rank + 1)
    dist.all_reduce(value)
    print(json.dumps({"backend": dist.get_backend(), "world": dist.get_world_size(),
                      "sum": value.tolist()}))
    dist.destroy_process_group()


def torchrun(work: Path) -> list[bool]:
    base = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1"]
    probe = subprocess.run(base + [__file__, "--nccl-probe"], capture_output=True, text=True,
                           timeout=300, cwd=ROOT)
    line = (probe.stdout.strip().splitlines() or ["{}"])[-1]
    found = json.loads(line) if line.startswith("{") else {}
    results = [report("torchrun nccl", probe.returncode == 0 and found.get("backend") == "nccl",
                      line if found else (probe.stderr.strip().splitlines() or ["?"])[-1])]
    cfg_path = work / "torchrun.yaml"
    from nmt.core.config import config_to_dict

    raw = config_to_dict(config(work, "torchrun", 40))
    cfg_path.write_text(json.dumps(raw))  # JSON is YAML
    train = subprocess.run(base + ["-m", "nmt", "train", "--config", str(cfg_path),
                                   "--no-evaluate"],
                           capture_output=True, text=True, timeout=600, cwd=ROOT)
    last = (train.stdout.strip().splitlines() or ["?"])[-1]
    results.append(report("torchrun train", train.returncode == 0, last))
    return results


def serve(work: Path) -> bool:
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "nmt", "serve",
                               str(work / "runs" / "straight"), "--port", str(port)],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                r = httpx.post(f"http://127.0.0.1:{port}/api/translate",
                               json={"source": "ka lo ma"}, timeout=30)
                return report("serve", r.status_code == 200,
                              f"POST /api/translate: {r.status_code} {r.text[:80]}")
            except httpx.TransportError:
                time.sleep(0.5)
        return report("serve", False, "the server did not answer within 120 s")
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="folder for the data and runs (default: a "
                                                  "temporary one, removed after)")
    parser.add_argument("--nccl-probe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.nccl_probe:
        return nccl_probe()
    import torch

    if not torch.cuda.is_available():
        print(f"gpu-check: no CUDA device here (torch {torch.__version__}, CUDA "
              f"{torch.version.cuda or 'not built in'}); nothing to check")
        return
    from nmt.data.corpora import ensure_synth
    from nmt.training.distributed import native_bf16

    dev = torch.device("cuda", 0)
    print(f"gpu-check: {torch.cuda.get_device_name(dev)} (compute capability "
          f"{'.'.join(map(str, torch.cuda.get_device_capability(dev)))}), torch "
          f"{torch.__version__}, CUDA {torch.version.cuda}, native bf16: {native_bf16(dev)}, "
          f"NCCL: {torch.distributed.is_nccl_available()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="nmt-gpu-check-") as tmp:
        work = args.work or Path(tmp)
        ensure_synth(work / "data")
        results = train_and_resume(work)
        results.append(decode(work))
        results += torchrun(work)
        results.append(serve(work))
    failed = results.count(False)
    print(f"gpu-check: {len(results) - failed} of {len(results)} checks passed")
    sys.exit(failed)


if __name__ == "__main__":
    main()
