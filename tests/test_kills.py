"""The kill harness (issue 60, item 6): `nmt data import`, `nmt data prepare` with encoding
workers and `nmt train` with subword sampling are killed by SIGKILL and SIGTERM at points
spread over an uninterrupted run's duration; after each kill the next command must run
cleanly, the corpus at its path must be whole (its files' checksums those of its
manifest), no scratch folder may outlive the next writer, no process of the killed
command may be alive, and a resumed training must continue on its pinned data.

`make test` kills each verb once per signal (NMT_KILLS=1); `make kill` runs the full
profile (NMT_KILLS=30) and prints the counts (docs/data.md, "Safe to kill")."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from nmt.core.config import config_to_dict
from tests.test_run_owns_data import PREPARE, _config, _import, _raw, proc_stats

REPO = Path(__file__).resolve().parent.parent
KILLS = int(os.environ.get("NMT_KILLS", "1"))
COUNTS: Counter = Counter()
pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")


def _group_alive(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group `pgid`."""
    return [pid for pid, fields in proc_stats().items()
            if int(fields[2]) == pgid and fields[0] != "Z"]


def _start(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", PREPARE, *args], cwd=cwd,
                            env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def _finish(args: list[str], cwd: Path) -> None:
    proc = _start(args, cwd)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, f"{args}: {err.decode()[-600:]}"


def _whole(folder: Path) -> bool:
    manifest = json.loads((folder / "manifest.json").read_text())
    for split, entry in manifest["splits"].items():
        for lang, sha in entry["sha256"].items():
            if hashlib.sha256((folder / f"{split}.{lang}").read_bytes()).hexdigest() != sha:
                return False
    return True


def _scratch(*roots: Path) -> list[Path]:
    return [p for root in roots if root.is_dir() for p in root.rglob(".*.tmp-*")]


def _kill(args: list[str], cwd: Path, after: float, signum: int) -> None:
    proc = _start(args, cwd)
    time.sleep(after)
    if proc.poll() is None:
        proc.send_signal(signum)
        COUNTS["kills", args[0] if args[0] != "data" else args[1], signum.name] += 1
    proc.communicate(timeout=120)
    deadline = time.monotonic() + 10
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _group_alive(proc.pid)
    COUNTS["orphans", args[0] if args[0] != "data" else args[1], signum.name] += len(left)
    for pid in left:  # leave nothing behind for the next case, then fail
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes of the killed {args[:2]} alive: {left}"


def _timed(args: list[str], cwd: Path) -> float:
    tick = time.monotonic()
    _finish(args, cwd)
    return time.monotonic() - tick


def _offsets(duration: float) -> list[float]:
    return [duration * (k + 0.5) / KILLS for k in range(KILLS)]


SIGNALS = [signal.SIGKILL, signal.SIGTERM]


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_killed_imports_leave_a_whole_corpus_and_nothing_else(signum, tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    lines = [f"satz {i} " + "wort " * (i % 13) for i in range(60_000)]
    (raw / "a.de").write_text("".join(x + "\n" for x in lines))
    (raw / "a.en").write_text("".join(x.replace("satz", "sentence") + "\n" for x in lines))
    args = ["data", "import", "big", "--pair", "de-en", "--files", str(raw / "a.de"),
            str(raw / "a.en"), "--valid-size", "100"]
    duration = _timed(args, tmp_path)
    folder = tmp_path / "data" / "big" / "de-en"
    for after in _offsets(duration):
        _kill(args, tmp_path, after, signum)
        assert _whole(folder), "the corpus at its path is not whole"
        COUNTS["whole", "import", signum.name] += 1
        _finish(args, tmp_path)  # the next writer sweeps
        assert not _scratch(tmp_path / "data"), _scratch(tmp_path / "data")
        COUNTS["clean", "import", signum.name] += 1


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_killed_prepares_leave_no_worker_and_no_half_store(signum, data_root, tmp_path):
    root = tmp_path / "data"
    _import(root, _raw(data_root, tmp_path / "raw", 0))
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(config_to_dict(_config(root, tmp_path / "runs", "p"))))
    args = ["data", "prepare", "-c", str(config)]
    duration = _timed(args, tmp_path)
    for after in _offsets(duration):
        for cache in (root / ".cache").glob("spm/*"):  # encode (and train) again each time
            if cache.is_dir():
                import shutil

                shutil.rmtree(cache)
        _kill(args, tmp_path, after, signum)
        assert _whole(root / "mini" / "src-tgt")
        COUNTS["whole", "prepare", signum.name] += 1
        _finish(args, tmp_path)
        assert not _scratch(root), _scratch(root)
        COUNTS["clean", "prepare", signum.name] += 1


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_killed_trainings_resume_on_their_pinned_data(signum, data_root, tmp_path):
    root = tmp_path / "data"
    _import(root, _raw(data_root, tmp_path / "raw", 0))
    raw = config_to_dict(_config(root, tmp_path / "runs", "t", sampling_alpha=0.1))
    raw["train"].update(max_steps=12, valid_every=4, threads=1)
    config = tmp_path / "t.yaml"
    config.write_text(yaml.safe_dump(raw))
    args = ["train", "-c", str(config), "--no-evaluate"]
    run = tmp_path / "runs" / "t"
    duration = _timed(args, tmp_path)
    for k, after in enumerate(_offsets(duration)):
        import shutil

        shutil.rmtree(run)
        _import(root, _raw(data_root, tmp_path / "raw", 0))  # the corpus the run starts on
        _kill(args, tmp_path, after, signum)
        pinned = run / "corpus" / "pinned.json"
        before = json.loads(pinned.read_text())["splits"] if pinned.is_file() else None
        _import(root, _raw(data_root, tmp_path / f"other{k}", 4000))  # a re-import meanwhile
        resume = (run / "checkpoints" / "last.pt").is_file()
        _finish(args + (["--resume"] if resume else []), tmp_path)
        assert not _scratch(root, run), _scratch(root, run)
        COUNTS["clean", "train", signum.name] += 1
        if resume:
            assert json.loads(pinned.read_text())["splits"] == before  # the pinned data
            COUNTS["exact resumes", "train", signum.name] += 1


def test_zz_kill_counts():
    """The harness's counts per verb and signal (printed with -s; make kill shows them)."""
    for (what, verb, name), count in sorted(COUNTS.items()):
        print(f"kill harness: {verb:8} {name:8} {what:14} {count}")
