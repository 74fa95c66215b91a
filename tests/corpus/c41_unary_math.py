# Unary math and activations.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 2), dtype="float64")):
        a = R.sigmoid(x)
        b = R.nn.silu(a)
        c = R.nn.gelu(b)
        d = R.tanh(c)
        e = R.power(d, R.const(2.0, "float64"))
        f = R.maximum(e, R.minimum(a, b))
        return f
