"""The `nmt` Transformer as a `transformers` MarianMTModel, and back (docs/deploy.md,
"Publish a model").

Both are the architecture of Vaswani et al. (2017): post-norm residual blocks with biases, a
ReLU feed-forward, sinusoidal positions, embeddings scaled by sqrt(D) and tied with a joint
vocabulary. The one difference, Marian's sinusoids laid out as [sin | cos] halves where ours
interleave them, disappears because Marian's position table is a weight that
`from_pretrained` loads: ours is written there, row for row. The rest maps one to one:
our fused key/value projection is split into Marian's k_proj and v_proj, our output layer's
bias is Marian's `final_logits_bias`, and the special ids (PAD 0, UNK 1, BOS 2, EOS 3)
become the config's and the generation config's (BOS starts the decoder; PAD and BOS are
never generated, as in our search).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from nmt.core.errors import NMTError
from nmt.core.tokens import BOS, EOS, PAD, UNK
from nmt.models.transformer import sinusoids

POSITIONS = 1024  # rows of the position table a MarianMTModel holds (its length limit)
SIDES = {"encoder": "enc_layers", "decoder": "dec_layers"}


def marian_config(cfg, vocab) -> dict:
    """MarianConfig's fields for `cfg`'s Transformer and `vocab` (joint or not); how to
    generate (beam, length limit) is generation_config.json's alone. No dropout or layer
    drop: a copy put in training mode computes what it computes in eval mode."""
    m = cfg.model
    return {
        "architectures": ["MarianMTModel"], "model_type": "marian",
        "vocab_size": vocab.src_size, "decoder_vocab_size": vocab.tgt_size,
        "share_encoder_decoder_embeddings": vocab.joint and m.tie_embeddings,
        "tie_word_embeddings": bool(m.tie_embeddings),
        "d_model": m.emb_size, "encoder_layers": m.enc_layers, "decoder_layers": m.dec_layers,
        "encoder_attention_heads": m.heads, "decoder_attention_heads": m.heads,
        "encoder_ffn_dim": m.ff_size, "decoder_ffn_dim": m.ff_size,
        "activation_function": "relu", "scale_embedding": True,
        "max_position_embeddings": POSITIONS, "dropout": 0.0, "attention_dropout": 0.0,
        "activation_dropout": 0.0, "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0,
        "init_std": 0.02, "is_encoder_decoder": True, "use_cache": True,
        "pad_token_id": PAD, "eos_token_id": EOS, "bos_token_id": BOS,
        "decoder_start_token_id": BOS, "forced_eos_token_id": EOS,
    }


def generation_config(max_length: int, beam: int, length_penalty: float) -> dict:
    return {"decoder_start_token_id": BOS, "bos_token_id": BOS, "eos_token_id": EOS,
            "pad_token_id": PAD, "forced_eos_token_id": EOS, "bad_words_ids": [[PAD], [BOS]],
            "max_length": max_length, "num_beams": beam, "length_penalty": length_penalty}


def to_marian(model) -> dict[str, torch.Tensor]:
    """Our Transformer's weights under MarianMTModel's names (tied weights once)."""
    check_family(model)
    ours = model.state_dict()
    out = {"model.shared.weight": ours["tgt_embed.weight"],
           "final_logits_bias": ours["out.bias"].unsqueeze(0)}
    if "src_embed.weight" in ours and model.src_embed is not model.tgt_embed:
        out["model.encoder.embed_tokens.weight"] = ours["src_embed.weight"]
        out["model.decoder.embed_tokens.weight"] = ours["tgt_embed.weight"]
        del out["model.shared.weight"]
    if not model.tie:
        out["lm_head.weight"] = ours["out.weight"]
    table = sinusoids(POSITIONS, model.cfg.emb_size)
    for side in SIDES:
        out[f"model.{side}.embed_positions.weight"] = table
    for name, theirs in _layer_names(model):
        out[theirs] = ours[name] if not isinstance(name, tuple) else _half(ours, *name)
    return {k: v.detach().contiguous().clone() for k, v in out.items()}


def from_marian(weights: dict[str, torch.Tensor], model) -> dict[str, torch.Tensor]:
    """Our Transformer's state dict from MarianMTModel's names (to_marian's inverse)."""
    check_family(model)
    ours: dict[str, torch.Tensor] = {}
    shared = weights.get("model.shared.weight", weights.get("model.decoder.embed_tokens.weight"))
    ours["tgt_embed.weight"] = shared  # tied names each get the one tensor
    ours["src_embed.weight"] = (shared if model.src_embed is model.tgt_embed
                                else weights["model.encoder.embed_tokens.weight"])
    ours["out.weight"] = weights.get("lm_head.weight", shared)
    ours["out.bias"] = weights["final_logits_bias"].reshape(-1)
    fused: dict[str, list] = {}
    for name, theirs in _layer_names(model):
        if isinstance(name, tuple):
            fused.setdefault(name[0], [None, None])[name[1]] = weights[theirs]
        else:
            ours[name] = weights[theirs]
    for name, (k, v) in fused.items():
        ours[name] = torch.cat([k, v], 0)
    missing = set(model.state_dict()) - set(ours)
    if missing:
        raise NMTError(f"the MarianMTModel weights lack {sorted(missing)[0]} (and "
                       f"{len(missing) - 1} more); not an nmt Transformer's export")
    return ours


def check_family(model) -> None:
    if getattr(model.cfg, "family", None) != "transformer":
        raise NMTError("only the transformer family has a transformers (MarianMTModel) form; "
                       "other families are published for nmt alone")


def _half(ours: dict, name: str, part: int) -> torch.Tensor:
    """Key (0) or value (1) rows of a fused key/value projection's weight or bias."""
    return ours[name].chunk(2, dim=0)[part]


def _layer_names(model):
    """(our name, or (our fused name, 0 key / 1 value)), Marian's name) of every layer weight."""
    for side, attr in SIDES.items():
        for i in range(getattr(model.cfg, attr)):
            ours, theirs = f"{'enc' if side == 'encoder' else 'dec'}_layers.{i}", \
                f"model.{side}.layers.{i}"
            attns = [("attn", "self_attn", "sub1")] if side == "encoder" else [
                ("self_attn", "self_attn", "subs.0"), ("cross", "encoder_attn", "subs.1")]
            for mine, marian, sub in attns:
                for kind in ("weight", "bias"):
                    yield f"{ours}.{mine}.q.{kind}", f"{theirs}.{marian}.q_proj.{kind}"
                    yield (f"{ours}.{mine}.kv.{kind}", 0), f"{theirs}.{marian}.k_proj.{kind}"
                    yield (f"{ours}.{mine}.kv.{kind}", 1), f"{theirs}.{marian}.v_proj.{kind}"
                    yield f"{ours}.{mine}.o.{kind}", f"{theirs}.{marian}.out_proj.{kind}"
                    yield f"{ours}.{sub}.norm.{kind}", f"{theirs}.{marian}_layer_norm.{kind}"
            last = "sub2" if side == "encoder" else "subs.2"
            for kind in ("weight", "bias"):
                yield f"{ours}.ff.0.{kind}", f"{theirs}.fc1.{kind}"
                yield f"{ours}.ff.3.{kind}", f"{theirs}.fc2.{kind}"
                yield f"{ours}.{last}.norm.{kind}", f"{theirs}.final_layer_norm.{kind}"


def tokenizer_files(vocab, out: Path) -> None:
    """MarianTokenizer's files: source.spm, target.spm, vocab.json (every piece's id: ours),
    tokenizer_config.json and special_tokens_map.json."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "source.spm").write_bytes(vocab.paths[0].read_bytes())
    (out / "target.spm").write_bytes(vocab.paths[1].read_bytes())
    pieces = {vocab.tgt.id_to_piece(i): i for i in range(vocab.tgt_size)}
    if not vocab.joint:
        source = {vocab.src.id_to_piece(i): i for i in range(vocab.src_size)}
        (out / "target_vocab.json").write_text(json.dumps(pieces, ensure_ascii=False))
        pieces = source
    (out / "vocab.json").write_text(json.dumps(pieces, ensure_ascii=False))
    special = {"eos_token": vocab.tgt.id_to_piece(EOS), "unk_token": vocab.tgt.id_to_piece(UNK),
               "pad_token": vocab.tgt.id_to_piece(PAD)}
    (out / "special_tokens_map.json").write_text(json.dumps(special))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "MarianTokenizer", "model_max_length": POSITIONS,
        "separate_vocabs": not vocab.joint, **special}, indent=1))
