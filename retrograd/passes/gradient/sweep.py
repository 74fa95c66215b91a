"""The reverse sweep of the Gradient pass: adjoint accumulation, un-broadcasting, tuples, If and calls."""

from __future__ import annotations

from typing import Protocol

from retrograd.errors import DiagnosticError, GradientError
from retrograd.ir.vars import free_vars
from retrograd.ir.block import VarBinding
from retrograd.ir.copy import copy_binding, copy_expr
from retrograd.ir.expr import Call, Constant, Expr, Function, GlobalVar, If, PrimValue, SeqExpr, ShapeExpr, StringImm
from retrograd.ir.expr import Tuple, TupleGetItem, Var, is_leaf, prim_value, shape_expr, tuple_fields_of
from retrograd.ir.nested import postorder, trampoline
from retrograd.ir.struct_info import PrimStructInfo, TensorStructInfo, TupleStructInfo
from retrograd.ops.composed import ComposedVjp
from retrograd.ops.registry import get as get_op
from retrograd.ops.shape_utils import broadcast_shapes
from retrograd.passes.gradient.activity import compute_active
from retrograd.passes.gradient.templates import RuleTemplates
from retrograd.passes.gradient.transposed import TransposedOperands

_NO_GRAD = "relax.grad.no_grad"


def _is_no_grad(expr) -> bool:
    return isinstance(expr, Call) and getattr(expr.op, "name", None) == _NO_GRAD


class SweepHost(Protocol):
    """What a sweep asks of the function it differentiates."""

    def error(self, message: str, binding=None) -> GradientError:
        """A located error naming the function (and the binding)."""

    def vjp_function(self, callee: str, binding: VarBinding) -> tuple[GlobalVar, list[int]]:
        """`<callee>_vjp` and the indices of the callee's parameters it returns gradients for."""

    def sparse_contribution(self, sweep: Sweep, binding: VarBinding, call: Call, adj) -> bool:
        """Take the gradient of a sparse table's row gather instead of the sweep (True if taken)."""

    def restore(self, expr: Expr) -> Expr:
        """`expr` as the backward part reads it: forward values that are not kept are recomputed."""


