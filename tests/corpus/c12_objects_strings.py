# R.Object annotations and string immediates.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), dtype="float32"), o: R.Object) -> R.Tuple(R.Object, R.Object):
        s: R.Object = R.str("hello, world")
        q = R.str('single "quoted"')
        return (s, o)
