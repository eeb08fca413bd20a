"""The `nmt` Transformer as a `transformers` MarianMTModel in Marian's own layout, and back
(docs/deploy.md, "Publish a model").

Both are the architecture of Vaswani et al. (2017): post-norm residual blocks with biases, a
ReLU feed-forward, sinusoidal positions, embeddings scaled by sqrt(D). Three conventions
differ, and each is mapped so that nothing depends on a table or a file the field's tools
drop or rebuild (`save_pretrained`, `Seq2SeqTrainer`, `ct2-transformers-converter`):

- **Positions.** Marian builds its own sinusoids as [sin | cos] halves where ours interleave
  them, and never saves the table. Model dimension j of ours is Marian's dimension
  `position(j)` (sin i -> i, cos i -> D/2 + i): every weight that reads or writes the residual
  stream is permuted so (embeddings, layer norms, the input columns of q/k/v, fc1 and the
  output layer, the output rows and biases of out_proj and fc2). LayerNorm and the attention
  are equivariant under a permutation of the model dimension: the same function, and
  Marian's own table is ours.
- **Padding last.** Marian's vocabulary counts a `<pad>` appended last (id V), which
  CTranslate2's converter removes with its weight rows; the decoder starts from it. Its
  embedding row is zero and its output bias -100 (never generated, no probability mass:
  log-probabilities stay ours). Ours keep their ids (PAD 0, UNK 1, BOS 2, EOS 3); our PAD's
  piece is renamed `<nmt_pad>` in the vocabulary files, a name SentencePiece never emits.
- **The decoder starts from a zero vector**, ours from BOS's embedding e. Every decoder
  embedding is shifted by -e (so BOS's row, and the start, are zero), and layer 0's
  self-attention gets it back in its biases: q/k/v biases + W (sqrt(D) e), out_proj's bias
  + sqrt(D) e. The residual stream after that sublayer is ours again; the output layer (tied
  to the shifted embeddings) moves every logit of a step by the same amount, which softmax
  ignores. The encoder keeps its own, unshifted copy.

`from_marian` undoes all three; the few values the shift's floating point rounds (layer 0's
biases, and the target embeddings when nothing else holds them) travel exactly in the
safetensors file's metadata (`nmt_exact`), so a published folder reads back bit for bit.
"""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import torch

from nmt.core.errors import NMTError
from nmt.core.tokens import BOS, EOS, PAD, UNK

POSITIONS = 1024  # rows of the position table a MarianMTModel builds (its length limit)
SIDES = {"encoder": "enc_layers", "decoder": "dec_layers"}
PAD_PIECE, OUR_PAD_PIECE = "<pad>", "<nmt_pad>"
NEVER = -100.0  # the appended <pad>'s output bias: exp(-100) vanishes beside any real logit
EXACT = "nmt_exact"  # the safetensors metadata key of the exactly kept tensors


def marian_config(cfg, vocab) -> dict:
    """MarianConfig's fields for `cfg`'s Transformer and `vocab` (joint or not); how to
    generate is generation_config.json's alone. No dropout or layer drop: a copy put in
    training mode computes what it computes in eval mode."""
    m = cfg.model
    return {
        "architectures": ["MarianMTModel"], "model_type": "marian",
        "vocab_size": vocab.src_size + 1, "decoder_vocab_size": vocab.tgt_size + 1,
        "share_encoder_decoder_embeddings": False, "tie_word_embeddings": _all_tied(m, vocab),
        "d_model": m.emb_size, "encoder_layers": m.enc_layers, "decoder_layers": m.dec_layers,
        "encoder_attention_heads": m.heads, "decoder_attention_heads": m.heads,
        "encoder_ffn_dim": m.ff_size, "decoder_ffn_dim": m.ff_size,
        "activation_function": "relu", "scale_embedding": True, "normalize_before": False,
        "max_position_embeddings": POSITIONS, "dropout": 0.0, "attention_dropout": 0.0,
        "activation_dropout": 0.0, "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0,
        "init_std": 0.02, "is_encoder_decoder": True, "use_cache": True,
        "pad_token_id": vocab.tgt_size, "eos_token_id": EOS, "bos_token_id": BOS,
        "decoder_start_token_id": vocab.tgt_size, "forced_eos_token_id": EOS,
    }


