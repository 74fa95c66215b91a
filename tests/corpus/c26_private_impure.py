# Decorator options: private=True, pure=False.
@I.ir_module
class Module:
    @R.function(private=True)
    def helper(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        return x

    @R.function(pure=False)
    def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        y = R.exp(x)
        return y
