"""An OPUS-MT model (a `transformers` MarianMTModel folder, e.g. `hf:Helsinki-NLP/opus-mt-de-en`)
read as a run: our Transformer holding its weights, behind the same step contract, so our
search, beam, forced scores and alignment readings apply unchanged (docs/deploy.md, "Read
an OPUS-MT model").

Marian's Transformer is ours (Vaswani et al. 2017: post-norm blocks with biases, scaled
dot-product attention, sinusoidal positions) with four departures, each kept as Marian has
it rather than rewritten into ours:
- **ids**: Marian numbers pieces EOS 0, UNK 1, padding last, and starts the decoder from
  the padding id; ours are PAD 0, UNK 1, BOS 2, EOS 3. The embedding and output rows are
  read in nmt.data.opus_vocab's order (our id k is Marian's `order[k]`), so ids are
  permuted once, at the model's boundary, and nothing downstream knows. Our BOS reads the
  decoder start's row; its output is masked with a bias of MASKED, whose exp is exactly 0
  in float32, so every softmax is Marian's own (nothing is ever predicted as BOS).
- **positions**: Marian's sinusoids are [sin | cos] halves where ours interleave. The model
  keeps Marian's table as it is (the file's `embed_positions` when it holds one, which
  `from_pretrained` loads too, else transformers' own formula, computed the same way in
  float64) instead of permuting the model dimension of every weight: the weights are read
  unchanged, and only the table differs from our Transformer's.
- **activation** (OPUS-MT: swish) and **embedding scale** (`scale_embedding`) from config.json.
- **untied output**: `lm_head` (tie_word_embeddings false) and `final_logits_bias` are our
  output layer's weight and bias.

Weights: `model.safetensors` when the folder has it, else `pytorch_model.bin` through
`torch.load(weights_only=True)`, which rebuilds tensors and plain containers only and
refuses any other object: nothing is unpickled into code. Nothing here imports
transformers.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from nmt.core.config import Config
from nmt.core.errors import NMTError, one_line
from nmt.core.tokens import BOS
from nmt.data.opus_vocab import OpusVocab, read_json
from nmt.models.checks import config_from_dict
from nmt.models.transformer import Transformer

NO_CORPUS = ""  # data.corpus of a model trained elsewhere: it reads the corpus of the runs beside it
MASKED = -1e4  # our BOS's output bias: exp(-1e4 - max) is exactly 0 in float32
WEIGHTS = ("model.safetensors", "pytorch_model.bin")
DEFAULTS = {  # MarianConfig's defaults (transformers 5), for keys a config.json leaves out
    "vocab_size": 58101, "decoder_vocab_size": None, "d_model": 1024, "encoder_layers": 12,
    "decoder_layers": 12, "encoder_attention_heads": 16, "decoder_attention_heads": 16,
    "encoder_ffn_dim": 4096, "decoder_ffn_dim": 4096, "activation_function": "gelu",
    "dropout": 0.1, "scale_embedding": False, "pad_token_id": 58100, "eos_token_id": 0,
    "decoder_start_token_id": 58100, "share_encoder_decoder_embeddings": True,
    "tie_word_embeddings": True}
ACTIVATIONS = {"relu": nn.ReLU, "swish": nn.SiLU, "silu": nn.SiLU, "gelu": nn.GELU,
               "gelu_new": lambda: nn.GELU(approximate="tanh"),
               "gelu_pytorch_tanh": lambda: nn.GELU(approximate="tanh")}


def is_opus(folder: Path | str) -> bool:
    """A transformers Marian folder that `nmt publish` did not write (no nmt.json)."""
    folder = Path(folder)
    if (folder / "nmt.json").is_file() or not (folder / "vocab.json").is_file():
        return False
    try:
        return json.loads((folder / "config.json").read_text()).get("model_type") == "marian"
    except (OSError, ValueError):
        return False


def marian_config(folder: Path) -> dict:
    """config.json over MarianConfig's defaults, checked for what our Transformer holds."""
    mc = {**DEFAULTS, **read_json(folder / "config.json")}
    where = folder / "config.json"
    for key in ("attention_heads", "ffn_dim"):
        if mc[f"encoder_{key}"] != mc[f"decoder_{key}"]:
            raise NMTError(f"{where}: encoder_{key} {mc[f'encoder_{key}']} and decoder_{key} "
                           f"{mc[f'decoder_{key}']} differ; nmt's Transformer has one of each")
    if mc["activation_function"] not in ACTIVATIONS:
        raise NMTError(f"{where}: activation_function {mc['activation_function']!r}; nmt reads "
                       f"{', '.join(ACTIVATIONS)}")
    if mc["share_encoder_decoder_embeddings"] and mc["decoder_vocab_size"] not in (
            None, mc["vocab_size"]):
        raise NMTError(f"{where}: shared embeddings but vocab_size {mc['vocab_size']} and "
                       f"decoder_vocab_size {mc['decoder_vocab_size']} differ")
    return mc


