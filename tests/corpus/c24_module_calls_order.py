# Module.f(x) spelling, a call before the callee's definition, and a symbolic callee signature.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((5, 2), dtype="float32")) -> R.Tensor((5, 2), dtype="float32"):
        y = Module.helper(x)
        return y

    @R.function
    def helper(x: R.Tensor(("n", 2), dtype="float32")) -> R.Tensor(("n", 2), dtype="float32"):
        z = R.nn.relu(x)
        return z
