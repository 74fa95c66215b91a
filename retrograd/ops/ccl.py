"""R.ccl.*: TVM's collective ops, run over torch.distributed's default process group.

TVM 0.27's four (`allreduce`, `allgather`, `broadcast_from_worker0`, `scatter_from_worker0`) keep its
attributes, inference and printed form; four of retrograd's own (`reduce_to_worker0`,
`gather_to_worker0`, `local_slice`, `local_embed`) exist for the gradient rules, each the adjoint of
another, so gradients of gradients work too. The kernels import torch only when a process group is
initialised (`retrograd.distributed.init`); outside one, every op is its group-of-one value (allreduce,
broadcast, scatter and gather of one worker are the identity), so a distributed module runs in one
process. `in_group` selects, in TVM's disco runtime, the worker group or all workers; torch has one
default group here, so both values run on it.

The ops are impure (`pure=False`): DCE, CSE, constant folding and recomputation would otherwise drop,
merge, fold or repeat a collective that every worker must issue the same number of times in the same
order; the executor never moves an impure call. TVM marks them pure, so TVM reads them in dataflow
blocks too; retrograd keeps them outside (its well-formedness rule for impure calls).
"""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ir.struct_info import StructInfo, TensorStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.registry import Attr, InferCtx, register
from retrograd.ops.shape_utils import dim_mul, normalize_axis

OP_TYPES = ("sum", "prod", "min", "max", "avg")


def _op_type(v) -> str:
    v = at.to_str(v)
    if v not in OP_TYPES:
        raise ValueError(f"expected one of {', '.join(OP_TYPES)}")
    return v


def _workers(v) -> int:
    v = at.to_int(v)
    if v < 1:
        raise ValueError("expected at least one worker")
    return v


