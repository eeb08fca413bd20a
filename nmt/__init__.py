"""nmt: train the classic attention lineage of neural machine translation and see it align.

`nmt.load("runs/bahdanau")` gives a trained run as a Python object (nmt.decoding.api, docs/api.md);
`nmt.NMTError` is the one error type raised for bad input (nmt.core.errors).
"""

from nmt.core.errors import NMTError  # imports nothing else: `import nmt` stays light

__version__ = "0.1.0"
__all__ = ["NMTError", "__version__", "load"]


def load(*runs, checkpoint: str = "best", device: str | None = None, engine: str = "pytorch",
         quantize: str | None = None):
    """A trained run (or an ensemble of runs) as an `nmt.decoding.api.Model`; see `nmt.decoding.api.load`."""
    from nmt.decoding.api import (
        load as _load,  # start-up: `import nmt` (and `nmt --help`) stay light
    )

    return _load(*runs, checkpoint=checkpoint, device=device, engine=engine, quantize=quantize)
