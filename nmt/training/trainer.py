"""Training: token-budget batches, Adam, schedules, validation, checkpoints, resume.

One process by default; under `torchrun` each rank trains on its shard of the
batches with DDP and only rank 0 writes the run directory.
"""

from __future__ import annotations

import json
import math
import random
import time
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch

from nmt.align.extract import collect, dump_training_alignments
from nmt.align.guided import reading_of
from nmt.core.checkpoint import kept_checkpoints, load_resumed, resume_payload, save_checkpoint
from nmt.core.config import Config, config_to_dict, save_config
from nmt.core.errors import Interrupted, NMTError
from nmt.core.locks import StopRequest, run_lock
from nmt.core.memory import peak_rss_mib, release_free_memory, rss_mib
from nmt.core.progress import TrainDisplay
from nmt.core.rundir import RunDir, keep_metrics, replace_text
from nmt.data.batching import Batches, iterate_batches, pair_lengths, token_batches
from nmt.decoding.evaluate import bleu_chrf
from nmt.decoding.translate import translate_ids
from nmt.models import build_model
from nmt.training import distributed as dist
from nmt.training import precision
from nmt.training.batches import load_data, prune_sampled, sampled_examples
from nmt.training.bootstrap import init_weights
from nmt.training.guided import teacher_aer
from nmt.training.loss import loss_fn
from nmt.training.optim import build_optimizer, set_lr
from nmt.training.schedule import Schedule, budget_used
from nmt.training.tensorboard import Board


