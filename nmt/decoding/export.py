"""A Transformer run as a CTranslate2 model (docs/deploy.md).

The model is described through CTranslate2's specification API and its weights are set from
our checkpoint, so what the engine computes is our model: post-norm layers, our sinusoid
table (interleaved sin/cos, set explicitly), the sqrt(D) embedding scale, the fused
key/value projections, tied embeddings, the SentencePiece pieces and special tokens, and
layer norms at PyTorch's epsilon. A guided run exports its supervised layer and heads as the
engine's alignment layer and heads, so the attention the engine returns is the map our own
reading links words from.

Where. `--engine ctranslate2` reads the run's float32 export, `<run>/ctranslate2/<checkpoint>/`,
and CTranslate2 quantises it at load to the compute type asked for, which runs the weights
an int8 export holds. `nmt export --quantize int8` without `--out` writes
`<checkpoint>-int8/` beside it, so one quantisation never replaces another's folder. A
published model (`nmt publish --ctranslate2`) holds its export in `ctranslate2/`, read as
it is: the folder's own stamp covers it, and nothing is ever written into the folder.

Current. `export.json` (the stamp) names the quantisation, the SHA-256 of the checkpoint's
bytes (read once, hashed, and loaded from those same bytes, so training replacing the file
meanwhile cannot make the stamp name other weights) and the size and SHA-256 of every file
the export wrote. The export is stale when any of them differs: another checkpoint, another
quantisation, a file cut short, changed or unreadable.

Replaced. Only our own files, and never half: one lock (`.<folder>.lock` beside the folder,
nmt.core.locks) is held around the stale check, the export and the engine's reading of the
folder. An export is written into a new, uniquely named folder beside the target; the old
export, if any, is renamed aside to another unique name, the new one renamed into place,
and the aside copy's files deleted by the names its stamp lists. A folder that holds
anything else (or is not an export at all) is refused before anything is written. A
reader holding the lock sees the old export or the new one, complete. A crash never leaves
a half-written folder at the target: at worst (between the two renames) the target is
missing, which the engine treats as no export, and the old one waits whole in its hidden
folder aside.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import sys
import uuid
from contextlib import AbstractContextManager
from pathlib import Path

import torch

from nmt.core.engine import EXPORTABLE, QUANTIZE
from nmt.core.errors import NMTError
from nmt.core.locks import file_lock
from nmt.core.rundir import RunDir
from nmt.core.scratch import restore, scratch, swap_in, sweep
from nmt.core.tokens import BOS, EOS, UNK
from nmt.models.opus import is_opus
from nmt.models.published import is_published, resolve
from nmt.models.runs import checkpoint_path, load_config, load_run
from nmt.models.transformer import sinusoids

INSTALL = "pip install 'nmt[deploy]' (CTranslate2 4.8.5)"
POSITIONS = 2048  # rows of the exported sinusoid table: a 1,000-piece source, 1,510 steps
LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default, which our layers use
STAMP = "export.json"
# What CTranslate2's ModelSpec.save writes: the files of an export whose stamp lists none
# (an older nmt's, or a damaged stamp), which may be replaced along with it.
CT2_FILES = frozenset({"model.bin", "config.json", "shared_vocabulary.json",
                       "source_vocabulary.json", "target_vocabulary.json",
                       "shared_vocabulary.txt", "source_vocabulary.txt",
                       "target_vocabulary.txt"})


def ctranslate2_module():
    """The ctranslate2 package, or NMTError with the line that installs it."""
    try:
        import ctranslate2  # optional extra: [deploy]
    except ImportError:
        raise NMTError(f"the CTranslate2 engine is not installed: {INSTALL}") from None
    return ctranslate2


def export_dir(run: Path, checkpoint: str = "best", quantize: str = "float32") -> Path:
    """Where an export goes without --out: the float32 one (the engine's) is named after the
    checkpoint, another quantisation after both."""
    if is_published(run):  # `nmt publish --ctranslate2` put its one float32 export there
        return Path(run) / "ctranslate2"
    name = checkpoint if quantize == "float32" else f"{checkpoint}-{quantize}"
    return RunDir(run).path / "ctranslate2" / name


def refuse_family(run: Path, family: str) -> None:
    if is_opus(resolve(run)):  # our export writes nmt's Transformer, not Marian's
        raise NMTError(f"{run}: an OPUS-MT model decodes on PyTorch here; for CTranslate2 "
                       "convert it with its own tool: ct2-transformers-converter --model DIR")
    if family not in EXPORTABLE:
        raise NMTError(f"{run}: CTranslate2 runs Transformers only, and this run is "
                       f"{family}; decode it on PyTorch, in int8 with --quantize int8")


def sha256(path: Path | bytes) -> str:
    """The SHA-256 of a file, or of bytes already read."""
    if isinstance(path, bytes):
        return hashlib.sha256(path).hexdigest()
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def export_lock(out: Path) -> AbstractContextManager[None]:
    """The lock of one export folder: `.<name>.lock` beside it (a lock inside would move
    with the folder it guards)."""
    out = Path(out).resolve()
    return file_lock(out.parent / f".{out.name}.lock")


def stale(run: Path, checkpoint: str = "best", out: Path | None = None,
          quantize: str = "float32") -> str | None:
    """Why the export of `run`'s `checkpoint` cannot be used as it is (missing, damaged, in
    another quantisation or made from other weights), or None when it is current."""
    out = Path(out) if out else export_dir(run, checkpoint, quantize)
    stamp = out / STAMP
    if not (out / "model.bin").is_file() or not stamp.is_file():
        return f"{out}: no CTranslate2 export"
    made = _read_stamp(out)
    if made is None:
        return f"{stamp}: unreadable, or written by an older nmt"
    if made["quantize"] != quantize:
        return f"{out}: exported in {made['quantize']}, not {quantize}"
    damaged = _damaged(out, made["files"])
    if damaged:
        return damaged
    try:
        current = sha256(checkpoint_path(run, checkpoint))
    except OSError:
        return f"{out}: its {checkpoint} checkpoint cannot be read"
    if made["checkpoint_sha256"] != current:
        return f"{out}: made from an older {checkpoint} checkpoint"
    return None


def _read_stamp(out: Path) -> dict | None:
    """The stamp of the export in `out` (files as name -> (bytes, sha256)), or None when it
    is missing, damaged or lists no files (an older nmt's)."""
    try:
        made = json.loads((out / STAMP).read_text(encoding="utf-8"))
        return {"quantize": str(made["quantize"]),
                "checkpoint_sha256": str(made["checkpoint_sha256"]),
                "files": {str(name): (int(f["bytes"]), str(f["sha256"]))
                          for name, f in made["files"].items()}}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _damaged(out: Path, files: dict) -> str | None:
    """Why a file the export wrote is not as written (missing, cut short, changed,
    unreadable), or None. Sizes first: a cut file is named without reading any."""
    for name, (wrote, _) in files.items():
        try:
            size = (out / name).stat().st_size
        except OSError:
            return f"{out / name}: missing"
        if size != wrote:
            return f"{out / name}: damaged ({size:,} bytes, the export wrote {wrote:,})"
    for name, (_, digest) in files.items():
        try:
            if sha256(out / name) != digest:
                return f"{out / name}: damaged (its bytes changed since the export)"
        except OSError as exc:
            return f"{out / name}: unreadable ({exc.strerror or exc})"
    return None


def export(run: Path | str, checkpoint: str = "best", quantize: str = "float32",
           out: Path | None = None) -> Path:
    """Write the CTranslate2 model of a Transformer run; returns its folder. `out` must be
    new, empty or an export (which is replaced); nothing else in it is ever deleted."""
    ct2 = ctranslate2_module()
    if quantize not in QUANTIZE:
        raise NMTError(f"--quantize {quantize!r}: use one of {', '.join(QUANTIZE)}")
    run = Path(run)
    if is_published(run):
        raise NMTError(f"{run}: a published model is never exported again; its CTranslate2 "
                       "export is its ctranslate2/ folder (nmt publish --ctranslate2)")
    out = (Path(out) if out else export_dir(run, checkpoint, quantize)).resolve()
    refuse_family(run, load_config(run).model.family)  # refusals come before any write
    _own_files(out)
    with export_lock(out):
        path = checkpoint_path(run, checkpoint)
        try:
            data = path.read_bytes()  # hashed and loaded: the stamp names what is exported
        except OSError as exc:
            raise NMTError(f"{path}: cannot read the checkpoint ({exc.strerror or exc}); "
                           "train first or pass another --run") from None
        cfg, vocab, model, _ = load_run(run, checkpoint, data)
        spec = transformer_spec(ct2, cfg, vocab, model)
        spec.validate()
        spec.optimize(quantization=quantize)
        restore(out)  # the old export a swap killed between its two renames left aside
        sweep(out.parent, glob.escape(out.name))  # a killed export's scratch folder
        with scratch(out) as tmp:  # removed on any failure, or by the next export if killed
            spec.save(str(tmp))
            files = {p.name: {"bytes": p.stat().st_size, "sha256": sha256(p)}
                     for p in sorted(tmp.iterdir())}
            stamp = {"run": str(run), "checkpoint": checkpoint, "quantize": quantize,
                     "checkpoint_sha256": sha256(data), "alignment": alignment_of(cfg),
                     "ctranslate2": ct2.__version__, "files": files}
            (tmp / STAMP).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
            _swap(tmp, out)
    return out


def open_translator(run: Path, checkpoint: str = "best", **options):
    """CTranslate2's Translator on the run's float32 export (`options`: the Translator's),
    exported first when stale, saying why in one line. The export's lock is held until the
    engine has read the folder, so no other process replaces it meanwhile."""
    ct2 = ctranslate2_module()
    out = export_dir(run, checkpoint)
    if is_published(run):  # read only: its files were checked against the folder's stamp
        if not (out / "model.bin").is_file():
            raise NMTError(f"{run}: published without a CTranslate2 export; decode it on "
                           "PyTorch, or publish the run again with --ctranslate2")
        return ct2.Translator(str(out), **options)
    with export_lock(out):
        reason = stale(run, checkpoint)
        if reason:
            again = "" if checkpoint == "best" else f" --checkpoint {checkpoint}"
            print(f"{reason}: exporting it (nmt export --run {run}{again})", file=sys.stderr)
            export(run, checkpoint)
        return ct2.Translator(str(out), **options)


def _unique(out: Path, kind: str) -> Path:
    """A name beside `out` that no one else uses: hidden, and named after it."""
    return out.with_name(f".{out.name}.{kind}-{uuid.uuid4().hex[:12]}")


def _own_files(out: Path) -> set[str]:
    """The names in `out` that an export wrote, after checking that `out` holds nothing
    else: it must be missing, empty or an export."""
    if not out.exists():
        return set()
    if not out.is_dir():
        raise NMTError(f"{out}: not a folder; pass a new or empty folder to --out")
    names = {p.name for p in out.iterdir()}
    if names and STAMP not in names:
        raise NMTError(f"{out}: not empty and not a CTranslate2 export (no {STAMP}); nmt "
                       "export writes only into a new or empty folder, or over its own "
                       "export: pass another --out")
    made = _read_stamp(out) if names else None
    own = ({STAMP, *made["files"]} if made else {STAMP, *CT2_FILES}) & names
    foreign = sorted(names - own)
    if foreign:
        listed = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if foreign[3:] else "")
        raise NMTError(f"{out}: holds files the export did not write ({listed}); move them "
                       "out of it or pass another --out")
    return own


