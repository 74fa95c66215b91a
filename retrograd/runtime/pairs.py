"""Two independent heavy kernels of a function run at once: the later one on a kernel thread, started
where the earlier one runs.

A convolution's two gradients (data and weight) read the same output gradient and neither needs the
other. Split over the kernel threads one after the other, each pays the hand-offs of a split twice;
run side by side, each on one thread, they pay one (figures and thresholds: retrograd/tuning.py).
Candidates are the ops declaring `threaded=True`.

Nothing else changes: the later kernel's value is handed on, and counted by the memory meter, at its
own place in the order, and an error it raises is raised there, located at its binding. Only pure
kernels whose inputs are all computed before the earlier one runs are moved, and never one that
writes over a dying input (the earlier kernel and those between may still read it).
"""

from __future__ import annotations

from retrograd.ir.expr import Call, Var
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.kernels import parallel
from retrograd.tuning import NOMINAL_DIM, PAIR_MIN_BYTES, PAIR_MIN_COST, PAIR_RATIO, PAIR_WINDOW


def pair_cost(op, call, out_sinfo) -> float:
    """The work of a call that may run beside another (0 when it may not): a threaded op's cost, with
    every symbolic dimension taken as NOMINAL_DIM, so that the ratio of two kernels' costs holds for
    any batch size when both scale with it."""
    if not op.threaded:
        return 0.0
    args = [a if _nominal(a.struct_info) is a.struct_info else Var("nominal", _nominal(a.struct_info)) for a in call.args]
    if any(n is not a for n, a in zip(args, call.args)):
        call = Call(call.op, args, call.attrs)
    cost = op.cost(call, _nominal(out_sinfo))
    return cost if cost >= PAIR_MIN_COST else 0.0


def _nominal(sinfo):
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None and not all(isinstance(d, int) for d in sinfo.shape):
        return TensorStructInfo(tuple(d if isinstance(d, int) else NOMINAL_DIM for d in sinfo.shape), sinfo.dtype, sinfo.ndim)
    return sinfo


def partners(ins: list) -> dict[int, int]:
    """{earlier index: later index} for the pairs to run at once. `ins` items have .reads, .out, .special,
    .pair_cost (0 when the kernel is not a candidate) and .moves (may run ahead of its place)."""
    pairs: dict[int, int] = {}
    taken: set[int] = set()
    for i, a in enumerate(ins):
        if i in taken or not a.pair_cost or a.special:
            continue
        written = {a.out}
        for j in range(i + 1, min(len(ins), i + 1 + PAIR_WINDOW)):
            b = ins[j]
            if j not in taken and b.pair_cost and b.moves and written.isdisjoint(b.reads) \
                    and max(a.pair_cost, b.pair_cost) <= PAIR_RATIO * min(a.pair_cost, b.pair_cost):
                pairs[i] = j
                taken.update((i, j))
                break
            if b.special:
                break  # an If or a call may have effects that order the kernels around it
            written.add(b.out)
    return pairs


def make_pair(first, second, slot: int, reads: tuple):
    """(fork, take): `fork` runs `first` here and `second` on a kernel thread, keeping second's outcome in
    register `slot`; `take`, at second's place, hands it on (or runs second, when it did not run ahead)."""

    def fork(regs):
        if sum(getattr(regs[r], "nbytes", 0) for r in reads) < PAIR_MIN_BYTES:
            return first(regs)
        done = parallel.run_pair(lambda: first(regs), lambda: second(regs))
        if done is None:  # one thread, or the threads are taken
            return first(regs)
        value, regs[slot] = done
        return value

    def take(regs):
        outcome = regs[slot]
        if outcome is None:
            return second(regs)
        regs[slot] = None
        value, error = outcome
        if error is not None:
            raise error
        return value

    return fork, take
