"""Word alignments from trained models.

extract   matrices from a model (teacher-forced attention)
io        gold files, Pharaoh links, the npz export of records
words     piece -> word reduction, readings of multi-layer attention, hard links
metrics   AER, the diagonal baseline, entropy, EOS mass
export    what `nmt align` does: align, save, plot, summarise
"""
