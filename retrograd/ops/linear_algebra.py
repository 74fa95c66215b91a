"""Linear algebra (TVM's linear_algebra.py): matmul, einsum, outer."""

from __future__ import annotations

import string
from math import prod

import numpy as np

from retrograd.errors import GradientError
from retrograd.ir.expr import Tuple, TupleGetItem, prim_value, shape_expr
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.attr_types import to_opt_dtype
from retrograd.ops.cost import ELEMENTWISE, MATMUL, Cost, elements
from retrograd.ops.kernels.matmul import matmul as matmul_kernel, matmul_parts
from retrograd.ops.registry import Attr, InferCtx, register
from retrograd.ops.shape_utils import broadcast_shapes, same_dtype


def _infer_matmul(ctx: InferCtx) -> TensorStructInfo:
    a, b = ctx.tensor(0), ctx.tensor(1)
    out_dtype = ctx.attrs["out_dtype"]
    dtype = same_dtype(a, b)
    if dtype is None and out_dtype is None:
        raise ctx.error(f"dtypes {a.dtype} and {b.dtype} differ (give out_dtype to mix them)")
    dtype = out_dtype or dtype
    for i, t in enumerate((a, b)):
        if t.ndim == 0:
            raise ctx.error("expects tensors of at least one dimension, got a scalar", i)
    if a.ndim == -1 or b.ndim == -1:
        return TensorStructInfo(None, dtype, -1)
    ndim = max(a.ndim, b.ndim, 2) - (a.ndim == 1) - (b.ndim == 1)
    if a.shape is None or b.shape is None:
        return TensorStructInfo(None, dtype, ndim)
    # A 1-D operand is a row (left) or column (right) vector whose unit dim is dropped from the result.
    sa = (1,) + a.shape if a.ndim == 1 else a.shape
    sb = b.shape + (1,) if b.ndim == 1 else b.shape
    ka, kb = sa[-1], sb[-2]
    if ka != kb and isinstance(ka, int) and isinstance(kb, int):
        raise ctx.error(f"inner dimensions differ ({ka} vs {kb})")
    batch = broadcast_shapes(sa[:-2], sb[:-2])
    if batch is None:
        raise ctx.error(f"batch dimensions {sa[:-2]} and {sb[:-2]} cannot be broadcast together")
    rows = (sa[-2],) if a.ndim > 1 else ()
    cols = (sb[-1],) if b.ndim > 1 else ()
    return TensorStructInfo(batch + rows + cols, dtype)


def _t(x, ndim: int):
    """Swap the last two axes."""
    return R.permute_dims(x, axes=list(range(ndim - 2)) + [ndim - 1, ndim - 2])


def _matmul_grad(call, out, g):
    a, b = call.args
    na, nb = a.struct_info.ndim, b.struct_info.ndim
    ad, bd, od = a.struct_info.dtype, b.struct_info.dtype, out.struct_info.dtype

    def mm(x, y, xd, yd, target):
        # With out_dtype the adjoint's dtype differs from the operands': ask for the operand's dtype back.
        return R.matmul(x, y, out_dtype=None if xd == yd == target else target)

    if na > 1 and nb > 1:
        da, db = mm(g, _t(b, nb), od, bd, ad), mm(_t(a, na), g, ad, od, bd)
    elif na == 1 and nb > 1:
        ge = R.expand_dims(g, axis=[-2])
        da = R.squeeze(mm(ge, _t(b, nb), od, bd, ad), axis=[-2])
        db = mm(R.expand_dims(a, axis=[1]), ge, ad, od, bd)
    elif nb == 1 and na > 1:
        ge = R.expand_dims(g, axis=[-1])
        da = mm(ge, R.expand_dims(b, axis=[0]), od, bd, ad)
        db = R.squeeze(mm(_t(a, na), ge, ad, od, bd), axis=[-1])
    else:
        ga = g if od == ad else R.astype(g, ad)
        gb = g if od == bd else R.astype(g, bd)
        da = R.multiply(ga, b if bd == ad else R.astype(b, ad))
        db = R.multiply(gb, a if ad == bd else R.astype(a, bd))
    # The driver collapse-sums broadcast batch dims back to each operand's shape.
    return [da, db]


