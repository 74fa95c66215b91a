"""Register liveness shared by the lowering and the memory model: release points, in-place arguments."""

from __future__ import annotations

from retrograd.ir.dtypes import EXTENSION_DTYPES
from retrograd.ir.nested import tuple_leaves
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.storage import in_storage


def flat_registers(src, out: set) -> set:
    """Add the registers of a source (a register, or a nested tuple of sources) to `out`."""
    if isinstance(src, int):
        out.add(src)
    else:
        out.update(tuple_leaves(src))  # a stack: tuples nest to any depth
    return out


def release_points(reads: list, outs: list, branching: list, result_regs: set, owned) -> tuple:
    """(frees, dying, prefree, endfree) for a block's instructions.

    reads[i]: registers instruction i reads; outs[i]: the one it defines; branching[i]: it is an If.
    frees[i]: released right after instruction i; dying[i] (a dict): last read by If i, so released inside its
    branches at their own last use (a branch does not keep alive what only the other one needs);
    prefree: owned but never read, released before the block runs; endfree: the block's result,
    released once the result is read. A register defined but never read dies right after its definition.
    """
    n = len(reads)
    last: dict[int, int] = {}
    for i, rs in enumerate(reads):
        for r in rs:
            last[r] = i
    defined_at = {out: i for i, out in enumerate(outs)}
    frees: list[list[int]] = [[] for _ in range(n)]
    dying: dict[int, set[int]] = {}  # only Ifs have some: not a set per instruction
    prefree, endfree = [], []
    for r in sorted(owned):
        if r in result_regs:
            endfree.append(r)
            continue
        i = last.get(r)
        if i is None:
            d = defined_at.get(r)
            (prefree if d is None else frees[d]).append(r)
        elif branching[i]:
            dying.setdefault(i, set()).add(r)
        else:
            frees[i].append(r)
    return frees, dying, prefree, endfree


def inplace_positions(call, srcs, out_sinfo) -> list[int]:
    """Arguments of an op call whose buffer the executor may compute the result into (when that
    argument's register is released at the call and nothing else refers to it at run time)."""
    op = call.op
    if getattr(op, "inplace", None) is None or not all(isinstance(s, int) for s in srcs):
        return []
    arg_sinfos = [getattr(a, "struct_info", None) for a in call.args]
    if storage_of(op, out_sinfo, arg_sinfos) is not None:
        return []  # bfloat16 / float8 compute on float32 copies (ops/storage.py): nothing to write into
    return op.inplace_candidates(arg_sinfos, out_sinfo)


def storage_of(op, out_sinfo, arg_sinfos) -> str | None:
    """ops.storage.in_storage, with the common case (tensors of NumPy dtypes only) decided without its
    walk over the struct info: lowering asks it of every op of a function."""
    if type(out_sinfo) is TensorStructInfo and out_sinfo.dtype not in EXTENSION_DTYPES:
        for s in arg_sinfos:
            if type(s) is not TensorStructInfo or s.dtype in EXTENSION_DTYPES:
                break
        else:
            return None
    return in_storage(op, out_sinfo, arg_sinfos)