def _all_tied(m, vocab_or_model) -> bool:
    """Source, target and output embeddings one matrix (a joint, tied vocabulary)."""
    joint = getattr(vocab_or_model, "joint", None)
    if joint is None:  # a model: its modules say
        joint = vocab_or_model.src_embed is vocab_or_model.tgt_embed
    return bool(joint and m.tie_embeddings)


def position(dim: int) -> torch.Tensor:
    """Marian's dimension c holds our dimension position(dim)[c]: sin i at i, cos i at D/2+i."""
    return torch.cat([torch.arange(0, dim, 2), torch.arange(1, dim, 2)])


def to_marian(model) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Our Transformer's weights under MarianMTModel's names and layout, and the safetensors
    metadata that lets from_marian give every tensor back exactly."""
    check_family(model)
    ours = {k: v.detach().float() for k, v in model.state_dict().items()}
    D, p = model.cfg.emb_size, position(model.cfg.emb_size)
    out = {}
    for name, theirs, kind in _names(model):
        tensor = ours[name[0]].chunk(2, 0)[name[1]] if isinstance(name, tuple) else ours[name]
        out[theirs] = _permute(tensor, kind, p)
    out["final_logits_bias"] = out["final_logits_bias"].reshape(1, -1)
    e = out["model.decoder.embed_tokens.weight"][BOS].clone()
    out["model.decoder.embed_tokens.weight"] -= e  # BOS's row, the start, is zero
    _shift_layer0(out, e * math.sqrt(D), +1)
    out = {k: _pad_row(k, v) if _vocab(k) else v for k, v in out.items()}
    if _all_tied(model.cfg, model):
        del out["lm_head.weight"]  # tied to the decoder's (shifted) embeddings
    out = {k: v.contiguous().clone() for k, v in out.items()}
    back = from_marian(out, model)
    exact = {k: v for k, v in ours.items() if not torch.equal(back[k].float(), v)}
    return out, {EXACT: json.dumps({k: _encode(v) for k, v in exact.items()})}


def from_marian(weights: dict[str, torch.Tensor], model, metadata: dict | None = None
                ) -> dict[str, torch.Tensor]:
    """Our Transformer's state dict from MarianMTModel's names and layout (to_marian's
    inverse; exact with the metadata to_marian wrote)."""
    check_family(model)
    D, V = model.cfg.emb_size, model.tgt_embed.num_embeddings
    w = {k: v[:, :V].reshape(-1) if k == "final_logits_bias" else v[:V] if _vocab(k) else v
         for k, v in weights.items()}  # the appended <pad> dropped
    tgt = _target(w, model)
    w["model.decoder.embed_tokens.weight"] = tgt
    w.setdefault("lm_head.weight", tgt)
    _shift_layer0(w, tgt[BOS] * math.sqrt(D), -1)
    inverse = torch.argsort(position(D))
    ours: dict[str, torch.Tensor] = {}
    fused: dict[str, list] = {}
    for name, theirs, kind in _names(model):
        tensor = _permute(w[theirs], kind, inverse)
        if isinstance(name, tuple):
            fused.setdefault(name[0], [None, None])[name[1]] = tensor
        else:
            ours[name] = tensor
    ours.update({name: torch.cat(kv, 0) for name, kv in fused.items()})
    for name, value in json.loads((metadata or {}).get(EXACT, "{}")).items():
        ours[name] = _decode(value)
    missing = set(model.state_dict()) - set(ours)
    if missing:
        raise NMTError(f"the MarianMTModel weights lack {sorted(missing)[0]} (and "
                       f"{len(missing) - 1} more); not an nmt Transformer's export")
    return ours


def read_marian(path: Path, model) -> dict[str, torch.Tensor]:
    """A published `model.safetensors` as `model`'s state dict, exactly."""
    from safetensors import safe_open  # optional extra: [hub]

    with safe_open(str(path), framework="pt") as f:
        weights = {k: f.get_tensor(k) for k in f.keys()}
        metadata = f.metadata() or {}
    return from_marian(weights, model, metadata)


