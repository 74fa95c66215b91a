"""Random well-formed modules through the passes: the input is left untouched, the output is well formed
and prints and parses back; the optimizing passes keep the values, Gradient's adjoints (first and second
order) agree with float64 central differences, and a checkpointed adjoint computes the unplanned one's
results bit for bit within its budget."""

from __future__ import annotations


import numpy as np
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import retrograd
from passes.helpers import random_inputs
from retrograd.analysis import peak_memory
from retrograd.errors import DiagnosticError, GradientError
from retrograd.ir import well_formed
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo
from retrograd.passes import Checkpoint, Gradient, parse_pipeline
from retrograd.passes.checkpoint.pass_ import InfeasibleBudgetError
from retrograd.testing import check_gradients

from ops.helpers import dot_of_adjoint, random_value  # noqa: E402
from strategies import modules  # noqa: E402

# A quarter of the profile's example count (HYPOTHESIS_PROFILE=ci: 75 per test, a few seconds each).
SETTINGS = settings(max_examples=max(10, settings.default.max_examples // 4), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
PIPELINES = ["dce", "cse", "simplify", "fold-constant", "fold-constant, cse, simplify, dce", "simplify, dce, cse, fold-constant"]


def is_static(sinfo) -> bool:
    if isinstance(sinfo, TupleStructInfo):
        return all(is_static(f) for f in sinfo.fields)
    return isinstance(sinfo, TensorStructInfo) and sinfo.is_static


def apply(transform, mod):
    """transform(mod), checked: the input untouched, the output well formed and printed faithfully."""
    before = mod.script()
    out = transform(mod)
    assert mod.script() == before, "the pass changed its input module"
    assert well_formed(out) == []
    text = out.script()
    assert retrograd.structural_equal(retrograd.parse(text), out), text
    return out


def run(mod, name, args):
    ex = retrograd.build(mod)
    return ex[name](*args), ex.stats.peak_live_bytes


def assert_same(got, want, exact: bool):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w, exact)
        return
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape
    if exact or g.dtype.kind not in "fc":
        assert g.tobytes() == w.tobytes() or np.array_equal(g, w, equal_nan=g.dtype.kind in "fc")
    else:
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def of_tensors(sinfo) -> bool:
    if isinstance(sinfo, TupleStructInfo):
        return all(of_tensors(f) for f in sinfo.fields)
    return isinstance(sinfo, TensorStructInfo)


def more_inputs(func, args, seed) -> list:
    """`args` and random values for the rest of func's parameters (vjp seeds, weights), float64 or of
    their dtype; examples whose extra parameters hold shapes or prims are left out."""
    rest = func.params[len(args):]
    assume(all(of_tensors(p.struct_info) for p in rest))
    rng = np.random.default_rng(seed)
    return list(args) + [random_value(p.struct_info, rng) for p in rest]


def static_inputs(mod, seed):
    """Random arguments of `main`, or None when its parameters are not all static tensors."""
    if not all(is_static(p.struct_info) for p in mod["main"].params):
        return None
    return random_inputs(mod, "main", seed)


def adjoint_options(mod) -> dict:
    """Gradient's options for `main`: a scalar target as is, any other one through a vjp seed."""
    try:
        Gradient("main")(mod)
        return {}
    except DiagnosticError as err:
        assume("seeds=" in str(err))  # otherwise nothing to differentiate (an integer or bool target)
        return {"seeds": "param"}


def assert_agrees_with_finite_differences(mod, name, args, seed, rtol):
    """Gradient's adjoint against central differences at two steps: rounding spoils the small one where
    constants reach 3.25e6, curvature the large one; a wrong rule fails at both."""
    for eps in (1e-5, 1e-3):
        report = check_gradients(mod, name, args, seed=seed, eps=eps, rtol=rtol, atol=1e-5)
        if report.ok:
            return
    # A kink or a pole the random input lands on gives inf or nan on one side: not a wrong rule.
    assert not (np.isfinite(report.analytic) and np.isfinite(report.numeric)), str(report)


@SETTINGS
@given(modules(), st.sampled_from(PIPELINES), st.integers(0, 99))
def test_optimizing_pipelines_keep_the_values(mod, pipeline, seed):
    note(mod.script())
    out = apply(parse_pipeline(pipeline), mod)
    args = static_inputs(mod, seed)
    if args is None:
        return
    try:
        want, _ = run(mod, "main", args)
    except DiagnosticError:
        assume(False)  # a kernel refusing its random input (an integer division by zero, a callee's
        # symbolic dim broadcast against a constant its argument does not match)
    assert_same(run(out, "main", args)[0], want, exact=False)


@SETTINGS
@given(modules(), st.integers(0, 99))
def test_gradients_of_random_functions_first_and_second_order(mod, seed):
    note(mod.script())
    options = adjoint_options(mod)
    first = apply(Gradient("main", **options), mod)
    try:
        apply(Gradient("main_adjoint", seeds="param"), first)
    except GradientError as err:  # main returns a constant: the adjoint's value depends on nothing
        assert "in function 'main_adjoint'" in str(err) and "nothing to differentiate" in str(err), str(err)
    args = static_inputs(mod, seed)
    if args is None:
        return
    try:
        run(mod, "main", args)
    except DiagnosticError:
        assume(False)  # a callee broadcasting a symbolic dim its argument does not match, say
    assert_agrees_with_finite_differences(mod, "main", args, seed, rtol=1e-3)
    if any(isinstance(p.struct_info, TupleStructInfo) for p in mod["main"].params):
        return  # dot_of_adjoint weighs tensor gradients only
    dot = dot_of_adjoint(mod, "main", None, **options)
    dot_args = more_inputs(dot["main_dot"], args, seed)
    assert_agrees_with_finite_differences(dot, "main_dot", dot_args, seed, rtol=3e-3)


@SETTINGS
@given(modules(), st.integers(0, 99), st.sampled_from(["budget", "budget", "sqrt", "cheap"]), st.integers(5, 100))
def test_checkpointed_adjoints_compute_the_same_within_their_budget(mod, seed, policy, percent):
    note(mod.script())
    args = static_inputs(mod, seed)
    assume(args is not None)
    adj = Gradient("main", **adjoint_options(mod))(mod)
    args = [a if isinstance(a, tuple) else np.asarray(a).astype(p.struct_info.dtype)
            for a, p in zip(more_inputs(adj["main_adjoint"], args, seed), adj["main_adjoint"].params)]
    try:
        want, unplanned = run(adj, "main_adjoint", args)
        peak_memory(adj, "main_adjoint")
    except DiagnosticError:
        assume(False)  # a kernel refusing its input, or a callee of symbolic shapes: no static memory model
    budget = max(1, unplanned * percent // 100)
    options = {"budget": budget} if policy == "budget" else {}
    try:
        planned = apply(Checkpoint("main_adjoint", policy=policy, **options), adj)
    except InfeasibleBudgetError as err:
        # The least feasible budget is feasible (and, without Ifs, never above the measured peak).
        assert err.least_feasible > budget
        if not any("if " in line for line in adj.script().splitlines()):
            assert err.least_feasible <= unplanned
        budget = err.least_feasible
        planned = apply(Checkpoint("main_adjoint", budget=budget), adj)
    got, peak = run(planned, "main_adjoint", args)
    assert_same(got, want, exact=True)
    assert peak <= (budget if policy == "budget" else unplanned)
