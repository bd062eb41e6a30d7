"""projkit: shared training utilities for the tabular / vision / text experiments."""
__version__ = "0.4.2"
