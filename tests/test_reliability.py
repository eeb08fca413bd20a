"""Reliability: atomic checkpoints, kill -9 then --resume, SIGINT/SIGTERM, non-finite
losses, and loading only what is safe (no code from checkpoints or configs).

Trainings here are tiny (emb/hidden 32, a few dozen steps on a 300-pair synthetic corpus,
one thread); subprocesses have timeouts so nothing can hang.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

import nmt.core.checkpoint
import nmt.core.scratch
import nmt.training.trainer
from nmt.core.checkpoint import FORMAT, load_checkpoint, save_checkpoint
from nmt.core.errors import NMTError
from nmt.data.corpora import SYNTH_PAIR
from nmt.data.store import encode_split
from nmt.data.subwords import prepare_vocab
from nmt.data.synth import write_synth
from nmt.models.checks import load_config
from nmt.models.runs import load_run
from nmt.training.trainer import Trainer
from tests.test_cli import run_cli

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 120  # seconds any one training subprocess may take before the test fails


# ------------------------------------------------------------------------ shared helpers


def make_corpus(root: Path) -> Path:
    """A 300-pair synthetic corpus; the manifest keeps `ensure_synth` from replacing it."""
    out = root / "synth" / SYNTH_PAIR
    counts = write_synth(out, seed=7, sizes={"train": 300, "val": 20, "test": 20})
    (out / "manifest.json").write_text(json.dumps({"source": "test", "splits": counts}))
    return root


def write_config(path: Path, root: Path, runs: Path, name: str, family: str = "bahdanau",
                 **train) -> Path:
    """A tiny YAML config (one thread, validation and checkpoint every 5 steps). The
    precision NMT_TEST_PRECISION forces is written into it: the runs these tests start in
    subprocesses do not see the suite's in-process override (tests/conftest.py)."""
    model = {"family": family, "emb_size": 32, "hidden_size": 32, "dropout": 0.1}
    if os.environ.get("NMT_TEST_PRECISION"):
        train = {"precision": os.environ["NMT_TEST_PRECISION"], **train}
    if family == "fixed_context":
        model["bidirectional"] = False
    raw = {
        "name": name, "runs_dir": str(runs),
        "data": {"root": str(root), "corpus": "synth", "pair": SYNTH_PAIR, "max_len": 12},
        "vocab": {"size": 200},
        "model": model,
        "train": {"batch_tokens": 400, "lr": 0.01, "schedule": "constant", "warmup": 5,
                  "max_steps": 20, "valid_every": 5, "valid_sentences": 10,
                  "align_sentences": 0, "log_every": 10, "threads": 1, **train},
        "decode": {"beam": 1},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def warm_caches(config: Path) -> None:
    """Train the SentencePiece model and encode the splits once, so runs reuse them."""
    cfg = load_config(config)
    vocab_dir = prepare_vocab(cfg)
    for split in (cfg.data.train, cfg.data.valid, cfg.data.test):
        encode_split(cfg, vocab_dir, split)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def step_of(path: Path) -> int:
    return load_checkpoint(path)["progress"]["step"]


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = make_corpus(tmp_path_factory.mktemp("data"))
    warm_caches(write_config(root / "warm.yaml", root, root / "unused", "warm"))
    return root


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory) -> Path:
    """One tiny bahdanau run (10 steps), for the loading tests; never modified."""
    runs = tmp_path_factory.mktemp("runs")
    cfg = load_config(write_config(runs / "b.yaml", corpus, runs, "b", max_steps=10))
    Trainer(cfg, quiet=True).fit()
    return cfg.run_dir


def _start(config: Path, *extra: str, tmp: Path) -> tuple[subprocess.Popen, Path]:
    """`python -m nmt train` in a subprocess; stderr goes to a file (no pipe to fill)."""
    err = tmp / f"stderr{time.monotonic_ns()}.txt"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    with open(err, "wb") as handle:
        proc = subprocess.Popen([sys.executable, "-m", "nmt", "train", "--config", str(config),
                                 "--no-evaluate", *extra], cwd=tmp, env=env,
                                stdout=subprocess.DEVNULL, stderr=handle,
                                start_new_session=True)
    return proc, err


