"""The relax.image ops (TVM's image category): `resize.py` (resize2d, resize3d) and `sampling.py`
(affine_grid, grid_sample and grid_sample's backward). `ops/__init__.py` imports each module."""
