"""Tiny OPUS-MT models built offline with transformers' own classes, in the shape of the
Hub's Helsinki-NLP/opus-mt-* folders: two SentencePiece models (trained here on the
synthetic corpus, with SentencePiece's own special pieces, as OPUS-MT's are), one
vocab.json over both as OPUS-MT's conversion writes it (</s> 0, <unk> 1, the pieces, <pad>
last), a MarianConfig of OPUS-MT's conventions (swish, scale_embedding, padding last and
the decoder starting from it) with random weights, saved by save_pretrained and
MarianTokenizer. Nothing is downloaded."""

from __future__ import annotations

import io
import json
from pathlib import Path

import sentencepiece as spm
import torch

SIZES = {"src": 150, "tgt": 140}  # SentencePiece pieces per side


def train_spm(lines: list[str], size: int) -> bytes:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model,
                                   vocab_size=size, model_type="unigram", minloglevel=2,
                                   character_coverage=1.0, num_threads=1,
                                   hard_vocab_limit=False)
    return model.getvalue()


def opus_vocab(models: list[bytes]) -> dict[str, int]:
    """OPUS-MT's joint vocab.json: </s> 0, <unk> 1, every piece of either model once, <pad>
    last."""
    pieces = ["</s>", "<unk>"]
    for data in models:
        proc = spm.SentencePieceProcessor(model_proto=data)
        pieces += [proc.id_to_piece(i) for i in range(proc.get_piece_size())
                   if not (proc.is_control(i) or proc.is_unknown(i))]
    pieces = list(dict.fromkeys(pieces)) + ["<pad>"]
    return {p: i for i, p in enumerate(pieces)}


def build_opus(folder: Path, corpus: Path, tied: bool = True, seed: int = 0,
               weights: str = "safetensors", lines: int = 400, pair=("src", "tgt")) -> Path:
    """An OPUS-MT-shaped folder at `folder` (returned); `weights` "safetensors"
    (save_pretrained) or "bin" (a pytorch_model.bin with the position tables, as the Hub's
    older OPUS-MT folders hold)."""
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    src = (corpus / f"train.{pair[0]}").read_text().splitlines()[:lines]
    tgt = (corpus / f"train.{pair[1]}").read_text().splitlines()[:lines]
    models = [train_spm(src, SIZES["src"]), train_spm(tgt, SIZES["tgt"])]
    staging = folder / ".staging"
    staging.mkdir(exist_ok=True)
    for name, data in zip(("source.spm", "target.spm"), models):
        (staging / name).write_bytes(data)
    vocab = opus_vocab(models)
    (staging / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    tokenizer = MarianTokenizer(str(staging / "source.spm"), str(staging / "target.spm"),
                                str(staging / "vocab.json"), source_lang=pair[0],
                                target_lang=pair[1])
    size = len(vocab)
    config = MarianConfig(
        vocab_size=size, decoder_vocab_size=size, d_model=16, encoder_layers=2,
        decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=32, decoder_ffn_dim=32, activation_function="swish",
        scale_embedding=True, max_position_embeddings=512, pad_token_id=size - 1,
        eos_token_id=0, decoder_start_token_id=size - 1, forced_eos_token_id=0,
        share_encoder_decoder_embeddings=True, tie_word_embeddings=tied, dropout=0.1,
        init_std=0.3, bad_words_ids=[[size - 1]])
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    with torch.no_grad():  # layer norms and the output bias away from their plain start
        for name, param in model.named_parameters():
            if "layer_norm" in name:
                param.add_(0.2 * torch.randn_like(param))
        model.final_logits_bias.normal_(0.0, 0.5)
        model.final_logits_bias[0, 0] += 3.0  # EOS: some sentences end before their limit
    model.generation_config.bad_words_ids = [[size - 1]]
    model.generation_config.num_beams = 4
    model.generation_config.max_length = 512
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if weights == "bin":
        (folder / "model.safetensors").unlink()
        torch.save(dict(model.state_dict()), folder / "pytorch_model.bin")
    for path in staging.iterdir():
        path.unlink()
    staging.rmdir()
    return folder
