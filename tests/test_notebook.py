"""examples/walkthrough.ipynb runs top to bottom on two tiny runs (nbclient), so the
walkthrough docs/api.md points to cannot rot."""

from __future__ import annotations

from pathlib import Path

from nmt.training.trainer import Trainer
from tests.test_train import MODELS, tiny_config

REPO = Path(__file__).resolve().parents[1]


def test_the_walkthrough_notebook_runs(data_root, tmp_path, monkeypatch):
    import nbclient  # the dev extra's
    import nbformat

    runs = []
    for name in ("bahdanau", "transformer"):
        cfg = tiny_config(data_root, tmp_path, name, MODELS[name], max_steps=4, threads=1)
        Trainer(cfg, quiet=True).fit()
        runs.append(str(cfg.run_dir))
    notebook = nbformat.read(REPO / "examples" / "walkthrough.ipynb", as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")
    monkeypatch.setenv("NMT_RUN", runs[0])
    monkeypatch.setenv("NMT_OTHER", runs[1])
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "links:" in text and "source:" in text
