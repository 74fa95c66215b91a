# Inline constants: scalars with and without dtype, bools, negative values, small nested lists.
# tvm-text: TVM prints every non-scalar constant as metadata["ir.GenericConst"][i] and omits the metadata
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 2), dtype="float32")) -> R.Tensor((2, 2), dtype="float32"):
        c1 = R.const(3, "float32")
        c2 = R.const(1)
        c3 = R.const(1.5)
        c4 = R.const([[1, 2], [3, 4]], "float32")
        c5 = R.const(True)
        c6 = R.const(-2.25, dtype="float64")
        c7 = R.const([-1, 0, 1], "int64")
        c8 = R.const([0.1, 1e-07, 3.25e6, -0.0], "float32")
        y = R.add(R.multiply(x, c4), c1)
        return y
