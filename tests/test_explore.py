"""`nmt explore`: the page's data built from hand-made record sets, and its behaviour in a real
browser (Debian's chromium driven by Playwright; those tests skip without it)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest

from nmt.align.io import save_alignments
from nmt.align.records import AlignmentRecord
from nmt.align.words import word_matrix
from nmt.core.config import save_config
from nmt.core.errors import NMTError
from nmt.explore import build_explorer
from nmt.explore.payload import quantise
from nmt.explore.sources import find_sources, links_matrix
from nmt.models.checks import config_from_dict
from tests.browser import open_page, screenshot

SENTENCES = [  # (source words, target words, gold "i-j" links)
    ("the dog sleeps .", "le chien dort .", "0-0 1-1 2-2 3-3"),
    ("a red car stops here .", "une voiture rouge s' arrête ici .", "0-0 1-2 2-1 3-3 3-4 4-5 5-6"),
    ("birds sing", "les oiseaux chantent", "0-1 1-2"),
]
L, H = 2, 3  # transformer-like records: decoder layers, heads


def pieces(text: str) -> list[str]:
    """One SentencePiece-like piece per word, except that words over 4 letters split in two."""
    out = []
    for word in text.split():
        out += ["▁" + word] if len(word) <= 4 else ["▁" + word[:3], word[3:]]
    return out


def record(index: int, seed: int, layers: int = 1, heads: int = 1, **meta) -> AlignmentRecord:
    """A record with random (peaked) attention over pieces + EOS, reduced to words."""
    src_text, tgt_text, _ = SENTENCES[index]
    src, tgt = pieces(src_text), pieces(tgt_text)
    rng = np.random.default_rng(seed * 100 + index)
    w = rng.random((layers, heads, len(tgt) + 1, len(src) + 1)) ** 6
    w /= w.sum(axis=-1, keepdims=True)
    words = word_matrix(w, src, tgt)
    links = sorted({(int(words[j].argmax()), j) for j in range(words.shape[0])})
    return AlignmentRecord(index=index, src_tokens=src + ["</s>"], tgt_tokens=tgt + ["</s>"],
                           weights=w, src_words=src_text.split(), tgt_words=tgt_text.split(),
                           word_weights=words, links=links, meta=dict(meta))


def make_run(root: Path, name: str, family: str, seed: int, data_root: Path,
             layers: int = 1, heads: int = 1) -> Path:
    path = root / name
    cfg = config_from_dict({"name": name, "model": {"family": family},
                            "data": {"root": str(data_root), "corpus": "toy", "pair": "a-b"}})
    path.mkdir(parents=True)
    save_config(cfg, path / "config.yaml")
    if family != "fixed_context":
        save_alignments(path / "align" / "test.npz",
                        [record(k, seed, layers, heads, family=family) for k in range(3)])
    return path


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("explore")
    data = root / "data"
    (data / "toy" / "a-b").mkdir(parents=True)
    (data / "toy" / "a-b" / "test.gold").write_text(
        "".join(g + "\n" for _, _, g in SENTENCES), encoding="utf-8")
    runs = [make_run(root / "runs", "bahdanau", "bahdanau", 1, data),
            make_run(root / "runs", "transformer", "transformer", 2, data, L, H),
            make_run(root / "runs", "fixed", "fixed_context", 3, data)]
    align = root / "align"  # an `nmt align` folder: attention plus a link-only set
    save_alignments(align / "luong.npz", [record(k, 4) for k in range(3)])
    links_only = [record(k, 5, method="grow-diag-final", kind="links") for k in range(3)]
    for rec in links_only:
        rec.word_weights[:] = 0.0
    save_alignments(align / "luong.grow-diag-final.npz", links_only)
    eflomal = [record(k, 6, method="eflomal", symmetrize="grow-diag-final-and") for k in range(3)]
    for rec in eflomal:  # like nmt.align.statistical: word_weights = the 0/1 link matrix
        rec.word_weights = links_matrix(rec.links, rec.word_weights.shape)
    save_alignments(align / "eflomal.npz", eflomal)
    page = build_explorer(runs, root / "explore.html", align_dirs=[align])
    return {"root": root, "runs": runs, "align": align, "page": page}


def payload(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    match = re.search(r'<script id="nmt-data" type="application/json">(.*?)</script>', text, re.S)
    return json.loads(match.group(1))


def views(entry: dict, shape: tuple[int, int]) -> np.ndarray:
    raw = np.frombuffer(base64.b64decode(entry["m"]), dtype=np.uint8)
    return raw.reshape(-1, *shape) / 255


# ------------------------------------------------------------------------- the page's data


def test_panels_one_per_set_titled_by_run_and_method(workspace):
    page = workspace["page"]
    assert page.panels == ["bahdanau · attention", "transformer · attention",
                           "eflomal (grow-diag-final-and)", "luong · grow-diag-final",
                           "luong · attention"]
    assert page.sentences == 3 and page.bytes == workspace["root"].joinpath(
        "explore.html").stat().st_size
    assert any("fixed" in note for note in page.notes)
    assert page.gold == workspace["root"] / "data" / "toy" / "a-b" / "test.gold"


def test_page_is_self_contained(workspace):
    text = (workspace["root"] / "explore.html").read_text(encoding="utf-8")
    assert "<script src" not in text and "<link" not in text and "http" not in text.lower()


def test_transformer_views_reproduce_the_saved_reading(workspace):
    data = payload(workspace["page"].path)
    spec = data["panels"][1]
    # the saved reading (naive, every layer and head averaged) is no single layer's view,
    # so the page keeps it as view 0 and opens on it; the layer x head views follow
    assert (spec["layers"], spec["heads"], spec["saved"]) == (L, H, True)
    assert spec["default"] == 0
    rec = record(1, 2, L, H)
    shape = rec.word_weights.shape
    got = views(data["sentences"][1]["p"][1], shape)
    assert got.shape == (1 + 2 * L * (H + 1), *shape)
    assert np.allclose(got[spec["default"]], rec.word_weights, atol=1 / 255)
    aer = data["sentences"][1]["p"][1]["aer"]  # the gold's AER of every view, not the first's
    assert len(aer) == len(got) and all(0 <= a <= 1 for a in aer)
    naive_l1_h2 = word_matrix(rec.weights[:, 1:2], rec.src_tokens[:-1], rec.tgt_tokens[:-1],
                              False, 1)
    assert np.allclose(got[1 + (0 * L + 1) * (H + 1) + 2], naive_l1_h2, atol=1 / 255)


def test_link_only_sets_are_zero_one_matrices(workspace):
    data = payload(workspace["page"].path)
    assert [p["kind"] for p in data["panels"]] == ["soft", "soft", "links", "links", "soft"]
    for panel, seed in ((2, 6), (3, 5)):
        rec = record(1, seed)
        got = views(data["sentences"][1]["p"][panel], rec.word_weights.shape)
        assert np.array_equal(got[0], links_matrix(rec.links, rec.word_weights.shape))


def test_per_sentence_aer_against_the_corpus_gold(workspace):
    data = payload(workspace["page"].path)
    s = data["sentences"][1]
    assert s["gold"]["s"] == [[0, 0], [1, 2], [2, 1], [3, 3], [3, 4], [4, 5], [5, 6]]
    rec = record(1, 1)
    sure = {(0, 0), (1, 2), (2, 1), (3, 3), (3, 4), (4, 5), (5, 6)}
    hits = len(set(rec.links) & sure)
    assert s["p"][0]["aer"] == [pytest.approx(1 - 2 * hits / (len(rec.links) + 7), abs=1e-4)]


def test_quantise_rounds_to_255_levels():
    m = np.array([[0.0, 0.5, 1.0, 1.7], [-0.2, 0.25, 0.75, np.nan]])
    raw = np.frombuffer(base64.b64decode(quantise([m])), dtype=np.uint8)
    assert raw.tolist() == [0, 128, 255, 255, 0, 64, 191, 0]


def test_gold_outside_a_sentence_is_one_line_error(workspace, tmp_path):
    bad = tmp_path / "bad.gold"
    bad.write_text("1-1 4-4\n\n\n", encoding="utf-8")  # 1-based "4-4" fits, 0-based is out
    with pytest.raises(NMTError, match="outside sentence 0.*--one-based"):
        find_sources(workspace["runs"][:1], gold=bad)
    assert find_sources(workspace["runs"][:1], gold=bad, one_based=True).gold[0].sure == {
        (0, 0), (3, 3)}
    short = tmp_path / "short.gold"
    short.write_text("0-0\n\n", encoding="utf-8")  # three sentences aligned, two gold lines
    with pytest.raises(NMTError, match=r"short\.gold: 2 lines, but the alignments hold "
                                       "sentence 2"):
        find_sources(workspace["runs"][:1], gold=short)


def test_run_without_alignments_says_how_to_write_them(workspace, tmp_path):
    run = workspace["runs"][0]
    with pytest.raises(NMTError, match="nmt evaluate --run .* --split valid"):
        find_sources([run], split="valid")


def test_cli_prints_file_size(workspace, tmp_path, capsys):
    from nmt.cli import app

    out = tmp_path / "x.html"
    app(["explore", *map(str, workspace["runs"][:2]), "--out", str(out)],
        standalone_mode=False)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(rf"wrote {re.escape(str(out))} \(\d+\.\d\d MB: 3 sentences x 2 panels, "
                        r"gold .*test\.gold\)", line)


# ----------------------------------------------------------------------- in a real browser


@pytest.fixture(scope="module")
def browser_page(workspace):
    with open_page(workspace["page"].path) as (pg, errors):
        yield pg
        assert errors == [], errors  # no console errors or uncaught exceptions


@pytest.fixture
def page(browser_page):
    """The module's page as it loads, for every test: reloaded (no mode, layer or sentence
    left by another test) with the pointer off the panels and nothing focused. The pointer
    stays where the last test left it, and a word under it lights its row whatever a test
    does next: in random order test_screenshot's hover failed the tests after it."""
    browser_page.mouse.move(0, 0)
    browser_page.reload()
    browser_page.wait_for_selector("#panels .panel")
    return browser_page