def is_marian(weights: dict) -> bool:
    return "final_logits_bias" in weights


def check_family(model) -> None:
    if getattr(model.cfg, "family", None) != "transformer":
        raise NMTError("only the transformer family has a transformers (MarianMTModel) form; "
                       "other families are published for nmt alone")


def _target(w: dict, model) -> torch.Tensor:
    """The unshifted target embeddings (Marian's layout): the encoder's when all are one
    matrix, the output layer's when tied to them; otherwise the shifted ones plus nothing
    (the metadata then carries the target embeddings and layer 0's biases exactly)."""
    if model.src_embed is model.tgt_embed:
        return w["model.encoder.embed_tokens.weight"]
    if model.tie:
        return w["lm_head.weight"]
    return w["model.decoder.embed_tokens.weight"]


def _shift_layer0(w: dict, d: torch.Tensor, sign: int) -> None:
    """Give decoder layer 0's self-attention back the vector `d` its input lost (sign +1),
    or take it away again (-1): q/k/v biases + W d, out_proj's bias + d (in float64)."""
    prefix = "model.decoder.layers.0.self_attn"
    for proj in ("q_proj", "k_proj", "v_proj"):
        weight, bias = w[f"{prefix}.{proj}.weight"], w[f"{prefix}.{proj}.bias"]
        w[f"{prefix}.{proj}.bias"] = (bias.double() + sign * (weight.double() @ d.double())
                                      ).to(bias.dtype)
    bias = w[f"{prefix}.out_proj.bias"]
    w[f"{prefix}.out_proj.bias"] = (bias.double() + sign * d.double()).to(bias.dtype)


def _vocab(name: str) -> bool:
    return name.endswith("embed_tokens.weight") or name in ("lm_head.weight", "final_logits_bias")


def _pad_row(name: str, tensor: torch.Tensor) -> torch.Tensor:
    """The appended <pad>: a zero embedding row, an output bias of NEVER."""
    if name == "final_logits_bias":
        return torch.cat([tensor, tensor.new_full((1, 1), NEVER)], 1)
    return torch.cat([tensor, tensor.new_zeros(1, tensor.size(1))], 0)


def _permute(tensor: torch.Tensor, kind: str, p: torch.Tensor) -> torch.Tensor:
    """`kind`: "in" permutes the last (model-dimension) axis, "out" the first, "" neither."""
    if kind == "in":
        return tensor[..., p]
    return tensor[p] if kind == "out" else tensor


def _encode(t: torch.Tensor) -> dict:
    data = t.detach().float().contiguous().numpy().tobytes()
    return {"shape": list(t.shape), "float32": base64.b64encode(data).decode()}


def _decode(value: dict) -> torch.Tensor:
    data = bytearray(base64.b64decode(value["float32"]))
    return torch.frombuffer(data, dtype=torch.float32).reshape(value["shape"]).clone()


def _names(model):
    """(our name, or (our fused name, 0 key / 1 value)), Marian's name, how the model
    dimension sits in it ("in": last axis, "out": first, "": not at all)) of every weight."""
    yield "src_embed.weight", "model.encoder.embed_tokens.weight", "in"
    yield "tgt_embed.weight", "model.decoder.embed_tokens.weight", "in"
    yield "out.weight", "lm_head.weight", "in"
    yield "out.bias", "final_logits_bias", ""
    for side, attr in SIDES.items():
        for i in range(getattr(model.cfg, attr)):
            yield from _layer_names(side, i)


