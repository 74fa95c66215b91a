"""`from_exported_program` / `from_torch`: a `torch.export.ExportedProgram`'s fx graph, node by node,
into a retrograd IRModule built with BlockBuilder (torch is imported only inside these functions).

The program's composites (linear, conv2d, batch_norm, layer_norm, scaled_dot_product_attention, ...)
map to retrograd's fused ops (retrograd/frontend/aten_nn.py), the rest of ATen to its tensor ops
(retrograd/frontend/aten_ops.py). The graph is read as torch.export leaves it; in-place ops on
whole tensors (relu_, add_, batch_norm's running statistics) rebind their target, and only a graph
that writes into a view is functionalized first (`ep.run_decompositions({})`).
"""

from __future__ import annotations

import re

from retrograd.errors import DiagnosticError, UnsupportedError
from retrograd.frontend import aten_data_dependent, aten_index, aten_math, aten_nn, aten_ops, aten_select
from retrograd.frontend.aten_common import Converter, dtype_of
from retrograd.ir.expr import Function, Tuple, Var
from retrograd.ir.module import IRModule
from retrograd.ops.torch_kernels import to_numpy
from retrograd.runtime.params_io import ir_name

_IDENT_BAD = re.compile(r"[^A-Za-z0-9_]")
# Nodes with no value in retrograd's IR: run-time checks torch.export inserts.
_CHECKS = {"_assert_scalar", "_assert_tensor_metadata", "sym_constrain_range", "sym_constrain_range_for_size",
           "_assert_async", "_print", "_functional_assert_async"}
_SYM_OPS = {"sym_size", "sym_numel", "sym_stride", "sym_storage_offset"}

TABLE = {**aten_ops.TABLE, **aten_index.TABLE, **aten_math.TABLE, **aten_select.TABLE, **aten_nn.TABLE, **aten_data_dependent.TABLE}


def _torch():
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is the caller's
        raise UnsupportedError("importing a PyTorch model needs torch: pip install 'retrograd[torch]'") from None
    return torch


def from_torch(module, example_args, dynamic_shapes=None, *, seed: int = 0):
    """Export `module` with torch.export (non-strict) on `example_args`, then `from_exported_program`.
    `dynamic_shapes` is torch.export's; a `torch.export.Dim("batch")` becomes the IR dim `batch`."""
    torch = _torch()
    if not isinstance(example_args, tuple):
        example_args = tuple(example_args) if isinstance(example_args, list) else (example_args,)
    ep = torch.export.export(module, example_args, dynamic_shapes=dynamic_shapes, strict=False)
    return from_exported_program(ep, seed=seed, dim_names=dim_names(ep, dynamic_shapes))


