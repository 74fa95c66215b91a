# Real (uncommented) imports and the @tvm.script.ir_module spelling of the module decorator.
# tvm-source: TVM's from_source accepts no imports but `from __future__ import annotations`
from __future__ import annotations

import tvm
from tvm.script import ir as I
from tvm.script import relax as R


@tvm.script.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 2), dtype="float32")) -> R.Tensor((2, 2), dtype="float32"):
        y = R.matmul(x, x)
        return y
