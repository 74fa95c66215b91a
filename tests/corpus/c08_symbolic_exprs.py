# Symbolic dim expressions: products from reshape/flatten, declared with T.int64() in the body.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), dtype="float32")) -> R.Tensor((n * 4,), dtype="float32"):
        n = T.int64()
        flat: R.Tensor((n * 4,), dtype="float32") = R.reshape(x, R.shape([n * 4]))
        return flat
