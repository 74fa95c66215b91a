# Module attributes and function attributes.
@I.ir_module
class Module:
    I.module_attrs({"target": "llvm", "version": 2})

    @R.function
    def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        R.func_attr({"num_input": 1, "tag": "entry"})
        y = R.exp(x)
        return y
