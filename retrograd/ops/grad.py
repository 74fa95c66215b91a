"""The grad.* ops: gradient stop and checkpoint markers, and the explicit backward ops with their own gradients."""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.kernels import index as index_kernels
from retrograd.ops.kernels import loss as loss_kernels
from retrograd.ops.kernels import pool as pool_kernels
from retrograd.ops.kernels import window_gather
from retrograd.ops.kernels.pool_nan import nan_last
from retrograd.ops.kernels.window import Window2d, to_layout
from retrograd.ops.nn.loss import NLL_ATTRS, nll_output
from retrograd.ops.nn.pool import POOL_ATTRS, POOL_POSITIONAL, canonical_pool_attrs, pool_attrs, pool_output
from retrograd.ops.cost import ELEMENTWISE, POOL_BACKWARD, REDUCE, VIEW
from retrograd.ops import views
from retrograd.ops.registry import Arg, Attr, InferCtx, no_gradient, register
from retrograd.ops.shape_utils import normalize_axis

# -- markers ------------------------------------------------------------------


def _identity_infer(ctx: InferCtx):
    return ctx.sinfo[0]


def identity_kernel(x):
    # Markers only matter to passes; at run time the value passes through (no copy: `aliases`).
    return x


no_grad = register(
    "relax.grad.no_grad",
    (Arg("input", "any"),),
    infer=_identity_infer,
    kernel=identity_kernel,
    # Stops the gradient: nothing flows back into the input.
    grad=no_gradient,
    aliases=(0,), view=views.same,
    cost=VIEW,
)


def _checkpoint_marker(name):
    # Markers are identities at run time; Gradient recomputes the values of a segment for the backward part.
    return register(f"relax.grad.{name}", (Arg("input", "any"),), infer=_identity_infer, kernel=identity_kernel,
                    grad=lambda call, out, g: [g], aliases=(0,), view=views.same, cost=VIEW)


start_checkpoint = _checkpoint_marker("start_checkpoint")
end_checkpoint = _checkpoint_marker("end_checkpoint")

# -- shared checks --------------------------------------------------------------


def _check_like(ctx: InferCtx, i: int, expected: TensorStructInfo, what: str) -> None:
    """Argument i must have `expected`'s ndim, static dims and dtype (unknowns are let through)."""
    got = ctx.tensor(i)
    if expected.ndim != -1 and got.ndim != -1 and got.ndim != expected.ndim:
        raise ctx.error(f"expected {what} with {expected.ndim} dimensions, got {got.ndim}", i)
    if expected.shape is not None and got.shape is not None:
        for a, b in zip(got.shape, expected.shape):
            if isinstance(a, int) and isinstance(b, int) and a != b:
                dims = ", ".join(str(d) for d in expected.shape)
                raise ctx.error(f"expected {what} of shape ({dims})", i)
    if expected.dtype and got.dtype and got.dtype != expected.dtype:
        raise ctx.error(f"expected {what} of dtype {expected.dtype}, got {got.dtype}", i)


# -- nll_loss_backward ------------------------------------------------------------


def _nll_loss_backward_infer(ctx: InferCtx) -> TensorStructInfo:
    expected = nll_output(ctx, 1, 2, 3 if len(ctx.sinfo) > 3 else None)
    _check_like(ctx, 0, expected, f"the gradient of nll_loss's result (reduction={ctx.attrs['reduction']!r})")
    return ctx.tensor(1)


def _nll_loss_backward_grad(call, out, g):
    # The result is linear in output_grad: its adjoint contracts g at the target classes with the same
    # weights and divisor, which is nll_loss itself applied to g. It does not depend on the prediction
    # values, and targets/weights are not differentiated (as in nll_loss). One corner differs: under
    # "mean" with every target ignored the backward is constant zero, but nll_loss(g) gives nan there.
    _, _, targets, *weights = call.args
    return [R.nn.nll_loss(g, targets, *weights, **call.attrs), None, None] + [None] * len(weights)


nll_loss_backward = register(
    "relax.grad.nll_loss_backward",
    ("output_grad", "predictions", "targets", Arg("weights", optional=True)),
    NLL_ATTRS,
    infer=_nll_loss_backward_infer,
    kernel=loss_kernels.nll_loss_backward,
    grad=_nll_loss_backward_grad,
    cost=REDUCE,
)

# -- pooling backward ---------------------------------------------------------------


def _pool_backward_infer(ctx: InferCtx) -> TensorStructInfo:
    _check_like(ctx, 0, pool_output(ctx, 1), "the gradient of the pooling result")
    return ctx.tensor(1)


def _max_pool2d_backward_grad(call, out, g):
    # Linear in output_grad: its adjoint reads g at each window's first maximum. As a function of the
    # data it is piecewise constant (the argmax positions), so the data gets no gradient.
    return [R.grad.max_pool2d_backward_grad(g, call.args[1], **pool_attrs(call)), None]