class Sweep:
    """One reverse sweep over straight-line bindings. `adj` maps a var to its adjoint so far:
    an expression (a leaf, or a var holding a tuple), a Python tuple of per-field adjoints, or
    absent (zero). Zeros are only materialized when a whole value is needed."""

    def __init__(self, host: SweepHost, bb, active: set, templates: RuleTemplates | None = None):
        self.host = host
        self.bb = bb
        self.active = active
        self.adj: dict = {}
        # Rule templates (templates.py): only where the backward part reads forward values as they are
        # (no recomputation emitted by restore).
        self.templates = templates
        self._active_tuples: dict = {}  # id -> (tuple, is_active), see is_active
        # Transposed matmul operands in the clean-up's form (transposed.py): None where not done (no
        # clean-up to come, or the sweep of a part of a function).
        self.transposed: TransposedOperands | None = None
        self.before = None  # the forward binding before a matmul swept, when `transposed` is set

    # -- adjoint algebra ------------------------------------------------------
    # Tuples nest to any depth: what recurses over a tuple's fields is a generator run by `trampoline`
    # (the recursion's order, so bindings are emitted as before, without Python frames).

    def is_active(self, expr) -> bool:
        if isinstance(expr, Var):
            return expr in self.active
        if isinstance(expr, Tuple):
            # Found for every level of the nest at once, children first, and remembered (with the tuple,
            # so that its id stays its own): `add` asks at each level, and walking the rest of the nest
            # each time would be quadratic.
            memo = self._active_tuples
            hit = memo.get(id(expr))
            if hit is None or hit[0] is not expr:
                for t in postorder(expr, tuple_fields_of):
                    if isinstance(t, Tuple):
                        found = any(
                            memo[id(f)][1] if isinstance(f, Tuple) else isinstance(f, Var) and f in self.active
                            for f in t.fields
                        )
                        memo[id(t)] = (t, found)
                hit = memo[id(expr)]
            return hit[1]
        return False

    def add(self, base: Expr, incr) -> None:
        """Accumulate `incr` into the adjoint of `base` (a var, or a tuple expression of them)."""
        if incr is None:
            return
        if isinstance(base, Var):
            if base in self.active:
                old = self.adj.get(base)
                self.adj[base] = incr if old is None else self.accumulate(old, incr, base.struct_info, base.name_hint)
        elif isinstance(base, Tuple):
            trampoline(self._add_fields(base, incr))
        # Constants, shapes and prim values carry no gradient.

    def _add_fields(self, base: Tuple, incr):
        for i, f in enumerate(base.fields):
            if self.is_active(f):
                part = self.field(incr, i)
                if isinstance(f, Tuple) and part is not None:
                    yield self._add_fields(f, part)
                else:
                    self.add(f, part)

    def field(self, adj, i: int):
        if adj is None:
            return None
        if isinstance(adj, tuple):
            return adj[i]
        if isinstance(adj, Tuple):
            return adj.fields[i]
        return self.bb.emit(TupleGetItem(adj, i), "lv")

    def accumulate(self, a, b, sinfo, name: str):
        if a is None:
            return b
        if b is None:
            return a
        if isinstance(sinfo, TupleStructInfo):
            return trampoline(self._accumulate_fields(a, b, sinfo, name))
        if not isinstance(sinfo, TensorStructInfo):
            return a  # a prim's or a shape's "adjoint" is a placeholder (see zeros): nothing to add
        return self.bb.emit(get_op("relax.add")(a, b), f"{name}_adjoint")

    def _accumulate_fields(self, a, b, sinfo: TupleStructInfo, name: str):
        out = []
        for i, s in enumerate(sinfo.fields):
            x, y = self.field(a, i), self.field(b, i)
            if x is not None and y is not None and isinstance(s, TupleStructInfo):
                out.append((yield self._accumulate_fields(x, y, s, name)))
            else:
                out.append(self.accumulate(x, y, s, name))
        return tuple(out)

    def materialize(self, adj, sinfo, like: Expr | None = None) -> Expr:
        """The adjoint as an IR value (a leaf or a tuple of leaves), with zeros where it is absent."""
        if isinstance(adj, tuple):
            return self.bb.normalize(trampoline(self._materialize(adj, sinfo, like)))
        if adj is None:
            return self.zeros(sinfo, like)
        return adj

    def _materialize(self, adj, sinfo, like):
        if not isinstance(adj, tuple):
            return self.materialize(adj, sinfo, like)
        fields = []
        for i, (a, s) in enumerate(zip(adj, sinfo.fields)):
            fields.append((yield self._materialize(a, s, None if like is None else self._like_field(like, i))))
        return Tuple(fields)  # normalized once, by materialize (each level would walk the rest of the nest)

    def _like_field(self, like, i):
        if isinstance(like, Tuple):
            return like.fields[i]
        return self.bb.emit(TupleGetItem(like, i), "lv")

    def as_tuple(self, adj, sinfo, like) -> Expr:
        """A tuple-valued adjoint as a Tuple expression, the form gradient rules receive."""
        value = self.materialize(adj, sinfo, like)
        if isinstance(value, Tuple) or not isinstance(sinfo, TupleStructInfo):
            return value
        return self.bb.normalize(Tuple([self.bb.emit(TupleGetItem(value, i), "lv") for i in range(len(sinfo.fields))]))

    def zeros(self, sinfo, like: Expr | None = None) -> Expr:
        if isinstance(sinfo, TupleStructInfo):
            return self.bb.normalize(trampoline(self._zeros(sinfo, like)))
        return self._zero_leaf(sinfo, like)

    def _zeros(self, sinfo, like):
        if not isinstance(sinfo, TupleStructInfo):
            return self._zero_leaf(sinfo, like)
        fields = []
        for i, s in enumerate(sinfo.fields):
            fields.append((yield self._zeros(s, None if like is None else self._like_field(like, i))))
        return Tuple(fields)  # normalized once, by zeros

    def _zero_leaf(self, sinfo, like: Expr | None) -> Expr:
        if isinstance(sinfo, TensorStructInfo):
            if sinfo.shape is not None and sinfo.dtype:
                return self.bb.emit(get_op("relax.zeros")(shape_expr(sinfo.shape), dtype=sinfo.dtype), "lv")
            if like is not None:
                return self.bb.emit(get_op("relax.zeros_like")(self.host.restore(like)), "lv")
        # Prims, shapes and objects (strings) take no gradient, but a callee's adjoint takes a seed for
        # every returned field and ignores these: a zero prim, or the value itself (a shape's struct info
        # admits no other).
        if isinstance(sinfo, PrimStructInfo) and sinfo.dtype:
            return prim_value(False if sinfo.dtype == "bool" else 0, sinfo.dtype)
        if not isinstance(sinfo, TensorStructInfo) and like is not None:
            return self.host.restore(like)
        raise self.host.error(f"cannot build a zero gradient for a value of unknown shape or dtype ({sinfo})")

    def fit(self, expr: Expr, target_sinfo, like: Expr | None, name: str):
        """Normalize a rule's partial and bring it to the argument's shape (the driver un-broadcasts)."""
        bb = self.bb
        value = bb.normalize(expr)
        if isinstance(value, Tuple) and isinstance(target_sinfo, TupleStructInfo):
            return tuple(
                self.fit(f, s, None if like is None else self._like_field(like, i), name)
                for i, (f, s) in enumerate(zip(value.fields, target_sinfo.fields))
            )
        got = value.struct_info
        if isinstance(got, TupleStructInfo) and isinstance(target_sinfo, TupleStructInfo) and got != target_sinfo:
            # A tuple-valued partial less precise than the argument (split with symbolic sizes): fit
            # each field, so that adjoints keep the argument's shapes.
            leaf = value if is_leaf(value) else bb.emit(value, "lv")
            return tuple(
                self.fit(TupleGetItem(leaf, i), s, None if like is None else self._like_field(like, i), name)
                for i, s in enumerate(target_sinfo.fields)
            )
        if isinstance(got, TensorStructInfo) and isinstance(target_sinfo, TensorStructInfo):
            value = self._fit_shape(value, got, target_sinfo, like)
        if is_leaf(value):
            return value
        return bb.emit(value, name)

    def _fit_shape(self, value, got: TensorStructInfo, want: TensorStructInfo, like):
        if got.shape is not None and got.shape == want.shape:
            return value
        if want.shape is None and like is None:
            return value
        leaf = value if is_leaf(value) else self.bb.emit(value, "lv")
        if want.shape is None:
            # Unknown dims may still have been broadcast: sum back to the argument itself.
            return self.bb.normalize(get_op("relax.collapse_sum_like")(leaf, self.host.restore(like)))
        target = shape_expr(want.shape)
        if got.shape is not None:
            joint = broadcast_shapes(got.shape, want.shape)
            if joint == tuple(want.shape):
                # The partial is smaller than the argument (a rule returned a broadcastable value).
                return self.bb.normalize(get_op("relax.broadcast_to")(leaf, target))
            if joint is not None and joint != tuple(got.shape):
                leaf = self.bb.emit(get_op("relax.broadcast_to")(leaf, shape_expr(joint)), "lv")
        return self.bb.normalize(get_op("relax.collapse_sum_to")(leaf, target))

    # -- the sweep --------------------------------------------------------------
    def run(self, bindings) -> None:
        # The open block and its kind, asked at every op call: neither changes during the sweep (a
        # backward If emits its branches in scopes of their own, closed before the next binding).
        self.in_dataflow = self.bb.in_dataflow
        self.block = self.bb.current_bindings()
        transposed = self.transposed if self.in_dataflow else None
        permute = matmul = None
        if transposed is not None:
            permute, matmul = transposed.permute, transposed.matmul
        last = len(bindings) - 1
        for i in range(last, -1, -1):
            binding = bindings[i]
            adj = self.adj.get(binding.var)
            if adj is None:
                continue
            value = binding.value
            if value.__class__ is Call:  # the common case first
                if isinstance(value.op, GlobalVar):
                    self._call_function(binding, value, adj)
                elif value.op is matmul:
                    self.before = bindings[i - 1] if i else None  # see TransposedOperands.at_matmul
                    self._call_op(binding, value, adj)
                    self.before = None
                else:
                    self._call_op(binding, value, adj)
                    if value.op is permute and i < last:
                        transposed.after_permute(self, binding, bindings[i + 1])
            elif isinstance(value, Var | Tuple):
                self.add(value, adj)
            elif isinstance(value, TupleGetItem):
                self._getitem(value, adj)
            elif isinstance(value, If):
                self._if(binding, value, adj)
            elif isinstance(value, Constant | ShapeExpr | PrimValue | StringImm):
                continue
            elif isinstance(value, Function | SeqExpr):
                raise self.host.error(f"cannot differentiate through a {type(value).__name__} value", binding)

    def _getitem(self, value: TupleGetItem, adj) -> None:
        tup = value.tuple_value
        sinfo = tup.struct_info
        n = len(sinfo.fields)
        index = value.index % n
        self.add(tup, tuple(adj if i == index else None for i in range(n)))

    def _call_op(self, binding: VarBinding, call: Call, adj) -> None:
        op = call.op
        active = self.active
        for a in call.args:
            if a in active or (a.__class__ is Tuple and self.is_active(a)):
                break
        else:
            return
        if getattr(op, "name", None) == _NO_GRAD:
            return
        if self.host.sparse_contribution(self, binding, call, adj):
            return
        rule = getattr(op, "grad", None)
        if rule is None:
            raise self.host.error(f"{op.script_name} has no gradient rule", binding)
        var = binding.var
        if isinstance(var.struct_info, TupleStructInfo):
            g = self.as_tuple(adj, var.struct_info, var)
        elif adj.__class__ is tuple:
            g = self.materialize(adj, var.struct_info, var)
        else:
            g = adj  # materialize's answer for a leaf
        templates = self.templates
        key = None if templates is None else templates.key(call, var, g, self.active, self.adj, self.in_dataflow)
        try:
            template = None if key is None else templates.get(key)
            if template is not None:
                before = self.before
                if before is not None and self.transposed.at_matmul(self, before, call, var, g, template):
                    return
                templates.replay(template, call, var, g, self.hint, self.block, self.add)
                return
            partials = rule(call, var, g)
            if isinstance(partials, ComposedVjp):
                self._composed(call, partials, g)
                return
            if partials is None or len(partials) != len(call.args):
                count = "nothing" if partials is None else f"{len(partials)} entries"
                raise self.host.error(
                    f"the gradient rule of {op.script_name} returned {count} for {len(call.args)} arguments", binding
                )
            segments = []
            for index, (arg, part) in enumerate(zip(call.args, partials)):
                if part is None or _is_no_grad(part) or not self.is_active(arg):
                    continue
                hint = self.hint(arg)
                block = self.bb.current_bindings()
                start = len(block)
                # The forward values a partial reads, as the backward part has them: kept, or recomputed here.
                value = self.fit(self.host.restore(part), arg.struct_info, arg, hint)
                segments.append((index, hint, tuple(block[start:]), value))
                self.add(arg, value)
            if key is not None:
                templates.store(key, call, var, g, segments)
        except GradientError as err:
            if err.span is not None or err.message.startswith("in function"):
                raise
            # A rule's error without a source location: name the function and the binding instead.
            raise self.host.error(err.message, binding) from err
        except DiagnosticError as err:
            raise self.host.error(f"the gradient rule of {op.script_name} failed: {err.message}", binding) from err

    def hint(self, arg) -> str:
        """The name of an argument's partial: its adjoint's name when it is the first."""
        return f"{arg.name_hint}_adjoint" if isinstance(arg, Var) and arg not in self.adj else "lv"

    def _composed(self, call: Call, vjp: ComposedVjp, g) -> None:
        """Backward of a fused backward op: emit its forward computation F, sweep F once (the op's
        value, in composed form), then sweep all of that with the op's adjoint `g`."""
        bb = self.bb
        block = bb.current_bindings()
        start = len(block)
        # Fresh names for the primals, so that one argument passed twice keeps two adjoints.
        primals = [bb.emit(self.host.restore(p), "primal") for p in vjp.primals]
        value = bb.emit(vjp.forward(*primals), "composed")
        first = Sweep(self.host, bb, compute_active(block[start:], primals))
        first.add(value, self.host.restore(vjp.cotangent))
        first.run(block[start:])
        grads = [first.materialize(first.adj.get(p), p.struct_info, p) for p in primals]
        result = grads[0] if vjp.single else bb.normalize(Tuple(grads))
        args = [a for a in dict.fromkeys(call.args) if isinstance(a, Var) and self.is_active(a)]
        restored = {a: self.host.restore(a) for a in args}
        second = Sweep(self.host, bb, compute_active(block[start:], list(restored.values())))
        second.add(result, g)
        second.run(block[start:])
        for arg, r in restored.items():
            self.add(arg, second.adj.get(r))

    def _call_function(self, binding: VarBinding, call: Call, adj) -> None:
        if not any(self.is_active(a) for a in call.args):
            return
        vjp, indices = self.host.vjp_function(call.op.name_hint, binding)
        if not indices:
            return
        var = binding.var
        g = self.materialize(adj, var.struct_info, var)
        args = self.host.restore(call).args
        result = self.bb.emit(Call(vjp, tuple(args) + (g,)), "lv")
        for j, k in enumerate(indices):
            arg = call.args[k]
            if not self.is_active(arg):
                continue
            part = result if len(indices) == 1 else self.bb.emit(TupleGetItem(result, j), "lv")
            self.add(arg, part)

    def _if(self, binding: VarBinding, node: If, adj) -> None:
        """Backward of `v = If(c, A, B)`: an If on the same condition whose branches recompute their
        forward bindings, sweep them backwards and return the adjoints of the outer variables used."""
        bb = self.bb
        free = dict.fromkeys(v for branch in (node.true_branch, node.false_branch) for v in free_vars(branch))
        outer = [v for v in free if v in self.active]
        if not outer:
            return
        g = self.materialize(adj, binding.var.struct_info, binding.var)
        # Restored out here: a recomputation emitted inside a branch would not be visible after it.
        now = {v: self.host.restore(v) for v in free}
        cond = self.host.restore(node.cond)
        seeds = [now[v] for v in outer]
        branches = []
        for branch in (node.true_branch, node.false_branch):
            bb.begin_scope()
            bb.begin_block(dataflow=False)
            vmap = dict(now)
            copied = []
            for block in branch.blocks:
                for b in block.bindings:
                    new = copy_binding(b, vmap, promote=True)
                    bb.emit_binding(new)
                    copied.append(new)
            body = copy_expr(branch.body, vmap, promote=True)
            sub = Sweep(self.host, bb, compute_active(copied, seeds))
            sub.add(body, g)
            sub.run(copied)
            results = [sub.materialize(sub.adj.get(v), v.struct_info, v) for v in seeds]
            branches.append(bb.end_scope(results[0] if len(results) == 1 else Tuple(results)))
        result = bb.emit(If(cond, branches[0], branches[1], span=node.span), "lv")
        for k, v in enumerate(outer):
            self.add(v, result if len(outer) == 1 else bb.emit(TupleGetItem(result, k), "lv"))
