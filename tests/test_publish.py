"""`nmt publish` (issue 61): a run as a self-contained model folder (safetensors, card,
stamp); `nmt.load`, `nmt translate`, `nmt align` and `nmt serve` read it as a run; the
Transformer is a `transformers` MarianMTModel whose greedy ids are ours exactly and whose
forced log-probabilities agree."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import torch
import yaml

import nmt
from nmt.core.errors import NMTError
from nmt.core.tokens import BOS, EOS, PAD
from nmt.decoding.evaluate import evaluate_run
from nmt.decoding.publish import publish
from nmt.decoding.search import max_length
from nmt.decoding.translate import nbest_ids
from nmt.training.trainer import Trainer
from tests.test_cli import assert_user_error, run_cli
from tests.test_train import MODELS, tiny_config

REPO = Path(__file__).resolve().parent.parent
pytest.importorskip("safetensors")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _trained(data_root, runs, family: str, steps: int):
    raw = tiny_config(data_root, runs, family, MODELS[family], max_steps=steps,
                      valid_every=steps)
    Trainer(raw, quiet=True).fit()
    evaluate_run(raw.run_dir, "test", limit=40)
    return raw.run_dir


@pytest.fixture(scope="module")
def published(data_root, tmp_path_factory):
    root = tmp_path_factory.mktemp("pub")
    out = {}
    for family, steps in (("transformer", 400), ("bahdanau", 60)):
        run = _trained(data_root, root / "runs", family, steps)
        out[family] = (run, publish(run, root / "models" / family))
    return out


def _test_sources(data_root, n: int) -> tuple[list[str], list[str]]:
    folder = data_root / "synth" / "src-tgt"
    src = (folder / "test.src").read_text().splitlines()[:n]
    tgt = (folder / "test.tgt").read_text().splitlines()[:n]
    return src, tgt


def test_the_folder_holds_safetensors_a_card_and_a_stamp(published):
    run, folder = published["transformer"]
    names = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert {"model.safetensors", "config.yaml", "scores.json", "README.md", "nmt.json",
            "spm/joint.model", "config.json", "generation_config.json", "source.spm",
            "target.spm", "vocab.json", "tokenizer_config.json"} <= names
    assert not [n for n in names if n.endswith((".pt", ".bin", ".pkl"))]  # nothing pickled
    card = (folder / "README.md").read_text()
    meta = yaml.safe_load(card.split("---")[1])
    assert meta["language"] == ["src", "tgt"] and meta["pipeline_tag"] == "translation"
    metrics = {m["type"]: m["value"] for m in meta["model-index"][0]["results"][0]["metrics"]}
    scores = json.loads((run / "scores.json").read_text())["test"]
    assert metrics["bleu"] == scores["bleu"] and metrics["chrf"] == scores["chrf"]
    assert metrics["aer"] == round(scores["alignment"]["aer"], 4)  # the synthetic corpus: gold
    stamp = json.loads((folder / "nmt.json").read_text())
    assert set(stamp["files"]) == names - {"nmt.json"}


@pytest.mark.parametrize("family", ["transformer", "bahdanau"])
def test_nmt_load_of_the_folder_translates_and_aligns_as_the_run(published, data_root, family):
    run, folder = published[family]
    sources, targets = _test_sources(data_root, 20)
    a, b = nmt.load(run), nmt.load(folder)
    for beam in (1, 3):
        assert [t.text for t in a.translate(sources, beam=beam)] == \
            [t.text for t in b.translate(sources, beam=beam)]
    assert a.score(sources, targets) == b.score(sources, targets)


def test_the_cli_and_the_server_read_the_folder(published, capsys):
    run, folder = published["bahdanau"]
    code, out, _ = run_cli(capsys, "translate", "--run", folder, "--beam", "1", "the dog sees a cat")
    code_run, out_run, _ = run_cli(capsys, "translate", "--run", run, "--beam", "1",
                                   "the dog sees a cat")
    assert code == code_run == 0 and out == out_run and out.strip()
    code, _, err = run_cli(capsys, "align", "--run", folder, "--src", "the dog",
                           "--tgt", "dog the", "--out", folder.parent / "aligned")
    assert code == 0, err
    from nmt.serve.runs import load_runs

    assert len(load_runs([folder])) == 1


def test_a_published_folder_names_its_one_checkpoint_when_asked_for_another(published,
                                                                             capsys):
    run, folder = published["bahdanau"]
    assert nmt.load(folder, checkpoint="best").path == folder  # the one it holds
    with pytest.raises(NMTError, match="holds one checkpoint, its run's 'best', not 'last'"):
        nmt.load(folder, checkpoint="last")
    with pytest.raises(NMTError, match=r"checkpoint 'bogus': .* \(it has: best, last\); use best"):
        nmt.load(run, checkpoint="bogus")


def test_a_cut_or_altered_file_is_refused_in_one_line(published, tmp_path):
    import shutil

    _, folder = published["bahdanau"]
    copy = shutil.copytree(folder, tmp_path / "copy")
    weights = copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-10])
    with pytest.raises(NMTError, match=r"model.safetensors: not the file the model was "
                                       r"published with") as err:
        nmt.load(copy)
    assert "\n" not in str(err.value)


def test_the_ctranslate2_export_in_the_folder_decodes_as_the_run(published, data_root, tmp_path):
    pytest.importorskip("ctranslate2")
    run, plain = published["transformer"]
    with pytest.raises(NMTError, match="published without a CTranslate2 export"):
        nmt.load(plain, engine="ctranslate2")
    folder = publish(run, tmp_path / "model", ctranslate2=True)
    stamp = json.loads((folder / "nmt.json").read_text())
    assert {"ctranslate2/model.bin", "ctranslate2/export.json"} <= set(stamp["files"])
    before = sorted(p.name for p in folder.rglob("*"))
    sources, _ = _test_sources(data_root, 20)
    want = [t.text for t in nmt.load(run).translate(sources, beam=1)]
    got = nmt.load(folder, engine="ctranslate2").translate(sources, beam=1)
    assert [t.text for t in got] == want
    assert sorted(p.name for p in folder.rglob("*")) == before  # nothing written into it
    from nmt.decoding.export import export

    with pytest.raises(NMTError, match="a published model is never exported again"):
        export(folder)


def _hf(folder):
    transformers = pytest.importorskip("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    return transformers, tokenizer, model


def _same_greedy_ids(run, folder, sources: list[str], decode=None) -> int:
    """Assert that transformers' greedy ids (or `decode(tokenizer, sources)`'s) are ours for
    every sentence (up to our length limit where ours was cut by it); returns how many
    ended before the limit."""
    _, tokenizer, hf = _hf(folder)
    ours = nmt.load(run)
    src_ids = ours.vocab.encode_src(sources)
    assert [tokenizer(s)["input_ids"] for s in sources] == src_ids  # the same pieces + EOS
    mine = [h[0][0] for h in nbest_ids(ours.module, src_ids, ours.cfg.decode, beam=1)]
    if decode is None:
        batch = tokenizer(sources, return_tensors="pt", padding=True)
        with torch.no_grad():
            theirs = hf.generate(**batch, num_beams=1, do_sample=False, max_length=256).tolist()
    else:
        theirs = decode(tokenizer, sources)
    start = hf.config.decoder_start_token_id
    ended = 0
    for ids, out, src in zip(mine, theirs, src_ids):
        out = [i for i in out if i != start]
        limit = max_length(len(src), ours.cfg.decode.max_len_ratio, ours.cfg.decode.max_len_offset)
        if len(ids) + 1 >= limit:  # ours was cut at its limit: compare what both made
            assert out[:len(ids)] == ids
            continue
        assert out[:len(ids) + 1] == ids + [EOS]
        ended += 1
    return ended


def test_transformers_greedy_gives_our_greedy_ids_on_200_sentences(published, data_root):
    run, folder = published["transformer"]
    sources, _ = _test_sources(data_root, 200)
    assert _same_greedy_ids(run, folder, sources) >= 180


def _resaved(folder, out):
    """The folder as transformers saves it: save_pretrained, and a Seq2SeqTrainer
    checkpoint (Trainer._save: save_pretrained with the model's state dict, safetensors),
    each then loaded by from_pretrained. Neither keeps a position table."""
    _, tokenizer, hf = _hf(folder)
    hf.save_pretrained(out / "saved")
    hf.save_pretrained(out / "checkpoint-1", state_dict=hf.state_dict())
    for name in ("saved", "checkpoint-1"):
        tokenizer.save_pretrained(out / name)
    return out / "saved", out / "checkpoint-1"


def _ct2_decode(folder, out):
    """`ct2-transformers-converter --model DIR` on the folder, then a greedy CTranslate2
    Translator fed the tokenizer's pieces; ids with EOS, as generate gives them."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "ctranslate2.converters.transformers", "--model",
                    str(folder), "--output_dir", str(out), "--force"], check=True,
                   capture_output=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    translator = ctranslate2.Translator(str(out), intra_threads=1)

    def decode(tokenizer, sources):
        pieces = [tokenizer.convert_ids_to_tokens(tokenizer(s)["input_ids"]) for s in sources]
        results = translator.translate_batch(pieces, beam_size=1, max_decoding_length=256,
                                             suppress_sequences=[["<s>"], ["<nmt_pad>"]])
        return [tokenizer.convert_tokens_to_ids(r.hypotheses[0]) + [EOS] for r in results]
    return decode


