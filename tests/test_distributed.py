"""Data-parallel training with torchrun: 2 gloo CPU processes take the same steps as
1 process with the same global batch, and only rank 0 writes the run directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from nmt.core.checkpoint import load_checkpoint
from nmt.data.corpora import SYNTH_PAIR
from nmt.data.synth import write_synth


def _config(tmp_path: Path) -> Path:
    write_synth(tmp_path / "data" / "synth" / SYNTH_PAIR, seed=3,
                sizes={"train": 600, "val": 20, "test": 20})
    raw = {
        "name": "ddp", "runs_dir": str(tmp_path / "runs"),
        "data": {"root": str(tmp_path / "data"), "corpus": "synth", "pair": SYNTH_PAIR,
                 "max_len": 20},
        "vocab": {"size": 400},
        "model": {"family": "bahdanau", "emb_size": 32, "hidden_size": 32, "dropout": 0.0},
        "train": {"batch_tokens": 1200, "lr": 0.003, "max_steps": 6, "valid_every": 6, "log_every": 2,
                  "valid_sentences": 10, "align_sentences": 0, "threads": 1,
                  # fp32: half batches and whole batches sum the same gradients only to
                  # fp32 rounding; bf16 products round each half on its own
                  "precision": "fp32"},
        "decode": {"beam": 1},
    }
    path = tmp_path / "ddp.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _run(args: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=240)
    # the head holds a failed rank's own error, the tail torchrun's summary
    assert proc.returncode == 0, proc.stderr[:3000] + "\n...\n" + proc.stderr[-1500:]


def test_two_gloo_processes_match_one_process(tmp_path):
    config = _config(tmp_path)
    _run(["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "nmt",
          "train", "--config", str(config), "--no-evaluate"], tmp_path)
    _run(["-m", "nmt", "train", "--config", str(config), "--set", "name=single",
          "--no-evaluate"], tmp_path)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["ddp", "single"]
    ddp = load_checkpoint(tmp_path / "runs" / "ddp" / "checkpoints" / "last.pt")
    one = load_checkpoint(tmp_path / "runs" / "single" / "checkpoints" / "last.pt")
    assert ddp["progress"]["step"] == one["progress"]["step"] == 6
    assert ddp["progress"]["tokens"] == one["progress"]["tokens"]  # every rank's, counted
    for key, value in one["model"].items():
        torch.testing.assert_close(ddp["model"][key], value, atol=2e-5, rtol=1e-4)
    lines = (tmp_path / "runs" / "ddp" / "metrics.jsonl").read_text().splitlines()
    assert sum('"kind": "valid"' in line for line in lines) == 1  # validation ran once
    losses = [[r["loss"] for r in map(json.loads, (tmp_path / "runs" / name / "metrics.jsonl")
                                      .read_text().splitlines()) if r["kind"] == "train"]
              for name in ("ddp", "single")]
    assert losses[0] and losses[0] == pytest.approx(losses[1], rel=1e-4)  # the whole batch's


def test_bad_input_found_by_rank_0_stops_every_rank_in_one_line(tmp_path):
    """Rank 0 pins the corpus while the others wait: its error reaches them as the same
    one line, not as a broken connection's traceback."""
    config = _config(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
         "2", "-m", "nmt", "train", "--config", str(config), "--set", "data.corpus=nosuch",
         "--no-evaluate"], cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True, text=True, timeout=240)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("nmt: error:")]
    assert proc.returncode != 0 and len(errors) == 2 and errors[0] == errors[1], proc.stderr
    ours = [line for line in proc.stderr.splitlines()  # torchrun's own summary aside
            if line.strip().startswith("File ") and "/nmt/" in line]
    assert "nosuch" in errors[0] and not ours and "Connection closed" not in proc.stderr, ours


