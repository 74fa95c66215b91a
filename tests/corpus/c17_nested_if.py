# Nested ifs; a branch that returns a value bound outside it; TVM-style then/else names.
@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((), dtype="bool"), b: R.Tensor((), dtype="bool"), x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        if a:
            if b:
                r_then: R.Tensor((2,), dtype="float32") = R.exp(x)
                r: R.Tensor((2,), dtype="float32") = r_then
            else:
                r: R.Tensor((2,), dtype="float32") = x
            y = R.add(r, x)
        else:
            y = R.sin(x)
        return y