def test_the_folder_survives_save_pretrained_a_trainer_checkpoint_and_ct2_converter(
        published, data_root, tmp_path):
    """Issue 75, item 1: nothing depends on a loaded position table (none is written),
    so transformers' own saves keep the model, and the field's converter takes the folder:
    greedy ids are ours on 200 sentences each way."""
    from safetensors import safe_open

    run, folder = published["transformer"]
    with safe_open(str(folder / "model.safetensors"), framework="pt") as f:
        assert not [k for k in f.keys() if "embed_positions" in k]
    sources, _ = _test_sources(data_root, 200)
    for copy in _resaved(folder, tmp_path):
        assert _same_greedy_ids(run, copy, sources) >= 180
    assert _same_greedy_ids(run, folder, sources, _ct2_decode(folder, tmp_path / "ct2")) >= 180


def test_nmt_reads_the_marian_layout_back_exactly(published):
    run, folder = published["transformer"]
    mine, back = nmt.load(run).module.state_dict(), nmt.load(folder).module.state_dict()
    assert mine.keys() == back.keys() and all(torch.equal(mine[k], back[k]) for k in mine)


def test_a_plain_generate_and_the_cards_first_code_block_decode_as_nmt_translate(
        published, data_root):
    """Issue 75, item 2: generation_config.json is nmt translate's default where
    transformers can say it; the card's first code block passes the rest (the per-sentence
    limit), and its one line names what still differs (GNMT's length penalty): with the
    penalty off on both sides the block's output is nmt's."""
    import dataclasses

    from nmt.decoding.card import transformers_snippet

    run, folder = published["transformer"]
    ours = nmt.load(run)
    generation = json.loads((folder / "generation_config.json").read_text())
    assert (generation["num_beams"], generation["length_penalty"], generation["early_stopping"]) \
        == (ours.cfg.decode.beam, ours.cfg.decode.length_penalty, ours.cfg.decode.beam > 1)
    card = (folder / "README.md").read_text()
    first = card.split("```python\n", 1)[1].split("```", 1)[0]
    assert "max_new_tokens=limit" in first and card.index(first) < card.index("```bash")
    from nmt.decoding.card import _what_differs

    assert _what_differs(ours.cfg) in card  # the one line, for this run's beam and penalty
    cfg = dataclasses.replace(ours.cfg, decode=dataclasses.replace(ours.cfg.decode,
                                                                   length_penalty=0.0))
    block = "\n".join(transformers_snippet(cfg)[1:-1]).replace("THIS_FOLDER", str(folder))
    sources, _ = _test_sources(data_root, 40)
    printed = []
    exec(block.replace('["..."]', repr(sources)).replace("print(", "printed.append("),
         {"printed": printed})
    src_ids = ours.vocab.encode_src(sources)
    want = [ours.vocab.tgt.decode(h[0][0])
            for h in nbest_ids(ours.module, src_ids, cfg.decode, beam=cfg.decode.beam)]
    assert printed == want


