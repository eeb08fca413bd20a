"""nmt: train the classic attention lineage of neural machine translation and see it align."""

__version__ = "0.1.0"