def _wait_for_step(proc: subprocess.Popen, err: Path, ckpt: Path, step: int) -> int:
    """Poll `ckpt` until it holds at least `step`; fail (and kill) on exit or timeout."""
    deadline = time.monotonic() + TIMEOUT
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"training ended early ({proc.returncode}): {err.read_text()}")
            if ckpt.is_file():
                try:
                    got = step_of(ckpt)
                except NMTError:  # replaced while reading: try again
                    got = -1
                if got >= step:
                    return got
            time.sleep(0.02)
        pytest.fail(f"no checkpoint at step {step} after {TIMEOUT}s: {err.read_text()}")
    except BaseException:
        proc.kill()
        proc.wait(10)
        raise


# -------------------------------------------------------------------- atomic checkpoints


def _failing_torch_save(payload, handle):
    handle.write(b"PK\x03\x04 half a checkpoint")
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class _FullDisk(io.FileIO):
    """A file that takes 1,000 bytes, then fails like a full disk."""

    def write(self, data):
        if self.tell() + len(data) > 1000:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(data)


@pytest.mark.parametrize("failure", ["torch.save raises", "disk fills during torch.save"])
def test_failed_save_keeps_the_previous_checkpoint(failure, tmp_path, monkeypatch):
    path = tmp_path / "checkpoints" / "last.pt"
    save_checkpoint(path, {"model": {"w": torch.arange(50_000.0)}, "progress": {"step": 1}})
    before = sha(path)
    if failure == "torch.save raises":
        monkeypatch.setattr(torch, "save", _failing_torch_save)
    else:  # the real torch.save, writing to a disk that runs out of space
        monkeypatch.setattr(nmt.core.scratch, "open", lambda p, mode: _FullDisk(p, "wb"),
                            raising=False)  # atomic_write's scratch file (replace_file)
    with pytest.raises(NMTError, match="previous checkpoint is intact") as info:
        save_checkpoint(path, {"model": {"w": torch.zeros(50_000)}, "progress": {"step": 2}})
    assert str(path) in str(info.value) and "No space left" in str(info.value)
    assert [p.name for p in path.parent.iterdir()] == ["last.pt"]  # no temp file left
    assert sha(path) == before
    payload = load_checkpoint(path)
    assert payload["progress"]["step"] == 1
    assert torch.equal(payload["model"]["w"], torch.arange(50_000.0))


# ------------------------------------------------------------------- kill -9, then resume


def test_kill_9_then_resume_matches_an_uninterrupted_run(corpus, tmp_path, capsys):
    runs = tmp_path / "runs"
    # the killed run has no end of its own, so however late the kill lands (a loaded
    # machine), it lands mid-run; both runs then end 20 steps after it (constant rate:
    # max_steps does not change the schedule)
    config = write_config(tmp_path / "kill.yaml", corpus, runs, "killed", max_steps=100_000)
    ckpt = runs / "killed" / "checkpoints" / "last.pt"
    proc, err = _start(config, tmp=tmp_path)
    _wait_for_step(proc, err, ckpt, 10)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL
    killed_at = step_of(ckpt)
    assert killed_at >= 10
    end = f"train.max_steps={killed_at + 20}"

    resumed = subprocess.run([sys.executable, "-m", "nmt", "train", "--config", str(config),
                              "--resume", "--set", end, "--no-evaluate"], check=False,
                             cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT,
                             env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"})
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr

    code, _, stderr = run_cli(capsys, "train", "--config", config, "--set", "name=full",
                              "--set", end, "--no-evaluate")
    assert code == 0, stderr
    a = load_checkpoint(ckpt)
    b = load_checkpoint(runs / "full" / "checkpoints" / "last.pt")
    assert a["progress"]["step"] == b["progress"]["step"] == killed_at + 20
    assert a["model"].keys() == b["model"].keys()
    for key, value in a["model"].items():
        assert torch.allclose(value, b["model"][key], atol=1e-6, rtol=0), key


# ---------------------------------------------------------------------- SIGINT / SIGTERM


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_signal_saves_and_resume_continues(signum, corpus, tmp_path):
    runs = tmp_path / "runs"
    config = write_config(tmp_path / "sig.yaml", corpus, runs, "sig", max_steps=100_000)
    ckpt = runs / "sig" / "checkpoints" / "last.pt"
    proc, err = _start(config, tmp=tmp_path)
    _wait_for_step(proc, err, ckpt, 5)
    proc.send_signal(signum)
    try:
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = err.read_text()
    assert code == 128 + signum, stderr  # as a shell reports a death by the signal
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("nmt: stopped by")]
    assert len(errors) == 1 and stderr.splitlines()[-1] == errors[0], stderr
    hint = f"nmt train --config {runs / 'sig' / 'config.yaml'} --resume"  # resolved config
    assert signum.name in errors[0] and errors[0].endswith(hint), errors[0]
    stopped = int(re.search(r"at step (\d+)", errors[0]).group(1))
    assert step_of(ckpt) == stopped >= 5

    resolved = load_config(runs / "sig" / "config.yaml", [f"train.max_steps={stopped + 3}"])
    trainer = Trainer(resolved, resume=True, quiet=True)
    assert trainer.progress.step == stopped
    assert trainer.fit().step == stopped + 3
    assert step_of(ckpt) == stopped + 3