AWKWARD = ["a\tb", "two  spaces", "  ends  ", "Ma\u0308dchen", "M\u00e4dchen", "a </s> b",
           "<unk> and <pad> and <s>", "\u00a0no-break\u2003em space", "line\nbreak", "a\r\nb",
           "\ufeffbom", "x\u200by", "\u65e5\u672c \U0001f600", "<nmt_pad>", "", "   ",
           "A\u030a\u0301 e\u0301 \u212b", "tab\t\tend\t"]


def test_the_folders_tokenizer_reads_awkward_text_as_nmt(published):
    """Issue 75, item 3: tabs, runs of spaces, NFD, special-token strings, characters
    outside the vocabulary: the same ids as nmt's."""
    run, folder = published["transformer"]
    _, tokenizer, _ = _hf(folder)
    ours = nmt.load(run)
    assert [tokenizer(s)["input_ids"] for s in AWKWARD] == ours.vocab.encode_src(AWKWARD)
    assert [tokenizer(text_target=s)["input_ids"] for s in AWKWARD] == \
        [ids + [EOS] for ids in ours.vocab.encode_tgt(AWKWARD)]


def test_every_file_of_the_folder_has_the_same_permissions(published):
    for _, folder in published.values():
        modes = {p.relative_to(folder).as_posix(): p.stat().st_mode & 0o777
                 for p in folder.rglob("*") if p.is_file()}
        assert len(set(modes.values())) == 1, modes


