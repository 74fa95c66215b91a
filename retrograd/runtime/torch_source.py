"""lower_to_torch(mod): a module as a readable standalone PyTorch module (`retrograd lower --backend torch`; in runtime/ because
`build(..., compile=True)` compiles it).

Written from the Plan (analysis/plan.py), as the torch executor runs it: one statement per instruction
calling the op's torch kernel, and a `del` at each of the plan's frees, so the source releases values
where the executor does. Constants are tensors made at import on `DEVICE` (set it before importing, or
call `to_device`). `build(..., backend="torch", compile=True)` runs this source through torch.compile.
"""

from __future__ import annotations

import re

import numpy as np

from retrograd.analysis.plan import Plans
from retrograd.errors import UnsupportedError
from retrograd.ir.expr import Constant, Function, PrimValue, ShapeExpr, StringImm
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.storage import result_dtypes, widened_on_torch
from retrograd.ops.torch_kernels import BITS, may_be_empty
from retrograd.runtime.signature import compile_dim

_IND = "    "


def safe_name(text: str, allow_builtins: bool = False) -> str:
    import builtins
    import keyword

    name = "".join(c if c.isalnum() or c == "_" else "_" for c in text) or "_"
    if name[0].isdigit():
        name = "_" + name
    if keyword.iskeyword(name) or (not allow_builtins and hasattr(builtins, name)):
        name += "_"
    return name


