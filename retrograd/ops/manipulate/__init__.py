"""The manipulate ops (TVM's manipulate category, less the gathers and scatters in ops/index/):
`shape.py` (reshape, permute_dims, expand_dims, squeeze, flatten, concat, split, broadcast_to,
collapse_sum), `replicate.py` (stack, tile, repeat, flip, reverse_sequence),
`layout.py` (layout_transform) with `index_map.py` (its IndexMap attribute, as the parser reads and the
printer writes it). `ops/__init__.py` imports each module (importing one registers its ops)."""
