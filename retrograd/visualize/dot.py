"""to_dot(mod): Graphviz DOT of a function's dataflow; forward/backward and recomputed bindings coloured."""

from __future__ import annotations

import shutil
import subprocess

from retrograd.errors import DiagnosticError, NameError_, did_you_mean
from retrograd.ir.expr import Call, Constant, Function, If, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple, TupleGetItem, Var, tuple_parts
from retrograd.ir.nested import preorder
from retrograd.ir.text import format_sinfo, format_sinfo_shared, op_script_name
from retrograd.ir.nested import trampoline
from retrograd.codegen.python import walk
from retrograd.passes.barriers import END, OUT, START
from retrograd.passes.barriers import RECOMPUTED as RECOMPUTED_SUFFIX

FORWARD = "#dbe9f6"  # fill of forward bindings of an adjoint (and of every binding elsewhere)
BACKWARD = "#fbe3d0"  # fill of the backward bindings of an adjoint
RECOMPUTED = "#c0392b"  # border of bindings the checkpoint pass recomputes


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _bindings(seq: SeqExpr):
    return [b for blk in seq.blocks for b in blk.bindings]


def _reads(expr) -> list:
    """The variables `expr` reads, those of nested branches included (a superset for an If), without recursion."""
    return [e for e in walk(expr) if isinstance(e, Var)]


def _forward_set(func: Function) -> set | None:
    """For an adjoint (`*_adjoint` returning (result, gradients)), the variables its original result needs."""
    body = func.body
    if not (isinstance(body.body, Tuple) and len(body.body.fields) >= 2):
        return None
    producers = {b.var: b.value for b in _bindings(body)}
    need = _reads(body.body.fields[0])
    seen: set = set()
    while need:
        v = need.pop()
        if v in seen:
            continue
        seen.add(v)
        value = producers.get(v)
        if value is not None:
            need += _reads(value)
    # What an If of the forward part binds inside its branches is forward too.
    stack = [value for v, value in producers.items() if v in seen and isinstance(value, If)]
    while stack:
        node = stack.pop()
        for branch in (node.true_branch, node.false_branch):
            for b in _bindings(branch):
                seen.add(b.var)
                if isinstance(b.value, If):
                    stack.append(b.value)
    return seen


def _recomputed(func: Function) -> set:
    """Bindings checkpointing recomputes: between start/end_checkpoint markers, or named `*_cp` /
    `*_ckout` (a recomputation and its hand-over, see passes/barriers.py: emit_recomputation)."""
    out: set = set()
    inside: set = set()
    stack = [func.body]
    while stack:
        seq = stack.pop()
        for b in _bindings(seq):
            value = b.value
            name = getattr(value.op, "name", None) if isinstance(value, Call) else None
            reads = _reads(value.cond) if isinstance(value, If) else _reads(value)
            if name == START:
                inside.add(b.var)
            elif name != END and any(v in inside for v in reads):
                inside.add(b.var)
                out.add(b.var)
            if b.var.name_hint.endswith((RECOMPUTED_SUFFIX, OUT)):  # emitted recomputations
                out.add(b.var)
            if isinstance(value, If):
                stack.extend((value.true_branch, value.false_branch))
    return out


class _Graph:
    def __init__(self):
        self.lines: list[str] = []
        self.count = 0

    def node(self, label: str, ind: str, **style) -> str:
        self.count += 1
        nid = f"n{self.count}"
        extra = "".join(f", {k}={_q(v)}" for k, v in style.items())
        self.lines.append(f"{ind}{nid} [label={_q(label)}{extra}];")
        return nid

    def edge(self, src: str, dst: str, label: str, ind: str) -> None:
        self.lines.append(f"{ind}{src} -> {dst} [label={_q(label)}];")


def _leaf_label(e) -> str:
    if isinstance(e, Constant):
        return f"const {format_sinfo(e.struct_info, brief=True)}" if e.struct_info is not None else "const"
    if isinstance(e, PrimValue | StringImm):
        return repr(e.value)
    if isinstance(e, ShapeExpr):
        return f"R.shape({list(e.values)})"
    return type(e).__name__


