"""The kill harness (issue 60, item 6; issue 74, item 4): every writer of nmt is killed by
SIGTERM, SIGINT, SIGHUP and SIGKILL at random instants (seeded) of an uninterrupted run's
duration, then the next command of that kind runs. Afterwards no scratch file or folder may
be left that the next command did not sweep (`.NAME.tmp-*`, `.NAME.old-*`, an older nmt's
`NAME.tmpPID`), every reader must see a whole old or a whole new state (a corpus whose
files match its manifest, an export or a published folder whose files match its stamp, a
checkpoint that loads, teacher links of every pair), no process of the killed command may
be alive, and a resumed training must continue on its pinned data.

The writers: `nmt data import`, `nmt data prepare` (encoding workers), `nmt train` (subword
sampling, checkpoint saves), `nmt data synth --force` (and its reverse pair), `nmt export`,
`nmt publish` and eflomal's work folder (`nmt data links`). `make test` runs none of it
(NMT_KILLS unset: the 28 cells take minutes); `make kills` (alias `make kill`) kills each
writer NMT_KILLS=30 times per signal and prints the table writer x signal x kills x
leftovers (docs/data.md, "Safe to kill")."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
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
KILLS = int(os.environ.get("NMT_KILLS", "0"))
COUNTS: Counter = Counter()
SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGKILL]
pytestmark = [pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc"),
              pytest.mark.skipif(KILLS < 1, reason="the kill harness runs as `make kills`")]


@pytest.fixture(autouse=True)
def _row_per_cell():
    """Each cell's rows as it ends, on stdout and appended to $NMT_KILLS_TABLE when set (a
    run spread over xdist workers, or cut short, still leaves its table)."""
    before = Counter(COUNTS)
    yield
    cells = sorted({(w, name) for (_, w, name) in COUNTS if COUNTS != before})
    lines = [f"{w}\t{name}\t{COUNTS['kills', w, name] - before['kills', w, name]}\t"
             f"{COUNTS['leftovers', w, name] - before['leftovers', w, name]}\t"
             f"{COUNTS['orphans', w, name] - before['orphans', w, name]}\n" for w, name in cells
             if any(COUNTS[k, w, name] != before[k, w, name]
                    for k in ("kills", "leftovers", "orphans"))]
    print("".join(lines), end="", flush=True)
    if lines and os.environ.get("NMT_KILLS_TABLE"):
        with open(os.environ["NMT_KILLS_TABLE"], "a", encoding="utf-8") as handle:
            handle.write("".join(lines))


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
    """What killed writers left under `roots`: scratch paths and their owner files, folders
    a swap left aside, and an older nmt's pid-named temporary files."""
    return [p for root in roots if root.is_dir() for pattern in (".*.tmp-*", ".*.old-*",
                                                                  "*.tmp[0-9]*")
            for p in root.rglob(pattern)]


def _kill(args: list[str], cwd: Path, after: float, signum: int, writer: str) -> None:
    proc = _start(args, cwd)
    time.sleep(after)
    if proc.poll() is None:
        proc.send_signal(signum)
        COUNTS["kills", writer, signum.name] += 1
    proc.communicate(timeout=120)
    deadline = time.monotonic() + 10
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _group_alive(proc.pid)
    COUNTS["orphans", writer, signum.name] += len(left)
    for pid in left:  # leave nothing behind for the next case, then fail
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes of the killed {args[:2]} alive: {left}"


def _timed(args: list[str], cwd: Path) -> float:
    tick = time.monotonic()
    _finish(args, cwd)
    return time.monotonic() - tick


def _instants(duration: float, writer: str, signum: signal.Signals):
    """Random instants of a run of `duration` seconds, seeded by writer and signal, until
    KILLS of them have found the command alive (one that ends before its instant is not a
    kill; at most 3 x KILLS tries)."""
    rng = random.Random(f"{writer}:{signum.name}")
    start = COUNTS["kills", writer, signum.name]
    for k in range(3 * KILLS):
        if COUNTS["kills", writer, signum.name] - start >= KILLS:
            return
        yield rng.uniform(0.05, duration * 0.95)


