"""IR function -> Problem: sizes and costs from struct info, views and tuples, what cannot be recomputed,
and the store-all model against the executor's measured peak."""

from __future__ import annotations

import random
from math import prod

import numpy as np
import pytest
from passes.checkpoint.helpers import SMALL_MODELS, adjoint_module, bitwise_equal, inputs_for, random_extracted_schedule, run

import retrograd
from retrograd.analysis import peak_memory
from retrograd.passes import plan_checkpoint
from retrograd.errors import PassError
from retrograd.ir.expr import Call
from retrograd.passes.checkpoint.extract import extract
from retrograd.passes.checkpoint.rewrite import rewrite
from retrograd.passes.checkpoint.simulate import simulate


def _nodes(func):
    return [b for blk in func.body.blocks for b in blk.bindings]


def _shape(expr):
    return tuple(int(d) for d in expr.struct_info.shape)


@pytest.mark.parametrize("model", sorted(SMALL_MODELS))
def test_costs_and_sizes_from_struct_info(model):
    func = adjoint_module(SMALL_MODELS[model]())["main_adjoint"]
    problem = extract(func).problem
    checked = set()
    for i, b in enumerate(_nodes(func)):
        v = b.value
        if not isinstance(v, Call):
            continue
        name = v.op.name
        out = _shape(b.var)
        if name == "relax.matmul":
            a = _shape(v.args[0])
            assert problem.costs[i] == 2 * prod(out) * a[-1]
            assert problem.kinds[i] == "matmul"
        elif name == "relax.nn.conv2d" and v.attrs["kernel_layout"] == "OIHW":
            o, cin, kh, kw = _shape(v.args[1])
            assert problem.costs[i] == 2 * prod(out) * cin * kh * kw // v.attrs["groups"]
            assert problem.kinds[i] == "conv"
        elif name in ("relax.sin", "relax.nn.relu", "relax.add", "relax.multiply", "relax.tanh"):
            assert problem.costs[i] == prod(out)
            assert problem.kinds[i] == "elementwise"
        elif name in ("relax.permute_dims", "relax.broadcast_to"):
            assert problem.costs[i] == 0 and problem.kinds[i] == "view" and problem.sizes[i] == 0
            continue
        else:
            continue
        checked.add(name)
        assert problem.sizes[i] == prod(out) * np.dtype(b.var.struct_info.dtype).itemsize
    assert checked


@pytest.mark.parametrize("model", sorted(SMALL_MODELS))
def test_store_all_model_is_the_measured_peak(model):
    mod = adjoint_module(SMALL_MODELS[model]())
    for name in ("main", "main_adjoint"):
        func = mod[name]
        _, peak = run(mod, name, inputs_for(func))
        assert simulate(extract(func).problem).peak_bytes == peak


TUPLES = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), dtype="float32")) -> R.Tensor((), dtype="float32"):
        with R.dataflow():
            a: R.Tensor((4, 8), dtype="float32") = R.sin(x)
            parts: R.Tuple(R.Tensor((4, 4), dtype="float32"), R.Tensor((4, 4), dtype="float32")) = R.split(a, indices_or_sections=2, axis=1)
            p0: R.Tensor((4, 4), dtype="float32") = parts[0]
            p1: R.Tensor((4, 4), dtype="float32") = parts[1]
            q: R.Tensor((4, 4), dtype="float32") = R.multiply(p0, p1)
            e: R.Tensor((4, 4), dtype="float32") = R.exp(q)
            pair: R.Tuple(R.Tensor((4, 4), dtype="float32"), R.Tensor((4, 4), dtype="float32")) = (e, q)
            first: R.Tensor((4, 4), dtype="float32") = pair[0]
            alias: R.Tensor((4, 4), dtype="float32") = first
            cat: R.Tensor((4, 8), dtype="float32") = R.concat(pair, axis=1)
            r: R.Tensor((8, 4), dtype="float32") = R.reshape(cat, R.shape([8, 4]))
            t: R.Tensor((4, 8), dtype="float32") = R.permute_dims(r, axes=None)
            u: R.Tensor((32,), dtype="float32") = R.reshape(t, R.shape([32]))
            w: R.Tensor((32,), dtype="float32") = R.tanh(u)
            s1: R.Tensor((), dtype="float32") = R.sum(w, axis=None, keepdims=False)
            s2: R.Tensor((), dtype="float32") = R.sum(alias, axis=None, keepdims=False)
            gv: R.Tensor((), dtype="float32") = R.add(s1, s2)
            R.output(gv)
        return gv