@dataclass
class Progress:
    """Everything besides weights that a resumed run must restore."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    best_bleu: float = -1.0
    stale: int = 0  # validations without BLEU gain (early stopping)
    elapsed: float = 0.0  # seconds of training so far, validation included
    train_seconds: float = 0.0  # seconds inside training steps only
    tokens: int = 0  # target tokens trained on
    skipped: int = 0  # non-finite steps skipped
    history: list = field(default_factory=list)


class Trainer:
    def __init__(self, cfg: Config, resume: bool = False, quiet: bool = False):
        self.cfg, self.quiet = cfg, quiet
        self.run = RunDir(cfg.run_dir)
        self._check_run_dir(resume)
        self.board = Board(self.run.path / "tensorboard"  # train.tensorboard, rank 0 only
                           if cfg.train.tensorboard and dist.is_main() else None)
        if cfg.train.threads:
            torch.set_num_threads(cfg.train.threads)
        precision.bound_kernel_cache()
        torch.manual_seed(cfg.train.seed)
        random.seed(cfg.train.seed)
        self.data = load_data(cfg, resume, quiet)
        v = self.data.vocab
        self.device = dist.device()
        self.model = build_model(cfg.model, v.src_size, v.tgt_size, v.joint,
                                 cfg.local).to(self.device)
        self.ddp = dist.wrap(self.model)
        if cfg.train.compile:  # the training pass only: the weights stay self.model's
            self.ddp = torch.compile(self.ddp, dynamic=True)
        self.optim = build_optimizer(self.model, cfg.train.lr, cfg.train.weight_decay)
        self.schedule, self.progress = Schedule(cfg.train), Progress()
        t = cfg.train  # a live bar on a terminal, the plain lines otherwise
        self.display = TrainDisplay(t.max_steps, t.max_minutes, t.max_epochs,
                                    enabled=dist.is_main() and not quiet)
        if resume:
            self._restore()
        init_weights(self.model, cfg, v, resume)  # train.init_from
        self.chosen = dist.broadcast(precision.resolve(  # rank 0's choice on every rank
            cfg.train.precision, self.device, self.run.precision if resume else None,
            self._precision_key, self._time_precisions))
        self.precision = self.chosen["precision"]  # bf16 | fp32
        self._write_run_files(resume)

    def _precision_key(self) -> str:
        c = self.cfg
        return precision.cache_key(self.device, self.model, {
            "family": c.model.family, "batch_tokens": c.train.batch_tokens,
            "max_len": c.data.max_len, "concat": c.data.concat,
            "guided": c.guided.weight > 0,
            "full_context": c.guided.full_context, "world": dist.world_size()})

    def _time_precisions(self, precisions: list[str]) -> dict[str, list[float]]:
        """precision.time_steps on the plain model over batches spread across this epoch."""
        d, c = self.data, self.cfg
        spread = precision.spread(self.epoch_batches(self.progress.epoch))
        chosen = list(iterate_batches(d.train_src, d.train_tgt, spread, d.train_guides))
        self.model.train()

        def step(batch, name: str) -> None:
            with dist.autocast(self.device, name):
                loss = loss_fn(self.model, batch.to(self.device), c.train.label_smoothing,
                               c.guided)
            loss.backward()
            self.model.zero_grad(set_to_none=True)

        with precision.random_state_kept():
            return precision.time_steps(step, chosen, precisions, self.device)

    def _check_run_dir(self, resume: bool) -> None:
        """A resume's checkpoint is read and checked (`check_resumable`) before the run
        reads or writes anything, so a refused resume changes nothing in the run folder."""
        run, last = self.run, self.run.checkpoint("last")
        if resume and not last.is_file():
            raise NMTError(f"{last}: nothing to resume; train without --resume")
        if not resume and last.is_file():
            raise NMTError(f"{run.path} already holds a trained run; use --resume to continue "
                           "it or pick another name with --set name=...")
        self.resumed = resume_payload(last, config_to_dict(self.cfg)) if resume else None

    def _write_run_files(self, resume: bool) -> None:
        """config.yaml and precision.json, once data, model and checkpoint fit together (by
        rename), and metrics.jsonl without records of redone work or an abandoned start."""
        if dist.is_main():
            self.run.path.mkdir(parents=True, exist_ok=True)
            save_config(self.cfg, self.run.config)
            kept = {k: v for k, v in self.chosen.items() if k != "source"}
            replace_text(self.run.precision, json.dumps(kept, indent=1) + "\n")
            keep_metrics(self.run, self.progress.step if resume else None)

    def _restore(self) -> None:
        payload, self.resumed = self.resumed, None  # read and checked by _check_run_dir
        load_resumed(self.run.checkpoint("last"), payload, self.data.vocab, self.model, self.optim)
        self.schedule.load_state_dict(payload["schedule"])
        self.progress = Progress(**payload["progress"])
        torch.set_rng_state(payload["rng_torch"])
        random.setstate(_tuples(payload["rng_python"]))
        if payload.get("rng_cuda") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(payload["rng_cuda"])  # dropout's draws on the GPU

    def save(self, which: str) -> None:
        if not dist.is_main():
            return
        payload = {
            "model": self.model.state_dict(), "optimizer": self.optim.state_dict(),
            "schedule": self.schedule.state_dict(), "progress": vars(self.progress),
            "rng_torch": torch.get_rng_state(), "rng_python": list(random.getstate()),
            "rng_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "config": config_to_dict(self.cfg), "src_vocab": self.data.vocab.src_size,
            "tgt_vocab": self.data.vocab.tgt_size, "vocab_sha256": self.data.corpus.record["vocab"]}
        save_checkpoint(self.run.checkpoint(which), payload)
        if which == "last":  # a checkpoint of this epoch: the older draws can go
            prune_sampled(self.cfg, self.run.sampled, self.progress.epoch)

    def _keep(self) -> None:
        """train.keep_last: this validation's weights as checkpoints/step<N>.pt (weights
        only: they are for averaging), the oldest beyond N removed."""
        n = self.cfg.train.keep_last
        if not n or not dist.is_main():
            return
        payload = {"model": self.model.state_dict(), "progress": {"step": self.progress.step},
                   "config": config_to_dict(self.cfg), "src_vocab": self.data.vocab.src_size,
                   "tgt_vocab": self.data.vocab.tgt_size}
        save_checkpoint(self.run.checkpoint(f"step{self.progress.step:08d}"), payload)
        for old in kept_checkpoints(self.run.checkpoints)[:-n]:
            old.unlink()

    def log(self, record: dict) -> None:
        if not dist.is_main():
            return
        with open(self.run.metrics, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")

    def say(self, text: str) -> None:
        if dist.is_main() and not self.quiet:
            self.display.print(text)

    def epoch_batches(self, epoch: int) -> Batches:
        """This rank's token batches of `epoch`, shuffled with seed train.seed + epoch: each
        epoch of a run has its own order, and a resumed run the same one."""
        d = self.data
        if d.sample_keep is not None:  # this epoch's sampled segmentation, its own lengths
            d.train_src, d.train_tgt = sampled_examples(self.cfg, d, epoch, self.run.sampled)
            d.train_idx = range(len(d.train_src))
        lengths = pair_lengths(d.train_src, d.train_tgt)  # from a store's offsets
        batches = token_batches(lengths, self.cfg.train.batch_tokens,
                                self.cfg.train.seed + epoch, d.train_idx)
        return dist.shard(batches)

    def train_step(self, batch, used: float = 0.0, real: bool = True) -> float | None:
        """One optimiser step; the per-token loss of every rank's batch, or None if it was not
        finite. `used`: the budget's fraction spent (schedule `linear`), the same on every
        rank; `real` False: a stand-in for a batch with fewer rows than ranks (Batches.real)."""
        self.model.train()
        self.model.at_step(self.progress.step + 1)
        set_lr(self.optim, self.schedule.lr(self.progress.step + 1, used))
        with dist.autocast(self.device, self.precision):
            loss = loss_fn(self.ddp, batch.to(self.device), self.cfg.train.label_smoothing,
                           self.cfg.guided) * (1.0 if real else 0.0)  # a stand-in counts 0
        n_tokens, total = dist.all_sums(batch.n_tokens if real else 0, loss.item())  # all ranks
        if not math.isfinite(total):
            self.optim.zero_grad(set_to_none=True)
            return None
        (loss * dist.world_size() / n_tokens).backward()
        if self.cfg.train.clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.train.clip)
        self.optim.step()
        self.optim.zero_grad(set_to_none=True)
        self.step_tokens = int(n_tokens)
        return total / max(n_tokens, 1)

    def validate(self) -> dict:
        """Validation loss/perplexity on the chosen sentences, greedy BLEU and chrF."""
        d, model = self.data, self.model
        model.eval()
        total, tokens = 0.0, 0
        with torch.no_grad():
            lengths = pair_lengths(d.valid_src, d.valid_tgt)
            for batch in iterate_batches(d.valid_src, d.valid_tgt,
                                         token_batches(lengths, 4096, None)):
                total += loss_fn(model, batch.to(self.device), 0.0).item()
                tokens += batch.n_tokens
        hyps = translate_ids(model, d.vocab, d.valid_src, self.cfg.decode, beam=1)
        scores = bleu_chrf(hyps, d.valid_refs)
        n = self.cfg.train.align_sentences
        if n and dist.is_main():
            step = self.progress.step
            self.board.attention(step, dump_training_alignments(
                model, d.vocab, d.valid_src[:n], d.valid_tgt[:n],
                self.run.align / "steps" / f"step{step:08d}.npz", step))
        loss = total / max(tokens, 1)
        record = {"valid_loss": loss, "valid_ppl": math.exp(min(loss, 50)), **scores}
        if d.valid_links is not None:  # guided: how well the supervised heads follow the teacher
            records = collect(model, d.vocab, d.valid_src, d.valid_tgt, **reading_of(self.cfg))
            record["valid_aer"] = teacher_aer(records, d.valid_links)
        return record

    def out_of_budget(self) -> str | None:
        t, p = self.cfg.train, self.progress
        if t.max_steps and p.step >= t.max_steps:
            return f"reached train.max_steps={t.max_steps}"
        if t.max_minutes and self.elapsed() >= t.max_minutes * 60:
            return f"reached train.max_minutes={t.max_minutes}"
        if t.max_epochs and p.epoch >= t.max_epochs:
            return f"reached train.max_epochs={t.max_epochs}"
        if t.patience and p.stale >= t.patience:
            return f"no validation BLEU gain in {t.patience} validations (early stop)"
        return None

    def fit(self) -> Progress:
        d, c = self.data, self.cfg
        record = {"kind": "data", "pairs": d.pairs, "kept": d.kept,
                  "examples": len(d.train_idx),
                  **({"unguided": d.unguided} if d.train_guides is not None else {}),
                  "src_vocab": d.vocab.src_size, "tgt_vocab": d.vocab.tgt_size,
                  "precision": self.precision, "precision_source": self.chosen["source"],
                  **({"precision_timings": self.chosen["timings"]}
                     if "timings" in self.chosen else {}),
                  **({"probe_s": self.chosen["probe_s"]}
                     if self.chosen["source"] == "probe" else {})}
        self.log(record)
        dropped = record["pairs"] - record["kept"]
        self.say(f"data: {record['kept']:,} of {record['pairs']:,} training pairs"
                 + (f" ({dropped:,} empty or longer than data.max_len={c.data.max_len} "
                    "subwords, left out)" if dropped else "")
                 + (f", joined into {record['examples']:,} examples of 1 to "
                    f"{c.data.concat} pairs (data.concat)" if c.data.concat > 1 else "")
                 + f"; vocabulary {d.vocab.src_size:,}/{d.vocab.tgt_size:,} pieces "
                 f"(vocab.size={c.vocab.size}); "
                 + precision.describe(self.chosen, c.train.precision)
                 + (f"; {d.unguided:,} pairs' teacher links do not fit their words: "
                    "trained without guidance" if d.unguided else ""))
        with StopRequest() as stop, self.display, self.board:
            reason = self._loop(stop)
        if reason == "signal":
            self.progress.elapsed = self.elapsed()
            self.save("last")
            raise Interrupted(stop.signum, f"stopped by {stop.signal or 'a signal'} at step "
                              f"{self.progress.step}; checkpoint saved; continue with: nmt train "
                              f"--config {self.run.config} --resume")
        self.say(f"done: {reason}; best validation BLEU {self.progress.best_bleu:.2f}")
        return self.progress

    def _loop(self, stop: StopRequest) -> str:
        p, t = self.progress, self.cfg.train
        self.started, self.base, bad_run = time.time(), p.elapsed, 0
        window_tokens, window_time, window_loss = 0, 0.0, 0.0
        while True:
            batches = self.epoch_batches(p.epoch)
            for index in range(p.batch_in_epoch, len(batches)):
                # rank 0's stop decision and budget fraction, so every rank steps alike
                reason, used = dist.broadcast((self.out_of_budget() or (
                    "signal" if stop.signal else None), self.used_budget()))
                if reason:
                    return self._finish(reason)
                batch = next(iterate_batches(self.data.train_src, self.data.train_tgt,
                                             [batches[index]], self.data.train_guides))
                tick = time.perf_counter()
                loss = self.train_step(batch, used, batches.real(index))
                seconds = time.perf_counter() - tick
                p.batch_in_epoch = index + 1
                if loss is None:
                    p.skipped, bad_run = p.skipped + 1, bad_run + 1
                    if bad_run >= t.max_bad_steps:
                        last = self.run.checkpoint("last")
                        kept = (f"the last good checkpoint is {last}" if last.is_file()
                                else "no checkpoint was saved yet")
                        raise NMTError(f"{bad_run} non-finite losses in a row at step {p.step}; "
                                       f"lower train.lr or check the data; {kept}")
                    continue
                bad_run = 0
                p.step += 1
                p.tokens += self.step_tokens  # every rank's
                p.train_seconds += seconds
                window_tokens += self.step_tokens
                window_time += seconds
                window_loss += loss * self.step_tokens
                self.display.update(step=p.step, epoch=p.epoch, loss=loss, tokens=self.step_tokens,
                                    position=p.epoch + p.batch_in_epoch / len(batches),
                                    seconds=seconds, elapsed=self.elapsed())
                if p.step % t.log_every == 0:
                    self._log_train(window_loss / window_tokens, window_tokens / window_time)
                    window_tokens, window_time, window_loss = 0, 0.0, 0.0
                if p.step % t.valid_every == 0:
                    self._validate_and_save()
            p.epoch, p.batch_in_epoch = p.epoch + 1, 0

    def elapsed(self) -> float:
        """Seconds of this run so far, earlier sessions (before --resume) included."""
        return self.base + time.time() - self.started

    def used_budget(self) -> float:
        return budget_used(self.cfg.train, self.progress.step, self.elapsed())

    def _log_train(self, loss: float, tok_s: float) -> None:
        p = self.progress
        elapsed = self.elapsed()
        lr = self.schedule.lr(p.step, self.used_budget())
        tok_s *= dist.world_size()  # every process's tokens: one figure for all three sinks
        release_free_memory()  # freed blocks of past shapes, back to the system
        self.log({"kind": "train", "step": p.step, "epoch": p.epoch, "loss": loss, "lr": lr,
                  "tokens_per_s": tok_s, "elapsed": elapsed, "rss_mib": rss_mib(),
                  "peak_rss_mib": peak_rss_mib()})
        self.board.scalars(p.step, {"train/loss": loss, "train/lr": lr,
                                    "train/tokens_per_s": tok_s})
        self.say(f"step {p.step:>6} | epoch {p.epoch:>3} | loss {loss:6.3f} | lr {lr:.2e} | "
                 f"{tok_s:7.0f} tgt tok/s | {elapsed / 60:5.1f} min")

    def _validate_and_save(self) -> None:
        p = self.progress
        record = dist.broadcast(self.validate() if dist.is_main() else None)  # validate once
        release_free_memory()  # decoding's shapes are not training's
        self.schedule.observe(record["bleu"])
        self.display.validated(record["bleu"], max(record["bleu"], p.best_bleu))
        improved = record["bleu"] > p.best_bleu
        p.best_bleu, p.stale = (record["bleu"], 0) if improved else (p.best_bleu, p.stale + 1)
        p.elapsed = elapsed = self.elapsed()
        p.history.append({"step": p.step, "elapsed": elapsed, "bleu": record["bleu"]})
        self.log({"kind": "valid", "step": p.step, "epoch": p.epoch, "elapsed": elapsed,
                  "train_tokens_per_s": p.tokens / max(p.train_seconds, 1e-9), **record})
        names = {"loss": "valid_loss", "bleu": "bleu", "chrf": "chrf", "aer": "valid_aer"}
        self.board.scalars(p.step, {f"valid/{k}": record[v] for k, v in names.items()
                                    if v in record})
        aer = f" AER {record['valid_aer']:.3f}" if "valid_aer" in record else ""
        self.say(f"valid step {p.step}: loss {record['valid_loss']:.3f} ppl "
                 f"{record['valid_ppl']:.2f} BLEU {record['bleu']:.2f} chrF "
                 f"{record['chrf']:.2f}{aer}{' (best)' if improved else ''}")
        if improved:
            self.save("best")
        self.save("last")
        self._keep()

    def _finish(self, reason: str) -> str:
        p = self.progress
        if reason != "signal" and (not p.history or p.history[-1]["step"] != p.step):
            self._validate_and_save()
        return reason


def _tuples(value):
    """Python's RNG state comes back from a checkpoint as lists; make it tuples again."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def train(cfg: Config, resume: bool = False, quiet: bool = False) -> Progress:
    """Train the run described by `cfg` (or continue it with `resume`).

    The run's lock (`runs/<name>/.lock`, rank 0 only) is held throughout: a second
    `nmt train` of the same run refuses at once instead of sharing its files."""
    with run_lock(cfg.run_dir) if dist.is_main() else nullcontext():
        return Trainer(cfg, resume, quiet).fit()
