"""The relax.nn ops (TVM's nn category), one module per family: activations, convolutions, pooling,
normalization, attention, losses, padding; `shape.py` holds the sliding-window and layout arithmetic
they share. `ops/__init__.py` imports each module (importing one registers its ops)."""
