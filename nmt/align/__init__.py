"""Alignment: word alignments read out of trained models, and how good they are.

extract        matrices from a model (teacher-forced attention), by method (`METHODS`)
names          the methods' names, light enough for the CLI to list without torch
attribution    gradient saliency, the method for models without attention
records, io    one pair's alignment record; records in npz and Pharaoh files, their gold
words          piece -> word reduction, readings of multi-layer attention, hard links
metrics        AER, the diagonal baseline, entropy, EOS mass
bidirectional  both directions of a pair of runs, symmetrised
statistical    eflomal beside the models (and the teacher of guided training)
guided         how a guided run is read

May import nmt.core, nmt.data and nmt.models.
"""