def language_pair(folder: Path, tok: dict) -> str:
    """The pair from tokenizer_config.json's source_lang and target_lang, else from an
    `opus-mt-SRC-TGT` name in the folder's path (the Hub cache's keeps the repo's name)."""
    src, tgt = tok.get("source_lang"), tok.get("target_lang")
    if isinstance(src, str) and isinstance(tgt, str) and src and tgt and src != tgt \
            and "-" not in src + tgt:
        return f"{src}-{tgt}"
    found = re.findall(r"opus-mt-([A-Za-z_]+)-([A-Za-z_]+)", str(folder))
    return "-".join(found[-1]) if found and found[-1][0] != found[-1][1] else "src-tgt"


def opus_config(folder: Path | str) -> Config:
    """The run config an OPUS-MT folder reads as: a Transformer of its sizes, no corpus
    (NO_CORPUS), the generation config's beam."""
    folder = Path(folder)
    mc = marian_config(folder)
    tok = read_json(folder / "tokenizer_config.json") if (
        folder / "tokenizer_config.json").is_file() else {}
    gen = read_json(folder / "generation_config.json") if (
        folder / "generation_config.json").is_file() else {}
    beam = gen.get("num_beams") if isinstance(gen.get("num_beams"), int) else None
    raw = {"name": folder.name, "runs_dir": str(folder.parent),
           "data": {"corpus": NO_CORPUS, "pair": language_pair(folder, tok)},
           "vocab": {"joint": not tok.get("separate_vocabs", False), "size": mc["vocab_size"]},
           "model": {"family": "transformer", "emb_size": mc["d_model"],
                     "enc_layers": mc["encoder_layers"], "dec_layers": mc["decoder_layers"],
                     "heads": mc["encoder_attention_heads"], "ff_size": mc["encoder_ffn_dim"],
                     "dropout": float(mc["dropout"]),
                     "tie_embeddings": bool(mc["tie_word_embeddings"])},
           "decode": {"beam": beam} if beam and beam > 0 else {}}
    return config_from_dict(raw, str(folder / "config.json"))


