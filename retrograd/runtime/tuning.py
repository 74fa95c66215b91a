"""The executor's parallelism thresholds, in one place, with how each was found.

Ops say what they allow (`register(..., threaded=True)`: the kernel may split its batch over the kernel
threads; `inplace=`: an elementwise form); the runtime decides from these figures whether a call runs
split, in parts, or beside another kernel. All were measured on the project's 2-vCPU VM (float32,
OpenBLAS, OPENBLAS_CORETYPE set as benchmarks/RESULTS.md records) with benchmarks/bench_training.py,
bench_step.py and bench_kernels.py; another machine may want others. The kernels' own split
thresholds (a part's least work, the worker's wake-up, the speeds that turn sizes into nanoseconds)
sit with the thread pool in ops/kernels/parallel.py and ops/kernels/matmul.py: the kernels read them,
and the ops layer cannot import the runtime.
"""

from __future__ import annotations

# runtime/split.py: an elementwise result of at least this many bytes is computed in parts on the
# kernel threads. Below it, one pass over the data costs less than handing parts to threads.
SPLIT_BYTES = 1 << 20

# runtime/pairs.py: two threaded kernels run at once, each on one thread. A convolution's data and
# weight gradients split one after the other pay two hand-offs each (the worker's wake and the caller's
# wait, ~15 µs each, plus the GIL between the parts' NumPy calls); side by side they pay one. Digits
# CNN step at two threads: the pair took 560 µs against 900 µs split one after the other. Whole training
# steps, pairing on / off in one process alternating (benchmarks/bench_pairs.py, 2 threads, load average
# ~8 on the 2-vCPU VM, OPENBLAS_CORETYPE not set): digits CNN 0.913 (40 rounds), MNIST net 0.984 (20).
# The smaller kernel of a pair must carry at least PAIR_MIN_COST (cost units: FLOPs for convolutions,
# window positions for pools), judged with symbolic dimensions at NOMINAL_DIM; at run time its array
# inputs must hold at least PAIR_MIN_BYTES.
PAIR_MIN_COST = 8e6
PAIR_MIN_BYTES = 64 << 10
NOMINAL_DIM = 32
# The larger kernel of a pair at most this many times the smaller's work: past it, splitting each kernel
# over the threads keeps both cores busier.
PAIR_RATIO = 2.0
# How far ahead (instructions) a partner is looked for.
PAIR_WINDOW = 32
