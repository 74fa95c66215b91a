"""The op registry: one OpDef per op bundles arguments, attribute schema, inference, kernel and gradient."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Callable

import attrs

from retrograd.errors import OpError, TypeInferenceError, UnsupportedError, did_you_mean
from retrograd.ir.expr import Call, Expr, Op
from retrograd.ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo, is_float_dtype
from retrograd.ir.text import format_sinfo
from retrograd.ops.cost import DEFAULT as DEFAULT_COST
from retrograd.ops.cost import Cost

REQUIRED = object()


@attrs.frozen
class Attr:
    """One attribute: name, converter (raises ValueError/TypeError on bad input), default."""

    name: str
    convert: Callable[[Any], Any]
    default: Any = REQUIRED


@attrs.frozen
class Arg:
    """One argument. kind: "tensor", "shape" (a literal list becomes R.shape), "tuple", "prim", "any".

    `keyword`: written `name=value` in scripts, printed so, and skipped by positional values (which
    bind to the attributes as in TVM's signature, which lacks the argument): dropout's `key`.
    """

    name: str
    kind: str = "tensor"
    optional: bool = False
    keyword: bool = False


class InferCtx:
    """What an inference function sees: the call, its arguments' struct info, attributes, error helpers."""

    __slots__ = ("op", "call", "sinfo", "attrs")

    def __init__(self, op: "OpDef", call: Call):
        self.op = op
        self.call = call
        self.sinfo: list[StructInfo] = [a.struct_info for a in call.args]
        self.attrs = call.attrs

    def describe(self) -> str:
        parts = []
        for spec, s in zip(self.op.args, self.sinfo):
            parts.append(f"{spec.name}: {format_sinfo(s, brief=True)}")
        return ", ".join(parts)

    def error(self, message: str, arg: int | None = None) -> TypeInferenceError:
        where = f" (argument '{self.op.args[arg].name}')" if arg is not None and arg < len(self.op.args) else ""
        return TypeInferenceError(
            f"{self.op.script_name}{where}: {message}; arguments were {self.describe()}", self.call.span
        )

    def tensor(self, i: int) -> TensorStructInfo:
        s = self.sinfo[i]
        if not isinstance(s, TensorStructInfo):
            raise self.error(f"expected a tensor, got {format_sinfo(s, brief=True)}", i)
        return s

    def float_tensor(self, i: int) -> TensorStructInfo:
        """Argument i, a tensor of a float dtype (or of a dtype not known yet)."""
        s = self.tensor(i)
        if s.dtype and not is_float_dtype(s.dtype):
            raise self.error(f"requires a float tensor, got dtype {s.dtype}", i)
        return s

    def tuple(self, i: int) -> TupleStructInfo:
        s = self.sinfo[i]
        if not isinstance(s, TupleStructInfo):
            raise self.error(f"expected a tuple, got {format_sinfo(s, brief=True)}", i)
        return s


def _frozen_map(value) -> MappingProxyType:
    return MappingProxyType(dict(value))


@attrs.frozen(eq=False, repr=False)
class OpDef(Op):
    """A registered operator: every property of an op, fixed at `register` (instances cannot change).

    Calling it builds an (unnormalized) Call with attributes checked. Properties:

    - `name`, `args` (Arg specs), `attrs_schema` (Attr specs), `infer(InferCtx) -> StructInfo`;
    - `kernel(*arrays, **attrs)`: the NumPy implementation (None: the op cannot run);
    - `grad(call, out, g) -> [one gradient or None per argument]`: the reverse-mode rule (None: no
      rule; `no_gradient` for ops whose arguments receive none);
    - `pure`; `canonicalize(attrs) -> attrs`, run after per-attribute conversion to settle attributes
      that depend on each other (out_layout defaults to layout);
    - `positional_attrs`: the order positional attributes bind in (default: schema order, which is
      also the printed order; TVM's Python signature may differ, as for pooling);
    - `print_positional`: attributes TVM prints positionally after the arguments, stopping at the
      first None (strided_slice's axes/begin/end/strides, triu's k); the rest print as keywords;
    - `print_omit`: attributes left out of the printed call when they hold the given value (TVM
      prints take_backward's mode="" but its parser rejects it);
    - `tvm_note(attrs) -> str | None`: why a call with these attributes has no spelling TVM's parser
      reads (the printer puts the reason in the script's header comment), or None;
    - `inplace(*arrays, out=array) -> out`: the kernel computing its result into `out`, where the
      executor may pass the buffer of a dying argument (see `inplace_candidates`; ops with at most two
      arguments) or parts of a large result, computed on threads (runtime/split.py). Only for ops
      whose kernel is exactly this computation on floats (and bool conditions), elementwise;
    - `aliases`: positions of the arguments whose buffer the kernel's result (or a field of it) may
      share: the very object (identity markers such as grad.no_grad, astype to the same dtype) or a
      NumPy view (reshape, permute_dims, strided_slice, ...); each registration says when. The result
      of an op not listing an argument never shares memory with it (a test runs every kernel to check
      this). The executor counts a shared buffer once;
    - `view(attrs, argument layouts, output shapes) -> [Fresh | Same | View]`: how an op listing
      `aliases` shares the buffer (the object, or a view with which strides): one of ops/views.py's
      rules, read by the memory model (analysis/layout.py); required with `aliases`, refused without;
    - `cost`: a `Cost(kind, flops)` (ops/cost.py): the op's class for the checkpoint planner and what
      computing a call once costs, from static struct info; default: kind "other", one unit per output
      element;
    - `threaded`: the kernel splits its batch over the kernel threads (ops/kernels/parallel.py). It
      allows, the runtime decides: an executor call of a module with such kernels holds BLAS to one
      thread (runtime/threads.py), and two such kernels may run at once (runtime/pairs.py);
    - `split_kernel`: the kernel's form that computes a large result in parts on the kernel threads
      (matmul's), with the kernel's signature and results; the runtime binds it in executor calls that
      hold BLAS to one thread, and `kernel` elsewhere (where BLAS threads the work itself).
    """

    name: str
    args: tuple[Arg, ...] = attrs.field(converter=tuple)
    attrs_schema: tuple[Attr, ...] = attrs.field(converter=tuple)
    infer: Callable[[InferCtx], StructInfo]
    kernel: Callable | None = None
    grad: Callable | None = None
    pure: bool = True
    canonicalize: Callable[[dict], dict] | None = None
    positional_attrs: tuple[str, ...] | None = None
    print_positional: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    print_omit: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_map)
    inplace: Callable | None = None
    tvm_note: Callable[[dict], str | None] | None = None
    aliases: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    cost: Cost = DEFAULT_COST
    view: Callable | None = None
    threaded: bool = False
    split_kernel: Callable | None = None
    _attr_index: Mapping[str, Attr] = attrs.field(init=False)
    _attr_memo: dict = attrs.field(init=False)

    def __attrs_post_init__(self):
        # Derived once at construction (frozen afterwards).
        object.__setattr__(self, "_attr_index", {a.name: a for a in self.attrs_schema})
        object.__setattr__(self, "_attr_memo", {})
        names = self.positional_attrs or (a.name for a in self.attrs_schema)
        object.__setattr__(self, "positional_attrs", tuple(names))
        if any(not 0 <= i < len(self.args) for i in self.aliases):
            raise ValueError(f"op {self.name}: aliases {self.aliases} name no argument of {len(self.args)}")
        if bool(self.aliases) != (self.view is not None):
            raise ValueError(f"op {self.name}: `aliases` (which arguments a result may view) and `view` (how) go together")

    def inplace_candidates(self, arg_sinfo, out_sinfo) -> list[int]:
        """Positions of the arguments whose buffer could hold the result of a call with this struct info.

        The op must have an `inplace` form and at most two arguments; the result must be a static float
        tensor, and a candidate argument must have exactly the result's struct info. The executor then
        takes the first candidate whose register is released at this call (its last use), and reuses
        its buffer if, at run time, nothing else references it (see runtime/inplace.py).
        """
        if self.inplace is None or len(arg_sinfo) > 2:
            return []
        if not (isinstance(out_sinfo, TensorStructInfo) and out_sinfo.is_static and is_float_dtype(out_sinfo.dtype)):
            return []
        return [i for i, s in enumerate(arg_sinfo) if s == out_sinfo]

    @property
    def torch_kernel(self) -> Callable:
        """The op's PyTorch kernel (ops/torch_kernels/, by family; torch is imported on first use).

        Same calling convention and semantics as `kernel`, on torch tensors. An op without one raises
        UnsupportedError naming it."""
        from retrograd.ops import torch_kernels

        fn = torch_kernels.lookup(self.name)
        if fn is None:
            raise UnsupportedError(f"op {self.script_name} has no torch kernel (ops/torch_kernels/)")
        return fn

    @property
    def script_name(self) -> str:
        """`relax.nn.relu` is written `R.nn.relu` in scripts."""
        return "R." + self.name[len("relax.") :]

    def __repr__(self) -> str:
        return f"<Op {self.name}>"

    # -- building calls -----------------------------------------------------
    def normalize_attrs(self, given: dict, span=None) -> dict:
        """Check names and values, fill defaults; keys come out in schema order. Results are remembered
        by the given values (with their types: 1, 1.0 and True may convert differently): gradient rules
        build the same calls again and again."""
        key = attrs_key(given)
        memo = self._attr_memo
        hit = memo.get(key) if key is not None else None
        if hit is not None:
            return dict(hit)
        out = self._normalize_attrs(given, span)
        if key is not None:
            if len(memo) >= _ATTR_MEMO_SIZE:
                memo.clear()
            memo[key] = dict(out)
        return out

    def _normalize_attrs(self, given: dict, span) -> dict:
        for key in given:
            if key not in self._attr_index:
                known = ", ".join(a.name for a in self.attrs_schema) or "none"
                hint = did_you_mean(key, self._attr_index)
                raise OpError(f"{self.script_name} has no attribute '{key}'{hint} (attributes: {known})", span)
        out = {}
        for a in self.attrs_schema:
            if a.name in given:
                try:
                    out[a.name] = a.convert(given[a.name])
                except (TypeError, ValueError) as err:
                    raise OpError(f"{self.script_name}: bad value {given[a.name]!r} for attribute '{a.name}': {err}", span) from None
            elif a.default is REQUIRED:
                raise OpError(f"{self.script_name}: missing required attribute '{a.name}'", span)
            else:
                out[a.name] = a.default
        if self.canonicalize is not None:
            try:
                out = self.canonicalize(out)
            except (TypeError, ValueError) as err:
                raise OpError(f"{self.script_name}: {err}", span) from None
        return out

    def bind(self, positional: list, keywords: dict, span=None) -> tuple[list, dict]:
        """Split a script call's arguments into (args, attrs) the way TVM's Python API does."""
        names = [a.name for a in self.args]
        by_position = [a.name for a in self.args if not a.keyword]
        attr_names = list(self.positional_attrs)
        args: dict[str, Any] = {}
        attr_vals: dict[str, Any] = {}
        for i, value in enumerate(positional):
            if i < len(by_position):
                args[by_position[i]] = value
            elif i - len(by_position) < len(attr_names):
                attr_vals[attr_names[i - len(by_position)]] = value
            else:
                raise OpError(
                    f"{self.script_name} takes at most {len(by_position) + len(attr_names)} arguments, got {len(positional)}",
                    span,
                )
        for key, value in keywords.items():
            if key in names:
                if key in args:
                    raise OpError(f"{self.script_name}: argument '{key}' given twice", span)
                args[key] = value
            else:
                if key in attr_vals:
                    raise OpError(f"{self.script_name}: attribute '{key}' given twice", span)
                attr_vals[key] = value
        out_args = []
        for spec in self.args:
            if spec.name in args and args[spec.name] is not None:
                out_args.append(args[spec.name])
            elif spec.optional:
                break_ok = all(s.optional for s in self.args[len(out_args) :])
                if not break_ok:
                    raise OpError(f"{self.script_name}: missing argument '{spec.name}'", span)
                # Optional trailing arguments that are absent are left out of the call.
                later = [s.name for s in self.args[self.args.index(spec) + 1 :] if args.get(s.name) is not None]
                if later:
                    raise OpError(f"{self.script_name}: '{later[0]}' given without '{spec.name}'", span)
                break
            else:
                raise OpError(
                    f"{self.script_name}: missing argument '{spec.name}' "
                    f"(expects {', '.join(names)})",
                    span,
                )
        return out_args, attr_vals

    def __call__(self, *args: Expr, span=None, **attr_vals) -> Call:
        for spec in self.args[len(args):]:
            if spec.keyword and spec.name in attr_vals:  # R.nn.dropout(x, key=k)
                value = attr_vals.pop(spec.name)
                args = args if value is None else (*args, value)
        if len(args) > len(self.args):
            # TVM's Python API also takes trailing attributes positionally: R.astype(x, "float32").
            if len(args) > len(self.args) + len(self.attrs_schema):
                raise OpError(f"{self.script_name}: too many arguments ({len(args)})", span)
            for name, value in zip(self.positional_attrs, args[len(self.args) :]):
                if name in attr_vals:
                    raise OpError(f"{self.script_name}: attribute '{name}' given twice", span)
                attr_vals[name] = value
            args = args[: len(self.args)]
        return Call(self, args, self.normalize_attrs(attr_vals, span), span=span)

    # -- inference ----------------------------------------------------------
    def check_arity(self, call: Call) -> None:
        if len(call.args) == len(self.args):  # every argument given: the common case, checked first
            return
        required = sum(1 for a in self.args if not a.optional)
        if not required <= len(call.args) <= len(self.args):
            expected = f"{required}" if required == len(self.args) else f"{required} to {len(self.args)}"
            raise OpError(f"{self.script_name} expects {expected} arguments, got {len(call.args)}", call.span)

    def infer_struct_info(self, call: Call, ctx=None) -> StructInfo:
        self.check_arity(call)
        sinfo = self.infer(InferCtx(self, call))
        shape = getattr(sinfo, "shape", None)
        if shape and _beyond_int64(shape):
            # Huge attributes (strides, padding) can make a shape no tensor can have, nor text read back.
            raise OpError(f"{self.script_name}: an inferred dimension is beyond the int64 range: {shape}", call.span)
        return sinfo


