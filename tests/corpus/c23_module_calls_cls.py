# Calls to module functions through `cls = Module`; a private helper.
@I.ir_module
class Module:
    @R.function(private=True)
    def square(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
        y = R.multiply(x, x)
        return y

    @R.function
    def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
        cls = Module
        s = cls.square(x)
        t = cls.square(s)
        return t
