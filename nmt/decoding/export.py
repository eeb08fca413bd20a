"""A Transformer run as a CTranslate2 model (docs/deploy.md).

The model is described through CTranslate2's specification API and its weights are set from
our checkpoint, so what the engine computes is our model: post-norm layers, our sinusoid
table (interleaved sin/cos, set explicitly), the sqrt(D) embedding scale, the fused
key/value projections, tied embeddings, the SentencePiece pieces and special tokens, and
layer norms at PyTorch's epsilon. A guided run exports its supervised layer and heads as the
engine's alignment layer and heads, so the attention the engine returns is the map our own
reading links words from.

An export lives in the run (`<run>/ctranslate2/<checkpoint>/`) beside `export.json`, which
names the checkpoint's SHA-256: an export whose checkpoint has changed is stale.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import torch

from nmt.core.engine import EXPORTABLE, QUANTIZE
from nmt.core.errors import NMTError
from nmt.core.rundir import RunDir
from nmt.core.tokens import BOS, EOS, UNK
from nmt.models.runs import checkpoint_path, load_run
from nmt.models.transformer import sinusoids

INSTALL = "pip install 'nmt[deploy]' (CTranslate2 4.8.5)"
POSITIONS = 2048  # rows of the exported sinusoid table: a 1,000-piece source, 1,510 steps
LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default, which our layers use
STAMP = "export.json"


def ctranslate2_module():
    """The ctranslate2 package, or NMTError with the line that installs it."""
    try:
        import ctranslate2  # optional extra: [deploy]
    except ImportError:
        raise NMTError(f"the CTranslate2 engine is not installed: {INSTALL}") from None
    return ctranslate2


def export_dir(run: Path, checkpoint: str = "best") -> Path:
    return RunDir(run).path / "ctranslate2" / checkpoint


def refuse_family(run: Path, family: str) -> None:
    if family not in EXPORTABLE:
        raise NMTError(f"{run}: CTranslate2 runs Transformers only, and this run is "
                       f"{family}; decode it on PyTorch, in int8 with --quantize int8")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def stale(run: Path, checkpoint: str = "best", out: Path | None = None) -> str | None:
    """Why the export of `run`'s `checkpoint` cannot be used as it is (missing, or made from
    other weights), or None when it is current."""
    out = Path(out) if out else export_dir(run, checkpoint)
    stamp = out / STAMP
    if not (out / "model.bin").is_file() or not stamp.is_file():
        return f"{out}: no CTranslate2 export"
    try:
        made_from = json.loads(stamp.read_text(encoding="utf-8"))["checkpoint_sha256"]
    except (ValueError, KeyError, TypeError):
        return f"{stamp}: unreadable"
    if made_from != sha256(checkpoint_path(run, checkpoint)):
        return f"{out}: made from an older {checkpoint} checkpoint"
    return None


def export(run: Path | str, checkpoint: str = "best", quantize: str = "float32",
           out: Path | None = None) -> Path:
    """Write the CTranslate2 model of a Transformer run; returns its folder."""
    ct2 = ctranslate2_module()
    if quantize not in QUANTIZE:
        raise NMTError(f"--quantize {quantize!r}: use one of {', '.join(QUANTIZE)}")
    run = Path(run)
    cfg, vocab, model, _ = load_run(run, checkpoint)
    refuse_family(run, cfg.model.family)
    spec = transformer_spec(ct2, cfg, vocab, model)
    out = Path(out) if out else export_dir(run, checkpoint)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    spec.validate()
    spec.optimize(quantization=quantize)
    spec.save(str(tmp))
    stamp = {"run": str(run), "checkpoint": checkpoint, "quantize": quantize,
             "checkpoint_sha256": sha256(checkpoint_path(run, checkpoint)),
             "alignment": alignment_of(cfg), "ctranslate2": ct2.__version__}
    (tmp / STAMP).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


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
