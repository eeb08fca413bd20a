"""scripts/demo_table.py: the README's demo table is written from the demo's runs, read
back exactly, and the gate flags a family past BLEU_GATE or AER_GATE, and only then."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def table():
    return load_script(ROOT / "scripts" / "demo_table.py")


def values(bleu_bahdanau=96.5, aer_bahdanau=0.150):
    lengths = [{"bucket": "1-9", "sentences": 3, "bleu": 15.0}]
    row = dict(params=1000, precision="fp32", train_min=1.0, chrf=90.0, diagonal_aer=0.857,
               entropy=0.4, attention=True, by_length=lengths)
    return {"fixed_context": {**row, "label": "fixed_context", "bleu": 4.0, "aer": None,
                              "diagonal_aer": None, "entropy": None, "attention": False},
            "bahdanau": {**row, "label": "bahdanau (additive)", "bleu": bleu_bahdanau,
                         "aer": aer_bahdanau}}


def test_the_written_table_reads_back_as_written(table, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("intro\n" + table.render(values(), 414.0) + "\nafter\n")
    assert table.committed(readme) == {"fixed_context": {"bleu": 4.0, "aer": None},
                                       "bahdanau": {"bleu": 96.5, "aer": 0.15}}
    assert "6 min 54 s in all" in readme.read_text()


def test_the_gate_flags_a_family_past_either_bound_and_only_then(table, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(table.render(values()))
    committed = table.committed(readme)
    within = values(96.5 + table.BLEU_GATE - 0.01, 0.150 + table.AER_GATE - 0.001)
    assert not any(x.startswith("over") for x in table.compare(within, committed))
    for fresh in (values(96.5 - table.BLEU_GATE - 0.01), values(aer_bahdanau=0.150 + 0.031),
                  values(aer_bahdanau=None), values(bleu_bahdanau=None)):  # one side missing
        lines = table.compare(fresh, committed)
        assert [x.split()[1] for x in lines if x.startswith("over")] == ["bahdanau:"]
    missing = table.compare({**values(), "transformer": values()["bahdanau"]}, committed)
    assert any(x.startswith("over") and "transformer" in x for x in missing)


def test_the_readme_carries_the_demo_table_and_its_machine_class(table):
    """The committed README has the markers, a row per demo family and the class."""
    assert set(table.committed(ROOT / "README.md")) == set(table.FAMILIES)
    assert table.measured_on(ROOT / "README.md")


def test_the_class_read_back_is_the_class_written(table, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(table.render(values()))
    assert table.measured_on(readme) == table.machine()
