"""Data: corpora, subwords, batching and word links, before any model exists.

corpora     corpus registry, hub download, local import, NFC normalisation, manifests,
            a corpus's gold file, `source ||| target` pair files
synth       the synthetic corpus with gold word alignments (synth_words: its lexicon)
subwords    SentencePiece training (cached, locked) and encoded splits
batching    padding and length-bucketed token batches
links       word links: Pharaoh lines and gold alignment files
symmetrize  the symmetrisation heuristics of two directions' links (`HEURISTICS`)

May import nmt.core only.
"""
