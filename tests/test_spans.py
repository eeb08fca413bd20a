"""Gold words of another tokenisation (issue 62, nmt.align.spans): the text a model reads
for a gold's tokens, each token's characters in it, each piece's words, and the word map
and teacher targets those words give."""

from __future__ import annotations

import json

import numpy as np
import pytest
import sentencepiece as spm
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.align.spans import GoldWords, Style, gold_reading, piece_spans, piece_words, surface
from nmt.align.words import pieces_to_words, word_matrix
from nmt.training.guided import piece_targets


def covered(text: str, spans: list[list[tuple[int, int]]]) -> list[str]:
    return ["".join(text[a:b] for a, b in s) for s in spans]


def test_hansards_french_is_written_back_as_published():
    tokens = "je ne partage pas le avis de le ministre .".split()
    text, spans = surface(tokens, "fr", capitalise=True)
    assert text == "Je ne partage pas l'avis du ministre."
    assert covered(text, spans) == ["Je", "ne", "partage", "pas", "l'", "avis", "du", "du",
                                    "ministre", "."]  # "de le" both became "du"
    text, spans = surface("ce est - à - dire que on peut - être".split(), "fr")
    assert text == "c'est-à-dire qu'on peut-être"
    assert covered(text, spans)[:5] == ["c'", "est", "-", "à", "-"]
    text, _ = surface("la hausse de les prix à le Canada".split(), "fr")
    assert text == "la hausse des prix au Canada"  # h aspiré: no elision
    text, _ = surface("le honorable député et le homme de le hockey".split(), "fr")
    assert text == "l'honorable député et l'homme du hockey"  # h muet: elision


def test_a_capitalised_contraction_and_a_hyphen_after_an_apostrophe():
    text, spans = surface("De le ministre .".split(), "fr")
    assert text == "Du ministre." and covered(text, spans) == ["Du", "Du", "ministre", "."]
    text, spans = surface("Le avis".split(), "fr")
    assert text == "L'avis" and covered(text, spans) == ["L'", "avis"]
    text, spans = surface(["the", "o'neill", "-", "smith", "report"], "en")
    assert text == "the o'neill-smith report"  # the letter before the hyphen is what counts
    assert covered(text, spans) == ["the", "o'neill", "-", "smith", "report"]


def test_english_clitics_punctuation_and_the_capital_i():
    text, spans = surface("i think it is n't the member 's car , oh !".split(), "en", True)
    assert text == "I think it isn't the member's car, oh!"
    assert covered(text, spans) == ["I", "think", "it", "is", "n't", "the", "member", "'s",
                                    "car", ",", "oh", "!"]
    assert surface(["oh", ",", "oh"], "en", detok=False)[0] == "oh , oh"


words = st.lists(st.text(alphabet="abcdeéàXY'-.,!?", min_size=1, max_size=6), min_size=1,
                 max_size=12)


@settings(max_examples=200, deadline=None)
@given(words, st.sampled_from(["en", "fr", "de"]), st.booleans(), st.booleans())
def test_every_token_keeps_its_characters_in_order(tokens, lang, capitalise, detok):
    text, spans = surface(tokens, lang, capitalise, detok)
    assert all(spans)  # no gold token is lost
    starts = [s[0][0] for s in spans]
    assert starts == sorted(starts)
    for token, got, own in zip(tokens, covered(text, spans), spans):
        if len(own) == 1 and got.lower() == token.lower():
            continue
        # a French contraction (de le -> du) or an elision (le -> l'), nothing else
        assert lang == "fr" and token.lower() in ("de", "le", "les", "à", "la", "ne", "je",
                                                  "que", "ce", "se", "me", "te", "si",
                                                  "jusque", "lorsque", "puisque", "quelque")