def dim_names(ep, dynamic_shapes) -> dict:
    """sympy symbol name -> the user's Dim name, read off the user inputs' shapes."""
    if dynamic_shapes is None:
        return {}
    torch = _torch()
    specs = dynamic_shapes.values() if isinstance(dynamic_shapes, dict) else dynamic_shapes
    users = [n for n in ep.graph.nodes if n.op == "placeholder"]
    user_names = {s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"}
    users = [n for n in users if n.name in user_names]
    names = {}
    for node, spec in zip(users, specs):
        val = node.meta.get("val")
        if spec is None or not hasattr(val, "shape"):
            continue
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        for axis, d in items:
            size = val.shape[axis]
            name = getattr(d, "__name__", None)
            if isinstance(size, torch.SymInt) and name and _IDENT_BAD.search(name) is None:
                expr = size.node.expr
                if expr.is_Symbol:
                    names.setdefault(str(expr), name)
    return names


def from_exported_program(ep, *, seed: int = 0, dim_names: dict | None = None):
    """(IRModule, params) of a `torch.export.ExportedProgram`.

    `mod["main"]` takes the user inputs first, in the program's order, then one parameter per entry
    of `params` ({PyTorch dotted name: NumPy view of the tensor}, parameters, buffers and lifted
    constants, each tensor once: tied weights are one parameter) and returns a tuple: the user's
    outputs, then the new value of each buffer the program mutates (BatchNorm's running statistics
    in training mode), in the program's buffer order. Its attributes `buffers` (IR names of the
    parameters that are buffers or lifted constants: PyTorch trains neither) and `mutated_buffers` (the buffer each of those last outputs updates)
    tell `setup_trainer` what to carry from step to step instead of training. Dropout in training mode
    draws masks from `seed` (one seed per dropout call, `seed + k`).
    """
    if _writes_into_views(ep):
        ep = ep.run_decompositions({})
    ep = _decompose_unmapped(ep)
    return _Importer(ep, seed, dim_names or {}).run()


def _converter(name: str) -> tuple:
    """(the TABLE entry converting the ATen op `name` (`add.Tensor`) or None, whether it is the entry of the
    op's out-of-place form: `name` an in-place op (`relu_`) without an entry of its own)."""
    base = name.split(".")[0]
    conv = TABLE.get(name) or TABLE.get(base)
    if conv is None and base.endswith("_") and not base.startswith("_"):
        return TABLE.get(name.replace(base, base[:-1], 1)) or TABLE.get(base[:-1]), True
    return conv, False


_NOT_CONVERTED = _CHECKS | _SYM_OPS  # nodes the importer reads without a converter


def _unmapped(ep) -> bool:
    for node in ep.graph.nodes:
        if node.op == "call_function" and hasattr(node.target, "_schema"):
            name = _op_name(node.target)
            if name.split(".")[0] not in _NOT_CONVERTED and _converter(name)[0] is None:
                return True
    return False


def _decompose_unmapped(ep, rounds: int = 4):
    """Ops retrograd has no converter for (composites such as var_mean, cosine_similarity, huber_loss,
    lstm, the antialiased or bicubic upsamplings) replaced by torch's own decompositions into ops it
    has; mapped ops are kept as they are. Each round may leave ops a decomposition produced: the next
    decomposes those. Whatever has no decomposition is reported by the importer, naming the op."""
    table = None
    for _ in range(rounds):
        if not _unmapped(ep):
            break
        if table is None:
            table = {op: fn for op, fn in _torch().export.default_decompositions().items()
                     if _converter(_op_name(op))[0] is None}
        ep = ep.run_decompositions(table)
    return ep


def _writes_into_views(ep) -> bool:
    """Whether an in-place op writes into a tensor that another one aliases (a view of it, or it a view)."""
    for node in ep.graph.nodes:
        target = node.target
        schema = getattr(target, "_schema", None)
        if node.op != "call_function" or schema is None or not schema.is_mutable:
            continue
        for arg, value in zip(schema.arguments, node.args):
            if arg.alias_info is None or not arg.alias_info.is_write or not hasattr(value, "op"):
                continue
            if value.op == "call_function" and _is_view(value.target):
                return True
            if any(_is_view(u.target) for u in value.users if u.op == "call_function" and u is not node):
                return True
    return False


def _is_view(target) -> bool:
    schema = getattr(target, "_schema", None)
    if schema is None or schema.is_mutable or not schema.returns:
        return False
    info = schema.returns[0].alias_info
    return info is not None and not info.is_write


class _Importer:
    def __init__(self, ep, seed: int, dim_names: dict):
        self.ep = ep
        self.cx = Converter(seed, dim_names)

    def run(self):
        ep, cx = self.ep, self.cx
        sig = ep.graph_signature
        nodes = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
        state = ep.state_dict
        consts = getattr(ep, "constants", {}) or {}
        users, weights, params, tied = [], [], {}, {}
        buffers = {}  # PyTorch name of a buffer -> its IR parameter's name
        taken: set[str] = set()
        for spec in sig.input_specs:
            node = nodes[spec.arg.name]
            kind = spec.kind.name
            if kind == "USER_INPUT":
                var = cx.placeholder(node, _unique(ir_name(node.name), taken))
                users.append(var)
            elif kind in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR"):
                tensor = state[spec.target] if spec.target in state else consts[spec.target]
                key = _storage_key(tensor)
                if key in tied:  # one tensor under two names (tied weights): one parameter
                    cx.env[node] = tied[key]
                    continue
                array = _numpy(tensor, spec.target)
                var = cx.placeholder(node, _unique(ir_name(spec.target), taken))
                cx.buffers[node] = spec.target
                if kind != "PARAMETER":  # a lifted constant (a plain tensor attribute): a buffer never written
                    buffers[spec.target] = var.name_hint
                weights.append(var)
                params[spec.target] = array
                tied[key] = var
            else:
                raise UnsupportedError(f"from_exported_program: input '{spec.arg.name}' is a {kind}, which retrograd cannot hold")
        cx.begin()
        output = None
        for node in ep.graph.nodes:
            if node.op == "call_function":
                self.call(node)
            elif node.op == "output":
                output = node
            elif node.op == "get_attr":
                raise UnsupportedError(f"from_exported_program: fx node '{node.name}' reads submodule attribute "
                                       f"'{node.target}' (control flow or a nested graph), which is not supported")
        outs, mutated = self.outputs(output)
        attrs = {"num_input": len(users)}
        if buffers:  # what training carries from step to step instead of training it (training/buffers.py)
            attrs.update(buffers=tuple(buffers.values()), mutated_buffers=tuple(buffers.get(t, t) for t in mutated))
        func = Function(tuple(users + weights), cx.end(Tuple(tuple(outs))), attrs=attrs)
        return IRModule({"main": func}), params

    def call(self, node) -> None:
        cx = self.cx
        target = node.target
        name = _op_name(target)
        base = name.split(".")[0]
        if base in _CHECKS:
            return
        val = node.meta.get("val")
        if type(val).__name__ == "SymBool" and all(_op_name(u.target).split(".")[0] in _CHECKS for u in node.users):
            return  # the condition of a runtime assertion on a data-dependent size (nonzero's, unique's)
        if base in _SYM_OPS or (name.startswith("_operator.") and not hasattr(val, "shape")):
            cx.env[node] = cx.sym_value(val, node)
            return
        if name == "_operator.getitem":
            seq = cx.value(node.args[0])
            cx.env[node] = seq[node.args[1]]
            return
        conv, inplace = _converter(name)
        if conv is None:
            raise UnsupportedError(f"from_exported_program: ATen op {name} has no retrograd mapping (fx node "
                                   f"'{node.name}'){_source(node)}")
        try:
            cx.node = node
            result = conv(cx, cx.arguments(node, _functional(target) if inplace else None))
            result = cx.settle(result, val, node)
        except DiagnosticError as err:
            err.notes.append(f"converting fx node '{node.name}' ({name}){_source(node, inline=True)}")
            raise
        except (TypeError, ValueError, KeyError, IndexError) as err:
            raise UnsupportedError(f"from_exported_program: cannot convert {name} (fx node '{node.name}'): {err}"
                                   f"{_source(node)}") from None
        cx.env[node] = result
        if inplace or _mutates_first(target):
            cx.assign(node.args[0], result, node)

    def outputs(self, output) -> tuple[list, list]:
        """(the output values: the user's, then each mutated buffer's new value; those buffers' names)."""
        cx, sig = self.cx, self.ep.graph_signature
        cx.node = None  # what reads the values now is the program's output
        values = output.args[0]
        user, mutated = [], {}
        for spec, v in zip(sig.output_specs, values):
            kind = spec.kind.name
            if kind == "USER_OUTPUT":
                value = cx.value(v)
                if not isinstance(value, Var | tuple) and not hasattr(value, "struct_info"):
                    raise UnsupportedError(f"from_exported_program: output '{spec.arg.name}' is the Python value "
                                           f"{value!r}, not a tensor")
                user.append(value)
            elif kind == "BUFFER_MUTATION":
                mutated[spec.target] = cx.value(v)
            else:
                raise UnsupportedError(f"from_exported_program: output '{spec.arg.name}' is a {kind}, which is not supported")
        for node, target in cx.buffers.items():  # buffers written in place in a non-functional graph
            if node in cx.written and target not in mutated:
                mutated[target] = cx.env[node]
        order = list(cx.buffers.values())
        targets = sorted(mutated, key=order.index)
        return user + [mutated[t] for t in targets], targets


def _functional(target):
    """The out-of-place overload of an in-place op (relu_ -> relu), whose argument names converters use."""
    import torch

    packet = getattr(torch.ops.aten, target._schema.name.split("::")[1][:-1], None)
    overload = getattr(packet, target._overloadname, None) if packet is not None else None
    return overload._schema if overload is not None else None


def _mutates_first(target) -> bool:
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.arguments or not schema.is_mutable:
        return False
    info = schema.arguments[0].alias_info
    return info is not None and info.is_write


def _op_name(target) -> str:
    """`aten.add.Tensor` for an OpOverload, `_operator.getitem` for a Python function."""
    if hasattr(target, "_schema"):
        return str(target).removeprefix("aten.")
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__name__', target)}"


def _source(node, inline: bool = False) -> str:
    """The user's source line that produced the node (the last frame torch.export recorded)."""
    trace = node.meta.get("stack_trace") or ""
    lines = [ln.strip() for ln in trace.strip().splitlines() if ln.strip()]
    frames = [i for i, ln in enumerate(lines) if ln.startswith("File ")]
    if not frames:
        return ""
    where = lines[frames[-1]]
    code = lines[frames[-1] + 1] if frames[-1] + 1 < len(lines) else ""
    text = f"{where}: {code}" if code and not code.startswith("File ") else where
    return f", from {text}" if inline else f"\n  from {text}"


def _unique(name: str, taken: set) -> str:
    out, k = name, 1
    while out in taken:
        out, k = f"{name}_{k}", k + 1
    taken.add(out)
    return out


def _storage_key(t) -> tuple:
    """Tensors with one key are one tensor (the same storage, offset, shape, strides and dtype)."""
    return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), str(t.dtype))


def _numpy(tensor, name: str):
    """The one NumPy view of a parameter's storage (no copy); a bfloat16 tensor needs ml_dtypes."""
    dtype_of(tensor.dtype)  # an error naming a dtype retrograd cannot hold
    try:
        return to_numpy(tensor)
    except UnsupportedError as err:  # bfloat16 / float8 without ml_dtypes
        raise UnsupportedError(f"parameter '{name}': {err.message}") from None