class _FunctionGraph:
    def __init__(self, g: _Graph, name: str, func: Function):
        self.g = g
        self.name = name
        self.func = func
        self.node_of: dict = {}  # Var -> node id producing it
        self.forward = _forward_set(func) if name.endswith("_adjoint") else None
        self.recomputed = _recomputed(func)
        self.sinfo_texts: dict = {}  # see _shape

    def emit(self, ind: str) -> None:
        g = self.g
        g.lines.append(f"{ind}subgraph {_q('cluster_' + self.name)} {{")
        g.lines.append(f"{ind}  label={_q(self.name)};")
        for p in self.func.params:
            self.node_of[p] = g.node(f"{p.name_hint}\n{self._shape(p)}", ind + "  ", shape="ellipse")
        trampoline(self.seq(self.func.body, ind + "  "))
        out = g.node("return", ind + "  ", shape="doublecircle")
        self.connect(self.func.body.body, out, ind + "  ")
        g.lines.append(f"{ind}}}")

    def _shape(self, var) -> str:
        # Nested struct infos' texts are kept (vars may be typed by the levels of one deep tuple).
        return format_sinfo_shared(var.struct_info, self.sinfo_texts, brief=True) if var.struct_info is not None else "?"

    def connect(self, expr, dst: str, ind: str) -> None:
        """Edges into `dst` from whatever produces each value `expr` reads (leaves get their own nodes)."""
        if isinstance(expr, Tuple | TupleGetItem):
            # A stack, in order: tuples nest to any depth.
            for e in preorder(expr, tuple_parts):
                if not isinstance(e, Tuple | TupleGetItem):
                    self.connect(e, dst, ind)
        elif isinstance(expr, Var):
            src = self.node_of.get(expr)
            if src is not None:
                self.g.edge(src, dst, f"{expr.name_hint}: {self._shape(expr)}", ind)
        elif isinstance(expr, Call):
            for a in expr.args:
                self.connect(a, dst, ind)
        elif isinstance(expr, Constant | PrimValue | StringImm | ShapeExpr):
            leaf = self.g.node(_leaf_label(expr), ind, shape="plaintext")
            self.g.edge(leaf, dst, "", ind)

    def style(self, var) -> dict:
        style = {"style": "filled", "fillcolor": FORWARD}
        if self.forward is not None and var not in self.forward:
            style["fillcolor"] = BACKWARD
        if var in self.recomputed:
            style.update(style="filled,dashed,bold", color=RECOMPUTED, tooltip="recomputed by checkpointing")
        return style

    def seq(self, seq: SeqExpr, ind: str):
        """Generator (see trampoline) drawing a SeqExpr's bindings."""
        for b in _bindings(seq):
            value = b.value
            if isinstance(value, If):
                yield self.branch_node(b, ind)
                continue
            if isinstance(value, Call):
                what = op_script_name(value.op)
                attrs = ", ".join(f"{k}={v!r}" for k, v in value.attrs.items())
                label = f"{b.var.name_hint} = {what}" + (f"\n{attrs}" if attrs and len(attrs) <= 60 else "")
            elif isinstance(value, TupleGetItem):
                label = f"{b.var.name_hint} = [{value.index}]"
            elif isinstance(value, Tuple):
                label = f"{b.var.name_hint} = tuple"
            elif isinstance(value, Var):
                # An alias draws no node: uses read the aliased value's producer.
                if value in self.node_of:
                    self.node_of[b.var] = self.node_of[value]
                    continue
                label = f"{b.var.name_hint}"
            else:
                label = f"{b.var.name_hint} = {_leaf_label(value)}"
            nid = self.g.node(label, ind, shape="box", **self.style(b.var))
            self.connect(value, nid, ind)
            self.node_of[b.var] = nid

    def branch_node(self, b, ind: str):
        """Generator (see trampoline) drawing an If binding and its branches."""
        node = b.value
        nid = self.g.node(f"{b.var.name_hint} = If", ind, shape="diamond", **self.style(b.var))
        self.connect(node.cond, nid, ind)
        for label, branch in (("then", node.true_branch), ("else", node.false_branch)):
            self.g.count += 1
            self.g.lines.append(f"{ind}subgraph cluster_{self.g.count} {{")
            self.g.lines.append(f"{ind}  label={_q(f'{b.var.name_hint}: {label}')}; style=dashed;")
            yield self.seq(branch, ind + "  ")
            out = self.g.node(label, ind + "  ", shape="point")
            self.connect(branch.body, out, ind + "  ")
            self.g.lines.append(f"{ind}}}")
            self.g.edge(out, nid, label, ind)
        self.node_of[b.var] = nid


def to_dot(mod, func: str | None = None) -> str:
    """DOT text: one cluster per function (only `func` when given); ops are nodes, values are edges."""
    names = [n for n, f in mod.items() if isinstance(f, Function)]
    if func is not None:
        if func not in names:
            hint = did_you_mean(func, names)
            raise NameError_(f"the module has no function '{func}'{hint} (functions: {', '.join(names) or 'none'})")
        names = [func]
    g = _Graph()
    g.lines += ["digraph module {", '  node [fontname="Helvetica", fontsize=10];',
                '  edge [fontname="Helvetica", fontsize=8];']
    for name in names:
        _FunctionGraph(g, name, mod[name]).emit("  ")
    g.lines.append("}")
    return "\n".join(g.lines) + "\n"


def render(dot_text: str, fmt: str) -> bytes:
    """The graph as `fmt` (svg, png) through Graphviz: the `dot` program, else the `graphviz` package."""
    exe = shutil.which("dot")
    if exe is not None:
        done = subprocess.run([exe, f"-T{fmt}"], input=dot_text.encode(), capture_output=True, check=False)
        if done.returncode != 0:
            raise DiagnosticError(f"graphviz failed to render {fmt}: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout
    try:
        import graphviz  # optional: the Python package
    except ImportError:
        graphviz = None
    if graphviz is not None:
        try:
            return graphviz.Source(dot_text).pipe(format=fmt)
        except Exception as err:  # the package is there but cannot run Graphviz itself
            raise DiagnosticError(f"graphviz failed to render {fmt}: {err}") from None
    raise DiagnosticError(
        f"--{fmt} needs Graphviz, which is not installed: install the 'dot' program "
        "(e.g. apt-get install graphviz) or the 'graphviz' Python package, or write DOT without "
        f"--{fmt} and render it elsewhere"
    )
