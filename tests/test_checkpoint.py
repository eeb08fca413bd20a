"""Safe checkpoint loading shows the user one line of ours, not torch's warnings."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import warnings

import pytest
import torch

from nmt.core.checkpoint import FORMAT, load_checkpoint
from nmt.core.errors import NMTError


class Foreign:
    """Any class outside torch's allow-list makes the safe loader refuse the file."""


@pytest.mark.parametrize("writer", ["pickle", "torch.save legacy"])
def test_a_refused_checkpoint_raises_our_error_without_torch_warnings(writer, tmp_path):
    path = tmp_path / "foreign.pt"
    payload = {"format": FORMAT, "model": {}, "extra": Foreign()}
    if writer == "pickle":
        path.write_bytes(pickle.dumps(payload, protocol=4))
    else:
        torch.save(payload, path, _use_new_zipfile_serialization=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(NMTError, match="not a readable nmt checkpoint") as info:
            load_checkpoint(path)
    assert [str(w.message)[:80] for w in caught] == []
    assert "\n" not in str(info.value)


def test_the_cli_prints_one_line_for_a_refused_checkpoint(tmp_path):
    run = tmp_path / "runs" / "evil"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text("name: evil\nmodel: {family: bahdanau}\n")
    payload = {"format": FORMAT, "model": {}, "extra": Foreign()}
    (run / "checkpoints" / "best.pt").write_bytes(pickle.dumps(payload, protocol=4))
    done = subprocess.run([sys.executable, "-m", "nmt", "evaluate", "--run", str(run)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONWARNINGS": "default"})
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nmt: error: ") and "best.pt" in lines[0]
