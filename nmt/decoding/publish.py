"""`nmt publish RUN --out DIR`: a trained run as a self-contained model folder, the way the
field shares models (docs/deploy.md, "Publish a model").

DIR holds the weights as `model.safetensors` (never a pickle), the SentencePiece model(s)
in `spm/`, the resolved `config.yaml`, the run's `scores.json`, a `README.md` model card
with the Hub's YAML metadata, and the stamp `nmt.json` (every file's size and sha256). For
the Transformer, `model.safetensors` is a `transformers` MarianMTModel's, with its
`config.json`, `generation_config.json` and MarianTokenizer's files, so `transformers`
loads the folder as it is; `nmt.load(DIR)` reads the same file back (nmt.models.marian).
With `ctranslate2`, the CTranslate2 export (nmt.decoding.export) goes in `ctranslate2/`.
The folder is written whole or not at all (a scratch folder swapped into place)."""

from __future__ import annotations

import glob
import json
import os
import shutil
from pathlib import Path

from nmt.core.checkpoint import load_checkpoint
from nmt.core.engine import MAX_STEPS
from nmt.core.errors import NMTError
from nmt.core.locks import file_lock
from nmt.core.machine import cpu_model
from nmt.core.rundir import RunDir
from nmt.core.scratch import restore, scratch, swap_in, sweep
from nmt.decoding.card import model_card
from nmt.decoding.export import alignment_of, sha256
from nmt.models.marian import (
    POSITIONS,
    generation_config,
    marian_config,
    to_marian,
    tokenizer_files,
)
from nmt.models.published import FORMAT, INSTALL, STAMP, is_published
from nmt.models.runs import checkpoint_path, load_run


def publish(run: Path | str, out: Path | str, checkpoint: str = "best",
            ctranslate2: bool = False, license: str = "other") -> Path:
    """Write the model folder `out` of `run`'s `checkpoint`; returns it."""
    try:
        from safetensors.torch import save_file  # optional extra: [hub]
    except ImportError:
        raise NMTError(f"nmt publish needs safetensors: {INSTALL}") from None
    run, out = Path(run), Path(out).resolve()
    if out.exists() and any(out.iterdir()) and not is_published(out):
        raise NMTError(f"{out}: not empty and not a published model; pass a new folder")
    cfg, vocab, model, payload = load_run(run, checkpoint)
    if "published" in payload:
        raise NMTError(f"{run}: already a published model; publish the run it came from")
    with file_lock(out.parent / f".{out.name}.lock"):  # one publisher of a folder at a time
        restore(out)  # the old folder a swap killed between its two renames left aside
        sweep(out.parent, glob.escape(out.name))  # what a killed publish left
        _write(run, out, checkpoint, (cfg, vocab, model), ctranslate2, license, save_file)
    return out


def _write(run: Path, out: Path, checkpoint: str, loaded: tuple, ctranslate2: bool,
           license: str, save_file) -> None:
    """publish's folder, written into a scratch folder and swapped in at `out`."""
    cfg, vocab, model = loaded
    with scratch(out) as tmp:
        weights, aliases, extra = _weights(model)
        save_file(weights, str(tmp / "model.safetensors"),
                  metadata={"format": "pt", "nmt": FORMAT, **extra})
        shutil.copytree(RunDir(run).spm, tmp / "spm")
        shutil.copy2(RunDir(run).config, tmp / "config.yaml")
        if cfg.model.family == "transformer":
            _transformers_files(cfg, vocab, model, tmp)
        if ctranslate2:
            from nmt.decoding.export import export  # optional extra: [deploy] (its stamp)

            export(run, checkpoint, out=tmp / "ctranslate2")
            (tmp / ".ctranslate2.lock").unlink(missing_ok=True)  # the export's, not a file
        ckpt = checkpoint_path(run, checkpoint)
        facts = _facts(run, ckpt, checkpoint)
        if facts["scores"]:
            (tmp / "scores.json").write_text(json.dumps(facts["scores"], indent=2,
                                                        ensure_ascii=False) + "\n")
        (tmp / "README.md").write_text(model_card(cfg, vocab, model, run, facts, license),
                                       encoding="utf-8")
        _same_permissions(tmp)
        files = {p.relative_to(tmp).as_posix(): {"bytes": p.stat().st_size, "sha256": sha256(p)}
                 for p in sorted(tmp.rglob("*")) if p.is_file()}
        stamp = {"format": FORMAT, "family": cfg.model.family, "run": str(run),
                 "checkpoint": checkpoint, "checkpoint_sha256": sha256(ckpt),
                 "aliases": aliases, "files": files}
        (tmp / STAMP).write_text(json.dumps(stamp, indent=1) + "\n", encoding="utf-8")
        swap_in(tmp, out)  # an older publication is left in tmp, removed with it