def test_a_piece_belongs_to_every_token_it_covers():
    # "l'avis": pieces "▁l" (0-1), "'a" (1-3), "vis" (3-6); tokens "l'" (0-2), "avis" (2-6)
    assert piece_words([(0, 1), (1, 3), (3, 6)], [[(0, 2)], [(2, 6)]]) == [[0], [0, 1], [1]]
    # a lone "▁" (a space only) goes with the piece after it; at the end, before it
    assert piece_words([(0, 2), (2, 3), (3, 5)], [[(0, 2)], [(3, 5)]]) == [[0], [1], [1]]
    assert piece_words([(0, 2), (2, 3)], [[(0, 2)]]) == [[0], [0]]
    # "du" stands for two gold tokens: its piece covers both
    assert piece_words([(0, 2)], [[(0, 2)], [(0, 2)]]) == [[0, 1]]


def test_a_shared_piece_gives_its_mass_to_each_word_and_rows_stay_stochastic():
    # 1 layer, 1 head; target pieces: 2 (+ EOS row); source pieces: 2 (+ EOS column)
    weights = np.array([[[[0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.3, 0.3, 0.4]]]])
    word_of = {"src": [[0], [0, 1]], "tgt": [[0], [0]]}  # source piece 1 covers words 0, 1
    got = word_matrix(weights, ["a", "b"], ["c", "d"], word_of=word_of)
    row = np.array([0.4 + 0.5, 0.5])  # mean of the two rows over source pieces, then words
    np.testing.assert_allclose(got, [row / row.sum()])
    plain = word_matrix(weights, ["▁a", "▁b"], ["▁c", "d"])
    np.testing.assert_allclose(plain, word_matrix(weights, ["▁a", "▁b"], ["▁c", "d"],
                                                  word_of={"src": [[0], [1]],
                                                           "tgt": [[0], [0]]}))


def test_teacher_targets_from_spans_equal_the_pieces_own_words_when_they_agree():
    src, tgt = ["▁the", "▁do", "g"], ["▁le", "▁chi", "en"]
    links = {(0, 0), (1, 1)}
    own = piece_targets(src, tgt, links, null=True)
    word_of = {side: [[w] for w in pieces_to_words(p)] for side, p in (("src", src),
                                                                      ("tgt", tgt))}
    np.testing.assert_array_equal(own, piece_targets(src, tgt, links, True, word_of))
    shared = piece_targets(src, tgt, {(0, 0), (1, 0)}, False,
                           {"src": [[0], [1], [1]], "tgt": [[0, 1], [1], [1]]})
    np.testing.assert_allclose(shared[0], [1 / 3, 1 / 3, 1 / 3, 0])  # word 0 -> both words
    assert not shared[1].any()  # word 1 has no link


def test_the_style_of_lines():
    assert Style.of(["oh , oh !", "in view of this , we did ."]) == Style(True, True)
    assert Style.of(["Oh, oh!", "In view of this, we did."]) == Style(False, False)
    assert Style.of(["Mr. Speaker, I agree.", "le ministre , je pense ."]).lowercased is False


@pytest.fixture(scope="module")
def processor(tmp_path_factory):
    folder = tmp_path_factory.mktemp("spm")
    text = folder / "text.txt"
    text.write_text("Je ne partage pas l'avis du ministre.\nI disagree with the minister.\n"
                    "Oh, oh! The member's car isn't here.\n" * 30, encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(folder / "m"),
                                   vocab_size=40, character_coverage=1.0,
                                   minloglevel=2, num_threads=1)
    return spm.SentencePieceProcessor(model_file=str(folder / "m.model"))


def test_piece_spans_are_characters_not_bytes(processor):
    text = "Je ne partage pas l'avis du ministre."
    spans = piece_spans(processor, text)
    pieces = processor.encode(text, out_type=str)
    assert len(spans) == len(pieces)
    assert [text[a:b].strip() for a, b in spans] == [p.lstrip("▁") for p in pieces]
    assert spans[-1][1] == len(text)


