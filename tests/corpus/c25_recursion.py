# A recursive function (its return annotation makes the call's type known), through an If.
@I.ir_module
class Module:
    @R.function
    def main(c: R.Tensor((), dtype="bool"), x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        cls = Module
        if c:
            r = cls.main(R.const(False), R.exp(x))
        else:
            r = x
        return r