MULTI30K = Path(os.environ.get("NMT_MULTI30K_DIR", REPO.parent / "shared" / "corpora" / "multi30k"))


@pytest.mark.skipif(not (MULTI30K / "train.de.gz").is_file(), reason="no raw Multi30k beside")
def test_transformers_greedy_gives_our_greedy_ids_on_200_multi30k_sentences(tmp_path):
    from nmt.core.config import config_to_dict
    from nmt.data.pipeline import download
    from nmt.models.checks import config_from_dict

    root = tmp_path / "data"
    download("multi30k", "de-en", root, from_dir=MULTI30K)
    raw = config_to_dict(tiny_config(root, tmp_path / "runs", "m30k", MODELS["transformer"],
                                     max_steps=300, valid_every=300))
    raw["data"].update(corpus="multi30k", pair="de-en", test="test_2016_flickr", max_len=40)
    raw["vocab"].update(size=1000, model_type="unigram")
    raw["train"].update(batch_tokens=3000)
    cfg = config_from_dict(raw)
    Trainer(cfg, quiet=True).fit()
    folder = publish(cfg.run_dir, tmp_path / "model")
    sources = (root / "multi30k" / "de-en" / "test_2016_flickr.de").read_text().splitlines()
    assert _same_greedy_ids(cfg.run_dir, folder, sources[:200]) >= 100
    for copy in _resaved(folder, tmp_path):  # transformers' own saves keep the model
        assert _same_greedy_ids(cfg.run_dir, copy, sources[:200]) >= 100
    decode = _ct2_decode(folder, tmp_path / "ct2")
    assert _same_greedy_ids(cfg.run_dir, folder, sources[:200], decode) >= 100