def _layer_names(side: str, i: int):
    ours, theirs = f"{'enc' if side == 'encoder' else 'dec'}_layers.{i}", f"model.{side}.layers.{i}"
    attns = [("attn", "self_attn", "sub1")] if side == "encoder" else [
        ("self_attn", "self_attn", "subs.0"), ("cross", "encoder_attn", "subs.1")]
    for mine, marian, sub in attns:
        yield f"{ours}.{mine}.q.weight", f"{theirs}.{marian}.q_proj.weight", "in"
        yield f"{ours}.{mine}.q.bias", f"{theirs}.{marian}.q_proj.bias", ""
        for part, proj in enumerate(("k_proj", "v_proj")):
            yield (f"{ours}.{mine}.kv.weight", part), f"{theirs}.{marian}.{proj}.weight", "in"
            yield (f"{ours}.{mine}.kv.bias", part), f"{theirs}.{marian}.{proj}.bias", ""
        yield f"{ours}.{mine}.o.weight", f"{theirs}.{marian}.out_proj.weight", "out"
        yield f"{ours}.{mine}.o.bias", f"{theirs}.{marian}.out_proj.bias", "out"
        for kind in ("weight", "bias"):
            yield f"{ours}.{sub}.norm.{kind}", f"{theirs}.{marian}_layer_norm.{kind}", "out"
    last = "sub2" if side == "encoder" else "subs.2"
    yield f"{ours}.ff.0.weight", f"{theirs}.fc1.weight", "in"
    yield f"{ours}.ff.0.bias", f"{theirs}.fc1.bias", ""
    yield f"{ours}.ff.3.weight", f"{theirs}.fc2.weight", "out"
    yield f"{ours}.ff.3.bias", f"{theirs}.fc2.bias", "out"
    for kind in ("weight", "bias"):
        yield f"{ours}.{last}.norm.{kind}", f"{theirs}.final_layer_norm.{kind}", "out"


def generation_config(vocab, beam: int, alpha: float, max_length: int) -> dict:
    """How a plain `model.generate(**batch)` decodes: `nmt translate`'s defaults where
    transformers can say them (the run's beam, a sentence ends when `beam` hypotheses have
    ended, PAD, BOS and the appended <pad> never generated, EOS forced at the limit). The
    per-sentence limit and GNMT's length penalty it cannot: the card's first code block
    passes the closest arguments (nmt.decoding.card)."""
    return {"decoder_start_token_id": vocab.tgt_size, "bos_token_id": BOS, "eos_token_id": EOS,
            "pad_token_id": vocab.tgt_size, "forced_eos_token_id": EOS,
            "bad_words_ids": [[PAD], [BOS], [vocab.tgt_size]], "max_length": max_length,
            "num_beams": beam, "early_stopping": beam > 1, "length_penalty": alpha}


def tokenizer_files(vocab, out: Path) -> None:
    """MarianTokenizer's files: source.spm, target.spm, vocab.json (every piece's id: ours,
    our PAD's piece renamed, Marian's <pad> appended), tokenizer_config.json and
    special_tokens_map.json. Special-token strings in a text are read as text, as nmt reads
    them (`split_special_tokens`), and the SentencePiece models normalise as nmt does
    (nmt.models.marian_text)."""
    from nmt.models.marian_text import charsmap, reading_as_nmt  # start-up: publish's only

    out.mkdir(parents=True, exist_ok=True)
    table = charsmap(out)
    for name, path in (("source.spm", vocab.paths[0]), ("target.spm", vocab.paths[1])):
        model = path.read_bytes()
        (out / name).write_bytes(reading_as_nmt(model, table) or model)
    pieces = _pieces(vocab.tgt, vocab.tgt_size)
    if not vocab.joint:
        (out / "target_vocab.json").write_text(json.dumps(pieces, ensure_ascii=False))
        pieces = _pieces(vocab.src, vocab.src_size)
    (out / "vocab.json").write_text(json.dumps(pieces, ensure_ascii=False))
    special = {"eos_token": vocab.tgt.id_to_piece(EOS), "unk_token": vocab.tgt.id_to_piece(UNK),
               "pad_token": PAD_PIECE}
    (out / "special_tokens_map.json").write_text(json.dumps(special))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "MarianTokenizer", "model_max_length": POSITIONS,
        "separate_vocabs": not vocab.joint, "split_special_tokens": True, **special}, indent=1))


def _pieces(sp, size: int) -> dict[str, int]:
    """Piece -> id, ours, with our PAD's piece renamed and Marian's <pad> appended last."""
    pieces = {sp.id_to_piece(i): i for i in range(size)}
    if pieces.get(PAD_PIECE) == PAD:
        del pieces[PAD_PIECE]
        pieces[OUR_PAD_PIECE] = PAD
    return {**dict(sorted(pieces.items(), key=lambda kv: kv[1])), PAD_PIECE: size}
