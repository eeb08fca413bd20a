"""Deterministic synthetic parallel corpus with gold word alignments.

An English-like source grammar is translated by fixed rules into an invented
verb-final target language, so attention alignments can be checked against a
known truth. Target rules, for a source clause ``S [freq] V [O] [PP*] [adv]``:

* clause order is ``S ga [freq] [NP post]* [O o] [adv] V``: SOV, postpositions;
  ``ga``/``o`` are case markers with no source link;
* inside a noun phrase modifiers come first (``of``-phrases, relative clauses),
  then determiner, noun, plural marker ``ra``, adjectives in mirror order
  (each followed by its intensifier), numeral; ``the``/``a``/``an`` are dropped;
* a plural noun and a past verb become two target words (one-to-many);
  ``will see``, ``does not`` and ``in front of`` become one (many-to-one);
* a subordinate clause (``A because B``) is moved before its main clause.

Every source word has one fixed translation and every rule depends only on the
surface string, so a small seq2seq model can learn the mapping.
"""

from __future__ import annotations

import pathlib
import random
from dataclasses import dataclass

from nmt.data.synth_words import (
    ADJECTIVES,
    ANIMATE,
    COORDINATORS,
    DROPPED_DETS,
    FREQUENCY,
    FUNCTION_WORDS,
    INTENSIFIERS,
    INTRANSITIVE,
    IRREGULAR_PAST,
    IRREGULAR_PLURAL,
    MANNER,
    NUMERALS,
    PL_DETS,
    PREPOSITIONS,
    PRONOUNS,
    SG_DETS,
    SUBORDINATORS,
    THINGS,
    TRANSITIVE,
)

SOURCE_LANG = "src"
TARGET_LANG = "tgt"
DEFAULT_SIZES: dict[str, int] = {"train": 12000, "val": 500, "test": 500}
MAX_SRC_LEN = 60

# Target-only particles and fixed function morphemes.
SUBJ, OBJ, LINK, PLURAL, PAST, NEG, REL, FUTURE = "ga", "o", "no", "ra", "ta", "nai", "ke", "ze"
PARTICLES = (SUBJ, OBJ, LINK, PLURAL, PAST, NEG, REL)

Frag = list[tuple[str, tuple[int, ...]]]


@dataclass(frozen=True)
class SynthPair:
    """One sentence pair with gold links ``(source index, target index)``."""

    src: list[str]
    tgt: list[str]
    links: list[tuple[int, int]]


def _add_s(word: str) -> str:
    """English -s suffix (noun plural, verb third person singular)."""
    if word.endswith(("s", "sh", "ch", "x", "o")):
        return word + "es"
    if word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def _plural(noun: str) -> str:
    """English plural of a noun."""
    return IRREGULAR_PLURAL.get(noun) or _add_s(noun)


def _past(verb: str) -> str:
    """English simple past of a verb."""
    if verb in IRREGULAR_PAST:
        return IRREGULAR_PAST[verb]
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ied"
    return verb + "ed"


def _lexicon_keys() -> list[tuple[str, str]]:
    """Every concept that has its own invented target word, in a fixed order."""
    keys = [("n", w) for w in ANIMATE + THINGS] + [("v", w) for w in TRANSITIVE + INTRANSITIVE]
    keys += [("adj", w) for w in ADJECTIVES] + [("adv", w) for w in MANNER + FREQUENCY]
    keys += [("int", w) for w in INTENSIFIERS] + [("prep", w) for w in PREPOSITIONS]
    keys += [("num", w) for w in NUMERALS] + [("pro", p[0]) for p in PRONOUNS]
    dets = [d for d in dict.fromkeys(SG_DETS + PL_DETS) if d not in DROPPED_DETS]
    keys += [("det", w) for w in dets] + [("conj", w) for w in COORDINATORS + SUBORDINATORS]
    return keys


def _make_lexicon() -> dict[tuple[str, str], str]:
    """Invent one unique CV-syllable target word per concept (fixed seed)."""
    rng = random.Random("nmt.data.synth.lexicon.v1")
    onsets, vowels = "kstnhmrbdgpzyw", "aeiou"
    used, lexicon = set(PARTICLES), {}
    for key in _lexicon_keys():
        while True:
            n_syll = rng.choice((2, 2, 2, 3))
            word = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(n_syll))
            word += "n" if rng.random() < 0.2 else ""
            if word not in used and not word.endswith(FUTURE):
                break
        used.add(word)
        lexicon[key] = word
    return lexicon