def test_transformers_forced_log_probabilities_agree_within_1e_4(published, data_root):
    run, folder = published["transformer"]
    _, tokenizer, hf = _hf(folder)
    ours = nmt.load(run)
    sources, targets = _test_sources(data_root, 30)
    mine = ours.score(sources, targets)
    batch = tokenizer(sources, text_target=targets, return_tensors="pt", padding=True)
    labels = batch.pop("labels")
    start = torch.full((labels.size(0), 1), BOS)
    decoder_in = torch.cat([start, labels[:, :-1]], 1).masked_fill(
        torch.cat([start, labels[:, :-1]], 1) == -100, PAD)
    with torch.no_grad():
        logp = torch.log_softmax(hf(**batch, decoder_input_ids=decoder_in).logits, -1)
    gold = logp.gather(-1, labels.clamp_min(0).unsqueeze(-1)).squeeze(-1)
    theirs = (gold * (labels != tokenizer.pad_token_id) * (labels != -100)).sum(1).tolist()
    assert max(abs(a - b) for a, b in zip(mine, theirs)) < 1e-4
    with torch.no_grad():  # no dropout or layer drop in the config: training mode agrees
        trained = torch.log_softmax(hf.train()(**batch, decoder_input_ids=decoder_in).logits, -1)
    hf.eval()
    assert torch.allclose(trained, logp, atol=1e-6)
    config = json.loads((folder / "config.json").read_text())
    generation = json.loads((folder / "generation_config.json").read_text())
    assert "num_beams" not in config and "max_length" not in config  # generation's alone
    assert generation["num_beams"] == ours.cfg.decode.beam


def test_the_cards_transformers_snippet_translates_as_nmt_offline(published, data_root):
    """The card's way in (transformers 5 removed the "translation" pipeline: the model and
    tokenizer classes and generate are its way), decoded to text."""
    run, folder = published["transformer"]
    _, tokenizer, hf = _hf(folder)
    sources, _ = _test_sources(data_root, 5)
    with torch.no_grad():
        out = hf.generate(**tokenizer(sources, return_tensors="pt", padding=True), num_beams=1)
    got = tokenizer.batch_decode(out, skip_special_tokens=True)
    assert got == [t.text for t in nmt.load(run).translate(sources, beam=1)]
    card = (folder / "README.md").read_text()
    assert "AutoModelForSeq2SeqLM.from_pretrained" in card and "tokenizer.decode(" in card


def test_push_uploads_the_folder_through_the_hubs_api(published, tmp_path, monkeypatch):
    from tests.hub_standin import Hub

    hub = Hub(tmp_path / "hub")
    try:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_TOKEN", "hf_standin")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        import huggingface_hub.constants as constants

        monkeypatch.setattr(constants, "ENDPOINT", hub.url)
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        from nmt.decoding.publish import push

        _, folder = published["bahdanau"]
        url = push(folder, "org/tiny", private=True)
        assert url.startswith(f"{hub.url}/org/tiny/commit/")
        sent = {p.relative_to(tmp_path / "hub" / "org" / "tiny").as_posix(): p.read_bytes()
                for p in (tmp_path / "hub" / "org" / "tiny").rglob("*") if p.is_file()}
        mine = {p.relative_to(folder).as_posix(): p.read_bytes()
                for p in folder.rglob("*") if p.is_file()}
        assert sent == mine and hub.repos["org/tiny"]["private"] is True
        assert all(auth == "Bearer hf_standin" for verb, _, auth in hub.requests if verb == "POST")
    finally:
        hub.close()


def test_push_without_a_token_is_one_line(published, monkeypatch, tmp_path):
    from nmt.decoding.publish import push

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "nohome"))
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "nohome" / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "nohome" / "tokens"))
    with pytest.raises(NMTError, match="no Hugging Face token; set HF_TOKEN"):
        push(published["bahdanau"][1], "org/tiny")


