# Several blocks: dataflow, plain bindings, dataflow again.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 2), dtype="float32")) -> R.Tensor((2, 2), dtype="float32"):
        with R.dataflow():
            a = R.exp(x)
            R.output(a)
        b = R.add(a, x)
        with R.dataflow():
            c = R.tanh(b)
            d = R.multiply(c, a)
            R.output(d)
        e = R.subtract(d, x)
        return e
