"""`from_onnx`: an ONNX graph (a ModelProto or a file path) rebuilt as a retrograd IRModule.

Nodes are converted in graph order through the BlockBuilder and the op registry (the converters live
in `onnx_ops_*.py`, one table keyed by ONNX op type). Values whose content an op needs at import
time (a Reshape's shape, a Slice's starts, reduction axes) are read from constants when they are
ones: Constant nodes, initializers used only so, and sub-graphs of those folded here. Given at run
time instead, they go through the runtime variants of onnx_ops_dynamic.py (results of known rank
and unknown extents); `static_inputs` lets a caller fix such a graph input at import time anyway.
"""

from __future__ import annotations

import numpy as np

from retrograd.errors import DiagnosticError, UnsupportedError
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import Constant, Function, Tuple, Var
from retrograd.ir.module import IRModule
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.frontend.onnx_attrs import invalid_attribute
from retrograd.frontend.onnx_functions import function_body
from retrograd.frontend.onnx_ops import CONVERTERS, NeedsConstant, OnnxNodeError


def _onnx():
    try:
        import onnx
    except ImportError:  # pragma: no cover - exercised only without onnx
        raise UnsupportedError("from_onnx needs the onnx package: pip install onnx (or retrograd[onnx])") from None
    return onnx


def np_dtype(elem_type: int) -> str:
    """The NumPy dtype name of an ONNX tensor element type."""
    onnx = _onnx()
    try:
        return str(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)))
    except (KeyError, TypeError):
        raise UnsupportedError(f"from_onnx: ONNX element type {elem_type} has no NumPy dtype retrograd runs") from None


def _value_sinfo(value_info) -> TensorStructInfo:
    t = value_info.type
    if not t.HasField("tensor_type"):
        raise UnsupportedError(f"from_onnx: graph value '{value_info.name}' is not a tensor (sequences, maps and optionals are not supported)")
    tt = t.tensor_type
    dtype = np_dtype(tt.elem_type)
    if not tt.HasField("shape"):
        return TensorStructInfo(None, dtype, -1)
    dims = []
    for i, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        else:
            dims.append(_sym(d.dim_param or f"{value_info.name}_d{i}"))
    return TensorStructInfo(tuple(dims), dtype)


def _sym(name: str) -> str:
    clean = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return clean if clean and not clean[0].isdigit() else f"d_{clean}"


def _ir_name(name: str, used: set) -> str:
    base = _sym(name) or "v"
    out, n = base, 1
    while out in used:
        out, n = f"{base}_{n}", n + 1
    used.add(out)
    return out


def load_model(model):
    """An onnx.ModelProto from a ModelProto, a path or bytes; UnsupportedError when it cannot be read."""
    onnx = _onnx()
    if isinstance(model, onnx.ModelProto):
        return model
    what = "the bytes given" if isinstance(model, bytes | bytearray) else f"'{model}'"
    try:
        if isinstance(model, bytes | bytearray):
            return onnx.load_from_string(bytes(model))
        return onnx.load(str(model))
    except OSError as err:
        raise UnsupportedError(f"from_onnx: cannot read {what}: {err.strerror or err}") from None
    except Exception as err:  # protobuf's DecodeError and the like: not an ONNX model
        raise UnsupportedError(f"from_onnx: {what} is not a readable ONNX model ({type(err).__name__}: {err})") from None


def from_onnx(model, static_inputs: dict | None = None) -> tuple[IRModule, dict]:
    """(mod, params) of an ONNX model: mod["main"] takes the graph inputs that are not initializers,
    in the graph's order, then one parameter per entry of `params` (initializer name -> NumPy array).

    An initializer read only as an attribute value (a shape, axes) is folded in and not a parameter.
    `static_inputs` maps graph-input names to values fixed at import (they stop being parameters).
    An unsupported operator or attribute raises UnsupportedError naming the node.
    """
    onnx = _onnx()
    model = load_model(model)
    opset = {imp.domain or "ai.onnx": imp.version for imp in model.opset_import}
    importer = GraphImporter(model.graph, opset.get("ai.onnx", 21), static_inputs or {}, onnx)
    try:
        return importer.run()
    except (DiagnosticError, MemoryError, RecursionError):
        raise
    except Exception as err:  # a malformed model the checks before conversion let through: name the node
        node = importer.node
        where = "the graph" if node is None else f"node '{node.name or '(unnamed)'}' ({node.op_type})"
        raise OnnxNodeError(f"from_onnx: {where}: malformed ({type(err).__name__}: {err})") from err


