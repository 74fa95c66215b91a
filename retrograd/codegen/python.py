"""lower_to_python(mod): a module as readable standalone Python, one statement per binding over the ops' kernels."""

from __future__ import annotations

import ast

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.ir.dtypes import prim_scalar
from retrograd.ir.expr import (
    Call,
    Constant,
    Function,
    If,
    Op,
    PrimValue,
    SeqExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
)
from retrograd.analysis.liveness import flat_registers
from retrograd.analysis.plan import plan_function, source_parts
from retrograd.ir.functor import if_depth
from retrograd.ir.nested import depth, fold, joined, render
from retrograd.ir.struct_info import ShapeStructInfo, TensorStructInfo, TupleStructInfo
from retrograd.codegen.kernel_refs import kernel_import, kernel_ref, literal, safe_name
from retrograd.ops.storage import in_storage, result_dtypes

_INLINE_CONST = 32  # constants with more elements are written as their bytes
_IND = "    "
_MAX_DEPTH = 90  # Python rejects more than 100 levels of indentation
# Python's parser rejects more than 200 nested parentheses: a deeper tuple nest is built one level a
# statement (see _FunctionLowering.arg).
_MAX_NEST = 50


class _Names:
    """Unique identifiers: `hint`, else `hint_1`, `hint_2`, ..."""

    def __init__(self, taken=(), shadow_builtins: bool = False):
        self.taken = set(taken)
        self.shadow_builtins = shadow_builtins  # locals may: generated functions call no builtin
        self.next: dict[str, int] = {}  # base -> first suffix worth trying (keeps 100,000 `lv`s linear)

    def new(self, hint: str) -> str:
        base = name = safe_name(hint, self.shadow_builtins)
        i = self.next.get(base, 1)
        while name in self.taken:
            name = f"{base}_{i}"
            i += 1
        self.next[base] = i
        self.taken.add(name)
        return name


def walk(expr):
    """Every expression under `expr` (bindings' values and their leaves, nested branches), without recursion."""
    stack: list = [expr]
    while stack:
        e = stack.pop()
        yield e
        if isinstance(e, SeqExpr):
            stack.append(e.body)
            stack.extend(b.value for blk in e.blocks for b in blk.bindings)
        elif isinstance(e, Call):
            stack.extend(e.args)
        elif isinstance(e, Tuple):
            stack.extend(e.fields)
        elif isinstance(e, TupleGetItem):
            stack.append(e.tuple_value)
        elif isinstance(e, If):
            stack.extend((e.cond, e.true_branch, e.false_branch))


class _ModuleLowering:
    def __init__(self, mod):
        self.mod = mod
        self.globals = _Names({"np", "ml_dtypes", "in_float32"})  # and the names _STORAGE_IMPORTS binds
        self.func_name = {name: self.globals.new(name) for name, f in mod.items() if isinstance(f, Function)}
        self.kernel: dict = {}  # op -> alias
        self.kernel_names: dict[str, str] = {}  # name in retrograd.kernels -> alias
        self.imports: list[str] = []
        self.const: dict[int, str] = {}
        self.const_lines: list[str] = []
        for name in self.func_name:
            for e in walk(mod[name].body):
                if isinstance(e, Call) and isinstance(e.op, Op) and e.op not in self.kernel:
                    self._add_kernel(e.op, e.span)
                if isinstance(e, Call) and isinstance(e.op, Op) and _in_storage(e):
                    for line in _STORAGE_IMPORTS:
                        if line not in self.imports:
                            self.imports.append(line)
                elif isinstance(e, Constant) and id(e) not in self.const:
                    self._add_const(e)

    def _add_kernel(self, op, span) -> None:
        if getattr(op, "kernel", None) is None:
            script = getattr(op, "script_name", getattr(op, "name", "?"))
            raise UnsupportedError(f"op {script} has no kernel, so it cannot be lowered", span)
        try:
            name = kernel_ref(op)
        except UnsupportedError as e:
            raise UnsupportedError(str(e), span) from None
        self.kernel[op] = self.kernel_names[name] = self.globals.new(name)

    def _add_const(self, c: Constant) -> None:
        name = self.const[id(c)] = self.globals.new(f"const{len(self.const)}")
        data = np.asarray(c.data)
        dtype = data.dtype.name
        if 0 < data.size <= _INLINE_CONST and data.dtype.kind in "biuf":  # a nested list loses an empty array's shape
            self.const_lines.append(f'{name} = np.array({literal(data.tolist())}, dtype="{dtype}")')
            self.const_lines.append(f"{name}.flags.writeable = False")
        else:
            self.const_lines.append(
                f'{name} = np.frombuffer(bytes.fromhex("{data.tobytes().hex()}"), dtype="{dtype}")'
                f".reshape({literal(tuple(data.shape))})"
            )

    def source(self, source_name: str) -> str:
        out = [f'"""{source_name} lowered by retrograd: each function calls the kernels the executor runs, in binding order.', "",
               "Generated by `retrograd lower`; regenerate rather than edit.", '"""', "", "import numpy as np"]
        out += sorted(self.imports)
        if self.kernel_names:
            out.append(kernel_import(self.kernel_names))
        if self.const_lines:
            out.append("")
            out += self.const_lines
        for name, py in self.func_name.items():
            out += ["", ""] + _FunctionLowering(self, name, py, self.mod[name]).lines()
        return "\n".join(out) + "\n"


