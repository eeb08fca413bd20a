"""`nmt.translate` is `nmt.decoding.translate` (batched decoding to text); this name stays for code that imports it."""

import sys

from nmt.decoding import translate

sys.modules[__name__] = translate
