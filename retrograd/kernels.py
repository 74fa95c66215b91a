"""Every registered op's NumPy kernel under a public name: the op's name without `relax.`, dots as
underscores (`relax.add` -> `add`, `relax.nn.relu` -> `nn_relu`, `relax.grad.avg_pool2d_backward` ->
`grad_avg_pool2d_backward`).

    from retrograd.kernels import add, nn_relu
    nn_relu(add(x, y))

This is what `retrograd lower` imports. The names are read from the op registry when asked for (so
an op registered later is here too): each is the very function the executor binds to the op's calls
(`retrograd.ops.get(name).kernel`), defined once beside its op's registration, many of them built by
the public factories of `retrograd.ops.elementwise` (`ufunc_kernel(np.add)`, ...). A kernel takes
the call's arguments as arrays (tuples of arrays, shapes as tuples of ints, prim values as numbers)
and its attributes as keywords, and returns a fresh array (or a view where the op declares `aliases`).
"""

from __future__ import annotations

import keyword

from retrograd.ops import all_ops
from retrograd.ops.registry import OpDef


def kernel_name(op_name: str) -> str:
    """The public name of an op's kernel here: `relax.nn.relu` -> `nn_relu` (a keyword gets a `_`)."""
    name = op_name.removeprefix("relax.").replace(".", "_")
    return name + "_" if keyword.iskeyword(name) else name


def kernels() -> dict[str, OpDef]:
    """Public kernel name -> the op it is the kernel of, for every registered op with a kernel."""
    return {kernel_name(op.name): op for op in all_ops() if op.kernel is not None}


def __getattr__(name: str):
    op = kernels().get(name)
    if op is None:
        if name == "__all__":
            return sorted(kernels())
        raise AttributeError(f"module 'retrograd.kernels' has no kernel named {name!r} (no registered op with a kernel is called so)")
    return op.kernel


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(kernels()))
