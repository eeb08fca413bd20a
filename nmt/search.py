"""`nmt.search` is `nmt.decoding.search` (greedy, beam search and sampling); this name stays for code that imports it."""

import sys

from nmt.decoding import search

sys.modules[__name__] = search
