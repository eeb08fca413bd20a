"""What `nmt compare` and `nmt align` write: tables, heatmaps, markdown and HTML reports.

compare  `nmt compare`: runs side by side (scores, AER, entropy, one panel per model)
align    `nmt align`: alignments of given pairs from runs, saved, plotted and scored

A presentation layer: may import everything below it, never the CLI.
"""