def _avg_pool2d_backward_grad(call, out, g):
    # Linear in output_grad (the transposed averaging map), so its adjoint is avg_pool2d of g; the
    # result does not depend on the data's values at all.
    return [R.nn.avg_pool2d(g, **pool_attrs(call)), None]


def _pool_backward(name, kernel, grad):
    return register(
        f"relax.grad.{name}",
        ("output_grad", "data"),
        POOL_ATTRS,
        infer=_pool_backward_infer,
        kernel=kernel,
        grad=grad,
        canonicalize=canonical_pool_attrs,
        positional_attrs=POOL_POSITIONAL,
        cost=POOL_BACKWARD,
        threaded=True,  # its kernel splits the batch over the kernel threads
    )


max_pool2d_backward = _pool_backward("max_pool2d_backward", pool_kernels.max_pool2d_backward, _max_pool2d_backward_grad)
avg_pool2d_backward = _pool_backward("avg_pool2d_backward", pool_kernels.avg_pool2d_backward, _avg_pool2d_backward_grad)


# -- max_pool2d_backward_grad: the adjoint of max_pool2d_backward in its output_grad ----------


def _max_pool2d_backward_grad_infer(ctx: InferCtx) -> TensorStructInfo:
    _check_like(ctx, 0, ctx.tensor(1), "a gradient shaped like the data")
    return pool_output(ctx, 1)


