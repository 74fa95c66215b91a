"""Two independent heavy kernels of a function run at once: the later one on a kernel thread, started
where the earlier one runs.

A convolution's two gradients (data and weight) read the same output gradient and neither needs the
other. Split over the kernel threads one after the other, each pays the hand-offs of a split twice
(the worker's wake and the caller's wait, ~15 µs each on this VM, plus the GIL between the parts'
NumPy calls); run side by side, each on one thread, they pay one. Digits CNN step at two threads: the
pair took 560 µs against 900 µs split one after the other.

Nothing else changes: the later kernel's value is handed on, and counted by the memory meter, at its
own place in the order, and an error it raises is raised there, located at its binding. Only pure
kernels whose inputs are all computed before the earlier one runs are moved, and never one that
writes over a dying input (the earlier kernel and those between may still read it).
"""

from __future__ import annotations

from types import SimpleNamespace

from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.kernels import parallel

# Cost kinds (ops/cost.py) worth a thread of their own.
PAIR_KINDS = frozenset({"conv", "pool"})
# The smaller kernel of a pair must carry at least this much work (cost units: FLOPs for convolutions,
# window positions for pools), judged with symbolic dimensions at NOMINAL_DIM; and at run time its
# array inputs must hold at least PAIR_MIN_BYTES.
PAIR_MIN_COST = 8e6
PAIR_MIN_BYTES = 64 << 10
NOMINAL_DIM = 32
# The larger kernel of a pair at most this many times the smaller's work: past it, splitting each kernel
# over the threads keeps both cores busier.
PAIR_RATIO = 2.0
# How far ahead (instructions) a partner is looked for.
WINDOW = 32


def pair_cost(op, call, out_sinfo) -> float:
    """The work of a call that may run beside another (0 when it may not): op.cost with every symbolic
    dimension taken as NOMINAL_DIM, so that the ratio of two kernels' costs holds for any batch size
    when both scale with it."""
    if op.cost.kind not in PAIR_KINDS:
        return 0.0
    args = [SimpleNamespace(struct_info=_nominal(a.struct_info)) for a in call.args]
    cost = op.cost(SimpleNamespace(args=args, attrs=call.attrs), _nominal(out_sinfo))
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
        for j in range(i + 1, min(len(ins), i + 1 + WINDOW)):
            b = ins[j]
            if j not in taken and b.pair_cost and b.moves and not b.reads & written \
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