def test_two_ranks_train_every_one_of_301_pairs_once_an_epoch(tmp_path):
    """Issue 60, defect 11: small batches (fewer rows than ranks) are trained too, the
    second rank on a stand-in row of weight 0, so one epoch on 2 gloo ranks takes the steps
    and reaches the weights of one process (before: those batches were dropped)."""
    write_synth(tmp_path / "data" / "synth" / SYNTH_PAIR, seed=5,
                sizes={"train": 301, "val": 10, "test": 10})
    config = yaml.safe_load(_config(tmp_path / "unused").read_text())
    config["data"].update(root=str(tmp_path / "data"), max_len=40)
    config["runs_dir"] = str(tmp_path / "runs")
    config["train"].update(batch_tokens=44, max_steps=0, max_epochs=1, valid_every=10_000)
    path = tmp_path / "epoch.yaml"
    path.write_text(yaml.safe_dump(config))
    _run(["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "nmt",
          "train", "--config", str(path), "--no-evaluate"], tmp_path)
    _run(["-m", "nmt", "train", "--config", str(path), "--set", "name=single", "--no-evaluate"],
         tmp_path)
    ddp = load_checkpoint(tmp_path / "runs" / "ddp" / "checkpoints" / "last.pt")
    one = load_checkpoint(tmp_path / "runs" / "single" / "checkpoints" / "last.pt")
    from nmt.data.batching import filter_long, pair_lengths, token_batches
    from nmt.data.store import encode_split
    from nmt.data.subwords import prepare_vocab
    from nmt.models.checks import load_config

    cfg = load_config(path)
    src, tgt = encode_split(cfg, prepare_vocab(cfg), "train")
    keep = filter_long(src, tgt, 40)
    batches = token_batches(pair_lengths(src, tgt), 44, config["train"].get("seed", 1234), keep)
    assert (batches.sizes() < 2).sum() > 0, "no batch with fewer rows than ranks"
    assert ddp["progress"]["step"] == one["progress"]["step"] == len(batches)
    for key, value in one["model"].items():
        torch.testing.assert_close(ddp["model"][key], value, atol=5e-5, rtol=1e-3)


# ------------------------------------------- a rank past a small batch's rows: a stand-in


@pytest.mark.parametrize("world", [2, 3, 4])
def test_the_rank_equal_to_a_batchs_row_count_trains_a_stand_in_not_a_real_row(world):
    """Issue 74, item 5: under torchrun, rank r trains rows r, r + world, ... of each batch;
    a rank at or above the batch's row count (the rank equal to it included) gets a
    stand-in row of its own batch, counted not real (weight 0), and the real rows of all
    ranks are the batch, each once."""
    from nmt.data.batching import Batches

    sizes = list(range(1, world + 2))  # fewer rows than ranks, as many, one more
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    whole = Batches(np.arange(bounds[-1]), bounds, np.arange(len(sizes)))
    shards = [whole.shard(rank, world) for rank in range(world)]
    for k, size in enumerate(sizes):
        rows = list(range(bounds[k], bounds[k + 1]))
        assert [s.real(k) for s in shards] == [rank < size for rank in range(world)], (k, size)
        if size < world:
            assert not shards[size].real(k)  # the rank equal to the row count
        real = sorted(i for s in shards if s.real(k) for i in s[k])
        assert real == rows  # every row once, by the ranks below the row count
        for s in shards:
            assert len(s[k]) >= 1 and set(s[k]) <= set(rows)  # a stand-in: its own batch's


def test_a_stand_in_step_adds_no_tokens_no_loss_and_no_gradient(monkeypatch):
    """Trainer.train_step with real=False (Batches.real): this rank sends 0 tokens and a 0
    loss to the all-reduce, so the step is the other ranks' alone."""
    from nmt.core.config import Config
    from nmt.data.batching import iterate_batches
    from nmt.training import trainer as trainer_module
    from nmt.training.optim import build_optimizer
    from nmt.training.schedule import Schedule
    from nmt.training.trainer import Progress, Trainer
    from tests.conftest import tiny_model

    sent = []

    def all_sums(*values):  # another rank adds 40 real tokens and their loss
        sent.append(values)
        return values[0] + 40, values[1] + 80.0

    monkeypatch.setattr(trainer_module.dist, "all_sums", all_sums)
    monkeypatch.setattr(trainer_module.dist, "world_size", lambda: 2)
    src, tgt = [[5, 6, 7, 3], [8, 9, 3]], [[2, 5, 6, 3], [2, 7, 3]]
    for real in (False, True):
        t = Trainer.__new__(Trainer)
        t.cfg, t.device, t.precision, t.progress = Config(), torch.device("cpu"), "fp32", Progress()
        t.model = t.ddp = tiny_model("bahdanau").train()
        t.optim, t.schedule = build_optimizer(t.model, 1e-2), Schedule(t.cfg.train)
        before = {k: v.clone() for k, v in t.model.state_dict().items()}
        batch = next(iterate_batches(src, tgt, [[0, 1]]))
        loss = t.train_step(batch, real=real)
        moved = any(not torch.equal(before[k], v) for k, v in t.model.state_dict().items())
        tokens, total = sent[-1]
        if real:
            assert tokens == batch.n_tokens and total > 0 and moved
        else:
            assert (tokens, total) == (0, 0.0) and not moved and loss == 80.0 / 40
