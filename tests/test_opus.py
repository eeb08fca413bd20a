"""An OPUS-MT model read by nmt (issue 75, item 4): tiny MarianMTModels in OPUS-MT's shape,
built offline with transformers' own classes (tests/opus_standin.py), decode under our
search to transformers' greedy ids, score within 1e-4 of its forced log-probabilities, and
load through `hf:` from a prefilled Hub cache."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import nmt  # noqa: E402
from nmt.core.errors import NMTError  # noqa: E402
from nmt.core.tokens import BOS, EOS, PAD, UNK  # noqa: E402
from nmt.decoding.translate import nbest_ids  # noqa: E402
from tests.opus_standin import build_opus  # noqa: E402
from tests.test_cli import run_cli  # noqa: E402

LIMIT = 20  # output steps (EOS included) of both decoders in the greedy comparison
SENTENCES = 48


@pytest.fixture(scope="module")
def opus(data_root, tmp_path_factory) -> dict[str, Path]:
    """Two OPUS-MT-shaped folders: tied output in model.safetensors (save_pretrained), and
    untied (lm_head) in a pytorch_model.bin that holds the position tables."""
    root = tmp_path_factory.mktemp("opus")
    corpus = data_root / "synth" / "src-tgt"
    return {"tied": build_opus(root / "opus-mt-src-tgt", corpus, tied=True, seed=0),
            "untied": build_opus(root / "untied", corpus, tied=False, seed=1, weights="bin")}


def _pairs(data_root, n: int = SENTENCES) -> tuple[list[str], list[str]]:
    folder = data_root / "synth" / "src-tgt"
    return (folder / "test.src").read_text().splitlines()[:n], \
        (folder / "test.tgt").read_text().splitlines()[:n]


def _hf(folder: Path):
    from transformers import MarianMTModel, MarianTokenizer

    return MarianMTModel.from_pretrained(folder).eval(), MarianTokenizer.from_pretrained(folder)


@pytest.mark.parametrize("kind", ["tied", "untied"])
def test_greedy_ids_and_text_are_transformers_own(opus, data_root, kind):
    """Our greedy search on the model read by nmt gives, sentence for sentence, the ids of
    transformers' generate(num_beams=1, do_sample=False) (both stop at LIMIT steps, the last
    forced to EOS), and the tokenizer's text."""
    hf, tokenizer = _hf(opus[kind])
    model = nmt.load(opus[kind])
    sources, _ = _pairs(data_root)
    batch = tokenizer(sources, return_tensors="pt", padding=True)
    src_ids = model.vocab.encode_src(sources)
    pad = hf.config.pad_token_id
    assert [[model.vocab.source.order[i] for i in row] for row in src_ids] == \
        [[i for i in row if i != pad] for row in batch["input_ids"].tolist()]
    decode = dataclasses.replace(model.cfg.decode, max_len_ratio=1e-3, max_len_offset=LIMIT)
    ours = [h[0][0] for h in nbest_ids(model.module, src_ids, decode, beam=1)]
    with torch.no_grad():
        out = hf.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=LIMIT)
    theirs = [[i for i in row[1:] if i not in (pad, hf.config.eos_token_id)]
              for row in out.tolist()]
    assert [[model.vocab.target.order[i] for i in row] for row in ours] == theirs
    lengths = {len(row) for row in ours}
    assert min(lengths) < LIMIT - 1 and max(lengths) == LIMIT - 1  # some stop on their own
    assert [model.vocab.decode_tgt(row) for row in ours] == \
        tokenizer.batch_decode(out, skip_special_tokens=True)