def highlighted(pg) -> list[list[str]]:
    """Per panel: 'row,col' of every highlighted cell."""
    return pg.eval_on_selector_all("#panels .panel", """panels => panels.map(p =>
        [...p.querySelectorAll('td.hl')].map(td => td.dataset.row + ',' + td.dataset.col))""")


def cell_values(pg, panel: int) -> list[str]:
    return pg.eval_on_selector_all(f'.panel[data-panel="{panel}"] td', "tds => tds.map(t => t.dataset.v)")


def test_hovering_a_target_word_lights_its_row_in_every_panel(page):
    page.select_option("#sentence-list", "0")
    assert all(cells == [] for cells in highlighted(page))
    page.hover('.panel[data-panel="0"] th.tgt[data-row="2"]')
    cells = highlighted(page)
    assert len(cells) == 5 and all(c == [f"2,{i}" for i in range(4)] for c in cells)
    shade = page.eval_on_selector_all('.panel[data-panel="1"] .src-shade .word',
                                      "ws => ws.map(w => w.style.background)")
    assert all(shade) and len(set(shade)) > 1  # the source words shaded by row 2's weights
    page.hover('#sentence .word[data-col="1"]')  # a source word: its column
    assert all(c == [f"{j},1" for j in range(4)] for c in highlighted(page))


