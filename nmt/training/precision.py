"""train.precision: `auto` decided by timing this model's own training steps on this device.

`fp32` and `bf16` are obeyed as written. `auto` is fp32 where the device has no native
bf16 matrix products (`distributed.native_bf16`: emulated bf16 is slower); elsewhere the
first start of a run times a few forward and backward passes in each precision, on
training batches spread over the first epoch (their shapes vary, as training's do), and
keeps bf16 only when it is at least `MARGIN` faster on every timed batch (`decide`).
Flags alone do not decide it: the same flags are faster on one CPU class and slower on
another (docs/experiments/2026-12-03-precision.md).

The decision is remembered twice: in the run directory (`precision.json`: `--resume`
keeps it) and in a small cache keyed by the device (its model, flags and threads), the
torch version and the shapes of the model and its batches (`cache_file()`: the next run
of the same recipe on the same machine skips the timing). Only a clear decision is
cached: with no batch timed, or batches that disagree (the difference within the noise,
as when another process loads the machine), fp32 wins and the next start times again.
Probes on one machine take turns (a lock beside the cache). Entries read back are
checked whole: a malformed one is ignored, as is one the device cannot run
(docs/benchmarks.md#mixed-precision). The probe changes neither weights, gradients nor
random streams: a run with `auto` trains exactly as one with the chosen precision written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import random
import time
from collections.abc import Callable
from pathlib import Path

import torch

from nmt.core.checkpoint import atomic_write
from nmt.core.locks import file_lock
from nmt.core.machine import cpu_fields, cpu_model
from nmt.training import distributed as dist

KERNEL_CACHE = "128"  # oneDNN primitives kept (its default: 1,024); see bound_kernel_cache
MARGIN = 0.05  # bf16 must save this fraction of the time: fp32 is exact, and wins ties
PROBE_BATCHES = 4  # timed batches per precision, after one warm-up batch each
CPUINFO = Path("/proc/cpuinfo")  # the CPU's model and flags, where Linux tells them


def bound_kernel_cache() -> None:
    """Keep oneDNN's cache of compiled CPU kernels (one per matrix shape, used by bf16
    steps) to KERNEL_CACHE entries, unless the environment sets
    ONEDNN_PRIMITIVE_CACHE_CAPACITY. A run's batch shapes recur only from epoch to epoch,
    far more of them than the default 1,024 entries hold, so a larger cache buys no hits
    and grows the process for the whole run (docs/experiments/2026-12-03-precision.md).
    oneDNN reads the variable when it first compiles a kernel: call this before the
    process's first bf16 step."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", KERNEL_CACHE)


def supported(dev: torch.device) -> list[str]:
    """The precisions worth timing on `dev`: fp32, and bf16 where it is native."""
    return ["fp32", "bf16"] if dist.native_bf16(dev) else ["fp32"]


def device_name(dev: torch.device) -> str:
    """The device as the cache keys it: the GPU's name, compute capability and CUDA
    version, or the CPU's model, flags (hashed) and threads."""
    if dev.type == "cuda":
        major, minor = torch.cuda.get_device_capability(dev)
        return (f"{torch.cuda.get_device_name(dev)} (cuda {torch.version.cuda}, "
                f"sm {major}.{minor})")
    name, flags = cpu_model(CPUINFO), cpu_fields(CPUINFO).get("flags", "")
    digest = hashlib.sha256(" ".join(sorted(flags.split())).encode()).hexdigest()[:8]
    return f"{name}, flags {digest}, {torch.get_num_threads()} threads"


def cache_file() -> Path:
    """$NMT_CACHE_DIR/precision.json, else $XDG_CACHE_HOME/nmt/ or ~/.cache/nmt/."""
    root = os.environ.get("NMT_CACHE_DIR") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nmt"
    return Path(root) / "precision.json"


