# fmt: off
# Comments anywhere, blank lines, trailing comments, calls spanning lines, backslash continuation.
# from tvm.script import ir as I
# from tvm.script import relax as R


@I.ir_module
class Module:  # the module

    # the entry point
    @R.function
    def main(
        x: R.Tensor((2, 3), dtype="float32"),  # input
        w: R.Tensor((3, 3), dtype="float32"),
    ) -> R.Tensor((2, 3), dtype="float32"):
        # a comment before the block
        with R.dataflow():
            y = R.matmul(
                x,
                w,
            )  # trailing comment

            z = R.add(y, \
                      x)
            R.output(z)
        return z