class GraphImporter:
    """Converts one ONNX graph; `env` maps ONNX value names to retrograd expressions."""

    def __init__(self, graph, opset: int, static_inputs: dict, onnx):
        self.graph = graph
        self.opset = opset
        self.onnx = onnx
        self.static_inputs = {k: np.asarray(v) for k, v in static_inputs.items()}
        self.bb = BlockBuilder()
        self.buffers: set = set()  # parameters that are model state, not weights (BatchNormalization's statistics)
        self.buffer_updates: dict = {}  # output name -> the statistic it is the new value of (training mode)
        self.env: dict[str, object] = {}
        self.consts: dict[str, np.ndarray] = {}
        self.names: set[str] = set()
        self.node = None

    # -- helpers the converters use ---------------------------------------------------------------
    def emit(self, expr, hint: str = "lv"):
        return self.bb.emit(expr, _sym(hint) or "lv")

    def const(self, value, dtype: str | None = None) -> Constant:
        arr = np.array(value, dtype=dtype) if dtype is not None else np.array(value)
        arr.setflags(write=False)
        return Constant(arr, TensorStructInfo(arr.shape, str(arr.dtype)))

    def value_of(self, name: str) -> np.ndarray:
        """The content of ONNX value `name`, which must be known at import time."""
        if name in self.consts:
            return self.consts[name]
        raise NeedsConstant(name)

    def known(self, name: str) -> bool:
        return name in self.consts

    # -- driver -----------------------------------------------------------------------------------
    def run(self) -> tuple[IRModule, dict]:
        g = self.graph
        numpy_helper = self.onnx.numpy_helper
        inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        for t in g.sparse_initializer:
            raise UnsupportedError(f"from_onnx: sparse initializer '{t.values.name}' is not supported")
        value_uses = self._attribute_only_uses(inits)
        params_in, params_w, weights = [], [], {}
        for vi in g.input:
            if vi.name in inits:
                continue
            if vi.name in self.static_inputs:
                self.consts[vi.name] = self.static_inputs[vi.name]
                self.env[vi.name] = self.const(self.static_inputs[vi.name])
                continue
            var = Var(_ir_name(vi.name, self.names), _value_sinfo(vi))
            self.env[vi.name] = var
            params_in.append(var)
        for name, arr in inits.items():
            self.consts[name] = arr
            if name in value_uses:
                self.env[name] = self.const(arr)
                continue
            var = Var(_ir_name(name, self.names), TensorStructInfo(arr.shape, str(arr.dtype)))
            self.env[name] = var
            params_w.append(var)
            weights[name] = arr
        bb = self.bb
        bb.begin_scope()
        bb.begin_block(dataflow=False)
        for index, node in enumerate(g.node):
            self.node = node
            self._convert(node, index)
        outs = []
        for o in g.output:
            if o.name not in self.env:
                raise UnsupportedError(f"from_onnx: graph output '{o.name}' is not computed by any node")
            outs.append(self.env[o.name])
        bb.end_block()
        body = bb.end_scope(outs[0] if len(outs) == 1 else Tuple(tuple(outs)))
        # training (setup_trainer) keeps them fixed instead of training them (training/buffers.py)
        attrs = {"buffers": tuple(v.name_hint for v in params_w if v in self.buffers)} if self.buffers else {}
        mutated = self._mutated_buffers([o.name for o in g.output], params_w)
        if mutated:
            attrs["mutated_buffers"] = mutated
        func = Function(tuple(params_in + params_w), body, body.struct_info, attrs=attrs)
        return IRModule({"main": func}), weights

    def _mutated_buffers(self, outputs: list[str], weights: list) -> tuple:
        """The initializers that the graph's last outputs are the new values of (training-mode
        BatchNormalization's running_mean / running_var given as graph outputs), as `mutated_buffers`
        (see torch_import.py): only a run of them at the end, after at least one other output, since
        training takes the outputs after the model's own as the buffers' updates."""
        k = 0
        while k < len(outputs) - 1 and self.buffer_updates.get(outputs[-1 - k]) in weights:
            k += 1
        return tuple(self.buffer_updates[o].name_hint for o in outputs[len(outputs) - k:])

    def _fold(self, node):
        """A node whose inputs are all import-time constants and whose result is small (shape
        arithmetic) is evaluated here, by ONNX's reference implementation, into constants."""
        if node.op_type in _NO_FOLD or not node.input or not all(n in self.consts for n in node.input if n):
            return None
        if any(self.consts[n].dtype.kind not in "iub" for n in node.input if n):
            return None  # only integer (shape) arithmetic is folded; real values go through the kernels
        if sum(self.consts[n].size for n in node.input if n) > _FOLD_LIMIT:
            return None
        from onnx.reference import ReferenceEvaluator

        helper = self.onnx.helper
        try:
            ins = [n for n in node.input if n]
            graph = helper.make_graph([node], "fold", [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(self.consts[n].dtype), self.consts[n].shape) for n in ins], [helper.make_tensor_value_info(o, 0, None) for o in node.output if o])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
            outs = ReferenceEvaluator(model).run(None, {n: self.consts[n] for n in ins})
        except Exception:  # not foldable here: converted as a runtime op
            return None
        it = iter(outs)
        return [np.asarray(next(it)) if o else None for o in node.output]

    def _expand(self, node, index: int, where: str) -> None:
        """Import a node without a converter as the nodes of its ONNX function body (onnx_functions.py)."""
        try:
            found = function_body(self.onnx, node, self.opset, [self._type_of(n) for n in node.input], f"{node.op_type}_{index}_")
        except UnsupportedError as err:
            raise OnnxNodeError(f"from_onnx: {where}: {err.message}") from err
        if found is None:
            raise OnnxNodeError(f"from_onnx: {where}: operator {node.op_type} is not supported")
        nodes, opset = found
        saved = self.opset
        self.opset = opset
        try:
            self._convert_inner(node, nodes, index, f"{where}, in its ONNX function body")
        finally:
            self.opset = saved

    def _convert_inner(self, node, nodes, index: int, where: str) -> None:
        """Convert the nodes standing for `node` (a function body, an If's branch); errors say where they are."""
        try:
            for inner in nodes:
                self.node = inner
                self._convert(inner, index)
        except OnnxNodeError as err:
            message = f"from_onnx: {where}: {err.message.removeprefix('from_onnx: ')}"
            if isinstance(err, NeedsConstant):
                raise NeedsConstant(err.name, message) from err
            raise OnnxNodeError(message) from err
        finally:
            self.node = node

    def _if(self, node, index: int, where: str) -> None:
        """An If whose condition is known at import time (a constant, or folded from shapes): the nodes of
        the branch it takes, in place. A condition computed at run time is not supported."""
        cond = node.input[0]
        if not self.known(cond):
            raise NeedsConstant(cond, f"from_onnx: {where}: the condition '{cond}' is computed at run time; only an "
                                      "If whose condition is known at import time is supported")
        taken = "then_branch" if bool(np.asarray(self.consts[cond]).reshape(-1)[0]) else "else_branch"
        branch = next(self.onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == taken)
        numpy_helper = self.onnx.numpy_helper
        for t in branch.initializer:
            self.consts[t.name] = numpy_helper.to_array(t)
            self.env[t.name] = self.const(self.consts[t.name])
        self._convert_inner(node, branch.node, index, f"{where}, in its {taken}")
        for out, value in zip(node.output, branch.output):
            if out:
                self.env[out] = self.env[value.name]
                if value.name in self.consts:
                    self.consts[out] = self.consts[value.name]

    def _type_of(self, name: str):
        """The onnx TypeProto of an imported value (what a context-dependent function body is built for)."""
        helper = self.onnx.helper
        if not name:
            return self.onnx.TypeProto()
        sinfo = self.env[name].struct_info
        shape = None if sinfo.shape is None else [d if isinstance(d, int) else str(d) for d in sinfo.shape]
        return helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(np.dtype(sinfo.dtype)), shape)

    def _attribute_only_uses(self, inits: dict) -> set:
        """Initializers that every consumer reads at import time (by the converters' table)."""
        from retrograd.frontend.onnx_ops import VALUE_INPUTS

        uses: dict[str, bool] = {}
        for node in self.graph.node:
            value_slots = VALUE_INPUTS.get(node.op_type, ())
            for i, name in enumerate(node.input):
                if name in inits:
                    uses[name] = uses.get(name, True) and i in value_slots
        return {n for n, only in uses.items() if only}

    def _check_schema(self, node, where: str) -> None:
        """The node's inputs and attributes against its ONNX schema at the model's opset: a required input
        left out, too many inputs or a required attribute missing is named here, not met by a converter."""
        kinds = self.onnx.AttributeProto
        simple = {a.name: a.i if a.type == kinds.INT else a.s.decode(errors="replace")
                  for a in node.attribute if a.type in (kinds.INT, kinds.STRING)}
        wrong = invalid_attribute(node.op_type, simple)
        if wrong:
            raise OnnxNodeError(f"from_onnx: {where}: {wrong}")
        defs = self.onnx.defs
        try:
            schema = defs.get_schema(node.op_type, self.opset, node.domain or "")
        except defs.SchemaError:
            return  # no such operator at this opset: the converters' table says what is supported
        n = len(node.input)
        if not schema.min_input <= n <= schema.max_input:
            expected = (f"{schema.min_input}" if schema.min_input == schema.max_input
                        else f"from {schema.min_input} to {schema.max_input}")
            raise OnnxNodeError(f"from_onnx: {where}: expected {expected} inputs, got {n}")
        single = defs.OpSchema.FormalParameterOption.Single
        for i, formal in enumerate(schema.inputs[:n]):
            if formal.option == single and not node.input[i]:
                raise OnnxNodeError(f"from_onnx: {where}: input {i} ('{formal.name}') is required but empty")
        given = {a.name for a in node.attribute}
        missing = [name for name, spec in schema.attributes.items() if spec.required and name not in given]
        if missing:
            raise OnnxNodeError(f"from_onnx: {where}: required attribute {', '.join(map(repr, missing))} is missing")

    def _convert(self, node, index: int) -> None:
        where = f"node {index} '{node.name or '(unnamed)'}' ({node.op_type})"
        if node.domain not in ("", "ai.onnx"):
            raise OnnxNodeError(f"from_onnx: {where}: operator domain '{node.domain}' is not supported")
        for name in node.input:
            if name and name not in self.env:
                raise OnnxNodeError(f"from_onnx: {where}: input '{name}' is not defined before the node")
        self._check_schema(node, where)
        if node.op_type == "If":
            self._if(node, index, where)
            return
        conv = CONVERTERS.get(node.op_type)
        if conv is None:
            self._expand(node, index, where)
            return
        attrs = {a.name: self.onnx.helper.get_attribute_value(a) for a in node.attribute}
        for k, v in list(attrs.items()):
            if isinstance(v, bytes) or isinstance(v, list) and v and isinstance(v[0], bytes):
                try:
                    attrs[k] = v.decode() if isinstance(v, bytes) else [x.decode() for x in v]
                except UnicodeDecodeError:
                    raise OnnxNodeError(f"from_onnx: {where}: attribute '{k}' is not UTF-8 text") from None
            elif isinstance(v, self.onnx.TensorProto):
                attrs[k] = self.onnx.numpy_helper.to_array(v)
            elif isinstance(v, self.onnx.GraphProto):
                raise OnnxNodeError(f"from_onnx: {where}: sub-graph attribute '{k}' (control flow) is not supported")
        inputs = [self.env[n] if n else None for n in node.input]
        try:
            folded = self._fold(node)
            result = folded if folded is not None else conv(self, node, inputs, attrs)
        except NeedsConstant as need:
            raise NeedsConstant(need.name, f"from_onnx: {where}: input '{need.name}' must be a constant") from None
        except OnnxNodeError:
            raise
        except (UnsupportedError, ValueError, TypeError, KeyError, IndexError, AttributeError, ArithmeticError) as err:
            raise OnnxNodeError(f"from_onnx: {where}: {err}") from err
        except Exception as err:  # an op's inference error: name the node
            if type(err).__module__.startswith("retrograd"):
                raise OnnxNodeError(f"from_onnx: {where}: {err}") from err
            raise
        if not isinstance(result, list | tuple):
            result = [result]
        for i, name in enumerate(node.output):
            if not name:
                continue
            if i >= len(result) or result[i] is None:
                raise OnnxNodeError(f"from_onnx: {where}: output {i} ('{name}') is not supported")
            value = result[i]
            if isinstance(value, np.ndarray):
                self.consts[name] = value
                self.env[name] = self.const(value)
                continue
            if not isinstance(value, Var | Constant):
                try:
                    value = self.emit(value, name)
                except DiagnosticError as err:  # the inference of what the converter built
                    raise OnnxNodeError(f"from_onnx: {where}: {err}") from err
            if isinstance(value, Constant):
                self.consts[name] = value.data
            self.env[name] = value


_NO_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout"}
_FOLD_LIMIT = 4096
