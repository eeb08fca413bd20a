"""scripts/laws_corpus.py (the in-domain text of `make bench-align-domain`): each English
bill is read beside its French one, text elements paired by their path from the root;
definitions and bilingual groups are left out, dropped elements keep their tails, and the
word-count, ratio, identity and duplicate filters hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[1]

BILL = """<?xml version="1.0"?>
<!DOCTYPE Statute SYSTEM "x.dtd">
<Statute><Body>
 <Section><MarginalNote>{note}</MarginalNote>
  <Text>{text} <FootnoteRef>1</FootnoteRef>{tail}</Text></Section>
 <Section><Definition><Text>{definition}</Text></Definition>
  <Text>{short}</Text><Text>{same}</Text></Section>
 <Section><Text>{again}</Text></Section>
</Body></Statute>
"""
EN = dict(note="Powers of the Minister", text="The Minister may make", tail="regulations here.",
          definition="Minister means the member of the Council", short="Repeal",
          same="Short Title Act 2001", again="Powers of the Minister")
FR = dict(note="Pouvoirs du ministre", text="Le ministre peut prendre", tail="des règlements ici.",
          definition="ministre désigne le membre du Conseil", short="Abrogation",
          same="Short Title Act 2001", again="Pouvoirs du ministre")


@pytest.fixture(scope="module")
def laws():
    return load_script(ROOT / "scripts" / "laws_corpus.py")


def test_bills_are_paired_by_element_path_and_filtered(laws, tmp_path):
    base = tmp_path / "laws" / "annual-statutes-lois-annuelles"
    for lang, name, fields in (("en", "C-1_e.xml", EN), ("fr", "C-1_f.xml", FR)):
        (base / lang / "2001").mkdir(parents=True)
        (base / lang / "2001" / name).write_text(BILL.format(**fields), encoding="utf-8")
    (base / "en" / "2001" / "C-2_e.xml").write_text(BILL.format(**EN), encoding="utf-8")  # no French
    laws.main(tmp_path / "laws", tmp_path / "out")
    en = (tmp_path / "out" / "annual.en").read_text(encoding="utf-8").splitlines()
    fr = (tmp_path / "out" / "annual.fr").read_text(encoding="utf-8").splitlines()
    # the note and the text (footnote dropped, its tail kept); the repeated note once; the
    # definition, the one-word pair and the identical pair left out
    assert en == ["Powers of the Minister", "The Minister may make regulations here."]
    assert fr == ["Pouvoirs du ministre", "Le ministre peut prendre des règlements ici."]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["annual.en", "annual.fr"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left
    with pytest.raises(SystemExit, match="not an empty folder"):  # never overwritten
        laws.main(tmp_path / "laws", tmp_path / "out")
    assert (tmp_path / "out" / "annual.en").read_text(encoding="utf-8").splitlines() == en


def test_a_stopped_run_leaves_no_folder_and_no_temporary(laws, tmp_path, monkeypatch):
    """Stopped part-way (SIGTERM unwinds as SystemExit), `out` is not made and the
    temporary folder beside it is removed."""
    base = tmp_path / "laws" / "annual-statutes-lois-annuelles"
    for lang, name, fields in (("en", "C-1_e.xml", EN), ("fr", "C-1_f.xml", FR)):
        (base / lang / "2001").mkdir(parents=True)
        (base / lang / "2001" / name).write_text(BILL.format(**fields), encoding="utf-8")
    made = []

    def stopped(pairs, folder):
        (folder / "annual.en").write_text("half\n", encoding="utf-8")
        made.append(folder)
        raise SystemExit(143)

    monkeypatch.setattr(laws, "write_pairs", stopped)
    with pytest.raises(SystemExit):
        laws.main(tmp_path / "laws", tmp_path / "out")
    assert made and not made[0].exists() and not (tmp_path / "out").exists()


def test_a_folder_without_bills_is_refused_in_one_line(laws, tmp_path):
    with pytest.raises(SystemExit, match="laws-lois-xml"):
        laws.main(tmp_path, tmp_path / "out")
