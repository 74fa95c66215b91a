"""The kernel threads: contiguous parts of a batch run at once, BLAS kept to one thread inside.

NumPy releases the GIL in its copies, ufunc loops and BLAS calls, so the big kernels (convolutions,
pooling) run their batch in parts on a small thread pool. Inside such a part BLAS must not start
threads of its own: two Python threads each calling a two-thread OpenBLAS measured slower than one
(10.0 vs 9.7 ms, MNIST's second convolution), while two parts with single-threaded BLAS took 8.5 ms
against 15.4 ms sequential. BLAS's thread count is set through threadpoolctl (optional: the `train`
extra); without it a part that calls BLAS runs sequentially unless the environment already keeps BLAS
to one thread. The thread count is `set_num_threads(n)`, else RETROGRAD_NUM_THREADS, else
OMP_NUM_THREADS, else the CPUs this process may use. This is the mechanism; whether an executor call
holds BLAS, splits a product or pairs two kernels is the runtime's decision (runtime/threads.py), and the
thresholds live in retrograd/tuning.py.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading

import retrograd.tuning as tuning

_state = threading.local()  # .inside: this thread is running a part (no nested splits)
_lock = threading.Lock()
_threads: int | None = None
_blas = None  # threadpoolctl's BLAS controllers, [] when absent; found on first use
_blas_modules = 0  # len(sys.modules) when _blas was found


def _env_threads() -> int:
    for name in ("RETROGRAD_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value:
            try:
                return max(1, int(value.split(",")[0]))
            except ValueError:
                pass
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def get_num_threads() -> int:
    """Threads the kernels split their work over."""
    global _threads
    if _threads is None:
        _threads = _env_threads()
    return _threads


def set_num_threads(n: int | None) -> None:
    """Use `n` threads in the kernels (None: the default from the environment). BLAS calls outside the
    split kernels keep BLAS's own setting."""
    global _threads
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise ValueError(f"the number of threads must be a positive int, got {n!r}")
    _threads = n if n is not None else _env_threads()