def marian_sinusoids(length: int, dim: int) -> Tensor:
    """MarianSinusoidalPositionalEmbedding's table: sin in the first half, cos in the second,
    computed in float64 as transformers computes it."""
    j = np.arange(dim)
    angles = np.arange(length)[:, None] / np.power(10000, 2 * (j // 2) / dim)[None, :]
    half = dim // 2 + dim % 2
    table = torch.empty(length, dim)
    table[:, :half] = torch.FloatTensor(np.sin(angles[:, 0::2]))
    table[:, half:] = torch.FloatTensor(np.cos(angles[:, 1::2]))
    return table


class OpusTransformer(Transformer):
    """Our Transformer with Marian's position table, activation and embedding scale."""

    def __init__(self, src_vocab: int, tgt_vocab: int, cfg: Config, mc: dict):
        super().__init__(src_vocab, tgt_vocab, cfg.model,
                         joint=bool(mc["share_encoder_decoder_embeddings"]))
        self.scale = math.sqrt(cfg.model.emb_size) if mc["scale_embedding"] else 1.0
        for layer in [*self.enc_layers, *self.dec_layers]:
            layer.ff[1] = ACTIVATIONS[mc["activation_function"]]()
        self.pe = marian_sinusoids(self.initial_positions, cfg.model.emb_size)

    def _grow_positions(self, length: int) -> None:
        if length > self.pe.size(0):
            size = max(length, 2 * self.pe.size(0))
            self.pe = marian_sinusoids(size, self.pe.size(1)).to(self.pe.device)


def read_weights(folder: Path) -> dict[str, Tensor]:
    """The folder's tensors: model.safetensors, else pytorch_model.bin loaded with
    weights_only=True (no code is unpickled)."""
    path = next((folder / n for n in WEIGHTS if (folder / n).is_file()), None)
    if path is None:
        raise NMTError(f"{folder}: no {' or '.join(WEIGHTS)}; nmt reads PyTorch weights only "
                       "(not tf_model.h5, flax or rust)")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file  # optional extra: [hub]

            weights = load_file(str(path))
        else:
            weights = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(weights, dict):
            raise ValueError("not a mapping of names to tensors")
    except ImportError:
        raise NMTError(f"{path}: reading it needs safetensors: pip install -e '.[hub]'") from None
    except Exception as exc:  # noqa: BLE001 - a cut file or a pickle of other objects
        raise NMTError(f"{path}: unreadable as weights ({one_line(exc, 120)}); download the "
                       "model again") from None
    return {k.removeprefix("module."): v.float() for k, v in weights.items()
            if isinstance(v, Tensor)}


def _layer_names(mc: dict):
    """(our name, Marian's name) of every layer weight; ours `kv` is Marian's k_proj and
    v_proj stacked (handled by the caller)."""
    for side, n in (("encoder", mc["encoder_layers"]), ("decoder", mc["decoder_layers"])):
        for i in range(n):
            ours, theirs = f"{side[:3]}_layers.{i}", f"model.{side}.layers.{i}"
            attns = [("attn", "self_attn", "sub1")] if side == "encoder" else [
                ("self_attn", "self_attn", "subs.0"), ("cross", "encoder_attn", "subs.1")]
            last = "sub2" if side == "encoder" else "subs.2"
            for kind in ("weight", "bias"):
                for mine, marian, sub in attns:
                    yield f"{ours}.{mine}.q.{kind}", f"{theirs}.{marian}.q_proj.{kind}"
                    yield f"{ours}.{mine}.kv.{kind}", f"{theirs}.{marian}.[kv]_proj.{kind}"
                    yield f"{ours}.{mine}.o.{kind}", f"{theirs}.{marian}.out_proj.{kind}"
                    yield f"{ours}.{sub}.norm.{kind}", f"{theirs}.{marian}_layer_norm.{kind}"
                yield f"{ours}.ff.0.{kind}", f"{theirs}.fc1.{kind}"
                yield f"{ours}.ff.3.{kind}", f"{theirs}.fc2.{kind}"
                yield f"{ours}.{last}.norm.{kind}", f"{theirs}.final_layer_norm.{kind}"


def our_state(weights: dict[str, Tensor], model: OpusTransformer, vocab: OpusVocab,
              mc: dict, where: Path) -> dict[str, Tensor]:
    """Our state dict from a MarianMTModel's tensors: rows in our id order, k and v stacked."""
    def get(name: str, default=None) -> Tensor:
        if name in weights:
            return weights[name]
        if default is None:
            raise NMTError(f"{where}: lacks {name}; not a MarianMTModel of its config.json")
        return default

    shared = weights.get("model.shared.weight")
    enc = get("model.encoder.embed_tokens.weight", shared)
    dec = get("model.decoder.embed_tokens.weight", shared)
    head = dec if mc["tie_word_embeddings"] else get("lm_head.weight")
    for name, table, size in (("source", enc, len(vocab.source.marian)),
                              ("target", head, len(vocab.target.marian))):
        if table.shape[0] != size:
            raise NMTError(f"{where}: its {name} embedding has {table.shape[0]} rows but the "
                           f"vocabulary {size} pieces; the files do not belong together")
    order = (torch.tensor(vocab.source.order), torch.tensor(vocab.target.order))
    bias = get("final_logits_bias", torch.zeros(1, head.shape[0])).reshape(-1)[order[1]].clone()
    bias[BOS] = MASKED
    ours = {"src_embed.weight": enc[order[0]], "tgt_embed.weight": dec[order[1]],
            "out.weight": head[order[1]], "out.bias": bias}
    for name, theirs in _layer_names(mc):
        if "[kv]" in theirs:
            ours[name] = torch.cat([get(theirs.replace("[kv]", "k")),
                                    get(theirs.replace("[kv]", "v"))], 0)
        else:
            ours[name] = get(theirs)
    return ours


def positions_of(weights: dict[str, Tensor], dim: int, where: Path) -> Tensor | None:
    """The file's position table (what from_pretrained loads), or None when it has none."""
    tables = [weights[f"model.{side}.embed_positions.weight"] for side in ("encoder", "decoder")
              if f"model.{side}.embed_positions.weight" in weights]
    if tables and (len(tables) == 2 and not torch.equal(*tables) or tables[0].shape[1] != dim):
        raise NMTError(f"{where}: its encoder and decoder position tables differ (or are not "
                       f"{dim} wide); nmt's Transformer holds one")
    return tables[0] if tables else None


def load_opus(folder: Path | str, which: str = "best") -> tuple[Config, OpusVocab, OpusTransformer, dict]:
    """Config, vocabulary and model (eval mode) of an OPUS-MT folder, and what was read."""
    folder = Path(folder)
    if which != "best":
        raise NMTError(f"{folder}: an OPUS-MT model holds one set of weights, not checkpoint "
                       f"{which!r}; drop --checkpoint")
    cfg, mc = opus_config(folder), marian_config(folder)
    vocab = OpusVocab(folder, mc)
    if mc["share_encoder_decoder_embeddings"] and not vocab.joint:
        raise NMTError(f"{folder}: shared embeddings but separate vocabularies "
                       "(tokenizer_config.json); the files do not belong together")
    model = OpusTransformer(vocab.src_size, vocab.tgt_size, cfg, mc)
    weights = read_weights(folder)
    table = positions_of(weights, cfg.model.emb_size, folder)
    if table is not None:
        model.pe = table.clone()
    try:
        model.load_state_dict(our_state(weights, model, vocab, mc, folder))
    except RuntimeError as exc:
        raise NMTError(f"{folder}: its weights do not fit its config.json "
                       f"({one_line(exc, 100)})") from None
    return cfg, vocab, model.eval(), {"opus": str(folder)}
