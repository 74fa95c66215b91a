# TVM 0.27's own printing of symbolic dims: a TypeVar declaration before the module, bare names.
# from typing import TypeVar
# from tvm.script import ir as I
# from tvm.script import relax as R

n = TypeVar("n")
m = TypeVar("m")
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n, m), dtype="float32"), w: R.Tensor((m, 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        lv: R.Tensor((n, 4), dtype="float32") = R.matmul(x, w, out_dtype=None)
        return lv