def test_sentence_picker_changes_the_matrices(page):
    page.select_option("#sentence-list", "0")
    first = cell_values(page, 0)
    page.click("#next")
    assert page.text_content("#position").startswith("2 / 3")
    second = cell_values(page, 0)
    assert len(second) == 6 * 7 and second != first
    page.keyboard.press("ArrowLeft")
    assert cell_values(page, 0) == first
    page.fill("#search", "oiseaux")
    assert page.text_content("#position").startswith("1 / 1") and len(cell_values(page, 0)) == 6
    page.fill("#search", "")


def test_layer_selector_changes_the_transformer_panel(page):
    page.select_option("#sentence-list", "1")
    panel = '.panel[data-panel="1"]'
    before = cell_values(page, 1)
    assert page.input_value(f"{panel} select.layer") == "saved"  # all layers averaged
    assert "every layer and head averaged" in page.text_content(f"{panel} .view")
    page.select_option(f"{panel} select.layer", "1")
    after = cell_values(page, 1)
    assert after != before and "layer 2" in page.text_content(f"{panel} .view")
    page.select_option(f"{panel} select.head", "2")
    assert cell_values(page, 1) != after
    page.click(f"{panel} button.reading")
    assert "shifted" in page.text_content(f"{panel} .view")
    assert cell_values(page, 0) == cell_values(page, 0)  # other panels untouched


def test_gold_outlines_where_the_gold_has_links(page):
    page.select_option("#sentence-list", "1")
    for k in range(5):
        sure = page.eval_on_selector_all(f'.panel[data-panel="{k}"] td.gold-s',
                                         "tds => tds.map(t => t.dataset.col + '-' + t.dataset.row)")
        assert sorted(sure) == sorted(SENTENCES[1][2].split())
    assert re.search(r"AER \d\.\d{3}", page.text_content('.panel[data-panel="0"] h2'))


def test_difference_mode_subtracts_two_panels(page):
    page.select_option("#sentence-list", "0")
    page.check("#diff-on")
    page.select_option("#diff-a", "0")
    page.select_option("#diff-b", "4")
    a, b = cell_values(page, 0), cell_values(page, 4)
    diff = cell_values(page, "diff")
    assert np.allclose([float(x) for x in diff], np.subtract(
        [float(x) for x in a], [float(x) for x in b]), atol=2e-3)
    assert any(float(x) < 0 for x in diff) and any(float(x) > 0 for x in diff)
    page.uncheck("#diff-on")
    assert page.query_selector('.panel[data-panel="diff"]') is None


def test_keyboard_focus_moves_along_the_target_words(page):
    page.select_option("#sentence-list", "0")
    page.focus('.panel[data-panel="1"] th.tgt[data-row="0"]')
    assert all(c == [f"0,{i}" for i in range(4)] for c in highlighted(page))
    page.keyboard.press("ArrowDown")
    assert all(c == [f"1,{i}" for i in range(4)] for c in highlighted(page))
    page.keyboard.press("Escape")
    assert all(c == [] for c in highlighted(page))


def test_screenshot(page, tmp_path):
    png = screenshot(page, tmp_path / "explorer.png", sentence=1, word=2)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
