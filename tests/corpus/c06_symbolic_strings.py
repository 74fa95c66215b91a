# Symbolic dims written as strings in the signature, bare in the body and the result.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), dtype="float32"), y: R.Tensor(("n", 3), dtype="float32")) -> R.Tensor((n, 3), dtype="float32"):
        with R.dataflow():
            z: R.Tensor((n, 3), dtype="float32") = R.add(x, y)
            w = R.nn.relu(z)
            R.output(w)
        return w