def test_gold_reading_reads_the_corpus_style_and_says_so(processor):
    class Vocab:
        src = tgt = processor

    sources = ["i disagree with the minister ."]
    targets = ["je ne partage pas le avis de le ministre ."]
    src, tgt, gold, notice = gold_reading(Vocab, sources, targets, ("en", "fr"),
                                          Style(tokenised=False, lowercased=False), True)
    assert (src, tgt) == (["I disagree with the minister."],
                          ["Je ne partage pas l'avis du ministre."])
    assert isinstance(gold[0], GoldWords) and gold[0].tgt_words == targets[0].split()
    assert len(gold[0].word_of["tgt"]) == len(processor.encode(tgt[0]))
    covered_words = {w for owners in gold[0].word_of["tgt"] for w in owners}
    assert covered_words == set(range(len(targets[0].split())))
    assert "--adapt N" in notice and "--lowercase" in notice and "detokenised" in notice
    same = gold_reading(Vocab, sources, targets, ("en", "fr"), Style(True, True), True)
    assert same[:2] == (sources, targets) and same[3] == ""  # written as the corpus is
    default = gold_reading(Vocab, sources, targets, ("en", "fr"), Style(False, False))
    assert default[:2] == (["I disagree with the minister ."],  # capitals back, tokens kept
                           ["Je ne partage pas le avis de le ministre ."])
    assert "with sentence-initial capitals" in default[3]


def test_import_lowercase_is_in_the_files_and_the_manifest(tmp_path):
    from nmt.data.pipeline import import_from

    src, tgt = tmp_path / "a.en", tmp_path / "a.fr"
    src.write_text("".join(f"The House met at {n} O'Clock.\n" for n in range(40)))
    tgt.write_text("".join(f"La Chambre se réunit à {n} heures. İ\n" for n in range(40)))
    done = import_from("low", "en-fr", tmp_path / "data", files=(src, tgt), valid_size=5,
                       test_size=5, lowercase=True)
    folder = done.folder
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["normalisation"].endswith(", lowercased")
    for split in ("train", "val", "test"):
        for lang in ("en", "fr"):
            text = (folder / f"{split}.{lang}").read_text(encoding="utf-8")
            assert text == text.lower() and text.strip()


def test_nmt_align_scores_a_differently_written_gold_on_its_own_tokens(data_root, tmp_path,
                                                                      capsys):
    """The synthetic corpus is lowercased and tokenised; pairs written with capitals get a
    notice naming the remedies, and the records' words are the pairs' own tokens."""
    from nmt.align.io import load_alignments
    from nmt.training.trainer import Trainer
    from tests.test_cli import run_cli
    from tests.test_train import MODELS, tiny_config

    cfg = tiny_config(data_root, tmp_path / "runs", "bahdanau", MODELS["bahdanau"],
                      max_steps=20, threads=1)
    Trainer(cfg, quiet=True).fit()
    folder = data_root / "synth" / "src-tgt"
    rows = list(zip(*((folder / f"test.{ext}").read_text().splitlines()[:6]
                      for ext in ("src", "tgt", "gold"))))
    pairs, gold = tmp_path / "pairs.txt", tmp_path / "pairs.gold"
    pairs.write_text("".join(f"{s.capitalize()} ||| {t.capitalize()}\n" for s, t, _ in rows))
    gold.write_text("".join(g + "\n" for _, _, g in rows))
    code, out, err = run_cli(capsys, "align", "--run", cfg.run_dir, "--pairs", pairs,
                             "--gold", gold, "--plot", "0", "--out", tmp_path / "aligned")
    assert code == 0, err
    assert "the pairs are not lowercased, unlike the run's corpus" in err
    assert "--adapt N" in err and "--lowercase" in err and len(err.strip().splitlines()) == 1
    records = load_alignments(tmp_path / "aligned" / "bahdanau.npz")
    assert [r.src_words for r in records] == [s.capitalize().split() for s, _, _ in rows]
    assert all(r.word_of and len(r.word_of["src"]) == len(r.src_tokens) - 1 for r in records)
