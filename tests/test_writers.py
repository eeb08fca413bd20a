"""Every writer through one scratch mechanism (issue 74, item 4 and defects 5 and 6):
nmt.core.scratch's liveness check cannot race a writer starting up, and no module of nmt/
writes or renames a file around it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nmt.core import scratch as scratch_module
from nmt.core.scratch import scratch, sweep

REPO = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------- defect 5


def _sweep_once(monkeypatch, parent: Path) -> list:
    """Make the next writer's window between creating its owner file and locking it hold a
    sweep of `parent` (as `data gc`, `data list` or another import would run one); the
    sweep's result is appended to the returned list."""
    swept: list = []

    def starting(owner: Path) -> None:
        if not swept:
            swept.append(sweep(parent))

    monkeypatch.setattr(scratch_module, "_starting", starting)
    return swept


def test_5_a_sweep_while_a_writer_starts_up_takes_nothing_from_it(tmp_path, monkeypatch):
    target = tmp_path / "corpus"
    swept = _sweep_once(monkeypatch, tmp_path)
    with scratch(target) as live:
        (live / "half").write_text("x")
        assert swept, "the hook did not run"
        owner = live.with_name(live.name + scratch_module.OWNER)
        assert owner.is_file(), "the writer's owner file was swept"
        gone, alive = sweep(tmp_path)  # a later sweep sees a live writer
        assert gone == [] and alive == [live]
        assert (live / "half").read_text() == "x"
    assert not list(tmp_path.glob(".corpus.tmp-*"))


def test_5_a_swept_owner_file_is_given_up_for_another_name(tmp_path, monkeypatch):
    target = tmp_path / "last.pt"
    swept = _sweep_once(monkeypatch, tmp_path)
    with scratch(target, folder=False) as live:
        [(gone, _)] = swept
        assert [p.name for p in gone] != [live.name + scratch_module.OWNER]
        live.write_text("new")
        assert sweep(tmp_path)[0] == [] and live.read_text() == "new"


KILLED = ("import os, signal, sys; from pathlib import Path; from nmt.core.scratch import "
          "scratch\nwith scratch(Path(sys.argv[1])) as tmp:\n    (tmp / 'half').write_text('x')\n"
          "    os.kill(os.getpid(), signal.SIGKILL)")


def test_5_a_dead_writers_path_and_owner_are_swept_under_its_flock(tmp_path):
    target = tmp_path / "corpus"
    subprocess.run([sys.executable, "-c", KILLED, str(target)], check=False,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    [left] = [p for p in tmp_path.glob(".corpus.tmp-*") if p.is_dir()]
    assert sweep(tmp_path, dry_run=True) == ([left], [])
    assert left.exists()
    gone, alive = sweep(tmp_path)
    assert gone == [left] and alive == [] and not list(tmp_path.iterdir())


# ----------------------------------------------------------------------------- defect 6


SAVE_KILLED = ("import os, signal, sys; from pathlib import Path; "
               "from nmt.core.checkpoint import atomic_write\n"
               "def write(handle):\n    handle.write(b'half')\n    handle.flush()\n"
               "    os.kill(os.getpid(), signal.SIGKILL)\n"
               "atomic_write(Path(sys.argv[1]), write)")


def test_6_the_next_save_sweeps_what_a_killed_save_left(tmp_path):
    from nmt.core.checkpoint import atomic_write

    last = tmp_path / "checkpoints" / "last.pt"
    atomic_write(last, lambda handle: handle.write(b"old"))
    subprocess.run([sys.executable, "-c", SAVE_KILLED, str(last)], check=False,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    left = sorted(p.name for p in last.parent.iterdir())
    assert len(left) == 3 and last.read_bytes() == b"old", left  # a scratch file and owner
    (last.parent / ".last.pt.tmp999999999").write_bytes(b"an older nmt's, of a dead pid")
    atomic_write(last, lambda handle: handle.write(b"new"))
    assert [p.name for p in last.parent.iterdir()] == ["last.pt"]
    assert last.read_bytes() == b"new"


SYNTH_KILLED = ("import os, signal, sys; from pathlib import Path; import nmt.data.corpora as c\n"
                "def die(*args):\n    os.kill(os.getpid(), signal.SIGKILL)\n"
                "c.shutil.copyfile = die\n"
                "c.ensure_synth(Path(sys.argv[1]), 5, {'train': 40, 'test': 10}, force=True)")


def test_6_a_killed_synth_force_leaves_nothing_the_next_one_does_not_sweep(tmp_path):
    from nmt.data.corpora import SYNTH_PAIR, SYNTH_REVERSE, ensure_synth

    root = tmp_path / "data"
    ensure_synth(root, sizes={"train": 40, "test": 10})
    old = (root / "synth" / SYNTH_REVERSE / "test.gold").read_text()
    subprocess.run([sys.executable, "-c", SYNTH_KILLED, str(root)], check=False,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    synth = root / "synth"
    assert [p for p in synth.iterdir() if ".tmp" in p.name]  # the killed reverse writer's
    assert (synth / SYNTH_REVERSE / "test.gold").read_text() == old  # whole, the old one
    ensure_synth(root, seed=7, sizes={"train": 40, "test": 10}, force=True)
    assert not [p for p in synth.iterdir() if ".tmp" in p.name or ".old-" in p.name]
    assert (synth / SYNTH_PAIR / "manifest.json").is_file()
    assert (synth / SYNTH_REVERSE / "test.gold").read_text() != old
