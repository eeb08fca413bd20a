"""The engines a trained run decodes on, behind one call (docs/deploy.md).

    engine.nbest(src_ids, decode_cfg, beam, n_best, sampling, attention)
        -> (n-best (target ids, score) per sentence, maps or None)

PyTorch runs our own search over the step contract (nmt.decoding.search), optionally with
dynamic int8 `Linear` and recurrent cells. CTranslate2 runs an exported Transformer
(nmt.decoding.export) with the same search settings: the same length limit, PAD and BOS
never emitted, beam hypotheses ranked by the same GNMT length penalty. With `attention`,
CTranslate2 also returns, per hypothesis, its alignment head's map (T+1, S): rows are the
steps that predict each target piece and EOS, columns the source pieces and EOS, which is
the shape our own reading links words from (nmt.align.words).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from nmt.core.config import DecodeConfig
from nmt.core.engine import ENGINES, EXPORTABLE, QUANTIZE
from nmt.core.errors import NMTError
from nmt.core.tokens import BOS, EOS, PAD
from nmt.data.subwords import Vocab
from nmt.decoding.export import (
    ctranslate2_module,
    export,
    export_dir,
    refuse_family,
    stale,
)
from nmt.decoding.search import length_penalty
from nmt.decoding.translate import by_length, clip_source, nbest_ids

# Families (model.family) whose int8 PyTorch decoding was at least 1.3x as fast at beam 5
# and within 0.5 BLEU of float32 on their 20-minute Multi30k runs (every one measured:
# docs/experiments/2026-12-03-deployment-decoding.md). A family not listed decodes in float32.
INT8_FAMILIES = ("bahdanau", "luong", "fixed_context", "transformer")
QUANTIZED = {nn.Linear, nn.GRUCell, nn.LSTMCell, nn.GRU, nn.LSTM}


class PyTorchEngine:
    """Our search over the model's step contract; `quantize` "int8": dynamic int8
    quantisation of its Linear layers and recurrent cells (CPU, decoding only)."""

    name = "pytorch"
    reads_links = False  # links come from a forced pass of the model (nmt.align.extract)

    def __init__(self, module: nn.Module, family: str, quantize: str | None = None):
        if quantize not in (None, "float32", "int8"):
            raise NMTError(f"--quantize {quantize!r} on PyTorch: use int8 (or float32)")
        if quantize == "int8":
            if family not in INT8_FAMILIES:
                raise NMTError(f"--quantize int8: {family} is not measured in int8 on PyTorch "
                               "(docs/deploy.md); decode it in float32 (drop --quantize)")
            module = quantize_int8(module)
        self.module, self.quantize = module, quantize or "float32"

    def nbest(self, src_ids: list, cfg: DecodeConfig, beam: int | None = None, n_best: int = 1,
              sampling=None, attention: bool = False) -> tuple[list, list | None]:
        return nbest_ids(self.module, src_ids, cfg, beam, n_best, sampling), None


def quantize_int8(module: nn.Module) -> nn.Module:
    """A copy of `module` with int8 weights in its Linear layers and recurrent cells,
    activations quantised on the fly (PyTorch's dynamic quantisation; CPU only). torch.ao
    warns that it is deprecated in favour of torchao, whose dynamic int8 does not cover
    recurrent cells: the warning is silenced here, and the pin keeps it working."""
    if any(p.device.type != "cpu" for p in module.parameters()):
        raise NMTError("--quantize int8 on PyTorch runs on the CPU only; drop --device")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        return torch.ao.quantization.quantize_dynamic(module, QUANTIZED, dtype=torch.qint8)


class CTranslate2Engine:
    """An exported Transformer on CTranslate2; the export is made (or made again, saying
    why in one line) when it is missing or older than the checkpoint."""

    name = "ctranslate2"

    def __init__(self, run: Path, checkpoint: str, cfg, vocab: Vocab, sampler: PyTorchEngine,
                 quantize: str | None = None, device: str | None = None):
        ct2 = ctranslate2_module()
        refuse_family(run, cfg.model.family)
        if quantize not in (None, *QUANTIZE):
            raise NMTError(f"--quantize {quantize!r}: use one of {', '.join(QUANTIZE)}")
        reason = stale(run, checkpoint)
        if reason:
            print(f"{reason}: exporting it (nmt export --run {run})", file=sys.stderr)
            export(run, checkpoint)
        self.path, self.vocab, self.quantize = export_dir(run, checkpoint), vocab, quantize
        on_gpu = bool(device and device.startswith("cuda"))
        # On the CPU, N threads are N one-thread workers, each decoding its own batch:
        # several threads on one batch were slower than one (docs/deploy.md, "Threads").
        self.translator = ct2.Translator(
            str(self.path), device="cuda" if on_gpu else "cpu",
            compute_type=quantize or "default", intra_threads=1,
            inter_threads=1 if on_gpu else torch.get_num_threads())
        # Sampling runs on PyTorch: CTranslate2 seeds each worker thread once, so its
        # samples cannot be drawn again from a seed (CTranslate2 issue 1757).
        self.sampler = sampler
        guided = cfg.guided
        # The engine returns one layer's first heads, read naively: a guided run's own
        # reading, unless it reads a decoder pass without the causal mask (full_context).
        self.reads_links = bool(guided.weight) and not guided.full_context
        self.src_eos = vocab.src.id_to_piece(EOS)
        self.banned = [[vocab.tgt.id_to_piece(PAD)], [vocab.tgt.id_to_piece(BOS)]]

    def nbest(self, src_ids: list, cfg: DecodeConfig, beam: int | None = None, n_best: int = 1,
              sampling=None, attention: bool = False) -> tuple[list, list | None]:
        if sampling is not None:
            return self.sampler.nbest(src_ids, cfg, beam, n_best, sampling, attention)
        beam = beam or cfg.beam
        attention = attention and self.reads_links
        results = by_length(src_ids, cfg.batch_size, lambda sources: self._translate(
            sources, cfg, beam, n_best, attention),
            empty=lambda: ([([], 0.0)], [np.zeros((1, 1, 1, 1), np.float32)]))
        return [hyps for hyps, _ in results], ([maps for _, maps in results] if attention
                                                else None)

    def forced_maps(self, src_ids: list, tgt_ids: list, batch_size: int = 32) -> list:
        """The alignment head's map (1, 1, T+1, S) of each pair with its target given (as
        a target prefix): what nmt.align.extract.forced_weights gives on PyTorch, for this
        layer and its first heads. Source ids end in EOS; target ids do not."""
        pending = []  # every batch is handed to the workers before the first is awaited
        for start in range(0, len(src_ids), batch_size):
            src = [clip_source(s) for s in src_ids[start:start + batch_size]]
            tgt = [list(t) for t in tgt_ids[start:start + batch_size]]
            pending += zip(self.translator.translate_batch(
                [self.vocab.src_pieces(s[:-1]) + [self.src_eos] for s in src],
                target_prefix=[self.vocab.tgt_pieces(t) for t in tgt], beam_size=1,
                max_decoding_length=max(len(t) for t in tgt) + 1, min_decoding_length=0,
                max_input_length=0, return_attention=True, return_end_token=True,
                asynchronous=True), tgt)
        return [np.asarray(r.result().attention[0], np.float32)[None, None, :len(t) + 1]
                for r, t in pending]

    def _translate(self, sources: list, cfg: DecodeConfig, beam: int, n_best: int,
                   attention: bool):
        """Hand one batch to the engine's workers; returns a callable that waits for its
        results (nmt.decoding.translate.by_length)."""
        limits = [max(int(len(s) * cfg.max_len_ratio) + cfg.max_len_offset, 1)
                  for s in sources]  # nmt.decoding.search.max_lengths: EOS included
        options = dict(max_decoding_length=max(limits), min_decoding_length=0,
                       max_input_length=0, suppress_sequences=self.banned, return_scores=True,
                       return_attention=attention, return_end_token=True, length_penalty=0.0)
        options.update(beam_size=beam, num_hypotheses=beam if beam > 1 else 1)
        tokens = [self.vocab.src_pieces(s[:-1]) + [self.src_eos] for s in sources]
        results = self.translator.translate_batch(tokens, asynchronous=True, **options)
        return lambda: [self._hypotheses(r.result(), limit, cfg, beam, n_best, attention)
                        for r, limit in zip(results, limits)]

    def _hypotheses(self, result, limit: int, cfg: DecodeConfig, beam: int, n_best: int,
                    attention: bool) -> tuple[list, list]:
        """The engine decodes a batch to its longest sentence's limit; a hypothesis past its
        own is cut to limit - 1 pieces, where our search makes the last step EOS (for
        greedy search exactly what it gives)."""
        hyps = []
        for k, pieces in enumerate(result.hypotheses):
            ids = [self.vocab.tgt.piece_to_id(p) for p in pieces]
            if ids and ids[-1] == EOS:
                ids = ids[:-1]
            ids = ids[:limit - 1]
            score = float(result.scores[k])
            if beam == 1:
                score = 0.0  # greedy search reports no score, as on PyTorch
            else:
                score /= length_penalty(len(ids) + 1, cfg.length_penalty)
            found = None
            if attention:
                rows = np.asarray(result.attention[k], dtype=np.float32)[:len(ids) + 1]
                if len(rows) < len(ids) + 1:  # stopped by the length limit: no EOS step
                    rows = np.vstack([rows, np.zeros((1, rows.shape[1]), np.float32)])
                found = rows[None, None]  # (1, 1, T+1, S)
            hyps.append((ids, score, found))
        hyps.sort(key=lambda h: -h[1])
        best = hyps[:n_best]
        return [(ids, score) for ids, score, _ in best], [found for _, _, found in best]


def engine_for(family: str, engine: str, quantize: str | None) -> tuple[str, str | None, str]:
    """What a family decodes on when a server asks every run for `engine` and `quantize`:
    the request where the family supports it, else the nearest that does (a recurrent run
    on PyTorch, in int8 where int8 is shipped for it), with why (empty when as asked)."""
    if engine == "ctranslate2" and family not in EXPORTABLE:
        int8 = quantize in ("int8", "int8_float32") and family in INT8_FAMILIES
        return "pytorch", "int8" if int8 else None, "CTranslate2 runs Transformers only"
    if engine == "pytorch" and quantize == "int8" and family not in INT8_FAMILIES:
        return "pytorch", None, f"int8 is not shipped for {family} on PyTorch"
    return engine, quantize, ""


def make_engine(name: str, module: nn.Module, run: Path, checkpoint: str, cfg, vocab: Vocab,
                quantize: str | None = None, device: str | None = None):
    if name == "pytorch":
        return PyTorchEngine(module, cfg.model.family, quantize)
    if name == "ctranslate2":
        sampler = PyTorchEngine(module, cfg.model.family)  # sampling stays on PyTorch
        return CTranslate2Engine(run, checkpoint, cfg, vocab, sampler, quantize, device)
    raise NMTError(f"engine {name!r}: use one of {', '.join(ENGINES)}")


def engine_label(engine) -> str:
    """How a figure names the engine it was decoded on: pytorch, ctranslate2/int8, ..."""
    return engine.name + (f"/{engine.quantize}" if engine.quantize not in (None, "float32")
                          else "")
