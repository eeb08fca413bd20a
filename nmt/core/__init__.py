"""The common base every stage builds on; it imports nothing else of `nmt`.

errors      the one-line `NMTError`
tokens      special ids and pieces (PAD, UNK, BOS, EOS)
config      the typed config sections, YAML in and out, each field's own limits
checkpoint  atomic writes and safe checkpoint loading
rundir      the run directory layout (paths, scores, metrics)
locks       file locks; progress: terminal bars and plain log lines
document    markdown/HTML blocks for reports; plotting: heatmaps and curves (matplotlib)
"""