@nan_last(pool_kernels.max_pool2d, "NCHW", adjoint=True)
def max_pool2d_backward_grad_kernel(
    input_grad, data, *, pool_size, strides, dilation, padding, ceil_mode, count_include_pad, layout, out_layout
):
    """input_grad read at each window's first maximum of data (row-major; padding never wins; a window
    holding NaN: its last NaN, see kernels/pool_nan.py)."""
    # Late import: kernels/phase.py is landing separately; the module must import without it.
    from retrograd.ops.kernels.phase import PhaseGrid

    op = "max_pool2d_backward_grad"
    x = to_layout(op, np.asarray(data), layout, "NCHW")
    gx = to_layout(op, np.asarray(input_grad), layout, "NCHW")
    if gx.shape != x.shape:
        raise KernelError(f"{op}: input_grad has shape {gx.shape} in NCHW order, expected the data's {x.shape}")
    win = Window2d(op, x.shape[2:], pool_size, strides, padding, dilation, ceil_mode)
    n, c, h, w = x.shape
    axes = window_gather.axes2d(win)
    if window_gather.degenerate(axes):
        out = window_gather.max_backward_grad(x.reshape(n * c, h, w), gx.reshape(n * c, h, w), axes)
        return np.ascontiguousarray(to_layout(op, out.reshape(n, c, win.oh, win.ow), "NCHW", out_layout or layout))
    grid = PhaseGrid(win)
    taps = win.kh * win.kw
    if taps > 255:
        raise KernelError(f"{op}: windows of more than 255 taps are not supported, got {win.kh} x {win.kw}")
    xs, gs = x.reshape(n * c, h, w), gx.reshape(n * c, h, w)
    out = np.empty((n * c, win.oh, win.ow), gx.dtype)
    # About 1 MB of planes at a time, so the temporaries stay in cache.
    size = max(1, min(n * c, (1 << 20) // (grid.plane * win.sh * win.sw * x.itemsize)))
    # Stride-phase buffers make every tap a contiguous run; reused per chunk of planes, their borders
    # keep the padding (-inf never wins).
    xbuf, gbuf = grid.buffer(size, x.dtype, -np.inf), grid.buffer(size, gx.dtype, 0)
    best = np.empty((size, grid.length), x.dtype)
    better = np.empty(best.shape, bool)
    winner, step = np.empty(best.shape, np.uint8), np.empty(best.shape, np.uint8)
    # Flat position of tap k's run for plane i in gbuf: starts[k] + i * plane (+ j along the run).
    starts = np.array([(a * win.sw + b) * size * grid.plane + off for (a, b), off in grid.taps], np.intp)
    run = (np.arange(size)[:, None] * grid.plane + np.arange(grid.length)).reshape(size, win.oh, grid.wq)[:, :, : win.ow]
    flat_g = gbuf.reshape(-1)
    for lo in range(0, n * c, size):
        p = min(size, n * c - lo)
        bst, bt, kk, st = best[:p], better[:p], winner[:p], step[:p]
        grid.load(xbuf, xs[lo : lo + p])
        grid.load(gbuf, gs[lo : lo + p])
        bst[...] = grid.tap(xbuf, 0, p)
        kk.fill(0)
        # Taps in row-major window order with a strict >, so the first maximum keeps the window. The
        # winner is tracked arithmetically (kk += better * (k - kk), exact mod 256): masked copies
        # with data-dependent masks cost ~10x more.
        for k in range(1, taps):
            v = grid.tap(xbuf, k, p)
            np.greater(v, bst, out=bt)
            np.maximum(bst, v, out=bst)
            np.subtract(np.uint8(k), kk, out=st)
            np.multiply(st, bt, out=st)
            kk += st
        sel = kk.reshape(p, win.oh, grid.wq)[:, :, : win.ow]
        out[lo : lo + p] = flat_g[starts[sel] + run[:p]]
    return np.ascontiguousarray(to_layout(op, out.reshape(n, c, win.oh, win.ow), "NCHW", out_layout or layout))


def _max_pool2d_backward_grad_grad(call, out, g):
    # Linear in input_grad; its adjoint scatters g back to the maxima: max_pool2d_backward. Piecewise
    # constant in the data, which gets no gradient.
    return [R.grad.max_pool2d_backward(g, call.args[1], **pool_attrs(call)), None]


max_pool2d_backward_grad = register(
    "relax.grad.max_pool2d_backward_grad",
    ("input_grad", "data"),
    POOL_ATTRS,
    infer=_max_pool2d_backward_grad_infer,
    kernel=max_pool2d_backward_grad_kernel,
    grad=_max_pool2d_backward_grad_grad,
    canonicalize=canonical_pool_attrs,
    positional_attrs=POOL_POSITIONAL,
    cost=POOL_BACKWARD,
    threaded=True,  # its kernel splits the batch over the kernel threads
)

# -- take_backward --------------------------------------------------------------------


def _take_backward_infer(ctx: InferCtx) -> TensorStructInfo:
    x, indices = ctx.tensor(1), ctx.tensor(2)
    if indices.dtype and not indices.dtype.startswith(("int", "uint")):
        raise ctx.error(f"indices must have an integer dtype, got {indices.dtype}", 2)
    axis = ctx.attrs["axis"]
    if axis is not None and x.ndim != -1:
        ax = normalize_axis(axis, x.ndim)
        if ax is None:
            raise ctx.error(f"axis {axis} out of range for a {x.ndim}-D tensor", 1)
    else:
        ax = None
    # The gradient has take(x, indices, axis)'s shape.
    if indices.shape is not None and (axis is None or (x.shape is not None and ax is not None)):
        shape = indices.shape if axis is None else x.shape[:ax] + indices.shape + x.shape[ax + 1 :]
        expected = TensorStructInfo(shape, x.dtype)
    elif indices.ndim != -1 and x.ndim != -1:
        expected = TensorStructInfo(None, x.dtype, indices.ndim + (0 if axis is None else x.ndim - 1))
    else:
        expected = TensorStructInfo(None, x.dtype, -1)
    _check_like(ctx, 0, expected, "a gradient shaped like take(x, indices, axis)")
    return x


def take_backward_kernel(output_grad, x, indices, *, axis, mode):
    # TVM's take_backward carries mode="" (unset): that is take's default, "fast".
    if np.asarray(output_grad).dtype == np.bool_:
        raise KernelError("R.grad.take_backward: bool gradients cannot be summed")
    return index_kernels.take_backward(output_grad, x, indices, axis=axis, mode=mode or "fast")


def _take_backward_grad(call, out, g):
    # Linear in output_grad: the adjoint of scattering rows into x is gathering them back, take(g).
    # The result does not depend on x's values; indices are not differentiable.
    axis, mode = call.attrs["axis"], call.attrs["mode"] or "fast"
    if axis is None and call.args[1].struct_info.ndim != 1:
        # axis=None addresses the flattened x; R.take itself wants a 1-D tensor then (as TVM's).
        g, axis = R.flatten(g), 0
    return [R.take(g, call.args[2], axis=axis, mode=mode), None, None]


take_backward = register(
    "relax.grad.take_backward",
    ("output_grad", "x", "indices"),
    (Attr("axis", at.to_opt_int, None), Attr("mode", at.to_str, "")),
    infer=_take_backward_infer,
    kernel=take_backward_kernel,
    grad=_take_backward_grad,
    # TVM prints mode="" but its parser rejects the keyword: leave it out so our text loads in TVM.
    print_omit={"mode": ""},
    # "" (TVM's unset mode) is take's default: the two spellings are one attribute value.
    canonicalize=lambda a: {**a, "mode": ""} if a.get("mode") == "fast" else a,
    tvm_note=lambda a: (
        f'R.grad.take_backward(mode="{a["mode"]}") has no TVM spelling (TVM\'s take_backward has no mode: it is take\'s "fast")'
        if a.get("mode") else None
    ),
    cost=ELEMENTWISE,
)
