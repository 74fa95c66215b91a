"""Where the executor decides threading: ops say what they allow, the runtime decides.

An op whose kernel splits its batch over the kernel threads declares `register(..., threaded=True)`
(convolutions, pooling and their gradients); an op with a form that splits a large product declares it as
`split_kernel=` (matmul). The runtime decides the rest, here and in split.py (large elementwise results in
parts) and pairs.py (two threaded kernels side by side); the thresholds are retrograd/tuning.py's.

A call of an executable whose functions run threaded kernels or split results holds BLAS to one thread
throughout (`call_scope`): OpenBLAS's threads spin for a while after each threaded call, and spinning
threads took the cores from the kernel threads (MNIST-net step at two threads: 135 ms with BLAS threading
its matmuls, 40 ms with BLAS held). While it holds BLAS, the ops' `split_kernel` forms run instead of
their kernels (`when_held`), so that large products still use every thread. A call without such kernels
(an MLP) leaves BLAS to thread its matmuls, which it does with less overhead than a split here (0.69 vs
1.15 ms a step).
"""

from __future__ import annotations

import threading

from retrograd.ops.kernels import parallel

_state = threading.local()  # .held: this thread runs an executor call that holds BLAS to one thread


class _Held(parallel.OneBlasThread):
    __slots__ = ("was_held",)  # an executor called inside another's call gives the outer call its state back

    def __enter__(self):
        super().__enter__()
        self.was_held = blas_held()
        _state.held = True

    def __exit__(self, *exc):
        _state.held = self.was_held
        super().__exit__(*exc)


def call_scope(splits: bool):
    """The context of one executor call; `splits`: the executable runs kernels that split their work.
    BLAS is held to one thread when there is more than one kernel thread, the call is not itself inside
    a split's part, and BLAS's threads can be set (threadpoolctl)."""
    if splits and parallel.get_num_threads() > 1 and not parallel.in_part() and parallel.blas_controllers():
        return _Held()
    return parallel.NO_SCOPE


def blas_held() -> bool:
    """Whether this thread runs an executor call that holds BLAS to one thread."""
    return getattr(_state, "held", False)


def when_held(split_kernel, kernel):
    """A kernel that runs `split_kernel` while this thread's executor call holds BLAS, else `kernel`."""

    def run(*args, **attrs):
        return (split_kernel if getattr(_state, "held", False) else kernel)(*args, **attrs)

    return run