def push(folder: Path | str, repo: str, private: bool = False) -> str:
    """Upload a published folder to the Hub as model repository `repo` (ORG/NAME), made when
    missing; the token is huggingface_hub's (HF_TOKEN, or `hf auth login`'s). Returns the
    commit's URL."""
    try:
        from huggingface_hub import CommitOperationAdd, HfApi, get_token  # optional extra: [hub]
    except ImportError:
        raise NMTError(f"--push needs huggingface_hub: {INSTALL}") from None
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise NMTError(f"--push {repo}: name the model repository ORG/NAME")
    if not get_token():
        raise NMTError("--push: no Hugging Face token; set HF_TOKEN or run `hf auth login` "
                       "(the folder is written, push it later with the same command)")
    api = HfApi()
    try:
        api.create_repo(repo, repo_type="model", private=private, exist_ok=True)
        files = sorted(p for p in Path(folder).rglob("*") if p.is_file())
        info = api.create_commit(repo, repo_type="model", operations=[
            CommitOperationAdd(path_in_repo=p.relative_to(folder).as_posix(), path_or_fileobj=str(p))
            for p in files], commit_message=f"nmt publish {Path(folder).name}")
    except Exception as exc:  # noqa: BLE001 - any hub failure becomes one clear line
        raise NMTError(f"--push {repo}: the upload failed ({exc}); the folder {folder} is "
                       "written, push it again later") from None
    return str(getattr(info, "commit_url", info))


def _same_permissions(folder: Path) -> None:
    """Every file of the folder readable as a text file the user writes is (0644 under the
    usual umask 022): safetensors writes its file 0600, copies keep their source's mode."""
    umask = os.umask(0)
    os.umask(umask)
    for path in folder.rglob("*"):
        path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)


def _weights(model) -> tuple[dict, dict, dict]:
    """The tensors to save, {name: the name it was saved under} for tied ones, and the
    safetensors metadata the Transformer's needs read back exactly."""
    if model.cfg.family == "transformer":
        weights, metadata = to_marian(model)
        return weights, {}, metadata
    weights, aliases, seen = {}, {}, {}
    for name, tensor in model.state_dict().items():
        key = (tensor.data_ptr(), tuple(tensor.shape))
        if key in seen:
            aliases[name] = seen[key]
        else:
            seen[key] = name
            weights[name] = tensor.detach().contiguous().clone()
    return weights, aliases, {}


def _transformers_files(cfg, vocab, model, out: Path) -> None:
    limit = min(MAX_STEPS, POSITIONS)
    config = marian_config(cfg, vocab)
    if (head := alignment_of(cfg)) is not None:  # a guided run: its alignment head, named
        config["nmt_alignment_head"] = {**head, "reading": "cross-attention of decoder layer "
                                        "`layer` (0-based; negative from the top), its first "
                                        "`heads` heads averaged, at the step that predicts "
                                        "each target piece"}
    (out / "config.json").write_text(json.dumps(config, indent=1))
    (out / "generation_config.json").write_text(json.dumps(generation_config(
        vocab, cfg.decode.beam, cfg.decode.length_penalty, limit), indent=1))
    tokenizer_files(vocab, out)


def _facts(run: Path, ckpt: Path, checkpoint: str) -> dict:
    """What the card says of the training: steps, minutes, precision, machine, corpus, and
    the scores of the checkpoint published (an entry from before scores named their
    checkpoint counts as the best one's: training and `nmt evaluate` score that)."""
    payload = load_checkpoint(ckpt)
    progress = payload.get("progress", {})
    rundir = RunDir(run)
    precision = {}
    if rundir.precision.is_file():
        precision = json.loads(rundir.precision.read_text())
    kept = rundir.path / "corpus" / "manifest.json"  # an older run may have kept none
    manifest = json.loads(kept.read_text()) if kept.is_file() else {}
    scores = rundir.read_scores()
    digest = sha256(ckpt) if scores else None
    scores = {split: entry for split, entry in scores.items()
              if entry.get("checkpoint_sha256", digest if checkpoint == "best" else None)
              == digest}
    return {"steps": progress.get("step"), "minutes": round(progress.get("elapsed", 0) / 60, 1),
            "precision": precision.get("precision", "fp32"), "machine": cpu_model(),
            "manifest": manifest, "scores": scores}
