"""FLOPs of a training step and the fp32 GEMM rate at the shapes that step uses.

`step_flops` counts one forward + backward pass with `torch.utils.flop_counter`
(matrix products, attention; the optimiser's element-wise update is not counted)
and records the (m, k, n) of every matrix product it saw. `gemm_peak` times
`torch.mm` alone at the shapes carrying most of those FLOPs, in the same process
and with the same threads as the training it is compared with: training FLOP/s
divided by that peak is a fraction that travels between machines.
"""

from __future__ import annotations

import time
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

_MM = {torch.ops.aten.mm.default: (0, 1), torch.ops.aten.addmm.default: (1, 2),
       torch.ops.aten.bmm.default: (0, 1), torch.ops.aten.baddbmm.default: (1, 2)}


class GemmShapes(TorchDispatchMode):
    """Records 2 * m * k * n FLOPs per distinct (m, k, n) of mm/addmm/bmm/baddbmm."""

    def __init__(self):
        super().__init__()
        self.flops: Counter[tuple[int, int, int]] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in _MM:
            i, j = _MM[func]
            a, b = args[i].shape, args[j].shape
            batch = a[0] if len(a) == 3 else 1
            m, k, n = a[-2], a[-1], b[-1]
            self.flops[(m, k, n)] += 2 * batch * m * k * n
        return func(*args, **(kwargs or {}))


def step_flops(step) -> tuple[int, Counter]:
    """FLOPs counted by `FlopCounterMode` for `step()` (forward + backward), and the
    FLOPs per matrix-product shape."""
    shapes = GemmShapes()
    with FlopCounterMode(display=False) as counter, shapes:
        step()
    return counter.get_total_flops(), shapes.flops


def gemm_rate(m: int, k: int, n: int, windows: int = 5, seconds: float = 0.05,
              dtype: torch.dtype = torch.float32) -> float:
    """FLOP/s of `torch.mm` of (m, k) by (k, n) in `dtype` (fp32 unless told): the best of
    `windows` timing windows of at least `seconds` each (the best window is the one least
    disturbed by others)."""
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    torch.mm(a, b)  # warm-up
    best = 0.0
    for _ in range(windows):
        runs, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds or runs < 2:
            torch.mm(a, b)
            runs += 1
        best = max(best, 2 * m * k * n * runs / elapsed)
    return best


def gemm_peak(shapes: Counter, top: int = 6, dtype: torch.dtype = torch.float32
              ) -> tuple[float, tuple[int, int, int]]:
    """The best `gemm_rate` (in `dtype`) among the `top` shapes that carry the most FLOPs."""
    rates = {shape: gemm_rate(*shape, dtype=dtype) for shape, _ in shapes.most_common(top)}
    best = max(rates, key=rates.get)
    return rates[best], best
