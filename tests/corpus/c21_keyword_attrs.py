# Keyword attributes: lists, booleans, None, strings, negative numbers; omitted ones take defaults.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3, 4), dtype="float32")) -> R.Tuple(R.Tensor((2, 1, 4), dtype="float32"), R.Tensor((), dtype="float32"), R.Tensor((2, 3, 4), dtype="float32"), R.Tensor((2, 4), dtype="float32")):
        a = R.sum(x, axis=[1], keepdims=True)
        b = R.mean(x, axis=None, keepdims=False)
        c = R.nn.softmax(x, axis=-1)
        d = R.max(x, [-2])
        return (a, b, c, d)
