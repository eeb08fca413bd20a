"""`nmt explore`: an interactive, self-contained HTML page of alignment matrices.

sources   record sets (npz files of runs and `nmt align` folders) and gold links
payload   word-level matrices per sentence, panel and view, quantised; per-sentence AER
page      the HTML page (explorer.css, explorer.js and the data inline)
"""

from nmt.explore.page import Explorer, build_explorer

__all__ = ["Explorer", "build_explorer"]