class _FunctionLowering:
    def __init__(self, ml: _ModuleLowering, name: str, py: str, func: Function):
        self.ml = ml
        self.name = name
        self.py = py
        self.func = func
        self.names = _Names(ml.globals.taken, shadow_builtins=True)
        self.var: dict = {}
        self.dims: dict[str, str] = {}
        self.pre: list[str] = []  # statements the next statement needs first (levels of deep tuples)
        self.temps: list[str] = []  # their names, deleted once that statement has run
        self.reg: dict = {}  # plan register -> its text: a variable's name or a constant
        self.ind = _IND  # the indentation of the statement being written

    def error(self, message, span=None):
        return UnsupportedError(f"{self.name}: {message}", span)

    def lines(self) -> list[str]:
        if if_depth(self.func) > _MAX_DEPTH:
            raise self.error(f"If bindings nest more than {_MAX_DEPTH} deep, beyond what Python source can indent", self.func.span)
        plan = plan_function(self.name, self.func, self.ml.func_name)
        params = [self.define(p) for p in self.func.params]
        self.reg = {reg: self.var[p] for reg, p in plan.params}
        out = [f"def {self.py}({', '.join(params)}):"]
        for p in self.func.params:
            self._bind_dims(p.struct_info, self.var[p], out)
        for reg, expr in plan.consts.items():
            self.reg[reg] = self.const_text(expr)
        # inf and nan are results, as in the executor (one errstate per call there too): NumPy's
        # floating-point warnings would otherwise differ between the two ways of running a function.
        out.append(f'{_IND}with np.errstate(all="ignore"):')
        body, result, _ = self.block(plan.block, 2 * _IND)
        return out + body + [f"{2 * _IND}return {result}"]

    def define(self, var: Var) -> str:
        name = self.var[var] = self.names.new(var.name_hint)
        return name

    def _bind_dims(self, sinfo, path: str, out: list) -> None:
        """`n = x.shape[0]` for each symbolic dim a parameter binds first (as the executor binds them)."""
        if isinstance(sinfo, TupleStructInfo):
            # A stack, fields in order: tuples nest to any depth.
            stack = [(sinfo, path)]
            while stack:
                s, p = stack.pop()
                if isinstance(s, TupleStructInfo):
                    stack.extend((f, f"{p}[{i}]") for i, f in reversed(list(enumerate(s.fields))))
                else:
                    self._bind_dims(s, p, out)
            return
        if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
            dims, fmt = sinfo.shape, f"{path}.shape[{{}}]"
        elif isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
            dims, fmt = sinfo.values, f"{path}[{{}}]"
        else:
            return
        for i, d in enumerate(dims):
            if isinstance(d, str) and d.isidentifier() and d not in self.dims:
                self.dims[d] = self.names.new(d)
                out.append(f"{_IND}{self.dims[d]} = {fmt.format(i)}  # symbolic dim {d}")

    # -- expressions ----------------------------------------------------------
    def dim(self, d, span) -> str:
        if isinstance(d, int):
            return str(d)
        tree = ast.parse(d, mode="eval")
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                if node.id not in self.dims:
                    raise self.error(f"symbolic dim {node.id} in R.shape is not bound by any parameter", span)
                node.id = self.dims[node.id]
        return ast.unparse(tree)

    def const_text(self, e) -> str:
        """Text of a plan constant: a module constant's global, a literal, or a shape of dims."""
        if isinstance(e, Constant):
            return self.ml.const[id(e)]
        if isinstance(e, PrimValue):
            return literal(prim_scalar(e))
        if isinstance(e, StringImm):
            return repr(e.value)
        return literal(()) if not e.values else "(" + ", ".join(self.dim(d, e.span) for d in e.values) + (",)" if len(e.values) == 1 else ")")

    def src(self, src) -> str:
        """Text of a plan source: a register's name, or a tuple of sources (a deep one built a level a
        statement, in self.pre, its temporaries deleted after the statement as the executor holds none)."""
        if isinstance(src, int):
            return self.reg[src]
        if depth(src, source_parts) <= _MAX_NEST:
            return render(src, lambda x: _tuple_text_parts(x, x) if not isinstance(x, int) else [self.reg[x]])
        step = lambda x, kids: self.reg[x] if isinstance(x, int) else self._level(x, kids)  # noqa: E731
        return fold(src, source_parts, step, shared=False)

    def _level(self, src, fields: list[str]) -> str:
        name = self.names.new("nest")
        self.pre.append(f"{self.ind}{name} = {''.join(_tuple_text_parts(src, fields))}")
        self.temps.append(name)
        return name

    def value(self, ins) -> str:
        if ins.kind == "item":
            return f"{self.reg[ins.srcs[0]]}[{ins.index}]"
        args = [self.src(s) for s in ins.srcs]
        if ins.kind == "call":
            return f"{self.ml.func_name[ins.callee]}({', '.join(args)})"
        try:
            args += [f"{k}={literal(v)}" for k, v in ins.call.attrs.items()]
        except UnsupportedError as err:
            raise UnsupportedError(f"lowering {ins.op.script_name} (binding '{ins.var.name_hint}'): {err.message}", ins.span) from None
        kernel = self.ml.kernel[ins.op]
        if _in_storage(ins.call):  # bfloat16 / float8: computed in float32 and rounded, as the executor does
            kernel = f"in_float32({kernel}, {literal(result_dtypes(ins.call.struct_info))})"
        return f"{kernel}({', '.join(args)})"

    # -- statements -----------------------------------------------------------
    def block(self, blk, ind: str) -> tuple[list[str], str, list[str]]:
        """(statements, result text, temporaries the result names) of a plan block: one statement per instruction, then a `del` of the
        registers the plan frees after it (recursion once per If level, at most _MAX_DEPTH)."""
        out: list[str] = []
        self.dels(out, ind, blk.prefree)
        for ins in blk.ins:
            note = f"  # line {ins.span.line}" if ins.span is not None else ""
            if ins.kind == "if":
                cond = self.reg[ins.srcs[0]]
                # Branch results need one name, defined before the branches' own names.
                target = self.reg[ins.out] = self.define(ins.var)
                out.append(f"{ind}if {cond}:{note}")
                for k, branch in enumerate(ins.branches):
                    if k:
                        out.append(f"{ind}else:")
                    lines, result, temps = self.block(branch, ind + _IND)
                    out += lines
                    out.append(f"{ind}{_IND}{target} = {result}")
                    self.dels(out, ind + _IND, branch.endfree, temps)
            else:
                self.ind = ind
                text = self.value(ins)
                pre, temps, self.pre, self.temps = self.pre, self.temps, [], []
                self.reg[ins.out] = self.define(ins.var)
                out += [*pre, f"{ind}{self.reg[ins.out]} = {text}{note}"]
                self.dels(out, ind, (), temps)
            self.dels(out, ind, _in_read_order(ins))
        self.ind = ind
        result = self.src(blk.result)
        out += self.pre
        self.pre, temps, self.temps = [], self.temps, []
        return out, result, temps

    def dels(self, out: list, ind: str, regs, temps=()) -> None:
        names = [self.reg[r] for r in regs] + list(temps)
        if names:
            out.append(f"{ind}del {', '.join(names)}")