def literal(v) -> str:
    """Source of an attribute or prim value (non-finite floats spelled out)."""
    if isinstance(v, float) and not np.isfinite(v):
        return f'float("{v}")'
    if isinstance(v, tuple | list):
        return "(" + ", ".join(literal(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, bool | int | float | str) or v is None:
        return repr(v)
    if isinstance(v, np.generic):
        return f'np.{v.dtype.name}({literal(v.item())})'
    raise UnsupportedError(f"cannot write the value {v!r} as source")


class _Module:
    def __init__(self, mod):
        self.mod = mod
        self.plans = Plans(mod)
        self.funcs = {name: safe_name(name) for name, f in mod.items() if isinstance(f, Function)}
        self.kernels: dict[tuple[str, bool], str] = {}  # (op name, empty-guarded) -> alias
        self.consts: list[str] = []
        self.const_names: dict[int, str] = {}
        self.widens = False  # whether a bfloat16 / float8 call computes through in_float32 (the source then imports it)

    def kernel(self, op, span, empty: bool = False) -> str:
        """The alias of op's torch kernel; `empty`: the one computing calls with an empty argument on NumPy
        (torch_kernels.on_numpy_when_empty), for calls whose arguments may be empty."""
        key = (op.name, empty and op.kernel is not None)
        name = self.kernels.get(key)
        if name is None:
            try:
                op.torch_kernel
            except UnsupportedError as err:
                raise UnsupportedError(err.message, span) from None
            base = "k_" + safe_name(op.name.removeprefix("relax.").replace(".", "_"), True)
            name = self.kernels[key] = base + "_or_empty" if key[1] else base
        return name

    def const(self, c: Constant) -> str:
        name = self.const_names.get(id(c))
        if name is None:
            name = self.const_names[id(c)] = f"const{len(self.const_names)}"
            data = np.asarray(c.data)
            # bfloat16 / float8 travel as their bits (NumPy without ml_dtypes and torch.from_numpy know neither).
            bits = BITS.get(data.dtype.name)
            view = "" if bits is None else f".view(torch.{data.dtype.name})"
            self.consts.append(f'{name} = torch.from_numpy(np.frombuffer(bytes.fromhex("{data.tobytes().hex()}"), '
                               f'dtype="{bits or data.dtype.name}").reshape({literal(tuple(data.shape))}).copy()){view}.to(DEVICE)')
        return name

    def source(self, source_name: str) -> str:
        bodies = [line for name in self.funcs for line in _Function(self, self.plans.get(name)).lines()]
        out = [f'"""{source_name} lowered by retrograd for PyTorch: the torch kernels the torch executor runs, in',
               "plan order, each value deleted at the plan's release point. Regenerate rather than edit.", '"""', "",
               "import numpy as np", "import torch", "", "from retrograd.ops.registry import get as _op",
               *(["from retrograd.ops.storage import in_float32"] if self.widens else []),
               *(["from retrograd.ops.torch_kernels import on_numpy_when_empty"] if any(e for _, e in self.kernels) else []),
               "", 'DEVICE = "cpu"', ""]
        out += [f'{alias} = on_numpy_when_empty(_op("{op}").torch_kernel, _op("{op}").kernel)' if empty else
                f'{alias} = _op("{op}").torch_kernel' for (op, empty), alias in sorted(self.kernels.items())]
        out += ["", *self.consts, "", ""] if self.consts else ["", ""]
        return "\n".join(out + bodies) + "\n"


class _Function:
    def __init__(self, ml: _Module, plan):
        self.ml, self.plan = ml, plan
        self.names: dict[int, str] = {}
        taken = set(ml.funcs.values()) | set(ml.kernels.values()) | {"torch", "np", "DEVICE", "_op", "in_float32", "on_numpy_when_empty"}
        for reg, p in plan.params:
            self.names[reg] = self._fresh(p.name_hint, taken)
        # Symbolic dims (R.Tensor(("n", 1, 8, 8))) read from the first parameter holding each one bare.
        self.dims: dict[str, str] = {}
        self.dim_lines: list[str] = []
        for reg, p in plan.params:
            shape = getattr(p.struct_info, "shape", None) if isinstance(p.struct_info, TensorStructInfo) else None
            for axis, d in enumerate(shape or ()):
                if isinstance(d, str) and d.isidentifier() and d not in self.dims:
                    self.dims[d] = self._fresh(f"dim_{d}", taken)
                    self.dim_lines.append(f"{self.dims[d]} = {self.names[reg]}.shape[{axis}]")
        for reg, c in plan.consts.items():
            self.names[reg] = self._literal(c)
        self.taken = taken

    @staticmethod
    def _fresh(hint, taken):
        base = safe_name(hint)
        name, k = base, 1
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        taken.add(name)
        return name

    def _literal(self, c) -> str:
        if isinstance(c, Constant):
            return self.ml.const(c)
        if isinstance(c, ShapeExpr):
            return "(" + ", ".join(self._dim(v, c.span) for v in c.values) + ("," if len(c.values) == 1 else "") + ")"
        if isinstance(c, PrimValue | StringImm):
            return literal(c.value)
        raise UnsupportedError(f"cannot lower a {type(c).__name__}")

    def _dim(self, v, span) -> str:
        """A shape's dim as source: an int, or its expression over the dims the parameters bind."""
        if isinstance(v, int):
            return repr(v)
        compile_dim(v)  # only + - * // % on names and integers, else a clear error
        names = set(re.findall(r"[A-Za-z_]\w*", v))
        if not names <= self.dims.keys():
            raise UnsupportedError(f"lowering for torch: the dim {v!r} uses {sorted(names - self.dims.keys())}, "
                                   "which no parameter's shape binds", span)
        return "(" + re.sub(r"[A-Za-z_]\w*", lambda m: self.dims[m.group()], v) + ")"

    def src(self, s) -> str:
        if isinstance(s, int):
            return self.names[s]
        return "(" + ", ".join(self.src(x) for x in s) + ("," if len(s) == 1 else "") + ")"

    def lines(self) -> list[str]:
        params = [self.names[reg] for reg, _ in self.plan.params]
        out = [f"def {self.ml.funcs[self.plan.name]}({', '.join(params)}):"]
        out += [_IND + line for line in self.dim_lines]
        self.block(self.plan.block, _IND, out)
        return out + ["", ""]

    def _del(self, regs, ind, out):
        names = [self.names[r] for r in regs if r in self.names and r not in self.plan.fixed]
        if names:
            out.append(f"{ind}del {', '.join(names)}")

    def block(self, blk, ind, out) -> None:
        self._del(blk.prefree, ind, out)
        for ins in blk.ins:
            name = self.names[ins.out] = self._fresh(ins.var.name_hint, self.taken)
            args = [self.src(s) for s in ins.srcs]
            if ins.kind == "op":
                try:
                    attrs = [f"{k}={literal(v)}" for k, v in ins.call.attrs.items()]
                except UnsupportedError as err:
                    raise UnsupportedError(f"lowering {ins.op.script_name} (binding '{ins.var.name_hint}'): {err.message}", ins.span) from None
                if any(not k.isidentifier() for k in ins.call.attrs):
                    raise UnsupportedError(f"attribute names of {ins.op.script_name} are not identifiers", ins.span)
                kernel = self.ml.kernel(ins.op, ins.span, may_be_empty([a.struct_info for a in ins.call.args]))
                if widened_on_torch(ins.op, ins.call.struct_info, [a.struct_info for a in ins.call.args]):
                    kernel = f"in_float32({kernel}, {literal(result_dtypes(ins.call.struct_info))})"
                    self.ml.widens = True
                out.append(f"{ind}{name} = {kernel}({', '.join(args + attrs)})")
            elif ins.kind == "item":
                out.append(f"{ind}{name} = {args[0]}[{ins.index}]")
            elif ins.kind == "call":
                out.append(f"{ind}{name} = {self.ml.funcs[ins.callee]}({', '.join(args)})")
            else:
                out.append(f"{ind}if {args[0]}:")
                for i, b in enumerate(ins.branches):
                    if i:
                        out.append(f"{ind}else:")
                    self.block(b, ind + _IND, out)
                    out.append(f"{ind + _IND}{name} = {self.src(b.result)}")
                    self._del(b.endfree, ind + _IND, out)
            self._del(ins.frees, ind, out)
        if blk is self.plan.block:
            out.append(f"{ind}return {self.src(blk.result)}")


def lower_to_torch(mod, source_name: str = "module") -> str:
    """The module as standalone PyTorch source over the ops' torch kernels, with the plan's frees."""
    return _Module(mod).source(source_name)
