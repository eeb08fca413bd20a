"""A published model folder (`nmt publish`, docs/deploy.md "Publish a model") loaded back:
what `nmt.load`, `nmt translate`, `nmt align` and `nmt serve` read when given one.

The folder's stamp `nmt.json` lists every file with its size and sha256; a folder with a
file missing, cut or changed is refused in one line before anything is read. The weights
are `model.safetensors`, read with safetensors (never unpickled): for the Transformer they
are a `transformers` MarianMTModel's (nmt.models.marian converts them back, exactly), for
the other families our own state dict."""

from __future__ import annotations

import json
from pathlib import Path

from nmt.core.errors import NMTError, one_line
from nmt.data.folder import sha256_file

STAMP = "nmt.json"
FORMAT = "nmt-model-1"
INSTALL = "pip install -e '.[hub]'"


HUB_PREFIX = "hf:"
# Weights of other frameworks an OPUS-MT repository also holds: never read, not downloaded
OTHER_FRAMEWORKS = ["*.h5", "*.msgpack", "*.ot", "*.onnx", "*.tflite"]


def is_published(path: Path | str) -> bool:
    return (Path(path) / STAMP).is_file()


def resolve(run: Path | str) -> Path:
    """A run's folder: `hf:ORG/NAME[@REVISION]` is downloaded into the Hub's cache (pinned
    to the commit the revision names; offline with HF_HUB_OFFLINE=1 from the cache) and must
    be a published model (its stamp checked when loaded) or an OPUS-MT one
    (nmt.models.opus: safetensors, or torch's weights-only loader): nothing downloaded is
    unpickled into code.
    Any other path is itself."""
    text = str(run)
    if not text.startswith(HUB_PREFIX):
        return Path(run)
    repo, _, revision = text[len(HUB_PREFIX):].partition("@")
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise NMTError(f"{text}: name a Hub model as hf:ORG/NAME or hf:ORG/NAME@REVISION")
    try:
        from huggingface_hub import snapshot_download  # optional extra: [hub]
    except ImportError:
        raise NMTError(f"{text}: loading from the Hub needs huggingface_hub: {INSTALL}") from None
    try:
        folder = Path(snapshot_download(repo, revision=revision or None,
                                        ignore_patterns=OTHER_FRAMEWORKS))
    except Exception as exc:  # noqa: BLE001 - any hub failure becomes one clear line
        raise NMTError(f"{text}: could not download it ({one_line(exc)}); check the name, "
                       "the revision and the network (or HF_HUB_OFFLINE=1 with a cached copy)"
                       ) from None
    from nmt.models.opus import is_opus  # start-up: this module stays light

    if not is_published(folder) and not is_opus(folder):
        raise NMTError(f"{text}: not a model published by `nmt publish` (no {STAMP}) and "
                       "not a transformers Marian (OPUS-MT) model; nmt loads only those from "
                       "the Hub")
    return folder


def read_stamp(folder: Path) -> dict:
    """The folder's stamp, every listed file checked (size, then sha256)."""
    path = folder / STAMP
    try:
        stamp = json.loads(path.read_text(encoding="utf-8"))
        if stamp.get("format") != FORMAT or not isinstance(stamp.get("files"), dict):
            raise ValueError(f"not {FORMAT}")
    except (OSError, ValueError) as exc:
        raise NMTError(f"{path}: not a published nmt model's stamp ({one_line(exc)}); "
                       "publish it again with `nmt publish`") from None
    for name, entry in stamp["files"].items():
        file = folder / name
        if not file.is_file():
            raise NMTError(f"{file}: missing from the published model; download or publish "
                           "it again")
        if file.stat().st_size != entry["bytes"] or sha256_file(file) != entry["sha256"]:
            raise NMTError(f"{file}: not the file the model was published with (size or "
                           "sha256 differs: cut or altered); download or publish it again")
    return stamp


def load_weights(folder: Path, model) -> dict:
    """`model.safetensors` as `model`'s state dict (converted from Marian's names for the
    Transformer)."""
    try:
        from safetensors.torch import load_file  # optional extra: [hub]
    except ImportError:
        raise NMTError(f"reading a published model needs safetensors: {INSTALL}") from None
    weights = load_file(str(folder / "model.safetensors"))
    if "final_logits_bias" in weights:  # a MarianMTModel's
        from nmt.models.marian import read_marian  # start-up: the Transformer's only

        return read_marian(folder / "model.safetensors", model)
    state = model.state_dict()  # tied names were written once: each gets its one tensor
    for name, alias in json.loads((folder / STAMP).read_text())["aliases"].items():
        weights[name] = weights[alias]
    missing = set(state) - set(weights)
    if missing:
        raise NMTError(f"{folder / 'model.safetensors'}: lacks {sorted(missing)[0]}; not "
                       "this config's model")
    return weights
