"""The names of the alignment methods, light enough for the command line to list without
torch; `nmt.align.extract.METHODS` maps each name to its function (the lab's pattern:
nmt.lab.names beside nmt.lab.registry)."""

ATTENTION = "attention"  # the model's own attention weights, teacher-forced
SALIENCY = "saliency"  # grad x input attribution (nmt.align.attribution): every family
METHOD_NAMES = (ATTENTION, SALIENCY)
