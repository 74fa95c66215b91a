# Tuple annotations, nested, as parameters and results; indexing into nested tuples.
@I.ir_module
class Module:
    @R.function
    def main(t: R.Tuple(R.Tensor((2,), dtype="float32"), R.Tuple(R.Tensor((2,), dtype="float32"), R.Tensor((), dtype="int32")))) -> R.Tuple(R.Tensor((2,), dtype="float32"), R.Tensor((), dtype="int32")):
        a = t[0]
        inner = t[1]
        b = inner[0]
        k = t[1][1]
        s = R.add(a, b)
        return (s, k)