# ---------------------------------------------------------------------- non-finite losses


def test_a_stop_something_swallowed_before_training_still_stops_it(corpus, tmp_path,
                                                                   monkeypatch):
    """The command line's handler raises where the signal lands; if that is inside code that
    swallows exceptions (an extension module's import), the stop stays pending and the
    training loop takes it at its first step, saving and naming how to resume."""
    from nmt.core.errors import Interrupted

    config = write_config(tmp_path / "s.yaml", corpus, tmp_path / "runs", "swallowed",
                          max_steps=50)
    monkeypatch.setattr(Interrupted, "pending", None)
    try:
        raise Interrupted(signal.SIGTERM)
    except Interrupted as exc:  # swallowed, as lxml's import did
        Interrupted.pending = exc
    with pytest.raises(Interrupted, match="stopped by SIGTERM at step [01]; checkpoint saved"):
        Trainer(load_config(config), quiet=True).fit()
    assert Interrupted.pending is None


def _nan_on(monkeypatch, bad) -> list[int]:
    """Make the training loss NaN on the training calls `bad(n)` (n counts from 1);
    validation and the precision probe's timed passes (train.precision auto: timed again
    whenever no decision was cached) keep the real loss. Returns the list of training
    calls seen."""
    real, calls, probing = nmt.training.trainer.loss_fn, [], []
    real_probe = nmt.training.trainer.Trainer._time_precisions

    def time_precisions(self, precisions):
        probing.append(True)
        try:
            return real_probe(self, precisions)
        finally:
            probing.pop()

    def loss_fn(model, batch, smoothing, guided=None):
        loss = real(model, batch, smoothing, guided)
        if model.training and not probing:
            calls.append(len(calls) + 1)
            if bad(len(calls)):
                return loss * float("nan")
        return loss

    monkeypatch.setattr(nmt.training.trainer, "loss_fn", loss_fn)
    monkeypatch.setattr(nmt.training.trainer.Trainer, "_time_precisions", time_precisions)
    return calls


def test_non_finite_losses_stop_training_and_keep_the_checkpoint(corpus, tmp_path,
                                                                  monkeypatch):
    config = write_config(tmp_path / "nan.yaml", corpus, tmp_path / "runs", "nan",
                          max_steps=10, max_bad_steps=3)
    Trainer(load_config(config), quiet=True).fit()
    ckpts = tmp_path / "runs" / "nan" / "checkpoints"
    before = {p.name: sha(p) for p in ckpts.iterdir()}
    assert set(before) == {"best.pt", "last.pt"}

    calls = _nan_on(monkeypatch, lambda n: True)
    trainer = Trainer(load_config(config, ["train.max_steps=30"]), resume=True, quiet=True)
    with pytest.raises(NMTError) as info:
        trainer.fit()
    message = str(info.value)
    assert "3 non-finite losses" in message and "train.lr" in message
    assert str(ckpts / "last.pt") in message
    assert len(calls) == 3 and trainer.progress.skipped == 3 and trainer.progress.step == 10
    assert {p.name: sha(p) for p in ckpts.iterdir()} == before
    assert step_of(ckpts / "last.pt") == 10


