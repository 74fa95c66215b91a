# A dataflow block with several outputs; dataflow vars used only inside.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tuple(R.Tensor((4,), dtype="float32"), R.Tensor((4,), dtype="float32")):
        with R.dataflow():
            a = R.exp(x)
            b = R.log(a)
            c = R.sin(b)
            d = R.cos(b)
            R.output(c, d)
        return (c, d)