def _in_read_order(ins) -> list:
    """The registers the plan frees after `ins`, in the order the statement reads them (its result, if
    unread, last): the same set, in the order a reader expects."""
    order = {}
    for src in ins.srcs:
        for r in flat_registers(src, set()) if not isinstance(src, int) else (src,):
            order.setdefault(r, len(order))
    return sorted(ins.frees, key=lambda r: order.get(r, len(order)))


def _tuple_text_parts(e: Tuple, fields=None) -> list:
    """`(a,)` / `(a, b)` as parts for render (`fields`: the fields' texts, else the fields)."""
    items = e.fields if fields is None else fields
    return ["(", *joined(items), ",)" if len(items) == 1 else ")"]


def lower_to_python(mod, source_name: str = "module") -> str:
    """The module as a standalone Python module: one function per IR function, one statement per binding."""
    return _ModuleLowering(mod).source(source_name)


_STORAGE_IMPORTS = ("import ml_dtypes  # noqa: F401 - registers bfloat16 / float8 with NumPy", "from retrograd.ops.storage import in_float32")


def _in_storage(call: Call) -> bool:
    """Whether the call involves bfloat16 / float8 (retrograd/ops/storage.py)."""
    return in_storage(call.op, call.struct_info, [a.struct_info for a in call.args]) is not None