def test_non_finite_losses_before_any_checkpoint(corpus, tmp_path, monkeypatch):
    config = write_config(tmp_path / "nan.yaml", corpus, tmp_path / "runs", "nan0",
                          max_bad_steps=2)
    _nan_on(monkeypatch, lambda n: True)
    with pytest.raises(NMTError, match="2 non-finite losses in a row at step 0.*train.lr.*"
                                       "no checkpoint was saved yet"):
        Trainer(load_config(config), quiet=True).fit()
    assert not (tmp_path / "runs" / "nan0" / "checkpoints").exists()


def test_one_non_finite_step_is_skipped_and_counted(corpus, tmp_path, monkeypatch):
    config = write_config(tmp_path / "nan1.yaml", corpus, tmp_path / "runs", "nan1",
                          max_steps=10, max_bad_steps=2)
    calls = _nan_on(monkeypatch, lambda n: n == 4)
    progress = Trainer(load_config(config), quiet=True).fit()
    assert progress.skipped == 1 and progress.step == 10 and len(calls) == 11
    payload = load_checkpoint(tmp_path / "runs" / "nan1" / "checkpoints" / "last.pt")
    assert payload["progress"]["skipped"] == 1
    assert all(torch.isfinite(v).all() for v in payload["model"].values())


# --------------------------------------------------------------------------- safe loading


class _Marker:
    """Unpickling this touches a file: proof that code from the file ran."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return Path.touch, (self.path,)


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
@pytest.mark.parametrize("writer", ["pickle.dump", "torch.save"])
def test_checkpoint_with_code_is_refused_not_run(writer, tmp_path):
    marker = tmp_path / "marker"
    payload = {"format": FORMAT, "model": {}, "evil": _Marker(marker)}
    path = tmp_path / "evil.pt"
    if writer == "pickle.dump":
        path.write_bytes(pickle.dumps(payload))
        pickle.loads(path.read_bytes())  # the file does run code when unpickled blindly
        assert marker.exists()
        marker.unlink()
    else:
        torch.save(payload, path)
    with pytest.raises(NMTError, match="not a readable nmt checkpoint"):
        load_checkpoint(path)
    assert not marker.exists()


def test_truncated_checkpoint(trained, tmp_path):
    data = (trained / "checkpoints" / "last.pt").read_bytes()
    path = tmp_path / "half.pt"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(NMTError, match="truncated"):
        load_checkpoint(path)
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(NMTError, match="truncated"):
        load_checkpoint(tmp_path / "empty.pt")


def test_foreign_checkpoint_without_our_marker(tmp_path):
    torch.save({"model": {"w": torch.ones(2)}}, tmp_path / "foreign.pt")
    with pytest.raises(NMTError, match=f"no '{FORMAT}' marker"):
        load_checkpoint(tmp_path / "foreign.pt")


def test_checkpoint_of_another_vocabulary(trained, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained, run)
    size = load_checkpoint(run / "checkpoints" / "best.pt")["src_vocab"]
    for which in ("best", "last"):
        path = run / "checkpoints" / f"{which}.pt"
        payload = torch.load(path, weights_only=True)
        torch.save({**payload, "src_vocab": size + 7}, path)
    with pytest.raises(NMTError) as info:
        load_run(run)
    message = str(info.value)
    assert f"{size + 7}/{size}" in message and f"{size}/{size}" in message
    assert "do not belong together" in message


def test_yaml_python_tag_is_refused_not_run(tmp_path):
    marker = tmp_path / "marker"
    config = tmp_path / "evil.yaml"
    config.write_text(f'model: !!python/object/apply:os.system ["touch {marker}"]\n')
    with pytest.raises(NMTError, match="invalid YAML.*python/object/apply"):
        load_config(config)
    assert not marker.exists()


def test_a_run_file_is_replaced_whole_and_a_killed_writers_scratch_is_swept(tmp_path):
    """nmt.core.rundir.replace_text: the old file or the new one, and no scratch file left;
    one a killed writer left (no live owner) goes with the next write of that file."""
    from nmt.core.rundir import replace_text

    target = tmp_path / "config.yaml"
    target.write_text("old\n")
    left = tmp_path / ".config.yaml.tmp-0badf00d"  # its writer was killed mid-write
    left.write_text("ha")
    other = tmp_path / ".scores.json.tmp-0badf00d"  # another file's: not this write's to sweep
    other.write_text("x")
    replace_text(target, "new\n")
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name, "config.yaml"]
