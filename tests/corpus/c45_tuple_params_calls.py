# Tuple-valued functions called from another function; results indexed.
@I.ir_module
class Module:
    @R.function
    def pair(x: R.Tensor((2,), dtype="float32")) -> R.Tuple(R.Tensor((2,), dtype="float32"), R.Tensor((2,), dtype="float32")):
        a = R.exp(x)
        b = R.log(x)
        return (a, b)

    @R.function
    def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        cls = Module
        t = cls.pair(x)
        s = R.add(t[0], t[1])
        return s
