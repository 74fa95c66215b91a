"""max_pool2d_backward_grad (second-order max pooling) vs PyTorch's max_pool2d_with_indices + gather.

Run by hand: python benchmarks/bench_pool_select.py. Prints the median of per-pair time ratios (ours / torch).
"""

from __future__ import annotations

import time

import numpy as np

from retrograd.ops.registry import get

SHAPES = [
    ((32, 64, 56, 56), dict(pool_size=3, strides=2, padding=1)),
    ((32, 64, 56, 56), dict(pool_size=2, strides=2)),
    ((8, 32, 28, 28), dict(pool_size=3, strides=1, padding=1)),
]


def main(pairs: int = 9) -> None:
    import torch

    op = get("relax.grad.max_pool2d_backward_grad")
    rng = np.random.default_rng(0)
    print(f"{'shape':>18} {'window':>16} {'ours ms':>8} {'torch ms':>9} {'ratio':>6}")
    for shape, attrs in SHAPES:
        a = op.normalize_attrs(attrs)
        x = rng.normal(size=shape).astype("float32")
        g = rng.normal(size=shape).astype("float32")
        tx, tg = torch.from_numpy(x), torch.from_numpy(g)
        k, s, p = a["pool_size"][0], a["strides"][0], a["padding"][0]

        def ours():
            return op.kernel(g, x, **a)

        def theirs():
            _, idx = torch.nn.functional.max_pool2d(tx, k, s, p, return_indices=True)
            return tg.flatten(2).gather(2, idx.flatten(2)).view(idx.shape)

        np.testing.assert_array_equal(ours(), theirs().numpy())
        t_ours, t_theirs = [], []
        for _ in range(pairs):
            t0 = time.perf_counter()
            ours()
            t_ours.append(time.perf_counter() - t0)
            time.sleep(0.2)  # let the other library's threads go quiet
            t0 = time.perf_counter()
            theirs()
            t_theirs.append(time.perf_counter() - t0)
            time.sleep(0.2)
        ratio = np.median(np.array(t_ours) / np.array(t_theirs))
        window = f"k{k} s{s} p{p}"
        print(f"{'x'.join(map(str, shape)):>18} {window:>16} {np.median(t_ours) * 1e3:8.1f} {np.median(t_theirs) * 1e3:9.1f} {ratio:6.2f}")


if __name__ == "__main__":
    main()
