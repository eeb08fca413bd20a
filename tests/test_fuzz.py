"""Generated inputs at every boundary a user controls. Schemathesis sends requests built
from `nmt serve`'s own OpenAPI schema (no 5xx, every answer valid against the schema);
Hypothesis drives the Python API and the text paths (normalisation, SentencePiece round
trips, word/piece mapping, Pharaoh links, symmetrisation): each input gives a correct
result or a clean NMTError, never another exception.

Budgets: the Hypothesis profile "suite" (a few examples, in `make test`) or "fuzz"
(`make fuzz`: 400 examples per property and per endpoint and mode, over 2,000 requests)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

import nmt
from nmt.align.words import join_pieces, pieces_to_words
from nmt.core.errors import NMTError
from nmt.data.corpora import normalise
from nmt.data.links import format_pharaoh, parse_pharaoh
from nmt.data.symmetrize import HEURISTICS, symmetrize
from tests.test_serve import runs  # noqa: F401  (the tiny runs the server serves)

schemathesis = pytest.importorskip("schemathesis")

TEXT = st.text(st.characters(codec="utf-8"), max_size=60)  # any Unicode a user can type
WORDS = st.lists(st.sampled_from(["a", "b", "ka", "lo", "x", "."]), max_size=12).map(" ".join)


# ------------------------------------------------------------------------------ the server


@pytest.fixture(scope="module")
def app(runs):  # noqa: F811
    from nmt.serve import runs as served_runs
    from nmt.serve.app import create_app

    return create_app(served_runs.load_runs([runs["bahdanau"], runs["transformer"]]))


def test_the_server_answers_every_generated_request_within_its_schema(app):
    """For each operation of the schema, the profile's number of generated requests, valid
    and invalid (Schemathesis's positive and negative modes): no
    5xx, each status, content type and body as the schema says. Every check runs but "a
    schema-valid request is accepted": n_best <= beam, and a symmetrised view needs
    --reverse runs, are rules across fields the schema cannot state; their 422 is the
    documented answer."""
    from schemathesis.specs.openapi.checks import positive_data_acceptance

    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    sent = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in schemathesis.GenerationMode:  # schema-valid requests, then invalid ones

            @given(case=operation.as_strategy(mode))
            @settings(suppress_health_check=list(HealthCheck))
            def check(case):
                sent[operation.label] = sent.get(operation.label, 0) + 1
                case.call_and_validate(excluded_checks=[positive_data_acceptance])

            try:
                check()
            except Unsatisfiable:  # no parameters: nothing there to make invalid
                assert mode == schemathesis.GenerationMode.NEGATIVE
    assert set(sent) == {"GET /healthz", "GET /api/runs", "GET /api/runs/{run}",
                         "POST /api/translate", "POST /api/align"}
    print("schemathesis requests:", sum(sent.values()), sent)


# ------------------------------------------------------------------------------ the Python API


@pytest.fixture(scope="module")
def model(runs):  # noqa: F811
    return nmt.load(runs["transformer"])


@given(texts=st.one_of(TEXT, st.lists(TEXT, max_size=3), st.lists(st.one_of(
    st.none(), st.integers(), TEXT), max_size=3)), beam=st.one_of(
    st.none(), st.integers(-2, 20), st.floats(allow_nan=True)))
@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_translate_gives_one_answer_per_sentence_or_a_clean_error(model, texts, beam):
    try:
        out = model.translate(texts, beam=beam)
    except NMTError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    n = 1 if isinstance(texts, str) else len(texts)
    assert isinstance(out, list) and len(out) == n
    assert all(t.hypotheses and isinstance(t.hypotheses[0].text, str) for t in out)


@given(sources=st.lists(TEXT, min_size=1, max_size=3), targets=st.lists(TEXT, max_size=3))
@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_align_and_score_answer_per_pair_or_give_a_clean_error(model, sources, targets):
    for call in (lambda: model.align(sources, targets), lambda: model.score(sources, targets)):
        try:
            out = call()
        except NMTError as exc:
            assert str(exc) and "\n" not in str(exc)
            continue
        assert len(out) == len(sources) == len(targets)


@given(text=TEXT)
@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_sentencepiece_round_trips_the_text_its_pieces_cover(model, text):
    """Decoding the encoded source gives the normalised text back wherever every character
    is in the vocabulary (else the unknown piece stands in: not a round trip)."""
    vocab = model.vocab
    ids = vocab.src.encode(normalise(text))
    if vocab.src.unk_id() in ids:
        return
    expected = vocab.src.normalize(normalise(text)).replace("\u2581", " ")
    assert vocab.src.decode(ids) == " ".join(expected.split())


# ------------------------------------------------------------------------------ text paths


@given(text=TEXT)
def test_normalise_is_idempotent_and_leaves_no_runs_of_whitespace(text):
    once = normalise(text)
    assert normalise(once) == once and "  " not in once and once == once.strip()


@given(pieces=st.lists(st.sampled_from(["▁", "▁a", "▁bc", "d", "e", "▁▁", "f▁"]), max_size=12))
def test_pieces_map_to_words_in_order_and_join_back(pieces):
    word_of = pieces_to_words(pieces)
    assert len(word_of) == len(pieces)
    if pieces:
        assert word_of[0] == 0
        assert all(b - a in (0, 1) for a, b in zip(word_of, word_of[1:]))
        assert len(join_pieces(pieces, word_of)) == word_of[-1] + 1


@given(links=st.sets(st.tuples(st.integers(0, 300), st.integers(0, 300)), max_size=30))
def test_pharaoh_links_round_trip(links):
    assert parse_pharaoh(format_pharaoh(links)) == links


@given(line=TEXT)
def test_any_pharaoh_line_is_links_or_a_clean_error(line):
    try:
        links = parse_pharaoh(line)
    except NMTError as exc:
        assert "Pharaoh" in str(exc)
        return
    assert all(isinstance(i, int) and isinstance(j, int) and i >= 0 and j >= 0
               for i, j in links)


@st.composite
def directions(draw):
    s, t = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    cell = st.tuples(st.integers(0, s - 1), st.integers(0, t - 1))
    return s, t, draw(st.sets(cell, max_size=20)), draw(st.sets(cell, max_size=20))


@given(case=directions(), heuristic=st.sampled_from(sorted(HEURISTICS)))
def test_symmetrised_links_lie_between_intersection_and_union(case, heuristic):
    s, t, forward, backward = case
    links = symmetrize(forward, backward, s, t, heuristic)
    assert forward & backward <= links <= forward | backward


@given(case=directions(), extra=st.tuples(st.integers(-3, 12), st.integers(-3, 12)))
def test_a_link_outside_the_pair_is_a_clean_error(case, extra):
    s, t, forward, backward = case
    if 0 <= extra[0] < s and 0 <= extra[1] < t:
        return
    with pytest.raises(NMTError, match="outside"):
        symmetrize(forward | {extra}, backward, s, t)