matmul = register(
    "relax.matmul",
    ("x1", "x2"),
    (Attr("out_dtype", to_opt_dtype, None),),
    infer=_infer_matmul,
    kernel=matmul_kernel,
    grad=_matmul_grad,
    cost=MATMUL,
    split_kernel=matmul_parts,  # large products in parts while an executor call holds BLAS to one thread
)


def explicit_subscripts(subscripts: str, ndims: list[int]) -> tuple[list[str], str]:
    """(one letter string per operand, output letters): the implicit output (letters seen once, sorted)
    made explicit and each "..." replaced by letters the subscripts do not use. ValueError if malformed."""
    text = subscripts.replace(" ", "")
    lhs, arrow, out = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise ValueError(f"subscripts {subscripts!r} name {len(terms)} operands, got {len(ndims)}")
    for t in terms + ([out] if arrow else []):
        rest = t.replace("...", "")
        if "." in rest or not all(c in string.ascii_letters for c in rest):
            raise ValueError(f"bad subscripts {subscripts!r}: use letters and at most one '...' per term")
    free = [c for c in string.ascii_letters if c not in text]
    n_ell = max((nd - len(t.replace("...", "")) for t, nd in zip(terms, ndims) if "..." in t), default=0)
    ell = "".join(free[:n_ell])
    ops = []
    for t, nd in zip(terms, ndims):
        if "..." in t:
            k = nd - len(t.replace("...", ""))
            if k < 0:
                raise ValueError(f"term {t!r} has more letters than its operand's {nd} dimensions")
            t = t.replace("...", ell[n_ell - k :])
        elif len(t) != nd:
            raise ValueError(f"term {t!r} has {len(t)} letters but its operand has {nd} dimensions")
        ops.append(t)
    if arrow:
        out = out.replace("...", ell)
        seen = "".join(ops)
        missing = [c for c in out if c not in seen]
        if missing or len(set(out)) != len(out):
            raise ValueError(f"bad output subscripts in {subscripts!r}")
    else:
        counts = "".join(ops)
        out = ell + "".join(sorted(c for c in set(counts) if counts.count(c) == 1 and c not in ell))
    return ops, out


def _infer_einsum(ctx: InferCtx) -> TensorStructInfo:
    fields = ctx.tuple(0).fields
    if not fields:
        raise ctx.error("needs at least one operand", 0)
    if not all(isinstance(f, TensorStructInfo) for f in fields):
        raise ctx.error("expects a tuple of tensors", 0)
    dtypes = {f.dtype for f in fields}
    if len(dtypes) > 1:
        raise ctx.error(f"operands have different dtypes {sorted(dtypes)}", 0)
    dtype = fields[0].dtype
    if any(f.ndim == -1 for f in fields):
        return TensorStructInfo(None, dtype, -1)
    try:
        ops, out = explicit_subscripts(ctx.attrs["subscripts"], [f.ndim for f in fields])
    except ValueError as err:
        raise ctx.error(str(err)) from None
    if any(f.shape is None for f in fields):
        return TensorStructInfo(None, dtype, len(out))
    sizes: dict = {}
    for term, f in zip(ops, fields):
        for c, d in zip(term, f.shape):
            known = sizes.get(c, 1)
            merged = broadcast_shapes((known,), (d,))
            if merged is None:
                raise ctx.error(f"subscript {c!r} has sizes {known} and {d}", 0)
            sizes[c] = merged[0]
    return TensorStructInfo(tuple(sizes[c] for c in out), dtype)


def einsum_kernel(operands, subscripts):
    out = np.asarray(np.einsum(subscripts, *operands, optimize=True))  # BLAS-backed contraction paths
    # A pure transpose or diagonal comes back as a view: results own their memory.
    return out.copy() if any(np.may_share_memory(out, o) for o in operands) else out


def _distinct_letters(term: str, taken: set, shape, dtype, span):
    """A repeated letter of `term` (a diagonal: "ii") as distinct letters, each later occurrence
    getting a fresh one, with an identity matrix per pair tying it to the first: (term with distinct
    letters, [(subscripts "ij", identity expression)])."""
    out, eyes, seen = [], [], {}
    for pos, c in enumerate(term):
        if c not in seen:
            seen[c] = pos
            out.append(c)
            continue
        fresh = next(x for x in string.ascii_letters if x not in taken)
        taken.add(fresh)
        n = None if shape is None else shape[pos]
        if not isinstance(n, int):
            raise GradientError(f"R.einsum: the gradient of the repeated subscript in {term!r} needs a static size", span)
        eyes.append((c + fresh, R.eye(prim_value(n), dtype=dtype)))
        out.append(fresh)
    return "".join(out), eyes


