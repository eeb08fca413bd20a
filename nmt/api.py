"""`nmt.api` is `nmt.decoding.api` (a trained run as a Python object and its result types); this name stays for code that imports it."""

import sys

from nmt.decoding import api

sys.modules[__name__] = api
