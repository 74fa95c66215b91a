"""The arguments of `retrograd run`: arrays read from .npz/.npy files (checked, cast) and random ones."""

from __future__ import annotations

import io
import sys
import zipfile

import numpy as np

from retrograd.cli.common import STDIO
from retrograd.errors import UsageError, did_you_mean
from retrograd.ir.dtypes import numpy_dtype
from retrograd.runtime.params_io import ir_name, view_raw

# Random inputs and --dim sizes beyond this are refused before anything is allocated.
MAX_DIM = 2**31 - 1


def symbolic_dims(func) -> list[str]:
    """The symbolic dim names of the function's parameters, in order of appearance."""
    from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo

    names: list[str] = []
    stack = [p.struct_info for p in reversed(func.params)]
    while stack:
        sinfo = stack.pop()
        if isinstance(sinfo, TupleStructInfo):
            stack.extend(reversed(sinfo.fields))
        elif isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
            names += [d for d in sinfo.shape if isinstance(d, str) and d.isidentifier() and d not in names]
    return names


def parse_dims(items, func, func_name: str) -> dict[str, int]:
    """--dim NAME=SIZE values; a name no parameter's shape uses is an error suggesting the close ones."""
    known = symbolic_dims(func)
    dims: dict[str, int] = {}
    for item in items or []:
        name, _, value = item.partition("=")
        if not (value.isascii() and value.isdigit()) or not name:
            raise UsageError(f"--dim expects NAME=SIZE, got '{item}'")
        if len(value) > 10 or int(value) > MAX_DIM:
            raise UsageError(f"--dim {name}: {value} is larger than {MAX_DIM}")
        if name not in known:
            listing = f"its symbolic dims are {', '.join(known)}" if known else "it has no symbolic dims"
            hint = did_you_mean(name, known)
            raise UsageError(f"--dim {name}: no parameter of '{func_name}' has a dim named '{name}'{hint} ({listing})")
        dims[name] = int(value)
    return dims


def read_inputs(path: str, func, func_name: str) -> dict[str, np.ndarray]:
    """Arrays keyed by parameter name from an .npz file (np.savez(path, x=..., w=...)), or the one
    argument of a single-parameter function from an .npy file; '-' reads standard input. No pickles."""
    names = [p.name_hint for p in func.params]
    shown = "standard input" if path == STDIO else path
    try:
        # np.load needs a seekable file: standard input is read whole first.
        data = np.load(io.BytesIO(sys.stdin.buffer.read()) if path == STDIO else path, allow_pickle=False)
        if isinstance(data, np.ndarray):
            if len(names) != 1:
                raise UsageError(
                    f"{shown} holds one array (.npy) but '{func_name}' has {len(names)} parameters "
                    f"({', '.join(names) or 'none'}); give an .npz of arrays named after them (np.savez(path, x=...))"
                )
            return {names[0]: data}
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError("not an .npz archive (write one with np.savez(path, x=..., w=...))")
        with data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise UsageError(f"cannot read inputs from {shown}: {_plain(err)}") from None
    for key in list(arrays):
        if key not in names and ir_name(key) in names:  # a dotted name (save_params of an import)
            arrays[ir_name(key)] = arrays.pop(key)
            continue
        if key not in names:
            raise UsageError(
                f"{shown}: '{func_name}' has no parameter named {key}{did_you_mean(key, names)} "
                f"(parameters: {', '.join(names)})"
            )
    return arrays


def _plain(err: Exception) -> str:
    """An exception's message without NumPy's internal spelling of pickled objects."""
    text = str(err)
    return "it holds Python objects, which are not read (save plain arrays)" if "allow_pickle" in text else text


def check_dtypes(arrays: dict, func, cast: bool) -> dict:
    """The given arrays, each of its parameter's dtype: converted with `cast`, refused otherwise."""
    from retrograd.ir.struct_info import TensorStructInfo

    out = dict(arrays)
    for p in func.params:
        sinfo, value = p.struct_info, out.get(p.name_hint)
        if value is None or not isinstance(sinfo, TensorStructInfo) or not sinfo.dtype:
            continue
        want = numpy_dtype(sinfo.dtype)
        value = out[p.name_hint] = view_raw(value, sinfo.dtype)
        if value.dtype != want:
            if not cast:
                raise UsageError(
                    f"input '{p.name_hint}' is {value.dtype} but the parameter is {sinfo.dtype}; "
                    f"--cast converts inputs to their parameters' dtypes"
                )
            out[p.name_hint] = value.astype(want)
    return out


