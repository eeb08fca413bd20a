"""The engines a trained run decodes on, behind one call (docs/deploy.md).

    engine.nbest(src_ids, decode_cfg, beam, n_best, sampling, attention)
        -> (n-best (target ids, score) per sentence, maps or None)

PyTorch runs our own search over the step contract (nmt.decoding.search), optionally with
dynamic int8 `Linear` and recurrent cells. CTranslate2 runs an exported Transformer
(nmt.decoding.export) with the same search settings: each sentence's own length limit,
ending in EOS there, PAD and BOS never emitted, a sentence done once `beam` hypotheses
are, ranked by the same GNMT length penalty (docs/deploy.md, "Decode"). With `attention`,
CTranslate2 also returns, per hypothesis, its alignment head's map (T+1, S): rows are the
steps that predict each target piece and EOS, columns the source pieces and EOS, which is
the shape our own reading links words from (nmt.align.words).
"""

from __future__ import annotations

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
    export_dir,
    open_translator,
    refuse_family,
)
from nmt.decoding.search import length_penalty, max_length
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
        ctranslate2_module()  # its install line comes first
        refuse_family(run, cfg.model.family)
        if quantize not in (None, *QUANTIZE):
            raise NMTError(f"--quantize {quantize!r}: use one of {', '.join(QUANTIZE)}")
        self.path, self.vocab, self.quantize = export_dir(run, checkpoint), vocab, quantize
        on_gpu = bool(device and device.startswith("cuda"))
        # On the CPU, N threads are N one-thread workers, each decoding its own batch:
        # several threads on one batch were slower than one (docs/deploy.md, "Threads").
        # The float32 export, made (again) when stale, quantised at load to what is asked.
        # CTranslate2 sets the calling thread's OpenMP count to its intra_threads, which is
        # torch's count too: PyTorch runs decoded beside this engine keep their threads.
        threads = torch.get_num_threads()
        try:
            self.translator = open_translator(
                run, checkpoint, device="cuda" if on_gpu else "cpu",
                compute_type=quantize or "float32", intra_threads=1,
                inter_threads=1 if on_gpu else threads)
        finally:
            torch.set_num_threads(threads)
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
        """Hand one batch to the engine's workers, one call per length limit, so that the
        engine's own maximum is each sentence's limit; returns a callable that waits for
        the results (nmt.decoding.translate.by_length)."""
        tokens = [self.vocab.src_pieces(s[:-1]) + [self.src_eos] for s in sources]
        limits = [max_length(len(s), cfg.max_len_ratio, cfg.max_len_offset) for s in sources]
        # No early exit (a length penalty other than 0 turns it off): as in our search, a
        # sentence ends once `beam` hypotheses have; shorter ones first (-1: the engine
        # ranks by score * length), so its `beam` are the first that ended.
        options = dict(beam_size=beam, num_hypotheses=beam, patience=1.0, length_penalty=-1.0,
                       min_decoding_length=0, max_input_length=0,
                       suppress_sequences=self.banned, return_scores=True,
                       return_attention=attention, return_end_token=True)
        calls = []
        for limit in sorted(set(limits)):
            rows = [i for i, n in enumerate(limits) if n == limit]
            # limit - 1 free steps: at the limit our search may only emit EOS (added below)
            pending = self.translator.translate_batch(
                [tokens[i] for i in rows], max_decoding_length=limit - 1, asynchronous=True,
                **options) if limit > 1 else [None] * len(rows)
            calls.append((rows, pending))

        def wait() -> list:
            found = [None] * len(sources)
            for rows, pending in calls:
                for i, result in zip(rows, pending):
                    found[i] = self._found(None if result is None else result.result(),
                                           len(tokens[i]), attention)
            if beam > 1 or attention:
                self._end_with_eos(tokens, found, attention)
            return [self._best(hyps, cfg, beam, n_best) for hyps in found]

        return wait

    def _found(self, result, source_len: int, attention: bool) -> list[list]:
        """The engine's hypotheses of one sentence as [ids, log-probability, attention rows
        (steps, S) or None, ended]; `ended` False: stopped at the length limit, or never
        started (`result` None: a limit of one step), without the EOS our search ends it
        with there."""
        if result is None:
            return [[[], 0.0, np.zeros((0, source_len), np.float32) if attention else None,
                     False]]
        out = []
        for k, pieces in enumerate(result.hypotheses):
            ids = [self.vocab.tgt.piece_to_id(p) for p in pieces]
            ended = bool(ids) and ids[-1] == EOS
            score = float(result.scores[k]) / max(len(pieces), 1)  # undo its penalty (-1)
            rows = np.asarray(result.attention[k], np.float32) if attention else None
            out.append([ids[:-1] if ended else ids, score, rows, ended])
        return out

    def _end_with_eos(self, tokens: list, found: list, attention: bool) -> None:
        """End each hypothesis stopped at its limit with EOS, as our search does: one step
        of the engine after its pieces (given as a target prefix) gives the EOS's
        log-probability, normalised as every step of the engine's search is (without PAD
        and BOS), and that step's attention row."""
        cut = [(i, hyp) for i, hyps in enumerate(found) for hyp in hyps if not hyp[3]]
        for start in range(0, len(cut), 32):  # every step's logits come back (V each)
            chunk = cut[start:start + 32]
            prefixes = [self.vocab.tgt_pieces(hyp[0]) for _, hyp in chunk]
            results = self.translator.translate_batch(
                [tokens[i] for i, _ in chunk], target_prefix=prefixes, beam_size=1,
                max_decoding_length=max(map(len, prefixes)) + 1, min_decoding_length=0,
                max_input_length=0, suppress_sequences=self.banned, return_logits_vocab=True,
                return_attention=attention, return_end_token=True)
            for (_, hyp), result, prefix in zip(chunk, results, prefixes):
                step = len(prefix)  # the step after the pieces
                logits = torch.from_numpy(np.asarray(result.logits[0][step], np.float32))
                hyp[1] += float(logits.log_softmax(-1)[EOS])
                if attention:
                    row = np.asarray(result.attention[0][step], np.float32)[None]
                    hyp[2] = np.vstack([hyp[2], row])

    @staticmethod
    def _best(hyps: list, cfg: DecodeConfig, beam: int, n_best: int) -> tuple[list, list]:
        """Our search's n-best of the engine's hypotheses: the first `beam` that ended
        (shorter first, then the more likely), ranked by the GNMT penalty; greedy search
        reports no score, as on PyTorch."""
        if beam == 1:
            return [(hyps[0][0], 0.0)], [_map(hyps[0][2])]
        hyps = sorted(hyps, key=lambda h: (len(h[0]), -h[1]))[:beam]
        for hyp in hyps:
            hyp[1] /= length_penalty(len(hyp[0]) + 1, cfg.length_penalty)
        best = sorted(hyps, key=lambda h: -h[1])[:n_best]
        return [(ids, score) for ids, score, _, _ in best], [_map(rows) for *_, rows, _ in best]


def _map(rows: np.ndarray | None) -> np.ndarray | None:
    """Attention rows (T+1, S) as the (1, 1, T+1, S) map our reading takes."""
    return None if rows is None else rows[None, None]


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
