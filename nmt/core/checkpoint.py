"""Checkpoints: written atomically, loaded without running code from the file."""

from __future__ import annotations

import glob
import io
import os
import pickle
import warnings
import zipfile
from pathlib import Path
from typing import Any

import torch

from nmt.core.config import leaf_fields, migrate
from nmt.core.errors import NMTError, one_line
from nmt.core.fields import FREE
from nmt.core.scratch import replace_file

FORMAT = "nmt-checkpoint-1"


def atomic_write(path: Path, write: Any) -> None:
    """Write through `write(handle)` to a scratch file beside `path`, fsync, then rename it
    over `path` (nmt.core.scratch.replace_file). A crash or a full disk part-way leaves the
    previous file intact, and a kill leaves a scratch file the next write of `path` sweeps
    (with what an older nmt's killed save left, `.NAME.tmpPID` of a dead PID)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{glob.escape(path.name)}.tmp[0-9]*"):
        pid = stale.name[len(path.name) + 5:]
        if pid.isdigit() and not _alive(int(pid)):
            stale.unlink(missing_ok=True)
    replace_file(path, write)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def save_checkpoint(path: Path, payload: dict) -> None:
    """Save a checkpoint dict (tensors, numbers, strings, lists, dicts) atomically."""
    payload = {"format": FORMAT, **payload}
    try:
        atomic_write(path, lambda handle: torch.save(payload, handle))
    except (OSError, RuntimeError) as exc:
        # torch.save reports a failed write (a full disk) as a RuntimeError from the OSError
        cause = exc if isinstance(exc, OSError) else exc.__context__
        if not isinstance(cause, OSError):
            raise
        raise NMTError(f"{path}: could not save checkpoint ({cause.strerror or cause}); "
                       "the previous checkpoint is intact") from None


def load_checkpoint(path: Path, data: bytes | None = None) -> dict:
    """Load with `weights_only=True`; anything that is not our checkpoint is one clear error.
    `data`: the file's bytes, already read (a caller that hashes them loads what it hashed)."""
    if data is None and not path.is_file():
        raise NMTError(f"{path}: checkpoint not found; train first or pass another --run")
    with warnings.catch_warnings(record=True) as caught:  # torch warns before refusing
        warnings.simplefilter("always")
        try:
            payload = torch.load(path if data is None else io.BytesIO(data),
                                 map_location="cpu", weights_only=True)
        except (RuntimeError, pickle.UnpicklingError, zipfile.BadZipFile, EOFError, OSError,
                ValueError) as exc:
            caught.clear()  # the user sees our one line only
            raise NMTError(f"{path}: not a readable nmt checkpoint (truncated or foreign: "
                           f"{one_line(exc)})") from None
    for w in caught:  # a file we could read: its warnings, if any, still reach the user
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise NMTError(f"{path}: not an nmt checkpoint (no '{FORMAT}' marker)")
    weights = payload.get("model")
    if not isinstance(weights, dict) or not all(isinstance(k, str) and torch.is_tensor(v)
                                                for k, v in weights.items()):
        raise NMTError(f"{path}: damaged nmt checkpoint (its 'model' is not a mapping of "
                       "names to tensors); train again or pass another --run")
    return payload


def check_vocab(payload: dict, vocab: Any, path: Path, hint: str) -> None:
    """A checkpoint only fits the vocabulary sizes it was trained with."""
    sizes = (payload.get("src_vocab"), payload.get("tgt_vocab"))
    if sizes != (vocab.src_size, vocab.tgt_size):
        raise NMTError(f"{path}: trained with vocabularies of {sizes[0]}/{sizes[1]} pieces but "
                       f"{hint}")


# What a run fixed at its start (docs/architecture.md, "Reliability"; docs/configuration.md,
# "What a resume refuses"): every key whose field is declared `fixed` (nmt.core.fields), or
# declares nothing. Its data, vocabulary, model, the epoch's batches (a resume that changed
# one would continue at a saved position in another list of them), the teacher links it
# pinned (which a resume reads, whatever the config now says), and what picks its best
# checkpoint.
RESUME_KEYS = tuple(key for key, f in leaf_fields() if f.metadata.get("resume") != FREE)