@pytest.mark.parametrize("kind", ["tied", "untied"])
def test_forced_log_probabilities_within_1e_4(opus, data_root, kind):
    """Every forced log-probability (each target piece and EOS, normalised over Marian's
    whole vocabulary) is transformers' within 1e-4, and `score` is their sum."""
    hf, tokenizer = _hf(opus[kind])
    model = nmt.load(opus[kind])
    sources, targets = _pairs(data_root, 16)
    batch = tokenizer(sources, text_target=targets, return_tensors="pt", padding=True)
    labels = batch.pop("labels")
    pad = hf.config.pad_token_id
    with torch.no_grad():
        logits = hf(**batch, labels=labels.masked_fill(labels == pad, -100)).logits
    picked = torch.log_softmax(logits, -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    scores = model.score(sources, targets)
    for row, (src, tgt) in enumerate(zip(sources, targets)):
        t_ids = model.vocab.encode_tgt([tgt])[0]
        src_t = torch.tensor([model.vocab.encode_src([src])[0]])
        with torch.no_grad():
            ours, _, _ = model.module(src_t, torch.tensor([[BOS, *t_ids]]))
        mine = torch.log_softmax(ours[0], -1).gather(-1, torch.tensor(t_ids + [EOS])[:, None])
        want = picked[row, :len(t_ids) + 1]
        assert torch.allclose(mine.squeeze(-1), want, atol=1e-4, rtol=0)
        assert abs(scores[row] - want.sum().item()) < 1e-3
    assert torch.exp(torch.log_softmax(ours[0], -1))[:, BOS].max() == 0  # never BOS


def test_the_position_table_is_marians_own(opus):
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    from nmt.models.opus import marian_sinusoids

    for dim in (16, 17):
        theirs = MarianSinusoidalPositionalEmbedding(300, dim).create_weight()
        assert torch.equal(marian_sinusoids(300, dim), theirs)
    model = nmt.load(opus["tied"]).module
    model._grow_positions(3000)  # beyond its table: grown in Marian's layout
    assert torch.equal(model.pe[:512], marian_sinusoids(512, 16))


def test_ids_follow_nmts_specials(opus):
    vocab = nmt.load(opus["tied"]).vocab
    assert vocab.src_pieces([PAD, 1, BOS, EOS]) == ["<pad>", "<unk>", "<s>", "</s>"]
    assert vocab.source.order[:4] == [vocab.src_size - 2, 1, vocab.src_size - 2, 0]
    assert UNK in vocab.encode_src(["\u4e00"])[0]  # a piece vocab.json lacks: <unk>
    assert vocab.encode_src([""])[0] == [EOS] and vocab.decode_tgt([PAD, UNK, BOS, EOS]) == ""


def test_an_unsafe_pickle_is_refused_and_never_run(opus, tmp_path):
    """pytorch_model.bin goes through torch.load(weights_only=True): a pickle that would
    run code is one line, and the code does not run."""
    folder = tmp_path / "evil"
    shutil.copytree(opus["untied"], folder)
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    torch.save({"x": Evil()}, folder / "pytorch_model.bin")
    with pytest.raises(NMTError, match="pytorch_model.bin: unreadable as weights"):
        nmt.load(folder)
    assert not marker.exists()


def _prefilled_hub_cache(folder: Path, tmp_path, monkeypatch) -> Path:
    """The Hub's cache holding `folder` as Helsinki-NLP/opus-mt-src-tgt, offline."""
    cache = tmp_path / "hub-cache"
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = cache / "models--Helsinki-NLP--opus-mt-src-tgt"
    shutil.copytree(folder, repo / "snapshots" / commit)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return repo / "snapshots" / commit


def test_hf_names_an_opus_model_in_the_hub_cache(opus, data_root, tmp_path, monkeypatch, capsys):
    snapshot = _prefilled_hub_cache(opus["tied"], tmp_path, monkeypatch)
    sources, _ = _pairs(data_root, 6)
    want = [t.text for t in nmt.load(opus["tied"]).translate(sources, beam=2)]
    model = nmt.load("hf:Helsinki-NLP/opus-mt-src-tgt")
    assert model.path == snapshot and model.cfg.data.pair == "src-tgt"
    assert [t.text for t in model.translate(sources, beam=2)] == want
    code, out, err = run_cli(capsys, "translate", "--run", "hf:Helsinki-NLP/opus-mt-src-tgt",
                             "--beam", "2", *sources)
    assert code == 0, err
    assert out.splitlines() == want


def test_the_api_aligns_and_translates_with_its_cross_attention(opus, data_root):
    """Attention rows are non-negative and sum to 1 over the real source positions."""
    model = nmt.load(opus["tied"])
    sources, targets = _pairs(data_root, 6)
    records = model.align(sources, targets)
    for rec, src in zip(records, sources):
        w = rec.weights  # (L, H, T+1, S)
        assert w.shape[:2] == (2, 2) and w.shape[-1] == len(model.vocab.encode_src([src])[0])
        assert (w >= 0).all() and abs(w.sum(-1) - 1).max() < 1e-5
    [t] = model.translate(sources[:1], alignments=True, beam=3)
    assert t.links is not None and t.word_matrix.shape == (len(t.text.split()),
                                                           len(sources[0].split()))


@pytest.fixture(scope="module")
def classic(data_root, tmp_path_factory) -> Path:
    """A short Transformer run of ours on the synthetic corpus (gold links in its test split)."""
    from nmt.decoding.evaluate import evaluate_run
    from nmt.training.trainer import Trainer
    from tests.test_train import MODELS, tiny_config

    cfg = tiny_config(data_root, tmp_path_factory.mktemp("classic"), "transformer",
                      MODELS["transformer"], max_steps=20, valid_every=20, threads=1,
                      valid_sentences=8)
    Trainer(cfg, quiet=True).fit()
    evaluate_run(cfg.run_dir, "test", limit=24)
    return cfg.run_dir


def test_align_shows_it_beside_a_run_with_aer_against_gold(opus, classic, tmp_path, capsys):
    out = tmp_path / "aligned"
    code, text, err = run_cli(capsys, "align", "--run", classic, "--run", opus["tied"],
                              "--split", "test", "--limit", "24", "--plot", "1", "--out", out)
    assert code == 0, err
    import json

    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {"transformer", "opus-mt-src-tgt"}
    for row in summary.values():
        assert 0.0 <= row["aer"] <= 1.0 and row["sentences"] == 24
    from nmt.align.io import load_alignments

    for rec in load_alignments(out / "opus-mt-src-tgt.npz"):
        assert (rec.weights >= 0).all() and abs(rec.weights.sum(-1) - 1).max() < 1e-5
    code, _, err = run_cli(capsys, "explore", "--align-dir", out, "--out", tmp_path / "x.html")
    assert code == 0 and (tmp_path / "x.html").is_file(), err


def test_compare_computes_its_attention_and_aer_on_the_runs_split(opus, classic, tmp_path,
                                                                   capsys):
    code, _, err = run_cli(capsys, "compare", classic, opus["untied"], "--out", tmp_path / "r")
    assert code == 0, err
    report = (tmp_path / "r" / "report.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| untied"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "transformer" and cells[3] != "—"  # its parameters
    assert float(cells[-3]) >= 0 and float(cells[-1]) > 0  # AER, entropy
    assert "trained elsewhere (OPUS-MT)" in report and "align_test_" in report


def test_verbs_that_need_its_corpus_say_how_in_one_line(opus, capsys, tmp_path):
    from tests.test_cli import assert_user_error

    folder = opus["tied"]
    assert_user_error(run_cli(capsys, "align", "--run", folder, "--split", "test", "--out",
                              tmp_path / "a"), "has no corpus here", "--run runs/NAME")
    assert_user_error(run_cli(capsys, "evaluate", "--run", folder, "--split", "test"),
                      "has no corpus here")
    assert_user_error(run_cli(capsys, "explore", folder, "--out", tmp_path / "x.html"),
                      "an OPUS-MT model holds no alignments", "--run runs/NAME")
    assert_user_error(run_cli(capsys, "translate", "--run", folder, "--engine", "ctranslate2",
                              "a b"), "ct2-transformers-converter")


def test_serve_loads_it_beside_a_run(opus, classic):
    pytest.importorskip("fastapi")
    from nmt.serve.runs import load_runs

    served = load_runs([classic, opus["tied"]], say=lambda line: None)
    assert [s.name for s in served] == ["transformer", "opus-mt-src-tgt"]
    text = served[1].model.translate(["the dog"], beam=1)[0].text
    assert text == nmt.load(opus["tied"]).translate(["the dog"], beam=1)[0].text
