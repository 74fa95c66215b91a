"""Vectorized NumPy kernels for the heavy ops (pooling, convolution, losses, indexing, activations)."""