_MAX_DIM = 2**63 - 1
_ATTR_MEMO_SIZE = 4096


def attrs_key(given: dict):
    """A hashable key of given attribute values and their types, nested ones included, or None (an
    unhashable value): 1, 1.0 and True convert differently, and -0.0 must not find 0.0's entry."""
    key = tuple((k, typed_key(v)) for k, v in given.items())
    try:
        hash(key)
    except TypeError:
        return None
    return key


def typed_key(v):
    cls = v.__class__
    if cls is list or cls is tuple:
        return (cls, *map(typed_key, v))
    if cls is float:
        return (cls, repr(v))
    return (cls, v)


def _beyond_int64(shape: tuple) -> bool:
    try:
        return max(shape) > _MAX_DIM  # all static: one C-level pass
    except TypeError:  # symbolic dims among them
        return any(d > _MAX_DIM for d in shape if d.__class__ is int)
_REGISTRY: dict[str, OpDef] = {}


def register(
    name: str,
    args=("x",),
    attrs_schema=(),
    *,
    infer: Callable[[InferCtx], StructInfo],
    kernel: Callable | None = None,
    grad: Callable | None = None,
    pure: bool = True,
    canonicalize: Callable[[dict], dict] | None = None,
    positional_attrs: tuple[str, ...] | None = None,
    print_positional: tuple[str, ...] = (),
    print_omit: Mapping[str, Any] | None = None,
    inplace: Callable | None = None,
    aliases: tuple[int, ...] = (),
    tvm_note: Callable[[dict], str | None] | None = None,
    cost: Cost = DEFAULT_COST,
    view: Callable | None = None,
    threaded: bool = False,
    split_kernel: Callable | None = None,
) -> OpDef:
    """Register an op; `args` items are names or Arg. Registering a name twice is an error.

    The keywords are the OpDef properties (see OpDef for their meaning).
    """
    if name in _REGISTRY:
        raise ValueError(f"op {name} registered twice")
    arg_specs = tuple(a if isinstance(a, Arg) else Arg(a) for a in args)
    op = OpDef(
        name,
        arg_specs,
        tuple(attrs_schema),
        infer,
        kernel,
        grad,
        pure,
        canonicalize,
        positional_attrs,
        print_positional=print_positional,
        print_omit=print_omit or {},
        inplace=inplace,
        aliases=aliases,
        tvm_note=tvm_note,
        cost=cost,
        view=view,
        threaded=threaded,
        split_kernel=split_kernel,
    )
    _REGISTRY[name] = op
    return op


def no_gradient(call, out, g) -> list:
    """The gradient rule of ops none of whose arguments receives a gradient (comparisons, creation)."""
    return [None] * len(call.args)


def get(name: str) -> OpDef:
    """The op named `relax.x` (or its script spelling `R.x`)."""
    if name.startswith("R."):
        name = "relax." + name[2:]
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(name) from None


def lookup(name: str) -> OpDef | None:
    if name.startswith("R."):
        name = "relax." + name[2:]
    return _REGISTRY.get(name)


def op_suggestion(name: str) -> str:
    """"; did you mean 'R.x'?" for an unknown op name written `R.y` or `relax.y`."""
    script = name.startswith("R.")
    key = "relax." + name[2:] if script else name
    hint = did_you_mean(key, _REGISTRY)
    return hint.replace("'relax.", "'R.") if script else hint


def all_ops() -> list[OpDef]:
    return list(_REGISTRY.values())