def blas_controllers() -> list:
    """threadpoolctl's controllers of the BLAS libraries loaded ([] without threadpoolctl: BLAS cannot be held).
    Looked up again after an import (scipy brings a BLAS of its own), else remembered: a scan costs milliseconds."""
    global _blas, _blas_modules
    if _blas is None or _blas_modules != len(sys.modules):
        _blas_modules = len(sys.modules)
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _blas = []
        else:
            _blas = [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"]
    return _blas


def in_part() -> bool:
    """Whether this thread is running a part of a split (work started here runs unsplit)."""
    return getattr(_state, "inside", False)


def _blas_single_by_env() -> bool:
    return any(os.environ.get(v, "").strip() == "1" for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"))


class OneBlasThread:
    """BLAS limited to one thread for the duration (a no-op when it cannot be controlled)."""

    __slots__ = ("saved",)

    def __enter__(self):
        self.saved = [(c, c.get_num_threads()) for c in blas_controllers()]
        for c, n in self.saved:
            if n != 1:
                c.set_num_threads(1)

    def __exit__(self, *exc):
        for c, n in self.saved:
            if n != 1:
                c.set_num_threads(n)


NO_SCOPE = contextlib.nullcontext()  # reusable: entering it does nothing


def parts_for(n: int, work_ns: float, min_part_ns: float | None = None) -> int:
    """How many parts a batch of n items carrying `work_ns` of work is worth splitting into."""
    if n < 2 or getattr(_state, "inside", False):
        return 1
    least = tuning.MIN_PART_NS if min_part_ns is None else min_part_ns
    worth = (work_ns - tuning.WAKE_NS) // least if least > 0 else n
    return int(max(1, min(get_num_threads(), n, worth)))


def split(n: int, parts: int, lead: float = 0.0) -> list[slice]:
    """range(n) as `parts` contiguous slices of near-equal size, the first larger by the fraction
    `lead` of the whole (less than 1/parts) than the others."""
    first = (1 + lead * (parts - 1)) / parts  # the first part's fraction of the whole
    fractions = [0.0] + [first + (1 - first) * i / (parts - 1) if parts > 1 else 1.0 for i in range(parts)]
    bounds = [int(n * f + 1e-9) for f in fractions]
    return [slice(bounds[i], bounds[i + 1]) for i in range(parts) if bounds[i] < bounds[i + 1]]


class _Worker:
    """A kernel thread: waits on `go`, runs one part in the submitter's context, releases `done`.
    Two locks per hand-off and no queue or future: a part is worth ~60 µs, so dispatch must be small."""

    def __init__(self):
        self.go, self.done = threading.Lock(), threading.Lock()
        self.go.acquire()
        self.done.acquire()
        self.task = self.result = self.error = None
        threading.Thread(target=self._loop, name="retrograd-kernels", daemon=True).start()

    def _loop(self):
        while True:
            self.go.acquire()
            ctx, fn, sl = self.task
            try:
                self.result, self.error = ctx.run(_run_part, fn, sl), None
            except BaseException as err:  # handed to the submitting thread
                self.result, self.error = None, err
            self.task = None
            self.done.release()

    def start(self, fn, sl):
        # A copy of the caller's context: NumPy's errstate is a context variable.
        self.task = (contextvars.copy_context(), fn, sl)
        self.go.release()

    def join(self):
        self.done.acquire()
        return self.result, self.error


_workers: list[_Worker] = []
_busy = threading.Lock()  # one split at a time uses the workers; a concurrent one runs inline


def _get_workers(count: int) -> list[_Worker]:
    with _lock:
        while len(_workers) < count:
            _workers.append(_Worker())
        return _workers[:count]


def _retire(workers: list[_Worker]) -> None:
    """Never hand these workers another part (their `done` may be released late, by an old part)."""
    with _lock:
        _workers[:] = [w for w in _workers if w not in workers]


def _run_part(fn, sl):
    _state.inside = True
    try:
        return fn(sl)
    finally:
        _state.inside = False


def _claim(blas: bool) -> bool:
    """Whether this thread may hand work to the kernel threads now; if so it holds `_busy` until it
    releases it. `blas`: the work calls BLAS, which must then be kept to one thread inside it."""
    if blas and not blas_controllers() and not _blas_single_by_env():
        return False  # BLAS would start threads inside each part: leave the threading to BLAS
    return _busy.acquire(blocking=False)  # else another thread's split holds the workers


def _at_once(fn, arg, asides: list) -> tuple:
    """fn(arg) here and each (fn_i, arg_i) of `asides` on a kernel thread of its own, at once; every one
    has finished when this returns, so none may still write into the caller's arrays. (fn's value,
    fn's exception or None, [(value, exception or None)] of the asides)."""
    workers = _get_workers(len(asides))
    for w, (f, a) in zip(workers, asides):
        w.start(f, a)
    value = error = None
    try:
        value = _run_part(fn, arg)
    except BaseException as err:
        error = err
    try:
        joined = [w.join() for w in workers]
    except BaseException:  # interrupted while waiting: a worker may still run its part
        _retire(workers)
        raise
    return value, error, joined


def run_parts(fn, n: int, work_ns: float, blas: bool = False, min_part_ns: float | None = None) -> list:
    """[fn(slice) for the parts of range(n)], the parts run at once on the kernel threads when the
    work is worth it (at least `min_part_ns` a part, default tuning.MIN_PART_NS). `blas`: fn calls BLAS, which
    then runs single-threaded inside the parts; small work also runs with one BLAS thread (waking
    BLAS's threads costs more than it saves there)."""
    parts = parts_for(n, work_ns, min_part_ns)
    if parts > 1 and not _claim(blas):
        parts = 1
    if parts == 1:
        if blas and work_ns < tuning.MIN_PART_NS * max(2, get_num_threads()) and blas_controllers():
            with OneBlasThread():
                return [fn(slice(0, n))]
        return [fn(slice(0, n))]
    try:
        with OneBlasThread() if blas else NO_SCOPE:
            slices = split(n, parts, min(tuning.WAKE_NS / work_ns, 0.9 / parts) if work_ns > 0 else 0.0)
            first, error, joined = _at_once(fn, slices[0], [(fn, sl) for sl in slices[1:]])
    finally:
        _busy.release()
    for _, err in joined:
        error = error or err
    if error is not None:
        raise error
    return [first] + [r for r, _ in joined]


def run_pair(here, aside):
    """(here(), (aside(), None) or (None, the exception aside raised)), `aside` run at once on a kernel
    thread; neither splits its own work (both run with one BLAS thread). None, having run nothing,
    when there is one thread or the kernel threads are taken."""
    if get_num_threads() < 2 or getattr(_state, "inside", False) or not _claim(blas=True):
        return None
    try:
        with OneBlasThread():
            value, error, [outcome] = _at_once(lambda _: here(), None, [(lambda _: aside(), None)])
    finally:
        _busy.release()
    if error is not None:
        raise error
    return value, outcome


def run_sum(fn, n: int, work_ns: float, blas: bool = False):
    """The sum of fn(slice) over the parts of range(n) (each part returns a fresh array it owns)."""
    results = run_parts(fn, n, work_ns, blas)
    total = results[0]
    for more in results[1:]:
        total += more
    return total


if hasattr(os, "register_at_fork"):
    # A forked child has none of the parent's threads: it starts its own workers.
    def _forget_workers():
        global _lock, _busy
        _workers.clear()
        _lock, _busy = threading.Lock(), threading.Lock()

    os.register_at_fork(after_in_child=_forget_workers)
