"""The JSON API's request and response models of `nmt serve` (pydantic): strict types,
no unknown fields, each limit in its field, so a bad request is a 422 naming the field."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from nmt.align.extract import DEFAULT_METHOD, METHODS
from nmt.data.sources import BOM
from nmt.data.symmetrize import SYMMETRIZATIONS
from nmt.serve.runs import MAX_BEAM, MAX_CHARS, MAX_PIECES, MAX_WORDS

SYMMETRIZE = SYMMETRIZATIONS


# ------------------------------------------------------------------------------ requests

SOURCE_HELP = (f"a sentence in the runs' source language: at most {MAX_WORDS} words, "
               f"{MAX_CHARS:,} characters and {MAX_PIECES} subword pieces (longer: 413)")
RunRef = Annotated[int | str, Field(description="a run's index or name (GET /api/runs)")]


def encodable(text: str) -> str:
    """`text` if it can be written as UTF-8 (a lone surrogate such as "\\ud800" cannot);
    else a ValueError, which pydantic answers with 422 naming the field."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"not valid Unicode text (character {exc.start} is a lone "
                         "surrogate); send UTF-8") from None
    return text


def blank(text: str) -> bool:
    """Whether `text` holds nothing a run would read: spaces and byte-order marks only."""
    return not text.replace(BOM, " ").strip()


class SentenceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    source: str = Field(description=SOURCE_HELP, examples=["a sentence"])
    runs: list[RunRef] | None = Field(
        None, description="runs to ask, by index or name; null: every run", max_length=64)

    @field_validator("source")
    @classmethod
    def _not_empty(cls, text: str) -> str:
        text = encodable(text).strip()
        if blank(text):
            raise ValueError("empty; type a sentence")
        return text


class TranslateRequest(SentenceRequest):
    beam: int | None = Field(None, ge=1, le=MAX_BEAM,
                             description="beam size (1: greedy); null: each run's decode.beam")
    n_best: int = Field(1, ge=1, le=MAX_BEAM, description="hypotheses per run, at most beam")

    @field_validator("n_best")
    @classmethod
    def _within_beam(cls, n: int, info) -> int:
        beam = info.data.get("beam")
        if beam is not None and n > beam:
            raise ValueError(f"{n} is larger than beam {beam}; a beam of k keeps k hypotheses")
        return n


class AlignRequest(SentenceRequest):
    target: str | None = Field(
        None, description="forced mode: every run aligned on these target words (same limits "
                          "as source); null: free mode, each run on its own translation")
    method: Literal[tuple(METHODS)] = Field(DEFAULT_METHOD, description="attention | saliency "
                                     "(gradient x input; also for fixed_context)")
    beam: int | None = Field(None, ge=1, le=MAX_BEAM,
                             description="free mode: the beam of the translation aligned")
    n_best: int = Field(1, ge=1, le=MAX_BEAM, description="free mode, beam null: the n-best "
                        "/api/translate was asked, which widens each run's beam as it did")
    symmetrize: Literal[SYMMETRIZE] | None = Field(
        None, description="with --reverse runs: also the reverse run's alignment and the "
                          "two symmetrised by this heuristic (agreement: nmt align's default)")
    views: bool = Field(False, description="add `explorer`: the page's data (every "
                        "Transformer layer x head x reading, quantised)")

    @field_validator("target")
    @classmethod
    def _target(cls, text: str | None) -> str | None:
        if text is not None and blank(encodable(text)):
            raise ValueError("empty; send null for free mode (each run's own translation)")
        return None if text is None else text.strip()


# ------------------------------------------------------------------------------ responses

Pair = tuple[int, int]


class Hypothesis(BaseModel):
    text: str
    score: float
    links: list[Pair] | None = Field(description="word links (source, target), 0-based")


class RunTranslation(BaseModel):
    run: int
    name: str
    family: str
    beam: int
    text: str
    score: float = Field(description="the search's length-normalised log-probability "
                                     "(greedy search: 0)")
    links: list[Pair] | None
    links_method: str = Field(description="attention, or saliency for a family without it")
    n_best: list[Hypothesis]


class TranslateResponse(BaseModel):
    source: str
    runs: list[RunTranslation]


class Matrix(BaseModel):
    src_words: list[str]
    tgt_words: list[str]
    matrix: list[list[float]] = Field(description="target words x source words")
    links: list[Pair] | None
    layers: int = Field(description="decoder layers of the raw weights (1: a single map)")
    heads: int


class ReverseMatrix(Matrix):
    name: str | None


class RunAlignment(BaseModel):
    run: int
    name: str
    family: str
    method: str
    note: str | None = Field(None, description="why there is no matrix (no attention, ...)")
    target_logprob: float | None = Field(None, description="forced mode: log p(target | "
                                         "source), natural log")
    src_words: list[str] | None = None
    tgt_words: list[str] | None = None
    matrix: list[list[float]] | None = None
    links: list[Pair] | None = None
    layers: int | None = None
    heads: int | None = None
    reverse: ReverseMatrix | None = None
    symmetrized: Matrix | None = None
    reverse_note: str | None = None


class AlignResponse(BaseModel):
    source: str
    target: str | None
    mode: Literal["forced", "free"]
    method: str
    symmetrize: str | None
    runs: list[RunAlignment]
    explorer: dict | None = Field(None, description="with views: the page's data")


class RunInfo(BaseModel):
    index: int
    name: str
    family: str
    pair: str
    corpus: str
    parameters: int
    attention: bool
    beam: int
    decoder_layers: int
    heads: int | None
    reverse: str | None


class RunsResponse(BaseModel):
    runs: list[RunInfo]
    limits: dict
