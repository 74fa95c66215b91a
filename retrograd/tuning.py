"""The parallelism thresholds of the kernels and the runtime, in one place, with how each was found.

Ops say what they allow (`register(..., threaded=True)`: the kernel splits its batch over the kernel
threads; `split_kernel=`: a form that splits a large product; `inplace=`: an elementwise form the runtime
can run in parts); the runtime (runtime/threads.py, split.py, pairs.py) decides from these figures whether
a call holds BLAS, runs split, in parts, or beside another kernel, and the thread pool
(ops/kernels/parallel.py) how many parts a kernel's batch is worth. All were measured on the project's
2-vCPU VM (float32, OpenBLAS, OPENBLAS_CORETYPE set as benchmarks/RESULTS.md records) with
benchmarks/bench_training.py, bench_step.py, bench_kernels.py and bench_pairs.py; another machine may want
others. This module imports nothing, so that both the kernels and the runtime read it.
"""

from __future__ import annotations

# -- the thread pool (ops/kernels/parallel.py) ---------------------------------------------------------

# Handing a part to a worker costs ~10-20 µs (two lock hand-offs): a part must carry several times that.
MIN_PART_NS = 60_000
# A worker handed a part starts WAKE_NS later than the caller's own part: ~30 µs when it has just run
# one, ~120 µs when it has slept for a millisecond (its idle vCPU halts on this VM). The caller's part is
# made larger by that much, and a worker's part must still be worth MIN_PART_NS. The digits CNN's
# 2-thread step went from 1.80 to 1.74 ms with it, in one process alternating the two settings.
WAKE_NS = 100_000
# Rough speeds that turn a kernel's size into nanoseconds of work (single core, float32).
GEMM_FLOPS_PER_NS = 60.0
COPY_BYTES_PER_NS = 4.0
# A part of a split matrix product must be larger than a part of a convolution: a 64x256 @ 256x256
# product (85 µs) took 123 µs split in two, the kernel threads' hand-offs costing more than the half
# they save.
MATMUL_MIN_PART_NS = 300_000

# -- the runtime ---------------------------------------------------------------------------------------

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
