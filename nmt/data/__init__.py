"""Data: corpora, subwords, batching and word links, before any model exists.

corpora     reading and finding an imported corpus, NFC normalisation, the synthetic
            corpus's folder, a corpus's gold file, `source ||| target` pair files
sources     where an import's pairs come from: files, a folder, a TSV, Hugging Face;
            `PRESETS` (named imports such as multi30k)
pipeline    the import: normalise, counted filters, drawn splits, the manifest
folder      the corpus folder: safe names, written whole or not at all, manifest.json
synth       the synthetic corpus with gold word alignments (synth_words: its lexicon)
subwords    SentencePiece training (cached, locked) and encoded splits
batching    padding and length-bucketed token batches
links       word links: Pharaoh lines and gold alignment files
symmetrize  the symmetrisation heuristics of two directions' links (`HEURISTICS`)

May import nmt.core only.
"""
