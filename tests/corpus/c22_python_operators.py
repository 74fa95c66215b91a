# Python operators on values map to ops: + - * / and unary minus, with precedence.
@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((3,), dtype="float32"), b: R.Tensor((3,), dtype="float32"), c: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
        x = a + b * c
        y = (a - b) / c
        z = -x + y
        w = a - b - c
        return z * w