# -- the process group ---------------------------------------------------------------------
def process_group():
    """torch.distributed when its default process group is initialised, else None (a group of one)."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    return dist if dist.is_available() and dist.is_initialized() else None


def _group_size(dist) -> int:
    return 1 if dist is None else dist.get_world_size()


def _rank(dist) -> int:
    return 0 if dist is None else dist.get_rank()


def _check_workers(name: str, num_workers: int, dist) -> None:
    n = _group_size(dist)
    if num_workers != n:
        raise KernelError(f"R.ccl.{name}: num_workers={num_workers} but the process group has {n} worker(s)"
                          + ("" if dist is not None else " (no process group: call retrograd.distributed.init())"))


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def _copy(x):
    """A fresh copy (a group of one's result: kernels never return their input)."""
    return x.detach().clone() if _is_torch(x) else np.array(x, copy=True, order="C")


def _buffer(x):
    """(result, torch view of it): a fresh copy of x the collective may write (kernels never change
    their inputs); a NumPy result is shared with torch through torch.from_numpy, without a copy."""
    if _is_torch(x):
        t = x.detach().clone().contiguous()
        return t, t
    import torch

    out = np.array(x, copy=True, order="C")
    return out, torch.from_numpy(out)


def _view(x):
    """x as a torch tensor the collective only reads: a NumPy array is shared through torch.from_numpy,
    not copied (a read-only or strided one is copied first: torch shares only writable C-ordered memory)."""
    if _is_torch(x):
        return x.contiguous()
    import torch

    a = np.asarray(x)
    if not (a.flags.c_contiguous and a.flags.writeable):
        a = np.array(a, copy=True, order="C")
    return torch.from_numpy(a)


def _empty_like(x, shape):
    if _is_torch(x):
        import torch

        t = torch.empty(shape, dtype=x.dtype, device=x.device)
        return t, t
    import torch

    out = np.empty(shape, np.asarray(x).dtype)
    return out, torch.from_numpy(out)


def _zeros_like(x, shape):
    if _is_torch(x):
        import torch

        return torch.zeros(shape, dtype=x.dtype, device=x.device)
    return np.zeros(shape, np.asarray(x).dtype)


def _chunks(x, num_workers: int, axis: int) -> list:
    """The num_workers equal parts of x along axis, as torch tensors for the group (views where they can be)."""
    parts = x.chunk(num_workers, axis) if _is_torch(x) else np.split(np.asarray(x), num_workers, axis)
    return [_view(c) for c in parts]


def _run(name: str, dist, fn):
    """Run one collective; a peer that died or timed out becomes a KernelError naming this worker."""
    try:
        return fn()
    except RuntimeError as err:  # torch's DistBackendError and gloo's errors are RuntimeErrors
        raise KernelError(f"R.ccl.{name} failed on worker {_rank(dist)} of {_group_size(dist)} (a worker died, "
                          f"left, or did not reach the collective within the timeout): {str(err).splitlines()[0]}") from None


def _same_parts(name: str, x, num_workers: int, axis: int) -> int:
    ndim = len(x.shape)
    ax = normalize_axis(axis, ndim)
    if ax is None or ndim == 0:
        raise KernelError(f"R.ccl.{name}: axis {axis} is out of range for a {ndim}-d tensor")
    if x.shape[ax] % num_workers:
        raise KernelError(f"R.ccl.{name}: axis {axis} has {x.shape[ax]} entries, not divisible by {num_workers} workers")
    return ax


# -- kernels ---------------------------------------------------------------------------------
def allreduce_kernel(x, *, op_type="sum", in_group=True):
    dist = process_group()
    if dist is None:
        return _copy(x)
    out, t = _buffer(x)
    op = {"sum": "SUM", "prod": "PRODUCT", "min": "MIN", "max": "MAX", "avg": "SUM"}[op_type]
    # gloo has no AVG: a sum divided by the group size (NCCL's AVG divides the same way).
    _run("allreduce", dist, lambda: dist.all_reduce(t, op=getattr(dist.ReduceOp, op)))
    if op_type == "avg":
        n = dist.get_world_size()
        if t.is_floating_point():
            t.div_(n)
        else:
            t.floor_divide_(n)
    return out


def allgather_kernel(x, *, num_workers, in_group=True):
    dist = process_group()
    _check_workers("allgather", num_workers, dist)
    if len(x.shape) == 0:
        raise KernelError("R.ccl.allgather: a 0-d tensor has no axis 0 to gather along")
    if dist is None:
        return _copy(x)
    src = _view(x)
    out, t = _empty_like(x, (x.shape[0] * num_workers, *x.shape[1:]))
    _run("allgather", dist, lambda: dist.all_gather(list(t.chunk(num_workers, 0)), src))
    return out


def broadcast_kernel(x):
    dist = process_group()
    if dist is None:
        return _copy(x)
    out, t = _buffer(x)
    _run("broadcast_from_worker0", dist, lambda: dist.broadcast(t, src=0))
    return out


def scatter_kernel(x, *, num_workers, axis=0):
    dist = process_group()
    _check_workers("scatter_from_worker0", num_workers, dist)
    ax = _same_parts("scatter_from_worker0", x, num_workers, axis)
    if dist is None:
        return _copy(x)
    shape = list(x.shape)
    shape[ax] //= num_workers
    out, t = _empty_like(x, tuple(shape))
    parts = _chunks(x, num_workers, ax) if dist.get_rank() == 0 else None
    _run("scatter_from_worker0", dist, lambda: dist.scatter(t, parts, src=0))
    return out


def reduce_to_worker0_kernel(x, *, op_type="sum"):
    dist = process_group()
    if dist is None:
        return _copy(x)
    out, t = _buffer(x)
    _run("reduce_to_worker0", dist, lambda: dist.reduce(t, dst=0, op=dist.ReduceOp.SUM))
    if dist.get_rank() != 0:
        return _zeros_like(x, tuple(x.shape))  # the other workers' results hold nothing
    return out


def gather_to_worker0_kernel(x, *, num_workers, axis=0):
    dist = process_group()
    _check_workers("gather_to_worker0", num_workers, dist)
    ndim = len(x.shape)
    ax = normalize_axis(axis, ndim)
    if ax is None or ndim == 0:
        raise KernelError(f"R.ccl.gather_to_worker0: axis {axis} is out of range for a {ndim}-d tensor")
    if dist is None:
        return _copy(x)
    src = _view(x)
    if dist.get_rank() != 0:
        _run("gather_to_worker0", dist, lambda: dist.gather(src, None, dst=0))
        shape = list(x.shape)
        shape[ax] *= num_workers
        return _zeros_like(x, tuple(shape))
    parts = [_empty_like(x, tuple(x.shape))[1] for _ in range(num_workers)]
    _run("gather_to_worker0", dist, lambda: dist.gather(src, parts, dst=0))
    if _is_torch(x):
        import torch

        return torch.cat(parts, ax)
    return np.concatenate([p.numpy() for p in parts], ax)


def local_slice_kernel(x, *, num_workers, axis=0):
    dist = process_group()
    _check_workers("local_slice", num_workers, dist)
    ax = _same_parts("local_slice", x, num_workers, axis)
    size = x.shape[ax] // num_workers
    r = _rank(dist)
    index = (slice(None),) * ax + (slice(r * size, (r + 1) * size),)
    part = x[index]
    return part.clone().contiguous() if _is_torch(part) else np.array(part, copy=True, order="C")


def local_embed_kernel(x, *, num_workers, axis=0):
    dist = process_group()
    _check_workers("local_embed", num_workers, dist)
    ndim = len(x.shape)
    ax = normalize_axis(axis, ndim)
    if ax is None or ndim == 0:
        raise KernelError(f"R.ccl.local_embed: axis {axis} is out of range for a {ndim}-d tensor")
    shape = list(x.shape)
    size = shape[ax]
    shape[ax] *= num_workers
    out = _zeros_like(x, tuple(shape))
    r = _rank(dist)
    out[(slice(None),) * ax + (slice(r * size, (r + 1) * size),)] = x
    return out


# -- inference -------------------------------------------------------------------------------
def _same_infer(ctx: InferCtx) -> StructInfo:
    return ctx.tensor(0)


def _resized(ctx: InferCtx, axis: int, grow: bool) -> StructInfo:
    """The input with `axis` multiplied (grow) or divided (shrink) by num_workers, as TVM infers it."""
    x = ctx.tensor(0)
    n = ctx.attrs["num_workers"]
    if x.shape is None:
        if x.ndim >= 0 and normalize_axis(axis, x.ndim) is None:
            raise ctx.error(f"axis {axis} is out of range for a {x.ndim}-d tensor", 0)
        return x
    ax = normalize_axis(axis, len(x.shape))
    if ax is None or not x.shape:
        raise ctx.error(f"axis {axis} is out of range for a {len(x.shape)}-d tensor", 0)
    shape = list(x.shape)
    d = shape[ax]
    if grow:
        shape[ax] = dim_mul(d, n)
    elif isinstance(d, int):
        if d % n:
            raise ctx.error(f"axis {axis} has {d} entries, not divisible by num_workers={n}", 0)
        shape[ax] = d // n
    else:
        shape[ax] = d if n == 1 else f"{d} // {n}"
    return TensorStructInfo(tuple(shape), x.dtype)


def _allgather_infer(ctx: InferCtx) -> StructInfo:
    return _resized(ctx, 0, grow=True)


def _split_infer(ctx: InferCtx) -> StructInfo:
    return _resized(ctx, ctx.attrs["axis"], grow=False)


def _join_infer(ctx: InferCtx) -> StructInfo:
    return _resized(ctx, ctx.attrs["axis"], grow=True)


# -- gradient rules --------------------------------------------------------------------------
def _allreduce_grad(call, out, g):
    """Every worker's output reads every worker's input: the adjoint sums the cotangents of all
    workers (the total loss is the sum of the workers' losses)."""
    kind, in_group = call.attrs["op_type"], call.attrs["in_group"]
    if kind in ("sum", "avg"):
        return [R.ccl.allreduce(g, op_type=kind, in_group=in_group)]
    total = R.ccl.allreduce(g, op_type="sum", in_group=in_group)
    x = call.args[0]
    if kind == "prod":  # d(prod_k x_k)/dx_r = out / x_r (x_r = 0 gives inf/nan, as in PyTorch's prod)
        return [R.divide(R.multiply(total, out), x)]
    # min/max: the workers holding the extreme value (each of them, on ties) receive the sum.
    return [R.multiply(total, R.astype(R.equal(x, out), out.struct_info.dtype))]


def _allgather_grad(call, out, g):
    n = call.attrs["num_workers"]
    total = R.ccl.allreduce(g, op_type="sum", in_group=call.attrs["in_group"])
    return [R.ccl.local_slice(total, num_workers=n, axis=0)]


def _own(name: str) -> str:
    return f"R.ccl.{name} is retrograd's own collective (a gradient of TVM's); TVM has no such op"


allreduce = register(
    "relax.ccl.allreduce",
    ("x",),
    (Attr("op_type", _op_type, "sum"), Attr("in_group", at.to_bool, True)),
    infer=_same_infer,
    kernel=allreduce_kernel,
    grad=_allreduce_grad,
    pure=False,
)

allgather = register(
    "relax.ccl.allgather",
    ("x",),
    (Attr("num_workers", _workers), Attr("in_group", at.to_bool, True)),
    infer=_allgather_infer,
    kernel=allgather_kernel,
    grad=_allgather_grad,
    pure=False,
)

broadcast_from_worker0 = register(
    "relax.ccl.broadcast_from_worker0",
    ("x",),
    (),
    infer=_same_infer,
    kernel=broadcast_kernel,
    # Every worker's output is worker 0's input: worker 0 receives the sum of all cotangents, the others nothing.
    grad=lambda call, out, g: [R.ccl.reduce_to_worker0(g)],
    pure=False,
)

_PARTS = (Attr("num_workers", _workers), Attr("axis", at.to_int, 0))  # a tensor in parts along an axis
scatter_from_worker0 = register(
    "relax.ccl.scatter_from_worker0",
    ("x",),
    _PARTS,
    infer=_split_infer,
    kernel=scatter_kernel,
    # Worker r's output is part r of worker 0's input: worker 0 receives every part's cotangent.
    grad=lambda call, out, g: [R.ccl.gather_to_worker0(g, **call.attrs)],
    pure=False,
    # TVM's inference indexes the shape with the axis as given: a negative one makes its module ill-formed.
    tvm_note=lambda a: (f"R.ccl.scatter_from_worker0(axis={a['axis']}): TVM takes no negative axis"
                        if a["axis"] < 0 else None),
)


def _sum_only(v) -> str:
    v = at.to_str(v)
    if v != "sum":
        raise ValueError("only 'sum' (the adjoint of a broadcast)")
    return v


def _own_collective(name, attrs_schema, infer, kernel, adjoint):
    """One of retrograd's own collectives (a gradient of TVM's, which TVM lacks), on one tensor `x`;
    impure, as every collective (its value depends on the worker running it). `adjoint(g, attrs)` builds
    its gradient: the collective that undoes its data movement."""
    return register(
        f"relax.ccl.{name}",
        ("x",),
        attrs_schema,
        infer=infer,
        kernel=kernel,
        grad=lambda call, out, g: [adjoint(g, call.attrs)],
        pure=False,
        tvm_note=lambda a: _own(name),
    )


reduce_to_worker0 = _own_collective("reduce_to_worker0", (Attr("op_type", _sum_only, "sum"),), _same_infer,
                                    reduce_to_worker0_kernel, lambda g, attrs: R.ccl.broadcast_from_worker0(g))
gather_to_worker0 = _own_collective("gather_to_worker0", _PARTS, _join_infer, gather_to_worker0_kernel,
                                    lambda g, attrs: R.ccl.scatter_from_worker0(g, **attrs))
# This worker's part of a tensor every worker holds, and its adjoint (the part placed in zeros): no
# communication.
local_slice = _own_collective("local_slice", _PARTS, _split_infer, local_slice_kernel,
                              lambda g, attrs: R.ccl.local_embed(g, **attrs))
local_embed = _own_collective("local_embed", _PARTS, _join_infer, local_embed_kernel,
                              lambda g, attrs: R.ccl.local_slice(g, **attrs))