def _swap(tmp: Path, out: Path) -> None:
    """Put the complete export `tmp` at `out` in one step (nmt.core.scratch.swap_in); the
    old export, now at `tmp`, loses its own files, and is kept aside, named, when
    something else appeared in it meanwhile (not ours to delete)."""
    own = _own_files(out) if out.exists() else set()
    swap_in(tmp, out)
    if not tmp.exists():
        return
    for name in own:
        (tmp / name).unlink(missing_ok=True)
    if any(tmp.iterdir()):
        aside = _unique(out, "kept")
        os.rename(tmp, aside)
        print(f"{out}: the previous export is kept in {aside} (it holds files the export "
              "did not write)", file=sys.stderr)


def alignment_of(cfg) -> dict | None:
    """The engine's alignment layer and heads: a guided run's supervised ones (read
    naively, as nmt.align.guided reads them); None for an unguided run, whose default
    reading (every layer and head) the engine cannot return."""
    if not cfg.guided.weight:
        return None
    return {"layer": cfg.guided.layer, "heads": cfg.guided.heads,
            "full_context": cfg.guided.full_context}


def transformer_spec(ct2, cfg, vocab, model):
    """CTranslate2's TransformerSpec with our weights in it."""
    m, align = cfg.model, alignment_of(cfg) or {"layer": -1, "heads": 1}
    spec = ct2.specs.TransformerSpec.from_config(
        (m.enc_layers, m.dec_layers), m.heads, pre_norm=False,
        activation=ct2.specs.Activation.RELU,
        alignment_layer=align["layer"], alignment_heads=align["heads"])
    table = _numpy(sinusoids(POSITIONS, m.emb_size))
    enc, dec = spec.encoder, spec.decoder
    enc.embeddings[0].weight = _numpy(model.src_embed.weight)
    dec.embeddings.weight = _numpy(model.tgt_embed.weight)
    enc.position_encodings.encodings = table
    dec.position_encodings.encodings = table
    for ours, theirs in zip(model.enc_layers, enc.layer):
        _self_attention(theirs.self_attention, ours.attn, ours.sub1.norm)
        _ffn(theirs.ffn, ours.ff, ours.sub2.norm)
    for ours, theirs in zip(model.dec_layers, dec.layer):
        _self_attention(theirs.self_attention, ours.self_attn, ours.subs[0].norm)
        _linear(theirs.attention.linear[0], ours.cross.q)
        _linear(theirs.attention.linear[1], ours.cross.kv)
        _linear(theirs.attention.linear[2], ours.cross.o)
        _norm(theirs.attention.layer_norm, ours.subs[1].norm)
        _ffn(theirs.ffn, ours.ff, ours.subs[2].norm)
    _linear(dec.projection, model.out)
    src_pieces = [vocab.src.id_to_piece(i) for i in range(vocab.src_size)]
    tgt_pieces = [vocab.tgt.id_to_piece(i) for i in range(vocab.tgt_size)]
    spec.register_source_vocabulary(src_pieces)
    spec.register_target_vocabulary(tgt_pieces)
    spec.config.unk_token, spec.config.bos_token = tgt_pieces[UNK], tgt_pieces[BOS]
    spec.config.eos_token, spec.config.decoder_start_token = tgt_pieces[EOS], tgt_pieces[BOS]
    spec.config.layer_norm_epsilon = LAYER_NORM_EPS
    return spec


def _numpy(tensor):
    return tensor.detach().float().cpu().numpy().copy()


def _linear(spec, layer) -> None:
    spec.weight = _numpy(layer.weight)
    if layer.bias is not None:
        spec.bias = _numpy(layer.bias)


def _norm(spec, norm) -> None:
    spec.gamma, spec.beta = _numpy(norm.weight), _numpy(norm.bias)


def _self_attention(spec, attn, norm) -> None:
    """CTranslate2 fuses queries, keys and values in one projection (q, k, v stacked);
    ours keeps the query apart and keys/values fused (k, v)."""
    spec.linear[0].weight = _numpy(torch.cat([attn.q.weight, attn.kv.weight]))
    spec.linear[0].bias = _numpy(torch.cat([attn.q.bias, attn.kv.bias]))
    _linear(spec.linear[1], attn.o)
    _norm(spec.layer_norm, norm)


def _ffn(spec, ff, norm) -> None:
    _linear(spec.linear_0, ff.get_submodule("0"))
    _linear(spec.linear_1, ff.get_submodule("3"))
    _norm(spec.layer_norm, norm)
