"""Runnable examples: `python -m retrograd.examples.NAME` (digits: a small CNN on the 8x8 handwritten digits)."""
