"""`nmt lab`: the attention essays' worked examples as runnable, checked experiments.

Each experiment computes its numbers with the project's own attention code
(`nmt.models.attention`, `nmt.models.transformer`) wherever the claim is about
it, draws one figure, and checks the property it demonstrates. The registry
lives in `nmt.lab.registry`; this package root stays import-light (no torch) so
the command line can list experiment names cheaply.
"""