LEXICON = _make_lexicon()


class _Builder:
    """Collects source tokens in order; target fragments point at their indices."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.src: list[str] = []

    def add(self, words: str) -> tuple[int, ...]:
        """Append space-separated source words; return their indices."""
        start = len(self.src)
        self.src.extend(words.split())
        return tuple(range(start, len(self.src)))

    def chance(self, p: float) -> bool:
        """True with probability p."""
        return self.rng.random() < p

    def pick(self, weights: tuple[int, ...]) -> int:
        """Index drawn with the given integer weights."""
        return self.rng.choices(range(len(weights)), weights=weights)[0]


def _adjectives(b: _Builder) -> list[tuple[str | None, str]]:
    """Choose 0-2 distinct adjectives, each with an optional intensifier."""
    chosen = b.rng.sample(ADJECTIVES, b.pick((62, 27, 11)))
    return [(b.rng.choice(INTENSIFIERS) if b.chance(0.2) else None, a) for a in chosen]


def _determiner(b: _Builder, plural: bool, first_word: str) -> tuple[str | None, bool]:
    """Choose a determiner (or numeral) for a noun phrase; returns (word, is_numeral)."""
    if plural:
        kind = b.pick((2, 2, 6))
        if kind == 0:
            return b.rng.choice(NUMERALS), True
        return (None if kind == 1 else b.rng.choice(PL_DETS)), False
    det = b.rng.choice(SG_DETS + ["the", "the", "a", "a"])
    if det == "a" and first_word[0] in "aeiou":
        det = "an"
    return det, False


def _noun_phrase(b: _Builder, animate: bool, depth: int, rc: bool, loc: bool) -> tuple[Frag, bool]:
    """Emit a noun phrase; return its target fragment (modifiers first) and plurality."""
    noun = b.rng.choice(ANIMATE if animate else THINGS)
    plural = b.chance(0.3)
    adjs = _adjectives(b)
    det, numeral = _determiner(b, plural, (adjs[0][0] or adjs[0][1]) if adjs else noun)
    det_ids = b.add(det) if det else ()
    adj_frags: list[Frag] = []
    for intens, adj in adjs:
        int_ids = b.add(intens) if intens else ()
        frag = [(LEXICON["adj", adj], b.add(adj))]
        adj_frags.append(frag + ([(LEXICON["int", intens], int_ids)] if intens else []))
    noun_ids = b.add(_plural(noun) if plural else noun)
    head: Frag = [(LEXICON["n", noun], noun_ids)] + ([(PLURAL, noun_ids)] if plural else [])
    for frag in reversed(adj_frags):
        head += frag
    if det and numeral:
        head.append((LEXICON["num", det], det_ids))
    elif det and det not in DROPPED_DETS:
        head.insert(0, (LEXICON["det", det], det_ids))
    return _np_modifier(b, animate, plural, depth, rc, loc) + head, plural


def _np_modifier(b: _Builder, animate: bool, plural: bool, depth: int, rc: bool, loc: bool) -> Frag:
    """Emit an optional post-nominal modifier (of-phrase, locative PP, relative clause)."""
    kind = b.pick((70, 14 if depth < 2 else 0, 8 if loc and depth == 0 else 0, 12 if rc else 0))
    if kind == 1:
        of_ids = b.add("of")
        return _noun_phrase(b, b.chance(0.4), depth + 1, False, False)[0] + [(LINK, of_ids)]
    if kind == 2:
        prep = b.rng.choice(PREPOSITIONS)
        prep_ids = b.add(prep)
        inner, _ = _noun_phrase(b, False, depth + 1, False, False)
        return inner + [(LEXICON["prep", prep], prep_ids), (LINK, ())]
    if kind == 3:
        return _relative_clause(b, animate, not plural)
    return []


def _relative_clause(b: _Builder, animate: bool, head_third: bool) -> Frag:
    """Emit 'who/which ...' (subject or object gap); target: clause, then 'ke'."""
    rel_ids = b.add("who" if animate else "which")
    if b.chance(0.6):  # subject gap: who sees the cat
        verb = b.rng.choice(TRANSITIVE + INTRANSITIVE)
        _, verb_frag = _verb_group(b, verb, head_third, False)
        obj = _object(b, depth=1) if verb in TRANSITIVE else []
        return obj + verb_frag + [(REL, rel_ids)]
    subj, third = _subject(b, depth=1)  # object gap: which the dog sees
    _, verb_frag = _verb_group(b, b.rng.choice(TRANSITIVE), third, False)
    return subj + verb_frag + [(REL, rel_ids)]


def _subject(b: _Builder, depth: int) -> tuple[Frag, bool]:
    """Emit a subject (pronoun or animate noun phrase) with its case marker."""
    if b.chance(0.25):
        subj, _, third = b.rng.choice(PRONOUNS)
        return [(LEXICON["pro", subj], b.add(subj)), (SUBJ, ())], third
    frag, plural = _noun_phrase(b, True, depth, depth == 0, depth == 0)
    return frag + [(SUBJ, ())], not plural


def _object(b: _Builder, depth: int) -> Frag:
    """Emit a direct object (pronoun or noun phrase) with its case marker."""
    if b.chance(0.15):
        subj, obj, _ = b.rng.choice(PRONOUNS)
        return [(LEXICON["pro", subj], b.add(obj)), (OBJ, ())]
    return _noun_phrase(b, b.chance(0.4), depth, depth == 0, False)[0] + [(OBJ, ())]


def _verb_group(b: _Builder, verb: str, third: bool, main: bool) -> tuple[Frag, Frag]:
    """Emit tense/negation/frequency + verb; return (frequency fragment, verb fragment)."""
    tense, neg = b.pick((5, 4, 3)), b.chance(0.2)
    freq = b.rng.choice(FREQUENCY) if main and not neg and b.chance(0.15) else None
    stem = LEXICON["v", verb]
    freq_frag: Frag = []
    if tense == 2:  # future: will [not|freq] see -> stem+ze [nai]
        will = b.add("will")
        not_ids = b.add("not") if neg else ()
        freq_frag = [(LEXICON["adv", freq], b.add(freq))] if freq else []
        verb_frag = [(stem + FUTURE, will + b.add(verb))] + ([(NEG, not_ids)] if neg else [])
        return freq_frag, verb_frag
    if neg:  # does/did not see -> stem nai [ta]
        aux = b.add(("does" if third else "do") if tense == 0 else "did")
        not_ids = b.add("not")
        verb_ids = b.add(verb)
        if tense == 0:
            return [], [(stem, verb_ids), (NEG, aux + not_ids)]
        return [], [(stem, verb_ids), (NEG, not_ids), (PAST, aux)]
    freq_frag = [(LEXICON["adv", freq], b.add(freq))] if freq else []
    if tense == 0:
        return freq_frag, [(stem, b.add(_add_s(verb) if third else verb))]
    verb_ids = b.add(_past(verb))
    return freq_frag, [(stem, verb_ids), (PAST, verb_ids)]


def _clause(b: _Builder) -> Frag:
    """Emit 'S [freq] V [O] [PP*] [adv]'; return 'S ga [freq] [NP post]* [O o] [adv] V'."""
    subj, third = _subject(b, depth=0)
    verb = b.rng.choice(TRANSITIVE if b.chance(0.6) else INTRANSITIVE)
    freq_frag, verb_frag = _verb_group(b, verb, third, True)
    obj = _object(b, depth=0) if verb in TRANSITIVE else []
    pps: Frag = []
    for _ in range(b.pick((50, 30, 14, 6))):
        prep = b.rng.choice(PREPOSITIONS)
        prep_ids = b.add(prep)
        pps += _noun_phrase(b, False, 0, False, False)[0] + [(LEXICON["prep", prep], prep_ids)]
    manner: Frag = []
    if b.chance(0.3):
        intens = b.rng.choice(INTENSIFIERS) if b.chance(0.2) else None
        int_ids = b.add(intens) if intens else ()
        adv = b.rng.choice(MANNER)
        manner = [(LEXICON["adv", adv], b.add(adv))]
        manner += [(LEXICON["int", intens], int_ids)] if intens else []
    return subj + freq_frag + pps + obj + manner + verb_frag


def _sentence(b: _Builder) -> Frag:
    """Emit 1-4 clauses joined by conjunctions and a final period."""
    pieces = [_clause(b)]
    just_subordinated = False
    for _ in range(b.pick((55, 28, 12, 5))):
        subordinate = not just_subordinated and b.chance(0.35)
        conj = b.rng.choice(SUBORDINATORS if subordinate else COORDINATORS)
        conj_ids = b.add(conj)
        clause = _clause(b)
        if subordinate:  # A because B -> B kara A
            pieces[-1] = clause + [(LEXICON["conj", conj], conj_ids)] + pieces[-1]
        else:
            pieces += [[(LEXICON["conj", conj], conj_ids)], clause]
        just_subordinated = subordinate
    frag = [item for piece in pieces for item in piece]
    return frag + [(".", b.add("."))]


def generate_pair(rng: random.Random) -> SynthPair:
    """Generate one sentence pair (at most MAX_SRC_LEN source tokens) from rng."""
    while True:
        b = _Builder(rng)
        frag = _sentence(b)
        if len(b.src) <= MAX_SRC_LEN:
            break
    links = sorted((i, j) for j, (_, ids) in enumerate(frag) for i in ids)
    return SynthPair(src=b.src, tgt=[word for word, _ in frag], links=links)


def generate_split(rng: random.Random, n: int) -> list[SynthPair]:
    """Generate n sentence pairs from rng."""
    return [generate_pair(rng) for _ in range(n)]


def generate_corpus(seed: int = 1234, sizes: dict[str, int] | None = None) -> dict[str, list[SynthPair]]:
    """Generate every split from its own seeded stream; non-train splits avoid train sources."""
    sizes = dict(DEFAULT_SIZES if sizes is None else sizes)
    corpus: dict[str, list[SynthPair]] = {}
    if "train" in sizes:
        corpus["train"] = generate_split(random.Random(f"{seed}:train"), sizes["train"])
    seen = {tuple(p.src) for p in corpus.get("train", [])}
    for split, n in sizes.items():
        if split == "train":
            continue
        rng, pairs = random.Random(f"{seed}:{split}"), []
        for _ in range(100 * n + 1000):
            if len(pairs) >= n:
                break
            pair = generate_pair(rng)
            if tuple(pair.src) not in seen:
                pairs.append(pair)
        corpus[split] = pairs
    return {split: corpus[split] for split in sizes}


def format_links(links: list[tuple[int, int]]) -> str:
    """Pharaoh format: 'i-j' pairs (source-target), space-separated."""
    return " ".join(f"{i}-{j}" for i, j in links)


def write_synth(out_dir: pathlib.Path, seed: int = 1234, sizes: dict[str, int] | None = None) -> dict[str, int]:
    """Write {split}.src/.tgt/.gold into out_dir; return split -> number of pairs."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split, pairs in generate_corpus(seed, sizes).items():
        columns = {
            SOURCE_LANG: [" ".join(p.src) for p in pairs],
            TARGET_LANG: [" ".join(p.tgt) for p in pairs],
            "gold": [format_links(p.links) for p in pairs],
        }
        for suffix, lines in columns.items():
            text = "".join(line + "\n" for line in lines)
            (out_dir / f"{split}.{suffix}").write_text(text, encoding="utf-8")
        counts[split] = len(pairs)
    return counts


def vocabulary_sizes() -> dict[str, int]:
    """Number of distinct tokens the grammar can produce on each side."""
    src = set(ANIMATE + THINGS + ADJECTIVES + MANNER + FREQUENCY + INTENSIFIERS + NUMERALS)
    src |= {_plural(n) for n in ANIMATE + THINGS} | set(SG_DETS + PL_DETS + ["an"])
    for verb in TRANSITIVE + INTRANSITIVE:
        src |= {verb, _add_s(verb), _past(verb)}
    src |= {w for p in PREPOSITIONS for w in p.split()} | {w for p in PRONOUNS for w in p[:2]}
    src |= set(COORDINATORS + SUBORDINATORS + list(FUNCTION_WORDS))
    tgt = set(LEXICON.values()) | set(PARTICLES) | {"."}
    tgt |= {LEXICON["v", v] + FUTURE for v in TRANSITIVE + INTRANSITIVE}
    return {SOURCE_LANG: len(src), TARGET_LANG: len(tgt)}