def _prefilled_hub_cache(folder, tmp_path, monkeypatch) -> tuple[Path, str]:
    """The Hub's cache holding `folder` as org/tiny at one commit, offline: what
    snapshot_download left behind on an earlier, online call."""
    import shutil

    cache = tmp_path / "hub-cache"
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = cache / "models--org--tiny" / "snapshots" / commit
    shutil.copytree(folder, snapshot)
    (cache / "models--org--tiny" / "refs").mkdir(parents=True)
    (cache / "models--org--tiny" / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return snapshot, commit


def test_a_hub_model_loads_from_a_prefilled_cache_offline_pinned_to_its_commit(
        published, tmp_path, monkeypatch, data_root):
    run, folder = published["bahdanau"]
    snapshot, commit = _prefilled_hub_cache(folder, tmp_path, monkeypatch)
    sources, _ = _test_sources(data_root, 5)
    want = [t.text for t in nmt.load(run).translate(sources, beam=1)]
    for name in ("hf:org/tiny", f"hf:org/tiny@{commit}"):
        model = nmt.load(name)
        assert model.path == snapshot and [t.text for t in model.translate(sources, beam=1)] == want
    (snapshot / "nmt.json").unlink()
    with pytest.raises(NMTError, match="not a model published by `nmt publish`"):
        nmt.load("hf:org/tiny")


def test_every_verb_reads_a_hub_model_as_its_run(published, tmp_path, monkeypatch, capsys):
    """translate, align, evaluate and serve given --run hf:ORG/NAME[@REV] print what they
    print for the run it was published from."""
    run, folder = published["bahdanau"]
    snapshot, commit = _prefilled_hub_cache(folder, tmp_path, monkeypatch)
    for name in ("hf:org/tiny", f"hf:org/tiny@{commit}"):
        verbs = {
            "translate": ["translate", "--beam", "1", "the dog sees a cat"],
            "align": ["align", "--src", "the dog sees a cat", "--tgt", "dog the cat a sees",
                      "--out", tmp_path / "aligned" / name.replace(":", "_").replace("/", "_")],
            "evaluate": ["evaluate", "--split", "test", "--limit", "12", "--beam", "1"],
        }
        for verb, args in verbs.items():
            code, out, err = run_cli(capsys, args[0], "--run", name, *args[1:])
            want_code, want, _ = run_cli(capsys, args[0], "--run", run, *args[1:])
            assert code == want_code == 0, (verb, err)
            if verb == "align":  # its rows are named by the model's name: the Hub's NAME
                out, want = (re.sub(r"^\S+ +", "", t, flags=re.M) for t in (out, want))
            speed = re.compile(r"[0-9.]+ sent/s")  # the one figure that differs between calls
            assert speed.sub("", out.replace(name, str(run))) == speed.sub("", want), verb
    assert not (snapshot / "hyps").exists()  # nothing written into a published model
    from nmt.serve.runs import load_runs

    served = load_runs(["hf:org/tiny"], say=lambda line: None)
    assert [s.model.translate(["the dog"], beam=1)[0].text for s in served] == \
        [nmt.load(run).translate(["the dog"], beam=1)[0].text]


def test_compare_and_explore_take_a_run_beside_its_published_copy(published, tmp_path, capsys):
    """A published copy keeps its run's name: `nmt compare` labels the two by their folders
    (the same folder twice is still refused), and `nmt explore`, which reads a run's saved
    alignments, says how to write the folder's elsewhere, since it is never written."""
    run, folder = published["bahdanau"]
    code, _, err = run_cli(capsys, "compare", run, folder, "--out", tmp_path / "report")
    assert code == 0, err
    rows = [line.split(" | ")[0] for line in
            (tmp_path / "report" / "report.md").read_text().splitlines() if line.startswith("| ")]
    assert rows[1:] == ["| runs/bahdanau", "| models/bahdanau"]  # both folders: bahdanau
    assert_user_error(run_cli(capsys, "compare", run, f"{run}/", "--out", tmp_path / "r2"),
                      f"run name '{run.name}' appears twice", "pass each run once")
    assert_user_error(run_cli(capsys, "explore", run, folder, "--out", tmp_path / "x.html"),
                      f"{folder}: a published model holds no alignments",
                      f"`nmt align --run {folder} --split test --out DIR`", "--align-dir DIR")
    out = tmp_path / "aligned"
    assert run_cli(capsys, "align", "--run", folder, "--split", "test", "--limit", "12",
                   "--plot", "0", "--out", out)[0] == 0
    code, _, err = run_cli(capsys, "explore", run, "--align-dir", out, "--out", tmp_path / "x.html")
    assert code == 0 and (tmp_path / "x.html").is_file(), err
    assert not (folder / "align").exists()


def test_a_guided_runs_alignment_head_is_named_in_its_config_and_card(data_root, tmp_path):
    from nmt.core.config import config_to_dict
    from nmt.models.checks import config_from_dict

    raw = config_to_dict(tiny_config(data_root, tmp_path / "runs", "g", MODELS["transformer"],
                                     max_steps=4, valid_every=4))
    raw["guided"].update(weight=1.0, teacher="gold", layer=-1, heads=2)
    cfg = config_from_dict(raw)
    Trainer(cfg, quiet=True).fit()
    folder = publish(cfg.run_dir, tmp_path / "model")
    head = json.loads((folder / "config.json").read_text())["nmt_alignment_head"]
    assert (head["layer"], head["heads"]) == (-1, 2) and "cross-attention" in head["reading"]
    assert "layer -1 (0-based), its first 2 cross-attention heads" in \
        (folder / "README.md").read_text()


def test_an_unguided_runs_card_and_config_name_no_alignment_head(published):
    for _, folder in published.values():  # transformers' config.json: the Transformer's
        config = folder / "config.json"
        assert not config.is_file() or "nmt_alignment_head" not in config.read_text()
        assert "alignment head" not in (folder / "README.md").read_text()


def test_the_cards_facts_of_a_run_that_kept_no_manifest(tmp_path, monkeypatch):
    """An older run (no corpus/manifest.json, no scores, no precision file): the card's
    training line still names its step and minutes, and its corpus section says so."""
    import nmt.decoding.publish as publish_module
    from nmt.core.config import build_config
    from nmt.decoding.card import _corpus

    monkeypatch.setattr(publish_module, "load_checkpoint",
                        lambda path: {"progress": {"step": 7, "elapsed": 1234.0}})
    facts = publish_module._facts(tmp_path, tmp_path / "best.pt", "best")
    assert (facts["steps"], facts["minutes"]) == (7, 20.6)  # 1,234 s, to a tenth of a minute
    assert facts["manifest"] == {} and facts["scores"] == {} and facts["precision"] == "fp32"
    cfg = build_config({"data": {"corpus": "old", "pair": "de-en"}})
    assert _corpus(cfg, {}) == ["## Corpus", "", "`old` (de-en); no manifest was kept.", ""]


def test_the_card_scores_only_the_checkpoint_it_publishes(published, tmp_path):
    """Each scores.json entry names the weights that scored it: a card of another
    checkpoint leaves the best one's out, and one that was scored keeps its own with its
    sentence count (docs/deploy.md, "Publish a model")."""
    import shutil

    from nmt.core.checkpoint import load_checkpoint, save_checkpoint

    run = tmp_path / "run"
    shutil.copytree(published["bahdanau"][0], run)
    last = run / "checkpoints" / "last.pt"
    payload = load_checkpoint(last)
    name = next(iter(payload["model"]))
    payload["model"][name] = payload["model"][name] + 0.5  # other weights than the best's
    save_checkpoint(last, payload)
    best_entry = json.loads((run / "scores.json").read_text())["test"]
    card = (publish(run, tmp_path / "last", checkpoint="last") / "README.md").read_text()
    assert "This checkpoint was not evaluated" in card and "model-index" not in card.split("---")[1]
    assert not (tmp_path / "last" / "scores.json").exists()
    entry = nmt.decoding.evaluate.evaluate_model(nmt.load(run, checkpoint="last"), "test", limit=7)
    assert entry["checkpoint"] == "last" and entry["bleu"] != best_entry["bleu"]
    card = (publish(run, tmp_path / "last", checkpoint="last") / "README.md").read_text()
    assert f"| test | 7 | {entry['bleu']} |" in card
    card = (publish(run, tmp_path / "best") / "README.md").read_text()  # last's entry is not best's
    assert "This checkpoint was not evaluated" in card and f"| {entry['bleu']} |" not in card
