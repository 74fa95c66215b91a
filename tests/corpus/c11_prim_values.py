# Prim values and R.Prim annotations.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), dtype="float32"), k: R.Prim("int64")) -> R.Tuple(R.Tensor((2,), dtype="float32"), R.Prim("int64"), R.Prim("int64")):
        one: R.Prim("int64") = R.prim_value(1)
        half = R.prim_value(T.float32(0.5))
        flag = R.prim_value(True)
        return (x, one, k)
