"""A trained run loaded back: its config, checked against today's rules, and its model.

The run directory's layout is nmt.core.rundir's."""

from __future__ import annotations

from pathlib import Path

from nmt.core.checkpoint import check_vocab, load_checkpoint
from nmt.core.config import Config, migrate, read_yaml
from nmt.core.errors import NMTError, one_line
from nmt.core.rundir import RunDir
from nmt.data.folder import sha256_file
from nmt.data.subwords import Vocab
from nmt.models import build_model
from nmt.models.base import Seq2Seq
from nmt.models.checks import config_from_dict, in_folder
from nmt.models.opus import NO_CORPUS, is_opus, load_opus, opus_config
from nmt.models.published import is_published, load_weights, read_stamp, resolve


def check_one_pair(named: list[tuple[str, Config]], why: str, corpus: bool = False) -> None:
    """One-line NMTError unless every (name, config) was trained on the first one's pair
    (and with `corpus`, the first one's corpus): an ensemble, or runs shown on the same
    sentences, translate one way; a report of runs scores them on one split."""
    first_name, first = named[0] if named else ("", None)
    for name, cfg in named[1:]:
        for key in ("pair", "corpus") if corpus else ("pair",):
            if NO_CORPUS in (cfg.data.corpus, first.data.corpus) and key == "corpus":
                continue  # a model trained elsewhere (OPUS-MT) is shown on the others' split
            if getattr(cfg.data, key) != getattr(first.data, key):
                raise NMTError(f"{name}: trained on {key} {getattr(cfg.data, key)} but "
                               f"{first_name} on {getattr(first.data, key)}; {why}")


def load_config(path: Path | str) -> Config:
    """The resolved config of a run directory (or a published model, or an OPUS-MT model
    folder, `hf:` ones included); the one check that a folder is a run."""
    run = RunDir(resolve(path))
    if not run.path.is_dir():
        raise NMTError(f"{run.path}: run directory not found; pass a folder under runs/")
    if is_opus(run.path):  # a transformers Marian folder (OPUS-MT): nmt.models.opus
        return opus_config(run.path)
    if not run.config.is_file():
        raise NMTError(f"{run.path}: not a run directory (no config.yaml); pass a folder "
                       "written by `nmt train`")
    return in_folder(config_from_dict(migrate(read_yaml(run.config)), str(run.config)), run.path)


def checkpoint_path(path: Path | str, which: str = "best") -> Path:
    """The file of a run's `which` checkpoint: "best" falls back to "last" (a run that
    never validated); "averaged" must have been written by `nmt average`."""
    run = RunDir(path)
    ckpt_path = run.checkpoint(which)
    if which == "best" and not ckpt_path.is_file():
        ckpt_path = run.checkpoint("last")
    if which == "averaged" and not ckpt_path.is_file():
        raise NMTError(f"{ckpt_path}: no averaged checkpoint; write it with "
                       f"`nmt average --run {run.path} --last N`")
    if which not in ("best", "last") and not ckpt_path.is_file():
        kept = ", ".join(p.stem for p in sorted(run.checkpoints.glob("*.pt"))) or "none"
        raise NMTError(f"checkpoint {which!r}: {run.path} has no such checkpoint (it has: "
                       f"{kept}); use best, last or averaged")
    return ckpt_path


def load_run(path: Path | str, which: str = "best",
             data: bytes | None = None) -> tuple[Config, Vocab, Seq2Seq, dict]:
    """Config, vocabulary and model (eval mode) of a trained run, plus the checkpoint
    (loaded from `data`, its file's bytes, when the caller has read them). A published
    folder (nmt.models.published) loads the same way, from its safetensors, and an OPUS-MT
    folder from its own files (nmt.models.opus)."""
    run = RunDir(resolve(path))
    if is_opus(run.path):
        return load_opus(run.path, which)
    cfg = load_config(run.path)
    if is_published(run.path):  # a folder of `nmt publish`: its safetensors, checked
        stamp = read_stamp(run.path)
        if which not in ("best", stamp.get("checkpoint")):  # it holds one checkpoint
            raise NMTError(f"{run.path}: a published model holds one checkpoint, its run's "
                           f"{stamp.get('checkpoint')!r}, not {which!r}; drop --checkpoint")
        vocab = Vocab.from_dir(run.spm)
        model = build_model(cfg.model, vocab.src_size, vocab.tgt_size, vocab.joint, cfg.local)
        model.load_state_dict(load_weights(run.path, model))
        return cfg, vocab, model.eval(), {"published": stamp}
    ckpt_path = checkpoint_path(run.path, which)
    payload = load_checkpoint(ckpt_path, data)
    vocab = Vocab.from_dir(run.spm)
    check_vocab(payload, vocab, ckpt_path, f"{run.spm} has {vocab.src_size}/{vocab.tgt_size}; "
                "they do not belong together")
    if (pinned := payload.get("vocab_sha256")) and pinned != {
            p.name: sha256_file(p) for p in sorted(run.spm.glob("*.model"))}:
        raise NMTError(f"{ckpt_path}: trained with another vocabulary than {run.spm} holds "
                       "(the same sizes, other pieces); restore the run's spm/ from a copy")
    model = build_model(cfg.model, vocab.src_size, vocab.tgt_size, vocab.joint, cfg.local)
    try:
        model.load_state_dict(payload["model"])
    except (RuntimeError, KeyError) as exc:
        raise NMTError(f"{ckpt_path}: weights do not match {run.config} "
                       f"({one_line(exc, 100)})") from None
    model.eval()
    return cfg, vocab, model, payload
