# A single @R.function script: a module with that one function.
# from tvm.script import relax as R

@R.function
def main(x: R.Tensor((3, 3), "float32"), y: R.Tensor((3, 3), "float32")) -> R.Tensor((3, 3), "float32"):
    z = R.multiply(x, y)
    return z