def check_resumable(payload: dict, config: dict, path: Path) -> None:
    """`--resume` continues exactly: refuse a config (as a dict) that changed what the run
    fixed at its start (`RESUME_KEYS`) since `path` was saved, naming each key, old and new.
    A key that the saved config predates had its default (a new option's default is what
    the code did before it)."""
    saved = migrate(payload.get("config") or {})
    if not isinstance(saved, dict) or not saved:
        return  # a checkpoint without its config: nothing to compare
    defaults = dict(leaf_fields())
    changed = []
    for key in RESUME_KEYS:
        old, new = _value(saved, key, defaults[key].default), _value(config, key, None)
        if old != new:
            changed.append(f"{key} was {old!r}, now {new!r}")
    if changed:
        raise NMTError(f"{path}: resuming continues on what the run fixed at its start (its "
                       "data, vocabulary, model, batches and teacher's links), but "
                       f"{'; '.join(changed)}; resume without changing them, or start "
                       "another run (--set name=...)")


def _value(config: dict, key: str, default: Any) -> Any:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def resume_payload(path: Path, config: dict) -> dict:
    """The checkpoint `--resume` continues from, checked against today's config (a dict)
    before the run reads anything (`check_resumable`); the caller checks its vocabulary
    sizes once the run's vocabulary is read (`check_vocab`)."""
    payload = load_checkpoint(path)
    check_resumable(payload, config, path)
    return payload


def load_resumed(path: Path, payload: dict, vocab: Any, model: Any, optim: Any) -> None:
    """A resumed checkpoint's weights and optimiser state into `model` and `optim`, once the
    run's vocabulary is read: its sizes are checked, then the weights load. A changed
    `model.*` key was refused before the run read anything (`check_resumable`), so weights
    that do not fit are a damaged or foreign checkpoint: the library's first line."""
    check_vocab(payload, vocab, path, "the run's pinned vocabulary has other sizes; resume "
                "with the config the run was started with")
    try:
        model.load_state_dict(payload["model"])
        optim.load_state_dict(payload["optimizer"])
    except (RuntimeError, ValueError, KeyError) as exc:
        raise NMTError(f"{path}: does not match the config ({one_line(exc)}); the checkpoint "
                       "is damaged or not this run's: start another run (--set name=...)") from None


def kept_checkpoints(directory: Path) -> list[Path]:
    """The checkpoints `train.keep_last` keeps (step<N>.pt), oldest first."""
    return sorted(Path(directory).glob("step*.pt"))


def average_run(run: Path, last: int) -> tuple[Path, list[Path]]:
    """Write checkpoints/averaged.pt: the element-wise mean of the parameters of the run's
    last `last` kept checkpoints (Vaswani et al. 2017, section 6.1)."""
    directory = Path(run) / "checkpoints"
    kept = kept_checkpoints(directory)
    if not kept:
        raise NMTError(f"{directory}: no kept checkpoints (step*.pt) to average; train with "
                       "--set train.keep_last=5")
    if len(kept) < last:
        raise NMTError(f"{directory}: only {len(kept)} kept checkpoints, fewer than --last "
                       f"{last}; pass --last {len(kept)} or keep more (train.keep_last)")
    used = kept[-last:]
    payloads = [load_checkpoint(p) for p in used]
    first = payloads[0]
    for path, payload in zip(used[1:], payloads[1:]):
        if payload["model"].keys() != first["model"].keys() or any(
                payload["model"][k].shape != v.shape for k, v in first["model"].items()):
            raise NMTError(f"{path}: its parameters do not match {used[0]}'s; they are not "
                           "checkpoints of one model")
    averaged = {}
    for key, value in first["model"].items():
        if value.is_floating_point():
            stack = torch.stack([p["model"][key].double() for p in payloads])
            averaged[key] = stack.mean(0).to(value.dtype)
        else:
            averaged[key] = payloads[-1]["model"][key]
    out = directory / "averaged.pt"
    save_checkpoint(out, {**{k: v for k, v in payloads[-1].items() if k != "format"},
                          "model": averaged, "averaged_from": [p.name for p in used]})
    return out, used
