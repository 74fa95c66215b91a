# A name bound again shadows the earlier binding; the printer makes names unique.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        y = R.exp(x)
        y = R.add(y, x)
        with R.dataflow():
            x = R.sin(y)
            y = R.cos(x)
            R.output(y)
        return y
