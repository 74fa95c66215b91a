"""The indexing ops (TVM's index category with the gathers and scatters of its manipulate.py):
`take_slice.py` (take, strided_slice), `advanced.py` (advanced indexing and slice writes: index_tensor,
index_put, slice_scatter, dynamic_strided_slice), `gather_scatter.py` (gather_elements / gather_nd,
scatter_elements / scatter_nd). `ops/__init__.py` imports each module (importing one registers its ops)."""