def _einsum_grad(call, out, g):
    """The adjoint of operand i contracts g with the other operands onto i's letters; letters only i
    has (summed away) are broadcast back. A letter repeated within operand i (a diagonal, a trace) is
    split into distinct letters tied by an identity matrix, which puts the gradient on the diagonal."""
    fields = call.args[0].struct_info.fields
    ops, out_letters = explicit_subscripts(call.attrs["subscripts"], [f.ndim for f in fields])
    args = call.args[0]
    operand = (lambda i: args.fields[i]) if isinstance(args, Tuple) else (lambda i: TupleGetItem(args, i))
    grads = []
    for i, term in enumerate(ops):
        others = [j for j in range(len(ops)) if j != i]
        extra = []
        if len(set(term)) != len(term):
            taken = set("".join(ops) + out_letters)
            term, extra = _distinct_letters(term, taken, fields[i].shape, fields[i].dtype, call.span)
        terms = [ops[j] for j in others] + [t for t, _ in extra]
        known = set(out_letters).union(*terms)
        keep = "".join(c for c in term if c in known)
        spec = ",".join(terms + [out_letters]) + "->" + keep
        gi = R.einsum(Tuple([operand(j) for j in others] + [e for _, e in extra] + [g]), subscripts=spec)
        if keep != term:
            shape = fields[i].shape
            if shape is None:
                raise GradientError("R.einsum: the gradient needs the operands' shapes", call.span)
            gi = R.broadcast_to(R.reshape(gi, shape_expr([d if c in known else 1 for c, d in zip(term, shape)])), shape_expr(shape))
        grads.append(gi)
    return [Tuple(grads)]


def _einsum_flops(call, out) -> float:
    """NumPy's naive count (`np.einsum_path`): the product of every index's extent, times (operands - 1),
    plus one when operands share an index; a two-operand contraction is 2·M·N·K, as matmul."""
    fields = getattr(call.args[0].struct_info, "fields", ())
    shapes = [f.shape if isinstance(f, TensorStructInfo) else None for f in fields]
    if not shapes or any(s is None or not all(isinstance(d, int) for d in s) for s in shapes):
        return 2.0 * elements(out)
    terms, _ = explicit_subscripts(call.attrs["subscripts"], [len(s) for s in shapes])
    extent: dict = {}
    for term, shape in zip(terms, shapes):
        for letter, d in zip(term, shape):
            extent[letter] = max(extent.get(letter, 1), d)
    shared = sum(len(set(t)) for t in terms) > len(extent)
    return float(prod(extent.values()) * (max(1, len(shapes) - 1) + shared))


einsum = register(
    "relax.einsum",
    ("operands",),
    (Attr("subscripts", at.to_str),),
    infer=_infer_einsum,
    kernel=einsum_kernel,
    grad=_einsum_grad,
    cost=Cost("matmul", _einsum_flops),
)


def _infer_outer(ctx: InferCtx) -> TensorStructInfo:
    a, b = ctx.tensor(0), ctx.tensor(1)
    if a.ndim != 1 or b.ndim != 1:
        raise ctx.error(f"expects two 1-D tensors, got ndims {a.ndim} and {b.ndim}")
    if a.dtype and b.dtype and a.dtype != b.dtype:
        raise ctx.error(f"dtypes {a.dtype} and {b.dtype} differ")
    if a.shape is None or b.shape is None:
        return TensorStructInfo(None, a.dtype, 2)
    return TensorStructInfo((a.shape[0], b.shape[0]), a.dtype)


def outer_kernel(x1, x2):
    return np.outer(x1, x2)


outer = register(
    "relax.outer",
    ("x1", "x2"),
    infer=_infer_outer,
    kernel=outer_kernel,
    grad=lambda call, out, g: [R.matmul(g, call.args[1]), R.matmul(call.args[0], g)],
    cost=ELEMENTWISE,
)
