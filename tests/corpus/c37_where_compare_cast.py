# Comparisons, where and astype.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32"), y: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float64"):
        m = R.greater(x, y)
        n = R.less_equal(x, y)
        w = R.where(m, x, y)
        d = R.astype(w, dtype="float64")
        return d
