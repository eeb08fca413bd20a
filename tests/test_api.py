"""The Python API (nmt.decoding.api) and what goes through it: `nmt translate` (--alignments,
--format jsonl, --sampling, ensembles), `nmt align`, `nmt evaluate` and `nmt average`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import nmt
import nmt.core.errors
from nmt.core.checkpoint import kept_checkpoints, load_checkpoint
from nmt.core.tokens import BOS, EOS, PAD
from nmt.decoding.api import Sampling
from nmt.decoding.search import filter_top, greedy, max_lengths, sample
from nmt.training.trainer import Trainer
from tests.conftest import random_batch, tiny_model
from tests.test_cli import assert_user_error, run_cli
from tests.test_train import MODELS, short_pairs, tiny_config


@pytest.fixture(scope="module")
def runs(data_root, tmp_path_factory) -> dict[str, Path]:
    """Two short runs (bahdanau keeping its last 3 validations, and a transformer) on the
    same vocabulary, and one fixed_context run."""
    folder = tmp_path_factory.mktemp("api_runs")
    out = {}
    for name, steps in (("bahdanau", 60), ("transformer", 40), ("fixed_context", 20)):
        cfg = tiny_config(data_root, folder, name, MODELS[name], max_steps=steps, threads=1,
                          valid_every=20, keep_last=3, valid_sentences=8)
        Trainer(cfg, quiet=True).fit()
        out[name] = cfg.run_dir
    return out


def sources(data_root, n: int = 6) -> list[str]:
    return short_pairs(data_root, n)[0]


def test_translate_equals_the_cli_and_jsonl_carries_the_same(runs, data_root, capsys):
    model = nmt.load(runs["bahdanau"])
    texts = sources(data_root)
    api = model.translate(texts, beam=3)
    code, out, _ = run_cli(capsys, "translate", "--run", runs["bahdanau"], "--beam", "3", *texts)
    assert code == 0 and out.splitlines() == [t.text for t in api]
    code, out, _ = run_cli(capsys, "translate", "--run", runs["bahdanau"], "--beam", "3",
                           "--n-best", "2", "--format", "jsonl", *texts)
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["text"] for r in rows] == [t.text for t in api]
    assert [r["source"] for r in rows] == texts
    assert all(len(r["n_best"]) == 2 and r["n_best"][0]["text"] == r["text"] for r in rows)
    assert all("links" not in r for r in rows)  # only when asked
    assert api[0].pieces == model.vocab.tgt_pieces(model.vocab.encode_tgt([api[0].text])[0])


def test_align_shows_the_words_as_written_even_where_the_vocabulary_has_no_piece(runs):
    """Model.align: characters outside the vocabulary are <unk> pieces, not <unk> words, so
    two runs of other vocabularies show the same words (the serve page's rows line up)."""
    model = nmt.load(runs["transformer"])
    [rec] = model.align(["the  dog <b>runs</b> ."], ["sepo ga <i>goku</i> ."])
    assert "<unk>" in "".join(rec.tgt_tokens)  # the synthetic vocabulary has no "<"
    assert rec.src_words == ["the", "dog", "<b>runs</b>", "."]
    assert rec.tgt_words == ["sepo", "ga", "<i>goku</i>", "."]
    assert rec.word_weights.shape == (4, 4) and rec.links
    [free] = model.align(["the dog <b>runs</b> ."])
    assert free.src_words == ["the", "dog", "<b>runs</b>", "."]


def test_the_links_of_a_source_cut_for_the_search_stay_in_the_part_it_read(runs, data_root):
    """cli.md: sources longer than 1,000 subwords are cut before translation; the free
    alignment is of that search, so its links never point past the cut."""
    from nmt.decoding.translate import MAX_SOURCE

    model = nmt.load(runs["bahdanau"])
    long = " ".join(sources(data_root, 200))  # well over MAX_SOURCE pieces
    pieces = model.vocab.encode_src([long])[0]
    assert len(pieces) > MAX_SOURCE
    [t] = model.translate([long], beam=1, alignments=True)
    [rec] = model.align([long])
    read = len(rec.src_words)  # the words of the first MAX_SOURCE - 1 pieces, EOS aside
    assert read < len(long.split()) and rec.src_tokens[-1] == "</s>"
    assert len(rec.src_tokens) == MAX_SOURCE
    assert t.links and max(i for i, _ in t.links) < read


def test_alignments_are_the_links_of_nmt_align_mode_free(runs, data_root, tmp_path, capsys):
    """`translate --alignments` prints `text<TAB>links`; the links are those `nmt align
    --mode free` writes for the same run and sentences (the same reading)."""
    texts = sources(data_root)
    for name in ("bahdanau", "transformer"):
        code, out, _ = run_cli(capsys, "translate", "--run", runs[name], "--alignments", *texts)
        assert code == 0
        printed = [line.split("\t") for line in out.splitlines()]
        assert all(len(fields) == 2 for fields in printed)
        args = ["align", "--run", runs[name], "--mode", "free", "--plot", "0",
                "--out", tmp_path / name]
        for text in texts:
            args += ["--src", text]
        assert run_cli(capsys, *args)[0] == 0
        written = (tmp_path / name / f"{runs[name].name}.links").read_text().splitlines()
        assert [links for _, links in printed] == written
        assert any(written), "some sentence has links"
        records = nmt.load(runs[name]).align(texts)  # the API's free mode: the same links
        assert [" ".join(f"{i}-{j}" for i, j in r.links) for r in records] == written


def test_translate_alignments_as_python_objects(runs, data_root):
    [t] = nmt.load(runs["transformer"]).translate(sources(data_root, 1), alignments=True)
    assert t.word_matrix.shape == (len(t.hypotheses[0].tgt_words), len(t.hypotheses[0].src_words))
    assert all(0 <= i < t.word_matrix.shape[1] and 0 <= j < t.word_matrix.shape[0]
               for i, j in t.links)


def test_fixed_context_has_no_attention_but_saliency(runs, data_root, capsys):
    texts = sources(data_root, 2)
    assert_user_error(run_cli(capsys, "translate", "--run", runs["fixed_context"],
                              "--alignments", *texts), "no attention", "saliency")
    code, out, _ = run_cli(capsys, "translate", "--run", runs["fixed_context"], "--alignments",
                           "--method", "saliency", *texts)
    assert code == 0 and all(len(line.split("\t")) == 2 for line in out.splitlines())


def test_score_is_the_sum_of_the_decoders_own_log_probabilities(runs, data_root):
    """score(src, tgt) teacher-forced equals the log-probability sampling accumulated step
    by step for the same tokens (EOS included)."""
    model = nmt.load(runs["transformer"])
    texts = sources(data_root, 4)
    src_ids = model.vocab.encode_src(texts)
    from nmt.data.batching import pad

    samples = sample(model.module, pad(src_ids), seed=3)
    hyps = [model.vocab.decode_tgt(ids) for ids, _ in samples]
    keep = [k for k, h in enumerate(hyps) if h.strip() and
            model.vocab.encode_tgt([h])[0] == samples[k][0]]  # text round-trips to the ids
    assert keep
    scores = model.score([texts[k] for k in keep], [hyps[k] for k in keep])
    assert scores == pytest.approx([samples[k][1] for k in keep], abs=1e-3)
    assert all(s < 0 for s in scores)


def test_an_ensemble_of_a_run_with_itself_is_the_run(runs, data_root):
    texts = sources(data_root)
    alone = nmt.load(runs["bahdanau"])
    twice = nmt.load(runs["bahdanau"], runs["bahdanau"])
    for beam in (1, 4):
        a, b = alone.translate(texts, beam=beam), twice.translate(texts, beam=beam)
        assert [t.text for t in a] == [t.text for t in b]
        assert [t.score for t in a] == pytest.approx([t.score for t in b], abs=1e-5)
    assert twice.score(texts[:2], ["a b", "c"]) == pytest.approx(
        alone.score(texts[:2], ["a b", "c"]), abs=1e-4)


def test_an_ensemble_differs_from_its_members_and_needs_one_vocabulary(runs, data_root, capsys,
                                                                        tmp_path):
    texts = sources(data_root)
    both = nmt.load(runs["bahdanau"], runs["transformer"])
    [score] = both.score(texts[:1], ["a b c"])
    members = [nmt.load(r) for r in (runs["bahdanau"], runs["transformer"])]
    src = torch.tensor([members[0].vocab.encode_src(texts[:1])[0]])
    tgt = members[0].vocab.encode_tgt(["a b c"])[0] + [EOS]
    tgt_in = torch.tensor([[BOS] + tgt[:-1]])
    per_step = torch.stack([torch.log_softmax(m.module(src, tgt_in)[0], -1) for m in members])
    by_hand = torch.log_softmax(per_step.mean(0), -1)[0, range(len(tgt)), tgt].sum().item()
    assert score == pytest.approx(by_hand, abs=1e-4)  # the renormalised mean, step by step
    alone = [m.score(texts[:1], ["a b c"])[0] for m in members]
    assert min(alone) - 1e-3 <= score and score not in alone
    code, out, _ = run_cli(capsys, "translate", "--run", runs["bahdanau"], "--run",
                           runs["transformer"], *texts)
    assert code == 0 and out.splitlines() == [t.text for t in both.translate(texts)]
    cfg = tiny_config(data_root, tmp_path, "other", MODELS["bahdanau"], max_steps=1,
                      valid_sentences=2)
    cfg = dataclasses.replace(cfg, vocab=dataclasses.replace(cfg.vocab, size=500))
    Trainer(cfg, quiet=True).fit()  # another SentencePiece model
    assert_user_error(run_cli(capsys, "translate", "--run", runs["bahdanau"], "--run",
                              cfg.run_dir, "x"), "vocabulary", "differs", "same SentencePiece")


def test_average_writes_the_element_wise_mean_of_the_last_n(runs, capsys):
    run = runs["bahdanau"]
    kept = kept_checkpoints(run / "checkpoints")
    assert [p.name for p in kept] == ["step00000020.pt", "step00000040.pt", "step00000060.pt"]
    code, out, _ = run_cli(capsys, "average", "--run", run, "--last", "2")
    assert code == 0 and "averaged.pt" in out
    averaged = load_checkpoint(run / "checkpoints" / "averaged.pt")["model"]
    a, b = (load_checkpoint(p)["model"] for p in kept[-2:])
    for key, value in averaged.items():
        assert torch.allclose(value, (a[key] + b[key]) / 2, atol=1e-6), key
    assert not torch.equal(averaged["out.bias"], b["out.bias"])
    model = nmt.load(run, checkpoint="averaged")
    assert torch.equal(model.module.state_dict()["out.bias"], averaged["out.bias"])
    assert_user_error(run_cli(capsys, "average", "--run", run, "--last", "4"),
                      "only 3 kept checkpoints", "--last 3")
    code, _, _ = run_cli(capsys, "average", "--run", run, "--last", "3")  # every kept one
    payload, last = (load_checkpoint(p) for p in (run / "checkpoints" / "averaged.pt", kept[-1]))
    assert code == 0 and payload["averaged_from"] == [p.name for p in kept]
    assert payload["progress"] == last["progress"] and payload["config"] == last["config"]
    code, _, _ = run_cli(capsys, "average", "--run", run, "--last", "2")
    code, out, _ = run_cli(capsys, "evaluate", "--run", run, "--checkpoint", "averaged",
                           "--limit", "5", "--beam", "1")
    assert code == 0 and "BLEU" in out
    code, out, _ = run_cli(capsys, "align", "--run", run, "--checkpoint", "averaged", "--src",
                           "a b c", "--tgt", "x y", "--plot", "0", "--out", run / "avg-align")
    assert code == 0
    [rec] = nmt.load(run, checkpoint="averaged").align(["a b c"], ["x y"])
    saved = (run / "avg-align" / f"{run.name}.links").read_text().split()
    assert saved == [f"{i}-{j}" for i, j in rec.links]


def test_averaging_needs_kept_checkpoints_and_an_averaged_run_needs_averaging(runs, capsys):
    run = runs["transformer"]  # trained with keep_last 3 as well: remove them
    for path in kept_checkpoints(run / "checkpoints"):
        path.unlink()
    assert_user_error(run_cli(capsys, "average", "--run", run), "no kept checkpoints",
                      "train.keep_last")
    assert_user_error(run_cli(capsys, "translate", "--run", run, "--checkpoint", "averaged",
                              "x"), "nmt average")


def test_keep_last_keeps_only_the_last_n(data_root, tmp_path):
    cfg = tiny_config(data_root, tmp_path, "keep", MODELS["bahdanau"], max_steps=5,
                      valid_every=1, keep_last=2, valid_sentences=2, threads=1)
    Trainer(cfg, quiet=True).fit()
    assert [p.name for p in kept_checkpoints(cfg.run_dir / "checkpoints")] == [
        "step00000004.pt", "step00000005.pt"]
    payload = load_checkpoint(cfg.run_dir / "checkpoints" / "step00000005.pt")
    last = load_checkpoint(cfg.run_dir / "checkpoints" / "last.pt")
    assert "optimizer" not in payload  # weights only: they are for averaging
    assert all(torch.equal(payload["model"][k], v) for k, v in last["model"].items())


# ---------------------------------------------------------------------------- sampling


@pytest.mark.parametrize("name", ["bahdanau", "transformer", "luong_local_p"])
def test_sampling_near_zero_temperature_is_greedy(name):
    model = tiny_model(name)
    src, _ = random_batch()
    drawn = sample(model, src, temperature=1e-6, seed=0)
    assert [ids for ids, _ in drawn] == greedy(model, src)


def test_sampling_is_seeded_never_emits_pad_or_bos_and_keeps_the_length_limit():
    model = tiny_model("bahdanau")
    src, _ = random_batch(batch=4)
    src = src.repeat(8, 1)  # 32 sentences
    limit = max_lengths(src, 0.5, 2)
    runs = [sample(model, src, 0.5, 2, top_k=0, temperature=2.0,
                   seed=seed) for seed in (1, 1, 2)]
    assert runs[0] == runs[1] and runs[0] != runs[2]
    for ids, _ in runs[0] + runs[2]:
        assert PAD not in ids and BOS not in ids and EOS not in ids
    for (ids, _), n in zip(runs[0], limit.tolist()):
        assert len(ids) <= n - 1  # the limit counts EOS, which the last step must emit
    assert any(len(ids) == n - 1 for (ids, _), n in zip(runs[0], limit.tolist()))


def test_top_k_and_top_p_keep_the_right_tokens():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert torch.isfinite(filter_top(logits, top_k=2)).tolist() == [[True, True, False, False]]
    assert torch.isfinite(filter_top(logits, top_p=0.75)).tolist() == [[True, True, False, False]]
    assert torch.isfinite(filter_top(logits, top_p=0.8)).tolist() == [[True, True, False, False]]
    assert torch.isfinite(filter_top(logits, top_p=0.81)).tolist() == [[True, True, True, False]]
    assert torch.isfinite(filter_top(logits, top_p=0.1)).tolist() == [[True, False, False, False]]
    model = tiny_model("transformer")
    src, _ = random_batch()
    assert [ids for ids, _ in sample(model, src, top_k=1, seed=0)] == greedy(model, src)


def test_sampling_through_the_cli_is_reproducible_and_checked(runs, data_root, capsys):
    texts = sources(data_root)
    args = ("translate", "--run", runs["bahdanau"], "--sampling", "top-k:5", "--seed", "7")
    first, again = run_cli(capsys, *args, *texts), run_cli(capsys, *args, *texts)
    assert first[0] == 0 and first[1] == again[1] and len(first[1].splitlines()) == len(texts)
    api = nmt.load(runs["bahdanau"]).translate(texts, sampling=Sampling(top_k=5, seed=7))
    assert first[1].splitlines() == [t.text for t in api]
    assert_user_error(run_cli(capsys, "translate", "--run", runs["bahdanau"], "--sampling",
                              "top-q:3", "x"), "--sampling", "top-k:K")
    assert_user_error(run_cli(capsys, "translate", "--run", runs["bahdanau"], "--sampling",
                              "top-p:1.5", "x"), "top-p:P")


def test_a_sentences_sample_depends_on_the_seed_and_the_sentence_alone(runs, data_root):
    """docs/api.md: the same seed gives a sentence the same sample alone, among other
    sentences, in any order, in chunks of one line or many; another seed, other samples."""
    model = nmt.load(runs["transformer"])
    texts = sources(data_root, 12)
    plan = Sampling(top_k=50, temperature=1.5, seed=3)
    together = [t.text for t in model.translate(texts, sampling=plan)]
    alone = [model.translate([t], sampling=plan)[0].text for t in texts]
    backwards = [t.text for t in model.translate(texts[::-1], sampling=plan)][::-1]
    streamed = [t.text for c in model.translate_chunks(texts, sampling=plan, chunk=5) for t in c]
    assert together == alone == backwards == streamed
    other = [t.text for t in model.translate(texts, sampling=Sampling(top_k=50, temperature=1.5,
                                                                       seed=4))]
    assert other != together


@pytest.mark.parametrize("call, named", [
    (lambda m: m.align("a b c"), "sources"),  # a bare string would be split into characters
    (lambda m: m.score("ab", "cd"), "sources"),
    (lambda m: m.translate([None]), "texts[0]"),
    (lambda m: m.translate([1]), "texts[0]"),
    (lambda m: m.translate(None), "texts"),
    (lambda m: m.translate(["a"], beam=2.5), "beam"),
    (lambda m: m.translate(["a"], n_best=True), "n_best"),
    (lambda m: list(m.translate_chunks(["a"], chunk=0)), "chunk"),  # not an empty result
    (lambda m: list(m.translate_chunks("a b")), "lines"),
    (lambda m: m.align(["a"], [None]), "targets[0]"),
    (lambda m: m.align(["a"], beam=0), "beam"),
    (lambda m: m.score(["a"], ["b"], batch_size=0), "batch_size"),
    (lambda m: nmt.load(None), "nmt.load"),
], ids=["align-str", "score-str", "translate-none-item", "translate-int-item",
        "translate-none", "beam-float", "n_best-bool", "chunk-zero", "chunks-str",
        "align-none-target", "align-beam-zero", "score-batch-zero", "load-none"])
def test_the_api_refuses_bad_arguments_with_one_line_naming_them(runs, call, named):
    model = nmt.load(runs["bahdanau"])
    with pytest.raises(nmt.core.errors.NMTError) as caught:
        call(model)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(named), message


def test_a_bad_line_of_a_stream_is_named_by_its_place_in_the_stream(runs):
    model = nmt.load(runs["bahdanau"])
    chunks = model.translate_chunks(["ein hund"] * 3 + [None], chunk=2)
    assert len(next(chunks)) == 2  # the first chunk is out before the bad line is read
    with pytest.raises(nmt.core.errors.NMTError, match=r"^lines\[3\]"):
        next(chunks)


def test_options_that_would_be_ignored_are_refused(runs, tmp_path, capsys):
    """A device torch cannot use, a method without alignments, sentences beside --input:
    each one line naming it, not a traceback or a silent choice; jsonl carries n_best on
    every line when asked, an empty one included."""
    with pytest.raises(nmt.core.errors.NMTError, match="^nmt.load: device 'tpu'"):
        nmt.load(runs["bahdanau"], device="tpu")
    model = nmt.load(runs["bahdanau"])
    with pytest.raises(nmt.core.errors.NMTError, match="^method 'bogus': use one of"):
        model.translate(["ein hund"], method="bogus")
    (tmp_path / "in.txt").write_text("a b\n")
    assert_user_error(run_cli(capsys, "translate", "--run", runs["bahdanau"], "-i",
                              tmp_path / "in.txt", "x y"), "not both")
    assert_user_error(run_cli(capsys, "translate", "--run", runs["bahdanau"], "--method",
                              "saliency", "x y"), "add --alignments")
    (tmp_path / "two.txt").write_text("\nthe dog .\n")
    code, out, err = run_cli(capsys, "translate", "--run", runs["bahdanau"], "-i",
                             tmp_path / "two.txt", "--format", "jsonl", "--n-best", "2")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(lines) == 2 and all("n_best" in line for line in lines), out


def test_a_sampler_out_of_range_or_of_another_type_is_a_one_line_error(runs):
    """Sampling's docstring: top-k (k > 0) or top-p (0 < p <= 1) at a temperature; a
    negative temperature, a p above 1 or a negative k is refused where it is built, not
    read as greedy or as no cut, and `translate(sampling="top-k:5")` names the class."""
    for bad, named in ((dict(top_k=-3), "top_k=-3"), (dict(top_k=2.5), "top_k=2.5"),
                       (dict(top_p=2.0), "top_p=2.0"), (dict(top_p=0.0), "top_p=0.0"),
                       (dict(temperature=-1.0), "temperature=-1.0"),
                       (dict(temperature=float("inf")), "temperature=inf"),
                       (dict(top_k=True), "top_k=True"), (dict(seed=1.5), "seed=1.5")):
        with pytest.raises(nmt.core.errors.NMTError, match=f"^Sampling {named}: expected"):
            Sampling(**bad)
    assert Sampling(top_k=0, top_p=1.0, temperature=0.0, seed=-2).temperature == 0.0
    assert Sampling(top_k=2, seed=2**70).seed == 2**70  # any whole number seeds a stream
    numpy = Sampling(top_k=np.int64(5), top_p=np.float32(0.9), seed=np.int32(3))  # accepted
    assert (numpy.top_k, numpy.seed) == (5, 3)
    model = nmt.load(runs["bahdanau"])
    with pytest.raises(nmt.core.errors.NMTError, match="^sampling: expected nmt.api.Sampling.*got str$"):
        model.translate(["ein hund"], sampling="top-k:5")
    with pytest.raises(nmt.core.errors.NMTError, match="temperature=-0.5"):
        Sampling.parse("top-k:5", temperature=-0.5)


def test_the_smallest_top_k_and_the_longest_source_kept_whole():
    """`--sampling top-k:1` is a valid sampler (K >= 1); clip_source keeps a source of
    MAX_SOURCE subwords whole and cuts a longer one to MAX_SOURCE, its EOS kept."""
    from nmt.core.tokens import EOS
    from nmt.decoding.api import Sampling
    from nmt.decoding.translate import MAX_SOURCE, clip_source

    assert Sampling.parse("top-k:1").top_k == 1
    whole = [5] * (MAX_SOURCE - 1) + [EOS]
    assert clip_source(whole) == whole
    cut = clip_source([5] * MAX_SOURCE + [EOS])
    assert len(cut) == MAX_SOURCE and cut[-1] == EOS and cut[:-1] == [5] * (MAX_SOURCE - 1)
    cli = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    assert f"longer than {MAX_SOURCE:,} subwords are cut" in cli  # the limit the page states
