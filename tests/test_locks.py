"""Concurrent runs: the SentencePiece cache and the run directory are shared safely."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from tests.test_subwords import _cfg, _make_corpus


def _prepare(root: str, barrier, queue) -> None:
    from nmt.data.store import encode_split
    from nmt.data.subwords import Vocab, prepare_vocab

    cfg = _cfg(Path(root))
    barrier.wait()
    try:
        vocab_dir = prepare_vocab(cfg)
        vocab = Vocab.from_dir(vocab_dir)
        src, _ = encode_split(cfg, vocab_dir, "train")
        queue.put(("ok", str(vocab_dir), vocab.src_size, len(src)))
    except BaseException as exc:  # noqa: BLE001 - report any failure to the parent
        queue.put(("error", f"{type(exc).__name__}: {exc}", 0, 0))


def test_concurrent_prepares_share_the_sentencepiece_cache(tmp_path):
    _make_corpus(tmp_path)
    ctx = multiprocessing.get_context("spawn")
    n = 3
    barrier, queue = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_prepare, args=(str(tmp_path), barrier, queue)) for _ in range(n)]
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    assert [r[0] for r in results] == ["ok"] * n, results
    assert len({r[1] for r in results}) == 1  # one cache folder, complete for everyone
    assert len({r[2] for r in results}) == 1 and results[0][2] > 50
    assert {r[3] for r in results} == {200}
    spm = Path(results[0][1]).parent
    assert [p.name for p in spm.iterdir() if p.is_dir()] == [Path(results[0][1]).name]


def _train_and_hang(root: str, runs: str, ready) -> None:
    """A `train()` that holds its run and sleeps inside the training loop until killed."""
    import time

    from nmt.training.trainer import Trainer, train
    from tests.test_train import MODELS, tiny_config

    def hang(self, stop):
        ready.set()
        time.sleep(300)  # (no Event to wait on: a process killed inside Event.wait
        return "slept"  # leaves its Condition waiting for a wake-up that never comes)

    Trainer._loop = hang
    train(tiny_config(Path(root), Path(runs), "same", MODELS["bahdanau"], max_steps=2),
          quiet=True)


def test_a_second_run_with_the_same_name_refuses_at_once(data_root, tmp_path):
    from nmt.core.errors import NMTError
    from nmt.training.trainer import train
    from tests.test_train import MODELS, tiny_config

    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    first = ctx.Process(target=_train_and_hang, args=(str(data_root), str(tmp_path), ready))
    first.start()
    try:
        assert ready.wait(120), "the first run did not start"
        cfg = tiny_config(data_root, tmp_path, "same", MODELS["bahdanau"], max_steps=2)
        metrics = tmp_path / "same" / "metrics.jsonl"  # the first run's data line, if any
        before = metrics.read_bytes() if metrics.exists() else None
        with pytest.raises(NMTError, match=rf"in use by another `nmt train` \(pid {first.pid}\)"
                           ) as info:
            train(cfg, quiet=True)
        assert "\n" not in str(info.value)
        assert (metrics.read_bytes() if metrics.exists() else None) == before  # nothing by us
        # killed without any chance to clean up: the lock dies with the process
        first.kill()
        first.join(30)
        progress = train(cfg, quiet=True)
        assert progress.step == 2
    finally:
        first.kill()
        first.join(30)