def _swept(writer: str, signum: signal.Signals, *roots: Path) -> None:
    """After the next command of the writer's kind: nothing killed writers left."""
    left = _scratch(*roots)
    COUNTS["leftovers", writer, signum.name] += len(left)
    assert not left, left


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_killed_imports_leave_a_whole_corpus_and_nothing_else(signum, tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    lines = [f"satz {i} " + "wort " * (i % 13) for i in range(60_000)]
    (raw / "a.de").write_text("".join(x + "\n" for x in lines))
    (raw / "a.en").write_text("".join(x.replace("satz", "sentence") + "\n" for x in lines))
    args = ["data", "import", "big", "--pair", "de-en", "--files", str(raw / "a.de"),
            str(raw / "a.en"), "--valid-size", "100"]
    folder = tmp_path / "data" / "big" / "de-en"
    for after in _instants(_timed(args, tmp_path), "import", signum):
        _kill(args, tmp_path, after, signum, "import")
        assert _whole(folder), "the corpus at its path is not whole"
        _finish(args, tmp_path)  # the next writer sweeps
        _swept("import", signum, tmp_path / "data")


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_killed_prepares_leave_no_worker_and_no_half_store(signum, data_root, tmp_path):
    root = tmp_path / "data"
    _import(root, _raw(data_root, tmp_path / "raw", 0))
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(config_to_dict(_config(root, tmp_path / "runs", "p"))))
    args = ["data", "prepare", "-c", str(config)]
    for after in _instants(_timed(args, tmp_path), "prepare", signum):
        for cache in (root / ".cache").glob("spm/*"):  # encode (and train) again each time
            if cache.is_dir():
                shutil.rmtree(cache)
        _kill(args, tmp_path, after, signum, "prepare")
        assert _whole(root / "mini" / "src-tgt")
        _finish(args, tmp_path)
        _swept("prepare", signum, root)


def _loads(checkpoints: Path) -> None:
    """Every checkpoint a reader may open is whole."""
    from nmt.core.checkpoint import load_checkpoint

    for path in checkpoints.glob("*.pt"):
        load_checkpoint(path)


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_killed_trainings_resume_on_their_pinned_data(signum, data_root, tmp_path):
    """nmt train: subword sampling and the checkpoint saves (best, last, step<N>)."""
    root = tmp_path / "data"
    _import(root, _raw(data_root, tmp_path / "raw", 0))
    raw = config_to_dict(_config(root, tmp_path / "runs", "t", sampling_alpha=0.1))
    raw["train"].update(max_steps=12, valid_every=4, threads=1, keep_last=2)
    config = tmp_path / "t.yaml"
    config.write_text(yaml.safe_dump(raw))
    args = ["train", "-c", str(config), "--no-evaluate"]
    run = tmp_path / "runs" / "t"
    for k, after in enumerate(_instants(_timed(args, tmp_path), "train", signum)):
        shutil.rmtree(run)
        _import(root, _raw(data_root, tmp_path / "raw", 0))  # the corpus the run starts on
        _kill(args, tmp_path, after, signum, "train")
        _loads(run / "checkpoints")
        pinned = run / "corpus" / "pinned.json"
        before = json.loads(pinned.read_text())["splits"] if pinned.is_file() else None
        _import(root, _raw(data_root, tmp_path / f"other{k}", 4000))  # a re-import meanwhile
        resume = (run / "checkpoints" / "last.pt").is_file()
        _finish(args + (["--resume"] if resume else []), tmp_path)
        _swept("train", signum, root, run)
        _loads(run / "checkpoints")
        if resume:
            assert json.loads(pinned.read_text())["splits"] == before  # the pinned data


def _stamped(folder: Path, stamp: str) -> None:
    """A folder that is there holds every file its stamp lists, with those bytes."""
    if not folder.exists():
        return
    made = json.loads((folder / stamp).read_text())
    for name, entry in made["files"].items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == entry["sha256"], name


