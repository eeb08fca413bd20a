"""`make bench-align-domain` scores one `nmt align` folder of several methods' runs, their
ensemble and eflomal: each row goes to its method, the agreement symmetrisation is redone at
every threshold from each method's two maps, and the seconds are each method's own (the
ensemble's: all runs', eflomal's fit for the guides once)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nmt.align.io import save_alignments, write_links
from nmt.align.records import AlignmentRecord
from nmt.data.links import read_gold
from tests.conftest import load_script

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def bench():
    return load_script(BENCHMARKS / "align_domain.py")  # it imports its sibling data_dirs


def records(diagonal: bool) -> list[AlignmentRecord]:
    """Two 3-word pairs: the identity map (the gold) or a shift with no word in place."""
    out = []
    for k in range(2):
        words = np.eye(3, dtype=np.float32) if diagonal else np.roll(np.eye(3, dtype=np.float32), 1, axis=1)
        links = [(int(i), int(j)) for j, i in zip(*np.nonzero(words))]
        toks = ["a", "b", "c"]
        out.append(AlignmentRecord(k, toks, toks, words[None, None], toks, toks, words.copy(),
                                   links))
    return out


def test_rows_go_to_their_method_with_their_own_seconds(tmp_path):
    module = bench()
    gold_path = tmp_path / "gold"
    gold_path.write_text("0-0 1-1 2-2\n0-0 1-1 2-2\n")
    gold = read_gold(gold_path)
    adapted = {"guided": (2.0, 10.0), "bootstrap": (3.0, 20.0)}
    summary = {}
    for method, fwd, rev, right in (("guided", "g_f", "g_r", True),
                                    ("bootstrap", "b_f", "b_r", False)):
        seconds, adapting = adapted[method]
        adapt = {"adapt": {"seconds": adapting, "teacher_seconds": 5.0}}
        summary[fwd] = {"family": "transformer", **adapt}
        summary[rev] = {"family": "transformer", "direction": "reverse", **adapt}
        for heuristic in ("intersection", "agreement"):
            summary[f"{fwd}+{rev}.{heuristic}"] = {
                "family": "transformer", "direction": "both", "symmetrize": heuristic,
                "seconds": seconds, **adapt}
        for name in (fwd, rev, f"{fwd}+{rev}.intersection", f"{fwd}+{rev}.agreement"):
            save_alignments(tmp_path / f"{name}.npz", records(right))
            write_links(tmp_path / f"{name}.links", records(right))
    for name, direction in (("ensemble", None), ("ensemble-reverse", "reverse"),
                            ("ensemble.agreement", "both"), ("eflomal.intersection", "both")):
        family = "statistical" if name.startswith("eflomal") else "ensemble"
        summary[name] = {"family": family, "seconds": 7.0 if family == "statistical" else None,
                         **({"direction": direction} if direction else {}),
                         **({"symmetrize": name.split(".")[1]} if "." in name else {})}
        save_alignments(tmp_path / f"{name}.npz", records(True))
        write_links(tmp_path / f"{name}.links", records(True))
    for entry in summary.values():
        entry["aer"] = 0.0
    owners = {"g_f": "guided", "g_r": "guided", "b_f": "bootstrap", "b_r": "bootstrap"}
    training = {"guided": 100.0, "bootstrap": 300.0, "ensemble": 300.0}

    rows = module.score(summary, tmp_path, gold, 1, {"adapt": 100, "guides": "union"},
                        owners, training)

    by = {(r["method"], r["links"]): r for r in rows}
    assert {m for m, _ in by} == {"guided", "bootstrap", "ensemble", "eflomal"}
    for method in ("guided", "bootstrap", "ensemble"):  # every threshold, from the two maps
        assert {f"agreement {t:g}" for t in module.THRESHOLDS} <= {
            links for m, links in by if m == method}
    assert ("guided", "agreement") not in by  # the summary's own threshold is redone
    assert not any(m == "eflomal" and links.startswith("agreement") for m, links in by)
    assert by[("guided", "agreement 0.5")]["rest"]["aer"] == 0.0  # the identity: the gold
    assert by[("bootstrap", "agreement 0.5")]["rest"]["aer"] == 1.0  # no link right
    assert by[("guided", "intersection")]["seconds"] == {
        "training": 100.0, "aligning": 2.0, "adapting": 15.0}
    assert by[("ensemble", "agreement 0.3")]["seconds"] == {  # both runs, one eflomal fit
        "training": 300.0, "aligning": 5.0, "adapting": 35.0}
    eflomal = by[("eflomal", "intersection")]
    assert eflomal["adapt"] == 0 and eflomal["guides"] == "-"
    assert eflomal["seconds"] == {"training": 0.0, "aligning": 7.0, "adapting": 0.0}
    assert by[("guided", "reverse")]["guides"] == "union"
