# Return annotations are optional: the result's struct info is inferred.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 5), dtype="float32")):
        s = R.sum(x, axis=[1], keepdims=True)
        e = R.exp(s)
        return e