@pytest.fixture(scope="module")
def transformer_run(data_root, tmp_path_factory) -> Path:
    """A tiny trained Transformer run (export and publish read it)."""
    from tests.test_train import MODELS, tiny_config

    base = tmp_path_factory.mktemp("kills-run")
    cfg = config_to_dict(tiny_config(data_root, base / "runs", "x", MODELS["transformer"],
                                     max_steps=2, valid_every=2))
    config = base / "x.yaml"
    config.write_text(yaml.safe_dump(cfg))
    _finish(["train", "-c", str(config), "--no-evaluate"], base)
    return base / "runs" / "x"


def _synth(tmp_path: Path, data_root: Path):
    root = tmp_path / "data"

    def args(k: int) -> list[str]:  # another seed each time: the reverse pair changes too
        return ["data", "synth", "--force", "--root", str(root), "--seed", str(1 + k % 2)]

    def whole() -> None:
        assert _whole(root / "synth" / "src-tgt")
        reverse = root / "synth" / "tgt-src"
        assert json.loads((reverse / "manifest.json").read_text())["from"]
        assert (reverse / "test.gold").is_file()
    return args, lambda: None, whole, [root]


def _export(tmp_path: Path, run: Path):
    out = tmp_path / "export"
    args = ["export", "--run", str(run), "--out", str(out)]
    return lambda k: args, lambda: None, lambda: _stamped(out, "export.json"), [tmp_path]


def _publish(tmp_path: Path, run: Path):
    out = tmp_path / "published"
    args = ["publish", "--run", str(run), "--out", str(out), "--ctranslate2"]
    return lambda k: args, lambda: None, lambda: _stamped(out, "nmt.json"), [tmp_path]


def _eflomal(tmp_path: Path, data_root: Path):
    root = tmp_path / "data"
    _import(root, _raw(data_root, tmp_path / "raw", 0))
    raw = config_to_dict(_config(root, tmp_path / "runs", "g"))
    raw["guided"].update(teacher="eflomal", weight=1.0)
    config = tmp_path / "g.yaml"
    config.write_text(yaml.safe_dump(raw))
    links = root / ".cache" / "links"

    def whole() -> None:
        for path in links.rglob("*.links"):
            split = path.stem
            lines = (root / "mini" / "src-tgt" / f"{split}.src").read_text().count("\n")
            assert path.read_text().count("\n") == lines, path
    return (lambda k: ["data", "links", "-c", str(config)],
            lambda: shutil.rmtree(links, ignore_errors=True), whole, [root, tmp_path / "runs"])


WRITERS = {"synth": _synth, "export": _export, "publish": _publish, "eflomal": _eflomal}


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
@pytest.mark.parametrize("writer", list(WRITERS))
def test_killed_writers_leave_a_whole_state_and_nothing_the_next_one_does_not_sweep(
        writer, signum, data_root, tmp_path, request):
    place = request.getfixturevalue("transformer_run") if writer in ("export",
                                                                     "publish") else data_root
    args, before, whole, roots = WRITERS[writer](tmp_path, place)
    for k, after in enumerate(_instants(_timed(args(0), tmp_path), writer, signum)):
        before()
        _kill(args(k + 1), tmp_path, after, signum, writer)
        whole()  # what a reader sees after the kill: the old state or the new, whole
        _finish(args(k + 2), tmp_path)  # the next command of that kind
        _swept(writer, signum, *roots)
        whole()


def test_zz_kill_table():
    """The harness's table, writer x signal x kills x leftovers (printed with -s; `make
    kills` shows it)."""
    rows = sorted({(writer, name) for (_, writer, name) in COUNTS})
    print(f"\nkill harness ({KILLS} random instants per cell)")
    print(f"{'writer':10} {'signal':8} {'kills':>6} {'leftovers':>10} {'orphans':>8}")
    for writer, name in rows:
        print(f"{writer:10} {name:8} {COUNTS['kills', writer, name]:>6} "
              f"{COUNTS['leftovers', writer, name]:>10} {COUNTS['orphans', writer, name]:>8}")
