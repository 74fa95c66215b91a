    # A script indented as a whole (as when pasted from a Python string) still parses.
# tvm-source: TVM's from_source rejects a script whose first line is indented
    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
            y = R.exp(x)
            return y