def cache_key(dev: torch.device, model: torch.nn.Module, shape: dict) -> str:
    """What the timing depends on: device (model, flags, threads), the precisions it runs
    natively, torch, parameter shapes and `shape` (the batch budget and whatever else
    changes the step's matrix shapes). An upgrade of torch or a move to another CPU
    misses the cache, and the next start times again."""
    params = [[name, list(p.shape)] for name, p in model.named_parameters()]
    text = json.dumps({"device": device_name(dev), "precisions": supported(dev),
                       "torch": torch.__version__, "params": params, **shape}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def time_steps(step: Callable[[object, str], None], batches: list, precisions: list[str],
               dev: torch.device) -> dict[str, list[float]]:
    """Seconds per 1,000 target tokens of `step(batch, precision)` (a forward and backward
    pass), batch by batch, for each precision: the first batch warms each precision up
    untimed, the rest are timed (so one batch or none times nothing: empty lists), the
    precisions taking turns first so drift falls on both alike."""
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    samples: dict[str, list[float]] = {p: [] for p in precisions}
    for i, batch in enumerate(batches):
        order = precisions if i % 2 == 0 else precisions[::-1]
        for precision in order:
            sync()
            tick = time.perf_counter()
            step(batch, precision)
            sync()
            if i:
                seconds = time.perf_counter() - tick
                samples[precision].append(1000 * seconds / max(batch.n_tokens, 1))
    return samples


def spread(batches: list) -> list:
    """PROBE_BATCHES + 1 of an epoch's `batches`, evenly spaced (so of several shapes)."""
    count = min(len(batches), PROBE_BATCHES + 1)
    return [batches[i * len(batches) // count] for i in range(count)]


@contextlib.contextmanager
def random_state_kept():
    """Every random stream (torch's CPU and CUDA generators, Python's) as it was on entry,
    back on exit: dropout in the timed passes draws nothing the run would have drawn."""
    kept = (torch.get_rng_state(), random.getstate(),
            torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)
    try:
        yield
    finally:
        torch.set_rng_state(kept[0])
        random.setstate(kept[1])
        if kept[2] is not None:
            torch.cuda.set_rng_state_all(kept[2])


def faster(timings: dict[str, float]) -> str:
    """bf16 when it takes at most 1 - MARGIN of fp32's time, else fp32 (which wins ties,
    and wins when nothing was timed: a time of zero measured nothing)."""
    bf16, fp32 = timings.get("bf16"), timings.get("fp32", 0.0)
    return "bf16" if bf16 is not None and 0 < fp32 and bf16 <= (1 - MARGIN) * fp32 else "fp32"


def decide(samples: dict[str, list[float]]) -> dict:
    """The choice from `time_steps`'s per-batch times: {"precision", "timings" (each
    precision's mean), "spread" (its fastest and slowest batch), "settled"}.

    Each timed batch ran in both precisions back to back, so each is one paired trial of
    `faster`. The choice is settled (worth caching) only when every trial agrees and
    there are at least two: trials on both sides of the margin mean the difference is
    within the noise (another process's load, a clock step). Unsettled, fp32 wins ties."""
    pairs = list(zip(*samples.values())) if len(samples) > 1 else []
    votes = {faster(dict(zip(samples, pair))) for pair in pairs}
    settled = len(pairs) >= 2 and len(votes) == 1
    return {"precision": votes.pop() if settled else "fp32",
            "timings": {p: sum(v) / len(v) for p, v in samples.items() if v},
            "spread": {p: [min(v), max(v)] for p, v in samples.items() if v},
            "settled": settled}


def _read(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _seconds(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) and value >= 0


def _valid(entry: object, candidates: list[str], probed: bool) -> dict | None:
    """`entry` when it is a whole record of a precision `candidates` holds (a cache entry,
    `probed`, holds the timings of each candidate; a run's precision.json may hold none),
    else None: whatever a hand, a crash or an older version left there is ignored."""
    if not isinstance(entry, dict) or entry.get("precision") not in candidates:
        return None
    timings, spread = entry.get("timings", {}), entry.get("spread", {})
    whole = (isinstance(timings, dict) and set(timings) <= set(candidates)
             and all(map(_seconds, timings.values()))
             and (not probed or set(timings) == set(candidates))
             and isinstance(spread, dict) and set(spread) <= set(candidates)
             and all(isinstance(r, list) and len(r) == 2 and all(map(_seconds, r))
                     for r in spread.values())
             and _seconds(entry.get("probe_s", 0.0)))
    return entry if whole else None


def _remember(path: Path, key: str, record: dict) -> None:
    """Add `record` under `key` to the cache; a cache that cannot be written is skipped
    (the next run times again)."""
    entries = {**_read(path), key: record}
    try:
        atomic_write(path, lambda h: h.write((json.dumps(entries, indent=1) + "\n").encode()))
    except OSError:
        pass


def resolve(setting: str, dev: torch.device, run_file: Path | None, key_of: Callable[[], str],
            probe: Callable[[list[str]], dict[str, list[float]]]) -> dict:
    """The precision a run trains in, and where the decision came from:
    {"precision": "bf16" | "fp32", "source": "config" | "device" | "run" | "cache" |
    "probe", "timings": {precision: mean s per 1k target tokens} and "spread":
    {precision: [fastest, slowest batch]} (a probe or its cache), "probe_s": seconds the
    timing took (a probe), "unsettled": true (a probe `decide` could not settle: not
    cached)}.

    `run_file`: the run's precision.json on resume (None on a first start; the caller
    writes it);
    `key_of()`: the cache key; `probe(precisions)`: times them (`time_steps`)."""
    if setting != "auto":
        return {"precision": setting, "source": "config"}
    candidates = supported(dev)
    if len(candidates) == 1:
        return {"precision": "fp32", "source": "device"}
    kept = _valid(_read(run_file), candidates, False) if run_file is not None else None
    if kept is not None:
        return {**kept, "source": "run"}
    key, cache = key_of(), cache_file()
    with contextlib.ExitStack() as turn:
        with contextlib.suppress(OSError):  # no lock where the cache's folder is read-only
            turn.enter_context(file_lock(cache.with_name(".precision.lock")))
        cached = _valid(_read(cache).get(key), candidates, True)  # read in our turn: the
        if cached is not None:  # probe before ours may have just written it
            return {**cached, "source": "cache"}
        tick = time.perf_counter()
        record = decide(probe(candidates))
        record["probe_s"] = time.perf_counter() - tick
        settled = record.pop("settled")
        if settled and dist.is_main():
            _remember(cache, key, record)
        elif not settled:  # the next start times again
            record["unsettled"] = True
    return {**record, "source": "probe"}


def describe(record: dict, setting: str) -> str:
    """One phrase for the run's first lines: the precision and why."""
    why = {"config": f"train.precision={setting}",
           "device": "train.precision=auto; this device has no native bf16",
           "run": "train.precision=auto, as this run chose at its start",
           "cache": "train.precision=auto, as timed before on this machine",
           "probe": "train.precision=auto, timed now"}[record["source"]]
    timings = record.get("timings")
    if timings:
        why += ": " + ", ".join(f"{p} {s:.2f} s" for p, s in timings.items())
        why += " per 1k target tokens"
        if record["source"] == "probe":
            why += f", {record['probe_s']:.1f} s of timing"
    elif record["source"] == "probe":
        why += ": no batch timed (an epoch of fewer than two batches)"
    if record["source"] == "probe" and record.get("unsettled"):
        why += "; fp32 as too few batches or too close to call, timed again next start"
    return f"{record['precision']} matrix products ({why})"
