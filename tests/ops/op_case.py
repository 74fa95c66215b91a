"""OpCase: one op call with typed inputs and attributes, shared by inference, kernel and gradient tests."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from retrograd.ir import BlockBuilder, Function, IRModule, Tuple, Var
from retrograd.ir.expr import Call, prim_value, shape_expr
from retrograd.ir.struct_info import PrimStructInfo, ShapeStructInfo, TensorStructInfo, is_float_dtype
from retrograd.ops.registry import get


@dataclass
class OpCase:
    """A call of `op` on `inputs`, one entry per argument:

    - TensorStructInfo: a parameter filled with random data (floats uniform in [low, high],
      ints in [low, high), bools fair coins);
    - np.ndarray: a parameter with exactly this value (indices, conditions, targets);
    - ShapeStructInfo: a literal shape argument `R.shape([...])` (not a parameter);
    - list: a tuple argument whose fields are themselves inputs (concat);
    - PrimStructInfo with a value: a literal prim value argument `R.prim_value(...)` (not a parameter).

    `differentiable_args` lists argument positions whose gradient is checked numerically (a list
    argument counts as one position: all its tensors); None means every random float input
    (`diff_args` resolves it). `tvm=False` skips the comparison with TVM's
    inference where TVM is wrong or rejects what we accept (the reason goes in `note`).
    """

    op: str
    inputs: list
    attrs: dict = field(default_factory=dict)
    differentiable_args: list[int] | None = None
    low: float = -1.0
    high: float = 1.0
    name: str = ""
    tvm: bool = True
    note: str = ""

    @property
    def id(self) -> str:
        return f"{self.op.split('relax.')[-1]}-{self.name}" if self.name else self.op.split("relax.")[-1]

    @property
    def opdef(self):
        return get(self.op)

    # -- structure --------------------------------------------------------------------------
    def leaves(self) -> list:
        """Parameter inputs in order (tuple arguments flattened); shape literals are not parameters."""
        out = []
        for inp in self.inputs:
            if isinstance(inp, list):
                out.extend(inp)
            elif not isinstance(inp, ShapeStructInfo | PrimStructInfo):
                out.append(inp)
        return out

    def param_sinfo(self) -> list[TensorStructInfo]:
        return [leaf if isinstance(leaf, TensorStructInfo) else TensorStructInfo(leaf.shape, str(leaf.dtype)) for leaf in self.leaves()]

    @property
    def is_static(self) -> bool:
        """False when an input has symbolic dims (such cases check inference only)."""
        shapes = [s.shape for s in self.param_sinfo()]
        shapes += [i.values for i in self.inputs if isinstance(i, ShapeStructInfo)]
        return all(s is not None and all(isinstance(d, int) for d in s) for s in shapes)

    @property
    def diff_args(self) -> list[int]:
        if self.differentiable_args is not None:
            return list(self.differentiable_args)
        if any(isinstance(leaf, TensorStructInfo) and leaf.shape is None for leaf in self.leaves()):
            return []  # an ndim-only input: an inference-only case, there is no shape to draw data for

        def is_float(inp):
            if isinstance(inp, list):
                return bool(inp) and all(is_float(i) for i in inp)
            return isinstance(inp, TensorStructInfo) and is_float_dtype(inp.dtype)

        return [i for i, inp in enumerate(self.inputs) if is_float(inp)]

    def differentiable_params(self) -> list[int]:
        """Indices (into the parameter list) of the inputs whose gradient is checked."""
        out, k = [], 0
        for i, inp in enumerate(self.inputs):
            if isinstance(inp, ShapeStructInfo | PrimStructInfo):
                continue
            n = len(inp) if isinstance(inp, list) else 1
            if i in self.diff_args:
                out.extend(range(k, k + n))
            k += n
        return out

    # -- IR ---------------------------------------------------------------------------------
    def params(self) -> list[Var]:
        return [Var(f"a{i}", s) for i, s in enumerate(self.param_sinfo())]

    def call(self, params: list[Var]) -> Call:
        """The unnormalized call on the given parameters."""
        args, it = [], iter(params)
        for inp in self.inputs:
            if isinstance(inp, ShapeStructInfo):
                args.append(shape_expr(inp.values))
            elif isinstance(inp, PrimStructInfo):
                args.append(prim_value(inp.value, inp.dtype))
            elif isinstance(inp, list):
                args.append(Tuple([next(it) for _ in inp]))
            else:
                args.append(next(it))
        return self.opdef(*args, **self.attrs)

    def build(self) -> IRModule:
        """`main(params...)` returning the op's result, built through the BlockBuilder."""
        params = self.params()
        bb = BlockBuilder()
        bb.begin_scope()
        if self.opdef.pure:
            with bb.dataflow():
                out = bb.emit_output(self.call(params), "out")
        else:  # an impure call (assert_op) outside any dataflow block, in an impure function
            out = bb.emit(self.call(params), "out")
        body = bb.end_scope(out)
        func = Function(params, body, body.struct_info, is_pure=self.opdef.pure, attrs={"global_symbol": "main"})
        return IRModule({"main": func})

    # -- kernels ----------------------------------------------------------------------------
    def kernel_args(self, values: list) -> list:
        """The kernel's positional arguments: arrays, tuples of arrays, shapes as tuples of ints."""
        it = iter(values)
        out = []
        for inp in self.inputs:
            if isinstance(inp, ShapeStructInfo):
                out.append(tuple(inp.values))
            elif isinstance(inp, PrimStructInfo):
                out.append(inp.value)
            elif isinstance(inp, list):
                out.append(tuple(next(it) for _ in inp))
            else:
                out.append(next(it))
        return out

    def run_kernel(self, values: list):
        """The op's kernel called directly on `values` (one array per parameter input)."""
        return self.opdef.kernel(*self.kernel_args(values), **self.opdef.normalize_attrs(self.attrs))

    # -- data -------------------------------------------------------------------------------
    def make_inputs(self, seed: int = 0) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        out = []
        for leaf in self.leaves():
            if isinstance(leaf, np.ndarray):
                out.append(leaf.copy())
                continue
            if leaf.shape is None:
                raise ValueError(f"{self.id}: input of unknown shape {leaf} cannot be drawn (inference-only case)")
            shape, dtype = tuple(leaf.shape), leaf.dtype
            if is_float_dtype(dtype):
                out.append(rng.uniform(self.low, self.high, size=shape).astype(dtype))
            elif dtype == "bool":
                out.append(rng.random(size=shape) < 0.5)
            else:
                out.append(rng.integers(int(self.low), max(int(self.high), int(self.low) + 1), size=shape).astype(dtype))
        return out

    def as_dtype(self, dtype: str = "float64") -> "OpCase":
        """The same case with every float32 input (and float32 attrs) in `dtype`, for finite differences."""

        def conv(inp):
            if isinstance(inp, list):
                return [conv(i) for i in inp]
            if isinstance(inp, TensorStructInfo) and inp.dtype == "float32":
                return TensorStructInfo(inp.shape, dtype, inp.ndim)
            if isinstance(inp, np.ndarray) and inp.dtype == np.float32:
                return inp.astype(dtype)
            return inp

        attrs = {k: (dtype if v == "float32" else conv(v)) for k, v in self.attrs.items()}  # conv: match_cast's target
        return replace(self, inputs=[conv(i) for i in self.inputs], attrs=attrs)


def T(*shape, dtype: str = "float32") -> TensorStructInfo:
    """A tensor input: T(3, 4), T("n", 4), T() for a scalar."""
    return TensorStructInfo(shape, dtype)


def S(*values) -> ShapeStructInfo:
    """A literal shape argument."""
    return ShapeStructInfo(tuple(values))


def P(value, dtype: str | None = None) -> PrimStructInfo:
    """A literal prim value argument: P(6), P(0.5, "float32"); dtype as TVM's parser gives numbers."""
    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "float64"
    return PrimStructInfo(dtype, value)
