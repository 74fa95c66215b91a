# Constants larger than 16 elements live in a metadata section before the module (TVM reads it too).
# tvm-text: TVM prints every non-scalar constant as metadata["ir.GenericConst"][i] and omits the metadata
# from tvm.script import ir as I
# from tvm.script import relax as R

metadata = {
    "relax.expr.Constant": [
        R.const([[-2.0, -1.75, -1.5, -1.25, -1.0, -0.75], [-0.5, -0.25, 0.0, 0.25, 0.5, 0.75], [1.0, 1.25, 1.5, 1.75, 2.0, 2.25], [2.5, 2.75, 3.0, 3.25, 3.5, 3.75]], "float32"),
        R.const([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19], "int32"),
    ],
}

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 6), dtype="float32")) -> R.Tensor((4, 6), dtype="float32"):
        w: R.Tensor((4, 6), dtype="float32") = metadata["relax.expr.Constant"][0]
        idx: R.Tensor((20,), dtype="int32") = metadata["relax.expr.Constant"][1]
        y = R.add(x, w)
        return y
