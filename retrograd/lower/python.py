"""lower_to_python(mod): a module as readable standalone Python, one statement per binding over the ops' kernels."""

from __future__ import annotations

import ast

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.ir.expr import (
    Call,
    Constant,
    Function,
    GlobalVar,
    If,
    Op,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
    tuple_fields_of,
)
from retrograd.ir.analysis import read_vars
from retrograd.ir.nested import depth, fold, joined, render, trampoline
from retrograd.ir.struct_info import ShapeStructInfo, TensorStructInfo, TupleStructInfo
from retrograd.lower.kernel_refs import kernel_ref, literal, safe_name
from retrograd.ops.storage import in_storage, result_dtypes
from retrograd.runtime.lowering import _prim_scalar

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


def _imported_name(line: str) -> str:
    return line.rsplit(" ", 1)[-1]


class _ModuleLowering:
    def __init__(self, mod):
        self.mod = mod
        self.globals = _Names({"np"})
        self.func_name = {name: self.globals.new(name) for name, f in mod.items() if isinstance(f, Function)}
        self.kernel: dict = {}  # op -> alias
        self.imports: list[str] = []
        self.setup: list[str] = []
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
        alias = self.globals.new(op.name.removeprefix("relax.").replace(".", "_"))
        imports, setup = kernel_ref(op, alias)
        fresh = [_imported_name(line) for line in imports if line not in self.imports]
        if any(name != alias and name in self.globals.taken for name in fresh):
            imports, setup = kernel_ref(op, alias, registry_only=True)  # its import would shadow a name
        for line in imports:
            if line not in self.imports:
                self.imports.append(line)
                self.globals.taken.add(_imported_name(line))
        if setup:
            self.setup.append(setup)
        self.kernel[op] = alias

    def _add_const(self, c: Constant) -> None:
        name = self.const[id(c)] = self.globals.new(f"const{len(self.const)}")
        data = np.asarray(c.data)
        dtype = data.dtype.name
        if data.size <= _INLINE_CONST and data.dtype.kind in "biuf":
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
        if self.setup or self.const_lines:
            out.append("")
            out += self.setup + self.const_lines
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
        self.ind = _IND  # the indentation of the statement being written

    def error(self, message, span=None):
        return UnsupportedError(f"{self.name}: {message}", span)

    def lines(self) -> list[str]:
        params = [self.define(p) for p in self.func.params]
        out = [f"def {self.py}({', '.join(params)}):"]
        for p in self.func.params:
            self._bind_dims(p.struct_info, self.var[p], out)
        # inf and nan are results, as in the executor (one errstate per call there too): NumPy's
        # floating-point warnings would otherwise differ between the two ways of running a function.
        out.append(f'{_IND}with np.errstate(all="ignore"):')
        body, result, _ = trampoline(self.seq(self.func.body, 2 * _IND, set(self.func.params)))
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

    def arg(self, e, span=None) -> str:
        if isinstance(e, Var):
            if e not in self.var:
                raise self.error(f"variable '{e.name_hint}' is used before it is bound", e.span or span)
            return self.var[e]
        if isinstance(e, Tuple):
            if depth(e, tuple_fields_of) <= _MAX_NEST:
                return render(e, lambda x: _tuple_text_parts(x) if isinstance(x, Tuple) else [self.arg(x, span)])
            # Too deep for one expression: each level is a statement (in self.pre) naming a temporary.
            return fold(e, tuple_fields_of, lambda x, kids: self._level(x, kids) if isinstance(x, Tuple) else self.arg(x, span))
        if isinstance(e, Constant):
            return self.ml.const[id(e)]
        if isinstance(e, PrimValue):
            return literal(_prim_scalar(e))
        if isinstance(e, StringImm):
            return repr(e.value)
        if isinstance(e, ShapeExpr):
            return literal(()) if not e.values else "(" + ", ".join(self.dim(d, span) for d in e.values) + (",)" if len(e.values) == 1 else ")")
        raise self.error(f"{type(e).__name__} cannot be an argument here (the module is not in normal form)", span)

    def _level(self, e: Tuple, fields: list[str]) -> str:
        name = self.names.new("nest")
        self.pre.append(f"{self.ind}{name} = {''.join(_tuple_text_parts(e, fields))}")
        return name

    def value(self, e, span) -> str:
        if isinstance(e, TupleGetItem):
            return f"{self.arg(e.tuple_value, span)}[{e.index}]"
        if isinstance(e, Call):
            args = [self.arg(a, span) for a in e.args]
            if isinstance(e.op, GlobalVar):
                callee = self.ml.func_name.get(e.op.name_hint)
                if callee is None:
                    raise self.error(f"calls '{e.op.name_hint}', which is not a function of the module", span)
                return f"{callee}({', '.join(args)})"
            if not isinstance(e.op, Op):
                raise self.error(f"calls a {type(e.op).__name__}; only ops and module functions can be called", span)
            args += [f"{k}={literal(v)}" for k, v in e.attrs.items()]
            kernel = self.ml.kernel[e.op]
            if _in_storage(e):  # bfloat16 / float8: computed in float32 and rounded, as the executor does
                kernel = f"in_float32({kernel}, {literal(result_dtypes(e.struct_info))})"
            return f"{kernel}({', '.join(args)})"
        return self.arg(e, span)

    # -- statements -----------------------------------------------------------
    def seq(self, seq, ind: str, owned: set):
        """Generator (see trampoline) giving (statements, result text, variables read from outside) of a
        SeqExpr; `owned` variables may be deleted here, after their last read."""
        if len(ind) > len(_IND) * (_MAX_DEPTH + 1):
            raise self.error(f"If bindings nest more than {_MAX_DEPTH} deep, beyond what Python source can indent", seq.span)
        if not isinstance(seq, SeqExpr):
            raise self.error(f"expected a sequence of bindings, got {type(seq).__name__}", getattr(seq, "span", None))
        bindings = [b for blk in seq.blocks for b in blk.bindings]
        stmts: list[list[str]] = []
        reads: list[list] = []
        for b in bindings:
            span = b.span or b.var.span or getattr(b.value, "span", None)
            note = f"  # line {span.line}" if span is not None else ""
            got: list = []
            if isinstance(b.value, If):
                node = b.value
                read_vars(node.cond, got)
                cond = self.arg(node.cond, span)
                # Branch results need one name, defined before the branches' own names.
                target = self.define(b.var)
                tb, tr, t_reads = yield self.seq(node.true_branch, ind + _IND, set())
                fb, fr, f_reads = yield self.seq(node.false_branch, ind + _IND, set())
                got += t_reads + f_reads
                stmts.append([f"{ind}if {cond}:{note}", *tb, f"{ind}{_IND}{target} = {tr}", f"{ind}else:", *fb,
                              f"{ind}{_IND}{target} = {fr}"])
            else:
                read_vars(b.value, got)
                self.ind = ind
                text = self.value(b.value, span)
                pre, self.pre = self.pre, []
                stmts.append([*pre, f"{ind}{self.define(b.var)} = {text}{note}"])
            reads.append(got)
        kept: list = []
        read_vars(seq.body, kept)
        last = {v: i for i, got in enumerate(reads) for v in got}
        bound = {b.var for b in bindings}
        owned = set(owned) | bound
        out: list[str] = []
        for i, b in enumerate(bindings):
            out += stmts[i]
            dead = [v for v in dict.fromkeys(reads[i] + [b.var]) if v in owned and last.get(v, i) == i and v not in kept]
            if dead:
                out.append(f"{ind}del {', '.join(self.var[v] for v in dead)}")
        outer = [v for v in dict.fromkeys([v for got in reads for v in got] + kept) if v not in bound]
        self.ind = ind
        result = self.arg(seq.body, seq.span)
        out += self.pre
        self.pre = []
        return out, result, outer


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