'''


def test_tuples_views_and_aliases():
    mod = adjoint_module(TUPLES)
    for name in ("main", "main_adjoint"):
        func = mod[name]
        ex = extract(func)
        p = ex.problem
        names = list(p.names)
        if name == "main":
            # split's parts and reshape of a contiguous value are views; reshape of a transpose copies.
            assert p.sizes[names.index("parts")] == 0 and p.alias_of[names.index("parts")] == names.index("a")
            assert p.alias_of[names.index("p0")] == names.index("parts")
            assert p.sizes[names.index("r")] == 0 and p.sizes[names.index("u")] == 8 * 4 * 4
            for transparent in ("pair", "first", "alias"):
                assert names.index(transparent) in ex.transparent
            # uses of the tuple binding and the alias read the nodes they stand for
            assert p.deps[names.index("cat")] == (names.index("e"), names.index("q"))
            assert p.deps[names.index("s2")] == (names.index("e"),) and p.deps[names.index("pair")] == ()
        args = inputs_for(func)
        ref, peak = run(mod, name, args)
        assert simulate(p).peak_bytes == peak
        rng = random.Random(name)
        for _ in range(8):
            schedule = random_extracted_schedule(ex, rng, p_stage=0.5, p_node=0.3)
            new = mod.with_function(name, rewrite(ex, schedule.recompute))
            assert retrograd.ir.well_formed(new) == []
            out, measured = run(new, name, args)
            # On this view-heavy program the Problem only approximates; the pass checks each plan with
            # the exact model, which must agree with the executor.
            assert measured == peak_memory(new, name)
            assert bitwise_equal(out, ref)
    # Planned through the pass, every budget it accepts is met as measured.
    args = inputs_for(mod["main_adjoint"])
    ref, full = run(mod, "main_adjoint", args)
    for fraction in (100, 85, 70, 55):
        try:
            planned, report = plan_checkpoint(mod, "main_adjoint", f"{fraction}%")
        except PassError:
            continue
        out, peak = run(planned, "main_adjoint", args)
        assert peak <= report.budget and peak == report.predicted_peak and bitwise_equal(out, ref)


CONTROL = '''
@I.ir_module
class Module:
    @R.function
    def helper(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        y = R.exp(x)
        return y

    @R.function
    def main(c: R.Tensor((), dtype="bool"), x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        a = R.sin(x)
        if c:
            t = R.exp(a)
            y = R.add(t, x)
        else:
            y = R.negative(a)
        h = Module.helper(y)
        z = R.multiply(h, a)
        return z
'''


def test_if_and_calls_are_not_recomputable():
    mod = retrograd.parse(CONTROL)
    p = extract(mod["main"]).problem
    names = list(p.names)
    assert p.recomputable[names.index("a")] and p.recomputable[names.index("z")]
    assert not p.recomputable[names.index("y")] and not p.recomputable[names.index("h")]
    assert p.deps[names.index("y")] == (names.index("a"),)
    assert p.outputs == (names.index("z"),)
    assert p.pinned_bytes == 1 + 16


def test_symbolic_shapes_are_a_clear_error():
    text = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        y = R.sin(x)
        return y
'''
    with pytest.raises(PassError, match="parameter 'x'.*static shapes"):
        extract(retrograd.parse(text)["main"])