class RandomInputs:
    """Random arguments of a function: shapes from struct info and --dim, integers within what they index."""

    def __init__(self, func, dims: dict[str, int], seed: int):
        self.rng = np.random.default_rng(seed)
        self.dims = dims
        self.bounds = index_bounds(func, dims)

    def make(self, sinfo, name: str):
        from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo
        from retrograd.ir.text import format_sinfo

        if isinstance(sinfo, TupleStructInfo):
            return tuple(self.make(f, f"{name}[{i}]") for i, f in enumerate(sinfo.fields))
        if not isinstance(sinfo, TensorStructInfo):
            raise UsageError(
                f"parameter '{name}' is {format_sinfo(sinfo, brief=True)}, for which no random value is made; "
                "give it with --inputs FILE.npz"
            )
        if sinfo.shape is None:
            rank = f"a tensor of rank {sinfo.ndim}" if sinfo.ndim >= 0 else "a tensor of unknown rank"
            raise UsageError(
                f"parameter '{name}' is {rank} with no shape, so no random input can be made for it: "
                f"give its array with --inputs FILE.npz, or write its shape with named dims in the script "
                f'(R.Tensor(("n", "m"), ...)) and give their sizes with --dim n=SIZE'
            )
        shape = []
        for d in sinfo.shape:
            if isinstance(d, str):
                if d not in self.dims:
                    raise UsageError(
                        f"parameter '{name}' has the symbolic dim '{d}': give its size with --dim {d}=SIZE, "
                        "or the array with --inputs"
                    )
                d = self.dims[d]
            shape.append(d)
        if int(np.prod(shape, dtype=object)) > MAX_DIM:
            raise UsageError(f"a random input of shape {tuple(shape)} for '{name}' is too large; give it with --inputs")
        if sinfo.dtype.startswith(("int", "uint")):
            high = self.bounds.get(name) or max(1, min(shape) if shape else 2)
            return self.rng.integers(0, high, size=shape).astype(sinfo.dtype)
        if sinfo.dtype == "bool":
            return self.rng.random(shape) < 0.5
        return self.rng.standard_normal(shape).astype(numpy_dtype(sinfo.dtype or "float32"))


def index_bounds(func, dims: dict) -> dict[str, int]:
    """Per integer parameter used directly as class targets or take indices: the size they index.

    Random inputs draw from [0, size), so nll_loss targets stay below the class count and take
    indices within the indexed axis.
    """
    from retrograd.ir.expr import Call, Function, Var

    bounds: dict[str, int] = {}
    params = {p: p.name_hint for p in func.params}

    def size(x, axis):
        shape = getattr(x.struct_info, "shape", None)
        if shape is None or not -len(shape) <= axis < len(shape):
            return None
        d = shape[axis]
        return dims.get(d) if isinstance(d, str) else d

    if not isinstance(func, Function):
        return bounds
    for block in func.body.blocks:
        for b in block.bindings:
            call = b.value
            if not isinstance(call, Call) or not hasattr(call.op, "args"):
                continue
            names = [a.name for a in call.op.args][: len(call.args)]
            args = dict(zip(names, call.args))
            found = None
            if "targets" in args and "predictions" in args:
                pred = args["predictions"]
                ndim = len(getattr(pred.struct_info, "shape", None) or ())
                found = args["targets"], size(pred, 1 if ndim >= 2 else 0)
            elif "indices" in args and "x" in args:
                axis = call.attrs.get("axis")
                found = args["indices"], size(args["x"], 0 if axis is None else axis)
            if found is not None and isinstance(found[0], Var) and found[0] in params and found[1]:
                name = params[found[0]]
                bounds[name] = min(bounds.get(name, found[1]), found[1])
    return bounds
