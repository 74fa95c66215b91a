"""Shared by the lowering tests: random arrays for a function's parameters (from their struct info alone), a
checkpointed function, loading lowered source as a module, and comparing its results bit for bit."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from retrograd.ir.struct_info import PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo


def make_inputs(func, rng, size=3):
    """One value per parameter; every symbolic dim (and every unknown one) gets `size`."""
    dims: dict = {}

    def dim(d):
        if isinstance(d, int):
            return d
        return dims.setdefault(d, size) if isinstance(d, str) and d.isidentifier() else None

    def make(s):
        if isinstance(s, TupleStructInfo):
            return tuple(make(f) for f in s.fields)
        if isinstance(s, ShapeStructInfo):
            n = s.ndim if s.ndim is not None and s.ndim >= 0 else 2
            vals = s.values if s.values is not None else [size] * n
            return tuple(dim(d) or size for d in vals)
        if isinstance(s, PrimStructInfo):
            return 2 if str(s.dtype).startswith(("int", "uint")) else 0.5
        if not isinstance(s, TensorStructInfo):
            return None
        if s.shape is not None:
            shape = [dim(d) for d in s.shape]
            if any(d is None for d in shape):
                return None
        else:
            shape = [size] * (s.ndim if s.ndim is not None and s.ndim >= 0 else 2)
        dtype = s.dtype or "float32"
        if dtype == "bool":
            return rng.random(shape) < 0.5
        if dtype.startswith(("int", "uint")):
            return rng.integers(0, 2, size=shape).astype(dtype)
        return (rng.standard_normal(shape) + 0.1).astype(dtype)

    return [make(p.struct_info) for p in func.params]


# A function with a checkpointed segment (start/end markers), drawn and lowered with its adjoint.
CHECKPOINTED = """
@R.function
def main(x: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
    with R.dataflow():
        a = R.exp(x)
        a_b = R.grad.start_checkpoint(a)
        b = R.sin(a_b)
        c = R.cos(b)
        c_e = R.grad.end_checkpoint(c)
        d = R.multiply(c_e, c_e)
        s = R.sum(d)
        R.output(s)
    return s
"""


def load_source(text: str, tmp_path: Path, name: str):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"lowered_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_same(got, want, path="result"):
    if isinstance(want, tuple):
        assert isinstance(got, tuple | list) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{path}[{i}]")
        return
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape, f"{path}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
    # Same kernels on the same inputs: bit for bit (NaN where NaN).
    assert g.tobytes() == w.tobytes(), path
